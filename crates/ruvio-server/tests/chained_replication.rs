//! Chained replication: a Ruvio replica (forward mode, 4 shards) serves
//! replicas of its own, as a redis-server replica does. A redis-server
//! sub-replica gets the stream the Ruvio replica receives from a Ruvio or a
//! redis-server primary (the primary's replid and offsets): a full sync taken while the primary is written (the
//! replica's shards cut where its stream stands still), then `+CONTINUE`
//! after its link is killed, ending with the primary's data. When the
//! middle server's primary changes, its replicas are dropped and full-sync
//! again, and a PSYNC while its own link is down is refused, as with a
//! redis-server in the middle (its counts and errors compared).

mod common;

use common::replication::*;
use common::*;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Writes of several kinds to `primary` from a thread until `stop`.
fn writer(primary: &Server, stop: &Arc<AtomicBool>) -> std::thread::JoinHandle<()> {
    let (mut c, stop) = (primary.raw(), stop.clone());
    std::thread::spawn(move || {
        let mut i = 0usize;
        while !stop.load(Ordering::Relaxed) {
            let k = |name: &str| format!("{name}:{}", i % 41);
            for command in [
                vec!["SET".to_string(), k("s"), format!("v{i}")],
                vec!["INCR".to_string(), k("n")],
                vec!["RPUSH".to_string(), k("l"), i.to_string()],
                vec![
                    "HSET".to_string(),
                    k("h"),
                    format!("f{}", i % 5),
                    i.to_string(),
                ],
                vec!["ZINCRBY".to_string(), k("z"), "2".to_string(), k("m")],
            ] {
                let reply = c.cmd(&command);
                assert!(!reply.starts_with(b"-"), "{command:?}: {}", show(&reply));
            }
            i += 1;
        }
    })
}

/// Every server in `chain` at `primary`'s offset, under its replid.
fn caught_up(primary: &Server, chain: &[&Server]) {
    let mut p = primary.raw();
    wait_for("the chain at the primary's offset", || {
        let offset = field(&mut p, "master_repl_offset");
        chain
            .iter()
            .all(|r| field(&mut r.raw(), "slave_repl_offset") == offset)
    });
    let replid = field(&mut p, "master_replid");
    for r in chain {
        assert_eq!(field(&mut r.raw(), "master_replid"), replid, "the replid");
    }
}

#[test]
fn a_redis_replica_of_a_ruvio_replica_ends_with_the_primarys_data() {
    if require_redis_server("a_redis_replica_of_a_ruvio_replica_ends_with_the_primarys_data")
        .is_none()
    {
        return;
    }
    chain_of_three(Server::ruvio(PortMode::Forward, 2));
    let redis = Server::redis();
    let no_delay = ["CONFIG", "SET", "repl-diskless-sync-delay", "0"];
    assert_eq!(redis.raw().cmd(&no_delay), b"+OK\r\n");
    chain_of_three(redis);
}

/// `primary` -> a Ruvio replica (4 shards) -> a redis-server replica of it.
fn chain_of_three(primary: Server) {
    let middle = Server::ruvio(PortMode::Forward, 4);
    let sub = Server::redis();
    follow(&middle, &primary);
    let mut p = primary.raw();
    fill(&mut p);
    let stop = Arc::new(AtomicBool::new(false));
    let writing = writer(&primary, &stop);
    // Its full sync from the replica while the primary's writes stream in.
    follow(&sub, &middle);
    std::thread::sleep(std::time::Duration::from_millis(300));
    stop.store(true, Ordering::Relaxed);
    writing.join().expect("the writer");
    caught_up(&primary, &[&middle, &sub]);
    compare_all(&primary, &sub, "after the sub-replica's full sync");
    let mut m = middle.raw();
    assert_eq!(
        sync_counts(&mut m),
        (1, 0),
        "one full sync from the replica"
    );

    // A killed link continues from the replica's backlog.
    assert_eq!(m.cmd(&["CLIENT", "KILL", "TYPE", "replica"]), b":1\r\n");
    let writing = {
        stop.store(false, Ordering::Relaxed);
        writer(&primary, &stop)
    };
    wait_for("the sub-replica back", || {
        field(&mut m, "connected_slaves") == "1"
            && field(&mut sub.raw(), "master_link_status") == "up"
    });
    stop.store(true, Ordering::Relaxed);
    writing.join().expect("the writer");
    caught_up(&primary, &[&middle, &sub]);
    assert_eq!(sync_counts(&mut m), (1, 1), "+CONTINUE: {}", middle.logs());
    compare_all(&primary, &sub, "after the partial resync");
}

/// What a sub-replica sees of its middle server (Ruvio or redis-server):
/// the middle's sync counts once the sub-replica is attached, after the
/// middle moved to another primary, and the refusal of a PSYNC while the
/// middle's own link is down.
fn middle_server_story(middle: &Server) -> Vec<String> {
    let (first, second) = (Server::ruvio(PortMode::Forward, 2), Server::redis());
    let mut f = first.raw();
    fill(&mut f);
    let mut s = second.raw();
    assert_eq!(
        s.cmd(&["CONFIG", "SET", "repl-diskless-sync-delay", "0"]),
        b"+OK\r\n"
    );
    assert_eq!(s.cmd(&["SET", "second", "only"]), b"+OK\r\n");
    let sub = Server::redis();
    follow(middle, &first);
    let mut m = middle.raw();
    assert_eq!(
        m.cmd(&["CONFIG", "SET", "repl-diskless-sync-delay", "0"]),
        b"+OK\r\n"
    );
    follow(&sub, middle);
    let mut story = vec![format!("{:?}", sync_counts(&mut m))];
    follow(middle, &second);
    wait_for("the sub-replica with the second primary's data", || {
        sub.raw().cmd(&["GET", "second"]) == b"$4\r\nonly\r\n"
            && field(&mut sub.raw(), "master_link_status") == "up"
    });
    caught_up(&second, &[middle, &sub]);
    compare_all(&second, &sub, "after the middle's new primary");
    story.push(format!("{:?}", sync_counts(&mut m)));
    // Its own link down: no replica may sync from it.
    let dead = free_ports(1, false).to_string();
    assert_eq!(m.cmd(&["REPLICAOF", "127.0.0.1", &dead]), b"+OK\r\n");
    story.push(show(&m.cmd(&["PSYNC", "?", "-1"])));
    story
}

#[test]
fn a_new_primary_resyncs_the_replicas_of_its_replica_as_redis_does() {
    if require_redis_server("a_new_primary_resyncs_the_replicas_of_its_replica_as_redis_does")
        .is_none()
    {
        return;
    }
    let expected = middle_server_story(&Server::redis());
    let got = middle_server_story(&Server::ruvio(PortMode::Forward, 2));
    assert_eq!(got, expected, "a Ruvio middle against a redis-server one");
}
