//! Replica migration with Ruvio nodes, as redis-server's
//! (`cluster-migration-barrier`, `cluster-allow-replica-migration`;
//! docs/cluster.md, "Replicas of nodes and failover"): two masters, the
//! first with two replicas, the second with one, each node its own
//! `ruvio --cluster-enabled yes` process. A `kill -9` of the lone replica
//! leaves the second master orphaned; five seconds on, the first master's
//! replica with the smallest name moves to it (the other stays, the barrier
//! of 1 kept) and, as after CLUSTER REPLICATE, syncs the orphan's data: it
//! holds the second master's keys and no longer the first's. The same with
//! forward-mode processes of two shards (the process one node).

mod common;

use common::cluster_process::{agree, ok, text, Node};
use common::cluster_tools::myid;
use common::replication::wait_for;
use common::*;
use std::sync::Mutex;
use std::time::{Duration, Instant};

fn link_status(port: u16) -> String {
    let info = text(&RawConn::connect(port).cmd(&["INFO", "replication"]));
    info.lines()
        .find_map(|l| l.strip_prefix("master_link_status:"))
        .unwrap_or_default()
        .trim()
        .to_string()
}

/// `port` replicates the node named `master_id`, its link up.
fn follows(port: u16, master_id: &str) -> bool {
    let nodes = text(&RawConn::connect(port).cmd(&["CLUSTER", "NODES"]));
    let me = nodes
        .lines()
        .find(|l| l.contains("myself"))
        .unwrap_or_default();
    me.contains(&format!("slave {master_id}")) && link_status(port) == "up"
}

/// A hash tag whose slot is in `slots`.
fn tag_in(port: u16, slots: std::ops::Range<i64>) -> String {
    let mut conn = RawConn::connect(port);
    (0..)
        .map(|i| format!("t{i}"))
        .find(
            |tag| match decode(&conn.cmd(&["CLUSTER", "KEYSLOT", tag])) {
                Value::Int(slot) => slots.contains(&slot),
                other => panic!("{other:?}"),
            },
        )
        .unwrap()
}

/// Keys `{tag}:0..100`, acknowledged by every replica of `port`.
fn write(port: u16, tag: &str, replicas: &str) {
    let mut conn = RawConn::connect(port);
    for i in 0..100 {
        let key = format!("{{{tag}}}:{i}");
        assert_eq!(conn.cmd(&["SET", &key, &i.to_string()]), b"+OK\r\n");
    }
    let acked = conn.cmd(&["WAIT", replicas, "2000"]);
    assert_eq!(acked, format!(":{replicas}\r\n").as_bytes());
}

/// How many of `{tag}:0..100` `port` holds (READONLY: a replica serves them).
fn held(port: u16, tag: &str) -> usize {
    let mut conn = RawConn::connect(port);
    conn.cmd(&["READONLY"]);
    (0..100)
        .filter(|i| {
            let want = format!("${}\r\n{i}\r\n", i.to_string().len());
            conn.cmd(&["GET", &format!("{{{tag}}}:{i}")]) == want.as_bytes()
        })
        .count()
}

/// The tests here each time a move: one at a time, so they do not slow
/// each other.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

#[test]
fn a_replica_moves_to_the_master_its_lone_replica_left() {
    replica_migration(|port, dir| Node::start(port, 1, dir));
}

/// The same with forward-mode processes of two shards, each one node: the
/// membership's move makes the process follow the orphan (docs/cluster.md,
/// "In the binary: forward mode as one node").
#[test]
fn a_forward_mode_replica_moves_to_the_master_its_lone_replica_left() {
    replica_migration(|port, dir| Node::start_forward(port, 2, dir));
}

/// Five nodes started by `start`: two masters, two replicas of the first and
/// one of the second, whose `kill -9` orphans the second.
fn replica_migration(start: fn(u16, &std::path::Path) -> Node) {
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let mut nodes: Vec<Node> = (0..5)
        .map(|i| start(free_ports(1, true), &unique_dir(&format!("orphan-{i}"))))
        .collect();
    let ports: Vec<u16> = nodes.iter().map(|n| n.port).collect();
    let (m1, m2) = (ports[0], ports[1]);
    ok(m1, &["CLUSTER", "ADDSLOTSRANGE", "0", "8191"]);
    ok(m2, &["CLUSTER", "ADDSLOTSRANGE", "8192", "16383"]);
    for &other in &ports[1..] {
        ok(m1, &["CLUSTER", "MEET", "127.0.0.1", &other.to_string()]);
    }
    wait_for("five nodes agree", || agree(&ports, 5).is_ok());
    let (m1_id, m2_id) = (myid(m1), myid(m2));
    let (r1a, r1b, r2) = (ports[2], ports[3], ports[4]);
    for (replica, master_id) in [(r1a, &m1_id), (r1b, &m1_id), (r2, &m2_id)] {
        ok(replica, &["CLUSTER", "REPLICATE", master_id]);
    }
    for (replica, master_id) in [(r1a, &m1_id), (r1b, &m1_id), (r2, &m2_id)] {
        wait_for("a replica's link up", || follows(replica, master_id));
    }
    // Every node knows every replica as one (each learns it from the
    // replica's own PING or PONG).
    wait_for("five nodes agree on the roles", || agree(&ports, 5).is_ok());
    let (tag1, tag2) = (tag_in(m1, 0..8192), tag_in(m2, 8192..16384));
    write(m1, &tag1, "2");
    write(m2, &tag2, "1");
    // The candidate: the first master's replica with the smaller name.
    let (mover, stayer) = match myid(r1a) < myid(r1b) {
        true => (r1a, r1b),
        false => (r1b, r1a),
    };
    assert_eq!(held(mover, &tag1), 100);

    nodes[4].kill();
    let t0 = Instant::now();
    // FAIL of the lone replica (2-3 s), then 5 s orphaned, then the move.
    let deadline = Duration::from_secs(15);
    while !follows(mover, &m2_id) {
        let seen = || text(&RawConn::connect(mover).cmd(&["CLUSTER", "NODES"]));
        assert!(
            t0.elapsed() < deadline,
            "no replica moved to the orphan:\n{}",
            seen()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    eprintln!("a replica moved {:?} after the kill", t0.elapsed());
    assert!(
        t0.elapsed() > Duration::from_secs(5),
        "moved before 5 s orphaned"
    );
    wait_for("it holds the orphan's keys", || held(mover, &tag2) == 100);
    assert_eq!(held(mover, &tag1), 0, "the old master's keys went with it");
    assert!(
        follows(stayer, &m1_id),
        "the barrier keeps one with the first"
    );
    // Every node sees the move.
    let mover_id = myid(mover);
    wait_for("the masters see it", || {
        [m1, m2].iter().all(|&port| {
            let nodes = text(&RawConn::connect(port).cmd(&["CLUSTER", "NODES"]));
            nodes
                .lines()
                .any(|l| l.starts_with(&mover_id) && l.contains(&format!("slave {m2_id}")))
        })
    });
}
