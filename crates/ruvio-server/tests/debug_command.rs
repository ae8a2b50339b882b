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
}

/// What DEBUG RELOAD shows other clients on the server at `port`, whose keys are
/// named for `shards` shards: a WATCH of a key that exists (one on each shard)
/// fails its EXEC and a WATCH of missing keys does not, as a flush would (Redis
/// empties its databases before it loads the dump back); a RESP3 tracking client
/// gets one null invalidation.
fn reload_signals(port: u16, shards: usize) -> Vec<String> {
    let mut conn = RawConn::connect(port);
    conn.cmd(&["flushall"]);
    let present = keys_per_shard("present", shards);
    let missing = keys_per_shard("missing", shards);
    for key in &present {
        conn.cmd(&["set", key, "v"]);
    }
    let mut watchers: Vec<RawConn> = Vec::new();
    for key in &present {
        let mut watcher = RawConn::connect(port);
        assert_eq!(watcher.cmd(&["watch", key]), b"+OK\r\n");
        watchers.push(watcher);
    }
    let mut of_missing = RawConn::connect(port);
    let mut watch = vec!["watch"];
    watch.extend(missing.iter().map(String::as_str));
    assert_eq!(of_missing.cmd(&watch), b"+OK\r\n");
    watchers.push(of_missing);
    let mut tracker = RawConn::connect(port);
    tracker.cmd(&["hello", "3"]);
    assert_eq!(tracker.cmd(&["client", "tracking", "on"]), b"+OK\r\n");
    tracker.cmd(&["get", &present[0]]);
    let mut out = vec![format!("reload: {}", show(&conn.cmd(&["debug", "reload"])))];
    for (i, watcher) in watchers.iter_mut().enumerate() {
        assert_eq!(watcher.cmd(&["multi"]), b"+OK\r\n");
        assert_eq!(watcher.cmd(&["ping"]), b"+QUEUED\r\n");
        out.push(format!("exec {i}: {}", show(&watcher.cmd(&["exec"]))));
    }
    out.push(format!("tracker: {}", show(&tracker.read_reply())));
    out.push(format!("then: {}", show(&tracker.cmd(&["ping"]))));
    out
}

#[test]
fn debug_reload_touches_watchers_and_trackers_as_redis() {
    let Some(_) = require_redis_server("debug_command") else {
        return;
    };
    for shards in [1, 2, 3] {
        let redis = Server::redis();
        let expected = reload_signals(redis.port(), shards);
        assert!(
            expected.iter().any(|l| l.ends_with(r#"*-1\r\n""#)),
            "Redis failed a watcher's EXEC: {expected:#?}"
        );
        let ruvio = Server::ruvio(PortMode::Forward, shards);
        assert_eq!(
            reload_signals(ruvio.port(), shards),
            expected,
            "{shards} shard(s)"
        );
    }
}

/// Keys of every type on shard `shard` of `shards` (a hash tag of that shard),
/// each with a TTL but the string `plain`; returns their names.
fn load_shard(conn: &mut RawConn, shard: usize, shards: usize) -> Vec<String> {
    let tag = hash_tag_on_shard(shard, shards);
    let key = |name: &str| format!("{{{tag}}}{name}");
    let members: Vec<String> = (0..200).map(|i| format!("m{i}")).collect();
    let mut commands: Vec<Vec<String>> = vec![
        vec!["set".into(), key("plain"), "v".into()],
        vec!["set".into(), key("str"), "12345".into()],
        vec!["rpush".into(), key("list"), "a".into(), "1".into()],
        vec!["sadd".into(), key("intset"), "1".into(), "2".into()],
        vec!["zadd".into(), key("zset"), "1.5".into(), "a".into()],
        vec!["hset".into(), key("hash"), "f".into(), "v".into()],
        vec![
            "xadd".into(),
            key("stream"),
            "1-1".into(),
            "f".into(),
            "v".into(),
        ],
        vec!["pfadd".into(), key("hll"), "a".into(), "b".into()],
    ];
    for (command, name) in [("rpush", "biglist"), ("sadd", "bigset")] {
        let mut args = vec![command.to_string(), key(name)];
        args.extend(members.iter().cloned());
        commands.push(args);
    }
    let mut big_zset = vec!["zadd".to_string(), key("bigzset")];
    let mut big_hash = vec!["hset".to_string(), key("bighash")];
    for (i, m) in members.iter().enumerate() {
        big_zset.extend([i.to_string(), m.clone()]);
        big_hash.extend([m.clone(), i.to_string()]);
    }
    commands.extend([big_zset, big_hash]);
    let mut names = Vec::new();
    for args in commands {
        let reply = conn.cmd(&args);
        assert!(!reply.starts_with(b"-"), "{args:?}: {}", show(&reply));
        if args[1] != key("plain") {
            assert_eq!(conn.cmd(&["expire", &args[1], "1000"]), b":1\r\n");
        }
        names.push(args[1].clone());
    }
    names
}

/// A reloaded key's TTL is still there (about 1000 s) unless it had none.
fn assert_ttls_kept(conn: &mut RawConn, names: &[String]) {
    for name in names {
        let ttl = conn.cmd(&["ttl", name]);
        let want_none = name.ends_with("plain");
        let kept = if want_none {
            ttl == b":-1\r\n"
        } else {
            ttl.starts_with(b":9") || ttl == b":1000\r\n"
        };
        assert!(kept, "{name}: {}", show(&ttl));
    }
}

/// Rounds of the other connection's cross-shard writes while DEBUG RELOAD runs.
const TRAFFIC_ROUNDS: usize = 400;

/// Cross-shard traffic from its own connection: each round an MSET of one key on
/// every shard (all set to the round's number) and a RENAME of the token to the
/// next shard's name, so exactly one token name exists once it is done.
fn traffic(port: u16, mset_keys: Vec<String>, tokens: Vec<String>) {
    let mut conn = RawConn::connect(port);
    for round in 0..TRAFFIC_ROUNDS {
        let value = round.to_string();
        let mut mset = vec!["mset".to_string()];
        for key in &mset_keys {
            mset.extend([key.clone(), value.clone()]);
        }
        assert_eq!(conn.cmd(&mset), b"+OK\r\n", "round {round}");
        let from = &tokens[round % tokens.len()];
        let to = &tokens[(round + 1) % tokens.len()];
        assert_eq!(
            conn.cmd(&["rename", from, to]),
            b"+OK\r\n",
            "round {round}: {from} -> {to}"
        );
    }
}

/// DEBUG DIGEST once the server answers it (a restarted one loads its log first).
fn digest_when_loaded(conn: &mut RawConn) -> Vec<u8> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let digest = conn.cmd(&["debug", "digest"]);
        if !digest.starts_with(b"-LOADING") || Instant::now() > deadline {
            return digest;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Forward mode with 2 and 3 shards: every shard reloads its keys through their
/// RDB form (keys of every type on every shard, with TTLs): DEBUG DIGEST (which
/// covers TTLs) and DBSIZE are the same after; while another connection runs
/// cross-shard MSETs and RENAMEs (their keys out on loan between shards), repeated
/// reloads all answer `+OK` and lose or duplicate no key. With 3 shards and a log
/// (`everysec`), a restart replays to the same digest: the reload logged nothing
/// that changes the data.
#[test]
fn debug_reload_reloads_every_shard_in_forward_mode() {
    for shards in [2, 3] {
        let dir = std::env::temp_dir().join(format!(
            "ruvio-debug-reload-{}-{shards}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        let logged = ["--dir", dir.to_str().unwrap(), "--durability", "everysec"];
        let extra: &[&str] = if shards == 3 { &logged } else { &[] };
        let ruvio = Server::ruvio_with(PortMode::Forward, shards, extra);
        let mut conn = ruvio.raw();
        load_every_type(&mut conn);
        let mut names = Vec::new();
        for shard in 0..shards {
            names.extend(load_shard(&mut conn, shard, shards));
        }
        let size = conn.cmd(&["dbsize"]);
        let digest = conn.cmd(&["debug", "digest"]);
        assert_eq!(
            conn.cmd(&["debug", "reload"]),
            b"+OK\r\n",
            "{shards} shards"
        );
        assert_eq!(conn.cmd(&["debug", "digest"]), digest, "{shards} shards");
        assert_eq!(conn.cmd(&["dbsize"]), size, "{shards} shards");
        assert_ttls_kept(&mut conn, &names);
        // The connections of every shard reload the whole server.
        let mut last = conn_on_shard(&ruvio, shards - 1);
        assert_eq!(last.cmd(&["debug", "reload"]), b"+OK\r\n");
        assert_eq!(last.cmd(&["debug", "digest"]), digest);

        // Cross-shard writes meanwhile.
        let tokens = keys_per_shard("token", shards);
        let mset_keys = keys_per_shard("mset", shards);
        assert_eq!(conn.cmd(&["set", &tokens[0], "the token"]), b"+OK\r\n");
        let writer = {
            let (port, mset_keys, tokens) = (ruvio.port(), mset_keys.clone(), tokens.clone());
            std::thread::spawn(move || traffic(port, mset_keys, tokens))
        };
        let mut reloads = 0;
        while !writer.is_finished() {
            assert_eq!(
                conn.cmd(&["debug", "reload"]),
                b"+OK\r\n",
                "{shards} shards"
            );
            reloads += 1;
        }
        writer.join().expect("the traffic's replies were all +OK");
        assert!(reloads > 0);
        assert_eq!(conn.cmd(&["debug", "reload"]), b"+OK\r\n");
        let mut exists = vec!["exists"];
        exists.extend(tokens.iter().map(String::as_str));
        assert_eq!(conn.cmd(&exists), b":1\r\n", "{shards} shards: one token");
        let at = &tokens[TRAFFIC_ROUNDS % shards];
        assert_eq!(conn.cmd(&["get", at]), bulk("the token").into_bytes());
        let last_round = (TRAFFIC_ROUNDS - 1).to_string();
        for key in &mset_keys {
            assert_eq!(conn.cmd(&["get", key]), bulk(&last_round).into_bytes());
        }
        // The MSET keys and the token are the only keys added.
        let before: usize = std::str::from_utf8(&size[1..size.len() - 2])
            .expect("DBSIZE's digits")
            .parse()
            .expect("DBSIZE's digits");
        let want = format!(":{}\r\n", before + shards + 1);
        assert_eq!(conn.cmd(&["dbsize"]), want.as_bytes(), "{shards} shards");
        assert_ttls_kept(&mut conn, &names);
        let digest = conn.cmd(&["debug", "digest"]);
        assert!(ruvio.logs().contains("DB reloaded by DEBUG RELOAD"));
        if shards == 3 {
            // The log's last writes are on disk (everysec) before the kill.
            std::thread::sleep(Duration::from_millis(1500));
            drop(ruvio);
            let again = Server::ruvio_with(PortMode::Forward, shards, extra);
            assert_eq!(
                digest_when_loaded(&mut again.raw()),
                digest,
                "after a restart"
            );
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
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
