//! MIGRATE out of Ruvio (cmd/migrate/): the same calls sent to a redis-server
//! and to Ruvio, each moving keys into a redis-server target of its own, answer
//! the same bytes and leave equal targets; values of every type and their TTLs
//! survive Ruvio -> Ruvio and Ruvio -> redis-server; and `redis-cli --cluster
//! reshard`, `rebalance` and `del-node` empty a Ruvio node of the cluster bus
//! into a redis-server node while redis-py's RedisCluster writes.

mod common;

use common::bus_node::wait_for;
use common::cluster_process::{own_line, split_at, text, Node};
use common::cluster_tools::*;
use common::replication::{compare_conns, follow};
use common::*;
use std::process::Command;

/// The keys the differential run starts with on both sources.
const SOURCE: &[&[&str]] = &[
    &["SET", "a", "1"],
    &["SET", "b", "2"],
    &["PEXPIRE", "b", "100000"],
    &["SET", "c", "3"],
    &["RPUSH", "l", "x", "y", "z"],
    &["HSET", "h", "f", "v"],
    &["SADD", "s", "m", "n"],
    &["ZADD", "z", "1", "m"],
    &["XADD", "st", "1-1", "f", "v"],
    &["SET", "busy", "mine"],
    &["SET", "d1", "1"],
    &["SET", "d2", "2"],
    &["SET", "mute", "m"],
];

/// Keys the targets hold before: the BUSYKEY cases.
const TARGET: &[&[&str]] = &[&["SET", "busy", "theirs"], &["SET", "d2", "theirs"]];

/// The calls, `$T` the source's own target, `$BAD` a port nobody listens on,
/// `$MUTE` one that accepts and never answers.
const CALLS: &[&[&str]] = &[
    &["MIGRATE", "127.0.0.1", "$T", "a", "0", "5000"],
    &["MIGRATE", "127.0.0.1", "$T", "a", "0", "5000"],
    &["MIGRATE", "127.0.0.1", "$T", "b", "0", "5000", "COPY"],
    &["MIGRATE", "127.0.0.1", "$T", "b", "0", "5000", "COPY"],
    &["MIGRATE", "127.0.0.1", "$T", "b", "0", "5000", "REPLACE"],
    &[
        "MIGRATE",
        "127.0.0.1",
        "$T",
        "",
        "0",
        "5000",
        "KEYS",
        "l",
        "h",
        "s",
        "z",
        "st",
        "nosuch",
    ],
    &[
        "MIGRATE",
        "127.0.0.1",
        "$T",
        "",
        "0",
        "5000",
        "KEYS",
        "nosuch1",
        "nosuch2",
    ],
    &["MIGRATE", "127.0.0.1", "$T", "", "0", "5000", "KEYS"],
    &["MIGRATE", "127.0.0.1", "$T", "c", "1", "5000"],
    &["MIGRATE", "127.0.0.1", "$T", "busy", "0", "5000"],
    &[
        "MIGRATE",
        "127.0.0.1",
        "$T",
        "",
        "0",
        "5000",
        "KEYS",
        "d1",
        "d2",
    ],
    &["EXISTS", "d1", "d2"],
    &[
        "MIGRATE",
        "127.0.0.1",
        "$T",
        "busy",
        "0",
        "5000",
        "AUTH",
        "wrong",
    ],
    &[
        "MIGRATE",
        "127.0.0.1",
        "$T",
        "busy",
        "0",
        "5000",
        "AUTH2",
        "someone",
        "wrong",
    ],
    &["MIGRATE", "127.0.0.1", "$BAD", "busy", "0", "500"],
    &["MIGRATE", "127.0.0.1", "$BAD", "nosuch", "0", "500"],
    &["MIGRATE", "127.0.0.1", "-1", "busy", "0", "500"],
    &["MIGRATE", "127.0.0.1", "3000000000", "busy", "0", "500"],
    &["MIGRATE", "", "$T", "busy", "0", "500"],
    &["MIGRATE", "127.0.0.1", "$MUTE", "mute", "0", "300"],
    &["EXISTS", "mute"],
    &["MIGRATE", "127.0.0.1", "$T", "busy", "0"],
    &["MIGRATE", "127.0.0.1", "$T", "busy", "0", "5000", "FOO"],
    &["MIGRATE", "127.0.0.1", "$T", "busy", "0", "5000", "AUTH"],
    &[
        "MIGRATE",
        "127.0.0.1",
        "$T",
        "busy",
        "0",
        "5000",
        "AUTH2",
        "someone",
    ],
    &[
        "MIGRATE",
        "127.0.0.1",
        "$T",
        "busy",
        "0",
        "5000",
        "KEYS",
        "a",
    ],
    &["MIGRATE", "127.0.0.1", "$T", "busy", "x", "5000"],
    &["MIGRATE", "127.0.0.1", "$T", "busy", "0", "y"],
    &["MIGRATE", "127.0.0.1", "$T", "busy", "99", "100"],
    &["MIGRATE", "127.0.0.1", "$T", "busy", "0", "0", "REPLACE"],
    &["MIGRATE", "127.0.0.1", "$T", "busy", "0", "5000", "REPLACE"],
    &["EXISTS", "a", "b", "c", "l", "h", "s", "z", "st", "busy"],
    &["SET", "queued", "q"],
    &["MULTI"],
    &["MIGRATE", "127.0.0.1", "$T", "queued", "0", "5000"],
    &["GET", "queued"],
    &["EXEC"],
    &[
        "COMMAND", "GETKEYS", "MIGRATE", "h", "1", "", "0", "5", "AUTH", "KEYS", "k",
    ],
    &[
        "COMMAND", "GETKEYS", "MIGRATE", "h", "1", "", "0", "5", "COPY", "KEYS", "k", "j",
    ],
];

/// Run `words` on `conn`, `$T`, `$BAD` and `$MUTE` replaced by `ports`.
fn call(conn: &mut RawConn, words: &[&str], ports: [u16; 3]) -> Vec<u8> {
    let [target, bad, mute] = ports.map(|p| p.to_string());
    let words: Vec<&str> = words
        .iter()
        .map(|w| match *w {
            "$T" => target.as_str(),
            "$BAD" => bad.as_str(),
            "$MUTE" => mute.as_str(),
            w => w,
        })
        .collect();
    conn.cmd(&words)
}

/// What an instance holds: DEBUG DIGEST (values of every database, and which
/// keys have a TTL) and each key's PTTL, by `db:key`.
struct Holdings {
    digest: String,
    pttls: Vec<(String, i64)>,
}

/// How far apart two reads of one TTL may be: the calls between them.
const TTL_SLACK_MS: i64 = 3000;

impl Holdings {
    fn of(port: u16) -> Holdings {
        let mut conn = RawConn::connect(port);
        let digest = text(&conn.cmd(&["DEBUG", "DIGEST"]));
        let mut pttls = Vec::new();
        for db in ["0", "1"] {
            conn.cmd(&["SELECT", db]);
            let Value::Array(keys) = decode(&conn.cmd(&["KEYS", "*"])) else {
                panic!("KEYS");
            };
            for key in keys {
                let key = key.text();
                let Value::Int(pttl) = decode(&conn.cmd(&["PTTL", &key])) else {
                    panic!("PTTL");
                };
                pttls.push((format!("{db}:{key}"), pttl));
            }
        }
        pttls.sort();
        Holdings { digest, pttls }
    }

    /// The same values, keys and TTLs (within [`TTL_SLACK_MS`]).
    fn assert_same(&self, other: &Holdings) {
        assert_eq!(self.digest, other.digest);
        let names = |h: &Holdings| h.pttls.iter().map(|(k, _)| k.clone()).collect::<Vec<_>>();
        assert_eq!(names(self), names(other));
        for ((key, a), (_, b)) in self.pttls.iter().zip(&other.pttls) {
            let close = (a < &0 && a == b) || (*a >= 0 && *b >= 0 && (a - b).abs() <= TTL_SLACK_MS);
            assert!(close, "{key}: PTTL {a} and {b}");
        }
    }

    fn pttl(&self, key: &str) -> i64 {
        self.pttls
            .iter()
            .find(|(k, _)| k == key)
            .map_or(-2, |(_, t)| *t)
    }
}

/// The same MIGRATE calls to a redis-server and to Ruvio (forward mode), each
/// moving keys into its own redis-server: the same reply bytes, the same
/// source keys left, and targets holding the same values and TTLs.
#[test]
fn migrate_replies_and_moves_as_redis_server() {
    if require_redis_server("cluster_migrate").is_none() {
        return;
    }
    let (ruvio, redis) = (Server::ruvio(PortMode::Forward, 1), Server::redis());
    let targets = [Server::redis(), Server::redis()];
    let bad = free_ports(1, false);
    // Never accepted: the kernel completes the connections, nobody answers.
    let mute = std::net::TcpListener::bind("127.0.0.1:0").expect("a listener");
    let mute = mute.local_addr().expect("its address").port();
    let mut seen = Vec::new();
    for (source, target) in [(&ruvio, &targets[0]), (&redis, &targets[1])] {
        let mut conn = source.raw();
        for words in SOURCE {
            conn.cmd(words);
        }
        let mut at_target = target.raw();
        for words in TARGET {
            at_target.cmd(words);
        }
        conn.cmd(&["CONFIG", "SET", "slowlog-log-slower-than", "0"]);
        let mut replies: Vec<String> = CALLS
            .iter()
            .map(|words| {
                let reply = call(&mut conn, words, [target.port(), bad, mute]);
                format!("{} -> {}", words.join(" "), show(&reply))
            })
            .collect();
        // Each call's arguments as SLOWLOG keeps them: AUTH's and AUTH2's
        // secrets redacted (the ports differ, the rest is compared).
        let Value::Array(entries) = decode(&conn.cmd(&["SLOWLOG", "GET", "100"])) else {
            panic!("SLOWLOG GET");
        };
        for entry in entries {
            let Value::Array(fields) = entry else {
                panic!("a slowlog entry");
            };
            let Some(Value::Array(argv)) = fields.get(3) else {
                panic!("a slowlog entry's arguments");
            };
            let argv: Vec<String> = argv.iter().skip(3).map(Value::text).collect();
            replies.push(argv.join(" "));
        }
        seen.push(replies);
    }
    assert_eq!(seen[0], seen[1]);
    assert!(seen[0][0].contains("+OK"), "{}", seen[0][0]);
    let from_ruvio = Holdings::of(targets[0].port());
    from_ruvio.assert_same(&Holdings::of(targets[1].port()));
    let b = from_ruvio.pttl("0:b");
    assert!(b > 100_000 - TTL_SLACK_MS && b <= 100_000, "PTTL b {b}");
}

/// Keys of every type, in the encodings their sizes choose, some with TTLs.
fn fill(conn: &mut RawConn) -> Vec<String> {
    let mut keys = Vec::new();
    let mut run = |key: &str, words: Vec<String>| {
        let reply = conn.cmd(&words);
        assert!(!reply.starts_with(b"-"), "{words:?}: {}", show(&reply));
        if !keys.contains(&key.to_string()) {
            keys.push(key.to_string());
        }
    };
    let w = |s: &str| s.split(' ').map(str::to_string).collect::<Vec<_>>();
    run("str", w("SET str hello"));
    run("int", w("SET int 12345"));
    run("big", vec!["SET".into(), "big".into(), "x".repeat(200_000)]);
    run("list", w("RPUSH list a b c"));
    let long: Vec<String> = (0..300).map(|i| format!("item-{i}")).collect();
    run(
        "biglist",
        [vec!["RPUSH".into(), "biglist".into()], long.clone()].concat(),
    );
    run("hash", w("HSET hash f v g w"));
    let pairs: Vec<String> = (0..300)
        .flat_map(|i| [format!("f{i}"), format!("{i}")])
        .collect();
    run(
        "bighash",
        [vec!["HSET".into(), "bighash".into()], pairs].concat(),
    );
    run("intset", w("SADD intset 1 2 3"));
    run("set", w("SADD set a b c"));
    run(
        "bigset",
        [vec!["SADD".into(), "bigset".into()], long.clone()].concat(),
    );
    run("zset", w("ZADD zset 1 a 2.5 b"));
    let scored: Vec<String> = (0..300)
        .flat_map(|i| [format!("{i}"), format!("m{i}")])
        .collect();
    run(
        "bigzset",
        [vec!["ZADD".into(), "bigzset".into()], scored].concat(),
    );
    run("stream", w("XADD stream 1-1 f v"));
    run("stream", w("XADD stream 2-1 g w"));
    run("stream", w("XGROUP CREATE stream grp 0"));
    run(
        "stream",
        w("XREADGROUP GROUP grp alice COUNT 1 STREAMS stream >"),
    );
    run("hll", w("PFADD hll a b c"));
    for (key, ms) in [
        ("str", "90000"),
        ("biglist", "200000"),
        ("bighash", "300000"),
        ("stream", "400000"),
    ] {
        run(key, w(&format!("PEXPIRE {key} {ms}")));
    }
    keys
}

/// Ruvio -> redis-server (COPY) and Ruvio -> Ruvio (moving) keep every value
/// (DEBUG DIGEST of the source before equals both targets') and every TTL;
/// the moved keys are gone from the source.
#[test]
fn values_of_every_type_and_ttls_move_to_ruvio_and_redis_server() {
    if require_redis_server("cluster_migrate").is_none() {
        return;
    }
    let source = Server::ruvio(PortMode::Forward, 1);
    let (to_redis, to_ruvio) = (Server::redis(), Server::ruvio(PortMode::Forward, 1));
    let mut conn = source.raw();
    let keys = fill(&mut conn);
    let before = Holdings::of(source.port());
    let migrate = |port: u16, copy: bool| {
        let port = port.to_string();
        let mut words = vec!["MIGRATE", "127.0.0.1", &port, "", "0", "5000"];
        if copy {
            words.push("COPY");
        }
        words.push("KEYS");
        words.extend(keys.iter().map(String::as_str));
        words.iter().map(|w| w.to_string()).collect::<Vec<_>>()
    };
    assert_eq!(conn.cmd(&migrate(to_redis.port(), true)), b"+OK\r\n");
    Holdings::of(to_redis.port()).assert_same(&before);
    assert_eq!(conn.cmd(&migrate(to_ruvio.port(), false)), b"+OK\r\n");
    Holdings::of(to_ruvio.port()).assert_same(&before);
    assert_eq!(conn.cmd(&["DBSIZE"]), b":0\r\n");
    // A key into database 1 of the Ruvio target, over the cached connection.
    conn.cmd(&["SET", "one", "1"]);
    let port = to_ruvio.port().to_string();
    let reply = conn.cmd(&["MIGRATE", "127.0.0.1", &port, "one", "1", "5000"]);
    assert_eq!(reply, b"+OK\r\n");
    let mut there = to_ruvio.raw();
    there.cmd(&["SELECT", "1"]);
    assert_eq!(there.cmd(&["GET", "one"]), b"$1\r\n1\r\n");
}

/// In forward mode with several shards MIGRATE runs on the shard holding its
/// keys, the client's or another (asked of it: `shard::node_forward`); keys
/// on several shards answer -CROSSSLOT (one shard runs it whole).
#[test]
fn forward_mode_moves_the_keys_of_every_shard() {
    if require_redis_server("cluster_migrate").is_none() {
        return;
    }
    let source = Server::ruvio(PortMode::Forward, 2);
    let target = Server::redis();
    let port = target.port().to_string();
    let mut conn = source.raw();
    for i in 0..16 {
        let key = format!("k{i}");
        conn.cmd(&["SET", &key, "v"]);
        let reply = conn.cmd(&["MIGRATE", "127.0.0.1", &port, &key, "0", "5000"]);
        assert_eq!(reply, b"+OK\r\n", "{key}: {}", show(&reply));
    }
    assert_eq!(text(&target.raw().cmd(&["DBSIZE"])), "16");
    assert_eq!(text(&conn.cmd(&["DBSIZE"])), "0");
    // Keys of both shards (k0..k15 hash to both halves) in one call.
    let mut words = vec![
        "MIGRATE",
        "127.0.0.1",
        port.as_str(),
        "",
        "0",
        "5000",
        "KEYS",
    ];
    let keys: Vec<String> = (0..16).map(|i| format!("k{i}")).collect();
    for key in &keys {
        conn.cmd(&["SET", key, "v"]);
        words.push(key.as_str());
    }
    let reply = conn.cmd(&words);
    assert_eq!(
        show(&reply),
        show(b"-CROSSSLOT Keys in request don't hash to the same slot\r\n")
    );
}

/// `redis-cli --cluster <words>` from `port`, which must succeed without `[ERR]`.
fn cluster_tool(cli: &std::path::Path, words: &[&str]) -> String {
    let out = Command::new(cli)
        .arg("--cluster")
        .args(words)
        .output()
        .expect("redis-cli");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success() && !stdout.contains("[ERR]"),
        "--cluster {words:?}: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// A Ruvio node serving slots 0-299 and a redis-server node the rest:
/// `redis-cli --cluster reshard` moves 200 slots out of the Ruvio node while
/// redis-py's RedisCluster writes, `rebalance` with the Ruvio node's weight 0
/// moves the rest, and `del-node` takes the emptied node out. No acknowledged
/// write is lost and `--cluster check` finds the cluster whole at each step.
#[test]
fn redis_cli_reshards_rebalances_and_deletes_a_ruvio_node_while_a_client_writes() {
    let Some(cli) = redis_cli("cluster_migrate") else {
        return;
    };
    let port = free_ports(1, true);
    let _node = Node::start(port, 1, &unique_dir("migrate-out"));
    let redis = Server::redis_cluster_node();
    split_at(port, redis.port(), 300);
    let stop = unique_dir("migrate-out-stop").join("stop");
    let writer = start_writer(port, &stop);
    std::thread::sleep(std::time::Duration::from_millis(500));
    reshard(&cli, port, redis.port(), 200);
    assert_eq!(slots_of(port), 100);
    wait_for("the cluster whole after the reshard", || {
        check_whole(&cli, port)?;
        check_whole(&cli, redis.port())
    });
    let ruvio_id = myid(port);
    let at = format!("127.0.0.1:{port}");
    let weight = format!("{ruvio_id}=0");
    cluster_tool(
        &cli,
        &[
            "rebalance",
            &at,
            "--cluster-weight",
            &weight,
            "--cluster-yes",
        ],
    );
    assert_eq!(slots_of(port), 0);
    assert_eq!(slots_of(redis.port()), 16384);
    let written = stop_writer(writer, &stop);
    wait_for("the cluster whole after the rebalance", || {
        check_whole(&cli, redis.port())
    });
    all_written_present(redis.port(), written);
    let left = RawConn::connect(port).cmd(&["DBSIZE"]);
    assert_eq!(left, b":0\r\n", "{written} written; {}", leftovers(port));
    let redis_at = format!("127.0.0.1:{}", redis.port());
    cluster_tool(&cli, &["del-node", &redis_at, &ruvio_id]);
    wait_for("the redis-server node alone", || {
        let nodes = text(&redis.raw().cmd(&["CLUSTER", "NODES"]));
        match nodes.lines().count() {
            1 => Ok(()),
            _ => Err(nodes),
        }
    });
    check_whole(&cli, redis.port()).expect("whole without the Ruvio node");
    all_written_present(redis.port(), written);
}

/// What a node that should be empty still holds: some keys with their slots
/// and TTLs (seen under load: DBSIZE 11,748 and 25,807 after a rebalance).
fn leftovers(port: u16) -> String {
    let mut conn = RawConn::connect(port);
    let scan = decode(&conn.cmd(&["SCAN", "0", "COUNT", "50"]));
    let Value::Array(parts) = scan else {
        return format!("SCAN: {scan:?}");
    };
    let Some(Value::Array(keys)) = parts.get(1) else {
        return format!("SCAN: {parts:?}");
    };
    let info = text(&conn.cmd(&["INFO", "commandstats"]));
    let mut lines = Vec::new();
    for key in keys.iter().take(20).map(Value::text) {
        let slot = text(&conn.cmd(&["CLUSTER", "KEYSLOT", &key]));
        let ttl = text(&conn.cmd(&["PTTL", &key]));
        lines.push(format!("{key} slot {slot} pttl {ttl}"));
    }
    format!("{}\n{info}", lines.join("\n"))
}

/// The keys MIGRATE moved leave a replica of the source too (Redis propagates
/// MIGRATE as DEL of the accepted keys); COPY leaves them.
#[test]
fn moved_keys_leave_the_sources_replica() {
    if require_redis_server("cluster_migrate").is_none() {
        return;
    }
    let source = Server::ruvio(PortMode::Forward, 1);
    let (replica, target) = (Server::redis(), Server::redis());
    follow(&replica, &source);
    let mut conn = source.raw();
    for key in ["a", "b", "c", "kept"] {
        conn.cmd(&["SET", key, "v"]);
    }
    let port = target.port().to_string();
    let moved = conn.cmd(&[
        "MIGRATE",
        "127.0.0.1",
        &port,
        "",
        "0",
        "5000",
        "KEYS",
        "a",
        "b",
    ]);
    assert_eq!(moved, b"+OK\r\n");
    let copied = conn.cmd(&["MIGRATE", "127.0.0.1", &port, "c", "0", "5000", "COPY"]);
    assert_eq!(copied, b"+OK\r\n");
    let mut at_replica = replica.raw();
    common::replication::wait_for("the replica without the moved keys", || {
        at_replica.cmd(&["DBSIZE"]) == b":2\r\n"
    });
    compare_conns(&mut conn, &mut at_replica, &["0"], "after MIGRATE");
    assert_eq!(target.raw().cmd(&["DBSIZE"]), b":3\r\n");
}

/// On a node of a cluster, MIGRATE's keys route as Redis routes them (MOVED,
/// CROSSSLOT; on a migrating slot it runs whatever is left) and it sends
/// RESTORE-ASKING, which an importing target takes: a Ruvio node and a
/// redis-server node, each beside a redis-server peer, answer the same bytes.
#[test]
fn on_a_cluster_node_migrate_routes_and_restores_asking_as_redis_server() {
    if require_redis_server("cluster_migrate").is_none() {
        return;
    }
    let side = common::cluster_process::SideBySide::start(&unique_dir("migrate-node"));
    // `{06S}...` are slot 0 (the tested node's), `foo` 12182 (the peer's).
    let [ruvio, redis] = side.replay(&[
        "SET {06S}a 1",
        "SET {06S}b 2",
        "MIGRATE 127.0.0.1 $P {06S}a 0 5000",
        "MIGRATE 127.0.0.1 $P foo 0 5000",
        "MIGRATE 127.0.0.1 $P  0 5000 KEYS {06S}a foo",
        "MIGRATE 127.0.0.1 $P {06S}b 1 5000",
        "CLUSTER SETSLOT 0 MIGRATING $PEERID",
        "@peer CLUSTER SETSLOT 0 IMPORTING $MYID",
        "MIGRATE 127.0.0.1 $P {06S}a 0 5000",
        "GET {06S}a",
        "MIGRATE 127.0.0.1 $P {06S}a 0 5000",
        "MIGRATE 127.0.0.1 $P  0 5000 KEYS {06S}a {06S}b",
        "@peer ASKING",
        "@peer MGET {06S}a {06S}b",
    ]);
    assert_eq!(ruvio, redis);
    assert!(ruvio[8].ends_with(r#""+OK\r\n""#), "{}", ruvio[8]);
}

/// A master that gives its last slot away with SETSLOT NODE becomes a replica
/// of the slot's new owner, as a redis-server 7.0 node does (with
/// `cluster-allow-replica-migration yes`, the default); with it `no`, it
/// stays an empty master. A Ruvio node and a redis-server node, each beside a
/// redis-server peer.
#[test]
fn a_master_emptied_by_setslot_node_follows_the_new_owner_as_redis_server() {
    if require_redis_server("cluster_migrate").is_none() {
        return;
    }
    for allow in ["yes", "no"] {
        let side = common::cluster_process::SideBySide::start(&unique_dir("emptied"));
        for (tested, peer) in side.pairs() {
            let (conn, peer_id) = (&mut RawConn::connect(tested), myid(peer));
            let set = ["CONFIG", "SET", "cluster-allow-replica-migration", allow];
            assert_eq!(conn.cmd(&set), b"+OK\r\n");
            assert_eq!(
                conn.cmd(&["CLUSTER", "DELSLOTSRANGE", "1", "8191"]),
                b"+OK\r\n"
            );
            let give = ["CLUSTER", "SETSLOT", "0", "NODE", &peer_id];
            assert_eq!(conn.cmd(&give), b"+OK\r\n", "{tested}");
            let expected = match allow {
                "yes" => format!(" myself,slave {peer_id} "),
                _ => " myself,master - ".to_string(),
            };
            wait_for(&format!("{tested}: {expected}"), || {
                let line = own_line(tested);
                line.contains(&expected).then_some(()).ok_or(line)
            });
        }
    }
}

/// The keys MIGRATE moved are deleted as a DEL deletes them, on Ruvio as on
/// redis-server: a client watching one fails its EXEC, and the `del`
/// keyspace event names it; a COPY touches nothing.
#[test]
fn moved_keys_touch_watchers_and_notify_as_redis_server() {
    if require_redis_server("cluster_migrate").is_none() {
        return;
    }
    let (ruvio, redis) = (Server::ruvio(PortMode::Forward, 1), Server::redis());
    let mut seen = Vec::new();
    for source in [&ruvio, &redis] {
        let target = Server::redis();
        let port = target.port().to_string();
        let (mut conn, mut watcher, mut events) = (source.raw(), source.raw(), source.raw());
        let mut log = Vec::new();
        let mut run = |conn: &mut RawConn, words: &[&str]| {
            let reply = show(&conn.cmd(words));
            let line = words.join(" ").replace(&port, "T");
            log.push(format!("{line} -> {reply}"));
        };
        run(
            &mut conn,
            &["CONFIG", "SET", "notify-keyspace-events", "Eg"],
        );
        run(&mut events, &["SUBSCRIBE", "__keyevent@0__:del"]);
        for key in ["a", "b", "c"] {
            run(&mut conn, &["SET", key, "v"]);
        }
        run(&mut watcher, &["WATCH", "a", "b"]);
        run(
            &mut conn,
            &["MIGRATE", "127.0.0.1", &port, "b", "0", "5000", "COPY"],
        );
        run(&mut watcher, &["MULTI"]);
        run(&mut watcher, &["SET", "x", "1"]);
        run(&mut watcher, &["EXEC"]);
        run(&mut watcher, &["WATCH", "a"]);
        run(
            &mut conn,
            &["MIGRATE", "127.0.0.1", &port, "a", "0", "5000"],
        );
        run(&mut watcher, &["MULTI"]);
        run(&mut watcher, &["SET", "x", "2"]);
        run(&mut watcher, &["EXEC"]);
        run(&mut conn, &["DEL", "c"]);
        // The events so far: MIGRATE's of `a`, then DEL's of `c` (none for COPY).
        for _ in 0..2 {
            log.push(show(&events.read_reply()));
        }
        seen.push(log);
    }
    assert_eq!(seen[0], seen[1]);
    assert!(
        seen[0].iter().any(|l| l.contains("EXEC -> \"*-1")),
        "{:?}",
        seen[0]
    );
}

/// Under `--durability always` the deletion is in the log before MIGRATE's
/// `+OK`: a source killed right after it restarts without the moved keys.
#[test]
fn moved_keys_stay_gone_after_a_sigkill_under_always() {
    if require_redis_server("cluster_migrate").is_none() {
        return;
    }
    let dir = unique_dir("migrate-always");
    let dir_arg = dir.to_str().expect("a UTF-8 path");
    let args = ["--dir", dir_arg, "--durability", "always"];
    let target = Server::redis();
    let port = target.port().to_string();
    let source = Server::ruvio_with(PortMode::Forward, 1, &args);
    let mut conn = source.raw();
    for key in ["a", "b", "kept"] {
        assert_eq!(conn.cmd(&["SET", key, "v"]), b"+OK\r\n");
    }
    let moved = conn.cmd(&[
        "MIGRATE",
        "127.0.0.1",
        &port,
        "",
        "0",
        "5000",
        "KEYS",
        "a",
        "b",
    ]);
    assert_eq!(moved, b"+OK\r\n");
    drop(source); // SIGKILL right after the reply
    let source = Server::ruvio_with(PortMode::Forward, 1, &args);
    let mut conn = source.raw();
    assert_eq!(conn.cmd(&["EXISTS", "a", "b", "kept"]), b":1\r\n");
    assert_eq!(target.raw().cmd(&["EXISTS", "a", "b"]), b":2\r\n");
}

/// Connections MIGRATE opens to a target as the target's CLIENT LIST counts
/// them (the caller's own excluded).
fn migrate_connections(target: &Server) -> usize {
    let list = text(&target.raw().cmd(&["CLIENT", "LIST"]));
    list.lines().count() - 1
}

/// The connection to a target is cached: a second MIGRATE reuses it; one the
/// target closed is opened again without an error (Redis' retry); after 10 s
/// unused it is closed, as redis-server's `migrate_cached_sockets`.
#[test]
fn connections_to_a_target_are_cached_reopened_and_closed_when_idle() {
    if require_redis_server("cluster_migrate").is_none() {
        return;
    }
    let source = Server::ruvio(PortMode::Forward, 1);
    let target = Server::redis();
    let port = target.port().to_string();
    let mut conn = source.raw();
    for key in ["a", "b", "c"] {
        conn.cmd(&["SET", key, "v"]);
    }
    let migrate = |conn: &mut RawConn, key: &str| {
        let reply = conn.cmd(&["MIGRATE", "127.0.0.1", &port, key, "0", "5000"]);
        assert_eq!(reply, b"+OK\r\n", "MIGRATE {key}: {}", show(&reply));
    };
    migrate(&mut conn, "a");
    assert_eq!(migrate_connections(&target), 1);
    let killed = target
        .raw()
        .cmd(&["CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"]);
    assert_eq!(killed, b":1\r\n");
    migrate(&mut conn, "b");
    migrate(&mut conn, "c");
    assert_eq!(migrate_connections(&target), 1);
    assert_eq!(target.raw().cmd(&["EXISTS", "a", "b", "c"]), b":3\r\n");
    std::thread::sleep(std::time::Duration::from_secs(10));
    wait_for("the idle connection closed", || {
        match migrate_connections(&target) {
            0 => Ok(()),
            n => Err(format!("{n} open")),
        }
    });
}

/// `redis-cli --cluster reshard` between two Ruvio processes, both ways,
/// while redis-py's RedisCluster writes: nothing lost, the cluster whole.
#[test]
fn redis_cli_reshards_between_two_ruvio_nodes_while_a_client_writes() {
    let Some(cli) = redis_cli("cluster_migrate") else {
        return;
    };
    let (a, b) = (free_ports(1, true), free_ports(1, true));
    let _nodes = [
        Node::start(a, 1, &unique_dir("migrate-ruvio-a")),
        Node::start(b, 1, &unique_dir("migrate-ruvio-b")),
    ];
    common::cluster_process::halves(a, b);
    let stop = unique_dir("migrate-ruvio-stop").join("stop");
    let writer = start_writer(a, &stop);
    std::thread::sleep(std::time::Duration::from_millis(500));
    reshard(&cli, a, b, 150);
    reshard(&cli, b, a, 50);
    let written = stop_writer(writer, &stop);
    assert_eq!((slots_of(a), slots_of(b)), (8192 - 100, 8192 + 100));
    wait_for("the cluster whole", || {
        check_whole(&cli, a)?;
        check_whole(&cli, b)
    });
    all_written_present(b, written);
}

/// Keys `k:0` .. `k:<count>` written through a cluster client from `port`.
fn write_keys(port: u16, count: usize) {
    let script = format!(
        "from redis.cluster import RedisCluster\n\
         rc = RedisCluster(host='127.0.0.1', port={port})\n\
         for i in range({count}): rc.set('k:%d' % i, 'v%d' % i)\n"
    );
    let out = Command::new("python3")
        .args(["-c", &script])
        .output()
        .expect("python3");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// In a cluster of Ruvio nodes, `redis-cli --cluster add-node` joins a third,
/// `rebalance --cluster-use-empty-masters` moves its share of the slots into it,
/// and `fix` finishes a slot left half moved (MIGRATING on its owner,
/// IMPORTING on the other): the keys move, `check` finds the cluster whole.
#[test]
fn redis_cli_add_node_rebalance_and_fix_on_ruvio_nodes() {
    let Some(cli) = redis_cli("cluster_migrate") else {
        return;
    };
    let ports: Vec<u16> = (0..3).map(|_| free_ports(1, true)).collect();
    let _nodes: Vec<Node> = ports
        .iter()
        .map(|&p| Node::start(p, 1, &unique_dir("migrate-add")))
        .collect();
    let [a, b, c] = [ports[0], ports[1], ports[2]];
    common::cluster_process::halves(a, b);
    write_keys(a, 300);
    let at = |port: u16| format!("127.0.0.1:{port}");
    cluster_tool(&cli, &["add-node", &at(c), &at(a)]);
    wait_for("three nodes agreeing", || {
        common::cluster_process::agree(&[a, b, c], 3)
    });
    // Weights 49:50:1, so that about 164 slots move (a third would take
    // minutes in a debug build: every slot's SETSLOT NODE syncs nodes.conf).
    let weights = [(a, 49), (b, 50), (c, 1)].map(|(p, w)| format!("{}={w}", myid(p)));
    let from = at(a);
    let mut words = vec!["rebalance", &from, "--cluster-use-empty-masters"];
    words.push("--cluster-weight");
    words.extend(weights.iter().map(String::as_str));
    words.push("--cluster-yes");
    cluster_tool(&cli, &words);
    assert!((150..=180).contains(&slots_of(c)), "{}", slots_of(c));
    // Leave the slot of `k:1` half moved from its owner to another node.
    let slot: u16 = text(&RawConn::connect(a).cmd(&["CLUSTER", "KEYSLOT", "k:1"]))
        .parse()
        .expect("a slot");
    let owner = *ports
        .iter()
        .find(|&&p| {
            RawConn::connect(p).cmd(&["CLUSTER", "COUNTKEYSINSLOT", &slot.to_string()]) != b":0\r\n"
        })
        .expect("the slot's owner");
    let other = *ports.iter().find(|&&p| p != owner).expect("another node");
    let s = slot.to_string();
    common::cluster_process::ok(
        owner,
        &["CLUSTER", "SETSLOT", &s, "MIGRATING", &myid(other)],
    );
    common::cluster_process::ok(
        other,
        &["CLUSTER", "SETSLOT", &s, "IMPORTING", &myid(owner)],
    );
    assert!(check_whole(&cli, a).is_err(), "an open slot is reported");
    cluster_tool(&cli, &["fix", &at(a), "--cluster-yes"]);
    wait_for("the cluster whole", || check_whole(&cli, a));
    let moved = RawConn::connect(other).cmd(&["CLUSTER", "COUNTKEYSINSLOT", &s]);
    assert_ne!(moved, b":0\r\n");
    assert_eq!(
        RawConn::connect(owner).cmd(&["CLUSTER", "COUNTKEYSINSLOT", &s]),
        b":0\r\n"
    );
    let script = format!(
        "from redis.cluster import RedisCluster\n\
         rc = RedisCluster(host='127.0.0.1', port={c})\n\
         bad = [i for i in range(300) if rc.get('k:%d' % i) != b'v%d' % i]\n\
         assert not bad, bad[:10]\n"
    );
    let out = Command::new("python3")
        .args(["-c", &script])
        .output()
        .expect("python3");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
