//! Replication helpers shared by the tests of both directions: INFO
//! replication's fields, a data set of every type, comparing two servers' keys.

use super::*;
use std::time::{Duration, Instant};

pub fn words(s: &str) -> Vec<String> {
    s.split(' ').map(str::to_owned).collect()
}

/// INFO replication as (field, value) pairs.
pub fn replication(conn: &mut RawConn) -> Vec<(String, String)> {
    let info = decode(&conn.cmd(&["INFO", "replication"])).text();
    info.lines()
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.to_string(), v.trim().to_string()))
        .collect()
}

pub fn field(conn: &mut RawConn, name: &str) -> String {
    replication(conn)
        .into_iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v)
        .unwrap_or_default()
}

/// INFO replication's `slave<n>` line as (key, value) pairs.
pub fn slave_line(primary: &mut RawConn, n: usize) -> Vec<(String, String)> {
    field(primary, &format!("slave{n}"))
        .split(',')
        .filter_map(|pair| pair.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// `WAIT replicas timeout_ms` for every write the primary took so far, not
/// only `conn`'s own: WAIT counts the replicas that have the connection's
/// writes (Redis's `c->woff`), so it follows writes of its own, whose offset
/// is past every write before them (a key set and deleted: none is left).
pub fn wait_all(conn: &mut RawConn, replicas: &str, timeout_ms: &str) -> Vec<u8> {
    wait_all_by(conn, "wait-marker", replicas, timeout_ms)
}

/// [`wait_all`] by a `marker` key of the node's slots (a cluster node).
pub fn wait_all_by(conn: &mut RawConn, marker: &str, replicas: &str, timeout_ms: &str) -> Vec<u8> {
    assert_eq!(conn.cmd(&["SET", marker, "1"]), b"+OK\r\n");
    assert_eq!(conn.cmd(&["DEL", marker]), b":1\r\n");
    conn.cmd(&["WAIT", replicas, timeout_ms])
}

/// Wait until `check` holds (polling), or fail with `what`.
pub fn wait_for(what: &str, mut check: impl FnMut() -> bool) {
    let start = Instant::now();
    while !check() {
        assert!(
            start.elapsed() < Duration::from_secs(15),
            "timed out: {what}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The primary's data: every type, small and big encodings, a TTL, a stream with
/// a consumer group, keys in database 3.
pub fn fill(primary: &mut RawConn) {
    let mut commands = vec![
        words("SET str hello"),
        words("SET int 12345"),
        words("RPUSH list a b 1 2"),
        words("HSET hash f v g 1"),
        words("ZADD zset 1 a 2.5 b"),
        words("SADD intset 1 2 3 -9"),
        words("SADD set x y z"),
        words("SET ttl v PX 600000"),
        words("XADD events 1-1 event added"),
        words("XGROUP CREATE events workers 0"),
        words("XREADGROUP GROUP workers w1 STREAMS events >"),
        words("SELECT 3"),
        words("RPUSH other x y"),
        words("SET three 3"),
        words("SELECT 0"),
    ];
    let mut big = |head: &str, n: usize, elem: &dyn Fn(usize) -> Vec<String>| {
        let mut c = words(head);
        (0..n).for_each(|i| c.extend(elem(i)));
        commands.push(c);
    };
    big("RPUSH biglist", 2000, &|i| vec![format!("item-{i}")]);
    big("HSET bighash", 500, &|i| {
        vec![format!("f{i}"), format!("v{i}")]
    });
    big("ZADD bigzset", 300, &|i| {
        vec![format!("{}", i as f64 * 1.25), format!("m{i}")]
    });
    big("SADD bigset", 500, &|i| vec![format!("s{i}")]);
    for i in 0..200 {
        commands.push(words(&format!("SET key:{i} value-{i}")));
    }
    for c in commands {
        let reply = primary.cmd(&c);
        assert!(!reply.starts_with(b"-"), "{c:?}: {}", show(&reply));
    }
}

/// Every key of databases 0-3 has the same type, value digest and TTL (to the
/// second) on both servers, and neither has a key the other lacks.
pub fn compare_all(primary: &Server, replica: &Server, when: &str) {
    let (mut a, mut b) = (primary.raw(), replica.raw());
    compare_conns(&mut a, &mut b, &["0", "1", "2", "3"], when);
}

/// Every key of databases `dbs` has the same type, value digest and TTL (to the
/// second) through `a` and `b`, and neither has a key the other lacks (a
/// cluster node, which has database 0 only, and its replica).
pub fn compare_conns(a: &mut RawConn, b: &mut RawConn, dbs: &[&str], when: &str) {
    for &db in dbs {
        if dbs.len() > 1 {
            a.cmd(&["SELECT", db]);
            b.cmd(&["SELECT", db]);
        }
        let keys = |c: &mut RawConn| {
            let Value::Array(items) = decode(&c.cmd(&["KEYS", "*"])) else {
                panic!("KEYS");
            };
            let mut keys: Vec<String> = items.iter().map(Value::text).collect();
            keys.sort();
            keys
        };
        let (want, got) = (keys(a), keys(b));
        let missing: Vec<&String> = want.iter().filter(|k| !got.contains(k)).collect();
        let extra: Vec<&String> = got.iter().filter(|k| !want.contains(k)).collect();
        assert!(
            missing.is_empty() && extra.is_empty(),
            "{when}: db {db} lacks {missing:?} and has {extra:?} too"
        );
        // Pipelined, a few hundred keys at a time: one round trip per chunk.
        for chunk in want.chunks(256) {
            let mut reads = Vec::new();
            for key in chunk {
                reads.extend_from_slice(&encode(&["TYPE", key]));
                reads.extend_from_slice(&encode(&["DEBUG", "DIGEST-VALUE", key]));
                reads.extend_from_slice(&encode(&["TTL", key]));
            }
            let replies = |c: &mut RawConn| -> Vec<Vec<u8>> {
                c.send(&reads);
                (0..3 * chunk.len()).map(|_| c.read_reply()).collect()
            };
            let (from_a, from_b) = (replies(a), replies(b));
            for (i, key) in chunk.iter().enumerate() {
                for (at, read) in ["TYPE", "DEBUG DIGEST-VALUE"].iter().enumerate() {
                    assert_eq!(
                        show(&from_b[3 * i + at]),
                        show(&from_a[3 * i + at]),
                        "{when}: {read} {key} in db {db}"
                    );
                }
                let ttl = |reply: &[u8]| match decode(reply) {
                    Value::Int(s) => s,
                    other => panic!("TTL {key}: {other:?}"),
                };
                let (want, got) = (ttl(&from_a[3 * i + 2]), ttl(&from_b[3 * i + 2]));
                assert!((want - got).abs() <= 1, "{when}: TTL {key} {got} vs {want}");
            }
        }
    }
}

/// Writes of every kind from `clients` threads at once, `rounds` each.
pub fn write_load(primary: &Server, clients: usize, rounds: usize) {
    let threads: Vec<_> = (0..clients)
        .map(|t| {
            let mut c = primary.raw();
            std::thread::spawn(move || {
                let group = ["XGROUP", "CREATE", &format!("grouped:{t}"), "g", "0", "MKSTREAM"];
                assert_eq!(c.cmd(&group), b"+OK\r\n");
                for i in 0..rounds {
                    let k = |name: &str| format!("{name}:{t}:{}", i % 37);
                    let commands = vec![
                        vec!["SET".into(), k("s"), format!("v{i}")],
                        vec!["SET".into(), k("ttl"), "x".into(), "EX".into(), "500".into()],
                        vec!["SET".into(), k("gone"), "x".into(), "PX".into(), "30".into()],
                        vec!["INCRBYFLOAT".into(), k("f"), "1.5".into()],
                        vec!["RPUSH".into(), k("l"), format!("{i}")],
                        vec!["HSET".into(), k("h"), format!("f{}", i % 5), format!("{i}")],
                        vec!["SADD".into(), k("set"), format!("m{}", i % 11)],
                        vec!["ZINCRBY".into(), k("z"), "2".into(), format!("m{}", i % 7)],
                        vec!["XADD".into(), k("x"), "*".into(), "i".into(), format!("{i}")],
                        vec!["SPOP".into(), k("set")],
                        vec![
                            "XREADGROUP".into(),
                            "GROUP".into(),
                            "g".into(),
                            format!("c{t}"),
                            "COUNT".into(),
                            "2".into(),
                            "STREAMS".into(),
                            format!("grouped:{t}"),
                            ">".into(),
                        ],
                        vec!["XADD".into(), format!("grouped:{t}"), "*".into(), "i".into(), format!("{i}")],
                        vec![
                            "EVAL".into(),
                            "redis.call('incr', KEYS[1]); return redis.call('lpush', KEYS[2], ARGV[1])"
                                .into(),
                            "2".into(),
                            format!("{{t{t}}}a"),
                            format!("{{t{t}}}b"),
                            format!("{i}"),
                        ],
                    ];
                    for command in &commands {
                        let reply = c.cmd(command);
                        assert!(!reply.starts_with(b"-"), "{command:?}: {}", show(&reply));
                    }
                    c.cmd(&["MULTI"]);
                    c.cmd(&["SET", &format!("{{tx{t}}}a"), &i.to_string()]);
                    c.cmd(&["INCR", &format!("{{tx{t}}}n")]);
                    c.cmd(&["SELECT", "2"]);
                    c.cmd(&["LPUSH", &format!("db2:{t}"), &i.to_string()]);
                    c.cmd(&["SELECT", "0"]);
                    let exec = c.cmd(&["EXEC"]);
                    assert!(exec.starts_with(b"*5"), "EXEC: {}", show(&exec));
                }
            })
        })
        .collect();
    // A blocking pop served by another client's push: replicated as a plain pop.
    let mut waiter = primary.raw();
    waiter.send(&encode(&["BLPOP", "queue", "5"]));
    std::thread::sleep(Duration::from_millis(50));
    primary.raw().cmd(&["RPUSH", "queue", "job1", "job2"]);
    assert!(show(&waiter.read_reply()).contains("job1"));
    for t in threads {
        t.join().expect("writer");
    }
}

pub fn sync_counts(primary: &mut RawConn) -> (u64, u64) {
    let info = decode(&primary.cmd(&["INFO", "stats"])).text();
    let count = |name: &str| {
        info.lines()
            .find_map(|l| l.strip_prefix(&format!("{name}:")))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0)
    };
    (count("sync_full"), count("sync_partial_ok"))
}

pub fn follow(replica: &Server, primary: &Server) {
    let port = primary.port().to_string();
    let mut conn = replica.raw();
    assert_eq!(conn.cmd(&["REPLICAOF", "127.0.0.1", &port]), b"+OK\r\n");
    assert_eq!(
        conn.cmd(&["SLAVEOF", "127.0.0.1", &port]),
        b"+OK Already connected to specified master\r\n"
    );
    wait_for("master_link_status:up", || {
        field(&mut conn, "master_link_status") == "up"
    });
}

/// A process killed and reaped when dropped.
pub struct Reaped(pub std::process::Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A redis-server (`bin`) started empty on `port`, its files in `dir`, once the
/// port is free again (a start that could not bind exits and is tried again), and
/// a connection to it: a primary restarted without its data.
pub fn redis_reborn(bin: &std::path::Path, port: u16, dir: &std::path::Path) -> (Reaped, RawConn) {
    std::fs::create_dir_all(dir).expect("a directory for the new primary");
    let (port_arg, dir_arg) = (port.to_string(), dir.to_string_lossy().into_owned());
    let spawn = || {
        std::process::Command::new(bin)
            .args(["--port", &port_arg, "--bind", "127.0.0.1", "--save", ""])
            .args(["--appendonly", "no", "--repl-diskless-sync-delay", "0"])
            .args(["--dir", &dir_arg])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("redis-server")
    };
    let mut reborn = Reaped(spawn());
    let mut conn = None;
    wait_for("the new primary's PONG", || {
        if let Ok(Some(_)) = reborn.0.try_wait() {
            reborn = Reaped(spawn());
            return false;
        }
        let pongs = |mut s: std::net::TcpStream| -> Option<std::net::TcpStream> {
            use std::io::{Read, Write};
            s.set_read_timeout(Some(Duration::from_millis(500))).ok()?;
            s.write_all(b"PING\r\n").ok()?;
            let mut answer = [0u8; 7];
            s.read_exact(&mut answer).ok()?;
            (&answer == b"+PONG\r\n").then_some(s)
        };
        conn = std::net::TcpStream::connect(("127.0.0.1", port))
            .ok()
            .and_then(pongs)
            .map(RawConn::from_stream);
        conn.is_some()
    });
    (reborn, conn.expect("connected"))
}

/// One RESP command from a replica's handshake (an array of bulk strings).
pub fn read_command(stream: &mut std::net::TcpStream) -> Vec<String> {
    use std::io::Read;
    let mut line = || {
        let mut bytes = Vec::new();
        let mut byte = [0u8];
        while !bytes.ends_with(b"\r\n") {
            stream
                .read_exact(&mut byte)
                .expect("a command from the replica");
            bytes.push(byte[0]);
        }
        String::from_utf8_lossy(&bytes[..bytes.len() - 2]).into_owned()
    };
    let count: usize = line()[1..].parse().expect("*<count>");
    (0..count).map(|_| (line(), line()).1).collect()
}

/// Replica connections `server` lists (CLIENT LIST TYPE replica): a replica on
/// shard links has one per shard.
pub fn replica_connections(server: &mut RawConn) -> usize {
    let list = decode(&server.cmd(&["CLIENT", "LIST", "TYPE", "replica"])).text();
    list.lines().filter(|l| !l.is_empty()).count()
}

/// A client of `primary` running, `rounds` times, a script and a MULTI/EXEC
/// over a key of every one of its `shards` (its own keys: the groups a replica
/// must apply whole).
pub fn cross_shard_load(
    primary: &Server,
    shards: usize,
    rounds: usize,
) -> std::thread::JoinHandle<()> {
    let mut c = primary.raw();
    let keys: Vec<String> = (0..shards)
        .map(|shard| key_on_shard("cross:", shard, shards))
        .collect();
    std::thread::spawn(move || {
        let incr_all = "for _, k in ipairs(KEYS) do redis.call('incr', k) end return #KEYS";
        for i in 0..rounds {
            let mut eval = vec!["EVAL".to_string(), incr_all.into(), shards.to_string()];
            eval.extend(keys.iter().cloned());
            assert_eq!(c.cmd(&eval), format!(":{shards}\r\n").into_bytes());
            c.cmd(&["MULTI"]);
            for key in &keys {
                c.cmd(&["RPUSH", &format!("{key}:list"), &i.to_string()]);
                c.cmd(&["HSET", &format!("{key}:hash"), "round", &i.to_string()]);
            }
            let exec = c.cmd(&["EXEC"]);
            let want = format!("*{}", 2 * shards);
            assert!(exec.starts_with(want.as_bytes()), "EXEC: {}", show(&exec));
        }
    })
}

/// Every key `primary` holds is on `replica` with the same DUMP payload and a
/// PTTL within a second of the primary's: how many, or the first difference.
/// (A cluster replica node's connection must have sent READONLY first.)
pub fn same_keys_dumped(primary: &mut RawConn, replica: &mut RawConn) -> Result<usize, String> {
    let int = |reply: &[u8]| match decode(reply) {
        Value::Int(n) => n,
        other => panic!("not an integer: {other:?}"),
    };
    let keys = match decode(&primary.cmd(&["KEYS", "*"])) {
        Value::Array(keys) => keys,
        other => panic!("not an array: {other:?}"),
    };
    let size = int(&replica.cmd(&["DBSIZE"]));
    if size != keys.len() as i64 {
        return Err(format!(
            "{} keys on the primary, {size} on the replica",
            keys.len()
        ));
    }
    for key in &keys {
        let key = key.text();
        let (a, b) = (primary.cmd(&["DUMP", &key]), replica.cmd(&["DUMP", &key]));
        if a != b {
            return Err(format!("{key}: DUMP {} against {}", show(&a), show(&b)));
        }
        let (a, b) = (
            int(&primary.cmd(&["PTTL", &key])),
            int(&replica.cmd(&["PTTL", &key])),
        );
        if (a < 0) != (b < 0) || (a - b).abs() > 1000 {
            return Err(format!("{key}: PTTL {a} against {b}"));
        }
    }
    Ok(keys.len())
}

/// Keys of several types, a third with a TTL, under `prefix`.
pub fn write_keys(conn: &mut RawConn, prefix: &str, count: usize) {
    for i in 0..count {
        let key = format!("{prefix}:{i}");
        let reply = match i % 3 {
            0 => conn.cmd(&["SET", &key, &format!("value-{i}"), "PX", "600000"]),
            1 => conn.cmd(&["RPUSH", &key, "a", "b", &i.to_string()]),
            _ => conn.cmd(&["HSET", &key, "field", &i.to_string()]),
        };
        assert!(!reply.starts_with(b"-"), "{key}: {}", show(&reply));
    }
}

/// A fake primary on `listener` for `connections` replica links: each is
/// answered through its handshake (`+PONG` to PING, `+OK` to the rest) until
/// its PSYNC, then gets `+FULLRESYNC` and the first 10 bytes of a 1,000-byte
/// RDB, and is held open until the returned sender drops (join the handle
/// after).
pub fn fake_primary_starting_rdbs(
    listener: std::net::TcpListener,
    connections: usize,
) -> (std::thread::JoinHandle<()>, std::sync::mpsc::Sender<()>) {
    let (done, wait) = std::sync::mpsc::channel::<()>();
    let primary = std::thread::spawn(move || {
        let mut held = Vec::new();
        for _ in 0..connections {
            let (mut stream, _) = listener.accept().expect("a replica connects");
            loop {
                let reply = match read_command(&mut stream)[0].as_str() {
                    "PSYNC" => break,
                    "PING" => "+PONG\r\n",
                    _ => "+OK\r\n",
                };
                std::io::Write::write_all(&mut stream, reply.as_bytes()).expect("a reply");
            }
            let start = format!("+FULLRESYNC {} 0\r\n$1000\r\nREDIS0009a", "b".repeat(40));
            std::io::Write::write_all(&mut stream, start.as_bytes()).expect("the start");
            held.push(stream);
        }
        let _ = wait.recv();
    });
    (primary, done)
}

/// Every key of `want` reads its value on the primary `p` and the replica `r`.
pub fn same_strings_on_both(p: &mut RawConn, r: &mut RawConn, want: &[(&str, &str)]) {
    for (key, value) in want {
        let bulk = format!("${}\r\n{value}\r\n", value.len());
        assert_eq!(
            p.cmd(&["GET", key]),
            bulk.as_bytes(),
            "{key} on the primary"
        );
        assert_eq!(
            r.cmd(&["GET", key]),
            bulk.as_bytes(),
            "{key} on the replica"
        );
    }
}
