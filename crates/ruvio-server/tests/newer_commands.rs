//! Redis 8.4's string commands MSETEX, DELEX and DIGEST, which the redis-server
//! 7.0 installed here lacks: exact reply bytes from the real binary against the
//! replies Redis documents (redis.io command pages, Redis's own tests in
//! tests/unit/type/string.tcl), with 1 shard and with 2 shards in forward mode
//! (MSETEX's keys on both shards borrowed as MSETNX's are) and per-shard mode
//! (CROSSSLOT as Redis Cluster). DIGEST's values are XXH3-64 reference outputs and
//! the values Redis's documentation shows.

mod common;

use common::*;

const WRONGTYPE: &[u8] = b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n";

fn int(n: i64) -> Vec<u8> {
    format!(":{n}\r\n").into_bytes()
}

fn bulk_bytes(s: &str) -> Vec<u8> {
    bulk(s).into_bytes()
}

/// Parse an integer reply.
fn as_int(reply: &[u8]) -> i64 {
    let text = std::str::from_utf8(reply).unwrap();
    text.trim_start_matches(':').trim_end().parse().unwrap()
}

/// DIGEST and DELEX on `key` and on names made from it (same shard in per-shard
/// mode when `key` has a hash tag).
fn digest_and_delex(c: &mut RawConn, key: &str) {
    let list = format!("{key}:list");
    let missing = format!("{key}:none");
    let (list, missing) = (list.as_str(), missing.as_str());
    // The documented example, and a value whose digest has leading zeros.
    assert_eq!(c.cmd(&["SET", key, "Hello world"]), b"+OK\r\n");
    assert_eq!(c.cmd(&["DIGEST", key]), bulk_bytes("b6acb9d84a38ff74"));
    let zeros = "v8lf0c11xh8ymlqztfd3eeq16kfn4sspw7fqmnuuq3k3t75em5wdizgcdw7uc26nnf961u2jkfzkjytls2kwlj7626sd";
    c.cmd(&["SET", key, zeros]);
    assert_eq!(c.cmd(&["DIGEST", key]), bulk_bytes("00006c38adf31777"));
    // XXH3-64 of the empty string (seed 0), and of an integer-encoded value's text.
    c.cmd(&["SET", key, ""]);
    assert_eq!(c.cmd(&["DIGEST", key]), bulk_bytes("2d06800538d394c2"));
    c.cmd(&["SET", key, "12345"]);
    assert_eq!(c.cmd(&["OBJECT", "ENCODING", key]), bulk_bytes("int"));
    let as_int_value = c.cmd(&["DIGEST", key]);
    c.cmd(&["SET", key, "x"]);
    c.cmd(&["SETRANGE", key, "0", "12345"]);
    assert_eq!(c.cmd(&["OBJECT", "ENCODING", key]), bulk_bytes("raw"));
    assert_eq!(
        c.cmd(&["DIGEST", key]),
        as_int_value,
        "raw and int encodings hash alike"
    );

    assert_eq!(c.cmd(&["DIGEST", missing]), b"$-1\r\n");
    c.cmd(&["DEL", list]);
    c.cmd(&["RPUSH", list, "a"]);
    assert_eq!(c.cmd(&["DIGEST", list]), WRONGTYPE);
    assert_eq!(
        c.cmd(&["DIGEST"]),
        b"-ERR wrong number of arguments for 'digest' command\r\n"
    );
    assert_eq!(
        c.cmd(&["DIGEST", "a", "b"]),
        b"-ERR wrong number of arguments for 'digest' command\r\n"
    );

    // DELEX without a condition deletes any type.
    assert_eq!(c.cmd(&["DELEX", list]), int(1));
    assert_eq!(c.cmd(&["DELEX", list]), int(0));

    c.cmd(&["SET", key, "hello"]);
    assert_eq!(c.cmd(&["DELEX", key, "IFEQ", "world"]), int(0));
    assert_eq!(c.cmd(&["DELEX", key, "ifeq", "hello"]), int(1));
    assert_eq!(c.cmd(&["EXISTS", key]), int(0));
    c.cmd(&["SET", key, "hello"]);
    assert_eq!(c.cmd(&["DELEX", key, "IFNE", "hello"]), int(0));
    assert_eq!(c.cmd(&["DELEX", key, "IfNe", "world"]), int(1));
    c.cmd(&["SET", key, "-999"]);
    assert_eq!(c.cmd(&["DELEX", key, "IFEQ", "-999"]), int(1));

    c.cmd(&["SET", key, "hello"]);
    let digest = c.cmd(&["DIGEST", key]);
    let digest = std::str::from_utf8(&digest)
        .unwrap()
        .lines()
        .nth(1)
        .unwrap()
        .to_owned();
    assert_eq!(c.cmd(&["DELEX", key, "IFDNE", &digest]), int(0));
    let upper = digest.to_ascii_uppercase();
    assert_eq!(c.cmd(&["DELEX", key, "IFDEQ", "0000000000000000"]), int(0));
    assert_eq!(c.cmd(&["DELEX", key, "IFDEQ", &upper]), int(1));
    c.cmd(&["SET", key, "hello"]);
    assert_eq!(c.cmd(&["DELEX", key, "IFDNE", "0000000000000000"]), int(1));

    // Redis 8.4's delexCommand checks in this order (src/t_string.c; the texts
    // as the suites run against a real 8.4 assert them, see CmdError's
    // DelexNotString and DigestFormat): the arity, then a missing key is 0
    // whatever follows (an unknown condition or a digest of any length), then
    // a key that is not a string is refused whatever the condition, then the
    // condition's name, then the digest's length.
    for cond in ["IFEQ", "IFNE", "IFDEQ", "IFDNE", "FOO"] {
        assert_eq!(c.cmd(&["DELEX", missing, cond, "1234567890"]), int(0));
    }
    c.cmd(&["SET", key, "test"]);
    let format = b"-ERR must be exactly 16 hexadecimal characters\r\n";
    for bad in ["", "123456789abcdef", "0123456789abcdef0"] {
        assert_eq!(c.cmd(&["DELEX", key, "IFDEQ", bad]), format);
        assert_eq!(c.cmd(&["DELEX", key, "IFDNE", bad]), format);
    }
    // Only the length is checked: 16 characters that are not hex never match.
    assert_eq!(c.cmd(&["DELEX", key, "IFDEQ", "0123456789abcdeg"]), int(0));
    assert_eq!(c.cmd(&["DELEX", key, "IFDEQ", "zzzzzzzzzzzzzzzz"]), int(0));
    assert_eq!(c.cmd(&["GET", key]), bulk_bytes("test"));
    assert_eq!(
        c.cmd(&["DELEX", key, "EQ", "test"]),
        b"-ERR Invalid condition. Use IFEQ, IFNE, IFDEQ, or IFDNE\r\n"
    );
    let arity = b"-ERR wrong number of arguments for 'delex' command\r\n";
    for argv in [
        &["DELEX", key, "IFEQ"][..],
        &["DELEX", key, "IFEQ", "a", "b"],
        &["DELEX", missing, "IFEQ"],
        &["DELEX", missing, "IFEQ", "a", "b"],
        &["DELEX"],
    ] {
        assert_eq!(c.cmd(argv), arity, "{argv:?}");
    }
    c.cmd(&["RPUSH", list, "element"]);
    let not_string = b"-ERR Key should be of string type if conditions are specified\r\n";
    for cond in ["IFEQ", "IFNE", "IFDEQ", "IFDNE", "FOO"] {
        assert_eq!(
            c.cmd(&["DELEX", list, cond, "element"]),
            not_string,
            "{cond}"
        );
    }
    assert_eq!(c.cmd(&["DIGEST", list]), WRONGTYPE);
    assert_eq!(c.cmd(&["DELEX", key, "IFDNE", "zzzzzzzzzzzzzzzz"]), int(1));
    c.cmd(&["SET", key, "test"]);
    assert_eq!(c.cmd(&["EXISTS", list, key]), int(2));
}

/// SET's Redis 8.4 conditions on `key` (and names made from it).
fn set_conditions(c: &mut RawConn, key: &str) {
    let list = format!("{key}:list");
    let missing = format!("{key}:none");
    let (list, missing) = (list.as_str(), missing.as_str());
    let nil = b"$-1\r\n";
    c.cmd(&["DEL", key, missing]);
    c.cmd(&["SET", key, "hello"]);
    assert_eq!(c.cmd(&["SET", key, "world", "IFEQ", "different"]), nil);
    assert_eq!(
        c.cmd(&["SET", key, "world", "ifeq", "hello", "EX", "100"]),
        b"+OK\r\n"
    );
    assert!(as_int(&c.cmd(&["TTL", key])) > 90);
    assert_eq!(c.cmd(&["SET", key, "again", "IFNE", "world"]), nil);
    assert_eq!(
        c.cmd(&["SET", key, "again", "IFNE", "other", "GET"]),
        bulk_bytes("world")
    );
    assert_eq!(
        c.cmd(&["SET", key, "x", "IFEQ", "nope", "GET"]),
        bulk_bytes("again")
    );
    assert_eq!(c.cmd(&["GET", key]), bulk_bytes("again"));
    // Digests, either case; an integer value compares as its text.
    c.cmd(&["SET", key, "12345"]);
    let digest = c.cmd(&["DIGEST", key]);
    let digest = std::str::from_utf8(&digest)
        .unwrap()
        .lines()
        .nth(1)
        .unwrap()
        .to_owned();
    assert_eq!(c.cmd(&["SET", key, "n", "IFDNE", &digest]), nil);
    assert_eq!(
        c.cmd(&["SET", key, "n", "IFDEQ", &digest.to_ascii_uppercase()]),
        b"+OK\r\n"
    );
    assert_eq!(
        c.cmd(&["SET", key, "m", "IFDNE", "0000000000000000"]),
        b"+OK\r\n"
    );
    // A missing key: IFEQ/IFDEQ do not create it, IFNE/IFDNE do (the digest unread).
    assert_eq!(c.cmd(&["SET", missing, "v", "IFEQ", "v"]), nil);
    assert_eq!(c.cmd(&["SET", missing, "v", "IFDEQ", "1234567890"]), nil);
    assert_eq!(c.cmd(&["SET", missing, "v", "IFEQ", "v", "GET"]), nil);
    assert_eq!(c.cmd(&["EXISTS", missing]), int(0));
    assert_eq!(
        c.cmd(&["SET", missing, "v", "IFDNE", "1234567890"]),
        b"+OK\r\n"
    );
    c.cmd(&["DEL", missing]);
    assert_eq!(c.cmd(&["SET", missing, "v", "IFNE", "v", "GET"]), nil);
    assert_eq!(c.cmd(&["GET", missing]), bulk_bytes("v"));
    // Errors.
    c.cmd(&["DEL", list]);
    c.cmd(&["RPUSH", list, "a"]);
    assert_eq!(c.cmd(&["SET", list, "v", "IFEQ", "a"]), WRONGTYPE);
    assert_eq!(c.cmd(&["SET", list, "v", "IFDNE", "1234567890"]), WRONGTYPE);
    let format = b"-ERR must be exactly 16 hexadecimal characters\r\n";
    assert_eq!(c.cmd(&["SET", key, "v", "IFDEQ", "123"]), format);
    // SET shares DELEX's digest check: only the length, so 16 non-hex
    // characters are no error, and never the value's digest.
    assert_eq!(c.cmd(&["SET", key, "v", "IFDEQ", "zzzzzzzzzzzzzzzz"]), nil);
    assert_eq!(c.cmd(&["GET", key]), bulk_bytes("m"));
    assert_eq!(c.cmd(&["SET", key, "v", "IFDNE", "", "GET"]), format);
    let syntax = b"-ERR syntax error\r\n";
    for options in [
        &["IFEQ"][..],
        &["NX", "IFEQ", "a"],
        &["IFNE", "a", "XX"],
        &["IFEQ", "a", "IFNE", "b"],
        &["IFDEQ", "0000000000000000", "IFEQ", "a"],
    ] {
        let mut argv = vec!["SET", key, "v"];
        argv.extend_from_slice(options);
        assert_eq!(c.cmd(&argv), syntax, "{options:?}");
    }
    assert_eq!(c.cmd(&["GET", key]), bulk_bytes("m"), "errors set nothing");
    c.cmd(&["DEL", key, missing, list]);
}

fn msetex_errors(c: &mut RawConn) {
    let arity = b"-ERR wrong number of arguments for 'msetex' command\r\n";
    assert_eq!(c.cmd(&["MSETEX"]), arity);
    assert_eq!(c.cmd(&["MSETEX", "1", "k"]), arity);
    let numkeys = b"-ERR invalid numkeys value\r\n";
    for n in ["key1", "0", "-1", "2147483648"] {
        assert_eq!(c.cmd(&["MSETEX", n, "key1", "val1", "EX", "10"]), numkeys);
    }
    let pairs = b"-ERR wrong number of key-value pairs\r\n";
    assert_eq!(c.cmd(&["MSETEX", "2", "k{t}1", "v1", "k{t}2"]), pairs);
    assert_eq!(
        c.cmd(&["MSETEX", "2147483647", "k1", "v1", "EX", "10"]),
        pairs
    );
    let syntax = b"-ERR syntax error\r\n";
    for options in [
        &["invalid_flag"][..],
        &["NX", "XX", "EX", "10"],
        &["EX", "10", "PX", "5000"],
        &["EXAT", "1735689600", "PXAT", "1735689600000"],
        &["KEEPTTL", "EX", "10"],
        &["PX", "5000", "KEEPTTL"],
        &["GET"],
        &["PERSIST"],
        &["EX"],
    ] {
        let mut argv = vec!["MSETEX", "2", "k{t}1", "v1", "k{t}2", "v2"];
        argv.extend_from_slice(options);
        assert_eq!(c.cmd(&argv), syntax, "{options:?}");
    }
    let invalid = b"-ERR invalid expire time in 'msetex' command\r\n";
    for (unit, value) in [
        ("EX", "0"),
        ("PX", "-5"),
        ("EXAT", "0"),
        ("EX", "9223372036854775807"),
    ] {
        assert_eq!(c.cmd(&["MSETEX", "1", "k{t}1", "v", unit, value]), invalid);
    }
    assert_eq!(
        c.cmd(&["MSETEX", "1", "k{t}1", "v", "EX", "ten"]),
        b"-ERR value is not an integer or out of range\r\n"
    );
    assert_eq!(
        c.cmd(&["EXISTS", "k{t}1", "k{t}2"]),
        int(0),
        "errors set nothing"
    );
}

/// MSETEX over `keys` (any shards, forward mode): conditions, shared expiries,
/// KEEPTTL, and options in any order.
fn msetex_sets(c: &mut RawConn, keys: &[String]) {
    let (a, b, fresh) = (&keys[0], &keys[1], &keys[2]);
    c.cmd(&["DEL", a, b, fresh]);
    assert_eq!(
        c.cmd(&["MSETEX", "2", a, "1", b, "2", "NX", "EX", "100"]),
        int(1)
    );
    assert_eq!(c.cmd(&["MGET", a, b]), b"*2\r\n$1\r\n1\r\n$1\r\n2\r\n");
    for k in [a, b] {
        let ttl = as_int(&c.cmd(&["TTL", k]));
        assert!((90..=100).contains(&ttl), "{ttl}");
    }
    // NX with one key present, XX with one key missing: nothing is set.
    assert_eq!(c.cmd(&["MSETEX", "2", fresh, "x", a, "x", "NX"]), int(0));
    assert_eq!(
        c.cmd(&["MSETEX", "2", a, "x", fresh, "x", "PX", "5000", "XX"]),
        int(0)
    );
    assert_eq!(c.cmd(&["MGET", a, fresh]), b"*2\r\n$1\r\n1\r\n$-1\r\n");
    // XX with all present, options in either order; KEEPTTL keeps each TTL.
    assert_eq!(
        c.cmd(&["MSETEX", "2", a, "new", b, "new", "KEEPTTL", "XX"]),
        int(1)
    );
    assert_eq!(c.cmd(&["GET", a]), bulk_bytes("new"));
    assert!(as_int(&c.cmd(&["TTL", b])) >= 90);
    // No expiry option: the TTL goes, as MSET's.
    assert_eq!(c.cmd(&["MSETEX", "1", a, "plain"]), int(1));
    assert_eq!(c.cmd(&["TTL", a]), int(-1));
    // Absolute expiries.
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let at_s = (now_ms / 1000 + 50).to_string();
    let at_ms = (now_ms + 50_000).to_string();
    assert_eq!(
        c.cmd(&["MSETEX", "2", a, "s", fresh, "s", "EXAT", &at_s]),
        int(1)
    );
    assert_eq!(
        c.cmd(&["EXPIRETIME", a]),
        format!(":{at_s}\r\n").into_bytes()
    );
    assert_eq!(
        c.cmd(&["MSETEX", "2", a, "m", b, "m", "pxat", &at_ms]),
        int(1)
    );
    assert_eq!(
        c.cmd(&["PEXPIRETIME", b]),
        format!(":{at_ms}\r\n").into_bytes()
    );
    // The same key twice: the last value wins.
    assert_eq!(
        c.cmd(&["MSETEX", "2", fresh, "first", fresh, "last", "EX", "10"]),
        int(1)
    );
    assert_eq!(c.cmd(&["GET", fresh]), bulk_bytes("last"));
    // Values are any string; an integer value reads back as sent.
    assert_eq!(c.cmd(&["MSETEX", "1", a, "-42", "KEEPTTL"]), int(1));
    assert_eq!(c.cmd(&["INCR", a]), int(-41));
    c.cmd(&["DEL", a, b, fresh]);
}

#[test]
fn one_shard_matches_documented_replies() {
    let server = Server::forward(1);
    let mut c = server.raw();
    digest_and_delex(&mut c, "dg:key");
    set_conditions(&mut c, "cas:key");
    msetex_errors(&mut c);
    let keys: Vec<String> = ["ms:a", "ms:b", "ms:c"]
        .iter()
        .map(|k| k.to_string())
        .collect();
    msetex_sets(&mut c, &keys);
}

#[test]
fn resp3_replies_are_the_same_types() {
    let server = Server::forward(1);
    let mut c = server.raw();
    c.cmd(&["HELLO", "3"]);
    assert_eq!(c.cmd(&["DIGEST", "none"]), b"_\r\n");
    c.cmd(&["SET", "k", "Hello world"]);
    assert_eq!(c.cmd(&["DIGEST", "k"]), bulk_bytes("b6acb9d84a38ff74"));
    assert_eq!(c.cmd(&["DELEX", "k", "IFDEQ", "b6acb9d84a38ff74"]), int(1));
    assert_eq!(c.cmd(&["MSETEX", "1", "k", "v", "EX", "5"]), int(1));
}

#[test]
fn two_shards_forward_spans_shards_atomically() {
    let server = Server::forward(2);
    let mut c = server.raw();
    // Keys of both shards, reached from either shard's connection.
    let keys = vec![
        key_on_shard("ms", 0, 2),
        key_on_shard("ms", 1, 2),
        key_on_shard("fresh", 1, 2),
    ];
    msetex_sets(&mut c, &keys);
    let mut other = conn_on_shard(&server, 1);
    msetex_sets(&mut other, &keys);
    msetex_errors(&mut c);
    digest_and_delex(&mut c, &key_on_shard("dg", 1, 2));
    digest_and_delex(&mut other, &key_on_shard("dg", 0, 2));
    set_conditions(&mut other, &key_on_shard("cas", 0, 2));
}

#[test]
fn two_shards_per_shard_mode_answers_as_a_cluster() {
    let server = Server::per_shard(2);
    let tag = format!("{{{}}}", hash_tag_on_shard(1, 2));
    let mut c = RawConn::connect(server.shard_port(1));
    let keys: Vec<String> = ["a", "b", "c"]
        .iter()
        .map(|k| format!("{tag}{k}"))
        .collect();
    msetex_sets(&mut c, &keys);
    digest_and_delex(&mut c, &format!("{tag}dg"));
    set_conditions(&mut c, &format!("{tag}cas"));
    let (on0, on1) = (key_on_shard("x", 0, 2), key_on_shard("y", 1, 2));
    let reply = c.cmd(&["MSETEX", "2", &on1, "v", &on0, "v", "EX", "10"]);
    assert!(reply.starts_with(b"-CROSSSLOT"), "{}", show(&reply));
    let reply = c.cmd(&["DIGEST", &on0]);
    assert!(reply.starts_with(b"-MOVED"), "{}", show(&reply));
}

#[test]
fn command_info_reports_movable_keys_and_getkeys_finds_the_pairs() {
    let server = Server::forward(1);
    let mut c = server.raw();
    let reply = c.cmd(&[
        "COMMAND", "GETKEYS", "MSETEX", "2", "k1", "v1", "k2", "v2", "NX", "EX", "1",
    ]);
    assert_eq!(reply, b"*2\r\n$2\r\nk1\r\n$2\r\nk2\r\n");
    let reply = c.cmd(&["COMMAND", "GETKEYS", "DELEX", "k", "IFEQ", "v"]);
    assert_eq!(reply, b"*1\r\n$1\r\nk\r\n");
    let info = c.cmd(&["COMMAND", "INFO", "MSETEX"]);
    assert!(contains(&info, b"movablekeys"), "{}", show(&info));
    assert!(contains(&info, b":-4\r\n"), "{}", show(&info));
}

/// The log replays MSETEX (a relative TTL logged as its deadline), DELEX (as DEL)
/// and SET's conditions to the same keys after a SIGKILL, with 1 and 2 shards.
#[test]
fn the_log_replays_them_after_a_restart() {
    for shards in [1, 2] {
        let dir = std::env::temp_dir().join(format!("ruvio-newer-{}-{shards}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let args = ["--dir", dir.to_str().unwrap(), "--durability", "always"];
        let server = Server::ruvio_with(PortMode::Forward, shards, &args);
        let (a, b) = (key_on_shard("ms", 0, 2), key_on_shard("ms", 1, 2));
        let mut c = server.raw();
        assert_eq!(
            c.cmd(&["MSETEX", "2", &a, "1", &b, "2", "EX", "1000"]),
            int(1)
        );
        let deadline = c.cmd(&["PEXPIRETIME", &b]);
        assert_eq!(c.cmd(&["MSETEX", "1", &a, "x", "NX"]), int(0));
        c.cmd(&["SET", "gone", "v"]);
        assert_eq!(c.cmd(&["DELEX", "gone", "IFEQ", "v"]), int(1));
        c.cmd(&["SET", "cas", "old"]);
        assert_eq!(
            c.cmd(&["SET", "cas", "new", "IFEQ", "old", "PX", "500000"]),
            b"+OK\r\n"
        );
        let cas_deadline = c.cmd(&["PEXPIRETIME", "cas"]);
        drop(server); // SIGKILL
        let server = Server::ruvio_with(PortMode::Forward, shards, &args);
        let mut c = server.raw();
        assert_eq!(c.cmd(&["MGET", &a, &b]), b"*2\r\n$1\r\n1\r\n$1\r\n2\r\n");
        assert_eq!(c.cmd(&["PEXPIRETIME", &b]), deadline, "{shards} shard(s)");
        assert_eq!(c.cmd(&["EXISTS", "gone"]), int(0));
        assert_eq!(c.cmd(&["GET", "cas"]), bulk_bytes("new"));
        assert_eq!(c.cmd(&["PEXPIRETIME", "cas"]), cas_deadline);
        drop(server);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
