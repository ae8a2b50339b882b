//! `--durability everysec`: every write is logged per shard, the log is synced once
//! a second, and a restart replays it (docs/durability.md). Shown by killing the
//! server with SIGKILL after the sync and starting a new one on the same data
//! directory; by cutting and damaging the log; by a full disk (the debug build's
//! `RUVIO_FAULT=wal:enospc`).

mod common;

use common::*;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Longer than everysec's one-second sync, with room for a loaded machine.
const AFTER_SYNC: Duration = Duration::from_millis(1600);

fn data_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ruvio-durability-{}-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn start(mode: PortMode, shards: usize, dir: &Path, extra: &[&str]) -> Server {
    let dir = dir.to_str().unwrap();
    let mut args = vec!["--dir", dir];
    if !extra.contains(&"--durability") {
        args.extend(["--durability", "everysec"]);
    }
    args.extend_from_slice(extra);
    Server::ruvio_with(mode, shards, &args)
}

/// Writes of every kind the log must carry: plain, rewritten (relative expiry,
/// float increment, blocking pop as plain pop), deletes, several databases.
fn write_sample(server: &Server) {
    let mut c = server.client();
    let ok = |r: redis::RedisResult<redis::Value>| r.expect("write");
    for i in 0..50 {
        ok(redis::cmd("SET")
            .arg(format!("s{{{i}}}"))
            .arg(i)
            .query(&mut c));
    }
    ok(redis::cmd("RPUSH")
        .arg("list")
        .arg(&["a", "b", "c", "d"])
        .query(&mut c));
    ok(redis::cmd("LPOP").arg("list").query(&mut c));
    ok(redis::cmd("BLPOP").arg("list").arg(0.1).query(&mut c));
    ok(redis::cmd("HSET")
        .arg("hash")
        .arg(&["f1", "v1", "f2", "v2"])
        .query(&mut c));
    ok(redis::cmd("HDEL").arg("hash").arg("f1").query(&mut c));
    ok(redis::cmd("SADD").arg("set").arg(&["x", "y"]).query(&mut c));
    ok(redis::cmd("ZADD")
        .arg("zset")
        .arg(&["1", "m1", "2.5", "m2"])
        .query(&mut c));
    ok(redis::cmd("SET")
        .arg("ttl")
        .arg("v")
        .arg("EX")
        .arg(1000)
        .query(&mut c));
    ok(redis::cmd("SET")
        .arg("gone")
        .arg("v")
        .arg("PX")
        .arg(1)
        .query(&mut c));
    ok(redis::cmd("INCRBYFLOAT")
        .arg("float")
        .arg("1.25")
        .query(&mut c));
    ok(redis::cmd("DEL").arg("s{3}").query(&mut c));
    ok(redis::cmd("SELECT").arg(5).query(&mut c));
    ok(redis::cmd("SET").arg("in5").arg("five").query(&mut c));
}

/// What [`write_sample`] leaves, read back.
fn check_sample(server: &Server) {
    let mut c = server.client();
    let get =
        |c: &mut redis::Connection, cmd: &mut redis::Cmd| -> redis::Value { cmd.query(c).unwrap() };
    for i in 0..50 {
        let v: Option<i64> = redis::cmd("GET")
            .arg(format!("s{{{i}}}"))
            .query(&mut c)
            .unwrap();
        assert_eq!(v, (i != 3).then_some(i), "s{{{i}}}");
    }
    let list: Vec<String> = redis::cmd("LRANGE")
        .arg("list")
        .arg(0)
        .arg(-1)
        .query(&mut c)
        .unwrap();
    assert_eq!(list, ["c", "d"]);
    let hash: Vec<String> = redis::cmd("HGETALL").arg("hash").query(&mut c).unwrap();
    assert_eq!(hash, ["f2", "v2"]);
    let set: Vec<String> = redis::cmd("SORT")
        .arg("set")
        .arg("ALPHA")
        .query(&mut c)
        .unwrap();
    assert_eq!(set, ["x", "y"]);
    let zset: Vec<String> = redis::cmd("ZRANGE")
        .arg("zset")
        .arg(0)
        .arg(-1)
        .arg("WITHSCORES")
        .query(&mut c)
        .unwrap();
    assert_eq!(zset, ["m1", "1", "m2", "2.5"]);
    let ttl: i64 = redis::cmd("TTL").arg("ttl").query(&mut c).unwrap();
    assert!((990..=1000).contains(&ttl), "ttl {ttl}");
    assert_eq!(
        get(&mut c, redis::cmd("EXISTS").arg("gone")),
        redis::Value::Int(0)
    );
    let float: String = redis::cmd("GET").arg("float").query(&mut c).unwrap();
    assert_eq!(float, "1.25");
    let _: () = redis::cmd("SELECT").arg(5).query(&mut c).unwrap();
    let five: String = redis::cmd("GET").arg("in5").query(&mut c).unwrap();
    assert_eq!(five, "five");
}

fn killed_after_sync_then_restarted(mode: PortMode, shards: usize, tag: &str) {
    let dir = data_dir(tag);
    let server = start(mode, shards, &dir, &[]);
    write_sample(&server);
    std::thread::sleep(AFTER_SYNC);
    drop(server); // SIGKILL
    let server = start(mode, shards, &dir, &[]);
    check_sample(&server);
    let info = server.raw().cmd(&["INFO", "persistence"]);
    assert!(contains(&info, b"aof_enabled:1\r\n"), "{}", show(&info));
    // The restarted server logs on: a second restart sees both runs' writes.
    let mut c = server.client();
    let _: () = redis::cmd("SET")
        .arg("second")
        .arg("run")
        .query(&mut c)
        .unwrap();
    std::thread::sleep(AFTER_SYNC);
    drop(server);
    let server = start(mode, shards, &dir, &[]);
    check_sample(&server);
    let second: String = redis::cmd("GET")
        .arg("second")
        .query(&mut server.client())
        .unwrap();
    assert_eq!(second, "run");
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn everysec_survives_sigkill_forward_mode() {
    killed_after_sync_then_restarted(PortMode::Forward, 1, "fwd1");
    killed_after_sync_then_restarted(PortMode::Forward, 2, "fwd2");
}

#[test]
fn everysec_survives_sigkill_per_shard_mode() {
    // Per-shard mode: the sample's keys are spread, so use a cluster-aware write path:
    // one shard, where every key is local.
    killed_after_sync_then_restarted(PortMode::PerShard, 1, "ps1");
}

/// Every segment file of shard 0, largest first.
fn segments(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir.join("shard-0"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    files
}

/// A log with three SETs, written by a server that was then killed.
fn three_sets(tag: &str) -> (PathBuf, PathBuf) {
    let dir = data_dir(tag);
    let server = start(PortMode::Forward, 1, &dir, &[]);
    let mut c = server.raw();
    for (k, v) in [("a", "1"), ("b", "2"), ("c", "3")] {
        assert_eq!(c.cmd(&["SET", k, v]), b"+OK\r\n");
    }
    std::thread::sleep(AFTER_SYNC);
    drop(server);
    let segment = segments(&dir).pop().unwrap();
    (dir, segment)
}

#[test]
fn a_torn_tail_is_cut_at_the_last_good_record() {
    let (dir, segment) = three_sets("torn");
    let whole = std::fs::read(&segment).unwrap();
    // The records end where the zero-filled space after them begins (direct
    // writes fill ahead); cut into the last record: the first two stay, the third
    // is gone.
    let end = records_end(&whole);
    std::fs::write(&segment, &whole[..end - 3]).unwrap();
    let server = start(PortMode::Forward, 1, &dir, &[]);
    let mut c = server.raw();
    assert_eq!(
        c.cmd(&["MGET", "a", "b", "c"]),
        b"*3\r\n$1\r\n1\r\n$1\r\n2\r\n$-1\r\n"
    );
    assert!(
        server.logs().contains("partly written record"),
        "{}",
        server.logs()
    );
    // Appending resumes after the cut: a new write survives the next restart.
    assert_eq!(c.cmd(&["SET", "d", "4"]), b"+OK\r\n");
    std::thread::sleep(AFTER_SYNC);
    drop(server);
    let server = start(PortMode::Forward, 1, &dir, &[]);
    assert_eq!(
        server.raw().cmd(&["MGET", "a", "b", "c", "d"]),
        b"*4\r\n$1\r\n1\r\n$1\r\n2\r\n$-1\r\n$1\r\n4\r\n"
    );
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn damage_in_the_middle_refuses_to_start_unless_told_to_cut() {
    let (dir, segment) = three_sets("corrupt");
    let mut bytes = std::fs::read(&segment).unwrap();
    // A byte inside the first record's payload.
    bytes[10] ^= 0x40;
    std::fs::write(&segment, &bytes).unwrap();
    let port = free_ports(1, false);
    let out = std::process::Command::new(ruvio_bin())
        .args([
            "--port",
            &port.to_string(),
            "--shards",
            "1",
            "--durability",
            "everysec",
        ])
        .args(["--dir", dir.to_str().unwrap()])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("is damaged at byte 0") && stderr.contains("--wal-truncate-corrupt"),
        "{stderr}"
    );
    let server = start(PortMode::Forward, 1, &dir, &["--wal-truncate-corrupt"]);
    assert_eq!(server.raw().cmd(&["DBSIZE"]), b":0\r\n");
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_full_disk_refuses_writes_and_reads_go_on() {
    let dir = data_dir("enospc");
    let d = dir.to_str().unwrap();
    let server = Server::ruvio_with_env(
        PortMode::Forward,
        1,
        &["--durability", "everysec", "--dir", d],
        &[("RUVIO_FAULT", "wal:enospc")],
    );
    let mut c = server.raw();
    assert_eq!(c.cmd(&["SET", "first", "1"]), b"+OK\r\n");
    std::thread::sleep(Duration::from_millis(50));
    // The next log write fails: acknowledged within everysec's window, and from then
    // on writes are refused with Redis' text while reads are served.
    assert_eq!(c.cmd(&["SET", "second", "2"]), b"+OK\r\n");
    let refused = b"-MISCONF Errors writing to the AOF file: No space left on device\r\n";
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while c.cmd(&["SET", "third", "3"]) != refused {
        assert!(std::time::Instant::now() < deadline, "writes never refused");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(c.cmd(&["GET", "first"]), b"$1\r\n1\r\n");
    assert_eq!(c.cmd(&["INCR", "first"]), refused);
    let info = c.cmd(&["INFO", "persistence"]);
    assert!(
        contains(&info, b"aof_last_write_status:err\r\n"),
        "{}",
        show(&info)
    );
    assert!(server.logs().contains("No space left on device"));
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

/// `always`: every acknowledged write survives a SIGKILL sent right after its
/// reply, with several clients and shards (forwarded writes included), lists and
/// hashes and expiries too. Three rounds here; `scripts/crash_loop.py` runs more.
#[test]
fn always_keeps_every_acknowledged_write_through_sigkill() {
    for (mode, shards) in [(PortMode::Forward, 2), (PortMode::PerShard, 1)] {
        let dir = data_dir(&format!("always-{mode:?}-{shards}"));
        for round in 0..3 {
            let server = start(mode, shards, &dir, &["--durability", "always"]);
            let port = server.port();
            let writers: Vec<_> = (0..4)
                .map(|w| {
                    std::thread::spawn(move || {
                        let mut c = RawConn::connect(port);
                        let mut acked = Vec::new();
                        for i in 0..40 {
                            let key = format!("r{round}w{w}k{i}");
                            // A pipeline: write, read of it, list push, hash set.
                            let mut batch = encode(&["SET", &key, &i.to_string(), "EX", "1000"]);
                            batch.extend(encode(&["GET", &key]));
                            batch.extend(encode(&["RPUSH", &format!("list{w}"), &key]));
                            batch.extend(encode(&["HSET", &format!("hash{w}"), &key, "1"]));
                            c.send(&batch);
                            c.expect(b"+OK\r\n");
                            c.expect(format!("${}\r\n{i}\r\n", i.to_string().len()).as_bytes());
                            let _ = c.read_reply();
                            c.expect(b":1\r\n");
                            acked.push(key);
                        }
                        acked
                    })
                })
                .collect();
            let acked: Vec<Vec<String>> = writers.into_iter().map(|t| t.join().unwrap()).collect();
            drop(server); // SIGKILL right after the last reply
            let server = start(mode, shards, &dir, &["--durability", "always"]);
            let mut c = server.raw();
            for (w, keys) in acked.iter().enumerate() {
                for (i, key) in keys.iter().enumerate() {
                    let value = c.cmd(&["GET", key]);
                    assert_eq!(
                        value,
                        format!("${}\r\n{i}\r\n", i.to_string().len()).into_bytes(),
                        "{key} lost"
                    );
                    let ttl = c.cmd(&["TTL", key]);
                    let ttl: i64 = std::str::from_utf8(&ttl[1..ttl.len() - 2])
                        .unwrap()
                        .parse()
                        .unwrap();
                    assert!((900..=1000).contains(&ttl), "{key} ttl {ttl}");
                    assert_eq!(c.cmd(&["HEXISTS", &format!("hash{w}"), key]), b":1\r\n");
                }
                let len = c.cmd(&["LLEN", &format!("list{w}")]);
                let expected = format!(":{}\r\n", 40 * (round + 1));
                assert_eq!(
                    show(&len),
                    show(expected.as_bytes()),
                    "list{w} after round {round}"
                );
            }
            drop(server);
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// `always` never acknowledges a write the disk did not take: with every log write
/// after the first failing (`RUVIO_FAULT=wal:enospc`), the second SET gets no
/// reply, and the server exits as Redis does under `appendfsync always`.
#[test]
fn always_never_acknowledges_a_write_the_disk_refused() {
    let dir = data_dir("always-enospc");
    let d = dir.to_str().unwrap();
    let mut server = Server::ruvio_with_env(
        PortMode::Forward,
        1,
        &["--durability", "always", "--dir", d],
        &[("RUVIO_FAULT", "wal:enospc")],
    );
    let mut c = server.raw();
    assert_eq!(c.cmd(&["SET", "first", "1"]), b"+OK\r\n");
    c.send(&encode(&["SET", "second", "2"]));
    assert_eq!(
        server.wait_exit(Duration::from_secs(10)),
        Some(70),
        "{}",
        server.logs()
    );
    c.expect_closed();
    assert!(server
        .logs()
        .contains("cannot recover from a log write error under durability always"));
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Forward mode runs a command whose keys live on several shards on borrowed keys;
/// each key it changed is logged by its owner as its new state (RESTORE ... ABSTTL,
/// or DEL), so a restart rebuilds every shard's part.
#[test]
fn cross_shard_writes_are_logged_by_their_keys_owners() {
    let dir = data_dir("cross");
    let server = start(PortMode::Forward, 2, &dir, &[]);
    let (a, b) = (key_on_shard("a", 0, 2), key_on_shard("b", 1, 2));
    let (s0, s1, dst) = (
        key_on_shard("s", 0, 2),
        key_on_shard("t", 1, 2),
        key_on_shard("u", 0, 2),
    );
    let (l0, l1) = (key_on_shard("l", 0, 2), key_on_shard("m", 1, 2));
    let mut c = server.raw();
    for (cmd, want) in [
        (vec!["SET", &a, "va", "EX", "5000"], &b"+OK\r\n"[..]),
        (vec!["RENAME", &a, &b], b"+OK\r\n"),
        (vec!["SADD", &s0, "x", "y"], b":2\r\n"),
        (vec!["SADD", &s1, "z"], b":1\r\n"),
        (vec!["SMOVE", &s0, &s1, "x"], b":1\r\n"),
        (vec!["SUNIONSTORE", &dst, &s0, &s1], b":3\r\n"),
        (vec!["RPUSH", &l0, "1", "2"], b":2\r\n"),
        (vec!["LMOVE", &l0, &l1, "LEFT", "RIGHT"], b"$1\r\n1\r\n"),
    ] {
        assert_eq!(show(&c.cmd(&cmd)), show(want), "{cmd:?}");
    }
    std::thread::sleep(AFTER_SYNC);
    drop(server);
    let server = start(PortMode::Forward, 2, &dir, &[]);
    let mut c = server.raw();
    assert_eq!(c.cmd(&["EXISTS", &a]), b":0\r\n");
    assert_eq!(c.cmd(&["GET", &b]), b"$2\r\nva\r\n");
    let ttl = c.cmd(&["TTL", &b]);
    let ttl: i64 = std::str::from_utf8(&ttl[1..ttl.len() - 2])
        .unwrap()
        .parse()
        .unwrap();
    assert!((4900..=5000).contains(&ttl), "ttl {ttl}");
    assert_eq!(c.cmd(&["SMEMBERS", &s0]), b"*1\r\n$1\r\ny\r\n");
    assert_eq!(c.cmd(&["SCARD", &s1]), b":2\r\n");
    assert_eq!(c.cmd(&["SCARD", &dst]), b":3\r\n");
    assert_eq!(c.cmd(&["LRANGE", &l0, "0", "-1"]), b"*1\r\n$1\r\n2\r\n");
    assert_eq!(c.cmd(&["LRANGE", &l1, "0", "-1"]), b"*1\r\n$1\r\n1\r\n");
    assert_eq!(c.cmd(&["DBSIZE"]), b":6\r\n");
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

/// SAVE writes each shard's snapshot and drops the log it covers; a restart loads
/// the snapshot and replays only the log after it (INCR would double otherwise).
/// In per-shard mode too, SAVE on one node saves every shard (as BGSAVE does).
#[test]
fn save_snapshots_then_the_log_after_it_replays() {
    for mode in [PortMode::Forward, PortMode::PerShard] {
        save_then_replay(mode);
    }
}

fn save_then_replay(mode: PortMode) {
    let dir = data_dir(&format!("save-{mode:?}"));
    let server = start(mode, 2, &dir, &[]);
    let mut conns: Vec<RawConn> = (0..2)
        .map(|s| RawConn::connect(server.shard_port(s)))
        .collect();
    let owner = |key: &str| shard_of_key(key, 2);
    for i in 0..20 {
        let key = format!("n{i}");
        assert_eq!(conns[owner(&key)].cmd(&["INCR", &key]), b":1\r\n");
    }
    assert_eq!(conns[0].cmd(&["SAVE"]), b"+OK\r\n");
    let info = conns[1].cmd(&["INFO", "persistence"]);
    assert!(
        contains(&info, b"rdb_changes_since_last_save:0\r\n"),
        "{mode:?}: {}",
        show(&info)
    );
    for i in 0..20 {
        let key = format!("n{i}");
        assert_eq!(conns[owner(&key)].cmd(&["INCR", &key]), b":2\r\n");
    }
    std::thread::sleep(AFTER_SYNC);
    drop(server);
    for shard in 0..2 {
        let snapshots = std::fs::read_dir(dir.join(format!("shard-{shard}")))
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .file_name()
                    .to_string_lossy()
                    .starts_with("snapshot-")
            })
            .count();
        assert_eq!(snapshots, 1, "{mode:?} shard {shard}");
    }
    let server = start(mode, 2, &dir, &[]);
    let mut conns: Vec<RawConn> = (0..2)
        .map(|s| RawConn::connect(server.shard_port(s)))
        .collect();
    for i in 0..20 {
        let key = format!("n{i}");
        assert_eq!(
            conns[owner(&key)].cmd(&["GET", &key]),
            b"$1\r\n2\r\n",
            "{mode:?} {key}"
        );
    }
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}
