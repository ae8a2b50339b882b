//! `replica-announce-ip` and `replica-announce-port` (also `slave-announce-*`):
//! a replica behind NAT or a container's port map tells its primary where it
//! is reached (`REPLCONF ip-address`, `REPLCONF listening-port`), and the
//! primary's INFO `slaveN` line and ROLE name that address, which Sentinel
//! reads to find the replicas it may promote. Each side is checked against
//! the real thing: a Ruvio replica of a redis-server primary (what Ruvio
//! sends), a redis-server replica of a Ruvio primary beside the same replica
//! of a redis-server primary (what Ruvio shows), Ruvio of Ruvio on shard links
//! (every link announcing, one replica shown), and REPLCONF ip-address's
//! replies byte for byte.

mod common;

use common::replication::*;
use common::*;

const IP: &str = "10.20.30.40";
const PORT: &str = "4567";

/// The primary's INFO `slave0` line, once the replica is online.
fn online_slave0(primary: &Server) -> String {
    let mut conn = primary.raw();
    let mut line = String::new();
    wait_for("the replica online", || {
        let info = decode(&conn.cmd(&["INFO", "replication"])).text();
        line = info
            .lines()
            .find_map(|l| l.strip_prefix("slave0:"))
            .unwrap_or_default()
            .to_string();
        line.contains("state=online")
    });
    line
}

/// The primary names its replica at the announced address in INFO and ROLE.
fn shows_announced(primary: &Server) {
    let slave0 = online_slave0(primary);
    assert!(
        slave0.starts_with(&format!("ip={IP},port={PORT},state=online,")),
        "slave0:{slave0}"
    );
    let role = show(&primary.raw().cmd(&["ROLE"]));
    let entry = format!("$11\\r\\n{IP}\\r\\n$4\\r\\n{PORT}\\r\\n");
    assert!(role.contains(&entry), "{entry} in ROLE: {role}");
}

fn announcing() -> [&'static str; 4] {
    ["--replica-announce-ip", IP, "--replica-announce-port", PORT]
}

#[test]
fn a_ruvio_replica_announces_itself_to_a_redis_server_primary() {
    if redis_server_bin().is_none() {
        return;
    }
    let primary = Server::redis();
    let replica = Server::ruvio_with(PortMode::Forward, 2, &announcing());
    follow(&replica, &primary);
    shows_announced(&primary);
}

#[test]
fn a_ruvio_primary_shows_an_announced_redis_server_replica_as_redis_server_does() {
    if redis_server_bin().is_none() {
        return;
    }
    let slave0_of = |primary: &Server| {
        let replica = Server::redis_with(&announcing());
        follow(&replica, primary);
        shows_announced(primary);
        let line = online_slave0(primary);
        // ip, port and state; the offset and lag are each run's own.
        line.split(',').take(3).collect::<Vec<_>>().join(",")
    };
    let ruvio = slave0_of(&Server::ruvio(PortMode::Forward, 2));
    let redis = slave0_of(&Server::redis());
    assert_eq!(ruvio, redis);
}

/// A Ruvio replica of a Ruvio primary, 2 shards each: every shard link
/// announces the address (given by CONFIG SET under the old names before
/// REPLICAOF), and the primary shows the links as one replica there.
#[test]
fn ruvio_of_ruvio_on_shard_links_announces_once_under_the_old_names() {
    let primary = Server::ruvio(PortMode::Forward, 2);
    let replica = Server::ruvio(PortMode::Forward, 2);
    let mut r = replica.raw();
    for (name, value) in [("slave-announce-ip", IP), ("slave-announce-port", PORT)] {
        assert_eq!(r.cmd(&["CONFIG", "SET", name, value]), b"+OK\r\n");
    }
    follow(&replica, &primary);
    shows_announced(&primary);
    let info = decode(&primary.raw().cmd(&["INFO", "replication"])).text();
    assert!(info.contains("connected_slaves:1\r\n"), "{info}");
}

/// REPLCONF ip-address from any client: +OK, and an address of 256 bytes or
/// more refused with redis-server's words.
#[test]
fn replconf_ip_address_answers_as_redis_server() {
    if redis_server_bin().is_none() {
        return;
    }
    let long = "a".repeat(256);
    let short = "b".repeat(255);
    let asks: [&[&str]; 4] = [
        &["REPLCONF", "ip-address", "10.0.0.1"],
        &["REPLCONF", "ip-address", &short],
        &["REPLCONF", "ip-address", &long],
        &["REPLCONF", "ip-address"],
    ];
    let (ruvio, redis) = (Server::ruvio(PortMode::Forward, 2), Server::redis());
    let (mut a, mut b) = (ruvio.raw(), redis.raw());
    for ask in asks {
        assert_eq!(show(&a.cmd(ask)), show(&b.cmd(ask)), "{:?}", &ask[..2]);
    }
}
