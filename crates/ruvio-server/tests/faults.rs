//! Fault containment, shown with the fault points of a debug build (the binary these
//! tests start): `RUVIO_FAULT=lpush:before-write` makes LPUSH panic before it touches
//! the keyspace, `RUVIO_FAULT=lpush:mid-write` while it changes an existing list
//! (crates/ruvio-engine/src/fault.rs, docs/faults.md).
//!
//! - A panic before any change is answered with an error; the connection, the
//!   shard and the other shard go on, and the keyspace is exactly as before, whether
//!   the command ran on the client's shard or was forwarded to the other one.
//! - A panic after the change began ends the whole process with status 70 and a
//!   clear message (a service manager restarts it), rather than serve a value that
//!   may be half-changed or leave a dead shard behind.

mod common;

use common::*;
use std::time::Duration;

const PANIC_BEFORE_WRITE: &[u8] =
    b"-ERR internal error in 'lpush' command: nothing was changed (see the server log)\r\n";

/// Exit status of a process that stopped because a shard could not go on.
const EXIT_SHARD_FAILED: i32 = 70;

fn server_with_fault(shards: usize, fault: &str) -> Server {
    Server::ruvio_with_env(PortMode::Forward, shards, &[], &[("RUVIO_FAULT", fault)])
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

#[test]
fn a_panic_after_the_change_began_ends_the_process_with_a_message() {
    for shards in [1, 2] {
        let mut server = server_with_fault(shards, "lpush:mid-write");
        let mut conn = server.raw();
        let key = key_on_shard("list", shards - 1, shards);
        conn.roundtrip(&encode(&["RPUSH", &key, "a"]), b":1\r\n");
        conn.send(&encode(&["LPUSH", &key, "x"]));
        let status = server.wait_exit(Duration::from_secs(10));
        assert_eq!(status, Some(EXIT_SHARD_FAILED), "{}", server.logs());
        let logs = server.logs();
        assert!(
            logs.contains("'lpush' panicked after it had begun changing the keyspace"),
            "{logs}"
        );
    }
}
