//! What the log holds for transactions, scripts and blocked commands: a script is
//! logged as the writes it made (Redis' effects replication), so EVALSHA replays
//! without the script cache; a transaction's or a script's records form one group
//! that replays whole or not at all; under `always` a blocked command served by a
//! later write answers only once its pop is on disk (docs/durability.md).

mod common;

use common::*;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Longer than everysec's one-second sync, with room for a loaded machine.
const AFTER_SYNC: Duration = Duration::from_millis(1600);

fn data_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ruvio-groups-{}-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn start(shards: usize, dir: &Path, durability: &str) -> Server {
    let dir = dir.to_str().unwrap();
    Server::ruvio_with(
        PortMode::Forward,
        shards,
        &["--dir", dir, "--durability", durability],
    )
}

/// Shard 0's last log segment.
fn last_segment(dir: &Path) -> PathBuf {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir.join("shard-0"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    files.sort();
    files.pop().unwrap()
}

/// A script run by EVALSHA comes back after a restart on a server whose script
/// cache is empty, with its relative expiry kept absolute; a script that wrote
/// nothing logs nothing.
#[test]
fn scripts_replay_as_the_writes_they_made() {
    let dir = data_dir("scripts");
    let server = start(1, &dir, "everysec");
    let mut c = server.raw();
    let body = "redis.call('SET', KEYS[1], ARGV[1]) \
                redis.call('SET', KEYS[2], 'v', 'EX', 1000) \
                return redis.call('INCR', KEYS[3])";
    let sha = c.cmd(&["SCRIPT", "LOAD", body]);
    let sha = std::str::from_utf8(&sha[5..45]).unwrap().to_string();
    for n in 1..=3 {
        let reply = c.cmd(&["EVALSHA", &sha, "3", "a", "b", "n", "x"]);
        assert_eq!(reply, format!(":{n}\r\n").into_bytes());
    }
    let read_only = c.cmd(&["EVAL", "return redis.call('GET', KEYS[1])", "1", "a"]);
    assert_eq!(read_only, b"$1\r\nx\r\n");
    std::thread::sleep(AFTER_SYNC);
    drop(server);
    let log = std::fs::read(last_segment(&dir)).unwrap();
    assert!(
        !contains(&log, b"EVAL"),
        "scripts are logged as their writes"
    );
    let server = start(1, &dir, "everysec");
    let mut c = server.raw();
    assert_eq!(
        c.cmd(&["MGET", "a", "b", "n"]),
        b"*3\r\n$1\r\nx\r\n$1\r\nv\r\n$1\r\n3\r\n"
    );
    let ttl = c.cmd(&["TTL", "b"]);
    let ttl: i64 = std::str::from_utf8(&ttl[1..ttl.len() - 2])
        .unwrap()
        .parse()
        .unwrap();
    assert!((900..=1000).contains(&ttl), "ttl {ttl}");
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A log cut inside the last transaction's group loses the whole transaction,
/// never part of it; the writes before it stay.
#[test]
fn a_transaction_cut_short_replays_none_of_it() {
    let dir = data_dir("multi");
    let server = start(1, &dir, "everysec");
    let mut c = server.raw();
    assert_eq!(c.cmd(&["SET", "before", "1"]), b"+OK\r\n");
    std::thread::sleep(AFTER_SYNC);
    let before_exec = records_end(&std::fs::read(last_segment(&dir)).unwrap());
    assert_eq!(c.cmd(&["MULTI"]), b"+OK\r\n");
    for key in ["x", "y", "z"] {
        assert_eq!(c.cmd(&["INCR", key]), b"+QUEUED\r\n");
    }
    assert_eq!(c.cmd(&["EXEC"]), b"*3\r\n:1\r\n:1\r\n:1\r\n");
    std::thread::sleep(AFTER_SYNC);
    drop(server);
    let segment = last_segment(&dir);
    let whole = std::fs::read(&segment).unwrap();
    let end = records_end(&whole);
    assert!(end > before_exec, "the transaction was logged");
    // Every cut inside the transaction's bytes keeps none of it.
    for cut in [before_exec + 9, (before_exec + end) / 2, end - 1] {
        std::fs::write(&segment, &whole[..cut]).unwrap();
        let server = start(1, &dir, "everysec");
        assert_eq!(
            server.raw().cmd(&["MGET", "before", "x", "y", "z"]),
            b"*4\r\n$1\r\n1\r\n$-1\r\n$-1\r\n$-1\r\n",
            "cut at {cut} of {end}"
        );
        drop(server);
    }
    std::fs::write(&segment, &whole).unwrap();
    let server = start(1, &dir, "everysec");
    assert_eq!(
        server.raw().cmd(&["MGET", "before", "x", "y", "z"]),
        b"*4\r\n$1\r\n1\r\n$1\r\n1\r\n$1\r\n1\r\n$1\r\n1\r\n"
    );
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

/// `always`: a BLPOP served by another client's push is answered (its reply,
/// held until the pop's log group is durable, is released: a lost release would
/// leave the waiter hanging), and after a SIGKILL right after that answer the pop
/// is still done, on one shard and for a waiter on the other shard.
#[test]
fn always_logs_a_served_blocked_pop_before_answering() {
    for shards in [1, 2] {
        let dir = data_dir(&format!("blpop{shards}"));
        let server = start(shards, &dir, "always");
        let mut pusher = server.raw();
        assert_eq!(pusher.cmd(&["RPUSH", "q", "keep"]), b":1\r\n");
        assert_eq!(pusher.cmd(&["LPOP", "q"]), b"$4\r\nkeep\r\n");
        let mut waiter = server.raw();
        waiter.send(&encode(&["BLPOP", "q", "0"]));
        // Let the BLPOP park before the push.
        std::thread::sleep(Duration::from_millis(200));
        assert_eq!(pusher.cmd(&["RPUSH", "q", "a", "b"]), b":2\r\n");
        assert_eq!(waiter.read_reply(), b"*2\r\n$1\r\nq\r\n$1\r\na\r\n");
        drop(server); // SIGKILL at once
        let server = start(shards, &dir, "always");
        assert_eq!(
            server.raw().cmd(&["LRANGE", "q", "0", "-1"]),
            b"*1\r\n$1\r\nb\r\n",
            "{shards} shard(s)"
        );
        drop(server);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
