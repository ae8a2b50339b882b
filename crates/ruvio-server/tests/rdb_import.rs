//! `--import-rdb`: a dump.rdb written by the real redis-server in this run (every
//! type, small and big encodings, a stream of several nodes with deleted entries
//! and consumer groups, expiry times, two databases) is loaded by Ruvio
//! at start, in forward mode with 2 shards and per-shard mode with 2 shards (each
//! key on the shard owning its slot), and every key reads back as on Redis.
//! A file that is not an RDB stops the server with a message; with a log the file
//! seeds the data directory once. The other way:
//! `DEBUG EXPORT-RDB` on Ruvio (2 shards) writes a file that redis-server loads
//! (`DEBUG RELOAD NOSAVE`) with every key, TTL and database.

mod common;

use std::time::{Duration, Instant};

use common::*;

fn words(s: &str) -> Vec<String> {
    s.split(' ').map(str::to_owned).collect()
}

fn with_elems(head: &str, n: usize, elem: impl Fn(usize) -> Vec<String>) -> Vec<String> {
    let mut c = words(head);
    (0..n).for_each(|i| c.extend(elem(i)));
    c
}

/// (database, key, read command) for every key the setup makes; `true` when the
/// reply's order is the encoding's (compared sorted).
fn reads() -> Vec<(usize, &'static str, Vec<&'static str>, bool)> {
    vec![
        (0, "str", vec!["GET", "str"], false),
        (0, "int", vec!["GET", "int"], false),
        (0, "long", vec!["GET", "long"], false),
        (0, "list", vec!["LRANGE", "list", "0", "-1"], false),
        (0, "biglist", vec!["LRANGE", "biglist", "0", "-1"], false),
        (0, "hash", vec!["HGETALL", "hash"], true),
        (0, "bighash", vec!["HGETALL", "bighash"], true),
        (
            0,
            "zset",
            vec!["ZRANGE", "zset", "0", "-1", "WITHSCORES"],
            false,
        ),
        (
            0,
            "bigzset",
            vec!["ZRANGE", "bigzset", "0", "-1", "WITHSCORES"],
            false,
        ),
        (0, "intset", vec!["SMEMBERS", "intset"], true),
        (0, "set", vec!["SMEMBERS", "set"], true),
        (0, "bigset", vec!["SMEMBERS", "bigset"], true),
        (0, "ttl", vec!["GET", "ttl"], false),
        (
            0,
            "events",
            vec!["XINFO", "STREAM", "events", "FULL", "COUNT", "0"],
            false,
        ),
        (0, "events", vec!["XINFO", "GROUPS", "events"], false),
        (1, "other", vec!["LRANGE", "other", "0", "-1"], false),
    ]
}

fn setup() -> Vec<Vec<String>> {
    vec![
        words("SET str hello"),
        words("SET int 12345"),
        vec!["SET".into(), "long".into(), "abc".repeat(300)],
        words("RPUSH list a b 1 2"),
        with_elems("RPUSH biglist", 5000, |i| vec![format!("item-{i}")]),
        words("HSET hash f v g 1"),
        with_elems("HSET bighash", 1000, |i| {
            vec![format!("f{i}"), format!("v{i}")]
        }),
        words("ZADD zset 1 a 2.5 b"),
        with_elems("ZADD bigzset", 300, |i| {
            vec![format!("{}", i as f64 * 1.25), format!("m{i}")]
        }),
        words("SADD intset 1 2 3 -9"),
        words("SADD set x y z"),
        with_elems("SADD bigset", 1000, |i| vec![format!("s{i}")]),
        words("SET ttl v PX 600000"),
        words("XADD events 1-1 event added jobId 1"),
        words("XGROUP CREATE events workers 0"),
        words("XREADGROUP GROUP workers w1 STREAMS events >"),
        words("XGROUP CREATECONSUMER events workers w2"),
        words("XGROUP CREATE events idle $"),
    ]
    .into_iter()
    .chain((2..=260).map(|i| words(&format!("XADD events {i}-0 event completed jobId {i}"))))
    .chain([
        words("XDEL events 5-0 150-0"),
        words("XREADGROUP GROUP workers w2 COUNT 4 STREAMS events >"),
        words("XACK events workers 3-0"),
        words("SET gone v PX 300"),
        words("SELECT 1"),
        words("RPUSH other x y"),
        words("SELECT 0"),
    ])
    .collect()
}

fn sorted(reply: &[u8]) -> String {
    let Value::Array(mut items) = decode(reply) else {
        panic!("not an array: {}", show(reply));
    };
    items.sort_by_key(|v| format!("{v:?}"));
    format!("{items:?}")
}

/// Fill redis-server, SAVE, and return its dump.rdb path and the server.
fn redis_dump() -> (Server, String) {
    let redis = Server::redis();
    let mut conn = redis.raw();
    for c in setup() {
        let reply = conn.cmd(&c);
        assert!(!reply.starts_with(b"-"), "{c:?}: {}", show(&reply));
    }
    std::thread::sleep(Duration::from_millis(350)); // `gone` expires, unsaved
    assert_eq!(conn.cmd(&["SAVE"]), b"+OK\r\n");
    let config = |name: &str| match decode(&conn_cmd(&redis, &["CONFIG", "GET", name])) {
        Value::Array(items) => items[1].text(),
        other => panic!("{other:?}"),
    };
    let path = format!("{}/{}", config("dir"), config("dbfilename"));
    (redis, path)
}

fn conn_cmd(server: &Server, args: &[&str]) -> Vec<u8> {
    server.raw().cmd(args)
}

fn compare(redis: &Server, ruvio: &Server, mode: &str) {
    for (db, key, read, unordered) in reads() {
        let port = ruvio.ports[shard_of_key(key, ruvio.ports.len())];
        let mut b = RawConn::connect(port);
        let mut a = redis.raw();
        if db != 0 {
            if mode == "per-shard" {
                continue; // cluster mode has database 0 only
            }
            a.cmd(&["SELECT", "1"]);
            b.cmd(&["SELECT", "1"]);
        }
        let (want, got) = (a.cmd(&read), b.cmd(&read));
        if unordered {
            assert_eq!(sorted(&got), sorted(&want), "{mode} {key}");
        } else {
            // Ruvio's XINFO has Redis 7.2's consumer fields, which redis-server
            // 7.0 lacks.
            let (want, got) = (decode(&want), decode(&got));
            assert_eq!(
                without_7_2_fields(&got),
                without_7_2_fields(&want),
                "{mode} {key}"
            );
        }
        let ttl = b.cmd(&["PTTL", key]);
        if key == "ttl" {
            let ms: i64 = String::from_utf8_lossy(&ttl[1..ttl.len() - 2])
                .parse()
                .unwrap();
            assert!(ms > 500_000 && ms <= 600_000, "{mode} ttl {ms}");
        } else {
            assert_eq!(ttl, b":-1\r\n", "{mode} {key}");
        }
    }
    let mut b = RawConn::connect(ruvio.ports[shard_of_key("gone", ruvio.ports.len())]);
    assert_eq!(b.cmd(&["EXISTS", "gone"]), b":0\r\n");
}

#[test]
fn redis_dump_loads_in_both_port_modes() {
    if require_redis_server("rdb_import").is_none() {
        return;
    }
    let (redis, path) = redis_dump();
    let forward = Server::ruvio_with(PortMode::Forward, 2, &["--import-rdb", &path]);
    compare(&redis, &forward, "forward");
    let per_shard = Server::ruvio_with(PortMode::PerShard, 2, &["--import-rdb", &path]);
    compare(&redis, &per_shard, "per-shard");
}

#[test]
fn debug_export_rdb_loads_in_redis() {
    if require_redis_server("rdb_import").is_none() {
        return;
    }
    let redis = Server::redis();
    let config = |name: &str| match decode(&conn_cmd(&redis, &["CONFIG", "GET", name])) {
        Value::Array(items) => items[1].text(),
        other => panic!("{other:?}"),
    };
    let path = format!("{}/{}", config("dir"), config("dbfilename"));
    let ruvio = Server::forward(2);
    let mut conn = ruvio.raw();
    for c in setup() {
        let reply = conn.cmd(&c);
        assert!(!reply.starts_with(b"-"), "{c:?}: {}", show(&reply));
    }
    std::thread::sleep(Duration::from_millis(350)); // `gone` expires, not exported
    assert_eq!(
        show(&conn.cmd(&["DEBUG", "EXPORT-RDB", &path])),
        show(b"+OK\r\n")
    );
    // Redis loads the file Ruvio wrote in place of its own dump.
    assert_eq!(
        show(&redis.raw().cmd(&["DEBUG", "RELOAD", "NOSAVE"])),
        show(b"+OK\r\n")
    );
    compare(&redis, &ruvio, "export");
    assert_eq!(redis.raw().cmd(&["EXISTS", "gone"]), b":0\r\n");
    assert_eq!(redis.raw().cmd(&["DBSIZE"]), conn.cmd(&["DBSIZE"]));
}

/// Under an LRU policy Redis saves each key's idle time, under an LFU one its
/// counter; Ruvio keeps them on import and writes them on export.
#[test]
fn idle_time_and_frequency_travel_with_the_file() {
    if require_redis_server("rdb_import").is_none() {
        return;
    }
    let redis = Server::redis();
    let mut a = redis.raw();
    a.cmd(&["SET", "src", "v"]);
    let payload = match decode(&a.cmd(&["DUMP", "src"])) {
        Value::Bulk(b) => b,
        other => panic!("{other:?}"),
    };
    assert_eq!(
        a.cmd(&["CONFIG", "SET", "maxmemory-policy", "allkeys-lru"]),
        b"+OK\r\n"
    );
    let restore = |key: &[u8], option: &[u8], value: &[u8]| -> Vec<Vec<u8>> {
        vec![
            b"RESTORE".to_vec(),
            key.to_vec(),
            b"0".to_vec(),
            payload.clone(),
            option.to_vec(),
            value.to_vec(),
        ]
    };
    assert_eq!(a.cmd(&restore(b"idle", b"IDLETIME", b"1000")), b"+OK\r\n");
    assert_eq!(a.cmd(&["SAVE"]), b"+OK\r\n");
    let config = |conn: &mut RawConn, name: &str| match decode(&conn.cmd(&["CONFIG", "GET", name]))
    {
        Value::Array(items) => items[1].text(),
        other => panic!("{other:?}"),
    };
    let path = format!("{}/{}", config(&mut a, "dir"), config(&mut a, "dbfilename"));
    let ruvio = Server::ruvio_with(
        PortMode::Forward,
        1,
        &["--import-rdb", &path, "--maxmemory-policy", "allkeys-lru"],
    );
    let mut b = ruvio.raw();
    let idle = decode(&b.cmd(&["OBJECT", "IDLETIME", "idle"]));
    assert!(matches!(idle, Value::Int(1000..=1002)), "{idle:?}");

    assert_eq!(
        b.cmd(&["CONFIG", "SET", "maxmemory-policy", "allkeys-lfu"]),
        b"+OK\r\n"
    );
    assert_eq!(b.cmd(&restore(b"hot", b"FREQ", b"77")), b"+OK\r\n");
    assert_eq!(b.cmd(&["DEBUG", "EXPORT-RDB", &path]), b"+OK\r\n");
    assert_eq!(
        a.cmd(&["CONFIG", "SET", "maxmemory-policy", "allkeys-lfu"]),
        b"+OK\r\n"
    );
    assert_eq!(a.cmd(&["DEBUG", "RELOAD", "NOSAVE"]), b"+OK\r\n");
    assert_eq!(a.cmd(&["OBJECT", "FREQ", "hot"]), b":77\r\n");
}

/// With a log the file seeds the data directory once: its keys are snapshotted
/// before clients write, so they outlive a SIGKILL and a restart without the file
/// (a logged INCR then replays onto the imported value, not onto nothing), and a
/// later start given the file again does not load it over the data (a key deleted
/// since stays deleted, even once a snapshot no longer holds the DEL).
#[test]
fn with_a_log_the_file_seeds_the_data_directory_once() {
    if require_redis_server("with_a_log_the_file_seeds_the_data_directory_once").is_none() {
        return;
    }
    let redis = Server::redis();
    let mut r = redis.raw();
    assert_eq!(r.cmd(&["MSET", "k", "41", "d", "doomed"]), b"+OK\r\n");
    assert_eq!(r.cmd(&["SAVE"]), b"+OK\r\n");
    let config = |name: &str| match decode(&conn_cmd(&redis, &["CONFIG", "GET", name])) {
        Value::Array(items) => items[1].text(),
        other => panic!("{other:?}"),
    };
    let path = format!("{}/{}", config("dir"), config("dbfilename"));
    let dir = std::env::temp_dir().join(format!("ruvio-import-once-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let logged = [
        "--dir",
        dir.to_str().unwrap(),
        "--durability",
        "always",
        "--save",
        "",
    ];
    let importing = [&logged[..], &["--import-rdb", &path]].concat();
    {
        let server = Server::ruvio_with(PortMode::Forward, 2, &importing);
        let mut c = server.raw();
        assert_eq!(c.cmd(&["INCR", "k"]), b":42\r\n");
        assert_eq!(c.cmd(&["DEL", "d"]), b":1\r\n");
    } // SIGKILL
    {
        let server = Server::ruvio_with(PortMode::Forward, 2, &logged);
        let mut c = server.raw();
        assert_eq!(c.cmd(&["GET", "k"]), b"$2\r\n42\r\n");
        assert_eq!(c.cmd(&["EXISTS", "d"]), b":0\r\n");
        assert_eq!(c.cmd(&["SAVE"]), b"+OK\r\n");
    }
    let server = Server::ruvio_with(PortMode::Forward, 2, &importing);
    let mut c = server.raw();
    assert_eq!(c.cmd(&["GET", "k"]), b"$2\r\n42\r\n");
    assert_eq!(c.cmd(&["EXISTS", "d"]), b":0\r\n");
    assert!(
        server.logs().contains("is not imported again"),
        "{}",
        server.logs()
    );
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_file_that_is_not_rdb_stops_the_server() {
    let dir = std::env::temp_dir().join(format!("ruvio-rdb-import-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("bad.rdb");
    std::fs::write(&path, b"REDIS0010\xfe").unwrap();
    let mut child = std::process::Command::new(ruvio_bin())
        .args([
            "--port",
            &free_ports(1, false).to_string(),
            "--shards",
            "1",
            "--import-rdb",
        ])
        .arg(&path)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(started.elapsed() < Duration::from_secs(10), "still running");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(!status.success());
    let mut err = String::new();
    std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
    assert!(err.contains("RDB file is corrupt"), "{err}");
    std::fs::remove_dir_all(&dir).ok();
}
