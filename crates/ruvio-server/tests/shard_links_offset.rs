//! One offset for a replica on shard links (issue 31; docs/replication.md,
//! "Ruvio to Ruvio shard by shard"): n links follow n histories, yet the
//! replica's `slave_repl_offset`, ROLE's offset and `master_repl_offset`
//! equal its primary's `master_repl_offset` once writes stop, as Sentinel,
//! FAILOVER and tools compare them. Each primary shard's history carries
//! `RUVIO OFFSET` marks of the server's offset (`replication::link_barrier`)
//! and the replica shows the least its links applied.
//!
//! Cases, 2 and 4 shards: writes to one shard only (the others idle: their
//! links still learn the server's offset moved); writes to every shard; a
//! replica on links of that replica (its marks passed on verbatim); the
//! primary's own view of them (`slave0`'s offset); after CLIENT KILL TYPE
//! replica each link continues (`+CONTINUE`) and the offsets meet again.

mod common;

use common::replication::*;
use common::*;

const SHARD_LINKS: [&str; 2] = ["--replica-shard-links", "yes"];

/// The offset ROLE shows (a replica's fifth item, a primary's second).
fn role_offset(conn: &mut RawConn) -> i64 {
    let Value::Array(role) = decode(&conn.cmd(&["ROLE"])) else {
        panic!("ROLE")
    };
    let at = match role[0].text().as_str() {
        "master" => 1,
        _ => 4,
    };
    match role[at] {
        Value::Int(offset) => offset,
        ref other => panic!("ROLE's offset: {other:?}"),
    }
}

fn offset_of(conn: &mut RawConn, name: &str) -> u64 {
    field(conn, name).parse().unwrap_or(0)
}

/// Every replica's `slave_repl_offset`, `master_repl_offset` and ROLE
/// offset reach the primary's `master_repl_offset` (no write meanwhile).
fn offsets_meet(primary: &Server, replicas: &[&Server], when: &str) -> u64 {
    let mut p = primary.raw();
    let target = offset_of(&mut p, "master_repl_offset");
    for replica in replicas {
        let mut r = replica.raw();
        wait_for(&format!("{when}: slave_repl_offset {target}"), || {
            offset_of(&mut r, "slave_repl_offset") == target
        });
        assert_eq!(offset_of(&mut r, "master_repl_offset"), target, "{when}");
        assert_eq!(role_offset(&mut r), target as i64, "{when}");
    }
    assert_eq!(
        offset_of(&mut p, "master_repl_offset"),
        target,
        "{when}: nothing moved the primary meanwhile"
    );
    assert_eq!(role_offset(&mut p), target as i64);
    target
}

/// The primary's `slave0` line reaches `offset` (the links acknowledge once
/// a second).
fn listed_at(primary: &Server, offset: u64, when: &str) {
    let mut p = primary.raw();
    wait_for(&format!("{when}: slave0 at {offset}"), || {
        let line = slave_line(&mut p, 0);
        line.get(3).map(|(_, o)| o.clone()) == Some(offset.to_string())
    });
}

fn writes_on(primary: &Server, shard: usize, shards: usize, round: &str, count: usize) {
    let mut c = conn_on_shard(primary, shard);
    for i in 0..count {
        let key = key_on_shard(&format!("offset:{round}:{i}:"), shard, shards);
        assert_eq!(c.cmd(&["SET", &key, round]), b"+OK\r\n");
    }
}

fn one_offset(shards: usize) {
    let primary = Server::ruvio(PortMode::Forward, shards);
    let mut p = primary.raw();
    fill(&mut p);
    let replica = Server::ruvio_with(PortMode::Forward, shards, &SHARD_LINKS);
    follow(&replica, &primary);
    assert_eq!(field(&mut p, "connected_slaves"), "1");
    let synced = offsets_meet(&primary, &[&replica], "after the full sync");

    // One shard written, the others idle.
    writes_on(&primary, 0, shards, "one", 50);
    let one = offsets_meet(&primary, &[&replica], "after writes to shard 0");
    // The server's history runs while only links are attached.
    assert!(one > synced, "{one} > {synced}");
    listed_at(&primary, one, "after writes to shard 0");

    // Every shard, and a transaction over all of them.
    for shard in 0..shards {
        writes_on(&primary, shard, shards, "every", 20);
    }
    let keys = keys_per_shard("offset:group:", shards);
    let mut multi = vec!["MSET".to_string()];
    for key in &keys {
        multi.extend([key.clone(), "v".into()]);
    }
    assert_eq!(p.cmd(&multi), b"+OK\r\n");

    // A replica on links of the replica: the primary's marks reach it too.
    let chained = Server::ruvio_with(PortMode::Forward, shards, &SHARD_LINKS);
    follow(&chained, &replica);
    writes_on(&primary, shards - 1, shards, "chained", 10);
    let every = offsets_meet(&primary, &[&replica, &chained], "chained");
    listed_at(&primary, every, "chained");
    listed_at(&replica, every, "the chained replica on its primary");
    compare_all(&primary, &replica, "one offset");
    compare_all(&primary, &chained, "one offset, chained");

    // The links dropped and continued: no full sync, the offsets meet.
    let (full, partial) = sync_counts(&mut p);
    p.cmd(&["CLIENT", "KILL", "TYPE", "replica"]);
    wait_for("the links continued", || {
        sync_counts(&mut p) == (full, partial + shards as u64)
    });
    let mut r = replica.raw();
    wait_for("master_link_status:up", || {
        field(&mut r, "master_link_status") == "up"
    });
    writes_on(&primary, 0, shards, "continued", 30);
    let continued = offsets_meet(&primary, &[&replica, &chained], "after +CONTINUE");
    assert!(continued > every);
    listed_at(&primary, continued, "after +CONTINUE");
    compare_all(&primary, &chained, "after +CONTINUE");
}

#[test]
fn a_replica_on_2_links_shows_its_primarys_offset() {
    one_offset(2);
}

#[test]
fn a_replica_on_4_links_shows_its_primarys_offset() {
    one_offset(4);
}
