//! BGSAVE without fork (docs/durability.md, "Background saves"): each shard writes
//! its snapshot in slices while it keeps serving, and the file holds the keyspace
//! exactly as it was at the log position it is tagged with. Shown by writing,
//! deleting, expiring and incrementing keys while a long save runs (the debug
//! build's `RUVIO_SNAPSHOT_SLICE_KEYS` makes a slice write a few keys only), then
//! restarting: snapshot plus log tail give every key exactly once (an INCR counted
//! twice or lost would show). Also the replies and INFO fields as Redis gives them.

mod common;

use common::*;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Longer than everysec's one-second sync, with room for a loaded machine.
const AFTER_SYNC: Duration = Duration::from_millis(1600);
/// Keys per shard before the save.
const KEYS_PER_SHARD: usize = 100_000;
/// Keys a slice writes: a save of 100k keys per shard takes many loop iterations.
const SLOW_SLICES: (&str, &str) = ("RUVIO_SNAPSHOT_SLICE_KEYS", "4");

fn data_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ruvio-bgsave-{}-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn start(mode: PortMode, shards: usize, dir: &Path, env: &[(&str, &str)]) -> Server {
    let dir = dir.to_str().unwrap();
    Server::ruvio_with_env(
        mode,
        shards,
        &["--dir", dir, "--durability", "everysec"],
        env,
    )
}

/// One connection per shard (the same port in forward mode), and a hash tag that
/// shard owns: every key of shard `s` is `{tag_s}:...`.
struct Shards {
    conns: Vec<RawConn>,
    tags: Vec<String>,
}

impl Shards {
    fn connect(server: &Server, shards: usize) -> Shards {
        let conns = (0..shards)
            .map(|s| RawConn::connect(server.shard_port(s)))
            .collect();
        let tags = (0..shards)
            .map(|s| key_on_shard("tag", s, shards))
            .collect();
        Shards { conns, tags }
    }

    fn key(&self, shard: usize, name: &str) -> String {
        format!("{{{}}}:{name}", self.tags[shard])
    }

    /// Run `commands` on `shard`'s connection as one pipeline; every reply must
    /// satisfy `check`.
    fn pipeline(&mut self, shard: usize, commands: &[Vec<String>], check: impl Fn(&[u8]) -> bool) {
        for batch in commands.chunks(5000) {
            let mut bytes = Vec::new();
            for command in batch {
                bytes.extend(encode(command));
            }
            let conn = &mut self.conns[shard];
            conn.send(&bytes);
            for command in batch {
                let reply = conn.read_reply();
                assert!(check(&reply), "{command:?}: {}", show(&reply));
            }
        }
    }
}

fn words(parts: &[&str]) -> Vec<String> {
    parts.iter().map(|p| p.to_string()).collect()
}

fn info_field(conn: &mut RawConn, field: &str) -> String {
    let info = conn.cmd(&["INFO", "persistence"]);
    let text = String::from_utf8_lossy(&info).into_owned();
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")).map(str::to_string))
        .unwrap_or_else(|| panic!("no {field} in {text}"))
}

fn wait_until_saved(conn: &mut RawConn) {
    let deadline = Instant::now() + Duration::from_secs(120);
    while info_field(conn, "rdb_bgsave_in_progress") != "0" {
        assert!(Instant::now() < deadline, "the background save never ended");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(info_field(conn, "rdb_last_bgsave_status"), "ok");
}

/// Keys written, changed, deleted and expiring while the save runs are, after a
/// restart, exactly as the snapshot's position plus the log after it say.
fn writes_during_a_save_survive_a_restart(mode: PortMode, tag: &str) {
    let shards = 2;
    let dir = data_dir(tag);
    let server = start(mode, shards, &dir, &[SLOW_SLICES]);
    let mut keys = Shards::connect(&server, shards);
    // What every key must hold at the end (None: absent).
    let mut expected: BTreeMap<String, Option<String>> = BTreeMap::new();
    for s in 0..shards {
        let mut load = Vec::new();
        for i in 0..KEYS_PER_SHARD {
            let key = keys.key(s, &format!("k{i}"));
            load.push(words(&["SET", &key, &format!("v{i}")]));
            expected.insert(key, Some(format!("v{i}")));
        }
        for i in 0..200 {
            // Gone a moment into the save (expired, never read again).
            let key = keys.key(s, &format!("brief{i}"));
            load.push(words(&["SET", &key, "x", "PX", "300"]));
            expected.insert(key, None);
        }
        keys.pipeline(s, &load, |r| r == b"+OK\r\n");
    }
    let mut control = server.raw();
    assert_eq!(
        control.cmd(&["BGSAVE"]),
        b"+Background saving started\r\n".to_vec()
    );
    assert_eq!(info_field(&mut control, "rdb_bgsave_in_progress"), "1");
    assert_eq!(
        control.cmd(&["BGSAVE"]),
        b"-ERR Background save already in progress\r\n".to_vec()
    );
    assert_eq!(
        control.cmd(&["SAVE"]),
        b"-ERR Background save already in progress\r\n".to_vec()
    );
    // Rounds of writes over the whole key range while the save runs: counters,
    // overwrites, deletes, new keys; spread so that both keys the scan has passed
    // and keys it has not reached yet change.
    let mut round = 0usize;
    let mut during = 0usize;
    loop {
        let saving = info_field(&mut control, "rdb_bgsave_in_progress") == "1";
        if saving {
            during += 1;
        }
        if !saving && round >= 3 {
            break;
        }
        for s in 0..shards {
            let mut writes = Vec::new();
            for j in 0..50 {
                let i = (round * 7919 + j * 1999) % KEYS_PER_SHARD;
                let counter = keys.key(s, &format!("n{}", j % 10));
                writes.push(words(&["INCR", &counter]));
                let key = keys.key(s, &format!("k{i}"));
                match j % 3 {
                    0 => {
                        writes.push(words(&["APPEND", &key, "+"]));
                        let value = expected.entry(key).or_default();
                        value.get_or_insert_with(String::new).push('+');
                    }
                    1 => {
                        writes.push(words(&["DEL", &key]));
                        expected.insert(key.clone(), None);
                    }
                    _ => {
                        writes.push(words(&["SET", &key, &format!("r{round}")]));
                        expected.insert(key.clone(), Some(format!("r{round}")));
                    }
                }
                let fresh = keys.key(s, &format!("new{round}-{j}"));
                writes.push(words(&["SET", &fresh, "n"]));
                expected.insert(fresh, Some("n".into()));
            }
            keys.pipeline(s, &writes, |r| !r.starts_with(b"-"));
        }
        round += 1;
    }
    assert!(
        during >= 3,
        "the save ended before the writes could overlap it ({during} rounds)"
    );
    wait_until_saved(&mut control);
    for s in 0..shards {
        for c in 0..10 {
            // Five INCRs of each counter per round.
            expected.insert(keys.key(s, &format!("n{c}")), Some((round * 5).to_string()));
        }
    }
    let lastsave: i64 = String::from_utf8_lossy(&control.cmd(&["LASTSAVE"]))
        .trim_start_matches(':')
        .trim()
        .parse()
        .unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    assert!(
        (now - lastsave).abs() <= 5,
        "LASTSAVE {lastsave}, now {now}"
    );
    std::thread::sleep(AFTER_SYNC);
    drop(server);
    for s in 0..shards {
        let files: Vec<String> = std::fs::read_dir(dir.join(format!("shard-{s}")))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("snapshot-"))
            .collect();
        assert_eq!(files.len(), 1, "shard {s}: {files:?}");
        assert!(files[0].ends_with(".rdb"), "{files:?}");
    }
    let server = start(mode, shards, &dir, &[]);
    let mut keys = Shards::connect(&server, shards);
    let mut present = 0;
    for s in 0..shards {
        let tag = format!("{{{}}}", keys.tags[s]);
        let mine: Vec<(&String, &Option<String>)> = expected
            .iter()
            .filter(|(k, _)| k.starts_with(&tag))
            .collect();
        present += mine.iter().filter(|(_, v)| v.is_some()).count();
        for batch in mine.chunks(5000) {
            let mut bytes = Vec::new();
            for (key, _) in batch {
                bytes.extend(encode(&["GET", key.as_str()]));
            }
            let conn = &mut keys.conns[s];
            conn.send(&bytes);
            for (key, value) in batch {
                let got = conn.read_reply();
                let want = match value {
                    Some(v) => format!("${}\r\n{v}\r\n", v.len()).into_bytes(),
                    None => b"$-1\r\n".to_vec(),
                };
                assert_eq!(got, want, "{key}: {}", show(&got));
            }
        }
    }
    let mut total = 0;
    for s in 0..shards {
        let port = server.shard_port(s);
        let reply = RawConn::connect(port).cmd(&["DBSIZE"]);
        let n: usize = String::from_utf8_lossy(&reply[1..reply.len() - 2])
            .parse()
            .unwrap();
        total = if mode == PortMode::Forward {
            n
        } else {
            total + n
        };
    }
    assert_eq!(total, present, "no key doubled, none left over");
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn writes_during_a_save_survive_a_restart_forward_mode() {
    writes_during_a_save_survive_a_restart(PortMode::Forward, "fwd");
}

#[test]
fn writes_during_a_save_survive_a_restart_per_shard_mode() {
    writes_during_a_save_survive_a_restart(PortMode::PerShard, "pershard");
}

/// BGREWRITEAOF is a snapshot too; the other kind's request meanwhile is refused
/// or scheduled as Redis does with a child running; INFO tells which runs.
#[test]
fn rewrite_and_schedule_replies_as_redis() {
    let dir = data_dir("replies");
    let server = start(PortMode::Forward, 2, &dir, &[SLOW_SLICES]);
    let mut c = server.raw();
    let mut load = Vec::new();
    for i in 0..20_000 {
        load.extend(encode(&["SET", &format!("key{i}"), "v"]));
    }
    c.send(&load);
    for _ in 0..20_000 {
        assert_eq!(c.read_reply(), b"+OK\r\n");
    }
    // A hash with a field expiry needs RDB version 12: the header written first
    // says 10, and the sealed file is patched and checksummed again.
    assert_eq!(c.cmd(&["HSET", "fh", "a", "1", "b", "2"]), b":2\r\n");
    assert_eq!(
        c.cmd(&["HEXPIRE", "fh", "5000", "FIELDS", "1", "a"]),
        b"*1\r\n:1\r\n"
    );
    assert_eq!(c.cmd(&["BGSAVE", "now"]), b"-ERR syntax error\r\n".to_vec());
    assert_eq!(
        info_field(&mut c, "aof_last_rewrite_time_sec"),
        "-1",
        "no rewrite yet"
    );
    assert_eq!(
        c.cmd(&["BGREWRITEAOF"]),
        b"+Background append only file rewriting started\r\n".to_vec()
    );
    assert_eq!(info_field(&mut c, "aof_rewrite_in_progress"), "1");
    assert_eq!(info_field(&mut c, "rdb_bgsave_in_progress"), "0");
    assert_eq!(
        c.cmd(&["BGREWRITEAOF"]),
        b"-ERR Background append only file rewriting already in progress\r\n".to_vec()
    );
    assert_eq!(
        c.cmd(&["BGSAVE"]),
        b"-ERR Another child process is active (AOF?): can't BGSAVE right now. Use BGSAVE SCHEDULE in order to schedule a BGSAVE whenever possible.\r\n".to_vec()
    );
    assert_eq!(
        c.cmd(&["BGSAVE", "SCHEDULE"]),
        b"+Background saving scheduled\r\n".to_vec()
    );
    // The rewrite ends, then the scheduled save runs and ends.
    let deadline = Instant::now() + Duration::from_secs(120);
    while info_field(&mut c, "aof_rewrite_in_progress") == "1" {
        assert!(Instant::now() < deadline);
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(info_field(&mut c, "aof_last_bgrewrite_status"), "ok");
    while info_field(&mut c, "rdb_last_bgsave_time_sec") == "-1" {
        assert!(Instant::now() < deadline, "the scheduled save never ended");
        std::thread::sleep(Duration::from_millis(10));
    }
    wait_until_saved(&mut c);
    assert_eq!(info_field(&mut c, "rdb_current_bgsave_time_sec"), "-1");
    assert_eq!(info_field(&mut c, "rdb_changes_since_last_save"), "0");
    // Inside EXEC a save is scheduled, as Redis answers (it cannot fork there);
    // it runs right after (and covers the write before it).
    assert_eq!(c.cmd(&["SET", "late", "1"]), b"+OK\r\n");
    assert_eq!(info_field(&mut c, "rdb_changes_since_last_save"), "1");
    assert_eq!(c.cmd(&["MULTI"]), b"+OK\r\n");
    assert_eq!(c.cmd(&["BGSAVE"]), b"+QUEUED\r\n");
    assert_eq!(
        c.cmd(&["EXEC"]),
        b"*1\r\n+Background saving scheduled\r\n".to_vec()
    );
    while info_field(&mut c, "rdb_changes_since_last_save") != "0" {
        assert!(Instant::now() < deadline, "the scheduled save never ran");
        std::thread::sleep(Duration::from_millis(10));
    }
    wait_until_saved(&mut c);
    drop(server);
    let server = start(PortMode::Forward, 2, &dir, &[]);
    let mut c = server.raw();
    assert_eq!(c.cmd(&["DBSIZE"]), b":20002\r\n".to_vec());
    assert_eq!(c.cmd(&["HGET", "fh", "b"]), b"$1\r\n2\r\n".to_vec());
    let ttl = c.cmd(&["HTTL", "fh", "FIELDS", "1", "a"]);
    let secs: i64 = String::from_utf8_lossy(&ttl[5..ttl.len() - 2])
        .parse()
        .unwrap();
    assert!((4900..=5000).contains(&secs), "{}", show(&ttl));
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Without a log (`--durability memory`), SAVE and BGSAVE write `dir`/`dbfilename`
/// as Redis does with AOF off: one RDB file of every shard's keys (both port
/// modes), LASTSAVE moves, and redis-server loads the file with the same data.
#[test]
fn saves_without_a_log_write_a_dump_redis_loads() {
    for (mode, shards) in [
        (PortMode::Forward, 2),
        (PortMode::PerShard, 2),
        (PortMode::Forward, 1),
    ] {
        let dir = data_dir(&format!("dump-{mode:?}-{shards}"));
        std::fs::create_dir_all(&dir).unwrap();
        let server = Server::ruvio_with(
            mode,
            shards,
            &["--dir", dir.to_str().unwrap(), "--dbfilename", "backup.rdb"],
        );
        let mut conns: Vec<RawConn> = (0..shards)
            .map(|i| RawConn::connect(server.shard_port(i)))
            .collect();
        let mut written = BTreeMap::new();
        for i in 0..200 {
            let key = format!("k{i}");
            let shard = match mode {
                PortMode::Forward => 0,
                PortMode::PerShard => shard_of_key(&key, shards),
            };
            let c = &mut conns[shard];
            match i % 4 {
                0 => assert_eq!(c.cmd(&["SET", &key, &format!("v{i}")]), b"+OK\r\n"),
                1 => assert_eq!(c.cmd(&["RPUSH", &key, "a", "b"]), b":2\r\n"),
                2 => assert_eq!(c.cmd(&["HSET", &key, "f", "x"]), b":1\r\n"),
                _ => assert_eq!(c.cmd(&["ZADD", &key, "1.5", "m"]), b":1\r\n"),
            }
            written.insert(key, shard);
        }
        let lastsave = |c: &mut RawConn| String::from_utf8(c.cmd(&["LASTSAVE"])).unwrap();
        let before = lastsave(&mut conns[0]);
        std::thread::sleep(Duration::from_millis(1100));
        assert_eq!(conns[0].cmd(&["BGSAVE"]), b"+Background saving started\r\n");
        let after = lastsave(&mut conns[0]);
        assert_ne!(before, after, "LASTSAVE after BGSAVE");
        let info = String::from_utf8_lossy(&conns[0].cmd(&["INFO", "persistence"])).into_owned();
        assert!(info.contains("rdb_changes_since_last_save:0"), "{info}");
        assert_eq!(conns[0].cmd(&["SAVE"]), b"+OK\r\n");
        let file = dir.join("backup.rdb");
        assert!(file.is_file(), "{}", file.display());
        drop(server);

        // The same data in redis-server, loaded from the file.
        let Some(bin) = require_redis_server("saves_without_a_log_write_a_dump_redis_loads") else {
            return;
        };
        let port = free_ports(1, false);
        let mut redis = std::process::Command::new(bin)
            .args([
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
            ])
            .args(["--dir", dir.to_str().unwrap(), "--dbfilename", "backup.rdb"])
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut r = loop {
            if let Ok(stream) = std::net::TcpStream::connect(("127.0.0.1", port)) {
                break RawConn::from_stream(stream);
            }
            assert!(Instant::now() < deadline, "redis-server did not start");
            std::thread::sleep(Duration::from_millis(50));
        };
        assert_eq!(r.cmd(&["DBSIZE"]), b":200\r\n");
        for (i, key) in written.keys().enumerate().take(20) {
            let got = r.cmd(&["TYPE", key]);
            assert_ne!(got, b"+none\r\n", "{key} ({i})");
        }
        assert_eq!(r.cmd(&["GET", "k0"]), b"$2\r\nv0\r\n");
        assert_eq!(
            r.cmd(&["LRANGE", "k1", "0", "-1"]),
            b"*2\r\n$1\r\na\r\n$1\r\nb\r\n"
        );
        assert_eq!(r.cmd(&["HGET", "k2", "f"]), b"$1\r\nx\r\n");
        assert_eq!(r.cmd(&["ZSCORE", "k3", "m"]), b"$3\r\n1.5\r\n");
        let _ = redis.kill();
        let _ = redis.wait();
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// Keys lent to another shard for a cross-shard command (LCS reads two keys of
/// two shards and changes nothing) when a snapshot begins are not in it; their
/// state is logged when they come home, so no key is lost by SAVE or BGSAVE.
#[test]
fn keys_on_loan_during_snapshots_are_not_lost() {
    let dir = data_dir("loans");
    let server = start(PortMode::Forward, 2, &dir, &[]);
    let pairs: Vec<(String, String)> = (0..4)
        .map(|i| {
            (
                key_on_shard(&format!("left{i}-"), 0, 2),
                key_on_shard(&format!("right{i}-"), 1, 2),
            )
        })
        .collect();
    let mut c = server.raw();
    for (a, b) in &pairs {
        assert_eq!(c.cmd(&["SET", a, "abcde"]), b"+OK\r\n");
        assert_eq!(c.cmd(&["SET", b, "abxde"]), b"+OK\r\n");
    }
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let readers: Vec<_> = pairs
        .iter()
        .cloned()
        .map(|(a, b)| {
            let (port, stop) = (server.port(), stop.clone());
            std::thread::spawn(move || {
                let mut c = RawConn::connect(port);
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    assert_eq!(c.cmd(&["LCS", &a, &b]), b"$4\r\nabde\r\n".to_vec());
                }
            })
        })
        .collect();
    for round in 0..40 {
        if round % 2 == 0 {
            assert_eq!(c.cmd(&["SAVE"]), b"+OK\r\n");
        } else {
            assert_eq!(
                c.cmd(&["BGSAVE"]),
                b"+Background saving started\r\n".to_vec()
            );
            wait_until_saved(&mut c);
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for reader in readers {
        reader.join().unwrap();
    }
    std::thread::sleep(AFTER_SYNC);
    drop(server);
    let server = start(PortMode::Forward, 2, &dir, &[]);
    let mut c = server.raw();
    for (a, b) in &pairs {
        assert_eq!(c.cmd(&["GET", a]), b"$5\r\nabcde\r\n".to_vec(), "{a}");
        assert_eq!(c.cmd(&["GET", b]), b"$5\r\nabxde\r\n".to_vec(), "{b}");
    }
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

/// kill -9 in the middle of a save: the log it would have replaced is whole, so
/// the restart has every key; the half-written file is deleted.
#[test]
fn a_save_cut_short_by_kill_loses_nothing() {
    let dir = data_dir("killed");
    let server = start(PortMode::Forward, 2, &dir, &[SLOW_SLICES]);
    let mut c = server.raw();
    let mut load = Vec::new();
    for i in 0..20_000 {
        load.extend(encode(&["SET", &format!("key{i}"), &i.to_string()]));
    }
    c.send(&load);
    for _ in 0..20_000 {
        assert_eq!(c.read_reply(), b"+OK\r\n");
    }
    std::thread::sleep(AFTER_SYNC);
    assert_eq!(
        c.cmd(&["BGSAVE"]),
        b"+Background saving started\r\n".to_vec()
    );
    assert_eq!(info_field(&mut c, "rdb_bgsave_in_progress"), "1");
    drop(server); // SIGKILL mid-save
    let server = start(PortMode::Forward, 2, &dir, &[]);
    let mut c = server.raw();
    assert_eq!(c.cmd(&["DBSIZE"]), b":20000\r\n".to_vec());
    assert_eq!(c.cmd(&["GET", "key19999"]), b"$5\r\n19999\r\n".to_vec());
    for s in 0..2 {
        let left: Vec<String> = std::fs::read_dir(dir.join(format!("shard-{s}")))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("snapshot-"))
            .collect();
        assert!(left.is_empty(), "shard {s}: {left:?}");
    }
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}
