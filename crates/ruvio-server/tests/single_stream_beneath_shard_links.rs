//! A single-stream replica beneath a Ruvio replica on shard links (issue 31;
//! docs/replication.md, "A replica on shard links serves the single
//! stream"): a redis-server 7 replica of a Ruvio replica M that follows a
//! Ruvio primary P with one link per shard. M serves it from a server
//! history of its own, made of what its shards apply (its links' streams
//! are n other byte sequences): a full sync taken while P is written (every
//! type, cross-shard MULTI/EXEC and scripts), then the stream, and
//! `+CONTINUE` after its connection is killed; every key of P, M and the
//! redis-server compares equal. M's `master_repl_offset` stays P's, so
//! tools comparing M with P still can. Promoted, M's own single-stream
//! replica continues its history (`replid2`), while P's single-stream
//! replicas, whose bytes M never had, full-sync from it as Redis answers a
//! history it does not know.

mod common;

use common::replication::*;
use common::*;
use std::time::Duration;

const SHARD_LINKS: [&str; 2] = ["--replica-shard-links", "yes"];

/// A key written last on each of P's shards reached M and the redis-server
/// (each link's stream, and M's own, keep their order), and M shows P's
/// offset once its links applied everything P sent.
fn settle(primary: &Server, middle: &Server, sub: &Server, shards: usize, round: &str) {
    let mut p = primary.raw();
    // Keys written with PX 30 expire on P: their DELs go out.
    std::thread::sleep(Duration::from_millis(100));
    p.cmd(&["SCAN", "0", "COUNT", "100000"]);
    let bulk = format!("${}\r\n{round}\r\n", round.len()).into_bytes();
    for shard in 0..shards {
        let key = key_on_shard(&format!("settled:{round}:"), shard, shards);
        assert_eq!(p.cmd(&["SET", &key, round]), b"+OK\r\n");
        for (name, server) in [("M", middle), ("the redis-server", sub)] {
            let mut r = server.raw();
            wait_for(&format!("{key} on {name}"), || {
                r.cmd(&["GET", &key]) == bulk
            });
        }
    }
    let mut m = middle.raw();
    wait_for("M at P's master_repl_offset", || {
        field(&mut m, "master_repl_offset") == field(&mut p, "master_repl_offset")
    });
}

fn redis_beneath_a_replica_on_links(shards: usize) {
    let primary = Server::ruvio(PortMode::Forward, shards);
    let mut p = primary.raw();
    fill(&mut p);
    let middle = Server::ruvio_with(PortMode::Forward, shards, &SHARD_LINKS);
    follow(&middle, &primary);
    assert_eq!(replica_connections(&mut p), shards, "M on P's shard links");

    // The redis-server's full sync from M while P is written.
    let sub = Server::redis();
    let cross = cross_shard_load(&primary, shards, 80);
    let writes = {
        let port = primary.port();
        std::thread::spawn(move || {
            let mut c = RawConn::connect(port);
            for i in 0..2000 {
                let k = format!("during:{}", i % 97);
                c.cmd(&["SET", &k, &i.to_string()]);
                c.cmd(&["RPUSH", &format!("{k}:l"), &i.to_string()]);
            }
        })
    };
    follow(&sub, &middle);
    write_load(&primary, 6, 40);
    cross.join().expect("the cross-shard writer");
    writes.join().expect("the plain writer");
    settle(&primary, &middle, &sub, shards, "synced");
    compare_all(&primary, &middle, "M after the load");
    compare_all(
        &primary,
        &sub,
        "the redis-server after its full sync amid the load",
    );
    let mut m = middle.raw();
    assert_eq!(
        sync_counts(&mut m),
        (1, 0),
        "one full sync of the redis-server"
    );
    assert_eq!(field(&mut m, "connected_slaves"), "1");
    assert_eq!(replica_connections(&mut p), shards, "M still on links");

    // Its connection killed: it continues from M's own history.
    assert_eq!(m.cmd(&["CLIENT", "KILL", "TYPE", "replica"]), b":1\r\n");
    let cross = cross_shard_load(&primary, shards, 30);
    for i in 0..200 {
        p.cmd(&["SET", &format!("after-kill:{i}"), &i.to_string()]);
    }
    p.cmd(&["SELECT", "3"]);
    p.cmd(&["SET", "in-three", "after"]);
    // A FLUSHDB of database 3, then writes of database 0: each link's
    // stream selects database 0 again after it (before the fix in
    // `Feed::inlined`, shard 2's link of 4 wrote on in database 3).
    p.cmd(&["FLUSHDB"]);
    p.cmd(&["SET", "in-three-again", "after"]);
    p.cmd(&["SELECT", "0"]);
    cross.join().expect("the cross-shard writer");
    wait_for("the redis-server back", || {
        field(&mut m, "connected_slaves") == "1"
            && field(&mut sub.raw(), "master_link_status") == "up"
    });
    settle(&primary, &middle, &sub, shards, "continued");
    assert_eq!(sync_counts(&mut m), (1, 1), "+CONTINUE: {}", middle.logs());
    compare_all(&primary, &middle, "M after the partial resync");
    compare_all(&primary, &sub, "the redis-server after its partial resync");
    // The redis-server's offset is M's own history's: its end.
    let mut s = sub.raw();
    wait_for("the redis-server at M's own offset", || {
        let first: u64 = field(&mut m, "repl_backlog_first_byte_offset")
            .parse()
            .unwrap_or(0);
        let len: u64 = field(&mut m, "repl_backlog_histlen").parse().unwrap_or(0);
        field(&mut s, "master_repl_offset") == (first + len - 1).to_string()
    });
}

#[test]
fn a_redis_replica_of_a_2_shard_replica_on_links() {
    if require_redis_server("a_redis_replica_of_a_2_shard_replica_on_links").is_none() {
        return;
    }
    redis_beneath_a_replica_on_links(2);
}

#[test]
fn a_redis_replica_of_a_4_shard_replica_on_links() {
    if require_redis_server("a_redis_replica_of_a_4_shard_replica_on_links").is_none() {
        return;
    }
    redis_beneath_a_replica_on_links(4);
}

/// M (on links of P, a redis-server R1 beneath it) promoted by REPLICAOF NO
/// ONE: R1 continues M's own history under `master_replid2`; P's own
/// single-stream replicas (a redis-server and a 1-shard Ruvio) pointed at M
/// full-sync; all equal M after writes on it.
#[test]
fn a_promoted_replica_on_links_continues_its_own_single_stream_replicas() {
    if require_redis_server("a_promoted_replica_on_links_continues_its_own_single_stream_replicas")
        .is_none()
    {
        return;
    }
    let primary = Server::ruvio(PortMode::Forward, 2);
    let mut p = primary.raw();
    fill(&mut p);
    let middle = Server::ruvio_with(PortMode::Forward, 2, &SHARD_LINKS);
    let (r1, r2, other) = (
        Server::redis(),
        Server::redis(),
        Server::ruvio(PortMode::Forward, 1),
    );
    follow(&middle, &primary);
    follow(&r1, &middle);
    follow(&r2, &primary);
    follow(&other, &primary);
    write_load(&primary, 2, 40);
    settle(&primary, &middle, &r1, 2, "before");
    let mut m = middle.raw();
    let own = field(&mut m, "master_replid");
    assert_ne!(
        own,
        field(&mut p, "master_replid"),
        "M's history is its own"
    );
    assert_eq!(sync_counts(&mut m), (1, 0));

    assert_eq!(m.cmd(&["REPLICAOF", "NO", "ONE"]), b"+OK\r\n");
    assert_eq!(field(&mut m, "master_replid2"), own);
    for replica in [&r2, &other] {
        follow(replica, &middle);
    }
    wait_for("three replicas online", || {
        let info = decode(&m.cmd(&["INFO", "replication"])).text();
        info.matches("state=online").count() == 3
    });
    assert_eq!(
        sync_counts(&mut m),
        (3, 1),
        "R1 continued, P's replicas full-synced: {}",
        middle.logs()
    );
    let cross = cross_shard_load(&middle, 2, 30);
    for i in 0..300 {
        let key = format!("promoted:{}", i % 53);
        assert_eq!(
            m.cmd(&["SET", &key, &i.to_string(), "EX", "100"]),
            b"+OK\r\n"
        );
        m.cmd(&["RPUSH", &format!("{key}:list"), &i.to_string()]);
        m.cmd(&["HINCRBY", &format!("{key}:hash"), "n", "1"]);
    }
    cross.join().expect("the cross-shard writer on M");
    assert_eq!(m.cmd(&["WAIT", "3", "5000"]), b":3\r\n");
    compare_all(&middle, &r1, "R1 after M's promotion");
    compare_all(&middle, &r2, "P's redis-server replica on M");
    compare_all(&middle, &other, "P's Ruvio replica on M");
}
