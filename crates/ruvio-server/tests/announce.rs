//! The address cluster-aware clients are sent to (MOVED, CLUSTER SLOTS/SHARDS/NODES).
//! Bound to every interface, Ruvio must not answer 127.0.0.1 to a client on another
//! machine: without `cluster-announce-ip` it names the address the client connected
//! to (two loopback addresses stand in for two interfaces here); with it, that
//! address, whatever the client used.

mod common;

use common::*;

/// A key of shard 1 of 2 asked on shard 0: the MOVED line names `host`.
fn moved_host(server: &Server, connect_to: &str) -> String {
    let key = key_on_shard("k", 1, 2);
    let stream = std::net::TcpStream::connect((connect_to, server.shard_port(0))).unwrap();
    let mut conn = RawConn::from_stream(stream);
    let reply = conn.cmd(&["GET", &key]);
    let text = String::from_utf8(reply).unwrap();
    let expected_tail = format!(":{}\r\n", server.shard_port(1));
    assert!(
        text.starts_with("-MOVED ") && text.ends_with(&expected_tail),
        "{text}"
    );
    let host_port = text.trim_end().rsplit(' ').next().unwrap().to_string();
    host_port.rsplit_once(':').unwrap().0.to_string()
}

fn slots_host(server: &Server, connect_to: &str) -> Vec<u8> {
    let stream = std::net::TcpStream::connect((connect_to, server.shard_port(0))).unwrap();
    let mut conn = RawConn::from_stream(stream);
    conn.cmd(&["CLUSTER", "SLOTS"])
}

#[test]
fn bound_to_every_interface_each_client_gets_the_address_it_used() {
    let server = Server::ruvio_with(PortMode::PerShard, 2, &["--bind", "0.0.0.0"]);
    assert_eq!(moved_host(&server, "127.0.0.1"), "127.0.0.1");
    assert_eq!(moved_host(&server, "127.0.0.2"), "127.0.0.2");
    assert!(contains(
        &slots_host(&server, "127.0.0.3"),
        b"$9\r\n127.0.0.3\r\n"
    ));
}

#[test]
fn cluster_announce_ip_is_what_every_client_gets() {
    let server = Server::ruvio_with(
        PortMode::PerShard,
        2,
        &["--bind", "0.0.0.0", "--cluster-announce-ip", "192.0.2.10"],
    );
    assert_eq!(moved_host(&server, "127.0.0.1"), "192.0.2.10");
    assert!(contains(
        &slots_host(&server, "127.0.0.2"),
        b"$10\r\n192.0.2.10\r\n"
    ));
    // CONFIG SET changes it on every shard at once.
    let mut admin = server.raw();
    assert_eq!(
        admin.cmd(&["CONFIG", "SET", "cluster-announce-ip", "198.51.100.4"]),
        b"+OK\r\n"
    );
    assert_eq!(moved_host(&server, "127.0.0.1"), "198.51.100.4");
    assert_eq!(
        admin.cmd(&["CONFIG", "GET", "cluster-announce-ip"]),
        b"*2\r\n$19\r\ncluster-announce-ip\r\n$12\r\n198.51.100.4\r\n"
    );
}
