//! A node of the bus whose shard runs a busy script still redirects: a key of
//! another node gets `-MOVED`, a command across slots `-CROSSSLOT`, before
//! `-BUSY` (redis-server's `processCommand` checks the cluster first); its own
//! keys get `-BUSY`. A Ruvio node (forward mode as one node, and per-shard mode)
//! and a redis-server node in the same place, each beside a redis-server node
//! holding the other half of the slots, answer the same.

mod common;

use common::bus_node::wait_for;
use common::busy::{set_busy_threshold, BUSY, THRESHOLD_MS};
use common::cluster_process::{key_in, ok, text, Node};
use common::*;
use std::time::Duration;

/// One node: what keeps it running, its client port.
struct Started {
    _guard: Box<dyn std::any::Any>,
    port: u16,
}

/// What node A (slots 0-8191), busy with a script, tells a client of its
/// shard that asks for a key of B (a redis-server with the rest), for its
/// own key, across both, and writes B's key; B's port as `<b>`.
fn told_while_busy(a: Started) -> Vec<String> {
    let b = Server::redis_cluster_node_with(&[]);
    ok(a.port, &["CLUSTER", "ADDSLOTSRANGE", "0", "8191"]);
    ok(b.port(), &["CLUSTER", "ADDSLOTSRANGE", "8192", "16383"]);
    ok(
        a.port,
        &["CLUSTER", "MEET", "127.0.0.1", &b.port().to_string()],
    );
    wait_for("both nodes see the cluster ok", || {
        for port in [a.port, b.port()] {
            let info = text(&RawConn::connect(port).cmd(&["CLUSTER", "INFO"]));
            if !info.contains("cluster_state:ok") {
                return Err(format!("{port}: {info}"));
            }
        }
        Ok(())
    });
    let (own, other) = (key_in(a.port, 0..8192).0, key_in(a.port, 8192..16384).0);
    let mut witness = RawConn::connect(a.port);
    let mut runner = RawConn::connect(a.port);
    set_busy_threshold(&mut runner);
    runner.send(&encode(&["EVAL", "while true do end", "0"]));
    std::thread::sleep(Duration::from_millis(THRESHOLD_MS * 4));
    let mut told = Vec::new();
    for command in [
        vec!["GET", other.as_str()],
        vec!["SET", other.as_str(), "v"],
        vec!["GET", own.as_str()],
        vec!["MGET", own.as_str(), other.as_str()],
    ] {
        told.push(show(&witness.cmd(&command)));
    }
    assert_eq!(told[2], show(BUSY), "the script is still running");
    assert_eq!(witness.cmd(&["SCRIPT", "KILL"]), b"+OK\r\n");
    runner.read_reply();
    told.into_iter()
        .map(|line| line.replace(&b.port().to_string(), "<b>"))
        .collect()
}

#[test]
fn a_busy_nodes_shard_redirects_before_busy_as_redis_server() {
    let redis = told_while_busy({
        let server = Server::redis_cluster_node_with(&[]);
        Started {
            port: server.port(),
            _guard: Box::new(server),
        }
    });
    assert!(redis[0].starts_with("\"-MOVED "), "{redis:?}");
    for mode in ["forward", "per-shard"] {
        let port = free_ports(1, true);
        let dir = unique_dir("cluster-busy-redirect");
        let node = Node::start_bound(port, 1, &dir, "127.0.0.1", &["--port-mode", mode]);
        let ruvio = told_while_busy(Started {
            _guard: Box::new(node),
            port,
        });
        assert_eq!(ruvio, redis, "{mode} mode");
    }
}
