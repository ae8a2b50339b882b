//! XREADGROUP BLOCK with real clients: woken by XADD from another client (on the
//! same shard and, in forward mode with 2 shards, on another), the entry made
//! pending for the consumer; timed out with a null array; and answered Redis
//! 7.0's errors when the group is destroyed (`-NOGROUP the consumer group this
//! client was blocked on no longer exists`) or the key deleted (`-UNBLOCKED the
//! stream key no longer exists`) while it waits.
//!
//! Exact reply bytes throughout; `RUVIO_TEST_TARGET=redis` runs the same cases
//! against a real redis-server.

mod common;

use common::*;
use std::thread::sleep;
use std::time::Duration;

/// How long a client must stay silent to count as blocked.
const STILL_BLOCKED: Duration = Duration::from_millis(150);

fn bulk(s: &str) -> String {
    format!("${}\r\n{s}\r\n", s.len())
}

/// XREADGROUP's RESP2 reply for one stream and one entry with one field.
fn one_entry(key: &str, id: &str, field: &str, value: &str) -> Vec<u8> {
    format!(
        "*1\r\n*2\r\n{}*1\r\n*2\r\n{}*2\r\n{}{}",
        bulk(key),
        bulk(id),
        bulk(field),
        bulk(value)
    )
    .into_bytes()
}

/// One key per shard, named from `prefix`.
fn keys_per_shard(server: &Server, prefix: &str) -> Vec<String> {
    (0..server.shards.max(2))
        .map(|shard| key_on_shard(prefix, shard, server.shards.max(2)))
        .collect()
}

fn create_group(conn: &mut RawConn, key: &str) {
    conn.roundtrip(
        &encode(&["XGROUP", "CREATE", key, "g", "$", "MKSTREAM"]),
        b"+OK\r\n",
    );
}

/// A blocked consumer gets the next entry, which is then pending for it.
fn woken_by_xadd(server: &Server) {
    let key = &keys_per_shard(server, "wake")[0];
    let mut writer = server.raw();
    create_group(&mut writer, key);
    let mut waiter = server.raw();
    waiter.send(&encode(&[
        "XREADGROUP",
        "GROUP",
        "g",
        "alice",
        "BLOCK",
        "0",
        "STREAMS",
        key,
        ">",
    ]));
    waiter.expect_silence(STILL_BLOCKED);
    writer.roundtrip(&encode(&["XADD", key, "5-1", "f", "v"]), b"$3\r\n5-1\r\n");
    waiter.expect(&one_entry(key, "5-1", "f", "v"));
    let summary = writer.cmd(&["XPENDING", key, "g"]);
    let expected = format!(
        "*4\r\n:1\r\n{}{}*1\r\n*2\r\n{}{}",
        bulk("5-1"),
        bulk("5-1"),
        bulk("alice"),
        bulk("1")
    );
    assert_eq!(show(&summary), show(expected.as_bytes()));
    writer.roundtrip(&encode(&["DEL", key]), b":1\r\n");
}

/// Blocked on two streams on different shards, woken by the second.
fn across_shards(server: &Server) {
    let keys = keys_per_shard(server, "two");
    let mut writer = server.raw();
    for key in &keys {
        create_group(&mut writer, key);
    }
    let mut waiter = server.raw();
    waiter.send(&encode(&[
        "XREADGROUP",
        "GROUP",
        "g",
        "bob",
        "COUNT",
        "1",
        "BLOCK",
        "0",
        "STREAMS",
        &keys[0],
        &keys[1],
        ">",
        ">",
    ]));
    waiter.expect_silence(STILL_BLOCKED);
    writer.roundtrip(
        &encode(&["XADD", &keys[1], "9-9", "a", "b"]),
        b"$3\r\n9-9\r\n",
    );
    waiter.expect(&one_entry(&keys[1], "9-9", "a", "b"));
    for key in &keys {
        writer.roundtrip(&encode(&["DEL", key]), b":1\r\n");
    }
}

/// BLOCK ms times out with a null array; an XADD the group already delivered
/// (SETID past it) does not answer early.
fn times_out(server: &Server) {
    let key = &keys_per_shard(server, "late")[0];
    let mut writer = server.raw();
    create_group(&mut writer, key);
    writer.roundtrip(&encode(&["XGROUP", "SETID", key, "g", "9-0"]), b"+OK\r\n");
    let mut waiter = server.raw();
    waiter.send(&encode(&[
        "XREADGROUP",
        "GROUP",
        "g",
        "carol",
        "BLOCK",
        "300",
        "STREAMS",
        key,
        ">",
    ]));
    sleep(Duration::from_millis(60));
    writer.roundtrip(&encode(&["XADD", key, "2-0", "f", "v"]), b"$3\r\n2-0\r\n");
    waiter.expect_silence(Duration::from_millis(100));
    waiter.expect(b"*-1\r\n");
    writer.roundtrip(&encode(&["DEL", key]), b":1\r\n");
}

/// Destroying the group answers the blocked client with Redis 7.0's NOGROUP.
fn group_destroyed(server: &Server) {
    let key = &keys_per_shard(server, "gone")[1];
    let mut writer = server.raw();
    create_group(&mut writer, key);
    let mut waiter = server.raw();
    waiter.send(&encode(&[
        "XREADGROUP",
        "GROUP",
        "g",
        "dave",
        "BLOCK",
        "0",
        "STREAMS",
        key,
        ">",
    ]));
    waiter.expect_silence(STILL_BLOCKED);
    writer.roundtrip(&encode(&["XGROUP", "DESTROY", key, "g"]), b":1\r\n");
    waiter.expect(b"-NOGROUP the consumer group this client was blocked on no longer exists\r\n");
    writer.roundtrip(&encode(&["DEL", key]), b":1\r\n");
}

/// Deleting the key answers the blocked client with Redis 7.0's UNBLOCKED.
fn key_deleted(server: &Server) {
    let key = &keys_per_shard(server, "del")[0];
    let mut writer = server.raw();
    create_group(&mut writer, key);
    let mut waiter = server.raw();
    waiter.send(&encode(&[
        "XREADGROUP",
        "GROUP",
        "g",
        "erin",
        "BLOCK",
        "0",
        "STREAMS",
        key,
        ">",
    ]));
    waiter.expect_silence(STILL_BLOCKED);
    writer.roundtrip(&encode(&["DEL", key]), b":1\r\n");
    waiter.expect(b"-UNBLOCKED the stream key no longer exists\r\n");
}

fn all_cases(server: &Server) {
    woken_by_xadd(server);
    across_shards(server);
    times_out(server);
    group_destroyed(server);
    key_deleted(server);
}

#[test]
fn stream_group_blocking_forward_one_shard() {
    all_cases(&Server::forward(1));
}

#[test]
fn stream_group_blocking_forward_two_shards() {
    all_cases(&Server::forward(2));
}
