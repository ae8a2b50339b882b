//! Differential test of ACL against a real redis-server 7.0: the same sequence of
//! ACL commands, AUTH / HELLO AUTH and refused commands goes to both, in RESP2
//! and RESP3, against Ruvio with 1 and 2 shards in forward mode.
//!
//! # Comparison rules (the whole allowlist)
//!
//! 1. Replies are compared byte for byte, but for:
//! 2. the command rules inside GETUSER and LIST replies when they name more than
//!    one single command: Redis writes those in its command table's hash order,
//!    which its random hash seed changes from run to run, so both replies are
//!    compared with the single-command rules (`+get`, `-del`, not `+@cat`)
//!    sorted; the `+@all`/`-@all` start and the category rules keep their order;
//! 3. ACL CAT <category>: compared as sets (Redis's hash order again), and
//!    Ruvio's may also list commands redis-server 7.0 does not have, and lack
//!    those Ruvio does not have;
//! 4. ACL LOG: the entries' fields and their `count`, `reason`, `context`,
//!    `object` and `username` values; `age-seconds` must be a number and
//!    `client-info` name the same fields as Redis's line (Ruvio adds Redis
//!    7.2's `lib-name`, `lib-ver`, `io-thread` and `watch`). Ruvio answers Redis
//!    7.2's shape: after 7.0's seven fields come `entry-id`,
//!    `timestamp-created` and `timestamp-last-updated`, which 7.0 lacks; they
//!    are checked on their own (ids distinct, each entry updated no earlier than
//!    the next one down the list (an updated entry moves to the head, keeping
//!    its id), timestamps in milliseconds of this run, created no later than
//!    updated, updated agreeing with `age-seconds`);
//! 5. ACL GENPASS: the length only; HELLO: only that the next ACL WHOAMI agrees;
//!    ACL HELP's last line says `Print this help.` as Redis 7.2+ (7.0: `Prints`),
//!    as every container's HELP in Ruvio.
//!
//! Scripts run where their keys are (with 2 shards: forwarded, or on borrowed
//! keys), and their calls are checked as the caller's user there too.

mod common;

use common::*;

/// The two servers and a connection of one role to each.
struct Pair {
    redis: RawConn,
    ruvio: RawConn,
    label: String,
}

impl Pair {
    fn connect(redis: &Server, ruvio: &Server, label: &str, resp3: bool) -> Pair {
        let mut pair = Pair {
            redis: redis.raw(),
            ruvio: ruvio.raw(),
            label: label.to_string(),
        };
        if resp3 {
            pair.both(&["HELLO", "3"]);
        }
        pair
    }

    fn both(&mut self, args: &[&str]) -> (Vec<u8>, Vec<u8>) {
        (self.redis.cmd(args), self.ruvio.cmd(args))
    }

    /// Byte for byte (rule 1).
    fn same(&mut self, args: &[&str]) -> Vec<u8> {
        let (r, t) = self.both(args);
        assert_eq!(
            show(&r),
            show(&t),
            "{}: {}\n  redis: {}\n  ruvio: {}",
            self.label,
            args.join(" "),
            show(&r),
            show(&t)
        );
        t
    }

    /// Rule 2.
    fn same_rules(&mut self, args: &[&str]) {
        let (r, t) = self.both(args);
        assert_eq!(
            sorted_single_rules(&r),
            sorted_single_rules(&t),
            "{}: {}\n  redis: {}\n  ruvio: {}",
            self.label,
            args.join(" "),
            show(&r),
            show(&t)
        );
    }
}

/// Each RESP line with its single-command rules sorted (rule 2).
fn sorted_single_rules(reply: &[u8]) -> Vec<String> {
    String::from_utf8_lossy(reply)
        .split("\r\n")
        .map(|line| {
            let words: Vec<&str> = line.split(' ').collect();
            let single =
                |w: &&str| (w.starts_with('+') || w.starts_with('-')) && !w[1..].starts_with('@');
            let mut singles: Vec<&str> = words.iter().copied().filter(single).collect();
            singles.sort_unstable();
            let kept: Vec<&str> = words.iter().copied().filter(|w| !single(w)).collect();
            format!("{} | {}", kept.join(" "), singles.join(" "))
        })
        .collect()
}

/// COMMAND INFO's answer for a command the server does not have.
fn unknown(info: &[u8]) -> bool {
    [&b"*1\r\n*-1"[..], b"*1\r\n$-1", b"*1\r\n_"]
        .iter()
        .any(|nil| info.starts_with(nil))
}

/// The bulk strings of a flat array reply, sorted.
fn sorted_bulks(reply: &[u8]) -> Vec<String> {
    let mut items: Vec<String> = String::from_utf8_lossy(reply)
        .split("\r\n")
        .skip(1)
        .collect::<Vec<_>>()
        .chunks(2)
        .filter_map(|c| c.get(1).map(|s| s.to_string()))
        .collect();
    items.sort();
    items
}

fn sha256_hex(text: &str) -> String {
    let out = std::process::Command::new("sha256sum")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write;
            child
                .stdin
                .take()
                .expect("stdin")
                .write_all(text.as_bytes())?;
            child.wait_with_output()
        })
        .expect("sha256sum");
    String::from_utf8_lossy(&out.stdout)[..64].to_string()
}

fn run(shards: usize, resp3: bool) {
    let label = format!("{shards} shard(s), {}", protocol_name(resp3));
    let redis = Server::redis();
    let ruvio = Server::ruvio(PortMode::Forward, shards);
    let mut admin = Pair::connect(&redis, &ruvio, &format!("{label}, admin"), resp3);
    let wpass = sha256_hex("wpass");

    // Users and their descriptions.
    admin.same(&[
        "ACL",
        "SETUSER",
        "reader",
        "on",
        ">rpass",
        "~r:*",
        "&chan:*",
        "+@read",
        "+publish",
        "+subscribe",
        "+psubscribe",
        "+multi",
        "+exec",
        "+eval",
        "-get",
        "+get",
        "+config|get",
    ]);
    admin.same_rules(&["ACL", "GETUSER", "reader"]);
    admin.same(&[
        "ACL",
        "SETUSER",
        "writer",
        "on",
        &format!("#{wpass}"),
        "%W~w:*",
        "%R~r:*",
        "%RW~rw:*",
        "-@all",
        "+set",
        "+get",
        "(~x:*",
        "+del)",
        "(&y +@pubsub)",
    ]);
    admin.same_rules(&["ACL", "GETUSER", "writer"]);
    admin.same(&[
        "ACL",
        "SETUSER",
        "plain",
        "+@all",
        "-@dangerous",
        "~*",
        "allchannels",
    ]);
    admin.same(&["ACL", "GETUSER", "plain"]);
    admin.same(&[
        "ACL",
        "SETUSER",
        "firstarg",
        "reset",
        "+select|0",
        "+select|1",
        "nopass",
        "on",
    ]);
    admin.same(&["ACL", "GETUSER", "firstarg"]);
    admin.same(&[
        "ACL",
        "SETUSER",
        "cats",
        "+@hash",
        "-hset",
        "+@string",
        "resetkeys",
        "resetchannels",
    ]);
    admin.same(&["ACL", "GETUSER", "cats"]);
    admin.same(&["ACL", "GETUSER", "default"]);
    admin.same(&["ACL", "GETUSER", "nobody"]);
    admin.same_rules(&["ACL", "LIST"]);
    admin.same(&["ACL", "USERS"]);
    admin.same(&["ACL", "WHOAMI"]);

    // Every kind of bad rule.
    for bad in [
        &["badrule"][..],
        &["%X~a"],
        &["%RR~a"],
        &["#abc"],
        &["#ABCDEF0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF0123456789"],
        &["+nosuch"],
        &["+@nosuch"],
        &["-select|0"],
        &["+config|get|x"],
        &["+get|"],
        &["<notthere"],
        &["!0000000000000000000000000000000000000000000000000000000000000000"],
        &["allkeys", "~x"],
        &["allchannels", "&x"],
        &["~a b"],
        &["("],
        &["(+get", "~x"],
        &["on", "(+nosuch)"],
    ] {
        let mut args = vec!["ACL", "SETUSER", "broken"];
        args.extend_from_slice(bad);
        admin.same(&args);
    }
    admin.same(&["ACL", "SETUSER", "a b"]);
    admin.same(&["ACL", "GETUSER", "broken"]);
    admin.same(&["ACL", "DELUSER", "default"]);
    admin.same(&["ACL", "DELUSER", "nosuch", "cats"]);
    admin.same(&["ACL", "CAT"]);
    admin.same(&["ACL", "CAT", "nosuch"]);
    admin.same(&["ACL", "CAT", "read", "x"]);
    for bits in ["0", "5000", "-1", "abc"] {
        admin.same(&["ACL", "GENPASS", bits]);
    }
    let (r, t) = admin.both(&["ACL", "GENPASS", "5"]);
    assert_eq!(
        r.len(),
        t.len(),
        "{label}: GENPASS 5: {} {}",
        show(&r),
        show(&t)
    );
    let (r, t) = admin.both(&["ACL", "GENPASS"]);
    assert_eq!(
        r.len(),
        t.len(),
        "{label}: GENPASS: {} {}",
        show(&r),
        show(&t)
    );
    admin.same(&["ACL", "LOG", "x"]);
    admin.same(&["ACL", "LOG", "1", "2"]);
    admin.same(&["ACL", "NOPE"]);
    admin.same(&["ACL", "LOAD"]);
    admin.same(&["ACL", "SAVE"]);
    let (r, t) = admin.both(&["ACL", "HELP"]);
    let r = String::from_utf8_lossy(&r).replace("Prints this help.", "Print this help.");
    assert_eq!(r, String::from_utf8_lossy(&t), "{label}: ACL HELP");
    for category in [
        "read",
        "write",
        "keyspace",
        "dangerous",
        "pubsub",
        "connection",
    ] {
        let (r, t) = admin.both(&["ACL", "CAT", category]);
        let (r, t) = (sorted_bulks(&r), sorted_bulks(&t));
        for name in r.iter().filter(|n| !t.contains(n)) {
            let known = admin.ruvio.cmd(&["COMMAND", "INFO", name]);
            assert!(
                unknown(&known),
                "{label}: ACL CAT {category}: {name} missing"
            );
        }
        for name in t.iter().filter(|n| !r.contains(n)) {
            let known = admin.redis.cmd(&["COMMAND", "INFO", name]);
            assert!(
                unknown(&known),
                "{label}: ACL CAT {category}: {name} is a Redis 7.0 command outside it"
            );
        }
    }

    // ACL DRYRUN: each kind of refusal.
    for call in [
        &["reader", "get", "r:1"][..],
        &["reader", "get", "x"],
        &["reader", "set", "r:1", "v"],
        &["reader", "config", "get", "maxmemory"],
        &["reader", "config", "set", "maxmemory", "0"],
        &["reader", "publish", "chan:1", "m"],
        &["reader", "publish", "other", "m"],
        &["reader", "subscribe", "chan:1", "other"],
        &["reader", "psubscribe", "chan:*"],
        &["reader", "psubscribe", "chan:1*"],
        &["reader", "mget", "r:1", "r:2", "x", "y"],
        &["writer", "set", "w:1", "v"],
        &["writer", "get", "w:1"],
        &["writer", "get", "r:1"],
        &["writer", "set", "r:1", "v"],
        &["writer", "set", "rw:1", "v"],
        &["writer", "get", "rw:1"],
        &["writer", "del", "x:1"],
        &["writer", "del", "w:1"],
        &["writer", "publish", "y", "m"],
        &["writer", "publish", "z", "m"],
        &["writer", "spublish", "y", "m"],
        &["writer", "ssubscribe", "y", "z"],
        &["writer", "psubscribe", "y"],
        &["writer", "unsubscribe", "z"],
        &["reader", "spublish", "chan:1", "m"],
        &["firstarg", "select", "0"],
        &["firstarg", "select", "2"],
        &["plain", "flushall"],
        &["plain", "get", "any"],
        &["nobody", "get", "k"],
        &["reader", "nosuch"],
        &["reader", "get"],
        &["reader", "config", "nosuch"],
    ] {
        let mut args = vec!["ACL", "DRYRUN"];
        args.extend_from_slice(call);
        admin.same(&args);
    }

    // A restricted user's connection.
    let mut user = Pair::connect(&redis, &ruvio, &format!("{label}, reader"), resp3);
    user.same(&["AUTH", "reader", "wrong"]);
    user.same(&["AUTH", "nobody", "x"]);
    user.same(&["AUTH", "onlypass"]);
    user.same(&["AUTH", "reader", "rpass", "extra"]);
    user.same(&["AUTH", "reader", "rpass"]);
    user.same(&["ACL", "WHOAMI"]);
    user.same(&["GET", "r:1"]);
    user.same(&["GET", "x"]);
    user.same(&["MGET", "r:1", "x"]);
    user.same(&["SET", "r:1", "v"]);
    user.same(&["CONFIG", "GET", "maxmemory"]);
    user.same(&["CONFIG", "SET", "maxmemory", "0"]);
    user.same(&["CONFIG", "NOSUCH"]);
    user.same(&["PUBLISH", "chan:1", "m"]);
    user.same(&["PUBLISH", "other", "m"]);
    user.same(&["SUBSCRIBE", "chan:1", "other"]);
    user.same(&["PSUBSCRIBE", "chan:1*"]);
    user.same(&["NOSUCHCOMMAND"]);
    user.same(&["GET"]);
    user.same(&["MULTI"]);
    user.same(&["GET", "r:1"]);
    user.same(&["SET", "r:1", "v"]);
    user.same(&["GET", "x"]);
    user.same(&["EXEC"]);
    // Rules changed between queueing and EXEC: each command is checked again.
    user.same(&["MULTI"]);
    user.same(&["GET", "r:5"]);
    user.same(&["PUBLISH", "chan:1", "m"]);
    user.same(&["MGET", "r:1"]);
    user.same(&["GET", "r:1"]);
    admin.same(&[
        "ACL",
        "SETUSER",
        "reader",
        "resetkeys",
        "~r:1",
        "resetchannels",
        "-mget",
    ]);
    user.same(&["EXEC"]);
    admin.same(&[
        "ACL",
        "SETUSER",
        "reader",
        "resetkeys",
        "~r:*",
        "&chan:*",
        "+mget",
    ]);
    for script in [
        "return redis.call('get','r:1')",
        "return redis.call('get','x')",
        "return redis.call('set','r:1','v')",
        "return redis.pcall('get','x')",
        "return redis.acl_check_cmd('get','x')",
        "return redis.acl_check_cmd('get','r:1')",
        "return redis.acl_check_cmd('set','r:1','v')",
        "return redis.acl_check_cmd('nosuch')",
        "return redis.acl_check_cmd()",
    ] {
        user.same(&["EVAL", script, "0"]);
    }
    // Scripts that run where their keys are (with 2 shards: the other shard,
    // or both on borrowed keys).
    for keys in [&["r:1"][..], &["r:2"], &["r:1", "r:2", "r:3", "r:4"]] {
        let count = keys.len().to_string();
        for script in [
            "return redis.call('get',KEYS[1])",
            "return redis.call('get','x')",
            "return redis.call('set',KEYS[1],'v')",
            "return redis.acl_check_cmd('set',KEYS[1],'v')",
        ] {
            let mut args = vec!["EVAL", script, &count];
            args.extend_from_slice(keys);
            user.same(&args);
        }
    }
    user.same(&["MULTI"]);
    user.same(&["EVAL", "return redis.call('get','x')", "0"]);
    user.same(&["EVAL", "return redis.call('get',KEYS[1])", "1", "r:2"]);
    user.same(&["EXEC"]);
    // SORT's BY and GET patterns need read access to every key.
    admin.same(&["ACL", "SETUSER", "sorter", "on", "nopass", "~k*", "+@all"]);
    admin.same(&[
        "ACL", "SETUSER", "reads", "on", "nopass", "%R~*", "~k*", "+@all",
    ]);
    admin.same(&["RPUSH", "k1", "3", "1", "2"]);
    admin.same(&[
        "FUNCTION",
        "LOAD",
        "REPLACE",
        "#!lua name=acltest\n\
         redis.register_function('chk', function(keys, args) return redis.acl_check_cmd('get', 'x1') end)\n\
         redis.register_function('rd', function(keys, args) return redis.call('get', keys[1] or 'x1') end)",
    ]);
    for who in ["sorter", "reads"] {
        let mut sorter = Pair::connect(&redis, &ruvio, &format!("{label}, {who}"), resp3);
        sorter.same(&["AUTH", who, "x"]);
        sorter.same(&["FCALL", "chk", "0"]);
        sorter.same(&["FCALL", "rd", "0"]);
        sorter.same(&["FCALL", "rd", "1", "k1"]);
        sorter.same(&["FCALL", "rd", "1", "k2"]);
        for call in [
            &["SORT", "k1", "BY", "w_*"][..],
            &["SORT", "k1", "GET", "h_*"],
            &["SORT", "k1", "GET", "#"],
            &["SORT", "k1", "BY", "nosort"],
            &["SORT_RO", "k1", "BY", "w_*"],
            &["SORT", "k1", "LIMIT", "0", "1", "GET", "x"],
            &["SORT", "k1", "LIMIT", "a", "1", "GET", "x"],
            &["SORT", "k1", "NOSUCH", "GET", "x"],
            &["SORT", "k1", "DESC", "ALPHA", "STORE", "k2", "BY", "w_*"],
            &["SORT_RO", "k1", "STORE", "k2", "GET", "x"],
        ] {
            sorter.same(call);
        }
    }

    // ACL LOG (rule 4): what the refusals above left.
    compare_log(&mut admin, &label);
    let (r, t) = admin.both(&["CLIENT", "LIST"]);
    let readers = |list: &[u8]| {
        String::from_utf8_lossy(list)
            .matches("user=reader ")
            .count()
    };
    assert_eq!(readers(&r), readers(&t), "{label}: CLIENT LIST users");
    admin.same(&["CLIENT", "KILL", "USER", "nosuch"]);

    // HELLO AUTH.
    let mut other = Pair::connect(&redis, &ruvio, &format!("{label}, hello"), false);
    other.same(&[
        "HELLO",
        if resp3 { "3" } else { "2" },
        "AUTH",
        "writer",
        "nope",
    ]);
    other.both(&[
        "HELLO",
        if resp3 { "3" } else { "2" },
        "AUTH",
        "writer",
        "wpass",
        "SETNAME",
        "w",
    ]);
    other.same(&["ACL", "WHOAMI"]);
    other.same(&["CLIENT", "GETNAME"]);
    other.same(&["SET", "w:1", "v"]);
    other.same(&["GET", "w:1"]);
    other.same(&["DEL", "x:1"]);
    other.same(&["DEL", "w:1"]);
    admin.same(&["CLIENT", "KILL", "USER", "writer"]);
    let (r, t) = admin.both(&["CLIENT", "LIST"]);
    let writers = |list: &[u8]| {
        String::from_utf8_lossy(list)
            .matches("user=writer ")
            .count()
    };
    assert_eq!(
        (writers(&r), writers(&t)),
        (0, 0),
        "{label}: CLIENT KILL USER"
    );

    // A subscriber whose channel is taken away is closed (not when its channels
    // only grow).
    let mut sub = Pair::connect(&redis, &ruvio, &format!("{label}, subscriber"), false);
    sub.same(&["AUTH", "reader", "rpass"]);
    sub.same(&["SUBSCRIBE", "chan:1"]);
    let subscribed = |list: &[u8]| String::from_utf8_lossy(list).matches(" sub=1 ").count();
    admin.same(&["ACL", "SETUSER", "reader", "&chan:2"]);
    let (r, t) = admin.both(&["CLIENT", "LIST"]);
    assert_eq!(
        (subscribed(&r), subscribed(&t)),
        (1, 1),
        "{label}: subscriber kept"
    );
    admin.same(&["ACL", "SETUSER", "reader", "resetchannels", "&chan:2"]);
    let (r, t) = admin.both(&["CLIENT", "LIST"]);
    assert_eq!(
        (subscribed(&r), subscribed(&t)),
        (0, 0),
        "{label}: subscriber closed"
    );
    admin.same(&["ACL", "SETUSER", "reader", "&chan:*"]);

    // A change reaches the user's connections at once; DELUSER closes them.
    admin.same(&["ACL", "SETUSER", "reader", "-get"]);
    user.same(&["GET", "r:1"]);
    admin.same(&["ACL", "SETUSER", "reader", "+get"]);
    user.same(&["GET", "r:1"]);
    admin.same(&["ACL", "DELUSER", "reader", "writer"]);
    let (r, t) = admin.both(&["CLIENT", "LIST"]);
    assert_eq!(
        readers(&r),
        0,
        "{label}: redis kept the deleted user's client"
    );
    assert_eq!(
        readers(&t),
        0,
        "{label}: ruvio kept the deleted user's client: {}",
        show(&t)
    );
    assert!(!contains(&t, b"user=writer "), "{label}: {}", show(&t));

    // requirepass is the default user's password.
    admin.same(&["CONFIG", "SET", "requirepass", "topsecret"]);
    admin.same_rules(&["ACL", "GETUSER", "default"]);
    let mut late = Pair::connect(&redis, &ruvio, &format!("{label}, late"), false);
    late.same(&["PING"]);
    late.same(&["AUTH", "wrong"]);
    late.same(&["AUTH", "topsecret"]);
    late.same(&["ACL", "WHOAMI"]);
    admin.same(&["CONFIG", "SET", "requirepass", ""]);
    admin.same(&["ACL", "GETUSER", "default"]);
    late.same(&["AUTH", "x"]);
    // A failed AUTH run by EXEC is logged in the multi context.
    late.same(&["MULTI"]);
    late.same(&["AUTH", "nobody", "x"]);
    late.same(&["EXEC"]);
    compare_log(&mut admin, &label);
    admin.same(&["ACL", "LOG", "RESET"]);
    admin.same(&["ACL", "LOG"]);
    // acllog-max-len bounds the log.
    admin.same(&["CONFIG", "SET", "acllog-max-len", "2"]);
    for name in ["nobody1", "nobody2", "nobody3"] {
        late.same(&["AUTH", name, "x"]);
    }
    compare_log(&mut admin, &label);
    admin.same(&["CONFIG", "SET", "acllog-max-len", "128"]);
}

/// Redis 7.2's fields, which redis-server 7.0 does not send.
const LOG_FIELDS_72: [&str; 3] = ["entry-id", "timestamp-created", "timestamp-last-updated"];

/// Rule 4: ACL LOG's entries, field by field.
fn compare_log(admin: &mut Pair, label: &str) {
    let (r, t) = admin.both(&["ACL", "LOG", "100"]);
    let (r, t) = (log_entries(&r), log_entries(&t));
    assert_eq!(
        r.len(),
        t.len(),
        "{label}: ACL LOG entries\n  redis: {r:?}\n  ruvio: {t:?}"
    );
    for (re, te) in r.iter().zip(&t) {
        let keys = |e: &Vec<(String, String)>| e.iter().map(|(k, _)| k.clone()).collect::<Vec<_>>();
        let (older, newer) = te.split_at(te.len().min(7));
        assert_eq!(
            keys(re),
            keys(&older.to_vec()),
            "{label}: ACL LOG 7.0 fields"
        );
        assert_eq!(
            keys(&newer.to_vec()),
            LOG_FIELDS_72,
            "{label}: ACL LOG 7.2 fields"
        );
        for ((key, rv), (_, tv)) in re.iter().zip(older) {
            match key.as_str() {
                "age-seconds" => assert!(tv.parse::<f64>().is_ok(), "{label}: age {tv}"),
                "client-info" => {
                    let fields = |line: &str| {
                        line.split(' ')
                            .filter_map(|f| f.split_once('=').map(|(k, _)| k.to_string()))
                            .collect::<Vec<_>>()
                    };
                    let theirs = fields(tv);
                    for f in fields(rv) {
                        assert!(theirs.contains(&f), "{label}: client-info lacks {f}: {tv}");
                    }
                }
                _ => assert_eq!(
                    rv, tv,
                    "{label}: ACL LOG {key}\n  redis: {re:?}\n  ruvio: {te:?}"
                ),
            }
        }
    }
    check_log_72_fields(&t, label);
}

/// Rule 4's own check of Redis 7.2's fields in Ruvio's entries (newest first).
fn check_log_72_fields(entries: &[Vec<(String, String)>], label: &str) {
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_millis() as i64;
    let field = |e: &Vec<(String, String)>, name: &str| -> String {
        e.iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
            .unwrap_or_else(|| panic!("{label}: no {name} in {e:?}"))
    };
    let int = |e: &Vec<(String, String)>, name: &str| -> i64 {
        field(e, name)
            .parse()
            .unwrap_or_else(|_| panic!("{label}: {name} is not an integer: {e:?}"))
    };
    let mut ids = Vec::new();
    let mut previous_updated = i64::MAX;
    for e in entries {
        let id = int(e, "entry-id");
        let created = int(e, "timestamp-created");
        let updated = int(e, "timestamp-last-updated");
        let age_ms = (field(e, "age-seconds").parse::<f64>().expect("age") * 1000.0) as i64;
        assert!(
            id >= 0 && !ids.contains(&id),
            "{label}: entry-id {id} of {ids:?}"
        );
        ids.push(id);
        assert!(
            updated <= previous_updated,
            "{label}: updated {updated} after {previous_updated}"
        );
        previous_updated = updated;
        // An hour covers this test's run; seconds would be a thousand times less.
        assert!(
            created <= updated && updated <= now_ms && created > now_ms - 3_600_000,
            "{label}: timestamps {created} {updated} now {now_ms}"
        );
        if int(e, "count") == 1 {
            assert_eq!(created, updated, "{label}: a single event's timestamps");
        }
        assert!(
            (now_ms - age_ms - updated).abs() < 5_000,
            "{label}: timestamp-last-updated {updated} vs age {age_ms} ms at {now_ms}"
        );
    }
}

/// ACL LOG's entries as (field, value) pairs (RESP2 or RESP3 maps, whose
/// header gives the field count: 7 from redis-server 7.0, 10 from Ruvio; values
/// are bulk strings, integers or doubles).
fn log_entries(reply: &[u8]) -> Vec<Vec<(String, String)>> {
    let text = String::from_utf8_lossy(reply).to_string();
    let mut lines = text.split("\r\n").filter(|l| !l.is_empty()).peekable();
    let count: usize = lines.next().expect("header")[1..].parse().expect("count");
    let mut entries = Vec::new();
    for _ in 0..count {
        let header = lines.next().expect("map header");
        let len: usize = header[1..].parse().expect("map length");
        // RESP2 writes a map as an array of keys and values.
        let pairs = if header.starts_with('%') {
            len
        } else {
            len / 2
        };
        let mut fields = Vec::new();
        for _ in 0..pairs {
            let mut value = || {
                let line = lines.next().expect("value").to_string();
                if line.starts_with('$') {
                    lines.next().unwrap_or_default().to_string()
                } else {
                    line[1..].to_string()
                }
            };
            let key = value();
            let val = value();
            fields.push((key, val));
        }
        entries.push(fields);
    }
    entries
}

#[test]
fn acl_matches_redis_on_one_shard() {
    if require_redis_server("acl_matches_redis_on_one_shard").is_none() {
        return;
    }
    run(1, false);
    run(1, true);
}

#[test]
fn acl_matches_redis_on_two_shards() {
    if require_redis_server("acl_matches_redis_on_two_shards").is_none() {
        return;
    }
    run(2, false);
    run(2, true);
}

/// Rule fragments the random SETUSER calls are made of: every kind of rule,
/// right and wrong.
const FRAGMENTS: &[&str] = &[
    "on",
    "off",
    ">pw",
    ">other",
    "<pw",
    "<nope",
    "nopass",
    "resetpass",
    "reset",
    "#2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881",
    "!2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881",
    "#xyz",
    "~a*",
    "~*",
    "%R~r:*",
    "%W~w:*",
    "%RW~rw",
    "%WR~*",
    "%X~a",
    "%R",
    "%~x",
    "allkeys",
    "resetkeys",
    "&c*",
    "&*",
    "allchannels",
    "resetchannels",
    "+get",
    "-get",
    "+set",
    "-@all",
    "+@all",
    "allcommands",
    "nocommands",
    "+@read",
    "-@write",
    "+@geo",
    "-@dangerous",
    "+@nosuch",
    "+config|get",
    "-config|set",
    "+config",
    "+select|0",
    "-select|0",
    "+nosuch",
    "+get|x|y",
    "(+get ~x)",
    "(~y +@geo",
    "-set)",
    "(",
    ")",
    "clearselectors",
    "sanitize-payload",
    "skip-sanitize-payload",
    "",
    "+",
    "-",
    "@",
];

/// Random SETUSER calls: the same reply as Redis, never a panic, and the same
/// user afterwards (GETUSER, rule 2).
fn random_rules(seed: u64) {
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};
    let label = format!("random rules, seed {seed}");
    let redis = Server::redis();
    let ruvio = Server::ruvio(PortMode::Forward, 1);
    let mut admin = Pair::connect(&redis, &ruvio, &label, false);
    let mut rng = StdRng::seed_from_u64(seed);
    for step in 0..400 {
        let user = ["u1", "u2", "default"][rng.random_range(0..3)];
        let count = rng.random_range(0..6);
        let mut owned: Vec<String> = Vec::new();
        for _ in 0..count {
            if rng.random_bool(0.1) {
                // Arbitrary printable bytes, spaces included.
                let len = rng.random_range(1..6);
                owned.push(
                    (0..len)
                        .map(|_| rng.random_range(b' '..=b'~') as char)
                        .collect(),
                );
            } else {
                owned.push(FRAGMENTS[rng.random_range(0..FRAGMENTS.len())].to_string());
            }
        }
        let mut args = vec!["ACL", "SETUSER", user];
        args.extend(owned.iter().map(String::as_str));
        admin.label = format!("{label}, step {step}");
        admin.same(&args);
        admin.same_rules(&["ACL", "GETUSER", user]);
    }
    // The default user may have been reset off: both refuse or admit alike.
    admin.same(&["ACL", "WHOAMI"]);
}

#[test]
fn random_setuser_rules_answer_as_redis() {
    if require_redis_server("random_setuser_rules_answer_as_redis").is_none() {
        return;
    }
    for seed in 1..=5 {
        random_rules(seed);
    }
}

/// Per-shard mode: one table for every shard's port; a change made through one
/// port reaches the connections of the others before the reply, and DELUSER
/// closes them (Ruvio only: a Redis Cluster's nodes each keep their own users).
#[test]
fn users_are_server_wide_in_per_shard_mode() {
    let ruvio = Server::ruvio(PortMode::PerShard, 2);
    let mut admin = RawConn::connect(ruvio.shard_port(0));
    let mut other = RawConn::connect(ruvio.shard_port(1));
    assert_eq!(
        admin.cmd(&["ACL", "SETUSER", "u", "on", ">p", "~*", "+get", "+ping"]),
        b"+OK\r\n"
    );
    assert_eq!(other.cmd(&["AUTH", "u", "p"]), b"+OK\r\n");
    assert_eq!(other.cmd(&["PING"]), b"+PONG\r\n");
    assert_eq!(admin.cmd(&["ACL", "SETUSER", "u", "-ping"]), b"+OK\r\n");
    assert_eq!(
        other.cmd(&["PING"]),
        b"-NOPERM this user has no permissions to run the 'ping' command\r\n"
    );
    let mut list_other = RawConn::connect(ruvio.shard_port(1));
    let list = list_other.cmd(&["CLIENT", "LIST"]);
    assert!(contains(&list, b"user=u "), "{}", show(&list));
    assert_eq!(admin.cmd(&["ACL", "DELUSER", "u"]), b":1\r\n");
    let list = list_other.cmd(&["CLIENT", "LIST"]);
    assert!(!contains(&list, b"user=u "), "{}", show(&list));
    assert_eq!(
        list_other.cmd(&["ACL", "USERS"]),
        b"*1\r\n$7\r\ndefault\r\n"
    );
}

/// Calls whose refusal differs on purpose: DEBUG is a container in Ruvio (its
/// subcommands are rows of their own), and Redis 7.0's key specs find no key in
/// a call whose key count is not a number or whose keys stop short (PFMERGE of
/// a destination alone), so it lets such a call pass where Ruvio checks the
/// keys the call names.
const DRYRUN_SWEEP_EXCEPTIONS: &[&str] = &[
    "debug",
    "pfmerge",
    "zdiffstore",
    "zinterstore",
    "zunionstore",
];

/// ACL DRYRUN of every command both servers have, with keys inside and outside
/// the user's read, write and read-write patterns at every argument position:
/// the same answer (the key positions and flags the check uses are Redis's).
#[test]
fn dryrun_of_every_command_matches_redis() {
    if require_redis_server("dryrun_of_every_command_matches_redis").is_none() {
        return;
    }
    let redis = Server::redis();
    let ruvio = Server::ruvio(PortMode::Forward, 1);
    let mut admin = Pair::connect(&redis, &ruvio, "dryrun sweep", false);
    admin.same(&[
        "ACL",
        "SETUSER",
        "sw",
        "on",
        "nopass",
        "~k*",
        "%R~r*",
        "%W~w*",
        "&c*",
        "+@all",
        "-@dangerous",
    ]);
    let names = |conn: &mut RawConn| -> Vec<String> {
        match decode(&conn.cmd(&["COMMAND", "LIST"])) {
            Value::Array(items) => items.iter().map(Value::text).collect(),
            other => panic!("COMMAND LIST: {other:?}"),
        }
    };
    let theirs = names(&mut admin.redis);
    let ours = names(&mut admin.ruvio);
    let mut compared = 0;
    for name in theirs.iter().filter(|n| ours.contains(n)) {
        if name == "acl" || DRYRUN_SWEEP_EXCEPTIONS.contains(&name.as_str()) {
            continue;
        }
        let arity = match decode(&admin.redis.cmd(&["COMMAND", "INFO", name])) {
            Value::Array(rows) => match &rows[0] {
                Value::Array(row) => match row[1] {
                    Value::Int(n) => n.unsigned_abs() as usize,
                    _ => continue,
                },
                _ => continue,
            },
            _ => continue,
        };
        for variant in [
            ["k1", "x2", "r3", "w4", "k5", "c6"],
            ["x1", "k2", "k3", "r4", "w5", "k6"],
            ["r1", "w2", "k3", "c4", "x5", "r6"],
        ] {
            let mut args = vec!["ACL", "DRYRUN", "sw", name.as_str()];
            args.extend(variant.iter().take(arity.saturating_sub(1)));
            admin.same(&args);
            compared += 1;
        }
    }
    assert!(compared > 500, "only {compared} calls compared");
}

/// A command a restricted user may run still meets every other refusal Redis
/// makes after the ACL check: RESP2's subscribed mode, maxmemory's OOM.
#[test]
fn restricted_users_meet_the_other_refusals() {
    if require_redis_server("restricted_users_meet_the_other_refusals").is_none() {
        return;
    }
    let redis = Server::redis();
    let ruvio = Server::ruvio(PortMode::Forward, 1);
    let mut admin = Pair::connect(&redis, &ruvio, "admin", false);
    admin.same(&[
        "ACL",
        "SETUSER",
        "app",
        "on",
        "nopass",
        "~app:*",
        "&*",
        "+@all",
        "-@dangerous",
    ]);
    let mut app = Pair::connect(&redis, &ruvio, "app", false);
    app.same(&["AUTH", "app", "x"]);
    app.same(&["SUBSCRIBE", "ch"]);
    app.same(&["GET", "app:1"]);
    let mut app = Pair::connect(&redis, &ruvio, "app", false);
    app.same(&["AUTH", "app", "x"]);
    admin.same(&["CONFIG", "SET", "maxmemory", "1"]);
    app.same(&["SET", "app:1", "x"]);
    app.same(&["GET", "app:1"]);
    admin.same(&["CONFIG", "SET", "maxmemory", "0"]);
    app.same(&["SET", "app:1", "x"]);
}
