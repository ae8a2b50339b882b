//! `always` and writes across shards (docs/durability.md, docs/cross-shard.md).
//! Commands on borrowed keys: the keys' owners log their new state when they come
//! home, and the coordinator answers only once every owner has them on disk.
//! Split writes (MSET, DEL) and writes on every shard (FLUSHALL): the merged reply
//! waits for the part run on the client's shard too, not only for the forwarded
//! parts. The debug build's fault points make the disk slow: `wal:slow-write`
//! holds every log write 200 ms before it is submitted (a reply sent before the
//! owners' writes would come at once, and a SIGKILL right after it would lose the
//! write); `wal:slow-fsync-<shard>` starts that shard's fdatasyncs 200 ms late
//! while its loop goes on (a reply that does not wait for that shard's group comes
//! at once).

mod common;

use common::*;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The faults' hold on each log write or fsync (crates/ruvio-server/src/persistence/wal.rs),
/// less a margin for the clock.
const HELD_AT_LEAST: Duration = Duration::from_millis(180);

fn data_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ruvio-cross-shard-{}-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn start(shards: usize, dir: &Path, env: &[(&str, &str)]) -> Server {
    let dir = dir.to_str().unwrap();
    Server::ruvio_with_env(
        PortMode::Forward,
        shards,
        &["--dir", dir, "--durability", "always"],
        env,
    )
}

fn bulk(text: &str) -> Vec<u8> {
    format!("${}\r\n{text}\r\n", text.len()).into_bytes()
}

/// One cross-shard write: its setup, the command(s) timed, the final reply, and
/// the state it leaves (key, GET reply) after a restart.
struct Case {
    name: &'static str,
    setup: Vec<Vec<String>>,
    run: Vec<Vec<String>>,
    reply: Vec<u8>,
    /// `(db, key, GET's reply)` after a restart.
    after: Vec<(usize, String, Vec<u8>)>,
}

fn words(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

/// RENAME, MSETNX and EXEC on `a` and `b` (keys of two different shards).
fn cases(a: &str, b: &str) -> Vec<Case> {
    vec![
        Case {
            name: "RENAME",
            setup: vec![words(&["SET", a, "moved"])],
            run: vec![words(&["RENAME", a, b])],
            reply: b"+OK\r\n".to_vec(),
            after: vec![
                (0, a.into(), b"$-1\r\n".to_vec()),
                (0, b.into(), bulk("moved")),
            ],
        },
        Case {
            name: "MSETNX",
            setup: vec![],
            run: vec![words(&["MSETNX", a, "one", b, "two"])],
            reply: b":1\r\n".to_vec(),
            after: vec![(0, a.into(), bulk("one")), (0, b.into(), bulk("two"))],
        },
        Case {
            name: "EXEC",
            setup: vec![words(&["SET", a, "old"])],
            run: vec![
                words(&["MULTI"]),
                words(&["APPEND", a, "+new"]),
                words(&["SET", b, "set"]),
                words(&["EXEC"]),
            ],
            reply: b"*2\r\n:7\r\n+OK\r\n".to_vec(),
            after: vec![(0, a.into(), bulk("old+new")), (0, b.into(), bulk("set"))],
        },
        // After the SWAPDB, database 0 holds what was database 1's: the keys come
        // back into the database their own went to, logged there.
        Case {
            name: "EXEC-SWAPDB",
            setup: vec![
                words(&["SET", a, "zero"]),
                words(&["SELECT", "1"]),
                words(&["SET", b, "one"]),
                words(&["SELECT", "0"]),
            ],
            run: vec![
                words(&["MULTI"]),
                words(&["APPEND", a, "+x"]),
                words(&["SWAPDB", "0", "1"]),
                words(&["APPEND", b, "+y"]),
                words(&["EXEC"]),
            ],
            reply: b"*3\r\n:6\r\n+OK\r\n:5\r\n".to_vec(),
            after: vec![
                (0, a.into(), b"$-1\r\n".to_vec()),
                (0, b.into(), bulk("one+y")),
            ],
        },
        // A script borrows `b` after the swap, while the `b` borrowed before it is
        // still out: two keys of one name on loan, each logged in its database.
        Case {
            name: "EXEC-SWAPDB-EVAL",
            setup: vec![
                words(&["SET", a, "zero"]),
                words(&["SET", b, "b0"]),
                words(&["SELECT", "1"]),
                words(&["SET", b, "one"]),
                words(&["SELECT", "0"]),
            ],
            run: vec![
                words(&["MULTI"]),
                words(&["APPEND", a, "+x"]),
                words(&["APPEND", b, "+z"]),
                words(&["SWAPDB", "0", "1"]),
                words(&["EVAL", "return redis.call('APPEND', ARGV[1], '+y')", "0", b]),
                words(&["EXEC"]),
            ],
            reply: b"*4\r\n:6\r\n:4\r\n+OK\r\n:5\r\n".to_vec(),
            after: vec![
                (0, a.into(), b"$-1\r\n".to_vec()),
                (0, b.into(), bulk("one+y")),
                (1, a.into(), bulk("zero+x")),
                (1, b.into(), bulk("b0+z")),
            ],
        },
    ]
}

/// Under `always`, with the owners' log writes held back, a RENAME / MSETNX /
/// EXEC (with a SWAPDB too, and a script) on keys of two shards is answered only
/// after those writes (it takes the hold at least), and a SIGKILL sent right after the answer loses nothing: with
/// 2 shards (the coordinator owns one key) and with 3 (the coordinator owns none
/// and logs nothing itself, so only the owners' acknowledgements hold the reply).
#[test]
fn always_answers_borrowed_writes_once_their_owners_have_them_on_disk() {
    for shards in [2, 3] {
        let a = key_on_shard("a", shards - 2, shards);
        let b = key_on_shard("b", shards - 1, shards);
        for case in cases(&a, &b) {
            let tag = format!("{}-{shards}", case.name);
            let dir = data_dir(&tag);
            let server = start(shards, &dir, &[("RUVIO_FAULT", "wal:slow-write")]);
            let mut c = conn_on_shard(&server, 0);
            for command in &case.setup {
                assert_eq!(c.cmd(command), b"+OK\r\n", "{tag}");
            }
            let (last, queued) = case.run.split_last().unwrap();
            for command in queued {
                c.cmd(command);
            }
            let sent = Instant::now();
            assert_eq!(c.cmd(last), case.reply, "{tag}");
            let took = sent.elapsed();
            drop(server); // SIGKILL at once
            assert!(
                took >= HELD_AT_LEAST,
                "{tag}: answered after {took:?}, before the owners' log writes"
            );
            let server = start(shards, &dir, &[]);
            let mut c = server.raw();
            for (db, key, value) in &case.after {
                assert_eq!(c.cmd(&["SELECT", &db.to_string()]), b"+OK\r\n");
                assert_eq!(c.cmd(&["GET", key]), *value, "{tag}: {key} in {db}");
            }
            drop(server);
            let _ = std::fs::remove_dir_all(&dir);
        }
    }
}

/// Reads and writes that change nothing are not held: a cross-shard command that
/// logged nothing (RENAMENX onto an existing key, an LMOVE from an empty list)
/// answers without waiting for any log write.
#[test]
fn always_answers_borrowed_commands_that_wrote_nothing_at_once() {
    let shards = 3;
    let a = key_on_shard("a", 1, shards);
    let b = key_on_shard("b", 2, shards);
    let empty = key_on_shard("empty", 1, shards);
    let dir = data_dir("nothing");
    let server = start(shards, &dir, &[("RUVIO_FAULT", "wal:slow-write")]);
    let mut c = conn_on_shard(&server, 0);
    assert_eq!(c.cmd(&["MSET", &a, "1", &b, "2"]), b"+OK\r\n");
    for (command, reply) in [
        (words(&["RENAMENX", &a, &b]), &b":0\r\n"[..]),
        (words(&["LMOVE", &empty, &b, "LEFT", "LEFT"]), b"$-1\r\n"),
    ] {
        let sent = Instant::now();
        assert_eq!(c.cmd(&command), reply);
        let took = sent.elapsed();
        assert!(took < HELD_AT_LEAST, "{command:?} waited {took:?}");
    }
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The time `command` takes to be answered on `c`, checking its reply.
fn timed(c: &mut RawConn, command: &[&str], reply: &[u8]) -> Duration {
    let sent = Instant::now();
    assert_eq!(c.cmd(command), reply, "{command:?}");
    sent.elapsed()
}

/// With only shard 0's fsyncs slow, a client of shard 0 gets the reply of a write
/// split over both shards (MSET, DEL) or run on every shard (FLUSHALL) only once
/// shard 0's part is on disk, though shard 1 answered its part at once; a read of
/// the same keys on another connection is not held.
#[test]
fn always_answers_split_writes_once_the_local_part_is_on_disk() {
    let shards = 2;
    let here = key_on_shard("here", 0, shards);
    let there = key_on_shard("there", 1, shards);
    let dir = data_dir("split");
    let server = start(shards, &dir, &[("RUVIO_FAULT", "wal:slow-fsync-0")]);
    let mut c = conn_on_shard(&server, 0);
    let writes: [(Vec<&str>, &[u8]); 3] = [
        (vec!["MSET", &here, "1", &there, "2"], b"+OK\r\n"),
        (vec!["DEL", &here, &there], b":2\r\n"),
        (vec!["FLUSHALL"], b"+OK\r\n"),
    ];
    for (command, reply) in &writes {
        if command[0] == "FLUSHALL" {
            assert_eq!(c.cmd(&["MSET", &here, "1", &there, "2"]), b"+OK\r\n");
        }
        let took = timed(&mut c, command, reply);
        assert!(took >= HELD_AT_LEAST, "{command:?} answered after {took:?}");
    }
    assert_eq!(c.cmd(&["MSET", &here, "1", &there, "2"]), b"+OK\r\n");
    let mut reader = conn_on_shard(&server, 0);
    let took = timed(
        &mut reader,
        &["MGET", &here, &there],
        b"*2\r\n$1\r\n1\r\n$1\r\n2\r\n",
    );
    assert!(took < HELD_AT_LEAST, "a read waited {took:?}");
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

/// With only an owner's fsyncs slow (its loop going on), a cross-shard RENAME is
/// answered only after that owner's fdatasync, not after its write alone.
#[test]
fn always_answers_borrowed_writes_after_the_owners_fsync() {
    let shards = 3;
    let a = key_on_shard("a", 1, shards);
    let b = key_on_shard("b", 2, shards);
    let dir = data_dir("fsync");
    let server = start(shards, &dir, &[("RUVIO_FAULT", "wal:slow-fsync-2")]);
    let mut c = conn_on_shard(&server, 0);
    assert_eq!(c.cmd(&["SET", &a, "v"]), b"+OK\r\n");
    let took = timed(&mut c, &["RENAME", &a, &b], b"+OK\r\n");
    assert!(took >= HELD_AT_LEAST, "answered after {took:?}");
    assert_eq!(c.cmd(&["GET", &b]), b"$1\r\nv\r\n");
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A script's FLUSHALL and a transaction's FLUSHDB run on the other shard at once
/// for them (the script lock's `RunNow`): with that shard's fsyncs slow, the reply
/// waits for its group, not only for the group of the client's shard.
#[test]
fn always_answers_flushes_run_for_scripts_after_every_shards_fsync() {
    let shards = 2;
    let here = key_on_shard("fh", 0, shards);
    let there = key_on_shard("ft", 1, shards);
    let dir = data_dir("run-now");
    let server = start(shards, &dir, &[("RUVIO_FAULT", "wal:slow-fsync-1")]);
    let mut c = conn_on_shard(&server, 0);
    assert_eq!(c.cmd(&["SET", &there, "v"]), b"+OK\r\n");
    let flushall = ["EVAL", "return redis.call('flushall')", "0"];
    let took = timed(&mut c, &flushall, b"+OK\r\n");
    assert!(took >= HELD_AT_LEAST, "the script answered after {took:?}");
    assert_eq!(c.cmd(&["SET", &there, "v"]), b"+OK\r\n");
    assert_eq!(c.cmd(&["MULTI"]), b"+OK\r\n");
    assert_eq!(c.cmd(&["SET", &here, "1"]), b"+QUEUED\r\n");
    assert_eq!(c.cmd(&["FLUSHDB"]), b"+QUEUED\r\n");
    let took = timed(&mut c, &["EXEC"], b"*2\r\n+OK\r\n+OK\r\n");
    assert!(
        took >= HELD_AT_LEAST,
        "the transaction answered after {took:?}"
    );
    assert_eq!(c.cmd(&["DBSIZE"]), b":0\r\n");
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}
