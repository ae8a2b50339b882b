//! `save` rules and leaving cleanly (docs/durability.md): a rule met starts a
//! background save of every shard; CONFIG GET/SET `save` as Redis; SHUTDOWN saves
//! when SAVE is given or rules exist (and NOSAVE is not), and otherwise still writes
//! the log's last records, so a clean exit under `everysec` loses nothing; SIGTERM
//! behaves as SHUTDOWN.

mod common;

use common::*;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

fn data_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ruvio-saverules-{}-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn start(mode: PortMode, shards: usize, dir: &Path, save: &str) -> Server {
    let dir = dir.to_str().unwrap();
    Server::ruvio_with(
        mode,
        shards,
        &["--dir", dir, "--durability", "everysec", "--save", save],
    )
}

fn snapshots(dir: &Path, shard: usize) -> usize {
    std::fs::read_dir(dir.join(format!("shard-{shard}")))
        .map(|entries| {
            entries
                .flatten()
                .filter(|e| {
                    let name = e.file_name().to_string_lossy().into_owned();
                    name.starts_with("snapshot-") && name.ends_with(".rdb")
                })
                .count()
        })
        .unwrap_or(0)
}

fn info_field(conn: &mut RawConn, field: &str) -> String {
    let info = conn.cmd(&["INFO", "persistence"]);
    let text = String::from_utf8_lossy(&info).into_owned();
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")).map(str::to_string))
        .unwrap_or_else(|| panic!("no {field} in {text}"))
}

/// A connection to each shard's port (forward mode: the one port, twice).
fn conns(server: &Server, shards: usize) -> Vec<RawConn> {
    (0..shards)
        .map(|s| RawConn::connect(server.shard_port(s)))
        .collect()
}

/// The connection that owns `key` (per-shard mode) or any (forward mode).
fn owner<'a>(conns: &'a mut [RawConn], key: &str) -> &'a mut RawConn {
    let n = conns.len();
    &mut conns[shard_of_key(key, n)]
}

/// Writes keys `k0..n`, spread over the shards.
fn write_keys(server: &Server, n: usize) {
    let mut conns = conns(server, 2);
    for i in 0..n {
        let key = format!("k{i}");
        let reply = owner(&mut conns, &key).cmd(&["SET", &key, &i.to_string()]);
        assert_eq!(reply, b"+OK\r\n");
    }
}

fn check_keys(server: &Server, mode: PortMode, n: usize) {
    let mut conns = conns(server, 2);
    for i in 0..n {
        let key = format!("k{i}");
        let want = format!("${}\r\n{i}\r\n", i.to_string().len());
        let got = owner(&mut conns, &key).cmd(&["GET", &key]);
        assert_eq!(got, want.as_bytes(), "{key}");
    }
    let count = |c: &mut RawConn| -> usize {
        let reply = c.cmd(&["DBSIZE"]);
        String::from_utf8_lossy(&reply[1..reply.len() - 2])
            .parse()
            .unwrap()
    };
    let total = match mode {
        PortMode::Forward => count(&mut conns[0]),
        PortMode::PerShard => conns.iter_mut().map(count).sum(),
    };
    assert_eq!(total, n);
}

#[test]
fn config_save_takes_and_shows_rules_as_redis() {
    let server = Server::ruvio(PortMode::Forward, 1);
    let mut c = server.raw();
    assert_eq!(
        c.cmd(&["CONFIG", "GET", "save"]),
        b"*2\r\n$4\r\nsave\r\n$23\r\n3600 1 300 100 60 10000\r\n".to_vec()
    );
    assert_eq!(c.cmd(&["CONFIG", "SET", "save", "10 1  20 0"]), b"+OK\r\n");
    assert_eq!(
        c.cmd(&["CONFIG", "GET", "save"]),
        b"*2\r\n$4\r\nsave\r\n$9\r\n10 1 20 0\r\n".to_vec()
    );
    for bad in ["1", "0 1", "1 -1", "x 1"] {
        assert_eq!(
            c.cmd(&["CONFIG", "SET", "save", bad]),
            b"-ERR CONFIG SET failed (possibly related to argument 'save') - Invalid save parameters\r\n"
                .to_vec(),
            "{bad}"
        );
    }
    assert_eq!(c.cmd(&["CONFIG", "SET", "save", ""]), b"+OK\r\n");
    assert_eq!(
        c.cmd(&["CONFIG", "GET", "save"]),
        b"*2\r\n$4\r\nsave\r\n$0\r\n\r\n".to_vec()
    );
    for bad in [
        &["SHUTDOWN", "SAVE", "NOSAVE"][..],
        &["SHUTDOWN", "NOSAVE", "ABORT"],
    ] {
        assert_eq!(c.cmd(bad), b"-ERR syntax error\r\n".to_vec(), "{bad:?}");
    }
}

/// `save 1 1` (set at run time on one shard, applied by all): a write, then a
/// background save of every shard within a few seconds.
#[test]
fn a_rule_met_saves_every_shard() {
    let dir = data_dir("rule");
    let server = start(PortMode::Forward, 2, &dir, "");
    let mut c = server.raw();
    assert_eq!(c.cmd(&["CONFIG", "SET", "save", "1 1"]), b"+OK\r\n");
    let before = c.cmd(&["LASTSAVE"]);
    std::thread::sleep(Duration::from_millis(1100));
    write_keys(&server, 100);
    let deadline = Instant::now() + Duration::from_secs(30);
    while info_field(&mut c, "rdb_changes_since_last_save") != "0" || c.cmd(&["LASTSAVE"]) == before
    {
        assert!(Instant::now() < deadline, "no save: {}", server.logs());
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(info_field(&mut c, "rdb_last_bgsave_status"), "ok");
    for shard in 0..2 {
        assert_eq!(snapshots(&dir, shard), 1, "shard {shard}");
    }
    drop(server);
    let server = start(PortMode::Forward, 2, &dir, "");
    check_keys(&server, PortMode::Forward, 100);
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

/// SHUTDOWN without rules writes the log's last records (no second of everysec
/// lost); SHUTDOWN SAVE writes every shard's snapshot; both exit with status 0.
#[test]
fn shutdown_syncs_the_log_or_saves() {
    let dir = data_dir("shutdown");
    for mode in [PortMode::Forward, PortMode::PerShard] {
        let _ = std::fs::remove_dir_all(&dir);
        let mut server = start(mode, 2, &dir, "");
        let keys = 300;
        write_keys(&server, keys);
        server.raw().send(&encode(&["SHUTDOWN"]));
        assert_eq!(server.wait_exit(Duration::from_secs(10)), Some(0));
        assert_eq!(
            snapshots(&dir, 0) + snapshots(&dir, 1),
            0,
            "no rules: no save"
        );
        let mut server = start(mode, 2, &dir, "");
        check_keys(&server, mode, keys);
        server.raw().send(&encode(&["SHUTDOWN", "SAVE"]));
        assert_eq!(server.wait_exit(Duration::from_secs(10)), Some(0));
        for shard in 0..2 {
            assert_eq!(snapshots(&dir, shard), 1, "shard {shard}");
        }
        let server = start(mode, 2, &dir, "");
        check_keys(&server, mode, keys);
        drop(server);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Writes `k0..keys` and SHUTDOWN in one pipelined burst to a fresh server on
/// `dir`, waits for it to exit 0, restarts it and checks every key is there.
fn burst_then_shutdown(shards: usize, dir: &Path, fault: Option<&str>, keys: usize) {
    let _ = std::fs::remove_dir_all(dir);
    let args = [
        "--dir",
        dir.to_str().unwrap(),
        "--durability",
        "everysec",
        "--save",
        "",
    ];
    let env: Vec<(&str, &str)> = fault.map(|f| ("RUVIO_FAULT", f)).into_iter().collect();
    let mut server = Server::ruvio_with_env(PortMode::Forward, shards, &args, &env);
    let mut burst = Vec::new();
    for i in 0..keys {
        burst.extend_from_slice(&encode(&["SET", &format!("k{i}"), &i.to_string()]));
    }
    burst.extend_from_slice(&encode(&["SHUTDOWN"]));
    // The connection stays open until the exit: closing it with replies
    // unread would reset it before the server read the whole burst.
    let mut conn = server.raw();
    conn.send(&burst);
    let exit = server.wait_exit(Duration::from_secs(10));
    assert_eq!(exit, Some(0), "{shards} shard(s), fault {fault:?}");
    drop(conn);
    let server = start(PortMode::Forward, shards, dir, "");
    let mut conns = conns(&server, shards);
    for i in 0..keys {
        let key = format!("k{i}");
        let want = format!("${}\r\n{i}\r\n", i.to_string().len());
        let got = owner(&mut conns, &key).cmd(&["GET", &key]);
        assert_eq!(
            got,
            want.as_bytes(),
            "{key}: {shards} shard(s), fault {fault:?}"
        );
    }
}

/// SHUTDOWN right behind a pipelined burst of writes, while the log's write of
/// them is likely in flight (a direct write rewrites whole blocks, so the exit's
/// flush waits for it): every write the server took is there after the restart.
#[test]
fn shutdown_behind_a_burst_of_writes_keeps_them_all() {
    let dir = data_dir("shutdown-burst");
    for _round in 0..3 {
        burst_then_shutdown(2, &dir, None, 3000);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The same with a shard's log write certain to be in flight when SHUTDOWN comes
/// (`wal:late-write-<shard>` reports each write 200 ms late): that shard flushes
/// only once the write ends, and the process must not exit before it has (it once
/// did as soon as every shard had answered the gather, losing that shard's last
/// writes).
#[test]
fn shutdown_waits_for_a_log_write_in_flight() {
    let dir = data_dir("shutdown-late-write");
    burst_then_shutdown(1, &dir, Some("wal:late-write-0"), 2000);
    burst_then_shutdown(2, &dir, Some("wal:late-write-0"), 2000);
    burst_then_shutdown(2, &dir, Some("wal:late-write-1"), 2000);
    let _ = std::fs::remove_dir_all(&dir);
}

/// SIGTERM with rules configured saves every shard and exits 0, as Redis.
#[test]
fn sigterm_saves_and_exits() {
    let dir = data_dir("sigterm");
    let mut server = start(PortMode::Forward, 2, &dir, "3600 1");
    write_keys(&server, 200);
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &server.pid().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    assert_eq!(server.wait_exit(Duration::from_secs(10)), Some(0));
    for shard in 0..2 {
        assert_eq!(snapshots(&dir, shard), 1, "shard {shard}");
    }
    let server = start(PortMode::Forward, 2, &dir, "");
    check_keys(&server, PortMode::Forward, 200);
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A save that fails (the debug build's `RUVIO_FAULT=snapshot:fail`): BGSAVE ends
/// with `rdb_last_bgsave_status:err` and LASTSAVE unmoved; SHUTDOWN SAVE answers
/// Redis' error and the server goes on; with FORCE it exits.
#[test]
fn failed_saves_are_reported_and_shutdown_refused_unless_forced() {
    let dir = data_dir("failing");
    let dir_arg = dir.to_str().unwrap();
    let mut server = Server::ruvio_with_env(
        PortMode::Forward,
        2,
        &["--dir", dir_arg, "--durability", "everysec", "--save", ""],
        &[("RUVIO_FAULT", "snapshot:fail")],
    );
    let mut c = server.raw();
    let lastsave = c.cmd(&["LASTSAVE"]);
    assert_eq!(
        c.cmd(&["BGSAVE"]),
        b"+Background saving started\r\n".to_vec()
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while info_field(&mut c, "rdb_last_bgsave_status") != "err" {
        assert!(Instant::now() < deadline, "the failure never showed");
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(info_field(&mut c, "rdb_bgsave_in_progress"), "0");
    assert_eq!(c.cmd(&["LASTSAVE"]), lastsave);
    assert_eq!(
        c.cmd(&["SHUTDOWN", "SAVE"]),
        b"-ERR Errors trying to SHUTDOWN. Check logs.\r\n".to_vec()
    );
    assert_eq!(c.cmd(&["PING"]), b"+PONG\r\n".to_vec());
    c.send(&encode(&["SHUTDOWN", "SAVE", "FORCE"]));
    assert_eq!(server.wait_exit(Duration::from_secs(10)), Some(0));
    let _ = std::fs::remove_dir_all(&dir);
}
