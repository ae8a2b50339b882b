//! A Ruvio replica of several shards promoted by REPLICAOF NO ONE while its
//! clients keep writing (forward mode, 4 shards): every write it accepts is in
//! the stream that the old primary's other replicas continue from it with
//! `+CONTINUE`. Before the promotion's two steps (docs/replication.md, "How
//! it works"), a shard could run a client's write after the role changed and
//! before its feed was on: the write was in no replica's stream.

mod common;

use common::replication::*;
use common::*;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// INCRs per pipelined batch: a shard runs a batch in one loop iteration, so
/// a role change in the middle of one is caught by the writes after it.
const BATCH_WRITES: usize = 64;
/// Keys each writer spreads its INCRs over (on every shard).
const KEYS_PER_WRITER: usize = 32;

/// `writers` clients pipelining INCRs at `server` until `stop`; the count of
/// INCRs it accepted (the others answered READONLY).
fn writers(
    server: &Server,
    writers: usize,
    stop: &Arc<AtomicBool>,
) -> Vec<std::thread::JoinHandle<u64>> {
    (0..writers)
        .map(|w| {
            let (mut conn, stop) = (server.raw(), stop.clone());
            std::thread::spawn(move || {
                let mut accepted = 0;
                let mut round = 0usize;
                while !stop.load(Ordering::Relaxed) {
                    let mut batch = Vec::new();
                    for i in 0..BATCH_WRITES {
                        let key = format!("w{w}:{}", (round + i) % KEYS_PER_WRITER);
                        batch.extend(encode(&["INCR", &key]));
                    }
                    conn.send(&batch);
                    for _ in 0..BATCH_WRITES {
                        if conn.read_reply().starts_with(b":") {
                            accepted += 1;
                        }
                    }
                    round += 1;
                }
                accepted
            })
        })
        .collect()
}

#[test]
fn writes_right_after_a_promotion_reach_replicas_that_continue() {
    if require_redis_server("writes_right_after_a_promotion_reach_replicas_that_continue").is_none()
    {
        return;
    }
    let primary = Server::ruvio(PortMode::Forward, 2);
    let promoted = Server::ruvio(PortMode::Forward, 4);
    let other = Server::redis();
    for replica in [&promoted, &other] {
        follow(replica, &primary);
    }
    let mut p = primary.raw();
    fill(&mut p);
    assert_eq!(p.cmd(&["WAIT", "2", "5000"]), b":2\r\n");
    wait_for("both replicas at the primary's offset", || {
        let offset = field(&mut p, "master_repl_offset");
        [&promoted, &other]
            .iter()
            .all(|r| field(&mut r.raw(), "slave_repl_offset") == offset)
    });
    // Room for every write the writers make after the promotion.
    let mut n = promoted.raw();
    assert_eq!(
        n.cmd(&["CONFIG", "SET", "repl-backlog-size", "64mb"]),
        b"+OK\r\n"
    );
    let stop = Arc::new(AtomicBool::new(false));
    let threads = writers(&promoted, 8, &stop);
    // Every writer is refused for a while, then taken once promoted.
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(n.cmd(&["REPLICAOF", "NO", "ONE"]), b"+OK\r\n");
    assert_eq!(field(&mut n, "role"), "master");
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, Ordering::Relaxed);
    let accepted: u64 = threads
        .into_iter()
        .map(|t| t.join().expect("a writer"))
        .sum();
    assert!(accepted > 0, "no write was taken");
    follow(&other, &promoted);
    assert_eq!(
        sync_counts(&mut n),
        (0, 1),
        "a partial resync: {}",
        promoted.logs()
    );
    assert_eq!(wait_all(&mut n, "1", "5000"), b":1\r\n");
    compare_all(
        &promoted,
        &other,
        "the replica continued from the promoted one",
    );
}

/// Sentinel promotes with `MULTI`, `SLAVEOF NO ONE`, ..., `EXEC`: the
/// transaction's replies are Redis's, and once EXEC answered the promoted
/// server takes writes on every shard (its `+OK` waits for every feed).
#[test]
fn a_promotion_inside_a_transaction_answers_as_redis() {
    if require_redis_server("a_promotion_inside_a_transaction_answers_as_redis").is_none() {
        return;
    }
    let primary = Server::redis();
    let no_delay = ["CONFIG", "SET", "repl-diskless-sync-delay", "0"];
    assert_eq!(primary.raw().cmd(&no_delay), b"+OK\r\n");
    let twin = Server::redis();
    let ruvio = Server::ruvio(PortMode::Forward, 4);
    let mut replies = Vec::new();
    for replica in [&twin, &ruvio] {
        follow(replica, &primary);
        let mut r = replica.raw();
        let mut got = Vec::new();
        for command in [
            &["MULTI"][..],
            &["SLAVEOF", "NO", "ONE"],
            &["PING"],
            &["EXEC"],
        ] {
            got.push(show(&r.cmd(command)));
        }
        // Writes to keys of every shard, from this and other connections.
        for i in 0..16 {
            let key = format!("after:{i}");
            got.push(show(&replica.raw().cmd(&["SET", &key, "v"])));
        }
        got.push(field(&mut r, "role"));
        replies.push(got);
    }
    assert_eq!(
        replies[1], replies[0],
        "Ruvio against a redis-server replica"
    );
}
