//! A cluster under `tls-cluster yes`, side by side with redis-server 7.0 nodes
//! given the same settings: a node's `port` is its TLS port and `pport` its
//! plain one, and a redirection names the port of the asking client's
//! transport (Redis's `clusterRedirectClient`: a plain client is told a node's
//! `pport`, a TLS client its TLS port), for `-MOVED` to a slot's owner and
//! `-ASK` to a migrating slot's target alike. The certificates are made by the
//! test with openssl (`common::certs`).

mod common;

use common::bus_node::wait_for;
use common::certs;
use common::cluster_process::{key_in, ok, text, Node};
use common::*;
use std::path::Path;
use std::process::Command;

/// The flags a node of this test gets (Ruvio's and redis-server's are the
/// same): its TLS port beside the plain one, the test's certificates, the
/// cluster told TLS ports.
fn tls_flags(certs: &Path, tls_port: u16) -> Vec<String> {
    [
        ("--tls-port", tls_port.to_string()),
        ("--tls-cert-file", certs::path(certs, "server.crt")),
        ("--tls-key-file", certs::path(certs, "server.key")),
        ("--tls-ca-cert-file", certs::path(certs, "ca.crt")),
        ("--tls-auth-clients", "no".to_string()),
        ("--tls-cluster", "yes".to_string()),
    ]
    .into_iter()
    .flat_map(|(flag, value)| [flag.to_string(), value])
    .collect()
}

/// One node of the pair: what keeps it running, its plain and TLS ports.
struct Started {
    _guard: Box<dyn std::any::Any>,
    plain: u16,
    tls: u16,
}

/// `command` sent to `port` over TLS by redis-cli: its output, one line.
fn over_tls(certs: &Path, port: u16, command: &[&str]) -> String {
    let out = Command::new("redis-cli")
        .args(["-p", &port.to_string(), "--tls", "--cacert"])
        .arg(certs::path(certs, "ca.crt"))
        .args(command)
        .output()
        .expect("redis-cli");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// What a pair of nodes (A serving slots 0-8191, B the rest, then A's slot of
/// `ask_key` migrating to B) tells a plain client and a TLS client asking A
/// for a key of B and for a key of the migrating slot, with B's ports written
/// as `<plain>` and `<tls>`. A meets B at B's TLS port: the bus port is that
/// + 10000 under `tls-cluster yes`.
fn redirections(
    certs: &Path,
    start_a: impl Fn(u16) -> Started,
    start_b: impl Fn(u16) -> Started,
) -> Vec<String> {
    let (a, b) = (start_a(free_ports(1, true)), start_b(free_ports(1, true)));
    ok(a.plain, &["CLUSTER", "ADDSLOTSRANGE", "0", "8191"]);
    ok(b.plain, &["CLUSTER", "ADDSLOTSRANGE", "8192", "16383"]);
    ok(
        a.plain,
        &["CLUSTER", "MEET", "127.0.0.1", &b.tls.to_string()],
    );
    wait_for("both nodes see the cluster ok", || {
        for port in [a.plain, b.plain] {
            let info = text(&RawConn::connect(port).cmd(&["CLUSTER", "INFO"]));
            if !info.contains("cluster_state:ok") || !info.contains("cluster_known_nodes:2") {
                return Err(format!("{port}: {info}"));
            }
        }
        Ok(())
    });
    let (moved_key, _) = key_in(a.plain, 8192..16384);
    let (ask_key, ask_slot) = key_in(a.plain, 0..8192);
    let id = |port: u16| text(&RawConn::connect(port).cmd(&["CLUSTER", "MYID"]));
    let slot = ask_slot.to_string();
    ok(
        b.plain,
        &["CLUSTER", "SETSLOT", &slot, "IMPORTING", &id(a.plain)],
    );
    ok(
        a.plain,
        &["CLUSTER", "SETSLOT", &slot, "MIGRATING", &id(b.plain)],
    );
    let mut told = Vec::new();
    for key in [&moved_key, &ask_key] {
        let plain = RawConn::connect(a.plain).cmd(&["GET", key]);
        told.push(text(&plain));
        told.push(over_tls(certs, a.tls, &["GET", key]));
    }
    told.into_iter()
        .map(|line| {
            line.replace(&format!(":{}", b.plain), ":<plain>")
                .replace(&format!(":{}", b.tls), ":<tls>")
        })
        .collect()
}

/// A forward-mode Ruvio node of two shards (a key of the other shard is
/// routed there) with its TLS port at `tls`.
fn ruvio_node(certs: &Path, tls: u16) -> Started {
    let plain = free_ports(1, false);
    let dir = unique_dir("cluster-tls");
    let flags = tls_flags(certs, tls);
    let mut args = vec!["--port-mode", "forward"];
    args.extend(flags.iter().map(String::as_str));
    let node = Node::start_bound(plain, 2, &dir, "127.0.0.1", &args);
    Started {
        _guard: Box::new(node),
        plain,
        tls,
    }
}

/// A redis-server node with its TLS port at `tls`.
fn redis_node(certs: &Path, tls: u16) -> Started {
    let flags = tls_flags(certs, tls);
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let server = Server::redis_cluster_node_with(&flags);
    Started {
        plain: server.port(),
        _guard: Box::new(server),
        tls,
    }
}

#[test]
fn moved_and_ask_name_the_port_of_the_clients_transport_as_redis_server() {
    let Some(certs) = certs::certificates("cluster_tls_redirect") else {
        return;
    };
    let ruvio = |tls| ruvio_node(&certs, tls);
    let redis = |tls| redis_node(&certs, tls);
    let ruvio_told = redirections(&certs, ruvio, ruvio);
    let redis_told = redirections(&certs, redis, redis);
    // The slots are the same in both runs (the same keys, the same halves).
    assert_eq!(ruvio_told, redis_told);
    let ruvio = ruvio_told;
    let kinds: Vec<(&str, &str)> = ruvio
        .iter()
        .map(|l| {
            (
                l.split(' ').next().unwrap_or(""),
                l.rsplit(':').next().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(
        kinds,
        [
            ("MOVED", "<plain>"),
            ("MOVED", "<tls>"),
            ("ASK", "<plain>"),
            ("ASK", "<tls>")
        ],
        "{ruvio:?}"
    );
}

/// Ruvio and redis-server in one cluster over the TLS bus, either node meeting
/// the other: they agree on the cluster and each redirects to the other as
/// two redis-servers do.
#[test]
fn a_ruvio_node_and_a_redis_server_node_share_a_tls_bus() {
    let Some(certs) = certs::certificates("cluster_tls_mixed") else {
        return;
    };
    let ruvio = |tls| ruvio_node(&certs, tls);
    let redis = |tls| redis_node(&certs, tls);
    let both_redis = redirections(&certs, redis, redis);
    let told = redirections(&certs, ruvio, redis);
    assert_eq!(told, both_redis, "Ruvio meets redis-server");
    let told = redirections(&certs, redis, ruvio);
    assert_eq!(told, both_redis, "redis-server meets Ruvio");
}
