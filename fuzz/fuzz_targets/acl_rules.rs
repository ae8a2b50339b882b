//! The ACL rule parser on arbitrary rules: ACL SETUSER's arguments (several
//! calls, on a few users) and an ACL file's lines (docs/fuzzing.md).
//!
//! Checks: no panic; a refused SETUSER changes nothing; every user reads back
//! as rules (ACL LIST's line) that, applied to a new user, read back the same;
//! a loaded file's users save and load again to the same lines.

#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use ruvio_server::acl::{describe, file, Acl};
use ruvio_server::cmd::registry::registry;

#[derive(Arbitrary, Debug)]
struct Input {
    /// SETUSER calls: which of three users, and the rules.
    calls: Vec<(u8, Vec<Vec<u8>>)>,
    /// `acl-pubsub-default allchannels`.
    all_channels: bool,
    /// An ACL file's bytes.
    file: Vec<u8>,
}

const NAMES: [&[u8]; 3] = [b"default", b"u1", b"u2"];

/// No pattern or first-arg of the user holds a parenthesis or whitespace.
fn plain(user: &ruvio_server::acl::rules::User) -> bool {
    let clean = |b: &[u8]| {
        !b.iter()
            .any(|&c| c == b'(' || c == b')' || c.is_ascii_whitespace())
    };
    user.selectors.iter().all(|s| {
        s.keys.iter().all(|k| clean(&k.pattern))
            && s.channels.iter().all(|c| clean(c))
            && s.firstargs.iter().flat_map(|(_, a)| a).all(|a| clean(a))
    })
}

/// Every user as its ACL LIST line.
fn lines(acl: &Acl) -> Vec<Vec<u8>> {
    acl.users()
        .values()
        .map(|u| describe::user_line(acl.catalog(), u))
        .collect()
}

fuzz_target!(|input: Input| {
    let acl = Acl::new(&registry().acl);
    for (who, rules) in input.calls.iter().take(16) {
        let name = NAMES[usize::from(*who) % NAMES.len()];
        let before = lines(&acl);
        let rules: Vec<&[u8]> = rules.iter().take(16).map(Vec::as_slice).collect();
        if acl.set_user(name, &rules, input.all_channels).is_err() {
            assert_eq!(before, lines(&acl), "a refused SETUSER changed the users");
        }
    }
    // Each user's rules, applied to a new user, read back the same (as Redis,
    // a pattern or first-arg holding a parenthesis or a space cannot).
    for user in acl.users().values().filter(|u| plain(u)) {
        let rules = describe::user_rules(acl.catalog(), user);
        let again = Acl::new(&registry().acl);
        let split: Vec<&[u8]> = rules.split(|&b| b == b' ').collect();
        again
            .set_user(b"copy", &split, input.all_channels)
            .unwrap_or_else(|e| {
                panic!(
                    "{:?} does not apply again: {e:?}",
                    String::from_utf8_lossy(&rules)
                )
            });
        let back = describe::user_rules(again.catalog(), &again.user(b"copy").unwrap());
        assert_eq!(rules, back, "rules read back differently");
    }
    // An ACL file: loaded or refused; a loaded one saves to lines that load
    // again to the same users.
    let dir = std::env::temp_dir().join(format!("ruvio-fuzz-acl-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    let path = dir.join("users.acl");
    let path = path.to_str().unwrap();
    std::fs::write(path, &input.file).unwrap();
    if let Ok(users) = file::load(&acl, path, input.all_channels) {
        acl.replace_all(users);
        let saved = lines(&acl);
        file::save(&acl, path).unwrap();
        let users = file::load(&acl, path, input.all_channels).expect("a saved file loads");
        acl.replace_all(users);
        assert_eq!(saved, lines(&acl), "saved and loaded differently");
    }
});
