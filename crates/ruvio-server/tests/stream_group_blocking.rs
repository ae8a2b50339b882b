//! XREADGROUP BLOCK with real clients: woken by XADD from another client (on the
//! same shard and, in forward mode with 2 shards, on another), the entry made
//! pending for the consumer; timed out with a null array; and answered Redis
//! 7.0's errors when the group is destroyed (`-NOGROUP the consumer group this
//! client was blocked on no longer exists`) or the key deleted or overwritten by
//! SET (`-UNBLOCKED the stream key no longer exists`) while it waits; a BLPOP
//! waiter on the same name is served only by a list.
//!
//! Exact reply bytes throughout; `RUVIO_TEST_TARGET=redis` runs the same cases
//! against a real redis-server.

mod common;

use common::*;
use std::thread::sleep;
use std::time::Duration;

/// How long a client must stay silent to count as blocked.
const STILL_BLOCKED: Duration = Duration::from_millis(150);

fn create_group(conn: &mut RawConn, key: &str) {
    conn.roundtrip(
        &encode(&["XGROUP", "CREATE", key, "g", "$", "MKSTREAM"]),
        b"+OK\r\n",
    );
}

/// Sends `XREADGROUP GROUP g <consumer> BLOCK <block_ms> STREAMS <key> >`.
fn send_xreadgroup_block(conn: &mut RawConn, key: &str, consumer: &str, block_ms: &str) {
    conn.send(&encode(&[
        "XREADGROUP",
        "GROUP",
        "g",
        consumer,
        "BLOCK",
        block_ms,
        "STREAMS",
        key,
        ">",
    ]));
}

/// A new client blocked with no timeout reading `key` for `consumer` of group
/// `g`, checked to stay silent.
fn blocked_forever(server: &Server, key: &str, consumer: &str) -> RawConn {
    let mut waiter = server.raw();
    send_xreadgroup_block(&mut waiter, key, consumer, "0");
    waiter.expect_silence(STILL_BLOCKED);
    waiter
}

/// A blocked consumer gets the next entry, which is then pending for it.
fn woken_by_xadd(server: &Server) {
    let key = &keys_per_shard("wake", server.shards.max(2))[0];
    let mut writer = server.raw();
    create_group(&mut writer, key);
    let mut waiter = blocked_forever(server, key, "alice");
    writer.roundtrip(&encode(&["XADD", key, "5-1", "f", "v"]), b"$3\r\n5-1\r\n");
    waiter.expect(&stream_entry_reply(key, "5-1", "f", "v"));
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
    let keys = keys_per_shard("two", server.shards.max(2));
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
    waiter.expect(&stream_entry_reply(&keys[1], "9-9", "a", "b"));
    for key in &keys {
        writer.roundtrip(&encode(&["DEL", key]), b":1\r\n");
    }
}

/// BLOCK ms times out with a null array; an XADD the group already delivered
/// (SETID past it) does not answer early.
fn times_out(server: &Server) {
    let key = &keys_per_shard("late", server.shards.max(2))[0];
    let mut writer = server.raw();
    create_group(&mut writer, key);
    writer.roundtrip(&encode(&["XGROUP", "SETID", key, "g", "9-0"]), b"+OK\r\n");
    let mut waiter = server.raw();
    send_xreadgroup_block(&mut waiter, key, "carol", "300");
    sleep(Duration::from_millis(60));
    writer.roundtrip(&encode(&["XADD", key, "2-0", "f", "v"]), b"$3\r\n2-0\r\n");
    waiter.expect_silence(Duration::from_millis(100));
    waiter.expect(b"*-1\r\n");
    writer.roundtrip(&encode(&["DEL", key]), b":1\r\n");
}

/// Destroying the group answers the blocked client with Redis 7.0's NOGROUP.
fn group_destroyed(server: &Server) {
    let key = &keys_per_shard("gone", server.shards.max(2))[1];
    let mut writer = server.raw();
    create_group(&mut writer, key);
    let mut waiter = blocked_forever(server, key, "dave");
    writer.roundtrip(&encode(&["XGROUP", "DESTROY", key, "g"]), b":1\r\n");
    waiter.expect(b"-NOGROUP the consumer group this client was blocked on no longer exists\r\n");
    writer.roundtrip(&encode(&["DEL", key]), b":1\r\n");
}

/// Deleting the key answers the blocked client with Redis 7.0's UNBLOCKED.
fn key_deleted(server: &Server) {
    let key = &keys_per_shard("del", server.shards.max(2))[0];
    let mut writer = server.raw();
    create_group(&mut writer, key);
    let mut waiter = blocked_forever(server, key, "erin");
    writer.roundtrip(&encode(&["DEL", key]), b":1\r\n");
    waiter.expect(b"-UNBLOCKED the stream key no longer exists\r\n");
}

/// A SET over the stream (its type changes) answers the blocked client as a
/// deletion does.
fn key_overwritten(server: &Server) {
    let key = &keys_per_shard("set", server.shards.max(2))[1];
    let mut writer = server.raw();
    create_group(&mut writer, key);
    let mut waiter = blocked_forever(server, key, "frank");
    writer.roundtrip(&encode(&["SET", key, "str"]), b"+OK\r\n");
    waiter.expect(b"-UNBLOCKED the stream key no longer exists\r\n");
    writer.roundtrip(&encode(&["DEL", key]), b":1\r\n");
}

/// A client blocked in BLPOP on a name that then becomes a stream with a client
/// blocked in XREADGROUP on it: the XADD serves neither, deleting the stream
/// unblocks only the stream reader, and a later LPUSH serves the list waiter
/// (as redis-server 7.0 does).
fn list_waiter_on_the_same_name(server: &Server) {
    let key = &keys_per_shard("both", server.shards.max(2))[0];
    let mut writer = server.raw();
    writer.cmd(&["DEL", key]);
    let mut popper = server.raw();
    popper.send(&encode(&["BLPOP", key, "0"]));
    popper.expect_silence(STILL_BLOCKED);
    writer.roundtrip(
        &encode(&["XADD", key, "666", "key", "value"]),
        b"$5\r\n666-0\r\n",
    );
    writer.roundtrip(&encode(&["XGROUP", "CREATE", key, "g", "$"]), b"+OK\r\n");
    let mut reader = blocked_forever(server, key, "grace");
    popper.expect_silence(STILL_BLOCKED);
    writer.roundtrip(&encode(&["DEL", key]), b":1\r\n");
    reader.expect(b"-UNBLOCKED the stream key no longer exists\r\n");
    popper.expect_silence(STILL_BLOCKED);
    writer.roundtrip(&encode(&["LPUSH", key, "x"]), b":1\r\n");
    popper.expect(format!("*2\r\n{}{}", bulk(key), bulk("x")).as_bytes());
    writer.roundtrip(&encode(&["EXISTS", key]), b":0\r\n");
}

fn all_cases(server: &Server) {
    woken_by_xadd(server);
    across_shards(server);
    times_out(server);
    group_destroyed(server);
    key_deleted(server);
    key_overwritten(server);
    list_waiter_on_the_same_name(server);
}

#[test]
fn stream_group_blocking_forward_one_shard() {
    all_cases(&Server::forward(1));
}

#[test]
fn stream_group_blocking_forward_two_shards() {
    all_cases(&Server::forward(2));
}
