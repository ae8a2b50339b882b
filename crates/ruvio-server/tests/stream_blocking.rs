//! XREAD BLOCK with real clients: woken by XADD from another client (on the same
//! shard and, in forward mode, on another), served only what came after `$` as it
//! stood when the client blocked, in blocking order (a reader that waits on does
//! not hold up the ones behind it), and timed out with a null array.
//!
//! Exact reply bytes throughout; `RUVIO_TEST_TARGET=redis` runs the same cases
//! against a real redis-server.

mod common;

use common::*;
use std::thread::sleep;
use std::time::Duration;

/// How long a client must stay silent to count as blocked.
const STILL_BLOCKED: Duration = Duration::from_millis(150);
/// Pause that lets the server park one client before the next one blocks.
const LET_IT_PARK: Duration = Duration::from_millis(60);

/// `$` is the last ID when the client blocked: an entry added before the wake-up
/// write is not served, the new one is.
fn dollar_serves_only_what_came_after(server: &Server) {
    let key = &keys_per_shard("dollar", server.shards.max(2))[0];
    let mut writer = server.raw();
    writer.roundtrip(&encode(&["XADD", key, "1-1", "old", "x"]), b"$3\r\n1-1\r\n");
    let mut waiter = server.raw();
    waiter.send(&encode(&["XREAD", "BLOCK", "0", "STREAMS", key, "$"]));
    waiter.expect_silence(STILL_BLOCKED);
    writer.roundtrip(&encode(&["XADD", key, "2-1", "new", "y"]), b"$3\r\n2-1\r\n");
    waiter.expect(&stream_entry_reply(key, "2-1", "new", "y"));
    writer.roundtrip(&encode(&["DEL", key]), b":1\r\n");
}

/// A missing stream's `$` is 0-0: the first entry wakes the client.
fn missing_stream_is_woken_by_its_first_entry(server: &Server) {
    let key = &keys_per_shard("fresh", server.shards.max(2))[1];
    let mut waiter = server.raw();
    waiter.send(&encode(&[
        "XREAD", "COUNT", "5", "BLOCK", "0", "STREAMS", key, "$",
    ]));
    waiter.expect_silence(STILL_BLOCKED);
    let mut writer = server.raw();
    writer.roundtrip(&encode(&["XADD", key, "5-0", "f", "v"]), b"$3\r\n5-0\r\n");
    waiter.expect(&stream_entry_reply(key, "5-0", "f", "v"));
    writer.roundtrip(&encode(&["DEL", key]), b":1\r\n");
}

/// Two readers after the same ID both get the entry, in blocking order.
fn every_reader_is_served(server: &Server) {
    let key = &keys_per_shard("fan", server.shards.max(2))[0];
    let mut first = server.raw();
    let mut second = server.raw();
    first.send(&encode(&["XREAD", "BLOCK", "0", "STREAMS", key, "0-0"]));
    sleep(LET_IT_PARK);
    second.send(&encode(&["XREAD", "BLOCK", "0", "STREAMS", key, "0"]));
    sleep(LET_IT_PARK);
    let mut writer = server.raw();
    writer.roundtrip(&encode(&["XADD", key, "7-7", "a", "b"]), b"$3\r\n7-7\r\n");
    first.expect(&stream_entry_reply(key, "7-7", "a", "b"));
    second.expect(&stream_entry_reply(key, "7-7", "a", "b"));
    writer.roundtrip(&encode(&["DEL", key]), b":1\r\n");
}

/// BLOCK ms times out with a null array (RESP2) or null (RESP3); an XADD of an
/// entry below the ID asked for does not answer it early.
fn times_out(server: &Server) {
    let key = &keys_per_shard("late", server.shards.max(2))[0];
    let mut writer = server.raw();
    writer.roundtrip(&encode(&["XADD", key, "1-0", "f", "v"]), b"$3\r\n1-0\r\n");
    let mut waiter = server.raw();
    waiter.send(&encode(&["XREAD", "BLOCK", "300", "STREAMS", key, "9-0"]));
    sleep(LET_IT_PARK);
    writer.roundtrip(&encode(&["XADD", key, "2-0", "f", "v"]), b"$3\r\n2-0\r\n");
    waiter.expect_silence(Duration::from_millis(100));
    waiter.expect(b"*-1\r\n");
    let mut resp3 = server.raw();
    let hello = resp3.cmd(&["HELLO", "3"]);
    assert!(hello.starts_with(b"%"));
    resp3.roundtrip(
        &encode(&["XREAD", "BLOCK", "20", "STREAMS", key, "9-0"]),
        b"_\r\n",
    );
    writer.roundtrip(&encode(&["DEL", key]), b":1\r\n");
}

/// Forward mode with two shards: one XREAD over streams on both shards is woken by
/// an XADD to either, and is served only that stream's new entry.
fn across_shards(server: &Server) {
    let keys = keys_per_shard("across", server.shards.max(2));
    let (k0, k1) = (&keys[0], &keys[1]);
    let mut writer = server.raw();
    writer.roundtrip(&encode(&["XADD", k0, "1-0", "a", "1"]), b"$3\r\n1-0\r\n");
    writer.roundtrip(&encode(&["XADD", k1, "1-0", "b", "1"]), b"$3\r\n1-0\r\n");
    let mut waiter = server.raw();
    waiter.send(&encode(&[
        "XREAD", "BLOCK", "0", "STREAMS", k0, k1, "$", "$",
    ]));
    waiter.expect_silence(STILL_BLOCKED);
    writer.roundtrip(&encode(&["XADD", k1, "3-0", "c", "2"]), b"$3\r\n3-0\r\n");
    waiter.expect(&stream_entry_reply(k1, "3-0", "c", "2"));
    waiter.roundtrip(
        &encode(&["XREAD", "BLOCK", "50", "STREAMS", k0, k1, "$", "$"]),
        b"*-1\r\n",
    );
    writer.roundtrip(&encode(&["DEL", k0, k1]), b":2\r\n");
}

/// A reader that blocked first after an ID above the new entry keeps waiting,
/// and the reader behind it, after an ID below, is served all the same.
fn a_reader_behind_one_that_waits_on_is_served(server: &Server) {
    let key = &keys_per_shard("behind", server.shards.max(2))[1];
    let mut writer = server.raw();
    writer.roundtrip(&encode(&["XADD", key, "5-0", "f", "v"]), b"$3\r\n5-0\r\n");
    let mut ahead = server.raw();
    ahead.send(&encode(&["XREAD", "BLOCK", "0", "STREAMS", key, "10-0"]));
    sleep(LET_IT_PARK);
    let mut behind = server.raw();
    behind.send(&encode(&["XREAD", "BLOCK", "0", "STREAMS", key, "$"]));
    behind.expect_silence(STILL_BLOCKED);
    writer.roundtrip(&encode(&["XADD", key, "6-0", "f", "w"]), b"$3\r\n6-0\r\n");
    behind.expect(&stream_entry_reply(key, "6-0", "f", "w"));
    ahead.expect_silence(STILL_BLOCKED);
    writer.roundtrip(&encode(&["XADD", key, "11-0", "g", "x"]), b"$4\r\n11-0\r\n");
    ahead.expect(&stream_entry_reply(key, "11-0", "g", "x"));
    writer.roundtrip(&encode(&["DEL", key]), b":1\r\n");
}

fn all_cases(server: &Server) {
    dollar_serves_only_what_came_after(server);
    missing_stream_is_woken_by_its_first_entry(server);
    every_reader_is_served(server);
    a_reader_behind_one_that_waits_on_is_served(server);
    times_out(server);
}

#[test]
fn stream_blocking_forward_one_shard() {
    all_cases(&Server::forward(1));
}

#[test]
fn stream_blocking_forward_two_shards() {
    let server = Server::forward(2);
    all_cases(&server);
    across_shards(&server);
}
