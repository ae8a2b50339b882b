//! Users written back as rules: ACL LIST's lines, ACL GETUSER's fields and the
//! ACL file, in Redis's form.
//!
//! A selector keeps only its compiled bitmap, so its command rules are rebuilt
//! from the bits as Redis's `ACLDescribeSelectorCommandRules` does: start from
//! `+@all` or `-@all`, take the categories that fit best one at a time, then name
//! the single commands that still differ. The categories come out as Redis's;
//! the single commands in the table's order (Redis's follow its hash table's
//! random seed, so no order is stable there either).

use super::catalog::{Catalog, CATEGORIES};
use super::rules::{KeyPattern, Sanitize, Selector, User, KEY_ALL, KEY_READ};

/// The command rules of a selector (`-@all +@read -get ...`).
pub fn command_rules(catalog: &Catalog, selector: &Selector) -> Vec<u8> {
    let additive = !selector.future;
    let mut rules: Vec<u8> = Vec::new();
    let mut fake = Selector::new(catalog, false);
    let start: &[u8] = if additive { b"-@all" } else { b"+@all" };
    fake.apply(catalog, start).expect("valid");
    rules.extend_from_slice(start);
    rules.push(b' ');
    // The categories left to explain: applied ones are turned the other way here.
    let mut temp = selector.clone();
    let mut applied = [false; CATEGORIES.len()];
    loop {
        let mut best = None;
        let (mut min_diff, mut max_same) = (u64::MAX, 0);
        for (j, _) in CATEGORIES.iter().enumerate().filter(|(j, _)| !applied[*j]) {
            let (on, off) = count_category(catalog, &temp, 1 << j);
            let (diff, same) = if additive { (off, on) } else { (on, off) };
            if same > diff && (diff < min_diff || (diff == min_diff && same > max_same)) {
                best = Some(j);
                min_diff = diff;
                max_same = same;
            }
        }
        let Some(best) = best else { break };
        fake.change_category(catalog, 1 << best, additive);
        temp.change_category(catalog, 1 << best, !additive);
        rules.extend_from_slice(if additive { b"+@" } else { b"-@" });
        rules.extend_from_slice(CATEGORIES[best].as_bytes());
        rules.push(b' ');
        applied[best] = true;
    }
    for &top in catalog.top() {
        single_command(catalog, selector, &mut fake, top, &mut rules);
        for &sub in &catalog.row(top).subs {
            single_command(catalog, selector, &mut fake, sub, &mut rules);
        }
    }
    rules.pop();
    rules
}

/// The rule making `fake` agree with `selector` on `bit`, and its first-args.
fn single_command(
    catalog: &Catalog,
    selector: &Selector,
    fake: &mut Selector,
    bit: usize,
    rules: &mut Vec<u8>,
) {
    let user_bit = selector.bit(bit);
    let name = catalog.row(bit).name.as_bytes();
    if user_bit != fake.bit(bit) {
        rules.push(if user_bit { b'+' } else { b'-' });
        rules.extend_from_slice(name);
        rules.push(b' ');
        fake.change(catalog, bit, user_bit);
    }
    if !user_bit {
        let firstargs = selector.firstargs.iter().filter(|(b, _)| *b == bit);
        for arg in firstargs.flat_map(|(_, args)| args) {
            rules.push(b'+');
            rules.extend_from_slice(name);
            rules.push(b'|');
            rules.extend_from_slice(arg);
            rules.push(b' ');
        }
    }
}

/// Rows of `category` the selector allows and denies.
fn count_category(catalog: &Catalog, selector: &Selector, category: u32) -> (u64, u64) {
    let (mut on, mut off) = (0, 0);
    for bit in catalog.walk() {
        if catalog.row(bit).categories & category != 0 {
            if selector.bit(bit) {
                on += 1;
            } else {
                off += 1;
            }
        }
    }
    (on, off)
}

/// `~pat`, `%R~pat` or `%W~pat`.
pub fn key_pattern(k: &KeyPattern) -> Vec<u8> {
    let mut out = match k.perms {
        KEY_ALL => b"~".to_vec(),
        KEY_READ => b"%R~".to_vec(),
        _ => b"%W~".to_vec(),
    };
    out.extend_from_slice(&k.pattern);
    out
}

/// GETUSER's `keys` field.
pub fn keys_field(s: &Selector) -> Vec<u8> {
    if s.all_keys {
        return b"~*".to_vec();
    }
    join(s.keys.iter().map(key_pattern))
}

/// GETUSER's `channels` field.
pub fn channels_field(s: &Selector) -> Vec<u8> {
    if s.all_channels {
        return b"&*".to_vec();
    }
    join(s.channels.iter().map(|c| [b"&".as_slice(), c].concat()))
}

fn join(parts: impl Iterator<Item = Vec<u8>>) -> Vec<u8> {
    parts.collect::<Vec<_>>().join(&b' ')
}

/// A selector as rules (`ACLDescribeSelector`).
fn selector_rules(catalog: &Catalog, s: &Selector) -> Vec<u8> {
    let mut out = Vec::new();
    if s.all_keys {
        out.extend_from_slice(b"~* ");
    } else {
        for k in &s.keys {
            out.extend_from_slice(&key_pattern(k));
            out.push(b' ');
        }
    }
    if s.all_channels {
        out.extend_from_slice(b"&* ");
    } else {
        out.extend_from_slice(b"resetchannels ");
        for c in &s.channels {
            out.push(b'&');
            out.extend_from_slice(c);
            out.push(b' ');
        }
    }
    out.extend_from_slice(&command_rules(catalog, s));
    out
}

/// The flags GETUSER lists, in Redis's order.
pub fn flags(user: &User) -> Vec<&'static str> {
    let mut flags = vec![if user.enabled { "on" } else { "off" }];
    if user.nopass {
        flags.push("nopass");
    }
    match user.sanitize {
        Some(Sanitize::Skip) => flags.push("skip-sanitize-payload"),
        Some(Sanitize::Sanitize) => flags.push("sanitize-payload"),
        None => {}
    }
    flags
}

/// A user as rules, ACL LIST's line after `user <name> ` (`ACLDescribeUser`).
pub fn user_rules(catalog: &Catalog, user: &User) -> Vec<u8> {
    let mut out = Vec::new();
    for flag in flags(user) {
        out.extend_from_slice(flag.as_bytes());
        out.push(b' ');
    }
    for p in &user.passwords {
        out.push(b'#');
        out.extend_from_slice(p.as_bytes());
        out.push(b' ');
    }
    out.extend_from_slice(&selector_rules(catalog, user.root()));
    for s in &user.selectors[1..] {
        out.extend_from_slice(b" (");
        out.extend_from_slice(&selector_rules(catalog, s));
        out.push(b')');
    }
    out
}

/// `user <name> <rules>`: an ACL LIST line and an ACL file line.
pub fn user_line(catalog: &Catalog, user: &User) -> Vec<u8> {
    let mut line = b"user ".to_vec();
    line.extend_from_slice(&user.name);
    line.push(b' ');
    line.extend_from_slice(&user_rules(catalog, user));
    line
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::acl::catalog::sample;

    fn rules_after(ops: &[&str]) -> String {
        let c = sample();
        let mut u = User::new(&c, b"u", 1, false);
        for op in ops {
            u.apply(&c, op.as_bytes(), false).unwrap();
        }
        String::from_utf8(command_rules(&c, u.root())).unwrap()
    }

    #[test]
    fn rules_rebuild_from_the_bitmap() {
        assert_eq!(rules_after(&[]), "-@all");
        assert_eq!(rules_after(&["+@all"]), "+@all");
        assert_eq!(rules_after(&["+@all", "-select"]), "+@all -select");
        // The one read command is the whole category: the category fits best.
        assert_eq!(rules_after(&["+@all", "-get"]), "+@all -@read");
        assert_eq!(rules_after(&["+get", "-get"]), "-@all");
        assert_eq!(rules_after(&["+@read"]), "-@all +@read");
        assert_eq!(
            rules_after(&["+select", "+config|get"]),
            "-@all +config|get +select"
        );
        assert_eq!(
            rules_after(&["+select|0", "+select|1"]),
            "-@all +select|0 +select|1"
        );
    }

    #[test]
    fn the_default_user_reads_as_redis_writes_it() {
        let c = sample();
        let u = User::default_user(&c, 1);
        assert_eq!(user_line(&c, &u), b"user default on nopass ~* &* +@all");
    }
}
