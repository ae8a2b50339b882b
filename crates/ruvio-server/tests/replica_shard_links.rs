//! Ruvio to Ruvio shard by shard, the replica's half (issue 31, case 3;
//! docs/replication.md): a Ruvio replica started with `--replica-shard-links
//! yes`, of a forward-mode Ruvio primary with the same shard count, follows
//! each primary shard over a link of its own (`REPLCONF ruvio-shard i/n`):
//! the primary lists one replica connection per shard and counts them as
//! one replica (INFO, ROLE, WAIT, `min-replicas-to-write`; FAILOVER to it:
//! `tests/shard_links_failover.rs`), each replica shard
//! loads its link's RDB and applies its link's stream, and after 8 clients
//! wrote every kind of write (TTLs, expiring keys, SPOP, INCRBYFLOAT, XADD
//! `*`, consumer groups, scripts, MULTI/EXEC with SELECT across shards, a
//! served BLPOP) every key compares equal. INFO and ROLE show the links as one
//! (`slave_repl_offset` is the primary's server offset the links reached, the
//! link state the worst of theirs). CLIENT KILL TYPE replica on the primary: each link
//! continues with `+CONTINUE`, no second full sync. Another shard count, or a
//! redis-server primary, refuses the links: the single stream. Cross-shard
//! groups on keys their owners' clients write at the same time keep their
//! place on the replica (the barrier records, `replication::link_barrier`).

mod common;

use common::replication::*;
use common::*;
use std::time::Duration;

const SHARD_LINKS: [&str; 2] = ["--replica-shard-links", "yes"];

fn count(text: &str, line: &str) -> usize {
    text.lines().filter(|l| l.contains(line)).count()
}

/// Each link's stream is in order: once a key written last on each primary
/// shard is on the replica, every write before it on that shard is too.
fn settle(primary: &Server, replica: &Server, shards: usize, round: &str) {
    let (mut p, mut r) = (primary.raw(), replica.raw());
    // The keys written with PX 30 expire on the primary: their DELs go out.
    std::thread::sleep(Duration::from_millis(100));
    p.cmd(&["SCAN", "0", "COUNT", "100000"]);
    for shard in 0..shards {
        let key = key_on_shard(&format!("settled:{round}:"), shard, shards);
        assert_eq!(p.cmd(&["SET", &key, round]), b"+OK\r\n");
        wait_for(&format!("{key} on the replica"), || {
            r.cmd(&["GET", &key]) == encode_bulk(round)
        });
    }
    // A cross-shard group's forwarded writes answer just after its link moved on.
    std::thread::sleep(Duration::from_millis(100));
}

fn encode_bulk(value: &str) -> Vec<u8> {
    format!("${}\r\n{value}\r\n", value.len()).into_bytes()
}

fn follows_on_shard_links(shards: usize) {
    let primary = Server::ruvio(PortMode::Forward, shards);
    let mut p = primary.raw();
    fill(&mut p);
    let replica = Server::ruvio_with(PortMode::Forward, shards, &SHARD_LINKS);
    follow(&replica, &primary);
    // One link per shard, counted as one replica (docs: a Ruvio replica of
    // n links is one replica; `the_primary_counts_..._as_one_replica`).
    assert_eq!(replica_connections(&mut p), shards);
    assert_eq!(field(&mut p, "connected_slaves"), "1");
    let logs = replica.full_logs();
    assert_eq!(
        count(&logs, "sync: Finished with success"),
        shards,
        "{logs}"
    );
    for shard in 0..shards {
        let loaded = format!("shard {shard}: loaded ");
        assert_eq!(count(&logs, &loaded), 1, "{loaded}: {logs}");
    }
    settle(&primary, &replica, shards, "synced");
    compare_all(&primary, &replica, "after the full sync");

    let cross = cross_shard_load(&primary, shards, 60);
    write_load(&primary, 7, 60);
    cross.join().expect("the cross-shard writer");
    settle(&primary, &replica, shards, "loaded");
    compare_all(&primary, &replica, "after the load");

    // INFO and ROLE show the links as one replica: up, one offset.
    let mut r = replica.raw();
    assert_eq!(field(&mut r, "master_link_status"), "up");
    let offset = field(&mut r, "slave_repl_offset");
    assert!(offset.parse::<u64>().unwrap_or(0) > 0, "offset {offset}");
    let Value::Array(role) = decode(&r.cmd(&["ROLE"])) else {
        panic!("ROLE")
    };
    assert_eq!(role[0].text(), "slave");
    assert_eq!(role[2], Value::Int(i64::from(primary.port())));
    assert_eq!(role[3].text(), "connected");
    let Value::Int(role_offset) = role[4] else {
        panic!("ROLE's offset: {:?}", role[4])
    };
    let info_offset: i64 = offset.parse().unwrap_or(-1);
    // The primary's PING may arrive between the two reads.
    assert!(
        role_offset >= info_offset,
        "ROLE {role_offset}, INFO {info_offset}"
    );
    // A replica on shard links serves the single stream from a history of
    // its own (tests/single_stream_beneath_shard_links.rs): its first
    // replica starts it under a new replid, as Redis's first replica does.
    let mut sync = replica.raw();
    let reply = String::from_utf8_lossy(&sync.cmd(&["PSYNC", "?", "-1"])).into_owned();
    let own = field(&mut r, "master_replid");
    assert!(reply.starts_with(&format!("+FULLRESYNC {own} ")), "{reply}");
    drop(sync);
    assert_eq!(
        r.cmd(&["SET", "k", "v"]),
        b"-READONLY You can't write against a read only replica.\r\n"
    );

    // Every link killed: each continues from its shard's backlog.
    let killed = p.cmd(&["CLIENT", "KILL", "TYPE", "replica"]);
    assert_eq!(show(&killed), show(format!(":{shards}\r\n").as_bytes()));
    for i in 0..200 {
        p.cmd(&["SET", &format!("after-kill:{i}"), &i.to_string()]);
    }
    // Each primary shard's FLUSHDB is in its own link's stream: each
    // replica shard flushes its own keys only.
    assert_eq!(p.cmd(&["FLUSHDB"]), b"+OK\r\n");
    for i in 0..50 {
        p.cmd(&["RPUSH", &format!("after-flush:{i}"), &i.to_string()]);
    }
    p.cmd(&["SELECT", "3"]);
    p.cmd(&["SET", "in-three", "after"]);
    wait_for("every link back", || {
        replica_connections(&mut p) == shards && field(&mut r, "master_link_status") == "up"
    });
    settle(&primary, &replica, shards, "continued");
    compare_all(&primary, &replica, "after the links continued");
    let logs = replica.full_logs();
    let continued = "Master accepted a Partial Resynchronization.";
    assert_eq!(count(&logs, continued), shards, "{logs}");
    assert_eq!(
        count(&logs, "sync: Finished with success"),
        shards,
        "{logs}"
    );

    // Promoted: every link stops, the data stays, writes are taken.
    assert_eq!(r.cmd(&["REPLICAOF", "NO", "ONE"]), b"+OK\r\n");
    wait_for("no link on the primary", || {
        replica_connections(&mut p) == 0
    });
    compare_all(&primary, &replica, "after the promotion");
    assert_eq!(r.cmd(&["SET", "promoted", "yes"]), b"+OK\r\n");
    assert_eq!(field(&mut r, "role"), "master");
}

#[test]
fn two_shards_follow_on_shard_links() {
    follows_on_shard_links(2);
}

#[test]
fn four_shards_follow_on_shard_links() {
    follows_on_shard_links(4);
}

/// Replica shard `shard` made to sleep (DEBUG SLEEP `seconds`), returned
/// once it does: a PING on that shard went unanswered for half a second.
/// Its link neither applies nor acknowledges anything meanwhile.
fn asleep(replica: &Server, shard: usize, seconds: &str) -> (RawConn, RawConn) {
    let mut sleeper = conn_on_shard(replica, shard);
    let mut probe = conn_on_shard(replica, shard);
    sleeper.send(&encode(&["DEBUG", "SLEEP", seconds]));
    for _ in 0..20 {
        probe.send(&encode(&["PING"]));
        if probe.reply_within(Duration::from_millis(500)).is_none() {
            return (sleeper, probe);
        }
    }
    panic!("replica shard {shard} never slept");
}

/// The primary's view of a replica on shard links (docs/replication.md,
/// "Shard links"): its n links are one replica. INFO says
/// `connected_slaves:1` and its `slave0` line has its address and port,
/// `online`, the offset the replica itself reports (the primary's own once
/// caught up: `tests/shard_links_offset.rs`)
/// and the lag; ROLE lists it once; WAIT 1 counts it once every link
/// acknowledged its own shard's writes, and not while one link's shard
/// sleeps (a write to that shard then waits); `min-replicas-to-write 1`
/// takes writes with it attached and answers -NOREPLICAS once it is gone.
fn the_primary_counts_its_links_as_one_replica(shards: usize) {
    let primary = Server::ruvio(PortMode::Forward, shards);
    let mut p = primary.raw();
    fill(&mut p);
    let replica = Server::ruvio_with(PortMode::Forward, shards, &SHARD_LINKS);
    follow(&replica, &primary);
    let mut r = replica.raw();
    assert_eq!(replica_connections(&mut p), shards);
    assert_eq!(field(&mut p, "connected_slaves"), "1");
    let keys = keys_per_shard("acked:", shards);
    for key in &keys {
        assert_eq!(p.cmd(&["SET", key, "1"]), b"+OK\r\n");
    }
    assert_eq!(p.cmd(&["WAIT", "1", "1000"]), b":1\r\n");
    for key in &keys {
        assert_eq!(r.cmd(&["GET", key]), b"$1\r\n1\r\n", "{key} acknowledged");
    }
    // A write and WAIT in one batch on the key's own shard: WAIT hands the
    // shard's pending record to its link's history too (before, to the
    // server's alone: the replica never got it).
    let mut on_0 = conn_on_shard(&primary, 0);
    on_0.send(
        &[
            encode(&["SET", &keys[0], "batched"]),
            encode(&["WAIT", "1", "1000"]),
        ]
        .concat(),
    );
    assert_eq!(on_0.read_reply(), b"+OK\r\n");
    assert_eq!(on_0.read_reply(), b":1\r\n");
    assert_eq!(r.cmd(&["GET", &keys[0]]), b"$7\r\nbatched\r\n");

    // Its INFO line: the offset is what the replica says it applied (the
    // server offset its links' marks reached), this server's own once the
    // links acknowledged it.
    let port = replica.port().to_string();
    wait_for(
        "slave0's offset is the replica's own and the primary's",
        || {
            let line = slave_line(&mut p, 0);
            let listed = line.get(3).map(|(_, offset)| offset.clone());
            let own = field(&mut p, "master_repl_offset");
            listed == Some(field(&mut r, "slave_repl_offset")) && listed == Some(own)
        },
    );
    let line = slave_line(&mut p, 0);
    let names: Vec<&str> = line.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(names, ["ip", "port", "state", "offset", "lag"], "{line:?}");
    assert_eq!(line[0].1, "127.0.0.1");
    assert_eq!(line[1].1, port);
    assert_eq!(line[2].1, "online");
    let lag: u64 = line[4].1.parse().expect("lag");
    assert!(lag <= 1, "lag {lag}");
    assert_eq!(field(&mut p, "slave1"), "", "one replica line");
    let Value::Array(role) = decode(&p.cmd(&["ROLE"])) else {
        panic!("ROLE")
    };
    assert_eq!(role[0].text(), "master");
    let Value::Array(listed) = &role[2] else {
        panic!("ROLE's replicas: {:?}", role[2])
    };
    assert_eq!(listed.len(), 1, "{listed:?}");
    let Value::Array(entry) = &listed[0] else {
        panic!("ROLE's replica: {:?}", listed[0])
    };
    assert_eq!(
        (entry[0].text(), entry[1].text()),
        ("127.0.0.1".into(), port.clone())
    );
    let offset: u64 = entry[2].text().parse().expect("ROLE's offset");
    assert!(offset > 0);

    // One link's shard asleep: a write to its shard is not acknowledged,
    // however far the other links got.
    let paused = shards - 1;
    let (mut sleeper, mut probe) = asleep(&replica, paused, "3");
    for key in &keys {
        assert_eq!(p.cmd(&["SET", key, "2"]), b"+OK\r\n");
    }
    assert_eq!(p.cmd(&["WAIT", "1", "500"]), b":0\r\n");
    assert_eq!(sleeper.read_reply(), b"+OK\r\n");
    assert_eq!(probe.read_reply(), b"+PONG\r\n");
    assert_eq!(p.cmd(&["WAIT", "1", "2000"]), b":1\r\n");

    let set = |p: &mut RawConn| p.cmd(&["SET", "guarded", "x"]);
    assert_eq!(
        p.cmd(&["CONFIG", "SET", "min-replicas-to-write", "1"]),
        b"+OK\r\n"
    );
    assert_eq!(field(&mut p, "min_slaves_good_slaves"), "1");
    // Shard 0's tick has judged the setting by now.
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(set(&mut p), b"+OK\r\n");
    drop((r, sleeper, probe));
    drop(replica);
    wait_for("-NOREPLICAS without the replica", || {
        set(&mut p) == b"-NOREPLICAS Not enough good replicas to write.\r\n"
    });
    // The replica stays listed while any of its links is attached (it is
    // good only while all are): the last link's close may be read after the
    // first one's made writes refused.
    wait_for("the replica unlisted once its last link closed", || {
        field(&mut p, "connected_slaves") == "0"
    });
    assert_eq!(field(&mut p, "min_slaves_good_slaves"), "0");
}

#[test]
fn the_primary_counts_2_links_as_one_replica() {
    the_primary_counts_its_links_as_one_replica(2);
}

#[test]
fn the_primary_counts_4_links_as_one_replica() {
    the_primary_counts_its_links_as_one_replica(4);
}

/// A primary of another shard count refuses the links (`ruvio-shard needs a
/// forward-mode primary of 2 shards`), and a redis-server does not know the
/// option: the replica follows over the single stream, as one replica.
#[test]
fn refused_shard_links_fall_back_to_the_single_stream() {
    let primary = Server::ruvio(PortMode::Forward, 2);
    let mut p = primary.raw();
    fill(&mut p);
    let replica = Server::ruvio_with(PortMode::Forward, 4, &SHARD_LINKS);
    follow(&replica, &primary);
    assert_eq!(replica_connections(&mut p), 1);
    write_load(&primary, 4, 30);
    std::thread::sleep(Duration::from_millis(100));
    p.cmd(&["SCAN", "0", "COUNT", "100000"]);
    assert_eq!(wait_all(&mut p, "1", "5000"), b":1\r\n");
    compare_all(&primary, &replica, "over the single stream");
    let logs = replica.full_logs();
    assert!(
        logs.contains("the MASTER refused a shard link (-ERR ruvio-shard needs a forward-mode primary of 2 shards)"),
        "{logs}"
    );

    if require_redis_server("refused_shard_links_fall_back_to_the_single_stream").is_none() {
        return;
    }
    let redis = Server::redis();
    let mut c = redis.raw();
    fill(&mut c);
    let replica = Server::ruvio_with(PortMode::Forward, 2, &SHARD_LINKS);
    follow(&replica, &redis);
    assert_eq!(c.cmd(&["WAIT", "1", "5000"]), b":1\r\n");
    compare_all(&redis, &replica, "a redis-server primary");
    assert!(replica
        .logs()
        .contains("(-ERR Unrecognized REPLCONF option: ruvio-shard)"));
}

/// A replica of a redis-server on the single stream, switched to shard
/// links at run time: the primary refuses them, and the single stream goes
/// on from where it was (`+CONTINUE` at its own offset). Before: the links'
/// handshake set the server's offset to their sum (0), so the single stream
/// asked to continue from offset 1 and the primary sent its whole backlog
/// again: every RPUSH applied twice (what a FAILOVER's old primary met once
/// its hand-over ended, with the links on by default).
#[test]
fn refused_links_leave_the_single_streams_offset_alone() {
    if require_redis_server("refused_links_leave_the_single_streams_offset_alone").is_none() {
        return;
    }
    let redis = Server::redis();
    let mut c = redis.raw();
    let replica = Server::ruvio_with(PortMode::Forward, 2, &["--replica-shard-links", "no"]);
    follow(&replica, &redis);
    for i in 0..100 {
        c.cmd(&["RPUSH", "pushed", &i.to_string()]);
    }
    assert_eq!(c.cmd(&["WAIT", "1", "5000"]), b":1\r\n");
    let mut r = replica.raw();
    let reply = r.cmd(&["CONFIG", "SET", "replica-shard-links", "yes"]);
    assert_eq!(reply, b"+OK\r\n");
    wait_for("the links refused", || {
        replica.logs().contains("the MASTER refused a shard link")
    });
    wait_for("the single stream again", || {
        field(&mut r, "master_link_status") == "up"
    });
    for i in 100..150 {
        c.cmd(&["RPUSH", "pushed", &i.to_string()]);
    }
    assert_eq!(c.cmd(&["WAIT", "1", "5000"]), b":1\r\n");
    assert_eq!(r.cmd(&["LLEN", "pushed"]), b":150\r\n");
    compare_all(&redis, &replica, "after the refused links");
    assert_eq!(sync_counts(&mut c), (1, 1), "one full sync, one continued");
}

/// CONFIG SET replica-shard-links at run time: the links are made again at
/// the next tick, one per shard, and back to the single stream (each a full
/// sync: the histories differ), the data the primary's all along.
#[test]
fn config_set_switches_between_the_single_stream_and_shard_links() {
    let primary = Server::ruvio(PortMode::Forward, 2);
    let mut p = primary.raw();
    fill(&mut p);
    // Starts on the single stream whatever the default.
    let replica = Server::ruvio_with(PortMode::Forward, 2, &["--replica-shard-links", "no"]);
    follow(&replica, &primary);
    assert_eq!(replica_connections(&mut p), 1);
    let mut r = replica.raw();
    let set = |r: &mut RawConn, value: &str| {
        let reply = r.cmd(&["CONFIG", "SET", "replica-shard-links", value]);
        assert_eq!(reply, b"+OK\r\n");
    };
    set(&mut r, "yes");
    wait_for("a link per shard", || {
        replica_connections(&mut p) == 2 && field(&mut r, "master_link_status") == "up"
    });
    for i in 0..100 {
        p.cmd(&["INCR", &format!("counter:{}", i % 10)]);
    }
    settle(&primary, &replica, 2, "on-links");
    compare_all(&primary, &replica, "on shard links");
    set(&mut r, "no");
    wait_for("the single stream again", || {
        replica_connections(&mut p) == 1 && field(&mut r, "master_link_status") == "up"
    });
    for i in 0..100 {
        p.cmd(&["INCR", &format!("counter:{}", i % 10)]);
    }
    assert_eq!(p.cmd(&["WAIT", "1", "5000"]), b":1\r\n");
    compare_all(&primary, &replica, "on the single stream again");
    // Each switch is a full sync (what the links applied is not in the
    // server's history, nor the single stream's in the links'): 1 + 2 + 1,
    // the links' counted by their shards' histories.
    assert_eq!(sync_counts(&mut p), (4, 0), "every history's");
    let logs = replica.full_logs();
    assert_eq!(count(&logs, "sync: Finished with success"), 4, "{logs}");
    assert_eq!(count(&logs, "Partial Resynchronization"), 0, "{logs}");
}

/// Sends `commands` in one write and reads their replies; none is an error.
fn pipeline(conn: &mut RawConn, commands: &[Vec<String>]) {
    let mut bytes = Vec::new();
    for command in commands {
        bytes.extend_from_slice(&encode(command));
    }
    conn.send(&bytes);
    for command in commands {
        let reply = conn.read_reply();
        assert!(!reply.starts_with(b"-"), "{command:?}: {}", show(&reply));
    }
}

fn words_of(text: &str) -> Vec<String> {
    text.split(' ').map(str::to_owned).collect()
}

/// The load of [`groups_beside_their_owners_writes`]: a client on each shard
/// runs groups over every shard's `counters` and `lists` (one key each), and
/// one per shard writes its own shard's, until `stop`.
fn groups_beside_owners(
    primary: &Server,
    counters: &[String],
    lists: &[String],
    stop: &std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> Vec<std::thread::JoinHandle<()>> {
    let shards = counters.len();
    let mut threads = Vec::new();
    for shard in 0..shards {
        // A group coordinated by each shard: each shard's stream has some.
        let mut c = conn_on_shard(primary, shard);
        let (counters, lists, stop) = (counters.to_vec(), lists.to_vec(), stop.clone());
        threads.push(std::thread::spawn(move || {
            let mut round = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let mut batch = Vec::new();
                for i in 0..8 {
                    let tag = format!("g{shard}-{round}-{i}");
                    batch.push(words_of("MULTI"));
                    for (counter, list) in counters.iter().zip(&lists) {
                        batch.push(words_of(&format!("INCR {counter}")));
                        batch.push(words_of(&format!("RPUSH {list} {tag}")));
                    }
                    batch.push(words_of("EXEC"));
                    let (from, to) = (&lists[i % shards], &lists[(i + 1) % shards]);
                    batch.push(words_of(&format!("LMOVE {from} {to} LEFT RIGHT")));
                }
                let incr_all = "for _, k in ipairs(KEYS) do redis.call('incrby', k, 10) end";
                let mut eval = vec!["EVAL".into(), incr_all.into(), shards.to_string()];
                eval.extend(counters.iter().cloned());
                batch.push(eval);
                pipeline(&mut c, &batch);
                round += 1;
            }
        }));
    }
    for shard in 0..shards {
        // The owner's own writes to the same keys, from a client on the owner.
        let mut c = conn_on_shard(primary, shard);
        let (counter, list, stop) = (counters[shard].clone(), lists[shard].clone(), stop.clone());
        threads.push(std::thread::spawn(move || {
            let mut round = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let mut batch = Vec::new();
                for i in 0..16 {
                    batch.push(words_of(&format!("INCR {counter}")));
                    batch.push(words_of(&format!("RPUSH {list} o{shard}-{round}-{i}")));
                }
                pipeline(&mut c, &batch);
                round += 1;
            }
        }));
    }
    threads
}

/// Cross-shard groups on keys that their owners' own clients write at the
/// same time: a client on each shard runs MULTI/EXEC (INCR and RPUSH of a key
/// of each shard), LMOVE between the shards' lists and a script over all,
/// while one client per shard pipelines INCR and RPUSH on its shard's keys
/// only. The primary runs each group with the keys borrowed from their owner
/// and records it in its own shard's stream; the owner's writes before and
/// after it are in the owner's stream. Without the barrier records the
/// replica's two links applied them in either order (a group after the
/// owner's later INCR: the counter one short; before its earlier RPUSH: the
/// lists' elements in another order), most of all while one replica shard
/// is slow for a moment (a client's DEBUG SLEEP on it holds its link back),
/// and keys compared unequal within a few seconds.
fn groups_beside_their_owners_writes(shards: usize) {
    let primary = Server::ruvio(PortMode::Forward, shards);
    let replica = Server::ruvio_with(PortMode::Forward, shards, &SHARD_LINKS);
    follow(&replica, &primary);
    let counters = keys_per_shard("counter:", shards);
    let lists = keys_per_shard("list:", shards);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut threads = groups_beside_owners(&primary, &counters, &lists, &stop);
    for shard in 0..shards {
        // A slow command on a replica shard (DEBUG SLEEP, as a long read
        // would) holds that shard's link back while the other link runs on.
        let mut c = conn_on_shard(&replica, shard);
        let stop = stop.clone();
        threads.push(std::thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                assert_eq!(c.cmd(&["DEBUG", "SLEEP", "0.03"]), b"+OK\r\n");
                std::thread::sleep(Duration::from_millis(40));
            }
        }));
    }
    std::thread::sleep(Duration::from_secs(4));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for t in threads {
        t.join().expect("a writer");
    }
    // The last word on each counter: a group's record holds the keys' whole
    // values (RESTORE), so a group out of place is undone by the next one in
    // place. So last, while replica shard 0 sleeps, shard 0 runs a group on
    // both counters and shard 1's client increments its counter after it:
    // link 1 must not apply those before link 0 applied the group.
    let mut sleeper = conn_on_shard(&replica, 0);
    sleeper.send(&encode(&["DEBUG", "SLEEP", "0.5"]));
    std::thread::sleep(Duration::from_millis(50));
    let mut on_0 = conn_on_shard(&primary, 0);
    let group = [
        words_of("MULTI"),
        words_of(&format!("INCR {}", counters[0])),
        words_of(&format!("INCR {}", counters[1])),
        words_of("EXEC"),
    ];
    pipeline(&mut on_0, &group);
    let mut on_1 = conn_on_shard(&primary, 1);
    let owners: Vec<Vec<String>> = (0..10)
        .map(|_| words_of(&format!("INCR {}", counters[1])))
        .collect();
    pipeline(&mut on_1, &owners);
    assert_eq!(sleeper.read_reply(), b"+OK\r\n");
    settle(&primary, &replica, shards, "groups");
    compare_all(
        &primary,
        &replica,
        "after cross-shard groups beside the owners' writes",
    );
}

#[test]
fn cross_shard_groups_beside_their_owners_writes_end_equal() {
    groups_beside_their_owners_writes(2);
}

/// The same over 4 shards: a group borrows from three owners, so its
/// coordinator's stream has three barriers before it.
#[test]
fn cross_shard_groups_of_4_shards_beside_their_owners_writes_end_equal() {
    groups_beside_their_owners_writes(4);
}

/// The replica attaches while each primary shard runs transactions over a
/// fresh key of each shard (every key written by one group only, so a group
/// lost or applied twice shows): each link cuts its shard at its own moment,
/// and a group that ran between the cuts must be on the replica whole.
fn full_sync_amid_cross_shard_groups(shards: usize) {
    let primary = Server::ruvio(PortMode::Forward, shards);
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
                        batch.push(words_of("MULTI"));
                        for keys in fresh.iter() {
                            batch.push(words_of(&format!("INCR {}", keys[n])));
                        }
                        batch.push(words_of("EXEC"));
                        n += shards;
                    }
                    pipeline(&mut c, &batch);
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    let replica = Server::ruvio_with(PortMode::Forward, shards, &SHARD_LINKS);
    follow(&replica, &primary);
    std::thread::sleep(Duration::from_millis(500));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for t in threads {
        t.join().expect("a writer");
    }
    let round = format!("synced-amid-{shards}");
    settle(&primary, &replica, shards, &round);
    compare_all(
        &primary,
        &replica,
        "after a full sync amid cross-shard groups",
    );
}

#[test]
fn a_full_sync_amid_cross_shard_groups_ends_equal() {
    full_sync_amid_cross_shard_groups(2);
}

/// The same with groups over 3 shards: each link's cut at its own moment,
/// a group seen by some of its shards' cuts and not by others.
#[test]
fn a_full_sync_amid_cross_shard_groups_of_3_shards_ends_equal() {
    full_sync_amid_cross_shard_groups(3);
}

/// One link full-syncs alone: while replica shard `sleeping` sleeps (DEBUG
/// SLEEP), both links are killed on the primary (the other continues at
/// once), then primary shard 0 runs transactions over a fresh key of each
/// shard and shard 1's key is written again after each: by the time the
/// sleeping link asks again its place is out of its shard's 16 KiB backlog,
/// a full sync of that shard's keys only.
fn lone_link_full_sync(sleeping: usize) {
    let args = ["--repl-backlog-size", "16kb"];
    let primary = Server::ruvio_with(PortMode::Forward, 2, &args);
    let mut p = primary.raw();
    let replica = Server::ruvio_with(PortMode::Forward, 2, &SHARD_LINKS);
    follow(&replica, &primary);
    let fresh = fresh_keys("missed:", 2_000);
    let mut sleeper = conn_on_shard(&replica, sleeping);
    sleeper.send(&encode(&["DEBUG", "SLEEP", "2"]));
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(p.cmd(&["CLIENT", "KILL", "TYPE", "replica"]), b":2\r\n");
    wait_for("the other link back", || replica_connections(&mut p) == 1);
    let (mut on_0, mut on_1) = (conn_on_shard(&primary, 0), conn_on_shard(&primary, 1));
    let value = "v".repeat(1024);
    for (keys_0, keys_1) in fresh[0].chunks(50).zip(fresh[1].chunks(50)) {
        let (mut groups, mut after) = (Vec::new(), Vec::new());
        for (key_0, key_1) in keys_0.iter().zip(keys_1) {
            groups.push(words_of("MULTI"));
            groups.push(vec!["SET".into(), key_0.clone(), value.clone()]);
            groups.push(vec!["SET".into(), key_1.clone(), value.clone()]);
            groups.push(words_of("EXEC"));
            after.push(words_of(&format!("SET {key_1} after")));
        }
        pipeline(&mut on_0, &groups);
        pipeline(&mut on_1, &after);
    }
    assert_eq!(sleeper.read_reply(), b"+OK\r\n");
    wait_for("the sleeping link synced again", || {
        count(&replica.full_logs(), "sync: Finished with success") == 3
    });
    settle(&primary, &replica, 2, "lone-sync");
    compare_all(&primary, &replica, "after a lone link's full sync");
    let logs = replica.full_logs();
    assert_eq!(count(&logs, "Partial Resynchronization"), 1, "{logs}");
}

/// The coordinator's link full-syncs alone: the transactions' writes to shard
/// 1's keys were in shard 0's stream, which link 0 never applied; they reach
/// replica shard 1 from shard 1's own stream (each key's state goes home with
/// it and shard 1 records it after its barrier). Without: keys missing, 2
/// runs of 2.
#[test]
fn a_lone_link_full_sync_keeps_the_groups_it_missed() {
    lone_link_full_sync(0);
}

/// The owner's link full-syncs alone, past the transactions and the writes
/// after them: link 0 passes each transaction's barrier once link 1 loaded,
/// and leaves the transaction's writes to shard 1's keys alone (link 1's data
/// has them, and the later writes); applied, they would undo the later ones.
#[test]
fn a_lone_owner_full_sync_is_not_undone_by_the_groups_before_it() {
    lone_link_full_sync(1);
}

/// A fake primary's link connection, answered through its handshake up to its
/// PSYNC: the shard it asked for (`REPLCONF ruvio-shard <i>/<n>`) and the
/// connection.
fn accept_link(listener: &std::net::TcpListener) -> (usize, std::net::TcpStream) {
    let (mut stream, _) = listener.accept().expect("a link connects");
    let mut shard = None;
    loop {
        let command = read_command(&mut stream);
        let reply = match command[0].to_ascii_uppercase().as_str() {
            "PSYNC" => break,
            "PING" => "+PONG\r\n",
            _ => "+OK\r\n",
        };
        if command.len() == 3 && command[1].eq_ignore_ascii_case("ruvio-shard") {
            shard = command[2].split('/').next().and_then(|i| i.parse().ok());
        }
        std::io::Write::write_all(&mut stream, reply.as_bytes()).expect("a reply");
    }
    (shard.expect("REPLCONF ruvio-shard"), stream)
}

/// A full sync of no keys and no libraries, then `commands` of the stream.
fn empty_sync_then(link: &mut std::net::TcpStream, replid: char, commands: &[&[&[u8]]]) {
    let rdb = b"REDIS0009\xff\0\0\0\0\0\0\0\0";
    let mut out = format!(
        "+FULLRESYNC {} 0\r\n${}\r\n",
        replid.to_string().repeat(40),
        rdb.len()
    )
    .into_bytes();
    out.extend_from_slice(rdb);
    for command in commands {
        out.extend_from_slice(&encode(command));
    }
    std::io::Write::write_all(link, &out).expect("the link's sync");
}

/// A replica shard's function libraries come from its own link
/// (docs/replication.md, "Function libraries on shard links"). A fake
/// primary of 2 shards syncs link 0 with no libraries and streams a
/// FUNCTION LOAD; once the replica's shard 0 has the library, link 1 gets
/// its full sync, cut before the LOAD (no libraries), then the set its shard
/// took, `RUVIO FUNCTIONS <payload>`, and a SET. The replica's shard 1 ends
/// with the library. Before, link 0's LOAD was sent on to shard 1 and link
/// 1's RDB put the older, empty set back: shard 1 answered FCALL with
/// `Function not found` until the next change.
#[test]
fn each_replica_shard_takes_its_libraries_from_its_own_link() {
    let code = "#!lua name=linklib\nredis.register_function{function_name='one', callback=function() return 1 end, flags={'no-writes'}}";
    let source = Server::ruvio(PortMode::Forward, 1);
    let mut s = source.raw();
    assert_eq!(s.cmd(&["FUNCTION", "LOAD", code]), b"$7\r\nlinklib\r\n");
    let Value::Bulk(payload) = decode(&s.cmd(&["FUNCTION", "DUMP"])) else {
        panic!("FUNCTION DUMP");
    };

    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
    let port = listener
        .local_addr()
        .expect("its address")
        .port()
        .to_string();
    let replica = Server::ruvio(PortMode::Forward, 2);
    let mut r = replica.raw();
    assert_eq!(r.cmd(&["REPLICAOF", "127.0.0.1", &port]), b"+OK\r\n");
    let mut links = [accept_link(&listener), accept_link(&listener)];
    links.sort_by_key(|(shard, _)| *shard);
    let [(_, mut link_0), (_, mut link_1)] = links;
    empty_sync_then(
        &mut link_0,
        'a',
        &[&[b"FUNCTION", b"LOAD", code.as_bytes()]],
    );
    let mut on_0 = conn_on_shard(&replica, 0);
    wait_for("the library on the replica's shard 0", || {
        on_0.cmd(&["FCALL_RO", "one", "0"]) == b":1\r\n"
    });

    let key = key_on_shard("libraries:", 1, 2);
    empty_sync_then(
        &mut link_1,
        'b',
        &[
            &[b"RUVIO", b"FUNCTIONS", &payload],
            &[b"SET", key.as_bytes(), b"after"],
        ],
    );
    wait_for("link 1's SET on the replica", || {
        r.cmd(&["GET", &key]) == b"$5\r\nafter\r\n"
    });
    let mut on_1 = conn_on_shard(&replica, 1);
    assert_eq!(on_1.cmd(&["FCALL_RO", "one", "0"]), b":1\r\n");
    assert_eq!(
        decode(&on_1.cmd(&["FUNCTION", "DUMP"])),
        Value::Bulk(payload)
    );
    drop((link_0, link_1));
}
