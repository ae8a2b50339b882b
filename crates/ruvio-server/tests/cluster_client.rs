//! Per-shard mode seen as a Redis Cluster: the topology commands, MOVED and CROSSSLOT on
//! the wire, and the `redis` crate's cluster client routing keys to both shards.
//!
//! With `RUVIO_TEST_TARGET=redis` these run against a real Redis Cluster of two masters
//! owning the same slot ranges ([0, 8192) and [8192, 16384)).

mod common;

use common::Value as Resp;
use common::*;
use redis::cluster::{ClusterClient, ClusterConnection};
use redis::{FromRedisValue, Value};
use std::collections::BTreeSet;

const SHARDS: usize = 2;

fn cluster_connection(server: &Server, urls: Vec<String>) -> ClusterConnection {
    let _ = server;
    ClusterClient::builder(urls)
        .connection_timeout(IO_TIMEOUT)
        .response_timeout(IO_TIMEOUT)
        .build()
        .expect("ClusterClient")
        .get_connection()
        .expect("cluster connection")
}

fn q<T: FromRedisValue>(con: &mut impl redis::ConnectionLike, args: &[&str]) -> T {
    let mut cmd = redis::cmd(args[0]);
    for arg in &args[1..] {
        cmd.arg(*arg);
    }
    cmd.query(con).unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

fn is_node_id(id: &str) -> bool {
    id.len() == 40 && id.bytes().all(|b| b.is_ascii_hexdigit())
}

/// The id each port reports with CLUSTER MYID.
fn node_ids(server: &Server) -> Vec<String> {
    server
        .ports
        .iter()
        .map(|&port| {
            let reply = decode(&RawConn::connect(port).cmd(&["CLUSTER", "MYID"])).text();
            assert!(is_node_id(&reply), "CLUSTER MYID {reply:?}");
            reply
        })
        .collect()
}

#[test]
fn cluster_slots_shards_nodes_describe_each_shard() {
    let server = Server::per_shard(SHARDS);
    let ids = node_ids(&server);
    assert_eq!(
        ids.iter().collect::<BTreeSet<_>>().len(),
        SHARDS,
        "ids are distinct"
    );
    for &port in &server.ports {
        let mut conn = RawConn::connect(port);

        // CLUSTER SLOTS: [start, end, [ip, port, id, ...]] per shard.
        let slots = decode(&conn.cmd(&["CLUSTER", "SLOTS"]));
        let Resp::Array(entries) = slots else {
            panic!("CLUSTER SLOTS {slots:?}")
        };
        assert_eq!(entries.len(), SHARDS);
        let mut seen = BTreeSet::new();
        for entry in &entries {
            let Resp::Array(fields) = entry else {
                panic!("slot entry {entry:?}")
            };
            let (Resp::Int(lo), Resp::Int(hi)) = (&fields[0], &fields[1]) else {
                panic!("slot range {fields:?}")
            };
            let Resp::Array(node) = &fields[2] else {
                panic!("node {fields:?}")
            };
            assert_eq!(node[0].text(), "127.0.0.1");
            let Resp::Int(node_port) = node[1] else {
                panic!("port {node:?}")
            };
            let shard = server
                .ports
                .iter()
                .position(|&p| i64::from(p) == node_port)
                .expect("a shard port");
            let (want_lo, want_hi) = shard_slot_range(shard, SHARDS);
            assert_eq!((*lo, *hi), (i64::from(want_lo), i64::from(want_hi) - 1));
            assert_eq!(
                node[2].text(),
                ids[shard],
                "CLUSTER SLOTS id = CLUSTER MYID of that port"
            );
            assert_eq!(fields.len(), 3, "masters only, no replicas");
            seen.insert(shard);
        }
        assert_eq!(seen.len(), SHARDS);

        // CLUSTER SHARDS: slots and one master node per shard.
        let shards = decode(&conn.cmd(&["CLUSTER", "SHARDS"]));
        let Resp::Array(shards) = shards else {
            panic!("CLUSTER SHARDS {shards:?}")
        };
        assert_eq!(shards.len(), SHARDS);
        for shard in &shards {
            let Some(Resp::Array(range)) = shard.get("slots") else {
                panic!("{shard:?}")
            };
            let Some(Resp::Array(nodes)) = shard.get("nodes") else {
                panic!("{shard:?}")
            };
            assert_eq!(nodes.len(), 1);
            let node = &nodes[0];
            let node_port = node.get("port").expect("port").text();
            let i = server
                .ports
                .iter()
                .position(|p| p.to_string() == node_port)
                .expect("a shard port");
            let (lo, hi) = shard_slot_range(i, SHARDS);
            assert_eq!(range, &[Resp::Int(lo.into()), Resp::Int(i64::from(hi) - 1)]);
            assert_eq!(node.get("id").unwrap().text(), ids[i]);
            assert_eq!(node.get("ip").unwrap().text(), "127.0.0.1");
            assert_eq!(node.get("role").unwrap().text(), "master");
            assert_eq!(node.get("health").unwrap().text(), "online");
        }

        // CLUSTER NODES: one line per shard, `myself` on the one asked.
        let nodes = decode(&conn.cmd(&["CLUSTER", "NODES"])).text();
        let lines: Vec<&str> = nodes.lines().collect();
        assert_eq!(lines.len(), SHARDS, "{nodes}");
        for line in lines {
            let fields: Vec<&str> = line.split(' ').collect();
            assert!(fields.len() >= 9, "{line}");
            let i = ids.iter().position(|id| id == fields[0]).expect("known id");
            assert!(
                fields[1].starts_with(&format!("127.0.0.1:{}", server.ports[i])),
                "{line}"
            );
            let flags: Vec<&str> = fields[2].split(',').collect();
            assert!(flags.contains(&"master"), "{line}");
            assert_eq!(flags.contains(&"myself"), server.ports[i] == port, "{line}");
            assert_eq!(fields[3], "-", "{line}");
            assert_eq!(fields[7], "connected", "{line}");
            let (lo, hi) = shard_slot_range(i, SHARDS);
            assert_eq!(fields[8], format!("{}-{}", lo, hi - 1), "{line}");
        }

        let info = decode(&conn.cmd(&["CLUSTER", "INFO"])).text();
        for field in [
            "cluster_state:ok",
            "cluster_slots_assigned:16384",
            "cluster_slots_ok:16384",
            "cluster_known_nodes:2",
            "cluster_size:2",
        ] {
            assert!(
                info.lines().any(|l| l == field),
                "CLUSTER INFO lacks {field}:\n{info}"
            );
        }
        assert_eq!(conn.cmd(&["READONLY"]), b"+OK\r\n");
        assert_eq!(conn.cmd(&["READWRITE"]), b"+OK\r\n");
        conn.send(b"HELLO 3\r\n");
        let hello = decode(&conn.read_reply());
        assert_eq!(
            hello.get("mode").map(Resp::text).as_deref(),
            Some("cluster")
        );
    }
}

#[test]
fn cluster_keyslot_and_key_counts() {
    let server = Server::per_shard(SHARDS);
    let mut conn = server.raw();
    assert_eq!(conn.cmd(&["CLUSTER", "KEYSLOT", "foo"]), b":12182\r\n");
    assert_eq!(conn.cmd(&["CLUSTER", "KEYSLOT", "bar"]), b":5061\r\n");
    assert_eq!(
        conn.cmd(&["CLUSTER", "KEYSLOT", "{user1000}.following"]),
        b":3443\r\n"
    );
    assert_eq!(conn.cmd(&["CLUSTER", "KEYSLOT", "user1000"]), b":3443\r\n");
    assert_eq!(
        conn.cmd(&["CLUSTER", "KEYSLOT", "foo{}{bar}"]),
        format!(":{}\r\n", key_slot(b"foo{}{bar}")).as_bytes()
    );
    assert_eq!(
        conn.cmd(&["CLUSTER", "KEYSLOT", "foo{{bar}}zap"]),
        format!(":{}\r\n", key_slot(b"{bar")).as_bytes()
    );
    // `bar` (slot 5061) lives on shard 0, whose port this connection uses.
    assert_eq!(shard_of_key("bar", SHARDS), 0);
    assert_eq!(conn.cmd(&["CLUSTER", "COUNTKEYSINSLOT", "5061"]), b":0\r\n");
    assert_eq!(
        conn.cmd(&["CLUSTER", "GETKEYSINSLOT", "5061", "10"]),
        b"*0\r\n"
    );
    for key in ["bar", "{bar}1", "{bar}2"] {
        assert_eq!(conn.cmd(&["SET", key, "v"]), b"+OK\r\n");
    }
    assert_eq!(conn.cmd(&["CLUSTER", "COUNTKEYSINSLOT", "5061"]), b":3\r\n");
    let keys = decode(&conn.cmd(&["CLUSTER", "GETKEYSINSLOT", "5061", "10"]));
    let Resp::Array(keys) = keys else {
        panic!("{keys:?}")
    };
    let keys: BTreeSet<String> = keys.iter().map(Resp::text).collect();
    assert_eq!(
        keys,
        ["bar", "{bar}1", "{bar}2"]
            .iter()
            .map(|s| s.to_string())
            .collect()
    );
    let two = decode(&conn.cmd(&["CLUSTER", "GETKEYSINSLOT", "5061", "2"]));
    assert!(
        matches!(&two, Resp::Array(keys) if keys.len() == 2),
        "{two:?}"
    );
    assert_eq!(
        conn.cmd(&["CLUSTER", "COUNTKEYSINSLOT", "16384"]),
        b"-ERR Invalid slot\r\n"
    );
    assert_eq!(
        conn.cmd(&["CLUSTER", "GETKEYSINSLOT", "1", "-1"]),
        b"-ERR Invalid slot or number of keys\r\n"
    );
    assert_eq!(conn.cmd(&["DBSIZE"]), b":3\r\n");
}

#[test]
fn moved_and_crossslot_on_the_wire() {
    let server = Server::per_shard(SHARDS);
    // foo: slot 12182, shard 1. bar: slot 5061, shard 0.
    let mut shard0 = RawConn::connect(server.shard_port(0));
    let mut shard1 = RawConn::connect(server.shard_port(1));
    let moved_foo = format!("-MOVED 12182 127.0.0.1:{}\r\n", server.shard_port(1));
    let moved_bar = format!("-MOVED 5061 127.0.0.1:{}\r\n", server.shard_port(0));
    assert_eq!(shard0.cmd(&["GET", "foo"]), moved_foo.as_bytes());
    assert_eq!(shard0.cmd(&["SET", "foo", "1"]), moved_foo.as_bytes());
    assert_eq!(shard0.cmd(&["EXISTS", "foo"]), moved_foo.as_bytes());
    assert_eq!(shard1.cmd(&["GET", "bar"]), moved_bar.as_bytes());
    assert_eq!(shard0.cmd(&["SET", "bar", "1"]), b"+OK\r\n");
    assert_eq!(shard1.cmd(&["SET", "foo", "2"]), b"+OK\r\n");
    assert_eq!(shard0.cmd(&["GET", "bar"]), b"$1\r\n1\r\n");
    assert_eq!(shard1.cmd(&["GET", "foo"]), b"$1\r\n2\r\n");
    // All keys in one slot of another shard: MOVED to it.
    assert_eq!(shard0.cmd(&["MGET", "foo", "{foo}a"]), moved_foo.as_bytes());
    // Keys in one slot on this shard: fine.
    assert_eq!(
        shard0.cmd(&["MGET", "bar", "{bar}x"]),
        b"*2\r\n$1\r\n1\r\n$-1\r\n"
    );
    // Different slots: CROSSSLOT, whether the slots are on one shard or on two.
    let crossslot = b"-CROSSSLOT Keys in request don't hash to the same slot\r\n";
    let other_slot_same_shard = key_on_shard("same", 0, SHARDS);
    assert_ne!(key_slot(other_slot_same_shard.as_bytes()), key_slot(b"bar"));
    assert_eq!(
        shard0.cmd(&["MGET", "bar", &other_slot_same_shard]),
        crossslot
    );
    assert_eq!(shard0.cmd(&["MGET", "bar", "foo"]), crossslot);
    assert_eq!(shard0.cmd(&["DEL", "bar", "foo"]), crossslot);
    assert_eq!(shard0.cmd(&["MSET", "bar", "1", "foo", "2"]), crossslot);
    assert_eq!(shard0.cmd(&["RENAME", "bar", "foo"]), crossslot);
    assert_eq!(shard1.cmd(&["EXISTS", "foo", "bar"]), crossslot);
    // Keyless commands answer anywhere; the connection survives the errors.
    assert_eq!(shard0.cmd(&["PING"]), b"+PONG\r\n");
    assert_eq!(shard1.cmd(&["ECHO", "x"]), b"$1\r\nx\r\n");
    // Each shard counts its own keys.
    assert_eq!(shard0.cmd(&["DBSIZE"]), b":1\r\n");
    assert_eq!(shard1.cmd(&["DBSIZE"]), b":1\r\n");
    // MOVED inside a pipeline does not disturb the order of the other replies.
    shard0.send(b"GET bar\r\nGET foo\r\nPING\r\n");
    shard0.expect(format!("$1\r\n1\r\n{moved_foo}+PONG\r\n").as_bytes());
}

/// Redis Cluster refuses SELECT; Ruvio's per-shard mode keeps databases (issue 2: "SELECT
/// works in both modes"). Only checked against Ruvio.
#[test]
fn select_in_per_shard_mode() {
    if target() == Target::Redis {
        eprintln!("select_in_per_shard_mode: Redis Cluster has only db 0; Ruvio-only check");
        return;
    }
    let server = Server::per_shard(SHARDS);
    let mut shard0 = RawConn::connect(server.shard_port(0));
    assert_eq!(shard0.cmd(&["SET", "bar", "zero"]), b"+OK\r\n");
    assert_eq!(shard0.cmd(&["SELECT", "3"]), b"+OK\r\n");
    assert_eq!(shard0.cmd(&["GET", "bar"]), b"$-1\r\n");
    assert_eq!(shard0.cmd(&["SET", "bar", "three"]), b"+OK\r\n");
    assert_eq!(shard0.cmd(&["SELECT", "0"]), b"+OK\r\n");
    assert_eq!(shard0.cmd(&["GET", "bar"]), b"$4\r\nzero\r\n");
}

#[test]
fn cluster_client_routes_keys_to_both_shards() {
    let server = Server::per_shard(SHARDS);
    let mut con = cluster_connection(&server, server.urls());
    let keys: Vec<String> = (0..200).map(|i| format!("ck{i}")).collect();
    for (i, k) in keys.iter().enumerate() {
        assert_eq!(q::<String>(&mut con, &["SET", k, &i.to_string()]), "OK");
    }
    for (i, k) in keys.iter().enumerate() {
        assert_eq!(q::<i64>(&mut con, &["GET", k]), i as i64);
        assert_eq!(q::<i64>(&mut con, &["INCR", k]), i as i64 + 1);
    }
    // Each shard holds exactly the keys whose slots it owns.
    for shard in 0..SHARDS {
        let expected = keys
            .iter()
            .filter(|k| shard_of_key(k, SHARDS) == shard)
            .count();
        assert!(expected > 50);
        let mut raw = RawConn::connect(server.shard_port(shard));
        assert_eq!(
            raw.cmd(&["DBSIZE"]),
            format!(":{expected}\r\n").as_bytes(),
            "shard {shard}"
        );
    }
    // Hash tags keep multi-key commands on one node.
    assert_eq!(
        q::<String>(&mut con, &["MSET", "{user1}a", "1", "{user1}b", "2"]),
        "OK"
    );
    assert_eq!(
        q::<Vec<i64>>(&mut con, &["MGET", "{user1}a", "{user1}b"]),
        [1, 2]
    );
    assert_eq!(
        q::<String>(&mut con, &["RENAME", "{user1}a", "{user1}c"]),
        "OK"
    );
    assert_eq!(q::<i64>(&mut con, &["DEL", "{user1}b", "{user1}c"]), 2);
    assert_eq!(
        q::<String>(&mut con, &["MSET", "{user2}a", "1", "{user2}b", "2"]),
        "OK"
    );
    assert_ne!(
        shard_of_key("{user1}", SHARDS),
        shard_of_key("{user2}", SHARDS),
        "tags on both shards"
    );
    // A command the client sends whole to the first key's node: the server's CROSSSLOT.
    let mut cmd = redis::cmd("RENAME");
    cmd.arg("{user2}a").arg("{user1}z");
    let error = cmd
        .query::<Value>(&mut con)
        .expect_err("RENAME across slots");
    assert_eq!(error.code(), Some("CROSSSLOT"), "{error}");
    assert_eq!(
        error.detail(),
        Some("Keys in request don't hash to the same slot"),
        "{error}"
    );
    // Pipelines are split by node and reassembled in order.
    let mut pipe = redis::cluster::cluster_pipe();
    for k in keys.iter().take(50) {
        pipe.cmd("GET").arg(k);
    }
    let values: Vec<i64> = pipe.query(&mut con).expect("cluster pipeline");
    assert_eq!(values, (1..=50).collect::<Vec<i64>>());
}

/// The client is seeded with one node only and finds the other through the topology
/// commands; keys of the other shard work.
#[test]
fn cluster_client_seeded_with_one_node() {
    let server = Server::per_shard(SHARDS);
    for seed in 0..SHARDS {
        let url = format!("redis://127.0.0.1:{}/", server.shard_port(seed));
        let mut con = cluster_connection(&server, vec![url]);
        for shard in 0..SHARDS {
            let key = key_on_shard(&format!("seed{seed}-"), shard, SHARDS);
            assert_eq!(q::<String>(&mut con, &["SET", &key, "v"]), "OK");
            assert_eq!(q::<String>(&mut con, &["GET", &key]), "v");
            let mut raw = RawConn::connect(server.shard_port(shard));
            assert_eq!(raw.cmd(&["GET", &key]), b"$1\r\nv\r\n");
        }
    }
}

/// A plain (non-cluster) client on one shard's port follows a MOVED by hand, as
/// cluster clients do.
#[test]
fn moved_points_at_the_owner() {
    let server = Server::per_shard(SHARDS);
    let mut con = server.client();
    let key = key_on_shard("mv", 1, SHARDS);
    let mut cmd = redis::cmd("SET");
    cmd.arg(&key).arg("v");
    let error = cmd.query::<Value>(&mut con).expect_err("MOVED");
    assert_eq!(error.code(), Some("MOVED"));
    // The redirect is `MOVED <slot> <host>:<port>`.
    let (address, slot) = error.redirect_node().expect("redirect target");
    assert_eq!(address, format!("127.0.0.1:{}", server.shard_port(1)));
    assert_eq!(slot, key_slot(key.as_bytes()));
    let mut owner = redis::Client::open(format!("redis://{address}/"))
        .unwrap()
        .get_connection()
        .unwrap();
    assert_eq!(q::<String>(&mut owner, &["SET", &key, "v"]), "OK");
    assert_eq!(q::<String>(&mut owner, &["GET", &key]), "v");
}
