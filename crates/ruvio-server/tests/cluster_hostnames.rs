//! `cluster-announce-hostname` and `cluster-preferred-endpoint-type` on nodes
//! of the bus, side by side with redis-server 7.0 nodes given the same
//! settings: each node's hostname travels in its PINGs' hostname extension
//! (the peer shows it on the node's CLUSTER NODES line, and forgets it when the
//! node stops announcing one), and CLUSTER SLOTS, CLUSTER SHARDS and `-MOVED`
//! name nodes by the preferred endpoint (ip, hostname, or nothing) with the
//! other addresses as metadata, byte for byte as redis-server does. Pairs of
//! Ruvio nodes, of redis-servers, and of one of each (either meeting the other)
//! must tell the same.

mod common;

use common::bus_node::wait_for;
use common::cluster_process::{key_in, ok, text, Node};
use common::*;

/// One node of a pair: what keeps it running, its client port.
struct Started {
    _guard: Box<dyn std::any::Any>,
    port: u16,
}

/// A forward-mode Ruvio node of two shards announcing `hostname`.
fn ruvio_node(hostname: &str) -> Started {
    let port = free_ports(1, true);
    let dir = unique_dir("cluster-hostnames");
    let args = [
        "--port-mode",
        "forward",
        "--cluster-announce-hostname",
        hostname,
    ];
    let node = Node::start_bound(port, 2, &dir, "127.0.0.1", &args);
    Started {
        _guard: Box::new(node),
        port,
    }
}

/// A redis-server node announcing `hostname`.
fn redis_node(hostname: &str) -> Started {
    let server = Server::redis_cluster_node_with(&["--cluster-announce-hostname", hostname]);
    Started {
        port: server.port(),
        _guard: Box::new(server),
    }
}

/// The address field (`ip:port@cport[,hostname]`) of the line of the node
/// named `name` in `port`'s CLUSTER NODES.
fn address_of(port: u16, name: &str) -> String {
    let nodes = text(&RawConn::connect(port).cmd(&["CLUSTER", "NODES"]));
    nodes
        .lines()
        .find(|l| l.starts_with(name))
        .and_then(|l| l.split(' ').nth(1))
        .unwrap_or_default()
        .to_string()
}

/// CLUSTER SHARDS with its shards in a fixed order (redis-server lists them
/// in its node dictionary's order).
fn shards(port: u16) -> String {
    let Value::Array(shards) = decode(&RawConn::connect(port).cmd(&["CLUSTER", "SHARDS"])) else {
        panic!("CLUSTER SHARDS is an array");
    };
    let mut shown: Vec<String> = shards.iter().map(render).collect();
    shown.sort();
    shown.join("\n")
}

/// `value` as text: bulks as their text, arrays in brackets.
fn render(value: &Value) -> String {
    match value {
        Value::Bulk(bytes) => String::from_utf8_lossy(bytes).into_owned(),
        Value::Array(items) => {
            let items: Vec<String> = items.iter().map(render).collect();
            format!("[{}]", items.join(" "))
        }
        other => format!("{other:?}"),
    }
}

/// What node A (hostname `a.example`, slots 0-8191) and B (`b.example`, the
/// rest) tell: each one's line in the other's CLUSTER NODES, then under each
/// preferred endpoint type A's CLUSTER SLOTS, CLUSTER SHARDS and `-MOVED` for
/// a key of B, then B's line at A once B announces no hostname and the
/// `-MOVED` naming it by hostname; ports and names written as placeholders.
fn told(start_a: impl Fn(&str) -> Started, start_b: impl Fn(&str) -> Started) -> Vec<String> {
    let (a, b) = (start_a("a.example"), start_b("b.example"));
    ok(a.port, &["CLUSTER", "ADDSLOTSRANGE", "0", "8191"]);
    ok(b.port, &["CLUSTER", "ADDSLOTSRANGE", "8192", "16383"]);
    ok(
        a.port,
        &["CLUSTER", "MEET", "127.0.0.1", &b.port.to_string()],
    );
    let id = |port: u16| text(&RawConn::connect(port).cmd(&["CLUSTER", "MYID"]));
    let (a_id, b_id) = (id(a.port), id(b.port));
    wait_for("each node sees the other's hostname", || {
        for (port, peer, host) in [(a.port, &b_id, "b.example"), (b.port, &a_id, "a.example")] {
            let info = text(&RawConn::connect(port).cmd(&["CLUSTER", "INFO"]));
            let address = address_of(port, peer);
            if !info.contains("cluster_state:ok") || !address.ends_with(host) {
                return Err(format!("{port}: {address}\n{info}"));
            }
        }
        Ok(())
    });
    let mut told = vec![address_of(a.port, &b_id), address_of(b.port, &a_id)];
    let moved_key = key_in(a.port, 8192..16384).0;
    for endpoint in ["ip", "hostname", "unknown-endpoint"] {
        ok(
            a.port,
            &["CONFIG", "SET", "cluster-preferred-endpoint-type", endpoint],
        );
        told.push(show(&RawConn::connect(a.port).cmd(&["CLUSTER", "SLOTS"])));
        told.push(shards(a.port));
        told.push(show(&RawConn::connect(a.port).cmd(&["GET", &moved_key])));
    }
    ok(b.port, &["CONFIG", "SET", "cluster-announce-hostname", ""]);
    wait_for("B's hostname gone at A", || {
        match address_of(a.port, &b_id) {
            address if address.contains(',') => Err(address),
            _ => Ok(()),
        }
    });
    told.push(address_of(a.port, &b_id));
    // A hostname wanted of a node that announces none: `?`.
    ok(
        a.port,
        &[
            "CONFIG",
            "SET",
            "cluster-preferred-endpoint-type",
            "hostname",
        ],
    );
    told.push(show(&RawConn::connect(a.port).cmd(&["GET", &moved_key])));
    let words = [
        (a_id, "<a-id>"),
        (b_id, "<b-id>"),
        ((a.port + 10000).to_string(), "<a-bus>"),
        ((b.port + 10000).to_string(), "<b-bus>"),
        (a.port.to_string(), "<a-port>"),
        (b.port.to_string(), "<b-port>"),
    ];
    told.into_iter()
        .map(|mut line| {
            for (word, placeholder) in &words {
                line = line.replace(word.as_str(), placeholder);
            }
            line
        })
        .collect()
}

#[test]
fn hostnames_and_preferred_endpoints_as_redis_server() {
    let both_redis = told(redis_node, redis_node);
    assert!(
        both_redis[0].ends_with(",b.example"),
        "the test sees redis-server's hostnames: {both_redis:?}"
    );
    let both_ruvio = told(ruvio_node, ruvio_node);
    for (i, (ruvio, redis)) in both_ruvio.iter().zip(&both_redis).enumerate() {
        assert_eq!(ruvio, redis, "item {i}");
    }
    assert_eq!(
        told(ruvio_node, redis_node),
        both_redis,
        "Ruvio meets redis-server"
    );
    assert_eq!(
        told(redis_node, ruvio_node),
        both_redis,
        "redis-server meets Ruvio"
    );
}
