//! A replica with a log (`--durability everysec`): the full sync's data becomes
//! each shard's snapshot, the stream goes to each shard's log with marks of its
//! offset, and after SIGKILL or SHUTDOWN the replica recovers its data and asks
//! `PSYNC <stored replid> <stored offset + 1>`: the primary answers `+CONTINUE`
//! (its INFO stats `sync_partial_ok` rises, `sync_full` does not) and every key
//! ends as the primary's, INCR counters included (no command applied twice or
//! skipped). A primary that cannot continue (a new one, with a new replid) gets
//! a full sync, which replaces the data. WAITAOF on a Ruvio primary counts a
//! replica with a log (`REPLCONF ACK <offset> FACK <offset>`).
//! docs/replication.md, "A replica with a log".

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::replication::*;
use common::*;

fn data_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ruvio-replica-log-{}-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// A Ruvio replica with an `everysec` log in `dir` (`--replicaof` when
/// `primary` is given).
fn replica(shards: usize, dir: &Path, primary: Option<&Server>) -> Server {
    replica_with(shards, dir, primary, "everysec")
}

fn replica_with(shards: usize, dir: &Path, primary: Option<&Server>, durability: &str) -> Server {
    replica_at(shards, dir, primary.map(Server::port), durability)
}

/// [`replica_with`] for a primary on `port` of 127.0.0.1.
fn replica_at(shards: usize, dir: &Path, port: Option<u16>, durability: &str) -> Server {
    replica_args(shards, dir, port, durability, &[])
}

/// [`replica_at`] with `extra` arguments.
fn replica_args(
    shards: usize,
    dir: &Path,
    port: Option<u16>,
    durability: &str,
    extra: &[&str],
) -> Server {
    let dir = dir.to_str().unwrap();
    let port = port.map(|p| p.to_string());
    let mut args = vec!["--durability", durability, "--dir", dir];
    if let Some(port) = &port {
        args.extend(["--replicaof", "127.0.0.1", port]);
    }
    args.extend(extra);
    Server::ruvio_with(PortMode::Forward, shards, &args)
}

/// The replica applied every byte the primary sent.
fn caught_up(primary: &Server, replica: &Server) {
    let (mut p, mut r) = (primary.raw(), replica.raw());
    wait_for("the replica caught up", || {
        field(&mut r, "master_link_status") == "up"
            && field(&mut r, "slave_repl_offset") == field(&mut p, "master_repl_offset")
    });
}

/// Writes whose repetition or loss shows: counters, list pushes, a database
/// other than 0 (the stream stays in it: a continuation must go on there).
fn write_round(primary: &Server, round: usize) {
    let mut p = primary.raw();
    for i in 0..40 {
        let key = format!("counter:{}", i % 7);
        assert!(p.cmd(&["INCR", &key]).starts_with(b":"));
        let list = format!("list:{}", i % 5);
        assert!(p
            .cmd(&["RPUSH", &list, &format!("r{round}-{i}")])
            .starts_with(b":"));
        assert_eq!(
            p.cmd(&["SET", &format!("round{round}:{i}"), "v", "EX", "1000"]),
            b"+OK\r\n"
        );
    }
    assert!(p
        .cmd(&["HINCRBY", "hash", &format!("r{round}"), "1"])
        .starts_with(b":"));
    assert_eq!(p.cmd(&["SELECT", "3"]), b"+OK\r\n");
    assert!(p.cmd(&["INCRBY", "three:counter", "5"]).starts_with(b":"));
    assert!(p
        .cmd(&["LPUSH", "three:list", &format!("r{round}")])
        .starts_with(b":"));
}

/// WAIT 1 on the primary, then more than a second for `everysec` to fsync.
fn acknowledged_and_synced(primary: &Server) {
    assert_eq!(wait_all(&mut primary.raw(), "1", "5000"), b":1\r\n");
    std::thread::sleep(Duration::from_millis(1500));
}

/// Write, SIGKILL the replica, write more, restart it: it continues.
fn continues_after_sigkill(primary: &Server, shards: usize, tag: &str) {
    continues_after_sigkill_with(primary, shards, tag, "everysec");
}

fn continues_after_sigkill_with(primary: &Server, shards: usize, tag: &str, durability: &str) {
    continues_after_sigkill_on(primary, (shards, 1, &[]), tag, durability, &|_| {});
}

/// [`continues_after_sigkill_with`] for a replica of `shards` started with
/// `extra` arguments, which continues with `psyncs` partial resyncs (one per
/// shard link, or the single stream's one), `more` writing after each round.
fn continues_after_sigkill_on(
    primary: &Server,
    (shards, psyncs, extra): (usize, u64, &[&str]),
    tag: &str,
    durability: &str,
    more: &dyn Fn(usize),
) {
    let dir = data_dir(tag);
    let port = primary.port();
    let replica = |shards, dir: &Path, _: Option<&Server>| {
        replica_args(shards, dir, Some(port), durability, extra)
    };
    let write_round = |primary: &Server, round: usize| {
        write_round(primary, round);
        more(round);
    };
    let first = replica(shards, &dir, Some(primary));
    caught_up(primary, &first);
    compare_all(primary, &first, "after the full sync");
    write_round(primary, 1);
    caught_up(primary, &first);
    acknowledged_and_synced(primary);
    // The last writes before the kill are `more`'s, and no WAIT's GETACK
    // follows them in the stream (a new input, so a new mark, behind them).
    more(10);
    caught_up(primary, &first);
    std::thread::sleep(Duration::from_millis(100));
    let (full, partial) = sync_counts(&mut primary.raw());
    drop(first); // SIGKILL
                 // Written while the replica is down: the primary's backlog keeps them.
    write_round(primary, 2);
    let second = replica(shards, &dir, Some(primary));
    caught_up(primary, &second);
    assert_eq!(
        sync_counts(&mut primary.raw()),
        (full, partial + psyncs),
        "(sync_full, sync_partial_ok): a partial resync, no full sync; log:\n{}",
        second.logs()
    );
    assert!(second.logs().contains("asking to continue from there"));
    // The stream went on in database 3 without a SELECT.
    write_round(primary, 3);
    caught_up(primary, &second);
    compare_all(primary, &second, "after the restart");
    // Its own log took the stream again, and a BGSAVE dropped the log before
    // its snapshot (which carries the place in the stream): a second kill and
    // restart continues too.
    acknowledged_and_synced(primary);
    bgsave(&second);
    drop(second);
    write_round(primary, 4);
    let third = replica(shards, &dir, Some(primary));
    caught_up(primary, &third);
    assert_eq!(
        sync_counts(&mut primary.raw()),
        (full, partial + 2 * psyncs),
        "log:\n{}",
        third.logs()
    );
    compare_all(primary, &third, "after the second restart");
    drop(third);
    let _ = std::fs::remove_dir_all(&dir);
}

/// BGSAVE on the replica, waited for.
fn bgsave(replica: &Server) {
    let mut r = replica.raw();
    assert_eq!(r.cmd(&["BGSAVE"]), b"+Background saving started\r\n");
    wait_for("the BGSAVE", || {
        let info = decode(&r.cmd(&["INFO", "persistence"])).text();
        info.contains("rdb_bgsave_in_progress:0") && info.contains("rdb_last_bgsave_status:ok")
    });
}

fn redis_primary() -> Option<Server> {
    require_redis_server("replica_log")?;
    let primary = Server::redis();
    let mut p = primary.raw();
    assert_eq!(
        p.cmd(&["CONFIG", "SET", "repl-diskless-sync-delay", "0"]),
        b"+OK\r\n"
    );
    fill(&mut p);
    Some(primary)
}

#[test]
fn one_shard_continues_from_its_log_with_a_redis_primary() {
    let Some(primary) = redis_primary() else {
        return;
    };
    continues_after_sigkill(&primary, 1, "redis1");
}

#[test]
fn two_shards_continue_from_their_logs_with_a_redis_primary() {
    let Some(primary) = redis_primary() else {
        return;
    };
    continues_after_sigkill(&primary, 2, "redis2");
}

#[test]
fn always_continues_too() {
    let Some(primary) = redis_primary() else {
        return;
    };
    continues_after_sigkill_with(&primary, 2, "always2", "always");
}

/// Shard 1's last log segment cut at `cut(segment bytes)`, as a crash that
/// kept less of shard 1's log than of shard 0's (a torn tail).
fn cut_shard_1(dir: &Path, cut: impl Fn(&[u8]) -> usize) {
    let shard1 = dir.join("shard-1");
    let mut segments: Vec<PathBuf> = std::fs::read_dir(&shard1)
        .expect("shard 1's directory")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "log"))
        .collect();
    segments.sort();
    let last = segments.last().expect("a segment");
    let bytes = std::fs::read(last).expect("the segment");
    let at = cut(&bytes);
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(last)
        .expect("open the segment");
    file.set_len(at as u64).expect("cut the segment");
}

fn last_at(bytes: &[u8], what: &str) -> usize {
    bytes
        .windows(what.len())
        .rposition(|w| w == what.as_bytes())
        .unwrap_or_else(|| panic!("{what} is in shard 1's log"))
}

/// Two shards whose logs end at different places, written one way or another
/// by `last_writes` and `cut` (see the tests): after the restart the replica
/// ends with the primary's data, the primary's `sync_full` and
/// `sync_partial_ok` having risen by the two counts given, and its log says
/// why (`said`).
fn shards_apart(
    tag: &str,
    last_writes: &dyn Fn(&mut RawConn, &str, &str),
    cut: &dyn Fn(&[u8], &str) -> usize,
    (full_more, partial_more): (u64, u64),
    said: &str,
) {
    let Some(primary) = redis_primary() else {
        return;
    };
    let dir = data_dir(tag);
    let first = replica(2, &dir, Some(&primary));
    caught_up(&primary, &first);
    write_round(&primary, 1);
    let (on0, on1) = (key_on_shard("last", 0, 2), key_on_shard("last", 1, 2));
    // The last writes reach the replica after the round's (and its marks).
    assert_eq!(wait_all(&mut primary.raw(), "1", "5000"), b":1\r\n");
    last_writes(&mut primary.raw(), &on0, &on1);
    caught_up(&primary, &first);
    acknowledged_and_synced(&primary);
    let (full, partial) = sync_counts(&mut primary.raw());
    drop(first); // SIGKILL
    cut_shard_1(&dir, |bytes| cut(bytes, &on1));
    write_round(&primary, 2);
    let second = replica(2, &dir, Some(&primary));
    caught_up(&primary, &second);
    let want = (full + full_more, partial + partial_more);
    let logs = second.logs();
    assert_eq!(
        sync_counts(&mut primary.raw()),
        want,
        "(sync_full, sync_partial_ok); log:\n{logs}"
    );
    assert!(logs.contains(said), "{logs}");
    compare_all(&primary, &second, "after the restart");
    drop(second);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Where a mark record whose name starts at `name_at` ends: the record is
/// `length u32 | crc u32 | kind 1 | db 0 | argument count (5 bytes) | name
/// length 17 | name ...` (crates/ruvio-wal/src/frame.rs).
fn mark_record_end(bytes: &[u8], name_at: usize) -> usize {
    let start = name_at - 16;
    let len = u32::from_le_bytes(bytes[start..start + 4].try_into().unwrap());
    start + 8 + len as usize
}

/// Right after the last mark before shard 1's last write to `on1`.
fn mark_before(bytes: &[u8], on1: &str) -> usize {
    let write = last_at(bytes, on1);
    let mark = bytes[..write]
        .windows(b"ruvio:stream-mark".len())
        .rposition(|w| w == b"ruvio:stream-mark")
        .expect("a mark before the write");
    mark_record_end(bytes, mark)
}

/// Shard 1's log ends right after a mark that precedes its last INCR (the
/// records after it lost), while shard 0's holds its writes after that mark and
/// a later INCR: the replica continues from shard 1's place, shard 1 runs the
/// re-sent commands it lacks, shard 0 skips the ones it holds (every counter
/// once: no full sync).
#[test]
fn shards_apart_catch_up_each_from_its_own_place() {
    shards_apart(
        "catch-up",
        &|p, on0, on1| {
            assert_eq!(p.cmd(&["INCR", on1]), b":1\r\n");
            assert_eq!(p.cmd(&["WAIT", "1", "5000"]), b":1\r\n");
            assert_eq!(p.cmd(&["INCR", on0]), b":1\r\n");
            assert_eq!(p.cmd(&["WAIT", "1", "5000"]), b":1\r\n");
        },
        &mark_before,
        (0, 1),
        "skipping what it holds",
    );
}

/// The same, but the lost write is shard 1's part of an MSET whose shard 0
/// part is in shard 0's log: one command that one shard holds and the other
/// lacks is not run on one only: a full sync, and the primary's data.
#[test]
fn a_split_write_held_by_one_shard_only_means_a_full_sync() {
    shards_apart(
        "split",
        &|p, on0, on1| assert_eq!(p.cmd(&["MSET", on0, "1", on1, "1"]), b"+OK\r\n"),
        &mark_before,
        // The continuation is accepted, then given up for a full sync.
        (1, 1),
        "touches shards that hold it and shards that lack it",
    );
}

/// Shard 1's log ends after its last write but before the mark that follows
/// it (cut inside the mark): which commands of that loop iteration it ran is
/// not known: a full sync.
#[test]
fn records_after_the_last_mark_mean_a_full_sync() {
    shards_apart(
        "unmarked",
        &|p, _, on1| assert_eq!(p.cmd(&["INCR", on1]), b":1\r\n"),
        &|bytes, on1| {
            let write = last_at(bytes, on1);
            let mark = bytes[write..]
                .windows(b"ruvio:stream-mark".len())
                .position(|w| w == b"ruvio:stream-mark")
                .expect("a mark after the write");
            write + mark
        },
        (1, 0),
        "do not meet",
    );
}

/// A Ruvio replica of a Ruvio primary of its shard count follows it on
/// shard links, a log or not (`everysec` and `always`): each shard's log
/// marks its own link's place,
/// and after a SIGKILL every link continues (one partial resync each), with
/// transactions, scripts and multi-key writes over both shards among the
/// writes (ordered on the links by barriers). With the links off the single
/// stream continues as one, the same writes among its own: the marks go again
/// once the stream is at rest, behind the records a group's keys logged when
/// they went home (a log that ended on them meant a full sync), and under
/// `always` the master client's replies stay unsent (a write's gate that
/// opened at once let its reply reach the primary, which dropped the link on
/// it). With another shard count, the single stream too.
#[test]
fn replicas_continue_from_their_logs_with_a_ruvio_primary() {
    let primary = Server::ruvio(PortMode::Forward, 2);
    fill(&mut primary.raw());
    let spread = |round: usize| cross_shard_round(&primary, round);
    continues_after_sigkill_on(
        &primary,
        (2, 2, &["--replica-shard-links", "yes"]),
        "ruvio2-links",
        "everysec",
        &spread,
    );
    continues_after_sigkill_on(
        &primary,
        (2, 2, &["--replica-shard-links", "yes"]),
        "ruvio2-links-always",
        "always",
        &spread,
    );
    for durability in ["everysec", "always"] {
        continues_after_sigkill_on(
            &primary,
            (2, 1, &["--replica-shard-links", "no"]),
            &format!("ruvio2-{durability}"),
            durability,
            &spread,
        );
    }
    continues_after_sigkill(&primary, 1, "ruvio1");
}

/// Writes over keys of both shards of a 2-shard Ruvio primary whose
/// repetition or loss shows: a transaction of two INCRs, a script pushing
/// to a list of each shard, an MSET and a RENAME across shards.
fn cross_shard_round(primary: &Server, round: usize) {
    let mut p = primary.raw();
    let (a, b) = (key_on_shard("spread", 0, 2), key_on_shard("spread", 1, 2));
    let (la, lb) = (format!("{a}:list"), format!("{b}:list"));
    for i in 0..10 {
        assert_eq!(p.cmd(&["MULTI"]), b"+OK\r\n");
        assert_eq!(p.cmd(&["INCR", &a]), b"+QUEUED\r\n");
        assert_eq!(p.cmd(&["INCRBY", &b, "2"]), b"+QUEUED\r\n");
        assert!(p.cmd(&["EXEC"]).starts_with(b"*2\r\n:"));
        let script =
            "redis.call('RPUSH', KEYS[1], ARGV[1]); return redis.call('RPUSH', KEYS[2], ARGV[1])";
        let value = format!("r{round}-{i}");
        assert!(p
            .cmd(&["EVAL", script, "2", &la, &lb, &value])
            .starts_with(b":"));
        let (ma, mb) = (format!("{a}:m{i}"), format!("{b}:m{i}"));
        assert_eq!(p.cmd(&["MSET", &ma, &value, &mb, &value]), b"+OK\r\n");
        assert_eq!(
            p.cmd(&["RENAME", &ma, &format!("{b}:moved{round}-{i}")]),
            b"+OK\r\n"
        );
    }
}

/// REPLICAOF at run time, SHUTDOWN, a start with `--replicaof`: the history in
/// the log continues. A start without it is a primary (clients may write), so a
/// later REPLICAOF gets a full sync. Then another primary (a new replid) cannot
/// continue the history: a full sync replaces the data, and that data (its
/// function libraries too) survives a SIGKILL and continues in its turn.
#[test]
fn a_new_primary_means_a_full_sync_that_lasts() {
    let Some(primary) = redis_primary() else {
        return;
    };
    let dir = data_dir("new-primary");
    let first = replica(2, &dir, None);
    follow(&first, &primary);
    caught_up(&primary, &first);
    write_round(&primary, 1);
    caught_up(&primary, &first);
    let (full, partial) = sync_counts(&mut primary.raw());
    let mut f = first.raw();
    // SHUTDOWN writes what the logs hold; the connection closes without a reply.
    f.send(&encode(&["SHUTDOWN"]));
    let mut first = first;
    assert_eq!(first.wait_exit(Duration::from_secs(10)), Some(0));
    drop(first);
    write_round(&primary, 2);
    let second = replica(2, &dir, Some(&primary));
    caught_up(&primary, &second);
    assert_eq!(sync_counts(&mut primary.raw()), (full, partial + 1));
    compare_all(&primary, &second, "after SHUTDOWN and a restart");
    acknowledged_and_synced(&primary);
    drop(second); // SIGKILL

    // Started as a primary: a write of its own, then REPLICAOF is a full sync.
    let second = replica(2, &dir, None);
    assert_eq!(second.raw().cmd(&["SET", "local", "1"]), b"+OK\r\n");
    follow(&second, &primary);
    caught_up(&primary, &second);
    assert_eq!(sync_counts(&mut primary.raw()), (full + 1, partial + 1));
    assert_eq!(second.raw().cmd(&["EXISTS", "local"]), b":0\r\n");
    compare_all(
        &primary,
        &second,
        "after a start as a primary and REPLICAOF",
    );

    // Another primary: its history is not the log's.
    let other = Server::redis();
    let mut o = other.raw();
    assert_eq!(
        o.cmd(&["CONFIG", "SET", "repl-diskless-sync-delay", "0"]),
        b"+OK\r\n"
    );
    assert_eq!(o.cmd(&["SET", "other", "1"]), b"+OK\r\n");
    let library = "#!lua name=otherlib\nredis.register_function('one', function() return 1 end)";
    assert_eq!(o.cmd(&["FUNCTION", "LOAD", library]), b"$8\r\notherlib\r\n");
    let port = other.port().to_string();
    assert_eq!(
        second.raw().cmd(&["REPLICAOF", "127.0.0.1", &port]),
        b"+OK\r\n"
    );
    caught_up(&other, &second);
    assert_eq!(sync_counts(&mut o), (1, 0));
    compare_all(&other, &second, "after the full sync from another primary");
    assert_eq!(second.raw().cmd(&["EXISTS", "counter:0"]), b":0\r\n");
    write_round(&other, 1);
    caught_up(&other, &second);
    acknowledged_and_synced(&other);
    drop(second); // SIGKILL
    write_round(&other, 2);
    let third = replica(2, &dir, Some(&other));
    caught_up(&other, &third);
    assert_eq!(sync_counts(&mut o), (1, 1), "log:\n{}", third.logs());
    compare_all(&other, &third, "after the restart on the full sync's data");
    // The full sync's libraries were kept with its data.
    let listed = third
        .raw()
        .cmd(&["FUNCTION", "LIST", "LIBRARYNAME", "otherlib"]);
    assert!(show(&listed).contains("otherlib"), "{}", show(&listed));
    drop(third);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A Ruvio primary's WAITAOF counts a Ruvio replica with a log (its FACK), and
/// not one without (Redis 7.0's ACK).
#[test]
fn waitaof_counts_a_replica_with_a_log() {
    let primary = Server::ruvio(PortMode::Forward, 2);
    let dir = data_dir("waitaof");
    let logged = replica(2, &dir, Some(&primary));
    let plain = Server::ruvio(PortMode::Forward, 1);
    follow(&plain, &primary);
    caught_up(&primary, &logged);
    let mut p = primary.raw();
    for i in 0..20 {
        assert_eq!(p.cmd(&["SET", &format!("k{i}"), "v"]), b"+OK\r\n");
    }
    // Both replicas acknowledge, only the one with a log fsyncs (within a second).
    assert_eq!(p.cmd(&["WAIT", "2", "5000"]), b":2\r\n");
    assert_eq!(p.cmd(&["WAITAOF", "0", "2", "3000"]), b"*2\r\n:0\r\n:1\r\n");
    assert_eq!(p.cmd(&["WAITAOF", "0", "1", "5000"]), b"*2\r\n:0\r\n:1\r\n");
    drop(logged);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Kills the process it holds when dropped (the test's own redis-server).
/// The primary restarted empty on its port while the replica was down: the
/// replica asks to continue its stored history (`PSYNC <old replid> <offset+1>`),
/// the new primary (a new replid) answers `+FULLRESYNC`, and the replica ends
/// with the new primary's data only; that full sync is durable in its turn
/// (SIGKILL, restart: `+CONTINUE`).
#[test]
fn a_primary_restarted_empty_means_a_full_sync() {
    let Some(bin) = require_redis_server("replica_log") else {
        return;
    };
    let Some(primary) = redis_primary() else {
        return;
    };
    let dir = data_dir("reborn");
    let first = replica(2, &dir, Some(&primary));
    caught_up(&primary, &first);
    write_round(&primary, 1);
    caught_up(&primary, &first);
    acknowledged_and_synced(&primary);
    drop(first); // SIGKILL
    let mut p = primary.raw();
    // No fork of the old primary may still hold its listening socket.
    wait_for("the primary's transfer child gone", || {
        let info = decode(&p.cmd(&["INFO", "persistence"])).text();
        info.contains("rdb_bgsave_in_progress:0")
    });
    let port = primary.port();
    drop(primary); // SIGKILL; its data is gone with it
    let reborn_dir = data_dir("reborn-primary");
    let (reborn, mut q) = redis_reborn(&bin, port, &reborn_dir);
    assert_eq!(q.cmd(&["SET", "fresh", "1"]), b"+OK\r\n");
    assert_eq!(q.cmd(&["INCR", "counter:0"]), b":1\r\n");

    let second = replica_at(2, &dir, Some(port), "everysec");
    let mut r = second.raw();
    wait_for("the new primary's data", || {
        field(&mut r, "master_link_status") == "up"
            && field(&mut r, "slave_repl_offset") == field(&mut q, "master_repl_offset")
    });
    let logs = second.logs();
    assert!(logs.contains("asking to continue from there"), "{logs}");
    assert_eq!(sync_counts(&mut q), (1, 0), "{logs}");
    assert_eq!(
        field(&mut r, "master_replid"),
        field(&mut q, "master_replid")
    );
    assert_eq!(r.cmd(&["GET", "fresh"]), b"$1\r\n1\r\n");
    assert_eq!(r.cmd(&["GET", "counter:0"]), b"$1\r\n1\r\n");
    assert_eq!(r.cmd(&["DBSIZE"]), b":2\r\n");
    for db in ["1", "2", "3"] {
        assert_eq!(r.cmd(&["SELECT", db]), b"+OK\r\n");
        assert_eq!(r.cmd(&["DBSIZE"]), b":0\r\n", "db {db}");
    }

    // The full sync's data lasts: SIGKILL, a write, restart, +CONTINUE.
    assert_eq!(q.cmd(&["WAIT", "1", "5000"]), b":1\r\n");
    std::thread::sleep(Duration::from_millis(1500));
    drop(second);
    assert_eq!(q.cmd(&["INCR", "counter:0"]), b":2\r\n");
    let third = replica_at(2, &dir, Some(port), "everysec");
    let mut r = third.raw();
    wait_for("the replica continued", || {
        field(&mut r, "master_link_status") == "up"
            && field(&mut r, "slave_repl_offset") == field(&mut q, "master_repl_offset")
    });
    assert_eq!(sync_counts(&mut q), (1, 1), "{}", third.logs());
    assert_eq!(r.cmd(&["GET", "counter:0"]), b"$1\r\n2\r\n");
    assert_eq!(r.cmd(&["DBSIZE"]), b":2\r\n");
    drop(third);
    drop(reborn);
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&reborn_dir);
}
