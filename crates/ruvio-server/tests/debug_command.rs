//! DEBUG as Redis 7.0 answers it: SET-ACTIVE-EXPIRE (expired keys stay until read
//! while it is 0, go in the background again with 1), and the errors of a DEBUG
//! whose subcommand Redis' table does not list (an unknown one, a wrong argument
//! count: `addReplySubcommandSyntaxError`). Differential against redis-server, and
//! Ruvio with 1 and 2 shards in forward mode (keys of both shards).

mod common;

use common::*;
use std::time::{Duration, Instant};

/// Keys with a short TTL, spread over the shards.
const KEYS: usize = 20;

/// DBSIZE once it equals `want`, or what it is after 3 s.
fn dbsize_until(conn: &mut RawConn, want: &[u8]) -> Vec<u8> {
    let deadline = Instant::now() + Duration::from_secs(3);
    loop {
        let size = conn.cmd(&["dbsize"]);
        if size == want || Instant::now() > deadline {
            return size;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The transcript of the scenario on the server at `port`.
fn run(port: u16) -> Vec<String> {
    let mut conn = RawConn::connect(port);
    let mut transcript = Vec::new();
    let mut say =
        |args: &[&str], reply: Vec<u8>| transcript.push(format!("{args:?}: {}", show(&reply)));
    for args in [
        &["debug", "set-active-expire"][..],
        &["debug", "set-active-expire", "0", "1"],
        &["debug", "nosuch"],
        &["debug", "nosuch", "arg"],
        &["debug", "sleep"],
        &["flushall"],
        &["debug", "set-active-expire", "0"],
    ] {
        let reply = conn.cmd(args);
        say(args, reply);
    }
    for i in 0..KEYS {
        let key = format!("k{i}");
        let reply = conn.cmd(&["set", &key, "v", "px", "100"]);
        say(&["set", "k..", "v", "px", "100"], reply);
    }
    // Past their TTL, unread: still counted (no background expiry).
    std::thread::sleep(Duration::from_millis(500));
    let size = conn.cmd(&["dbsize"]);
    say(&["dbsize"], size);
    // A read expires the one it reads.
    let read = conn.cmd(&["get", "k0"]);
    say(&["get", "k0"], read);
    let size = conn.cmd(&["dbsize"]);
    say(&["dbsize"], size);
    // `atoi`: a number with trailing bytes turns it on.
    let on = conn.cmd(&["debug", "set-active-expire", "1x"]);
    say(&["debug", "set-active-expire", "1x"], on);
    let size = dbsize_until(&mut conn, b":0\r\n");
    say(&["dbsize (background expiry on)"], size);
    transcript
}

#[test]
fn debug_set_active_expire_and_errors_as_redis() {
    let Some(_) = require_redis_server("debug_command") else {
        return;
    };
    let redis = Server::redis();
    let expected = run(redis.port());
    assert!(
        expected
            .iter()
            .any(|l| l.starts_with("[\"dbsize\"]: \":20")),
        "Redis kept the expired keys: {expected:#?}"
    );
    for shards in [1, 2] {
        let ruvio = Server::ruvio(PortMode::Forward, shards);
        assert_eq!(run(ruvio.port()), expected, "{shards} shard(s)");
    }
}

/// A dataset with every type in each of its encodings (small and big, integers
/// and text), keys with and without a TTL, in two databases.
fn load_every_type(conn: &mut RawConn) {
    let big: Vec<String> = (0..300).map(|i| format!("member-{i}")).collect();
    let big_ints: Vec<String> = (0..600).map(|i| (i * 7).to_string()).collect();
    conn.cmd(&["flushall"]);
    for db in ["1", "0"] {
        conn.cmd(&["select", db]);
        let mut run = |args: Vec<&str>| {
            let reply = conn.cmd(&args);
            assert!(!reply.starts_with(b"-"), "{args:?}: {}", show(&reply));
        };
        run(vec!["set", "str:embstr", "hello"]);
        run(vec!["set", "str:int", "-12345"]);
        run(vec!["set", "str:raw", &"x".repeat(100)]);
        run(vec!["set", "str:ttl", "v", "ex", "1000"]);
        run(vec!["rpush", "list:small", "a", "1", "b", "-2", ""]);
        let mut big_list = vec!["rpush", "list:big"];
        big_list.extend(big.iter().map(String::as_str));
        run(big_list);
        let huge: Vec<String> = (0..3000).map(|i| format!("element-{i}")).collect();
        let mut huge_list = vec!["rpush", "list:huge"];
        huge_list.extend(huge.iter().map(String::as_str));
        run(huge_list);
        run(vec!["sadd", "set:intset", "3", "1", "2", "-100"]);
        run(vec!["sadd", "set:small", "a", "b", "1"]);
        let mut big_ints_set = vec!["sadd", "set:bigints"];
        big_ints_set.extend(big_ints.iter().map(String::as_str));
        run(big_ints_set);
        let mut big_set = vec!["sadd", "set:big"];
        big_set.extend(big.iter().map(String::as_str));
        run(big_set);
        run(vec![
            "zadd",
            "zset:small",
            "1",
            "a",
            "2.5",
            "b",
            "-0.1",
            "c",
            "1e20",
            "12",
        ]);
        let mut big_zset = vec!["zadd".to_string(), "zset:big".to_string()];
        for (i, m) in big.iter().enumerate() {
            big_zset.push(format!("{}", i as f64 / 3.0));
            big_zset.push(m.clone());
        }
        run(big_zset.iter().map(String::as_str).collect());
        run(vec!["hset", "hash:small", "f1", "v1", "f2", "2", "3", "v3"]);
        let mut big_hash = vec!["hset", "hash:big"];
        for m in &big {
            big_hash.push(m);
            big_hash.push(m);
        }
        run(big_hash);
        // A value past hash-max-listpack-value: a hashtable whatever the count limit.
        run(vec!["hset", "hash:long", "f", &"v".repeat(100), "g", "1"]);
        run(vec!["xadd", "stream", "1-1", "f", "v", "g", "w"]);
        run(vec!["xadd", "stream", "2-0", "f", "v2"]);
        run(vec!["xadd", "stream", "3-5", "other", "fields", "x", "1"]);
        run(vec!["expire", "hash:small", "5000"]);
    }
}

/// DEBUG DIGEST and DIGEST-VALUE of every key, and of keys that are missing.
fn digests(port: u16) -> Vec<String> {
    let mut conn = RawConn::connect(port);
    let mut out = Vec::new();
    conn.cmd(&["flushall"]);
    out.push(format!("empty: {}", show(&conn.cmd(&["debug", "digest"]))));
    load_every_type(&mut conn);
    let keys = [
        "str:embstr",
        "str:int",
        "str:raw",
        "str:ttl",
        "list:small",
        "list:big",
        "set:intset",
        "set:small",
        "set:bigints",
        "set:big",
        "zset:small",
        "zset:big",
        "hash:small",
        "hash:big",
        "stream",
        "missing",
    ];
    for db in ["0", "1"] {
        conn.cmd(&["select", db]);
        for key in keys {
            let d = conn.cmd(&["debug", "digest-value", key]);
            out.push(format!("db{db} {key}: {}", show(&d)));
        }
    }
    conn.cmd(&["select", "0"]);
    let mut several = vec!["debug", "digest-value"];
    several.extend(keys);
    out.push(format!("several: {}", show(&conn.cmd(&several))));
    out.push(format!(
        "none: {}",
        show(&conn.cmd(&["debug", "digest-value"]))
    ));
    out.push(format!(
        "dataset: {}",
        show(&conn.cmd(&["debug", "digest"]))
    ));
    // The same data in another database digests differently; a change shows.
    conn.cmd(&["select", "1"]);
    conn.cmd(&["flushdb"]);
    out.push(format!(
        "db0 only: {}",
        show(&conn.cmd(&["debug", "digest"]))
    ));
    conn.cmd(&["select", "0"]);
    conn.cmd(&["persist", "hash:small"]);
    out.push(format!(
        "persisted: {}",
        show(&conn.cmd(&["debug", "digest"]))
    ));
    out.push(format!(
        "arity: {}",
        show(&conn.cmd(&["debug", "digest", "x"]))
    ));
    out
}

#[test]
fn debug_digest_and_digest_value_equal_redis() {
    let Some(_) = require_redis_server("debug_command") else {
        return;
    };
    let redis = Server::redis();
    let expected = digests(redis.port());
    for shards in [1, 2] {
        let ruvio = Server::ruvio(PortMode::Forward, shards);
        let got = digests(ruvio.port());
        for (want, have) in expected.iter().zip(&got) {
            assert_eq!(have, want, "{shards} shard(s)");
        }
        assert_eq!(got.len(), expected.len());
    }
}

/// DEBUG OBJECT's line with the parts that cannot agree between two servers (the
/// value's address, the LRU clock reading) masked; the idle seconds must be 0 or 1.
fn masked_object_line(reply: &[u8]) -> String {
    let text = String::from_utf8_lossy(reply).into_owned();
    text.split(' ')
        .map(|field| match field.split_once(':') {
            Some(("at", _)) => "at:ADDR".to_string(),
            Some(("lru", _)) => "lru:CLOCK".to_string(),
            Some(("lru_seconds_idle", idle)) => {
                let idle = idle.trim_end();
                assert!(idle == "0" || idle == "1", "{text}");
                "lru_seconds_idle:IDLE".to_string()
            }
            _ => field.to_string(),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// DEBUG OBJECT over the keys whose encoding Redis 7.0 and Ruvio name alike (small
/// lists and small non-integer sets are `listpack` in Ruvio as in Redis 7.2).
fn objects(port: u16) -> Vec<String> {
    let mut conn = RawConn::connect(port);
    load_every_type(&mut conn);
    conn.cmd(&["set", "str:shared", "42"]);
    let keys = [
        "str:embstr",
        "str:int",
        "str:raw",
        "str:ttl",
        "str:shared",
        "list:huge",
        "set:intset",
        "set:bigints",
        "set:big",
        "zset:small",
        "zset:big",
        "hash:small",
        "hash:long",
        "stream",
        "missing",
    ];
    let mut out: Vec<String> = keys
        .iter()
        .map(|k| {
            format!(
                "{k}: {}",
                masked_object_line(&conn.cmd(&["debug", "object", k]))
            )
        })
        .collect();
    out.push(format!("arity: {}", show(&conn.cmd(&["debug", "object"]))));
    out
}

#[test]
fn debug_object_equals_redis_but_address_and_clock() {
    let Some(_) = require_redis_server("debug_command") else {
        return;
    };
    let redis = Server::redis();
    let expected = objects(redis.port());
    for shards in [1, 2] {
        let ruvio = Server::ruvio(PortMode::Forward, shards);
        let got = objects(ruvio.port());
        for (want, have) in expected.iter().zip(&got) {
            assert_eq!(have, want, "{shards} shard(s)");
        }
        assert_eq!(got.len(), expected.len());
    }
}

/// DEBUG LOG, ERROR, LISTPACK, QUICKLIST and subcommands Redis 7.0 does not have.
fn harmless(port: u16) -> Vec<String> {
    let mut conn = RawConn::connect(port);
    load_every_type(&mut conn);
    let cases: &[&[&str]] = &[
        &["debug", "log", "a step of the test"],
        &["debug", "log"],
        &["debug", "error", "something went wrong"],
        &["debug", "error", "-WRONGTYPE made up"],
        &["debug", "error", ""],
        &["debug", "listpack", "zset:small"],
        &["debug", "listpack", "hash:small"],
        &["debug", "listpack", "str:embstr"],
        &["debug", "listpack", "list:huge"],
        &["debug", "listpack", "missing"],
        &["debug", "listpack"],
        &["debug", "quicklist", "list:huge"],
        &["debug", "quicklist", "list:huge", "1"],
        &["debug", "quicklist", "hash:big"],
        &["debug", "quicklist", "missing"],
        &["debug", "quicklist", "list:huge", "1", "2"],
        &["debug", "quicklist-packed-threshold", "100"],
        &["debug", "quicklist-packed-threshold", "1kb"],
        &["debug", "quicklist-packed-threshold", "0"],
        &["debug", "quicklist-packed-threshold", "4gb"],
        &["debug", "quicklist-packed-threshold", "5gb"],
        &["debug", "quicklist-packed-threshold", "-1"],
        &["debug", "quicklist-packed-threshold", "lots"],
        &["debug", "quicklist-packed-threshold", "1GB"],
        &["debug", "quicklist-packed-threshold"],
        &["debug", "jmap"],
        &["debug", "help", "extra"],
    ];
    cases
        .iter()
        .map(|args| format!("{args:?}: {}", show(&conn.cmd(args))))
        .collect()
}

#[test]
fn debug_log_error_listpack_quicklist_as_redis() {
    let Some(_) = require_redis_server("debug_command") else {
        return;
    };
    let redis = Server::redis();
    let expected = harmless(redis.port());
    for shards in [1, 2] {
        let ruvio = Server::ruvio(PortMode::Forward, shards);
        let got = harmless(ruvio.port());
        for (want, have) in expected.iter().zip(&got) {
            assert_eq!(have, want, "{shards} shard(s)");
        }
        assert!(ruvio.logs().contains("DEBUG LOG: a step of the test"));
    }
}

/// DEBUG RELOAD keeps the data (the digest before and after), drops keys already
/// expired, keeps TTLs, and refuses unknown options with Redis's text.
fn reload(port: u16) -> Vec<String> {
    let mut conn = RawConn::connect(port);
    load_every_type(&mut conn);
    conn.cmd(&["debug", "set-active-expire", "0"]);
    conn.cmd(&["set", "gone", "v", "px", "1"]);
    std::thread::sleep(Duration::from_millis(20));
    let mut out = Vec::new();
    let mut say = |what: &str, reply: Vec<u8>| out.push(format!("{what}: {}", show(&reply)));
    say("dbsize before", conn.cmd(&["dbsize"]));
    let before = conn.cmd(&["debug", "digest"]);
    say("reload", conn.cmd(&["debug", "reload"]));
    say(
        "same digest",
        (conn.cmd(&["debug", "digest"]) == before)
            .to_string()
            .into_bytes(),
    );
    say("dbsize after", conn.cmd(&["dbsize"]));
    say(
        "ttl kept",
        (conn.cmd(&["ttl", "str:ttl"]) != b":-1\r\n")
            .to_string()
            .into_bytes(),
    );
    say(
        "value",
        conn.cmd(&["zrange", "zset:small", "0", "-1", "withscores"]),
    );
    say("bad option", conn.cmd(&["debug", "reload", "fast"]));
    conn.cmd(&["debug", "set-active-expire", "1"]);
    out
}

#[test]
fn debug_reload_keeps_the_data_as_redis() {
    let Some(_) = require_redis_server("debug_command") else {
        return;
    };
    let redis = Server::redis();
    let expected = reload(redis.port());
    let ruvio = Server::ruvio(PortMode::Forward, 1);
    assert_eq!(reload(ruvio.port()), expected);
    assert!(ruvio.logs().contains("DB reloaded by DEBUG RELOAD"));
    // Per-shard mode: each node reloads its own keys.
    let nodes = Server::per_shard(2);
    let tag = hash_tag_on_shard(1, 2);
    let mut node = RawConn::connect(nodes.shard_port(1));
    for i in 0..50 {
        node.cmd(&["set", &format!("{{{tag}}}k{i}"), &i.to_string()]);
    }
    let before = node.cmd(&["debug", "digest"]);
    assert_eq!(node.cmd(&["debug", "reload"]), b"+OK\r\n");
    assert_eq!(node.cmd(&["debug", "digest"]), before);
    assert_eq!(node.cmd(&["dbsize"]), b":50\r\n");
    // Forward mode with several shards refuses (keys may be out on loan).
    let two = Server::ruvio(PortMode::Forward, 2);
    let refused = RawConn::connect(two.port()).cmd(&["debug", "reload"]);
    assert!(
        refused.starts_with(b"-ERR DEBUG RELOAD reloads one shard"),
        "{}",
        show(&refused)
    );
}

/// DEBUG POPULATE's keys, values, skipped existing keys, cut prefixes and errors.
fn populate(port: u16) -> Vec<String> {
    let mut conn = RawConn::connect(port);
    conn.cmd(&["flushall"]);
    conn.cmd(&["set", "key:1", "mine"]);
    let long_prefix = "p".repeat(200);
    let cases: Vec<Vec<String>> = [
        &["debug", "populate", "100"][..],
        &["dbsize"],
        &["get", "key:1"],
        &["get", "key:99"],
        &["debug", "populate", "10", "short", "3"],
        &["get", "short:9"],
        &["debug", "populate", "5", "padded", "12"],
        &["get", "padded:4"],
        &["debug", "populate", "2", &long_prefix],
        &["dbsize"],
        &["debug", "populate", "0"],
        &["debug", "populate", "-1"],
        &["debug", "populate", "many"],
        &["debug", "populate", "1", "k", "-5"],
        &["debug", "populate", "1", "k", "x"],
        &["debug", "populate", "1", "a", "1", "extra"],
        &["debug", "populate"],
    ]
    .iter()
    .map(|c| c.iter().map(|s| s.to_string()).collect())
    .collect();
    let mut out: Vec<String> = cases
        .iter()
        .map(|args| format!("{}: {}", args.join(" "), show(&conn.cmd(args))))
        .collect();
    conn.cmd(&["select", "3"]);
    out.push(format!(
        "db3: {}",
        show(&conn.cmd(&["debug", "populate", "7"]))
    ));
    out.push(format!("db3 size: {}", show(&conn.cmd(&["dbsize"]))));
    out
}

#[test]
fn debug_populate_as_redis() {
    let Some(_) = require_redis_server("debug_command") else {
        return;
    };
    let redis = Server::redis();
    let expected = populate(redis.port());
    for shards in [1, 2] {
        let ruvio = Server::ruvio(PortMode::Forward, shards);
        let got = populate(ruvio.port());
        for (want, have) in expected.iter().zip(&got) {
            assert_eq!(have, want, "{shards} shard(s)");
        }
        assert_eq!(got.len(), expected.len());
    }
}

/// RESTORE of a payload with a wrong CRC-64, refused, then taken once DEBUG
/// SET-SKIP-CHECKSUM-VALIDATION 1 says so, refused again after 0; keys of every
/// shard (the setting reaches them all).
fn skip_checksum(server: &Server, keys: &[String]) -> Vec<String> {
    let mut con = server.client();
    let mut out = Vec::new();
    let _: () = redis::cmd("FLUSHALL").query(&mut con).unwrap();
    let _: () = redis::cmd("RPUSH")
        .arg("src")
        .arg(&["a", "b", "c"])
        .query(&mut con)
        .unwrap();
    let mut payload: Vec<u8> = redis::cmd("DUMP").arg("src").query(&mut con).unwrap();
    *payload.last_mut().unwrap() ^= 0xff;
    let restore = |con: &mut redis::Connection, key: &str| -> String {
        let r: redis::RedisResult<String> = redis::cmd("RESTORE")
            .arg(key)
            .arg(0)
            .arg(&payload[..])
            .query(con);
        match r {
            Ok(v) => v,
            Err(e) => format!("error: {e}"),
        }
    };
    for key in keys {
        out.push(format!("strict {key}: {}", restore(&mut con, key)));
    }
    let on: String = redis::cmd("DEBUG")
        .arg("SET-SKIP-CHECKSUM-VALIDATION")
        .arg("1")
        .query(&mut con)
        .unwrap();
    out.push(format!("skip on: {on}"));
    for key in keys {
        out.push(format!("skipping {key}: {}", restore(&mut con, key)));
        let list: Vec<String> = redis::cmd("LRANGE")
            .arg(key)
            .arg(0)
            .arg(-1)
            .query(&mut con)
            .unwrap();
        out.push(format!("{key}: {list:?}"));
        let _: () = redis::cmd("DEL").arg(key).query(&mut con).unwrap();
    }
    let _: String = redis::cmd("DEBUG")
        .arg("SET-SKIP-CHECKSUM-VALIDATION")
        .arg("0")
        .query(&mut con)
        .unwrap();
    for key in keys {
        out.push(format!("strict again {key}: {}", restore(&mut con, key)));
    }
    // FUNCTION RESTORE checks the same way.
    let code = "#!lua name=skiplib\nredis.register_function('skipfn', function() return 7 end)";
    let _: String = redis::cmd("FUNCTION")
        .arg("LOAD")
        .arg(code)
        .query(&mut con)
        .unwrap();
    let mut dump: Vec<u8> = redis::cmd("FUNCTION").arg("DUMP").query(&mut con).unwrap();
    *dump.last_mut().unwrap() ^= 0xff;
    let _: () = redis::cmd("FUNCTION").arg("FLUSH").query(&mut con).unwrap();
    let function_restore = |con: &mut redis::Connection| -> String {
        let r: redis::RedisResult<String> = redis::cmd("FUNCTION")
            .arg("RESTORE")
            .arg(&dump[..])
            .query(con);
        r.unwrap_or_else(|e| format!("error: {e}"))
    };
    out.push(format!("function strict: {}", function_restore(&mut con)));
    let _: String = redis::cmd("DEBUG")
        .arg("SET-SKIP-CHECKSUM-VALIDATION")
        .arg("1")
        .query(&mut con)
        .unwrap();
    out.push(format!("function skipping: {}", function_restore(&mut con)));
    for key in keys {
        let r: i64 = redis::cmd("FCALL")
            .arg("skipfn")
            .arg(1)
            .arg(key)
            .query(&mut con)
            .unwrap();
        out.push(format!("fcall {key}: {r}"));
    }
    let _: String = redis::cmd("DEBUG")
        .arg("SET-SKIP-CHECKSUM-VALIDATION")
        .arg("0")
        .query(&mut con)
        .unwrap();
    let _: () = redis::cmd("FUNCTION").arg("FLUSH").query(&mut con).unwrap();
    out
}

#[test]
fn debug_set_skip_checksum_validation_as_redis() {
    let Some(_) = require_redis_server("debug_command") else {
        return;
    };
    let keys = keys_per_shard("restored", 2);
    let redis = Server::redis();
    let expected = skip_checksum(&redis, &keys);
    assert!(
        expected.iter().any(|l| l.contains("\"a\", \"b\", \"c\"")),
        "{expected:#?}"
    );
    for shards in [1, 2] {
        let ruvio = Server::ruvio(PortMode::Forward, shards);
        assert_eq!(skip_checksum(&ruvio, &keys), expected, "{shards} shard(s)");
    }
}

/// DEBUG stays admin-only: a user without `@admin` is refused every DEBUG
/// subcommand with NOPERM (Ruvio names the subcommand, `debug|sleep`, as DEBUG
/// is a container of rows here; redis-server refuses DEBUG as a whole unless
/// `enable-debug-command` allows it, docs/config.md), and DEBUG is in the
/// `@admin` and `@dangerous` categories.
#[test]
fn debug_is_admin_only() {
    let server = Server::ruvio(PortMode::Forward, 2);
    let mut admin = server.raw();
    assert_eq!(
        admin.cmd(&["ACL", "SETUSER", "plain", "on", "nopass", "+@all", "-@admin", "~*"]),
        b"+OK\r\n"
    );
    let mut plain = server.raw();
    assert_eq!(plain.cmd(&["AUTH", "plain", "x"]), b"+OK\r\n");
    for (args, name) in [
        (&["DEBUG", "SLEEP", "0"][..], "debug|sleep"),
        (&["DEBUG", "OBJECT", "k"], "debug|object"),
        (&["DEBUG", "RELOAD"], "debug|reload"),
    ] {
        let want = format!("-NOPERM this user has no permissions to run the '{name}' command\r\n");
        assert_eq!(show(&plain.cmd(args)), show(want.as_bytes()), "{args:?}");
    }
    for category in ["admin", "dangerous"] {
        let listed = admin.cmd(&["COMMAND", "LIST", "FILTERBY", "ACLCAT", category]);
        assert!(contains(&listed, b"$5\r\ndebug\r\n"), "@{category}");
    }
    assert_eq!(admin.cmd(&["DEBUG", "SLEEP", "0"]), b"+OK\r\n");
}
