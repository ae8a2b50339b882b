//! What a forward-mode Ruvio of 2 and 4 shards sends its one stream, in what
//! order: a redis-server 7.0 replica ends with every key and FUNCTION LIST of
//! the primary, and runs each command the primary's clients ran once (its
//! INFO commandstats count them).
//!
//! - FUNCTION LOAD [REPLACE], DELETE, FLUSH and RESTORE reach the replica as
//!   they are, once (not at the next full sync only, not once per shard),
//!   and every shard of a Ruvio replica on shard links beside it ends with
//!   the same libraries.
//! - FLUSHDB, FLUSHALL and SWAPDB run on every shard, each at its own moment,
//!   while clients write on every shard: the replica gets each once, after
//!   every write that ran before it on its key's shard and before every write
//!   after it (`replication::primary`'s barriers). Without that, a write
//!   between two shards' flushes is flushed on the replica only, and SWAPDB
//!   swaps back and forth.

mod common;

use common::replication::*;
use common::*;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

fn info_field(conn: &mut RawConn, section: &str, name: &str) -> String {
    let info = decode(&conn.cmd(&["INFO", section])).text();
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .map(|v| v.trim().to_string())
        .unwrap_or_default()
}

/// Calls of `command` the server ran (INFO commandstats), 0 if none.
fn calls(conn: &mut RawConn, command: &str) -> u64 {
    let stat = info_field(conn, "commandstats", &format!("cmdstat_{command}"));
    stat.split(',')
        .find_map(|f| f.strip_prefix("calls="))
        .map_or(0, |n| n.parse().expect("calls"))
}

/// A redis-server replica of `primary`, its full sync done and online.
fn redis_replica(primary: &Server) -> Server {
    let replica = Server::redis();
    follow(&replica, primary);
    let mut p = primary.raw();
    wait_for("the replica online", || {
        info_field(&mut p, "replication", "slave0").contains("state=online")
    });
    replica
}

/// The replica has every byte the primary sent so far.
fn caught_up(p: &mut RawConn) {
    assert_eq!(wait_all(p, "1", "10000"), b":1\r\n");
}

/// FUNCTION LIST WITHCODE's libraries, sorted (Redis lists them in its
/// dictionary's order).
fn function_list(c: &mut RawConn) -> Vec<String> {
    let Value::Array(libraries) = decode(&c.cmd(&["FUNCTION", "LIST", "WITHCODE"])) else {
        panic!("FUNCTION LIST")
    };
    let mut libraries: Vec<String> = libraries.iter().map(|l| format!("{l:?}")).collect();
    libraries.sort();
    libraries
}

fn library(name: &str, body: &str) -> String {
    format!(
        "#!lua name={name}\nredis.register_function{{function_name='{name}_f', \
         callback=function(keys, args) return {body} end, flags={{'no-writes'}}}}"
    )
}

/// The redis-server replica `r` and every shard of the Ruvio replica on
/// shard links `links` list the primary's libraries (each shard of the
/// latter takes them from its own link: `replication::link_barrier`).
fn same_libraries(p: &mut RawConn, r: &mut RawConn, links: &Server, shards: usize, when: &str) {
    assert_eq!(wait_all(p, "2", "10000"), b":2\r\n", "{when}");
    let want = function_list(p);
    assert_eq!(function_list(r), want, "{when}");
    for shard in 0..shards {
        let mut on_shard = conn_on_shard(links, shard);
        assert_eq!(
            function_list(&mut on_shard),
            want,
            "{when}: shard {shard} on links"
        );
    }
}

fn functions_reach_the_replica(shards: usize) {
    let primary = Server::ruvio(PortMode::Forward, shards);
    let mut p = primary.raw();
    let replica = redis_replica(&primary);
    let mut r = replica.raw();
    let links = Server::ruvio(PortMode::Forward, shards);
    follow(&links, &primary);
    assert_eq!(replica_connections(&mut p), 1 + shards, "a link per shard");
    // Each change by a client of another shard.
    let on = |i: usize| conn_on_shard(&primary, i % shards);

    let ok = |reply: Vec<u8>| assert!(!reply.starts_with(b"-"), "{}", show(&reply));
    ok(on(0).cmd(&["FUNCTION", "LOAD", &library("one", "1")]));
    ok(on(1).cmd(&["FUNCTION", "LOAD", &library("two", "2")]));
    ok(on(2).cmd(&["FUNCTION", "LOAD", "REPLACE", &library("one", "11")]));
    same_libraries(&mut p, &mut r, &links, shards, "after LOADs");
    assert_eq!(r.cmd(&["FCALL_RO", "one_f", "0"]), b":11\r\n");
    assert_eq!(calls(&mut r, "function|load"), 3, "each LOAD once");

    ok(on(3).cmd(&["FUNCTION", "DELETE", "two"]));
    same_libraries(&mut p, &mut r, &links, shards, "after DELETE");
    assert_eq!(calls(&mut r, "function|delete"), 1);

    let Value::Bulk(dump) = decode(&p.cmd(&["FUNCTION", "DUMP"])) else {
        panic!("FUNCTION DUMP")
    };
    ok(on(1).cmd(&["FUNCTION", "FLUSH"]));
    same_libraries(&mut p, &mut r, &links, shards, "after FLUSH");
    assert_eq!(r.cmd(&["FUNCTION", "LIST"]), b"*0\r\n");
    assert_eq!(calls(&mut r, "function|flush"), 1);

    let restore: [&[u8]; 3] = [b"FUNCTION", b"RESTORE", &dump];
    assert_eq!(on(0).cmd(&restore), b"+OK\r\n");
    ok(on(1).cmd(&["FUNCTION", "LOAD", &library("three", "3")]));
    same_libraries(&mut p, &mut r, &links, shards, "after RESTORE");
    assert_eq!(calls(&mut r, "function|restore"), 1);
    assert_eq!(r.cmd(&["FCALL_RO", "three_f", "0"]), b":3\r\n");
}

#[test]
fn functions_reach_the_replica_2_shards() {
    if require_redis_server("functions_reach_the_replica_2_shards").is_none() {
        return;
    }
    functions_reach_the_replica(2);
}

#[test]
fn functions_reach_the_replica_4_shards() {
    if require_redis_server("functions_reach_the_replica_4_shards").is_none() {
        return;
    }
    functions_reach_the_replica(4);
}

/// Writers on every shard (keys of databases 0, 1 and 2, each client its
/// own) until `stop`; the count of writes each made.
fn writers(
    primary: &Server,
    clients: usize,
    stop: Arc<AtomicBool>,
) -> Vec<std::thread::JoinHandle<u64>> {
    (0..clients)
        .map(|t| {
            let mut c = primary.raw();
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut i = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    // A pipeline of writes to keys of every shard, three databases.
                    let mut batch = Vec::new();
                    for n in 0..16 {
                        let db = (n % 3).to_string();
                        batch.extend(encode(&["SELECT", &db]));
                        let key = format!("w:{t}:{}", (i + n) % 200);
                        batch.extend(encode(&["INCR", &key]));
                        batch.extend(encode(&[
                            "RPUSH",
                            &format!("l:{t}:{}", (i + n) % 50),
                            &i.to_string(),
                        ]));
                    }
                    c.send(&batch);
                    for _ in 0..48 {
                        let reply = c.read_reply();
                        assert!(!reply.starts_with(b"-"), "{}", show(&reply));
                    }
                    i += 16;
                }
                i
            })
        })
        .collect()
}

/// `attach_during`: the replica attaches while the flushes run (its full
/// sync's cut meets them: a cut that would hold a shard a barrier waits for
/// gives way, and the replica syncs again).
fn flushes_under_writes(shards: usize, attach_during: bool) {
    let primary = Server::ruvio(PortMode::Forward, shards);
    let mut p = primary.raw();
    fill(&mut p);
    let replica = match attach_during {
        true => Server::redis(),
        false => redis_replica(&primary),
    };
    let mut r = replica.raw();
    let (flushdb_before, flushall_before, swapdb_before) = (
        calls(&mut r, "flushdb"),
        calls(&mut r, "flushall"),
        calls(&mut r, "swapdb"),
    );

    let stop = Arc::new(AtomicBool::new(false));
    let threads = writers(&primary, 2 * shards, stop.clone());
    let mut admin = primary.raw();
    let (mut flushdbs, mut swapdbs) = (0, 0);
    for round in 0..60 {
        std::thread::sleep(Duration::from_millis(3));
        if attach_during && round == 5 {
            let port = primary.port().to_string();
            assert_eq!(r.cmd(&["REPLICAOF", "127.0.0.1", &port]), b"+OK\r\n");
        }
        let reply = match round % 3 {
            0 => {
                // A database empty on every shard: Redis replicates its
                // FLUSHDB too.
                flushdbs += 2;
                admin.cmd(&["SELECT", "5"]);
                assert_eq!(admin.cmd(&["FLUSHDB"]), b"+OK\r\n");
                admin.cmd(&["SELECT", "1"]);
                admin.cmd(&["FLUSHDB"])
            }
            1 => {
                flushdbs += 1;
                admin.cmd(&["SELECT", if round % 2 == 0 { "1" } else { "2" }]);
                admin.cmd(&["FLUSHDB"])
            }
            _ => {
                swapdbs += 1;
                admin.cmd(&["SWAPDB", "1", "2"])
            }
        };
        assert_eq!(reply, b"+OK\r\n", "round {round}");
    }
    // A FLUSHALL amid the writes, and writes after it.
    assert_eq!(admin.cmd(&["FLUSHALL"]), b"+OK\r\n");
    std::thread::sleep(Duration::from_millis(50));
    stop.store(true, Ordering::Relaxed);
    let written: u64 = threads.into_iter().map(|t| t.join().expect("writer")).sum();
    assert!(written > 0);

    if attach_during {
        wait_for("the replica online", || {
            info_field(&mut p, "replication", "slave0").contains("state=online")
        });
    }
    caught_up(&mut p);
    compare_all(&primary, &replica, "after flushes under writes");
    if attach_during {
        // Which flushes came before its full sync depends on when it cut.
        return;
    }
    assert_eq!(
        calls(&mut r, "flushdb") - flushdb_before,
        flushdbs,
        "each FLUSHDB once"
    );
    assert_eq!(
        calls(&mut r, "swapdb") - swapdb_before,
        swapdbs,
        "each SWAPDB once"
    );
    assert_eq!(
        calls(&mut r, "flushall") - flushall_before,
        1,
        "FLUSHALL once"
    );
}

#[test]
fn flushes_under_writes_2_shards() {
    if require_redis_server("flushes_under_writes_2_shards").is_none() {
        return;
    }
    flushes_under_writes(2, false);
}

#[test]
fn flushes_under_writes_4_shards() {
    if require_redis_server("flushes_under_writes_4_shards").is_none() {
        return;
    }
    flushes_under_writes(4, false);
}

#[test]
fn a_full_sync_amid_flushes_2_shards() {
    if require_redis_server("a_full_sync_amid_flushes_2_shards").is_none() {
        return;
    }
    flushes_under_writes(2, true);
}

#[test]
fn a_full_sync_amid_flushes_4_shards() {
    if require_redis_server("a_full_sync_amid_flushes_4_shards").is_none() {
        return;
    }
    flushes_under_writes(4, true);
}

/// A transaction (and a script) run by shard 0 on keys it borrowed while shard
/// 0 has cut for a full sync and shard 1 has not (its BGSAVE runs, slowed
/// down): the record of shard 1's key must stand before shard 1's later write
/// of it, not be held with shard 0's records until the cut ends (before the
/// fix the replica ended with the group's value). docs/replication.md, "A
/// cross-shard group during the cut".
#[test]
fn a_cross_shard_group_during_a_cut_keeps_its_place() {
    if require_redis_server("a_cross_shard_group_during_a_cut_keeps_its_place").is_none() {
        return;
    }
    group_during_a_cut(2);
}

/// The same with 4 shards, and a key of shard 2, which has cut like shard 0:
/// both hold their records until shard 1 cuts and release them in either
/// order, so shard 2's later write must not be released before the record of
/// the transaction's write there.
#[test]
fn a_cross_shard_group_during_a_cut_keeps_its_place_4_shards() {
    if require_redis_server("a_cross_shard_group_during_a_cut_keeps_its_place_4_shards").is_none() {
        return;
    }
    group_during_a_cut(4);
}

fn group_during_a_cut(shards: usize) {
    let dir = std::env::temp_dir().join(format!("ruvio-order-cut-{shards}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let primary = Server::ruvio_with_env(
        PortMode::Forward,
        shards,
        &["--dir", dir.to_str().unwrap(), "--durability", "everysec"],
        &[("RUVIO_SNAPSHOT_SLICE_KEYS", "4")],
    );
    let tag = |shard| hash_tag_on_shard(shard, shards);
    let (tag0, tag1) = (tag(0), tag(1));
    let (a, b) = (format!("{{{tag0}}}a"), format!("{{{tag1}}}b"));
    // With 4 shards, a key of a shard that cuts at once as shard 0 does.
    let c = (shards > 2).then(|| format!("{{{}}}c", tag(2)));
    let mut p = primary.raw();
    // Shard 1's BGSAVE takes thousands of loop iterations, the others' one.
    let mut batch = Vec::new();
    for i in 0..40_000 {
        batch.extend(encode(&["SET", &format!("{{{tag1}}}k{i}"), "v"]));
    }
    p.send(&batch);
    for _ in 0..40_000 {
        assert_eq!(p.read_reply(), b"+OK\r\n");
    }
    assert_eq!(p.cmd(&["SET", &b, "v0"]), b"+OK\r\n");
    assert_eq!(p.cmd(&["BGSAVE"]), b"+Background saving started\r\n");
    let replica = Server::redis();
    let mut r = replica.raw();
    let port = primary.port().to_string();
    assert_eq!(r.cmd(&["REPLICAOF", "127.0.0.1", &port]), b"+OK\r\n");
    wait_for("the full sync asked for", || {
        info_field(&mut p, "replication", "slave0").contains("state=wait_bgsave")
    });
    std::thread::sleep(Duration::from_millis(20));
    // Shard 0 (and 2, 3) has cut, shard 1 (still saving) has not.
    assert_eq!(
        info_field(&mut p, "persistence", "rdb_bgsave_in_progress"),
        "1"
    );
    let mut c0 = conn_on_shard(&primary, 0);
    c0.cmd(&["MULTI"]);
    let mut keys = vec![a.clone(), b.clone()];
    keys.extend(c.clone());
    for key in &keys {
        assert_eq!(c0.cmd(&["SET", key, "v1"]), b"+QUEUED\r\n");
    }
    let replies = format!("*{}\r\n{}", keys.len(), "+OK\r\n".repeat(keys.len()));
    assert_eq!(c0.cmd(&["EXEC"]), replies.as_bytes());
    assert_eq!(p.cmd(&["SET", &b, "v2"]), b"+OK\r\n");
    if let Some(c) = &c {
        assert_eq!(p.cmd(&["SET", c, "v2"]), b"+OK\r\n");
    }
    // A script on keys of shards 0 and 1, run by shard 0, the same way.
    let (s, t) = (format!("{{{tag0}}}s"), format!("{{{tag1}}}t"));
    let script = "redis.call('SET', KEYS[1], 'v1') return redis.call('SET', KEYS[2], 'v1')";
    assert_eq!(c0.cmd(&["EVAL", script, "2", &s, &t]), b"+OK\r\n");
    assert_eq!(p.cmd(&["SET", &t, "v2"]), b"+OK\r\n");
    assert_eq!(
        info_field(&mut p, "persistence", "rdb_bgsave_in_progress"),
        "1",
        "the writes ran during the cut"
    );
    wait_for("the replica online", || {
        info_field(&mut p, "replication", "slave0").contains("state=online")
    });
    caught_up(&mut p);
    let mut want = vec![(a.as_str(), "v1"), (&s, "v1"), (&t, "v2"), (&b, "v2")];
    want.extend(c.as_deref().map(|c| (c, "v2")));
    same_strings_on_both(&mut p, &mut r, &want);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A transaction run by shard 1 on a key it borrowed from shard 0 while a
/// FLUSHDB (of another database) has run on shards 0 and 1 and not on shard 2
/// (asleep in DEBUG SLEEP): shards 0 and 1 hold their records behind the
/// barrier, and once shard 2 passes it they are released shard by shard, so
/// shard 0's later APPEND to the key would stand before the transaction's
/// record of it (before the fix the replica ended without the APPEND). The
/// same with a script declaring the keys, and one reaching a key it did not
/// declare.
/// docs/replication.md, "A cross-shard group at a barrier".
#[test]
fn a_cross_shard_group_at_a_barrier_keeps_its_place() {
    if require_redis_server("a_cross_shard_group_at_a_barrier_keeps_its_place").is_none() {
        return;
    }
    let shards = 3;
    let primary = Server::ruvio(PortMode::Forward, shards);
    let replica = redis_replica(&primary);
    let mut p = primary.raw();
    let mut r = replica.raw();
    let tag = |shard| hash_tag_on_shard(shard, shards);
    // Connections first: a new one may land on shard 2 while it sleeps.
    let (mut flusher, mut c1) = (conn_on_shard(&primary, 1), conn_on_shard(&primary, 1));
    let mut c0 = conn_on_shard(&primary, 0);
    let mut sleeper = conn_on_shard(&primary, 2);
    assert_eq!(flusher.cmd(&["SELECT", "5"]), b"+OK\r\n");
    let mut want = Vec::new();
    // A loaded machine may run the writes after shard 2 woke (then they show
    // nothing): up to 3 attempts, one of which must have run them in time.
    let shown = (0..3).any(|attempt| {
        let key = |name: &str, shard| format!("{{{}}}{name}{attempt}", tag(shard));
        // Shard 2 sleeps; shard 1 runs a FLUSHDB, which shard 0 runs at once
        // and shard 2 when it wakes (its reply waits until then).
        let started = std::time::Instant::now();
        sleeper.send(&encode(&["DEBUG", "SLEEP", "1"]));
        std::thread::sleep(Duration::from_millis(100));
        flusher.send(&encode(&["FLUSHDB"]));
        std::thread::sleep(Duration::from_millis(50));
        let (a, b) = (key("a", 1), key("b", 0));
        assert_eq!(c1.cmd(&["MULTI"]), b"+OK\r\n");
        assert_eq!(c1.cmd(&["SET", &a, "v1"]), b"+QUEUED\r\n");
        assert_eq!(c1.cmd(&["SET", &b, "v1"]), b"+QUEUED\r\n");
        assert_eq!(c1.cmd(&["EXEC"]), b"*2\r\n+OK\r\n+OK\r\n");
        assert_eq!(c0.cmd(&["APPEND", &b, "x"]), b":3\r\n");
        // A script on keys of shards 1 and 0, run by shard 1, the same way.
        let (s, t) = (key("s", 1), key("t", 0));
        let script = "redis.call('SET', KEYS[1], 'v1') return redis.call('SET', KEYS[2], 'v1')";
        assert_eq!(c1.cmd(&["EVAL", script, "2", &s, &t]), b"+OK\r\n");
        assert_eq!(c0.cmd(&["APPEND", &t, "x"]), b":3\r\n");
        // A script reaching a key of shard 0 it did not declare (the script lock).
        let (u, w) = (key("u", 1), key("w", 0));
        let script = "redis.call('SET', KEYS[1], 'v1') return redis.call('SET', ARGV[1], 'v1')";
        assert_eq!(c1.cmd(&["EVAL", script, "1", &u, &w]), b"+OK\r\n");
        assert_eq!(c0.cmd(&["APPEND", &w, "x"]), b":3\r\n");
        let written = started.elapsed();
        assert_eq!(flusher.read_reply(), b"+OK\r\n");
        let flushed = started.elapsed();
        assert_eq!(sleeper.read_reply(), b"+OK\r\n");
        for (key, value) in [
            (a, "v1"),
            (b, "v1x"),
            (s, "v1"),
            (t, "v1x"),
            (u, "v1"),
            (w, "v1x"),
        ] {
            want.push((key, value));
        }
        // The FLUSHDB waited for shard 2's sleep, and the writes were done
        // before it woke: they ran while the barrier was open.
        flushed >= Duration::from_millis(900) && written < Duration::from_millis(900)
    });
    assert!(shown, "no attempt ran the writes while shard 2 slept");
    caught_up(&mut p);
    let want: Vec<(&str, &str)> = want.iter().map(|(k, v)| (k.as_str(), *v)).collect();
    same_strings_on_both(&mut p, &mut r, &want);
}

/// A FLUSHDB inside a transaction on shard 0 while shard 1 runs
/// transactions of its own: the redis-server replica ends with the
/// primary's data, its log without an error. Before f4d118ce shard 1's part
/// of each FLUSHDB was not recorded and the stream waited 2 s for each
/// barrier (the WAIT timed out). The order within (shard 1's records from
/// before its part went between the transaction's MULTI and the FLUSHDB when
/// shard 0 appended first: `MULTI calls can not be nested` on the replica)
/// is shown by `barrier_tests::a_flush_inside_a_transaction_keeps_the_transaction_whole`:
/// here shard 0 waits for shard 1's part, so shard 1 nearly always appends first.
/// Then transactions with a FLUSHDB and a SWAPDB each.
#[test]
fn a_flush_inside_a_transaction_reaches_a_redis_replica_whole() {
    if require_redis_server("a_flush_inside_a_transaction_reaches_a_redis_replica_whole").is_none()
    {
        return;
    }
    let primary = Server::ruvio(PortMode::Forward, 2);
    let replica = redis_replica(&primary);
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (stop, mut c1) = (stop.clone(), conn_on_shard(&primary, 1));
        let (k, n) = (key_on_shard("k:", 1, 2), key_on_shard("n:", 1, 2));
        std::thread::spawn(move || {
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                c1.cmd(&["MULTI"]);
                c1.cmd(&["SET", &k, &i.to_string()]);
                c1.cmd(&["INCR", &n]);
                let exec = c1.cmd(&["EXEC"]);
                assert!(exec.starts_with(b"*2"), "{}", show(&exec));
                i += 1;
            }
            i
        })
    };
    let mut c0 = conn_on_shard(&primary, 0);
    let (x, f) = (key_on_shard("x:", 0, 2), key_on_shard("f:", 0, 2));
    for i in 0..100 {
        assert_eq!(c0.cmd(&["MULTI"]), b"+OK\r\n");
        c0.cmd(&["SET", &x, &i.to_string()]);
        c0.cmd(&["FLUSHDB"]);
        c0.cmd(&["SET", &f, &i.to_string()]);
        let exec = c0.cmd(&["EXEC"]);
        assert!(exec.starts_with(b"*3"), "{}", show(&exec));
    }
    // Two barriers in one transaction: shard 1 may run its own clients'
    // transactions between its parts of them, which go between the
    // transaction's two parts (`Feed::split_group_at`).
    let g = key_on_shard("g:", 0, 2);
    for i in 0..100 {
        assert_eq!(c0.cmd(&["MULTI"]), b"+OK\r\n");
        c0.cmd(&["SET", &x, &i.to_string()]);
        c0.cmd(&["FLUSHDB"]);
        c0.cmd(&["SET", &f, &i.to_string()]);
        c0.cmd(&["SWAPDB", "0", "1"]);
        c0.cmd(&["SET", &g, &i.to_string()]);
        let exec = c0.cmd(&["EXEC"]);
        assert!(exec.starts_with(b"*5"), "{}", show(&exec));
    }
    stop.store(true, Ordering::Relaxed);
    let rounds = writer.join().expect("the writer on shard 1");
    assert!(rounds > 0);
    caught_up(&mut c0);
    compare_all(&primary, &replica, "after the flushes in transactions");
    let logs = replica.full_logs();
    assert!(!logs.contains("CRITICAL"), "{}", replica.logs());
}
