//! Fault containment, shown with the fault points of a debug build (the binary these
//! tests start): `RUVIO_FAULT=lpush:before-write` makes LPUSH panic before it touches
//! the keyspace, `RUVIO_FAULT=lpush:mid-write` after it changed an existing list,
//! `RUVIO_FAULT=mset:mid-write` MSET after it set its first key
//! (crates/ruvio-engine/src/fault.rs, docs/faults.md).
//!
//! - A panic before any change is answered with an error; the connection, the
//!   shard and the other shard go on, and the keyspace is exactly as before, whether
//!   the command ran on the client's shard or was forwarded to the other one.
//! - A panic after the change began is undone from the engine's undo journal
//!   (crates/ruvio-engine/src/undo.rs; every change point of 103 commands is cut in
//!   crates/ruvio-engine/tests/undo.rs), shown with `RUVIO_FAULT=mset:mid-write`
//!   (MSET panics after setting its first key): the same error, the keyspace as
//!   before (a script's earlier writes included), nothing logged, and everything
//!   goes on.
//!   LPUSH on a list changed in place is undone too (the journal copies a small
//!   one first and records the inverse of each push into a big one), shown with
//!   `RUVIO_FAULT=lpush:mid-write`.
//! - A panic after a change the journal cannot undo (a script's HSET into a
//!   compact hash made bigger than the journal's copy bound by a raised
//!   `hash-max-listpack-value`, before its MSET panics) ends the whole process with status 70 and a clear message
//!   (a service manager restarts it), rather than serve a value that may be
//!   half-changed or leave a dead shard behind; with a log under `always` the
//!   restart has every acknowledged write and not the half-done change.

mod common;

use common::*;
use std::time::Duration;

const PANIC_BEFORE_WRITE: &[u8] =
    b"-ERR internal error in 'lpush' command: nothing was changed (see the server log)\r\n";

/// Exit status of a process that stopped because a shard could not go on.
const EXIT_SHARD_FAILED: i32 = 70;

fn server_with_fault(shards: usize, fault: &str) -> Server {
    server_with_fault_and(shards, fault, &[])
}

fn server_with_fault_and(shards: usize, fault: &str, extra: &[&str]) -> Server {
    Server::ruvio_with_env(PortMode::Forward, shards, extra, &[("RUVIO_FAULT", fault)])
}

#[test]
fn a_panic_before_any_change_is_an_error_reply_and_everything_goes_on() {
    let server = server_with_fault(2, "lpush:before-write");
    let mut conn = server.raw();
    for shard in 0..2 {
        let key = key_on_shard("list", shard, 2);
        // RPUSH shares LPUSH's code but not its fault point.
        conn.roundtrip(&encode(&["RPUSH", &key, "a", "b"]), b":2\r\n");
        for _ in 0..3 {
            conn.roundtrip(&encode(&["LPUSH", &key, "x", "y"]), PANIC_BEFORE_WRITE);
        }
        conn.roundtrip(
            &encode(&["LRANGE", &key, "0", "-1"]),
            b"*2\r\n$1\r\na\r\n$1\r\nb\r\n",
        );
        // A pipeline around the failing command keeps its order and its replies.
        let mut pipeline = encode(&["PING"]);
        pipeline.extend(encode(&["LPUSH", &key, "z"]));
        pipeline.extend(encode(&["LLEN", &key]));
        conn.send(&pipeline);
        conn.expect(b"+PONG\r\n");
        conn.expect(PANIC_BEFORE_WRITE);
        conn.expect(b":2\r\n");
    }
    // Other clients, on either shard, are served as before.
    for _ in 0..4 {
        let mut other = server.raw();
        other.roundtrip(&encode(&["SET", "k", "v"]), b"+OK\r\n");
        other.roundtrip(&encode(&["GET", "k"]), b"$1\r\nv\r\n");
    }
    assert!(contains(
        server.logs().as_bytes(),
        b"'lpush' panicked before changing anything"
    ));
}

/// A big list (a quicklist: the journal records the inverse of each change).
fn big_list_args(key: &str) -> Vec<String> {
    let mut args = vec!["RPUSH".to_string(), key.to_string()];
    args.extend((0..2000).map(|i| format!("element-{i:08}")));
    args
}

const PANIC_IN_MSET: &[u8] =
    b"-ERR internal error in 'mset' command: nothing was changed (see the server log)\r\n";

#[test]
fn a_panic_part_way_is_undone_and_everything_goes_on() {
    for shards in [1, 2] {
        let dir = std::env::temp_dir().join(format!(
            "ruvio-faults-{}-in-place-{shards}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        let d = dir.to_str().expect("a UTF-8 temporary directory");
        let logged = ["--durability", "always", "--dir", d];
        let server = server_with_fault_and(shards, "mset:mid-write", &logged);
        let mut conn = server.raw();
        let tag = key_on_shard("undo", shards - 1, shards);
        let key = |name: &str| format!("{{{tag}}}{name}");
        conn.roundtrip(&encode(&["SET", &key("a"), "old"]), b"+OK\r\n");
        let mset = ["MSET", &key("a"), "new", &key("b"), "new"];
        conn.roundtrip(&encode(&mset), PANIC_IN_MSET);
        conn.roundtrip(&encode(&["GET", &key("a")]), b"$3\r\nold\r\n");
        conn.roundtrip(&encode(&["EXISTS", &key("b")]), b":0\r\n");
        let logs = server.logs();
        assert!(
            logs.contains("'mset' panicked part-way; its changes were undone"),
            "{logs}"
        );
        // A script's earlier writes go with it.
        let script = "redis.call('SET', KEYS[1], 'set'); redis.call('DEL', KEYS[2]); \
                      return redis.call('MSET', KEYS[3], 'x', KEYS[4], 'y')";
        conn.roundtrip(&encode(&["SET", &key("kept"), "v"]), b"+OK\r\n");
        let keys = [key("new"), key("kept"), key("c"), key("d")];
        let mut eval = vec!["EVAL", script, "4"];
        eval.extend(keys.iter().map(String::as_str));
        let failed = conn.cmd(&eval);
        assert!(
            failed.starts_with(b"-ERR internal error in 'eval' command: nothing was changed"),
            "{}",
            show(&failed)
        );
        conn.roundtrip(&encode(&["EXISTS", &key("new"), &key("c")]), b":0\r\n");
        conn.roundtrip(&encode(&["GET", &key("kept")]), b"$1\r\nv\r\n");
        // The shard goes on, and so do writes.
        conn.roundtrip(&encode(&["SET", &key("b"), "later"]), b"+OK\r\n");
        drop(server);
        // Nothing of the undone commands was logged.
        let server = Server::ruvio_with(PortMode::Forward, shards, &logged);
        let mut conn = server.raw();
        let a = loop {
            let reply = conn.cmd(&["GET", &key("a")]);
            if !reply.starts_with(b"-LOADING") {
                break reply;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        assert_eq!(a, b"$3\r\nold\r\n");
        conn.roundtrip(&encode(&["GET", &key("b")]), b"$5\r\nlater\r\n");
        conn.roundtrip(&encode(&["EXISTS", &key("new"), &key("c")]), b":0\r\n");
        conn.roundtrip(&encode(&["GET", &key("kept")]), b"$1\r\nv\r\n");
        drop(server);
        let _ = std::fs::remove_dir_all(&dir);
    }
}

const PANIC_IN_LPUSH: &[u8] =
    b"-ERR internal error in 'lpush' command: nothing was changed (see the server log)\r\n";

/// A list changed part-way by LPUSH is put back as it was: a small one (one
/// compact block, which the journal copies before the change) and a big one (a
/// quicklist, whose pushes the journal takes off again).
#[test]
fn a_panic_in_the_middle_of_changing_a_list_is_undone() {
    for shards in [1, 2] {
        let server = server_with_fault(shards, "lpush:mid-write");
        let mut conn = server.raw();
        let small = key_on_shard("small", shards - 1, shards);
        let big = key_on_shard("big", 0, shards);
        conn.roundtrip(&encode(&["RPUSH", &small, "a", "b", "c"]), b":3\r\n");
        let args = big_list_args(&big);
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        conn.roundtrip(&encode(&refs), b":2000\r\n");
        for (key, len) in [(&small, 3), (&big, 2000)] {
            let dump = conn.cmd(&["DUMP", key]);
            conn.roundtrip(&encode(&["LPUSH", key, "x", "y"]), PANIC_IN_LPUSH);
            assert_eq!(show(&conn.cmd(&["DUMP", key])), show(&dump));
            conn.roundtrip(&encode(&["LLEN", key]), format!(":{len}\r\n").as_bytes());
            let pushed = format!(":{}\r\n", len + 1);
            conn.roundtrip(&encode(&["RPUSH", key, "d"]), pushed.as_bytes());
        }
        conn.roundtrip(
            &encode(&["LRANGE", &small, "0", "-1"]),
            b"*4\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n$1\r\nd\r\n",
        );
        let logs = server.logs();
        assert!(
            logs.contains("'lpush' panicked part-way; its changes were undone"),
            "{logs}"
        );
    }
}

/// A compact hash past the undo journal's copy bound (`hash-max-listpack-value`
/// raised): a change of it in place is neither copied nor reversed. Then a
/// script that changes it and runs MSET, which `mset:mid-write` makes panic.
fn wide_hash_then_a_script(conn: &mut RawConn, tag: &str) -> Vec<u8> {
    let key = |name: &str| format!("{{{tag}}}{name}");
    conn.roundtrip(
        &encode(&["CONFIG", "SET", "hash-max-listpack-value", "100000"]),
        b"+OK\r\n",
    );
    let long = "v".repeat(20_000);
    conn.roundtrip(&encode(&["HSET", &key("wide"), "f", &long]), b":1\r\n");
    let script = "redis.call('HSET', KEYS[1], 'g', 'x'); \
                  return redis.call('MSET', KEYS[2], 'a', KEYS[3], 'b')";
    encode(&["EVAL", script, "3", &key("wide"), &key("m1"), &key("m2")])
}

#[test]
fn a_panic_after_a_change_that_cannot_be_undone_ends_the_process_with_a_message() {
    for shards in [1, 2] {
        let mut server = server_with_fault(shards, "mset:mid-write");
        let mut conn = server.raw();
        let tag = key_on_shard("wide", shards - 1, shards);
        let eval = wide_hash_then_a_script(&mut conn, &tag);
        conn.send(&eval);
        let status = server.wait_exit(Duration::from_secs(10));
        assert_eq!(status, Some(EXIT_SHARD_FAILED), "{}", server.logs());
        let logs = server.logs();
        assert!(
            logs.contains("'eval' panicked after a change that cannot be undone in place"),
            "{logs}"
        );
    }
}

/// With a log under `always` (every acknowledged write is on disk first), the
/// restart after such an exit has every acknowledged write of every shard and none
/// of the command that panicked: its half-done change is undone by the replay,
/// which never saw it (a command's records are logged after it returns).
#[test]
fn after_a_mid_write_panic_the_restart_undoes_it_and_keeps_every_acknowledged_write() {
    for shards in [1, 2] {
        let dir =
            std::env::temp_dir().join(format!("ruvio-faults-{}-undo-{shards}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let d = dir.to_str().expect("a UTF-8 temporary directory");
        let logged = ["--durability", "always", "--dir", d];
        let mut server = server_with_fault_and(shards, "mset:mid-write", &logged);
        let mut conn = server.raw();
        let tags: Vec<String> = (0..shards)
            .map(|s| key_on_shard("undo", s, shards))
            .collect();
        for tag in &tags {
            let args = big_list_args(&format!("{{{tag}}}list"));
            let refs: Vec<&str> = args.iter().map(String::as_str).collect();
            conn.roundtrip(&encode(&refs), b":2000\r\n");
        }
        let eval = wide_hash_then_a_script(&mut conn, &tags[shards - 1]);
        conn.send(&eval);
        let status = server.wait_exit(Duration::from_secs(10));
        assert_eq!(status, Some(EXIT_SHARD_FAILED), "{}", server.logs());
        drop(server);
        let server = Server::ruvio_with(PortMode::Forward, shards, &logged);
        let mut conn = server.raw();
        let wide = format!("{{{}}}wide", tags[shards - 1]);
        let fields = loop {
            let reply = conn.cmd(&["HLEN", &wide]);
            if !reply.starts_with(b"-LOADING") {
                break reply;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        assert_eq!(show(&fields), show(b":1\r\n"));
        let m1 = format!("{{{}}}m1", tags[shards - 1]);
        conn.roundtrip(&encode(&["EXISTS", &m1]), b":0\r\n");
        for tag in &tags {
            let list = format!("{{{tag}}}list");
            conn.roundtrip(&encode(&["LLEN", &list]), b":2000\r\n");
        }
        drop(server);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
