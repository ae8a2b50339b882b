//! `cluster-announce-port` and `cluster-announce-bus-port` on a node of the bus,
//! beside a redis-server 7.0 node given the same settings: what each shows of
//! itself (CLUSTER NODES's own address, CLUSTER SLOTS and SHARDS, CONFIG GET),
//! what each peer learns of the other, a change by CONFIG SET reaching the peer,
//! and nodes.conf keeping it; in forward mode (the process one node) and
//! per-shard mode (shard i announcing the given ports + i).
//!
//! The announced bus ports are TCP forwarders this test runs to the real ones,
//! so the nodes still reach each other there, and a forwarder that saw no
//! connection shows the peer did not use the announced port.

mod common;

use common::bus_node::wait_for;
use common::certs;
use common::cluster_process::{cluster_nodes, ok, own_line, text, Node};
use common::*;
use ruvio_server::cluster::nodes_file::NodeLine;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// A port that passes every connection on to `target`, counting them.
struct Forwarder {
    port: u16,
    connections: Arc<AtomicUsize>,
}

impl Forwarder {
    fn start(port: u16, target: u16) -> Forwarder {
        let listener = TcpListener::bind(("127.0.0.1", port)).expect("the forwarder's port");
        let connections = Arc::new(AtomicUsize::new(0));
        let counted = connections.clone();
        std::thread::spawn(move || {
            for inbound in listener.incoming().flatten() {
                let Ok(outbound) = TcpStream::connect(("127.0.0.1", target)) else {
                    continue;
                };
                counted.fetch_add(1, Ordering::SeqCst);
                pipe(inbound.try_clone().unwrap(), outbound.try_clone().unwrap());
                pipe(outbound, inbound);
            }
        });
        Forwarder { port, connections }
    }

    fn used(&self) -> bool {
        self.connections.load(Ordering::SeqCst) > 0
    }
}

/// Copies `from` into `to` on a thread of its own until either closes.
fn pipe(mut from: TcpStream, mut to: TcpStream) {
    std::thread::spawn(move || {
        let mut buf = [0u8; 16 * 1024];
        while let Ok(n) = from.read(&mut buf) {
            if n == 0 || to.write_all(&buf[..n]).is_err() {
                break;
            }
        }
        let _ = to.shutdown(std::net::Shutdown::Both);
    });
}

/// `ip:port@cport` of the own line, without the ip (a fresh redis-server
/// does not know its own yet).
fn own_ports(port: u16) -> String {
    let line = own_line(port);
    let address = line.split(' ').nth(1).unwrap_or_default().to_string();
    address
        .rsplit_once(':')
        .map(|(_, ports)| ports.to_string())
        .unwrap_or(address)
}

/// `port`'s CLUSTER NODES line for the node named `name`.
fn line_of(port: u16, name: &str) -> Option<NodeLine> {
    cluster_nodes(port).into_iter().find(|l| l.name == name)
}

/// `port` sees `name` at `announced:cport`, connected.
fn sees_at(port: u16, name: &str, announced: u16, cport: u16) -> Result<(), String> {
    match line_of(port, name) {
        Some(l) if l.port == announced && l.cport == cport && l.connected => Ok(()),
        other => Err(format!("{port} sees {name} as {other:?}")),
    }
}

/// CONFIG GET `name`'s value on `port`.
fn config_get(port: u16, name: &str) -> String {
    let reply = RawConn::connect(port).cmd(&["CONFIG", "GET", name]);
    decode(&reply)
        .get(name)
        .map(|v| v.text())
        .unwrap_or_default()
}

fn myid(port: u16) -> String {
    text(&RawConn::connect(port).cmd(&["CLUSTER", "MYID"]))
}

/// A reply with `words` replaced by placeholders, so two nodes' replies compare.
fn shown_as(reply: &[u8], words: &[(&str, &str)]) -> String {
    let mut shown = show(reply);
    for (word, placeholder) in words {
        shown = shown.replace(word, placeholder);
    }
    shown
}

fn nodes_conf_own_line(path: &std::path::Path) -> String {
    let conf = std::fs::read_to_string(path).expect("nodes.conf");
    conf.lines()
        .find(|l| l.contains("myself"))
        .unwrap_or_default()
        .to_string()
}

#[test]
fn a_forward_mode_node_announces_its_ports_as_redis_server() {
    if require_redis_server("cluster_announce_ports").is_none() {
        return;
    }
    let ruvio_port = free_ports(1, true);
    let redis_bus_to = free_ports(1, false);
    // The ports each announces: a client port nothing listens on, and a bus
    // port forwarded to the real one.
    let (ruvio_told, redis_told) = (free_ports(1, false), free_ports(1, false));
    let ruvio_bus = Forwarder::start(free_ports(1, false), ruvio_port + 10000);
    let redis = Server::redis_cluster_node_with(&[
        "--cluster-announce-port",
        &redis_told.to_string(),
        "--cluster-announce-bus-port",
        &redis_bus_to.to_string(),
    ]);
    let redis_bus = Forwarder::start(redis_bus_to, redis.port() + 10000);
    let dir = unique_dir("announce-forward");
    let ruvio = Node::start_bound(
        ruvio_port,
        2,
        &dir,
        "127.0.0.1",
        &[
            "--port-mode",
            "forward",
            "--cluster-announce-port",
            &ruvio_told.to_string(),
            "--cluster-announce-bus-port",
            &ruvio_bus.port.to_string(),
        ],
    );
    let pairs = [
        (ruvio.port, ruvio_told, ruvio_bus.port),
        (redis.port(), redis_told, redis_bus.port),
    ];
    // What each shows of itself, and CONFIG GET.
    for (port, told, bus) in pairs {
        assert_eq!(own_ports(port), format!("{told}@{bus}"), "node on {port}");
        for (name, value) in [
            ("cluster-announce-port", told),
            ("cluster-announce-bus-port", bus),
        ] {
            assert_eq!(
                config_get(port, name),
                value.to_string(),
                "{name} on {port}"
            );
        }
    }
    ok(ruvio.port, &["CLUSTER", "ADDSLOTSRANGE", "0", "8191"]);
    ok(redis.port(), &["CLUSTER", "ADDSLOTSRANGE", "0", "8191"]);
    let [ruvio_shows, redis_shows] = pairs.map(|(port, told, bus)| {
        let mut conn = RawConn::connect(port);
        let words = [
            (myid(port), "ID".to_string()),
            (told.to_string(), "TOLD".to_string()),
            (bus.to_string(), "BUS".to_string()),
            // A redis-server met by no one does not know its own address yet.
            ("$9\\r\\n127.0.0.1".to_string(), "IP".to_string()),
            ("$0\\r\\n".to_string(), "IP".to_string()),
        ];
        let words: Vec<(&str, &str)> = words
            .iter()
            .map(|(a, b)| (a.as_str(), b.as_str()))
            .collect();
        [
            shown_as(&conn.cmd(&["CLUSTER", "SLOTS"]), &words),
            shown_as(&conn.cmd(&["CLUSTER", "SHARDS"]), &words),
        ]
    });
    assert_eq!(ruvio_shows[0], redis_shows[0], "CLUSTER SLOTS");
    assert!(ruvio_shows[0].contains(":TOLD\\r\\n"), "{}", ruvio_shows[0]);
    assert_eq!(ruvio_shows[1], redis_shows[1], "CLUSTER SHARDS");
    assert!(
        ruvio_shows[1].contains("port\\r\\n:TOLD\\r\\n"),
        "{}",
        ruvio_shows[1]
    );

    // One cluster, met at the real ports: each learns the other's announced
    // ports from its headers and reaches it at the announced bus port.
    ok(redis.port(), &["CLUSTER", "DELSLOTSRANGE", "0", "8191"]);
    ok(redis.port(), &["CLUSTER", "ADDSLOTSRANGE", "8192", "16383"]);
    ok(
        ruvio.port,
        &[
            "CLUSTER",
            "MEET",
            "127.0.0.1",
            &redis.port().to_string(),
            &(redis.port() + 10000).to_string(),
        ],
    );
    let (ruvio_id, redis_id) = (myid(ruvio.port), myid(redis.port()));
    wait_for("each sees the other at its announced ports", || {
        sees_at(ruvio.port, &redis_id, redis_told, redis_bus.port)?;
        sees_at(redis.port(), &ruvio_id, ruvio_told, ruvio_bus.port)
    });
    assert!(
        ruvio_bus.used() && redis_bus.used(),
        "both bus forwarders carried a link"
    );

    // A change at run time: shown at once, and the peer follows.
    let (ruvio_again, redis_again) = (free_ports(1, false), free_ports(1, false));
    for (port, again) in [(ruvio.port, ruvio_again), (redis.port(), redis_again)] {
        ok(
            port,
            &["CONFIG", "SET", "cluster-announce-port", &again.to_string()],
        );
    }
    assert_eq!(
        own_ports(ruvio.port),
        format!("{ruvio_again}@{}", ruvio_bus.port)
    );
    assert_eq!(
        own_ports(redis.port()),
        format!("{redis_again}@{}", redis_bus.port)
    );
    let started = std::time::Instant::now();
    wait_for("each peer sees the new port", || {
        sees_at(ruvio.port, &redis_id, redis_again, redis_bus.port)?;
        sees_at(redis.port(), &ruvio_id, ruvio_again, ruvio_bus.port)
    });
    assert!(
        started.elapsed().as_secs() < 5,
        "took {:?}",
        started.elapsed()
    );

    // nodes.conf keeps it.
    ok(ruvio.port, &["CLUSTER", "SAVECONFIG"]);
    ok(redis.port(), &["CLUSTER", "SAVECONFIG"]);
    let redis_dir = config_get(redis.port(), "dir");
    let kept = [
        (
            dir.join(format!("nodes-{}.conf", ruvio.port)),
            ruvio_again,
            ruvio_bus.port,
        ),
        (
            std::path::Path::new(&redis_dir).join("nodes.conf"),
            redis_again,
            redis_bus.port,
        ),
    ];
    for (path, again, bus) in kept {
        let line = nodes_conf_own_line(&path);
        assert!(
            line.contains(&format!(":{again}@{bus}")),
            "{}: {line}",
            path.display()
        );
    }
}

#[test]
fn each_shard_announces_the_given_ports_plus_its_index() {
    let first = free_ports(2, true);
    let told = free_ports(2, false);
    let forwarded = free_ports(2, false);
    let buses = [0, 1].map(|i| Forwarder::start(forwarded + i, first + i + 10000));
    let dir = unique_dir("announce-per-shard");
    let ruvio = Node::start_bound(
        first,
        2,
        &dir,
        "127.0.0.1",
        &[
            "--cluster-announce-port",
            &told.to_string(),
            "--cluster-announce-bus-port",
            &forwarded.to_string(),
        ],
    );
    for i in 0..2u16 {
        assert_eq!(
            own_ports(first + i),
            format!("{}@{}", told + i, forwarded + i)
        );
    }
    ok(first, &["CLUSTER", "ADDSLOTSRANGE", "0", "8191"]);
    ok(first + 1, &["CLUSTER", "ADDSLOTSRANGE", "8192", "16383"]);
    ok(
        first,
        &["CLUSTER", "MEET", "127.0.0.1", &(first + 1).to_string()],
    );
    let ids = [myid(first), myid(first + 1)];
    wait_for("the shards see each other at their announced ports", || {
        sees_at(first, &ids[1], told + 1, forwarded + 1)?;
        sees_at(first + 1, &ids[0], told, forwarded)
    });
    assert!(
        buses.iter().all(Forwarder::used),
        "both forwarders carried a link"
    );
    // CLUSTER SLOTS names each shard at its announced port.
    let slots = show(&RawConn::connect(first).cmd(&["CLUSTER", "SLOTS"]));
    for (i, id) in ids.iter().enumerate() {
        let entry = format!(":{}\\r\\n$40\\r\\n{id}", told + i as u16);
        assert!(slots.contains(&entry), "{entry} in {slots}");
    }
    // CONFIG SET reaches both shards' nodes: each its own + i.
    let again = free_ports(2, false);
    ok(
        first,
        &["CONFIG", "SET", "cluster-announce-port", &again.to_string()],
    );
    wait_for("each shard's new port, seen by the other", || {
        sees_at(first, &ids[1], again + 1, forwarded + 1)?;
        sees_at(first + 1, &ids[0], again, forwarded)
    });
    // Back to the real port with 0.
    ok(first, &["CONFIG", "SET", "cluster-announce-port", "0"]);
    assert_eq!(
        own_ports(first + 1),
        format!("{}@{}", first + 1, forwarded + 1)
    );
    drop(ruvio);
}

/// The field `name` of this node's entry of CLUSTER SHARDS (its only shard).
fn own_shard_field(port: u16, name: &str) -> Option<String> {
    let reply = decode(&RawConn::connect(port).cmd(&["CLUSTER", "SHARDS"]));
    let Value::Array(shards) = reply else {
        panic!("CLUSTER SHARDS: {reply:?}");
    };
    let Some(Value::Array(nodes)) = shards.first()?.get("nodes") else {
        return None;
    };
    let node = nodes.first()?;
    // The map's length says what it holds (RESP2: a flat array of pairs).
    let Value::Array(pairs) = node else {
        panic!("a node of CLUSTER SHARDS: {node:?}");
    };
    let fields = ["port", "tls-port"]
        .iter()
        .filter(|f| node.get(f).is_some());
    assert_eq!(pairs.len(), 2 * (6 + fields.count()), "{node:?}");
    node.get(name).map(Value::text)
}

#[test]
fn under_tls_cluster_the_tls_port_is_announced_and_plain_clients_see_pport() {
    let Some(certs) = certs::certificates("announce_tls") else {
        return;
    };
    // The bus listens on the TLS port + 10000 under tls-cluster yes.
    let (port, tls_port) = (free_ports(1, false), free_ports(1, true));
    let (told, told_tls) = (free_ports(1, false), free_ports(1, false));
    let dir = unique_dir("announce-tls");
    let (cert, key) = (
        certs::path(&certs, "server.crt"),
        certs::path(&certs, "server.key"),
    );
    let _ruvio = Node::start_bound(
        port,
        1,
        &dir,
        "127.0.0.1",
        &[
            "--tls-port",
            &tls_port.to_string(),
            "--tls-cert-file",
            &cert,
            "--tls-key-file",
            &key,
            "--tls-ca-cert-file",
            &certs::path(&certs, "ca.crt"),
            "--tls-auth-clients",
            "no",
            "--tls-cluster",
            "yes",
            "--cluster-announce-port",
            &told.to_string(),
            "--cluster-announce-tls-port",
            &told_tls.to_string(),
        ],
    );
    let bus = tls_port + 10000;
    // The node's port is its TLS one (told_tls); this plain client is told its
    // plain one (told); SHARDS lists both.
    assert_eq!(own_ports(port), format!("{told}@{bus}"));
    assert_eq!(own_shard_field(port, "port"), Some(told.to_string()));
    assert_eq!(
        own_shard_field(port, "tls-port"),
        Some(told_tls.to_string())
    );
    // Without the TLS announcement, Redis's rule: cluster-announce-port stands
    // for the TLS port, the plain one is the real one.
    ok(port, &["CONFIG", "SET", "cluster-announce-tls-port", "0"]);
    assert_eq!(own_ports(port), format!("{port}@{bus}"));
    assert_eq!(own_shard_field(port, "tls-port"), Some(told.to_string()));
    // tls-cluster no: the plain port alone, announced as told.
    ok(port, &["CONFIG", "SET", "tls-cluster", "no"]);
    assert_eq!(own_ports(port), format!("{told}@{bus}"));
    assert_eq!(own_shard_field(port, "tls-port"), None);
}

/// `port` sees `name` at `ip`, connected.
fn sees_ip(port: u16, name: &str, ip: &str) -> Result<(), String> {
    match line_of(port, name) {
        Some(l) if l.ip == ip && l.connected => Ok(()),
        other => Err(format!("{port} sees {name} as {other:?}")),
    }
}

/// CONFIG SET cluster-announce-ip while running: the node's next headers
/// carry the address and the peer shows it there, as a redis-server given the
/// same does (Redis 7.0's clusterCron takes the new value on its next run);
/// emptied, the headers carry none and the peer goes back to the address the
/// connection comes from. Both listen on 127.0.0.1 and 127.0.0.2, so the
/// links reconnect at either.
#[test]
fn an_ip_announced_while_running_reaches_the_peer_as_redis_servers_does() {
    let port = free_ports(1, true);
    let dir = unique_dir("announce-ip");
    let ruvio = Node::start_bound(port, 1, &dir, "0.0.0.0", &[]);
    let redis = Server::redis_cluster_node_with(&["--bind", "127.0.0.1", "127.0.0.2"]);
    ok(
        port,
        &["CLUSTER", "MEET", "127.0.0.1", &redis.port().to_string()],
    );
    let (ruvio_id, redis_id) = (myid(port), myid(redis.port()));
    wait_for("the two nodes met", || {
        sees_ip(port, &redis_id, "127.0.0.1")?;
        sees_ip(redis.port(), &ruvio_id, "127.0.0.1")
    });
    for at in [port, redis.port()] {
        ok(at, &["CONFIG", "SET", "cluster-announce-ip", "127.0.0.2"]);
    }
    wait_for("each seen at its announced address by the other", || {
        sees_ip(port, &redis_id, "127.0.0.2")?;
        sees_ip(redis.port(), &ruvio_id, "127.0.0.2")
    });
    assert!(
        nodes_conf_own_line(&dir.join(format!("nodes-{port}.conf"))).contains("127.0.0.2:"),
        "nodes.conf keeps the announced address"
    );
    for at in [port, redis.port()] {
        ok(at, &["CONFIG", "SET", "cluster-announce-ip", ""]);
    }
    wait_for("each seen at its connections' address again", || {
        sees_ip(port, &redis_id, "127.0.0.1")?;
        sees_ip(redis.port(), &ruvio_id, "127.0.0.1")
    });
    drop(ruvio);
}
