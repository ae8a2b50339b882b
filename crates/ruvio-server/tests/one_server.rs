//! Forward mode is one Redis to a plain client: clients, statistics and the random
//! key are server-wide, whichever shard each connection landed on. Every test runs
//! with 1, 2 and 4 shards (4 shards on this 2-CPU machine share CPUs, which forward
//! mode allows), and each passes against a real redis-server too
//! (`RUVIO_TEST_TARGET=redis`).
//!
//! Connections land on shards by the kernel's SO_REUSEPORT hash, so a handful of
//! connections covers several shards; the tests do not depend on which.

mod common;

use common::*;
use redis::{Connection, FromRedisValue, Value};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// Connections each test opens: with 4 shards, enough that several shards get some.
const CLIENTS: usize = 12;

fn q<T: FromRedisValue>(con: &mut Connection, args: &[&str]) -> T {
    let mut cmd = redis::cmd(args[0]);
    for arg in &args[1..] {
        cmd.arg(*arg);
    }
    cmd.query(con).unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

/// The value of `field` in INFO `section` (as a string), if present.
fn info_field(con: &mut Connection, section: &str, field: &str) -> Option<String> {
    let text: String = q(con, &["INFO", section]);
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")).map(str::to_string))
}

/// `key=value` pairs of one INFO line's value (`calls=3,usec=...`).
fn info_pairs(value: &str) -> BTreeMap<String, String> {
    value
        .split(',')
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// Named connections c0, c1 ... and their client ids.
fn named_clients(server: &Server) -> Vec<(Connection, i64)> {
    (0..CLIENTS)
        .map(|i| {
            let mut con = server.client();
            let _: () = q(&mut con, &["CLIENT", "SETNAME", &format!("c{i}")]);
            let id: i64 = q(&mut con, &["CLIENT", "ID"]);
            (con, id)
        })
        .collect()
}

/// Poll (a functional wait, not a timing assertion) until `done` holds or 5 s pass.
fn eventually(mut done: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        if done() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    false
}

fn clients_everywhere(shards: usize) {
    let server = Server::forward(shards);
    let mut clients = named_clients(&server);
    let mut admin = server.client();
    let list: String = q(&mut admin, &["CLIENT", "LIST"]);
    let lines: Vec<&str> = list.lines().collect();
    assert_eq!(lines.len(), CLIENTS + 1, "{list}");
    let ids: Vec<i64> = lines
        .iter()
        .map(|l| l["id=".len()..l.find(' ').unwrap()].parse().unwrap())
        .collect();
    assert!(
        ids.windows(2).all(|w| w[0] < w[1]),
        "ordered by id: {ids:?}"
    );
    for (i, (_, id)) in clients.iter().enumerate() {
        let line = lines
            .iter()
            .find(|l| l.starts_with(&format!("id={id} ")))
            .unwrap();
        assert!(line.contains(&format!(" name=c{i} ")), "{line}");
    }

    // CLIENT LIST ID picks clients of any shard.
    let wanted = format!("{}", clients[5].1);
    let one: String = q(&mut admin, &["CLIENT", "LIST", "ID", &wanted, "999999"]);
    assert_eq!(one.lines().count(), 1, "{one}");
    assert!(one.contains(" name=c5 "), "{one}");

    // CLIENT KILL ID, new syntax: the count; the victim's connection is closed.
    let victim = clients[3].1.to_string();
    assert_eq!(q::<i64>(&mut admin, &["CLIENT", "KILL", "ID", &victim]), 1);
    assert_eq!(q::<i64>(&mut admin, &["CLIENT", "KILL", "ID", &victim]), 0);
    assert!(redis::cmd("PING")
        .query::<String>(&mut clients[3].0)
        .is_err());

    // The old syntax by address.
    let line = q::<String>(
        &mut admin,
        &["CLIENT", "LIST", "ID", &clients[4].1.to_string()],
    );
    let addr = line
        .split(' ')
        .find_map(|f| f.strip_prefix("addr="))
        .unwrap()
        .to_string();
    assert_eq!(q::<String>(&mut admin, &["CLIENT", "KILL", &addr]), "OK");
    let gone = redis::cmd("CLIENT")
        .arg("KILL")
        .arg(&addr)
        .query::<String>(&mut admin)
        .unwrap_err();
    assert_eq!(gone.detail(), Some("No such client"), "{gone}");

    // A blocked client on any shard counts in INFO and can be killed.
    let mut blocked = server.client();
    let blocked_id: i64 = q(&mut blocked, &["CLIENT", "ID"]);
    let waiter = std::thread::spawn(move || {
        redis::cmd("BLPOP")
            .arg("nothing")
            .arg(0)
            .query::<Value>(&mut blocked)
    });
    assert!(eventually(|| info_field(
        &mut admin,
        "clients",
        "blocked_clients"
    )
    .as_deref()
        == Some("1")));
    let killed: i64 = q(
        &mut admin,
        &["CLIENT", "KILL", "ID", &blocked_id.to_string()],
    );
    assert_eq!(killed, 1);
    assert!(
        waiter.join().unwrap().is_err(),
        "the blocked client was closed"
    );

    // Everyone but the caller, wherever they are.
    let rest: i64 = q(
        &mut admin,
        &["CLIENT", "KILL", "USER", "default", "SKIPME", "yes"],
    );
    assert_eq!(rest, (CLIENTS - 2) as i64);
    assert!(eventually(|| info_field(
        &mut admin,
        "clients",
        "connected_clients"
    )
    .as_deref()
        == Some("1")));
    assert_eq!(
        info_field(&mut admin, "clients", "blocked_clients").as_deref(),
        Some("0")
    );
    let list: String = q(&mut admin, &["CLIENT", "LIST"]);
    assert_eq!(list.lines().count(), 1, "{list}");
}

#[test]
fn clients_everywhere_1_shard() {
    clients_everywhere(1);
}

#[test]
fn clients_everywhere_2_shards() {
    clients_everywhere(2);
}

#[test]
fn clients_everywhere_4_shards() {
    clients_everywhere(4);
}

fn statistics_everywhere(shards: usize) {
    let server = Server::forward(shards);
    let mut admin = server.client();
    let _: () = q(&mut admin, &["SET", "before", "x"]);
    let _: () = q(&mut admin, &["CONFIG", "RESETSTAT"]);
    let mut clients = named_clients(&server);
    // A fresh connection, maybe on a shard none of the others use, sees it all at
    // once. (Error counts are taken as differences: a client library's handshake
    // may fail a command on some servers, as CLIENT SETINFO on Redis 7.0.)
    let mut fresh = server.client();
    let count_of = |con: &mut Connection, code: &str| -> u64 {
        info_field(con, "errorstats", &format!("errorstat_{code}"))
            .and_then(|v| v.strip_prefix("count=").and_then(|n| n.parse().ok()))
            .unwrap_or(0)
    };
    let errors_of = |con: &mut Connection| -> u64 {
        info_field(con, "stats", "total_error_replies")
            .unwrap()
            .parse()
            .unwrap()
    };
    let (err_before, errors_before) = (count_of(&mut fresh, "ERR"), errors_of(&mut fresh));
    for (i, (con, _)) in clients.iter_mut().enumerate() {
        let key = format!("key:{i}");
        let _: () = q(con, &["SET", &key, "v"]);
        let _: Option<String> = q(con, &["GET", &key]);
        let _: Option<String> = q(con, &["GET", &format!("missing:{i}")]);
        assert!(redis::cmd("LPUSH")
            .arg(&key)
            .arg("x")
            .query::<i64>(con)
            .is_err());
        assert!(redis::cmd("NOSUCHCOMMAND").query::<Value>(con).is_err());
    }
    let set = info_pairs(&info_field(&mut fresh, "commandstats", "cmdstat_set").unwrap());
    assert_eq!(
        set["calls"],
        CLIENTS.to_string(),
        "the SET before RESETSTAT is not counted"
    );
    let lpush = info_pairs(&info_field(&mut fresh, "commandstats", "cmdstat_lpush").unwrap());
    assert_eq!(lpush["failed_calls"], CLIENTS.to_string());
    let setname = info_field(&mut fresh, "commandstats", "cmdstat_client|setname").unwrap();
    assert_eq!(info_pairs(&setname)["calls"], CLIENTS.to_string());
    assert_eq!(count_of(&mut fresh, "WRONGTYPE"), CLIENTS as u64);
    assert_eq!(count_of(&mut fresh, "ERR") - err_before, CLIENTS as u64);
    assert_eq!(errors_of(&mut fresh) - errors_before, 2 * CLIENTS as u64);
    let hits = info_field(&mut fresh, "stats", "keyspace_hits").unwrap();
    assert_eq!(hits, CLIENTS.to_string());
    let misses = info_field(&mut fresh, "stats", "keyspace_misses").unwrap();
    assert_eq!(misses, CLIENTS.to_string());
    let keys = info_field(&mut fresh, "keyspace", "db0").unwrap();
    assert!(
        keys.starts_with(&format!("keys={},", CLIENTS + 1)),
        "{keys}"
    );
    // RESETSTAT on one connection resets every shard's counters.
    let _: () = q(&mut clients[7].0, &["CONFIG", "RESETSTAT"]);
    let mut after = server.client();
    assert_eq!(info_field(&mut after, "commandstats", "cmdstat_set"), None);
    assert_eq!(
        info_field(&mut after, "errorstats", "errorstat_WRONGTYPE"),
        None
    );
    // Only the new connection's handshake errors, if any, are counted.
    assert!(errors_of(&mut after) < 2 * CLIENTS as u64);
}

#[test]
fn statistics_everywhere_1_shard() {
    statistics_everywhere(1);
}

#[test]
fn statistics_everywhere_2_shards() {
    statistics_everywhere(2);
}

#[test]
fn statistics_everywhere_4_shards() {
    statistics_everywhere(4);
}

/// RANDOMKEY is uniform over the keys, not over the shards: 12 keys, whatever the
/// shards hold, each drawn about 1/12 of the time (bounds: more than 6 standard
/// deviations away from the mean, so the test does not flake).
fn randomkey_uniform(shards: usize) {
    let server = Server::forward(shards);
    let mut con = server.client();
    assert_eq!(q::<Value>(&mut con, &["RANDOMKEY"]), Value::Nil);
    let keys: Vec<String> = (0..12).map(|i| format!("rk:{i}")).collect();
    for key in &keys {
        let _: () = q(&mut con, &["SET", key, "v"]);
    }
    let draws = 2400;
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut pipe = redis::pipe();
    for _ in 0..draws {
        pipe.cmd("RANDOMKEY");
    }
    for key in pipe.query::<Vec<String>>(&mut con).unwrap() {
        *seen.entry(key).or_default() += 1;
    }
    assert_eq!(seen.len(), keys.len(), "{seen:?}");
    for (key, n) in &seen {
        assert!(
            (120..=290).contains(n),
            "{key} drawn {n} of {draws}: {seen:?}"
        );
    }
}

#[test]
fn randomkey_uniform_1_shard() {
    randomkey_uniform(1);
}

#[test]
fn randomkey_uniform_2_shards() {
    randomkey_uniform(2);
}

#[test]
fn randomkey_uniform_4_shards() {
    randomkey_uniform(4);
}

/// CLIENT PAUSE WRITE holds the writes of clients on every shard (reads go on)
/// until CLIENT UNPAUSE; then they run, in order.
fn pause_everywhere(shards: usize) {
    let server = Server::forward(shards);
    let mut admin = server.client();
    let clients = named_clients(&server);
    assert_eq!(
        q::<String>(&mut admin, &["CLIENT", "PAUSE", "60000", "WRITE"]),
        "OK"
    );
    let writers: Vec<_> = clients
        .into_iter()
        .enumerate()
        .map(|(i, (mut con, _))| {
            let key = format!("paused:{i}");
            // A read goes on during a WRITE pause.
            assert_eq!(q::<Option<String>>(&mut con, &["GET", &key]), None);
            std::thread::spawn(move || q::<String>(&mut con, &["SET", &key, "v"]))
        })
        .collect();
    // The writes are held: give them time to arrive, then look.
    std::thread::sleep(Duration::from_millis(100));
    for i in 0..CLIENTS {
        let key = format!("paused:{i}");
        assert_eq!(
            q::<Option<String>>(&mut admin, &["GET", &key]),
            None,
            "{key}"
        );
    }
    assert_eq!(q::<String>(&mut admin, &["CLIENT", "UNPAUSE"]), "OK");
    for writer in writers {
        assert_eq!(writer.join().unwrap(), "OK");
    }
    for i in 0..CLIENTS {
        let key = format!("paused:{i}");
        assert_eq!(
            q::<Option<String>>(&mut admin, &["GET", &key]).as_deref(),
            Some("v")
        );
    }
    // ALL holds reads too, until the deadline.
    assert_eq!(
        q::<String>(&mut admin, &["CLIENT", "PAUSE", "200", "ALL"]),
        "OK"
    );
    let mut reader = server.client();
    assert_eq!(
        q::<Option<String>>(&mut reader, &["GET", "paused:0"]).as_deref(),
        Some("v")
    );
    let e = redis::cmd("CLIENT")
        .arg("PAUSE")
        .arg("10")
        .arg("BOGUS")
        .query::<Value>(&mut reader);
    assert_eq!(
        e.unwrap_err().detail(),
        Some("CLIENT PAUSE mode must be WRITE or ALL")
    );
}

#[test]
fn pause_everywhere_1_shard() {
    pause_everywhere(1);
}

#[test]
fn pause_everywhere_2_shards() {
    pause_everywhere(2);
}

#[test]
fn pause_everywhere_4_shards() {
    pause_everywhere(4);
}

/// CONFIG SET is all or nothing, and every connection (any shard) sees the new value
/// as soon as the `+OK` is back.
fn config_everywhere(shards: usize) {
    let server = Server::forward(shards);
    let mut clients = named_clients(&server);
    let hz = |con: &mut Connection| -> String {
        let pair: Vec<String> = q(con, &["CONFIG", "GET", "hz"]);
        pair[1].clone()
    };
    let before = hz(&mut clients[0].0);
    let failed = redis::cmd("CONFIG")
        .arg(&["SET", "hz", "37", "list-max-listpack-size", "abc"])
        .query::<Value>(&mut clients[0].0)
        .unwrap_err();
    assert!(
        failed.detail().unwrap().contains("list-max-listpack-size"),
        "{failed}"
    );
    let dup = redis::cmd("CONFIG")
        .arg(&["SET", "hz", "37", "HZ", "38"])
        .query::<Value>(&mut clients[0].0)
        .unwrap_err();
    assert!(
        dup.detail().unwrap().ends_with("- duplicate parameter"),
        "{dup}"
    );
    for (con, _) in clients.iter_mut() {
        assert_eq!(hz(con), before, "a failed CONFIG SET changed nothing");
    }
    for round in 0..3 {
        let value = (40 + round).to_string();
        let (setter, _) = &mut clients[round * 5 % CLIENTS];
        assert_eq!(q::<String>(setter, &["CONFIG", "SET", "hz", &value]), "OK");
        for (con, _) in clients.iter_mut() {
            assert_eq!(hz(con), value);
        }
    }
}

/// A CONFIG GET reply's (name, value) pairs, sorted: Redis 7.0 answers in the order
/// of a dict whose hash seed is random, so only the set is defined.
fn config_pairs(reply: &[u8]) -> Vec<(String, String)> {
    let common::Value::Array(items) = decode(reply) else {
        panic!("CONFIG GET answered {}", show(reply));
    };
    let mut pairs: Vec<(String, String)> = items
        .chunks(2)
        .map(|pair| (pair[0].text(), pair[1].text()))
        .collect();
    pairs.sort();
    pairs
}

/// `(name, value)` pairs from string pairs, sorted.
fn pairs_of(expected: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut pairs: Vec<(String, String)> = expected
        .iter()
        .map(|&(n, v)| (n.to_string(), v.to_string()))
        .collect();
    pairs.sort();
    pairs
}

/// CONFIG GET with several patterns answers each parameter once, under the name a
/// plain pattern gave it (as typed) or else its own; CONFIG SET with several pairs
/// is all or none, and its errors are Redis 7.0's: the first bad name (unknown,
/// immutable, a duplicate) named as typed, checked before any value; then the first
/// bad value, named in lower case; an odd argument count is a syntax error. Every
/// connection, whichever shard it is on, sees the same values.
fn config_several_at_once(shards: usize) {
    let server = Server::forward(shards);
    let mut conns: Vec<RawConn> = (0..4).map(|_| server.raw()).collect();
    let get = |c: &mut RawConn, args: &[&str]| {
        let mut command = vec!["CONFIG", "GET"];
        command.extend_from_slice(args);
        config_pairs(&c.cmd(&command))
    };
    let c = &mut conns[0];
    assert_eq!(
        get(
            c,
            &["maxmemory", "maxmemory-p*", "MAXMEMORY", "maxmemory-policy"]
        ),
        pairs_of(&[("maxmemory", "0"), ("maxmemory-policy", "noeviction")])
    );
    assert_eq!(
        get(c, &["hz", "MAXMEMORY", "maxmemory"]),
        pairs_of(&[("hz", "10"), ("MAXMEMORY", "0")])
    );
    assert_eq!(
        get(
            c,
            &["zset-max-ziplist-entries", "zset-max-listpack-entries"]
        ),
        pairs_of(&[
            ("zset-max-ziplist-entries", "128"),
            ("zset-max-listpack-entries", "128")
        ])
    );
    assert_eq!(
        get(c, &["daemonize", "nosuch"]),
        pairs_of(&[("daemonize", "no")])
    );
    assert_eq!(c.cmd(&["CONFIG", "GET", "nosuch", "no*such"]), b"*0\r\n");

    let failed = |arg: &str, why: &str| {
        format!("-ERR CONFIG SET failed (possibly related to argument '{arg}') - {why}\r\n")
    };
    let cases: &[(&[&str], String)] = &[
        (
            &["hz", "30", "maxmemory-policy", "foo"],
            failed(
                "maxmemory-policy",
                "argument(s) must be one of the following: volatile-lru, volatile-lfu, \
                 volatile-random, volatile-ttl, allkeys-lru, allkeys-lfu, allkeys-random, \
                 noeviction",
            ),
        ),
        (
            &["maxmemory", "10mb", "hz", "abc"],
            failed("hz", "argument couldn't be parsed into an integer"),
        ),
        (
            &["HZ", "abc"],
            failed("hz", "argument couldn't be parsed into an integer"),
        ),
        (
            &["MAXMEMORY", "abc"],
            failed("maxmemory", "argument must be a memory value"),
        ),
        (
            &["hz", "10", "HZ", "11"],
            failed("HZ", "duplicate parameter"),
        ),
        (
            &["maxmemory", "1", "maxmemory", "abc"],
            failed("maxmemory", "duplicate parameter"),
        ),
        (
            &["hz", "1", "hz", "2", "databases", "1"],
            failed("hz", "duplicate parameter"),
        ),
        (
            &["maxmemory", "10mb", "databases", "3"],
            failed("databases", "can't set immutable config"),
        ),
        (
            &["DATABASES", "1"],
            failed("DATABASES", "can't set immutable config"),
        ),
        (
            &["daemonize", "yes"],
            failed("daemonize", "can't set immutable config"),
        ),
        (
            &["databases", "3", "nosuch", "1"],
            failed("databases", "can't set immutable config"),
        ),
        (
            &["hz", "abc", "databases", "3"],
            failed("databases", "can't set immutable config"),
        ),
        (
            &["maxmemory", "10mb", "NOSUCH", "3"],
            "-ERR Unknown option or number of arguments for CONFIG SET - 'NOSUCH'\r\n".into(),
        ),
        (&["hz", "10", "maxmemory"], "-ERR syntax error\r\n".into()),
        (
            &["hz"],
            "-ERR wrong number of arguments for 'config|set' command\r\n".into(),
        ),
    ];
    assert_eq!(
        c.cmd(&[
            "CONFIG",
            "SET",
            "hz",
            "20",
            "maxmemory-policy",
            "allkeys-lru"
        ]),
        b"+OK\r\n"
    );
    for (args, error) in cases {
        let mut command = vec!["CONFIG", "SET"];
        command.extend_from_slice(args);
        assert_eq!(show(&c.cmd(&command)), show(error.as_bytes()), "{args:?}");
    }
    for c in conns.iter_mut() {
        assert_eq!(
            get(c, &["hz", "maxmemory", "maxmemory-policy"]),
            pairs_of(&[
                ("hz", "20"),
                ("maxmemory", "0"),
                ("maxmemory-policy", "allkeys-lru")
            ]),
            "a failed CONFIG SET changed nothing"
        );
    }
    assert_eq!(
        conns[1].cmd(&[
            "CONFIG",
            "SET",
            "hz",
            "10",
            "maxmemory-policy",
            "noeviction"
        ]),
        b"+OK\r\n"
    );
}

#[test]
fn config_several_at_once_1_shard() {
    config_several_at_once(1);
}

#[test]
fn config_several_at_once_2_shards() {
    config_several_at_once(2);
}

#[test]
fn config_everywhere_1_shard() {
    config_everywhere(1);
}

#[test]
fn config_everywhere_2_shards() {
    config_everywhere(2);
}

#[test]
fn config_everywhere_4_shards() {
    config_everywhere(4);
}

/// CONFIG REWRITE writes the running values into the file Ruvio started with,
/// keeping its comments; a restart from that file has them. Without a file it is
/// Redis' error.
#[test]
fn config_rewrite_keeps_the_file() {
    let server = Server::ruvio(PortMode::Forward, 2);
    let mut con = server.client();
    let e = redis::cmd("CONFIG")
        .arg("REWRITE")
        .query::<Value>(&mut con)
        .unwrap_err();
    assert_eq!(
        e.detail(),
        Some("The server is running without a config file")
    );
    drop(server);

    let dir = std::env::temp_dir().join(format!("ruvio-rewrite-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("ruvio.toml");
    let shipped = concat!(env!("CARGO_MANIFEST_DIR"), "/../../config/ruvio.toml");
    let original = std::fs::read_to_string(shipped).unwrap();
    // The tests choose the port: the file must not.
    let original: String = original
        .lines()
        .filter(|l| !l.starts_with("port ") && !l.starts_with("bind "))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(&path, &original).unwrap();
    let config = path.to_str().unwrap();
    let server = Server::ruvio_with(PortMode::Forward, 2, &["--config", config]);
    let mut con = server.client();
    let _: () = q(
        &mut con,
        &["CONFIG", "SET", "hz", "42", "set-max-intset-entries", "77"],
    );
    let _: () = q(&mut con, &["CONFIG", "REWRITE"]);
    let rewritten = std::fs::read_to_string(&path).unwrap();
    assert!(rewritten.contains("\nhz = 42\n"), "{rewritten}");
    assert!(
        rewritten.contains("\nset_max_intset_entries = 77\n"),
        "{rewritten}"
    );
    let comments = |text: &str| -> Vec<String> {
        text.lines()
            .filter(|l| l.starts_with('#'))
            .map(str::to_string)
            .collect()
    };
    assert_eq!(comments(&rewritten), comments(&original), "comments kept");
    drop(server);
    let server = Server::ruvio_with(PortMode::Forward, 1, &["--config", config]);
    let mut con = server.client();
    let hz: Vec<String> = q(&mut con, &["CONFIG", "GET", "hz"]);
    assert_eq!(hz[1], "42");
    let _ = std::fs::remove_dir_all(&dir);
}

/// CONFIG RESETSTAT answers once every shard has reset: a write sent after the OK
/// from a connection on another shard, to a key of a third, is counted (it could
/// reach its owner before the reset did, and be reset away).
#[test]
fn resetstat_answers_once_every_shard_reset() {
    const SHARDS: usize = 4;
    let server = Server::forward(SHARDS);
    let mut resetter = conn_on_shard(&server, 1);
    let mut writer = conn_on_shard(&server, 0);
    let key = key_on_shard("rs", 2, SHARDS);
    // The key's owner kept busy, so both messages often wait in its channels
    // together (it reads shard 0's channel before shard 1's).
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let busy: Vec<_> = (0..3)
        .map(|_| {
            let (mut c, stop) = (conn_on_shard(&server, 2), stop.clone());
            let busy_key = key_on_shard("busy", 2, SHARDS);
            std::thread::spawn(move || {
                let request: Vec<u8> = (0..2000)
                    .flat_map(|_| encode(&["INCR", &busy_key]))
                    .collect();
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    c.send(&request);
                    for _ in 0..2000 {
                        c.read_reply();
                    }
                }
            })
        })
        .collect();
    for round in 0..150 {
        assert_eq!(resetter.cmd(&["CONFIG", "RESETSTAT"]), b"+OK\r\n");
        assert_eq!(writer.cmd(&["SET", &key, "v"]), b"+OK\r\n");
        let stats = String::from_utf8_lossy(&writer.cmd(&["INFO", "commandstats"])).to_string();
        assert!(
            stats.contains("cmdstat_set:calls=1,"),
            "round {round}: {stats}"
        );
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for b in busy {
        b.join().expect("a busy client failed");
    }
}
