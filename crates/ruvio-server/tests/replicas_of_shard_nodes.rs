//! Ruvio as a primary in per-shard mode: each shard is a Redis Cluster node on
//! its own port and a primary of its own (docs/replication.md "Ruvio as a
//! primary", `replication::history`). A real redis-server 7.0 follows each
//! node (`REPLICAOF 127.0.0.1 <shard k's port>`, 2 and 4 shards): its full sync
//! holds exactly its node's keys, the stream after it (several clients writing
//! every type to every node, keys hash-tagged to each node) only its node's
//! writes, and every key compares equal (TYPE, TTL, DEBUG DIGEST-VALUE). Each
//! node has its own replid, offset and backlog; WAIT on a node counts its own
//! replica only; CLIENT KILL TYPE replica on a node continues with `+CONTINUE`
//! on that node alone; `min-replicas-to-write` is judged per node; FAILOVER and
//! REPLICAOF keep their cluster refusals.

mod common;

use common::replication::*;
use common::*;
use std::time::Duration;

fn info_field(conn: &mut RawConn, section: &str, name: &str) -> String {
    let info = decode(&conn.cmd(&["INFO", section])).text();
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .map(|v| v.trim().to_string())
        .unwrap_or_default()
}

/// Data of every type on node `k` (keys tagged `{tag}`), before the replicas.
fn fill_node(c: &mut RawConn, tag: &str) {
    let k = |name: &str| format!("{{{tag}}}{name}");
    let mut commands = vec![
        vec!["SET".to_string(), k("str"), "hello".into()],
        vec!["SET".into(), k("int"), "12345".into()],
        vec![
            "RPUSH".into(),
            k("list"),
            "a".into(),
            "b".into(),
            "1".into(),
        ],
        vec!["HSET".into(), k("hash"), "f".into(), "v".into()],
        vec![
            "ZADD".into(),
            k("zset"),
            "1".into(),
            "a".into(),
            "2.5".into(),
            "b".into(),
        ],
        vec![
            "SADD".into(),
            k("intset"),
            "1".into(),
            "2".into(),
            "-9".into(),
        ],
        vec![
            "SET".into(),
            k("ttl"),
            "v".into(),
            "PX".into(),
            "600000".into(),
        ],
        vec![
            "XADD".into(),
            k("events"),
            "1-1".into(),
            "e".into(),
            "added".into(),
        ],
        vec![
            "XGROUP".into(),
            "CREATE".into(),
            k("events"),
            "workers".into(),
            "0".into(),
        ],
    ];
    let mut big = vec!["RPUSH".to_string(), k("biglist")];
    big.extend((0..1000).map(|i| format!("item-{i}")));
    commands.push(big);
    for i in 0..100 {
        commands.push(vec!["SET".into(), k(&format!("key:{i}")), format!("v{i}")]);
    }
    for command in commands {
        let reply = c.cmd(&command);
        assert!(!reply.starts_with(b"-"), "{command:?}: {}", show(&reply));
    }
}

/// Writes of every kind from `clients` threads at once, each to every node
/// over its own connection to it, `rounds` each.
fn write_load(primary: &Server, tags: &[String], clients: usize, rounds: usize) {
    let threads: Vec<_> = (0..clients)
        .map(|t| {
            let mut conns: Vec<(RawConn, String)> = tags
                .iter()
                .enumerate()
                .map(|(shard, tag)| (RawConn::connect(primary.shard_port(shard)), tag.clone()))
                .collect();
            std::thread::spawn(move || {
                for i in 0..rounds {
                    for (c, tag) in conns.iter_mut() {
                        let k = |name: &str| format!("{{{tag}}}{name}:{t}:{}", i % 23);
                        let commands = vec![
                            vec!["SET".into(), k("s"), format!("v{i}")],
                            vec!["SET".into(), k("ttl"), "x".into(), "EX".into(), "500".into()],
                            vec!["SET".into(), k("gone"), "x".into(), "PX".into(), "30".into()],
                            vec!["INCRBYFLOAT".into(), k("f"), "1.5".into()],
                            vec!["RPUSH".into(), k("l"), format!("{i}")],
                            vec!["HSET".into(), k("h"), format!("f{}", i % 5), format!("{i}")],
                            vec!["SADD".into(), k("set"), format!("m{}", i % 11)],
                            vec!["SPOP".into(), k("set")],
                            vec!["ZINCRBY".into(), k("z"), "2".into(), format!("m{}", i % 7)],
                            vec!["XADD".into(), k("x"), "*".into(), "i".into(), format!("{i}")],
                            vec![
                                "EVAL".into(),
                                "redis.call('incr', KEYS[1]); return redis.call('lpush', KEYS[2], ARGV[1])"
                                    .into(),
                                "2".into(),
                                k("ea"),
                                k("eb"),
                                format!("{i}"),
                            ],
                        ];
                        for command in &commands {
                            let reply = c.cmd(command);
                            assert!(!reply.starts_with(b"-"), "{command:?}: {}", show(&reply));
                        }
                        c.cmd(&["MULTI"]);
                        c.cmd(&["SET", &k("txa"), &i.to_string()]);
                        c.cmd(&["INCR", &k("txn")]);
                        let exec = c.cmd(&["EXEC"]);
                        assert!(exec.starts_with(b"*2"), "EXEC: {}", show(&exec));
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("writer");
    }
}

/// `replica` follows node `shard` of `primary`, until the node shows it online.
fn attach(replica: &Server, primary: &Server, shard: usize) {
    let port = primary.shard_port(shard).to_string();
    let mut r = replica.raw();
    assert_eq!(r.cmd(&["REPLICAOF", "127.0.0.1", &port]), b"+OK\r\n");
    wait_for("master_link_status:up", || {
        field(&mut r, "master_link_status") == "up"
    });
    let mut node = RawConn::connect(primary.shard_port(shard));
    wait_for("the replica online on its node", || {
        info_field(&mut node, "replication", "slave0").contains("state=online")
    });
}

fn compare_nodes(primary: &Server, replicas: &[Server], when: &str) {
    for (shard, replica) in replicas.iter().enumerate() {
        let mut node = RawConn::connect(primary.shard_port(shard));
        let mut r = replica.raw();
        compare_conns(&mut node, &mut r, &["0"], &format!("{when}, node {shard}"));
    }
}

fn replicas_of_nodes(shards: usize) {
    let primary = Server::ruvio(PortMode::PerShard, shards);
    let tags: Vec<String> = (0..shards).map(|k| hash_tag_on_shard(k, shards)).collect();
    let mut nodes: Vec<RawConn> = (0..shards)
        .map(|k| RawConn::connect(primary.shard_port(k)))
        .collect();
    for (node, tag) in nodes.iter_mut().zip(&tags) {
        fill_node(node, tag);
    }
    let replicas: Vec<Server> = (0..shards).map(|_| Server::redis()).collect();
    for (shard, replica) in replicas.iter().enumerate() {
        attach(replica, &primary, shard);
    }
    for node in nodes.iter_mut() {
        assert_eq!(sync_counts(node), (1, 0), "one full sync per node");
    }
    // Each replica holds exactly its node's keys.
    for (shard, replica) in replicas.iter().enumerate() {
        let mut r = replica.raw();
        let Value::Array(keys) = decode(&r.cmd(&["KEYS", "*"])) else {
            panic!("KEYS");
        };
        assert_eq!(keys.len(), 109, "node {shard}'s keys");
        for key in keys {
            assert_eq!(shard_of_key(&key.text(), shards), shard, "{key:?}");
        }
    }
    compare_nodes(&primary, &replicas, "after the full syncs");

    write_load(&primary, &tags, 3, 60);
    // Keys written with PX 30 expired: their DELs reach each node's replica.
    std::thread::sleep(Duration::from_millis(100));
    for (node, tag) in nodes.iter_mut().zip(&tags) {
        node.cmd(&["SCAN", "0", "COUNT", "100000"]);
        let marker = format!("{{{tag}}}wait-marker");
        assert_eq!(wait_all_by(node, &marker, "1", "5000"), b":1\r\n");
    }
    compare_nodes(&primary, &replicas, "after the load");

    // Each node is a primary of its own: its ID, its offset, its one replica.
    let mut replids = Vec::new();
    for (shard, (node, replica)) in nodes.iter_mut().zip(&replicas).enumerate() {
        let mut r = replica.raw();
        let offset = field(node, "master_repl_offset");
        wait_for("the replica's offset", || {
            field(&mut r, "slave_repl_offset") == offset
        });
        assert_eq!(field(node, "connected_slaves"), "1", "node {shard}");
        assert_eq!(field(node, "repl_backlog_active"), "1");
        let replid = field(node, "master_replid");
        assert_eq!(replid, field(&mut r, "master_replid"), "node {shard}");
        assert!(!replids.contains(&replid), "node {shard}'s own replid");
        replids.push(replid);
        let histlen: u64 = field(node, "repl_backlog_histlen").parse().unwrap();
        assert!(histlen > 0 && histlen <= offset.parse().unwrap());
        // INFO memory counts the node's own backlog.
        wait_for("the node's backlog in INFO memory", || {
            info_field(node, "memory", "mem_replication_backlog")
                == field(node, "repl_backlog_histlen")
        });
        let Value::Array(role) = decode(&node.cmd(&["ROLE"])) else {
            panic!("ROLE");
        };
        assert_eq!(role[0].text(), "master");
        assert_eq!(role[1], Value::Int(offset.parse().unwrap()));
        let Value::Array(listed) = &role[2] else {
            panic!("ROLE's replicas: {role:?}");
        };
        assert_eq!(listed.len(), 1, "node {shard} lists its replica only");
        // WAIT counts this node's replica, not the others'.
        node.cmd(&["SET", &format!("{{{}}}waited", tags[shard]), "1"]);
        assert_eq!(node.cmd(&["WAIT", "2", "200"]), b":1\r\n");
    }

    // Node 0's link killed: it continues from node 0's backlog; the other
    // nodes' counts do not move.
    let killed = nodes[0].cmd(&["CLIENT", "KILL", "TYPE", "replica"]);
    assert_eq!(killed, b":1\r\n");
    nodes[0].cmd(&["SET", &format!("{{{}}}after-kill", tags[0]), "1"]);
    wait_for("node 0's replica back online", || {
        info_field(&mut nodes[0], "replication", "slave0").contains("state=online")
    });
    assert_eq!(sync_counts(&mut nodes[0]), (1, 1), "a partial resync");
    for node in nodes.iter_mut().skip(1) {
        assert_eq!(sync_counts(node), (1, 0));
    }
    assert_eq!(nodes[0].cmd(&["WAIT", "1", "5000"]), b":1\r\n");
    compare_nodes(&primary, &replicas, "after the partial resync");

    // The cluster's refusals stay.
    assert_eq!(
        nodes[1].cmd(&["FAILOVER"]),
        b"-ERR FAILOVER not allowed in cluster mode. Use CLUSTER FAILOVER command instead.\r\n"
            .to_vec()
    );
    assert_eq!(
        nodes[1].cmd(&["REPLICAOF", "127.0.0.1", "1"]),
        b"-ERR REPLICAOF not allowed in cluster mode.\r\n".to_vec()
    );

    // min-replicas-to-write is judged per node: the last node's replica gone,
    // that node refuses writes and the others take them.
    for node in nodes.iter_mut() {
        assert_eq!(
            node.cmd(&["CONFIG", "SET", "min-replicas-to-write", "1"]),
            b"+OK\r\n"
        );
    }
    let mut replicas = replicas;
    let last = shards - 1;
    drop(replicas.pop());
    wait_for("the last node without its replica", || {
        field(&mut nodes[last], "connected_slaves") == "0"
    });
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(
        nodes[last].cmd(&["SET", &format!("{{{}}}refused", tags[last]), "1"]),
        b"-NOREPLICAS Not enough good replicas to write.\r\n".to_vec()
    );
    assert_eq!(
        nodes[0].cmd(&["SET", &format!("{{{}}}taken", tags[0]), "1"]),
        b"+OK\r\n"
    );

    // DEBUG CHANGE-REPL-ID starts a new history on its node alone.
    let before: Vec<String> = nodes
        .iter_mut()
        .map(|n| field(n, "master_replid"))
        .collect();
    assert_eq!(nodes[0].cmd(&["DEBUG", "CHANGE-REPL-ID"]), b"+OK\r\n");
    assert_ne!(field(&mut nodes[0], "master_replid"), before[0]);
    for (shard, node) in nodes.iter_mut().enumerate().skip(1) {
        assert_eq!(field(node, "master_replid"), before[shard]);
    }
}

#[test]
fn redis_replicas_of_2_shard_nodes() {
    if require_redis_server("redis_replicas_of_2_shard_nodes").is_none() {
        return;
    }
    replicas_of_nodes(2);
}

#[test]
fn redis_replicas_of_4_shard_nodes() {
    if require_redis_server("redis_replicas_of_4_shard_nodes").is_none() {
        return;
    }
    replicas_of_nodes(4);
}
