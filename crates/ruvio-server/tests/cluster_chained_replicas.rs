//! Chained replicas of a cluster replica node (docs/cluster.md, "Replicas of
//! nodes"): a Ruvio master node A, a Ruvio replica node B of it (CLUSTER
//! REPLICATE), and a plain (non-cluster) server replicating B, a
//! redis-server 7 or a Ruvio, as Redis Cluster allows (REPLICAOF is refused
//! on cluster nodes). B relays A's stream as a Redis replica does: the
//! sub-replica ends with A's keys (DUMP and PTTL equal) while A is written,
//! B counts it (`connected_slaves:1`, online), a killed link continues
//! (`+CONTINUE`: B's `sync_partial_ok` moves, `sync_full` stays 1), and
//! after CLUSTER FAILOVER on B the sub-replica continues under B's new ID
//! (A's history its `replid2`) and receives the writes now made on B, as it
//! does when A is killed and B elected. In
//! per-shard mode (each shard a node) and in forward mode (the process one
//! node of two shards, following A on its single stream). REPLICAOF on a
//! cluster node, WAIT on a replica node and CLUSTER REPLICATE of a replica
//! are refused with redis-server 7's bytes.

mod common;

use common::cluster_process::{
    holds_tagged, ok, text, three_masters_and_a_replica, write_tagged, Node,
};
use common::replication::{field, same_keys_dumped, sync_counts, wait_for, write_keys};
use common::*;

fn int(reply: &[u8]) -> i64 {
    match decode(reply) {
        Value::Int(n) => n,
        other => panic!("not an integer: {other:?}"),
    }
}

fn holds_same_keys(master: u16, sub: u16, count: usize) {
    let mut compared = Ok(0);
    wait_for("the sub-replica holds the master's keys", || {
        compared = same_keys_dumped(&mut RawConn::connect(master), &mut RawConn::connect(sub));
        compared.is_ok()
    });
    assert_eq!(compared, Ok(count));
}

fn replication_field(port: u16, name: &str) -> String {
    field(&mut RawConn::connect(port), name)
}

/// Node `b` replicates node `a` (which holds every slot), `b`'s link up and
/// `a` seeing it as its replica.
fn replicate(a: u16, b: u16) {
    ok(a, &["CLUSTER", "ADDSLOTSRANGE", "0", "16383"]);
    let a_id = text(&RawConn::connect(a).cmd(&["CLUSTER", "MYID"]));
    ok(b, &["CLUSTER", "MEET", "127.0.0.1", &a.to_string()]);
    wait_for("B knows A", || {
        text(&RawConn::connect(b).cmd(&["CLUSTER", "NODES"])).contains(&a_id)
    });
    ok(b, &["CLUSTER", "REPLICATE", &a_id]);
    wait_for("B's link up", || {
        replication_field(b, "master_link_status") == "up"
    });
    let b_id = text(&RawConn::connect(b).cmd(&["CLUSTER", "MYID"]));
    wait_for("A sees B as its replica", || {
        let nodes = text(&RawConn::connect(a).cmd(&["CLUSTER", "NODES"]));
        nodes
            .lines()
            .any(|l| l.starts_with(&b_id) && l.contains(&format!("slave {a_id}")))
    });
    wait_for("A's cluster up", || {
        text(&RawConn::connect(a).cmd(&["CLUSTER", "INFO"])).contains("cluster_state:ok")
    });
}

/// A (all slots) and B its replica node; 2 shards in forward mode.
fn master_and_replica_node(forward: bool) -> (Node, Node) {
    let start = |tag: &str| match forward {
        true => Node::start_forward(free_ports(1, true), 2, &unique_dir(tag)),
        false => Node::start(free_ports(1, true), 1, &unique_dir(tag)),
    };
    let (a, b) = (start("chain-a"), start("chain-b"));
    replicate(a.port, b.port);
    (a, b)
}

/// What a replica node `b` of `a` refuses, and `a` of `b`: the sub-replica
/// can only be a plain server.
fn refusals(a: u16, b: u16) -> Vec<String> {
    let b_id = text(&RawConn::connect(b).cmd(&["CLUSTER", "MYID"]));
    let mut on_b = RawConn::connect(b);
    vec![
        show(&on_b.cmd(&["REPLICAOF", "127.0.0.1", "1"])),
        show(&on_b.cmd(&["WAIT", "0", "0"])),
        show(&RawConn::connect(a).cmd(&["CLUSTER", "REPLICATE", &b_id])),
    ]
}

/// REPLICAOF on a cluster node, WAIT on a replica node and CLUSTER
/// REPLICATE of a replica answer redis-server 7's bytes.
#[test]
fn a_replica_node_refuses_as_redis_server() {
    if require_redis_server("cluster_chained_replicas").is_none() {
        return;
    }
    let (a, b) = master_and_replica_node(false);
    let (x, y) = (Server::redis_cluster_node(), Server::redis_cluster_node());
    replicate(x.port(), y.port());
    let ours = refusals(a.port, b.port);
    assert_eq!(ours, refusals(x.port(), y.port()));
    assert_eq!(
        ours[2],
        show(b"-ERR I can only replicate a master, not a replica.\r\n")
    );
}

/// B counts its one sub-replica, online.
fn counts_its_sub_replica(b: u16) {
    wait_for("B's sub-replica online", || {
        replication_field(b, "connected_slaves") == "1"
            && replication_field(b, "slave0").contains("state=online")
    });
}

/// The whole chain: A written while `sub` follows B, a killed link, and
/// CLUSTER FAILOVER on B.
fn chain(forward: bool, sub: Server) {
    let (a, b) = master_and_replica_node(forward);
    chain_between(a.port, b.port, sub);
}

/// [`chain`] between the nodes on ports `a` and `b`.
fn chain_between(a: u16, b: u16, sub: Server) {
    let mut conn = RawConn::connect(a);
    write_keys(&mut conn, "before", 300);
    let mut on_b = RawConn::connect(b);

    // The sub-replica syncs from B while A is written.
    let writer = std::thread::spawn(move || {
        write_keys(&mut RawConn::connect(a), "during", 600);
    });
    let b_port = b.to_string();
    let mut s = sub.raw();
    assert_eq!(s.cmd(&["REPLICAOF", "127.0.0.1", &b_port]), b"+OK\r\n");
    writer.join().unwrap();
    wait_for("the sub-replica's link up", || {
        field(&mut s, "master_link_status") == "up"
    });
    write_keys(&mut conn, "after", 30);
    holds_same_keys(a, sub.port(), 930);
    counts_its_sub_replica(b);
    // A's history, A's offsets, all the way down.
    let a_replid = replication_field(a, "master_replid");
    assert_eq!(field(&mut s, "master_replid"), a_replid);
    wait_for("the sub-replica at A's offset", || {
        field(&mut s, "slave_repl_offset") == replication_field(a, "master_repl_offset")
    });
    assert_eq!(sync_counts(&mut on_b), (1, 0), "one full sync from B");

    // A killed link continues.
    assert_eq!(on_b.cmd(&["CLIENT", "KILL", "TYPE", "replica"]), b":1\r\n");
    write_keys(&mut conn, "killed", 30);
    wait_for("the sub-replica continued", || {
        sync_counts(&mut on_b).1 == 1
    });
    assert_eq!(sync_counts(&mut on_b), (1, 1), "no second full sync");
    holds_same_keys(a, sub.port(), 960);
    counts_its_sub_replica(b);

    // B takes over: the sub-replica continues, and receives B's writes.
    ok(b, &["CLUSTER", "FAILOVER"]);
    wait_for("B a master", || replication_field(b, "role") == "master");
    let b_replid = replication_field(b, "master_replid");
    assert_ne!(b_replid, a_replid);
    assert_eq!(replication_field(b, "master_replid2"), a_replid);
    wait_for("A and the sub-replica follow B", || {
        replication_field(b, "connected_slaves") == "2"
            && field(&mut s, "master_replid") == b_replid
            && field(&mut s, "master_link_status") == "up"
    });
    assert_eq!(
        sync_counts(&mut on_b),
        (1, 3),
        "the sub-replica and A continued"
    );
    write_keys(&mut on_b, "on-b", 30);
    holds_same_keys(b, sub.port(), 990);
    wait_for("the sub-replica at B's offset", || {
        field(&mut s, "slave_repl_offset") == replication_field(b, "master_repl_offset")
    });
}

fn redis_sub_replica() -> Option<Server> {
    require_redis_server("cluster_chained_replicas")?;
    let sub = Server::redis();
    let no_delay = ["CONFIG", "SET", "repl-diskless-sync-delay", "0"];
    assert_eq!(sub.raw().cmd(&no_delay), b"+OK\r\n");
    Some(sub)
}

#[test]
fn a_redis_server_replicates_a_replica_node() {
    if let Some(sub) = redis_sub_replica() {
        chain(false, sub);
    }
}

/// Shard 1 of a 2-shard process replicates shard 0 (another node of the
/// same process) and serves a sub-replica on its own port: what the replica
/// node drops when its history changes is its own replicas, not its
/// master's (its link among them).
#[test]
fn a_redis_server_replicates_a_shard_node_replicating_its_sibling() {
    let Some(sub) = redis_sub_replica() else {
        return;
    };
    let nodes = Node::start(free_ports(2, true), 2, &unique_dir("chain-shards"));
    replicate(nodes.port, nodes.port + 1);
    chain_between(nodes.port, nodes.port + 1, sub);
    // B's link to A synced once and was never dropped by B's changes.
    assert_eq!(sync_counts(&mut RawConn::connect(nodes.port)), (1, 0));
}

#[test]
fn a_ruvio_replicates_a_replica_node() {
    chain(false, Server::ruvio(PortMode::Forward, 2));
}

#[test]
fn a_redis_server_replicates_a_forward_mode_replica_node() {
    if let Some(sub) = redis_sub_replica() {
        chain(true, sub);
    }
}

/// A of three masters killed: B, elected, keeps its sub-replica, which
/// continues with `+CONTINUE` and counts in WAIT on B.
#[test]
fn a_sub_replica_continues_when_its_replica_node_is_elected() {
    let Some(sub) = redis_sub_replica() else {
        return;
    };
    let (mut masters, replica) = three_masters_and_a_replica("chain-kill", &[]);
    let b = replica.port;
    let mut on_b = RawConn::connect(b);
    // A hash tag of the first master's slots.
    let tag = (0..)
        .map(|i| format!("t{i}"))
        .find(|tag| int(&on_b.cmd(&["CLUSTER", "KEYSLOT", tag])) < 5461)
        .unwrap();
    write_tagged(masters[0].port, &tag, 0..200);
    let mut s = sub.raw();
    assert_eq!(
        s.cmd(&["REPLICAOF", "127.0.0.1", &b.to_string()]),
        b"+OK\r\n"
    );
    wait_for("the sub-replica holds A's keys", || {
        holds_tagged(sub.raw(), &tag, 200)
    });
    counts_its_sub_replica(b);
    assert_eq!(sync_counts(&mut on_b), (1, 0));

    masters[0].kill();
    wait_for("B elected", || replication_field(b, "role") == "master");
    let b_replid = replication_field(b, "master_replid");
    wait_for("the sub-replica follows B's history", || {
        field(&mut s, "master_replid") == b_replid && field(&mut s, "master_link_status") == "up"
    });
    assert_eq!(sync_counts(&mut on_b), (1, 1), "it continued");
    // B's writes reach it, and WAIT on B counts it.
    write_tagged(b, &tag, 200..300);
    assert!(holds_tagged(sub.raw(), &tag, 300));
}
