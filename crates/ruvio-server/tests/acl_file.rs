//! The ACL file (`aclfile`) and the config file's `user` lines: the same file
//! loaded by redis-server 7.0 and Ruvio gives the same ACL LIST; ACL SAVE writes
//! lines that load back to the same users (SAVE then LOAD, and a restart);
//! ACL LOAD of a broken file answers Redis's error and changes nothing; without
//! `aclfile`, CONFIG REWRITE writes the users as the config file's `user` lines.
//!
//! ACL LIST replies are compared with each line's single-command rules sorted
//! (Redis writes those in its hash table's random order; see
//! differential_acl.rs); the path in an error is each server's own file.

mod common;

use common::*;
use std::path::Path;

/// Users with every kind of rule.
const USERS: &str = "user default on nopass ~* &* +@all
user alice on #2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881 ~app:* %R~ro:* %W~wo:* resetchannels &news.* -@all +@read +@geo -geoadd +config|get
user bob off nopass sanitize-payload ~* &* +@all -flushall (~tmp:* resetchannels -@all +get +set) (%R~logs:* &log:* -@all +@read)
user carol on #f64551fcd6f07823cb87971cfb91446425da18286b3ab1ef935e0cbd7a69f68a resetchannels -@all +select|0 +select|1 +ping
";

/// Each line with the single-command rules of each selector sorted (the
/// bulk strings' lengths dropped with the RESP framing).
fn normalized(list: &[u8]) -> Vec<String> {
    String::from_utf8_lossy(list)
        .split(['\r', '\n'])
        .filter(|l| l.starts_with("user "))
        .map(|line| {
            line.split(" (")
                .map(|part| {
                    let part = part.trim_end_matches(')');
                    let single = |w: &&str| {
                        (w.starts_with('+') || w.starts_with('-')) && !w[1..].starts_with('@')
                    };
                    let words: Vec<&str> = part.split(' ').collect();
                    let mut singles: Vec<&str> = words.iter().copied().filter(single).collect();
                    singles.sort_unstable();
                    let kept: Vec<&str> = words.iter().copied().filter(|w| !single(w)).collect();
                    format!("{} | {}", kept.join(" "), singles.join(" "))
                })
                .collect::<Vec<_>>()
                .join(" || ")
        })
        .collect()
}

fn ruvio_with_aclfile(dir: &Path, aclfile: &Path) -> Server {
    let config = dir.join("ruvio.toml");
    std::fs::write(
        &config,
        format!("aclfile = {:?}\n", aclfile.display().to_string()),
    )
    .expect("write config");
    Server::ruvio_with(
        PortMode::Forward,
        2,
        &["--config", config.to_str().unwrap()],
    )
}

#[test]
fn the_acl_file_loads_saves_and_survives_a_restart_as_redis() {
    if require_redis_server("the_acl_file_loads_saves_and_survives_a_restart_as_redis").is_none() {
        return;
    }
    let dir = unique_dir("aclfile");
    let (redis_file, ruvio_file) = (dir.join("redis.acl"), dir.join("ruvio.acl"));
    std::fs::write(&redis_file, USERS).unwrap();
    std::fs::write(&ruvio_file, USERS).unwrap();
    let redis = Server::redis_with(&["--aclfile", redis_file.to_str().unwrap()]);
    let mut ruvio = ruvio_with_aclfile(&dir, &ruvio_file);
    let (mut r, mut t) = (redis.raw(), ruvio.raw());
    let list = |c: &mut RawConn| normalized(&c.cmd(&["ACL", "LIST"]));
    assert_eq!(list(&mut r), list(&mut t), "loaded at start");

    // Changes, SAVE, and the files both wrote.
    for conn in [&mut r, &mut t] {
        assert_eq!(
            conn.cmd(&[
                "ACL",
                "SETUSER",
                "dave",
                "on",
                ">pw",
                "%RW~d:*",
                "+@list",
                "-lpush",
                "(+get ~x)"
            ]),
            b"+OK\r\n"
        );
        assert_eq!(
            conn.cmd(&["ACL", "SETUSER", "alice", "&more", "-config|get"]),
            b"+OK\r\n"
        );
        assert_eq!(conn.cmd(&["ACL", "DELUSER", "carol"]), b":1\r\n");
        assert_eq!(conn.cmd(&["ACL", "SAVE"]), b"+OK\r\n");
    }
    let saved = list(&mut t);
    assert_eq!(list(&mut r), saved, "after the changes");
    let file = |p: &Path| normalized(&std::fs::read(p).unwrap());
    assert_eq!(file(&redis_file), file(&ruvio_file), "the saved files");

    // LOAD after more changes brings the saved users back.
    for conn in [&mut r, &mut t] {
        assert_eq!(conn.cmd(&["ACL", "SETUSER", "eve", "on"]), b"+OK\r\n");
        assert_eq!(conn.cmd(&["ACL", "LOAD"]), b"+OK\r\n");
    }
    assert_eq!(list(&mut t), saved, "ACL LOAD");
    assert_eq!(list(&mut r), saved, "ACL LOAD (redis)");

    // A broken file: Redis's error, nothing changes.
    let broken = "user ok on\nnotuser x\nuser bad +nosuch ~a ~b\nuser ok off\n";
    std::fs::write(&redis_file, broken).unwrap();
    std::fs::write(&ruvio_file, broken).unwrap();
    let (re, te) = (r.cmd(&["ACL", "LOAD"]), t.cmd(&["ACL", "LOAD"]));
    let re = String::from_utf8_lossy(&re).replace(redis_file.to_str().unwrap(), "FILE");
    let te = String::from_utf8_lossy(&te).replace(ruvio_file.to_str().unwrap(), "FILE");
    assert_eq!(re, te, "ACL LOAD of a broken file");
    assert_eq!(list(&mut t), saved, "after the failed LOAD");

    // A restart reads the file again.
    assert_eq!(t.cmd(&["ACL", "SETUSER", "frank", "on"]), b"+OK\r\n");
    assert_eq!(t.cmd(&["ACL", "SAVE"]), b"+OK\r\n");
    let before = list(&mut t);
    drop(t);
    drop(ruvio);
    ruvio = ruvio_with_aclfile(&dir, &ruvio_file);
    let mut t = ruvio.raw();
    assert_eq!(list(&mut t), before, "after a restart");
    assert_eq!(t.cmd(&["AUTH", "dave", "pw"]), b"+OK\r\n");
    assert_eq!(t.cmd(&["LPOP", "d:1"]), b"$-1\r\n");
    assert_eq!(
        t.cmd(&["LPUSH", "d:1", "x"]),
        b"-NOPERM this user has no permissions to run the 'lpush' command\r\n"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn config_file_user_lines_define_users() {
    let dir = unique_dir("acl-users");
    let config = dir.join("ruvio.toml");
    std::fs::write(
        &config,
        "user = [\"default on nopass ~* &* +@all -flushall\", \"app on >apppw ~app:* +get +set\"]\n",
    )
    .unwrap();
    let server = Server::ruvio_with(
        PortMode::Forward,
        1,
        &["--config", config.to_str().unwrap()],
    );
    let mut c = server.raw();
    assert_eq!(
        c.cmd(&["FLUSHALL"]),
        b"-NOPERM this user has no permissions to run the 'flushall' command\r\n"
    );
    assert_eq!(
        c.cmd(&["AUTH", "app", "nope"]),
        b"-WRONGPASS invalid username-password pair or user is disabled.\r\n"
    );
    assert_eq!(c.cmd(&["AUTH", "app", "apppw"]), b"+OK\r\n");
    assert_eq!(c.cmd(&["SET", "app:1", "v"]), b"+OK\r\n");
    assert_eq!(
        c.cmd(&["SET", "other", "v"]),
        b"-NOPERM this user has no permissions to access one of the keys used as arguments\r\n"
    );
    assert_eq!(c.cmd(&["AUTH", "default", "any"]), b"+OK\r\n");
    let list = c.cmd(&["ACL", "LIST"]);
    assert!(contains(&list, b"user app on #"), "{}", show(&list));
    assert!(
        contains(&list, b"~app:* resetchannels -@all"),
        "{}",
        show(&list)
    );
    assert!(
        contains(
            &list,
            b"user default on nopass sanitize-payload ~* &* +@all -flushall"
        ),
        "{}",
        show(&list)
    );
    // CONFIG REWRITE writes the users back as `user` lines; a restart reads them.
    let rules = ["on", ">lpw", "%R~l:*", "+@read", "(~m:* +set)"];
    let mut args = vec!["ACL", "SETUSER", "later"];
    args.extend(rules);
    assert_eq!(c.cmd(&args), b"+OK\r\n");
    assert_eq!(c.cmd(&["CONFIG", "REWRITE"]), b"+OK\r\n");
    let before = normalized(&c.cmd(&["ACL", "LIST"]));
    drop(c);
    drop(server);
    let server = Server::ruvio_with(
        PortMode::Forward,
        1,
        &["--config", config.to_str().unwrap()],
    );
    let mut c = server.raw();
    assert_eq!(
        normalized(&c.cmd(&["ACL", "LIST"])),
        before,
        "after CONFIG REWRITE and a restart"
    );
    assert_eq!(c.cmd(&["AUTH", "later", "lpw"]), b"+OK\r\n");
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}
