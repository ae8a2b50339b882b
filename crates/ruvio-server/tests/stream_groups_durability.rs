//! Streams with consumer groups survive restarts (`--durability everysec`, 2
//! shards in forward mode):
//!
//! - Log replay: XREADGROUP (logged as `XCLAIM ... FORCE JUSTID LASTID` per
//!   entry, `XGROUP SETID ... ENTRIESREAD` for NOACK, `XGROUP CREATECONSUMER`),
//!   XACK, XCLAIM, XAUTOCLAIM and XGROUP are replayed after SIGKILL into the same
//!   groups, PELs (owners, delivery counts and times) and last IDs. Consumers'
//!   seen times are the replay's, as on a Redis replica; history reads are not
//!   logged (Redis does not propagate them), so their delivery counts are not
//!   replayed either.
//! - SAVE: the snapshot holds the stream as RDB type 19 with its groups; a restart
//!   loads it and XINFO STREAM FULL (times included) reads as before.

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

fn start(dir: &Path) -> Server {
    let dir = dir.to_str().unwrap();
    Server::ruvio_with(
        PortMode::Forward,
        2,
        &["--dir", dir, "--durability", "everysec"],
    )
}

fn ok(c: &mut RawConn, args: &[&str]) -> Vec<u8> {
    let reply = c.cmd(args);
    assert!(!reply.starts_with(b"-"), "{args:?}: {}", show(&reply));
    reply
}

/// Two streams (one per shard) with groups, pending entries, acks and claims;
/// with `history`, a history read too (not logged, as Redis does not propagate
/// it: its delivery counts survive a snapshot, not a replay).
fn write_groups(server: &Server, history: bool) -> Vec<String> {
    let keys: Vec<String> = (0..2).map(|s| key_on_shard("events", s, 2)).collect();
    let mut c = server.raw();
    for key in &keys {
        for i in 1..=30 {
            ok(
                &mut c,
                &["XADD", key, &format!("{i}-1"), "job", &i.to_string()],
            );
        }
        ok(&mut c, &["XGROUP", "CREATE", key, "workers", "0"]);
        ok(&mut c, &["XGROUP", "CREATE", key, "audit", "$"]);
        ok(
            &mut c,
            &["XGROUP", "CREATECONSUMER", key, "workers", "idle"],
        );
        ok(
            &mut c,
            &[
                "XREADGROUP",
                "GROUP",
                "workers",
                "w1",
                "COUNT",
                "10",
                "STREAMS",
                key,
                ">",
            ],
        );
        ok(
            &mut c,
            &[
                "XREADGROUP",
                "GROUP",
                "workers",
                "w2",
                "COUNT",
                "5",
                "STREAMS",
                key,
                ">",
            ],
        );
        ok(
            &mut c,
            &[
                "XREADGROUP",
                "GROUP",
                "workers",
                "w3",
                "NOACK",
                "COUNT",
                "3",
                "STREAMS",
                key,
                ">",
            ],
        );
        if history {
            ok(
                &mut c,
                &["XREADGROUP", "GROUP", "workers", "w1", "STREAMS", key, "0"],
            );
        }
        ok(&mut c, &["XACK", key, "workers", "2-1", "4-1", "12-1"]);
        ok(
            &mut c,
            &[
                "XCLAIM",
                key,
                "workers",
                "w2",
                "0",
                "5-1",
                "6-1",
                "RETRYCOUNT",
                "9",
            ],
        );
        ok(&mut c, &["XDEL", key, "7-1"]);
        ok(
            &mut c,
            &["XAUTOCLAIM", key, "workers", "w3", "0", "0", "COUNT", "4"],
        );
        ok(
            &mut c,
            &["XGROUP", "SETID", key, "audit", "20-1", "ENTRIESREAD", "20"],
        );
        ok(&mut c, &["XGROUP", "DELCONSUMER", key, "workers", "idle"]);
    }
    keys
}

/// What must read the same after a restart; `times` adds XINFO STREAM FULL
/// (seen and delivery times), which only a snapshot keeps exactly.
fn state(server: &Server, keys: &[String], times: bool) -> Vec<String> {
    let mut c = server.raw();
    let mut out = Vec::new();
    for key in keys {
        out.push(show(&c.cmd(&["XINFO", "GROUPS", key])));
        out.push(show(&c.cmd(&["XINFO", "STREAM", key])));
        out.push(show(&c.cmd(&["XPENDING", key, "workers"])));
        // Owner and delivery count of each pending entry (idle is the clock's).
        let rows = decode(&c.cmd(&["XPENDING", key, "workers", "-", "+", "100"]));
        let Value::Array(rows) = rows else {
            panic!("XPENDING rows: {rows:?}")
        };
        for row in rows {
            let Value::Array(cols) = row else { panic!() };
            out.push(format!(
                "{} {} {}",
                cols[0].text(),
                cols[1].text(),
                cols[3].text()
            ));
        }
        if times {
            out.push(show(
                &c.cmd(&["XINFO", "STREAM", key, "FULL", "COUNT", "0"]),
            ));
        }
    }
    out
}

#[test]
fn groups_replay_from_the_log_after_sigkill() {
    let dir = data_dir("replay");
    let server = start(&dir);
    let keys = write_groups(&server, false);
    let before = state(&server, &keys, false);
    std::thread::sleep(AFTER_SYNC);
    drop(server); // SIGKILL
    let server = start(&dir);
    assert_eq!(state(&server, &keys, false), before);
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn groups_survive_save_and_restart() {
    let dir = data_dir("save");
    let server = start(&dir);
    let keys = write_groups(&server, true);
    assert_eq!(server.raw().cmd(&["SAVE"]), b"+OK\r\n");
    let before = state(&server, &keys, true);
    std::thread::sleep(Duration::from_millis(50));
    drop(server); // SIGKILL: nothing written after the SAVE
    let server = start(&dir);
    assert_eq!(state(&server, &keys, true), before);
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}
