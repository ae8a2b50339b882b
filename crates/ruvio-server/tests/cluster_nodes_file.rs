//! `ruvio_server::cluster::nodes_file` against the files a real Redis Cluster
//! writes: three redis-server 7.0 masters and a replica, a slot being migrated
//! (`[slot->-node]` on the source, `[slot-<-node]` on the target); every node's
//! nodes.conf and CLUSTER NODES reply are read and written back byte for byte,
//! and what was read says what the cluster is (myself, the replica's master,
//! slot ranges, the slot in flight, the epochs).

mod common;

use common::*;
use ruvio_server::cluster::nodes_file::{parse_line, render_line, NodesFile};
use std::time::{Duration, Instant};

fn text(conn: &mut RawConn, args: &[&str]) -> String {
    decode(&conn.cmd(args)).text()
}

/// The node's nodes.conf, once it holds `needle`.
fn nodes_conf(conn: &mut RawConn, needle: &str) -> String {
    let config = |conn: &mut RawConn, name: &str| match decode(&conn.cmd(&["CONFIG", "GET", name]))
    {
        Value::Array(pair) if pair.len() == 2 => pair[1].text(),
        other => panic!("CONFIG GET {name}: {other:?}"),
    };
    let path = std::path::Path::new(&config(conn, "dir")).join(config(conn, "cluster-config-file"));
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let file = std::fs::read_to_string(&path).unwrap_or_default();
        if file.contains(needle) && file.ends_with('\n') {
            return file;
        }
        assert!(
            Instant::now() < deadline,
            "{} never held {needle}:\n{file}",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn redis_cluster_files_and_replies_round_trip() {
    if require_redis_server("cluster_nodes_file").is_none() {
        return;
    }
    let cluster = Server::redis_cluster(3);
    let replica = Server::redis_cluster_node();
    let mut conns: Vec<RawConn> = cluster.ports.iter().map(|&p| RawConn::connect(p)).collect();
    let ids: Vec<String> = conns
        .iter_mut()
        .map(|c| text(c, &["CLUSTER", "MYID"]))
        .collect();
    let mut replica_conn = replica.raw();
    let port0 = cluster.ports[0].to_string();
    assert_eq!(
        replica_conn.cmd(&["CLUSTER", "MEET", "127.0.0.1", &port0]),
        b"+OK\r\n"
    );
    let deadline = Instant::now() + Duration::from_secs(15);
    while !text(&mut replica_conn, &["CLUSTER", "NODES"]).contains(&ids[0]) {
        assert!(
            Instant::now() < deadline,
            "the replica never met the cluster"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(
        replica_conn.cmd(&["CLUSTER", "REPLICATE", &ids[0]]),
        b"+OK\r\n"
    );
    assert_eq!(
        conns[0].cmd(&["CLUSTER", "SETSLOT", "100", "MIGRATING", &ids[1]]),
        b"+OK\r\n"
    );
    assert_eq!(
        conns[1].cmd(&["CLUSTER", "SETSLOT", "100", "IMPORTING", &ids[0]]),
        b"+OK\r\n"
    );

    let source = nodes_conf(&mut conns[0], "->-");
    let target = nodes_conf(&mut conns[1], "-<-");
    let follower = nodes_conf(&mut replica_conn, &format!("slave {}", ids[0]));
    for file in [&source, &target, &follower] {
        let parsed = NodesFile::parse(file).unwrap_or_else(|e| panic!("{e}:\n{file}"));
        assert_eq!(&parsed.render(), file, "written back byte for byte");
    }

    let source = NodesFile::parse(&source).unwrap();
    let me = source.myself().unwrap();
    assert_eq!(me.name, ids[0]);
    assert_eq!(me.port, cluster.ports[0]);
    assert!(me.has_flag("master"));
    assert_eq!(me.migrating, vec![(100, ids[1].clone())]);
    assert_eq!(me.slots.first().map(|s| s.0), Some(0));
    let target = NodesFile::parse(&target).unwrap();
    assert_eq!(
        target.myself().unwrap().importing,
        vec![(100, ids[0].clone())]
    );
    let follower = NodesFile::parse(&follower).unwrap();
    let me = follower.myself().unwrap();
    assert!(me.has_flag("slave"));
    assert_eq!(me.master.as_deref(), Some(ids[0].as_str()));
    assert!(me.slots.is_empty());
    let info = text(&mut replica_conn, &["CLUSTER", "INFO"]);
    let epoch = format!("cluster_current_epoch:{}", follower.current_epoch);
    assert!(info.lines().any(|l| l == epoch), "{epoch} in:\n{info}");

    // CLUSTER NODES: the same line format, each line read and written back.
    for conn in conns.iter_mut().chain([&mut replica_conn]) {
        let reply = text(conn, &["CLUSTER", "NODES"]);
        for line in reply.lines() {
            let parsed = parse_line(line).unwrap_or_else(|e| panic!("{e}: {line}"));
            let mut again = String::new();
            render_line(&parsed, &mut again);
            assert_eq!(again, line);
        }
    }
}
