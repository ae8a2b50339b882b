//! A replica on shard links as a primary of its own replicas, shard by shard
//! (issue 31; docs/replication.md, "A replica on shard links serves
//! replicas"): each replica shard's own history continues its link's (same
//! replid, same offsets, the link's stream kept verbatim). A replica B on
//! links of a replica A on links of a primary P full-syncs and streams each
//! shard from A's, ends with P's data, and continues each link with
//! `+CONTINUE` after A dropped them; once A is promoted (REPLICAOF NO ONE),
//! C, another replica on links of P, pointed at A continues every link (no
//! full sync counted on A), and so does B.

mod common;

use common::replication::*;
use common::*;
use std::time::Duration;

const SHARD_LINKS: [&str; 2] = ["--replica-shard-links", "yes"];

fn count(text: &str, line: &str) -> usize {
    text.lines().filter(|l| l.contains(line)).count()
}

const CONTINUED: &str = "Master accepted a Partial Resynchronization.";
const FULL: &str = "sync: Finished with success";

/// A key written last on each shard of `source` is on every replica: each
/// link's stream is in order, so every write before it is too.
fn settle(source: &Server, replicas: &[&Server], shards: usize, round: &str) {
    let mut s = source.raw();
    // Keys written with PX 30 expire on the source: their DELs go out.
    std::thread::sleep(Duration::from_millis(100));
    s.cmd(&["SCAN", "0", "COUNT", "100000"]);
    let bulk = format!("${}\r\n{round}\r\n", round.len()).into_bytes();
    for shard in 0..shards {
        let key = key_on_shard(&format!("settled:{round}:"), shard, shards);
        assert_eq!(s.cmd(&["SET", &key, round]), b"+OK\r\n");
        for replica in replicas {
            let mut r = replica.raw();
            wait_for(&format!("{key} on the replica"), || {
                r.cmd(&["GET", &key]) == bulk
            });
        }
    }
    // A cross-shard group's forwarded writes answer just after its link moved on.
    std::thread::sleep(Duration::from_millis(100));
}

/// Writer `n`: strings with TTLs, counters, lists, hashes and deletes of
/// keys of its own (`write_load` wants its keys fresh: it ran on P).
fn plain_writes(server: &Server, n: usize, rounds: usize) -> std::thread::JoinHandle<()> {
    let mut c = server.raw();
    std::thread::spawn(move || {
        for i in 0..rounds {
            let key = format!("promoted:{n}:{i}");
            assert_eq!(
                c.cmd(&["SET", &key, &i.to_string(), "EX", "100"]),
                b"+OK\r\n"
            );
            c.cmd(&["INCRBY", &format!("promoted:{n}:counter"), &i.to_string()]);
            c.cmd(&["RPUSH", &format!("promoted:{n}:list"), &key]);
            c.cmd(&["HSET", &format!("promoted:{n}:hash"), &key, &i.to_string()]);
            if i % 3 == 0 {
                c.cmd(&["DEL", &format!("promoted:{n}:{}", i / 2)]);
            }
        }
    })
}

fn up(server: &Server) {
    let mut conn = server.raw();
    wait_for("master_link_status:up", || {
        field(&mut conn, "master_link_status") == "up"
    });
}

fn chained_on_shard_links(shards: usize) {
    let primary = Server::ruvio(PortMode::Forward, shards);
    let mut p = primary.raw();
    fill(&mut p);
    let a = Server::ruvio_with(PortMode::Forward, shards, &SHARD_LINKS);
    let c = Server::ruvio_with(PortMode::Forward, shards, &SHARD_LINKS);
    follow(&a, &primary);
    follow(&c, &primary);
    let b = Server::ruvio_with(PortMode::Forward, shards, &SHARD_LINKS);
    follow(&b, &a);
    // B's links are A's replica connections, one per shard, one replica.
    let mut ra = a.raw();
    assert_eq!(replica_connections(&mut ra), shards);
    assert_eq!(field(&mut ra, "connected_slaves"), "1");
    let logs = b.full_logs();
    assert_eq!(count(&logs, FULL), shards, "{logs}");
    for shard in 0..shards {
        let loaded = format!("shard {shard}: loaded ");
        assert_eq!(count(&logs, &loaded), 1, "{loaded}: {logs}");
    }
    settle(&primary, &[&a, &b, &c], shards, "synced");
    compare_all(&primary, &b, "B after the full sync");

    let cross = cross_shard_load(&primary, shards, 60);
    write_load(&primary, 7, 60);
    cross.join().expect("the cross-shard writer");
    settle(&primary, &[&a, &b, &c], shards, "loaded");
    compare_all(&primary, &a, "A after the load");
    compare_all(&primary, &b, "B after the load");
    compare_all(&primary, &c, "C after the load");
    // A library a client of shard 0 loads reaches every shard of B, each
    // from its own link (`RUVIO FUNCTIONS` passed on by A as it came).
    let code = "#!lua name=chained\nredis.register_function{function_name='chained', \
                callback=function() return 7 end, flags={'no-writes'}}";
    let mut on_0 = conn_on_shard(&primary, 0);
    assert_eq!(on_0.cmd(&["FUNCTION", "LOAD", code]), b"$7\r\nchained\r\n");
    for shard in 0..shards {
        let mut on_b = conn_on_shard(&b, shard);
        wait_for(&format!("the library on B's shard {shard}"), || {
            on_b.cmd(&["FCALL_RO", "chained", "0"]) == b":7\r\n"
        });
    }

    // B's links dropped on A: each continues from A's shard's backlog.
    let killed = ra.cmd(&["CLIENT", "KILL", "TYPE", "replica"]);
    assert_eq!(show(&killed), show(format!(":{shards}\r\n").as_bytes()));
    for i in 0..200 {
        p.cmd(&["SET", &format!("after-kill:{i}"), &i.to_string()]);
    }
    p.cmd(&["SELECT", "3"]);
    p.cmd(&["SET", "in-three", "after"]);
    p.cmd(&["SELECT", "0"]);
    wait_for("B's links back", || replica_connections(&mut ra) == shards);
    up(&b);
    settle(&primary, &[&a, &b, &c], shards, "continued");
    compare_all(&primary, &b, "B after its links continued");
    let logs = b.full_logs();
    assert_eq!(count(&logs, CONTINUED), shards, "{logs}");
    assert_eq!(count(&logs, FULL), shards, "{logs}");
    assert_eq!(sync_counts(&mut ra), (shards as u64, shards as u64));

    // A promoted; C, P's other replica on links, pointed at A, continues
    // every link from A's shards' histories (their replid2), and B too.
    assert_eq!(ra.cmd(&["REPLICAOF", "NO", "ONE"]), b"+OK\r\n");
    let mut rc = c.raw();
    let port = a.port().to_string();
    assert_eq!(rc.cmd(&["REPLICAOF", "127.0.0.1", &port]), b"+OK\r\n");
    wait_for("B's and C's links on A", || {
        replica_connections(&mut ra) == 2 * shards
    });
    up(&b);
    up(&c);
    assert_eq!(field(&mut ra, "connected_slaves"), "2");
    let (full, partial) = sync_counts(&mut ra);
    assert_eq!(full, shards as u64, "no full sync after the promotion");
    assert_eq!(partial, 3 * shards as u64, "B's and C's links continued");
    let logs = c.full_logs();
    assert_eq!(count(&logs, CONTINUED), shards, "{logs}");
    assert_eq!(count(&logs, FULL), shards, "{logs}");

    // A takes writes, which reach both.
    let cross = cross_shard_load(&a, shards, 30);
    let writers: Vec<_> = (0..4).map(|n| plain_writes(&a, n, 100)).collect();
    for writer in writers {
        writer.join().expect("a writer on A");
    }
    cross.join().expect("the cross-shard writer on A");
    settle(&a, &[&b, &c], shards, "promoted");
    compare_all(&a, &b, "B after A's promotion");
    compare_all(&a, &c, "C after A's promotion");
}

#[test]
fn two_shards_chain_and_continue_on_shard_links() {
    chained_on_shard_links(2);
}

#[test]
fn four_shards_chain_and_continue_on_shard_links() {
    chained_on_shard_links(4);
}

fn pipeline(conn: &mut RawConn, commands: &[String]) {
    let mut bytes = Vec::new();
    for command in commands {
        let words: Vec<&str> = command.split(' ').collect();
        bytes.extend_from_slice(&encode(&words));
    }
    conn.send(&bytes);
    for command in commands {
        let reply = conn.read_reply();
        assert!(!reply.starts_with(b"-"), "{command}: {}", show(&reply));
    }
}

/// B attaches to A while each primary shard runs transactions over a fresh
/// key of each shard (each key written by one group only, so a group lost
/// or applied twice on B shows): each of B's links cuts A's shard between
/// two whole commands of A's link (never inside a MULTI), at its own
/// moment, and B's barriers order the groups as A's did.
fn chained_full_sync_amid_cross_shard_groups(shards: usize) {
    let primary = Server::ruvio(PortMode::Forward, shards);
    let a = Server::ruvio_with(PortMode::Forward, shards, &SHARD_LINKS);
    follow(&a, &primary);
    let fresh = std::sync::Arc::new(fresh_keys_of("fresh:", 20_000, shards));
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let threads: Vec<_> = (0..shards)
        .map(|shard| {
            let mut c = conn_on_shard(&primary, shard);
            let (fresh, stop) = (fresh.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut n = shard;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) && n + 8 * shards < 20_000 {
                    let mut batch = Vec::new();
                    for _ in 0..8 {
                        batch.push("MULTI".to_string());
                        for keys in fresh.iter() {
                            batch.push(format!("INCR {}", keys[n]));
                        }
                        batch.push("EXEC".to_string());
                        n += shards;
                    }
                    pipeline(&mut c, &batch);
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    let b = Server::ruvio_with(PortMode::Forward, shards, &SHARD_LINKS);
    follow(&b, &a);
    std::thread::sleep(Duration::from_millis(500));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for t in threads {
        t.join().expect("a writer");
    }
    settle(
        &primary,
        &[&a, &b],
        shards,
        &format!("synced-amid-{shards}"),
    );
    compare_all(
        &primary,
        &a,
        "A after B's full sync amid cross-shard groups",
    );
    compare_all(
        &primary,
        &b,
        "B after its full sync amid cross-shard groups",
    );
    let logs = b.full_logs();
    assert_eq!(count(&logs, FULL), shards, "{logs}");
}

#[test]
fn a_chained_full_sync_amid_cross_shard_groups_ends_equal() {
    chained_full_sync_amid_cross_shard_groups(2);
}

/// The same with groups over 3 shards.
#[test]
fn a_chained_full_sync_amid_cross_shard_groups_of_3_shards_ends_equal() {
    chained_full_sync_amid_cross_shard_groups(3);
}

/// B (links wanted) follows A while A is on the single stream: A refuses
/// B's links, B takes A's single stream. CONFIG SET puts A on links (a full
/// sync per link, which drops B): B's single stream goes on from A's own
/// history, made of what A's shards apply, and ends with P's data.
#[test]
fn a_replica_on_the_single_stream_stays_on_it_when_its_primary_takes_links() {
    let primary = Server::ruvio(PortMode::Forward, 2);
    let mut p = primary.raw();
    fill(&mut p);
    let a = Server::ruvio_with(PortMode::Forward, 2, &["--replica-shard-links", "no"]);
    follow(&a, &primary);
    let b = Server::ruvio_with(PortMode::Forward, 2, &SHARD_LINKS);
    follow(&b, &a);
    let mut ra = a.raw();
    assert_eq!(replica_connections(&mut ra), 1, "B on A's single stream");
    let reply = ra.cmd(&["CONFIG", "SET", "replica-shard-links", "yes"]);
    assert_eq!(reply, b"+OK\r\n");
    wait_for("A on P's links", || replica_connections(&mut p) == 2);
    up(&a);
    for i in 0..100 {
        p.cmd(&["INCR", &format!("counter:{}", i % 10)]);
    }
    settle(&primary, &[&a, &b], 2, "relinked");
    assert_eq!(replica_connections(&mut ra), 1, "B on A's single stream");
    compare_all(&primary, &b, "B on A's single stream after A took links");
}
