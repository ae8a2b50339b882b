//! Blocking commands with several real clients, in both port modes: a blocked client
//! is woken by a push from another client (and, in forward mode, from a key another
//! shard owns), served in the order clients blocked, times out with Redis' null
//! array, is released by CLIENT UNBLOCK, vanishes cleanly when it disconnects, and
//! runs nothing it pipelined behind the blocking command until it is answered.
//!
//! Exact reply bytes throughout; `RUVIO_TEST_TARGET=redis` runs the forward-mode
//! cases against a real redis-server (per-shard cases against a Redis Cluster).

mod common;

use common::*;
use std::thread::sleep;
use std::time::{Duration, Instant};

/// How long a client must stay silent to count as blocked.
const STILL_BLOCKED: Duration = Duration::from_millis(150);
/// Pause that lets the server park one client before the next one blocks.
const LET_IT_PARK: Duration = Duration::from_millis(60);

/// A connection to the shard that owns `key` (any port in forward mode).
fn conn_for(server: &Server, key: &str) -> RawConn {
    match server.mode {
        PortMode::Forward => server.raw(),
        PortMode::PerShard => RawConn::connect(server.shard_port(shard_of_key(key, server.shards))),
    }
}

fn pair(key: &str, value: &str) -> Vec<u8> {
    format!("*2\r\n{}{}", bulk(key), bulk(value)).into_bytes()
}

fn wake_by_push_from_another_client(server: &Server) {
    for key in keys_per_shard("wake", server.shards) {
        let mut waiter = conn_for(server, &key);
        let mut pusher = conn_for(server, &key);
        waiter.send(&encode(&["BLPOP", &key, "0"]));
        waiter.expect_silence(STILL_BLOCKED);
        pusher.roundtrip(&encode(&["RPUSH", &key, "a", "b"]), b":2\r\n");
        waiter.expect(&pair(&key, "a"));
        pusher.roundtrip(&encode(&["LRANGE", &key, "0", "-1"]), b"*1\r\n$1\r\nb\r\n");
        pusher.roundtrip(&encode(&["DEL", &key]), b":1\r\n");
    }
}

fn served_in_the_order_they_blocked(server: &Server) {
    let key = &keys_per_shard("fair", server.shards)[server.shards - 1];
    let mut first = conn_for(server, key);
    let mut second = conn_for(server, key);
    let mut third = conn_for(server, key);
    first.send(&encode(&["BRPOP", key, "0"]));
    sleep(LET_IT_PARK);
    second.send(&encode(&["BLPOP", key, "0"]));
    sleep(LET_IT_PARK);
    third.send(&encode(&["BLPOP", key, "0"]));
    sleep(LET_IT_PARK);
    let mut pusher = conn_for(server, key);
    pusher.roundtrip(&encode(&["RPUSH", key, "x", "y"]), b":2\r\n");
    first.expect(&pair(key, "y"));
    second.expect(&pair(key, "x"));
    third.expect_silence(STILL_BLOCKED);
    pusher.roundtrip(&encode(&["LPUSH", key, "z"]), b":1\r\n");
    third.expect(&pair(key, "z"));
    pusher.roundtrip(&encode(&["EXISTS", key]), b":0\r\n");
}

fn times_out_with_a_null_array(server: &Server) {
    let key = &keys_per_shard("timeout", server.shards)[0];
    let mut c = conn_for(server, key);
    let started = Instant::now();
    c.roundtrip(&encode(&["BLPOP", key, "0.2"]), b"*-1\r\n");
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(190) && waited < Duration::from_secs(3),
        "{waited:?}"
    );
    let dst = format!("{{{key}}}dst");
    c.roundtrip(&encode(&["BRPOPLPUSH", key, &dst, "0.05"]), b"*-1\r\n");
    let _hello = c.cmd(&["HELLO", "3"]);
    c.roundtrip(&encode(&["BLPOP", key, "0.05"]), b"_\r\n");
}

fn client_unblock_releases_it(server: &Server) {
    let key = &keys_per_shard("unblock", server.shards)[server.shards - 1];
    let mut waiter = conn_for(server, key);
    let mut other = conn_for(server, key);
    let id = String::from_utf8(waiter.cmd(&["CLIENT", "ID"])).unwrap();
    let id = id.trim_start_matches(':').trim_end().to_string();
    other.roundtrip(&encode(&["CLIENT", "UNBLOCK", &id]), b":0\r\n");
    waiter.send(&encode(&["BLPOP", key, "0"]));
    sleep(LET_IT_PARK);
    other.roundtrip(&encode(&["CLIENT", "UNBLOCK", &id]), b":1\r\n");
    waiter.expect(b"*-1\r\n");
    waiter.send(&encode(&["BLMPOP", "0", "1", key, "LEFT"]));
    sleep(LET_IT_PARK);
    other.roundtrip(&encode(&["CLIENT", "UNBLOCK", &id, "ERROR"]), b":1\r\n");
    waiter.expect(b"-UNBLOCKED client unblocked via CLIENT UNBLOCK\r\n");
    other.roundtrip(
        &encode(&["CLIENT", "UNBLOCK", &id, "MAYBE"]),
        b"-ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR\r\n",
    );
    waiter.roundtrip(&encode(&["PING"]), b"+PONG\r\n");
}

fn disconnect_while_blocked(server: &Server) {
    let key = &keys_per_shard("gone", server.shards)[server.shards - 1];
    {
        let mut waiter = conn_for(server, key);
        waiter.send(&encode(&["BLPOP", key, "0"]));
        waiter.expect_silence(STILL_BLOCKED);
    }
    // The server notices the close, then the push must stay in the list.
    sleep(Duration::from_millis(200));
    let mut pusher = conn_for(server, key);
    pusher.roundtrip(&encode(&["RPUSH", key, "kept"]), b":1\r\n");
    pusher.roundtrip(&encode(&["LLEN", key]), b":1\r\n");
    pusher.roundtrip(&encode(&["DEL", key]), b":1\r\n");
    sleep(Duration::from_millis(50));
    let info = String::from_utf8(pusher.cmd(&["INFO", "clients"])).unwrap();
    assert!(info.contains("blocked_clients:0\r\n"), "{info}");
}

fn pipelined_commands_wait_for_the_blocked_one(server: &Server) {
    let key = &keys_per_shard("pipe", server.shards)[0];
    let mut waiter = conn_for(server, key);
    let mut request = encode(&["BLPOP", key, "0"]);
    request.extend(encode(&["RPUSH", key, "from-the-waiter"]));
    request.extend(encode(&["PING"]));
    waiter.send(&request);
    waiter.expect_silence(STILL_BLOCKED);
    let mut pusher = conn_for(server, key);
    pusher.roundtrip(&encode(&["RPUSH", key, "first"]), b":1\r\n");
    waiter.expect(&pair(key, "first"));
    waiter.expect(b":1\r\n+PONG\r\n");
    pusher.roundtrip(&encode(&["LPOP", key]), b"$15\r\nfrom-the-waiter\r\n");
}

/// The commands behind a blocked one run once it is answered, exactly once, and the
/// connection's next request is read correctly (a receive is in flight meanwhile).
fn input_behind_a_timed_out_command_runs_once(server: &Server) {
    let key = &keys_per_shard("behind", server.shards)[0];
    let mut c = conn_for(server, key);
    let mut request = encode(&["BLPOP", key, "0.02"]);
    request.extend(encode(&["LLEN", key]));
    request.extend(encode(&["ECHO", "after"]));
    c.roundtrip(&request, b"*-1\r\n:0\r\n$5\r\nafter\r\n");
    let mut request = encode(&["RPUSH", key, "x"]);
    request.extend(encode(&["BLPOP", key, "-1"]));
    request.extend(encode(&["LPOP", key]));
    c.roundtrip(&request, b":1\r\n-ERR timeout is negative\r\n$1\r\nx\r\n");
}

fn blmove_chains_to_the_next_waiter(server: &Server) {
    let (src, dst) = ("{chain}src", "{chain}dst");
    let mut mover = conn_for(server, src);
    let mut reader = conn_for(server, dst);
    mover.send(&encode(&["BLMOVE", src, dst, "LEFT", "RIGHT", "0"]));
    sleep(LET_IT_PARK);
    reader.send(&encode(&["BLPOP", dst, "0"]));
    sleep(LET_IT_PARK);
    let mut pusher = conn_for(server, src);
    pusher.roundtrip(&encode(&["LPUSH", src, "v"]), b":1\r\n");
    mover.expect(b"$1\r\nv\r\n");
    reader.expect(&pair(dst, "v"));
    pusher.roundtrip(&encode(&["EXISTS", src, dst]), b":0\r\n");
}

fn info_counts_blocked_clients(server: &Server) {
    let keys = keys_per_shard("count", server.shards);
    let mut waiters: Vec<RawConn> = keys
        .iter()
        .map(|key| {
            let mut c = conn_for(server, key);
            c.send(&encode(&["BLPOP", key, "0"]));
            c
        })
        .collect();
    sleep(Duration::from_millis(100));
    let mut probe = server.raw();
    let info = String::from_utf8(probe.cmd(&["INFO", "clients"])).unwrap();
    let expected = format!("blocked_clients:{}\r\n", keys.len());
    if server.mode == PortMode::Forward {
        assert!(info.contains(&expected), "{info}");
    }
    for (key, waiter) in keys.iter().zip(&mut waiters) {
        let mut pusher = conn_for(server, key);
        pusher.roundtrip(&encode(&["RPUSH", key, "w"]), b":1\r\n");
        waiter.expect(&pair(key, "w"));
    }
}

/// Forward mode with several shards: a blocking command whose keys live on
/// different shards waits on all of them (the owners watch the keys for the shard
/// the client is connected to), as one Redis would.
fn blocking_across_shards(server: &Server) {
    let keys = keys_per_shard("across", server.shards);
    let (k0, k1) = (&keys[0], &keys[1]);
    let mut waiter = server.raw();
    waiter.send(&encode(&["BLPOP", k0, k1, "0"]));
    waiter.expect_silence(STILL_BLOCKED);
    let mut pusher = server.raw();
    pusher.roundtrip(&encode(&["RPUSH", k1, "v1"]), b":1\r\n");
    waiter.expect(&pair(k1, "v1"));

    waiter.send(&encode(&["BLMOVE", k0, k1, "RIGHT", "LEFT", "0"]));
    waiter.expect_silence(STILL_BLOCKED);
    pusher.roundtrip(&encode(&["LPUSH", k0, "moved"]), b":1\r\n");
    waiter.expect(b"$5\r\nmoved\r\n");
    pusher.roundtrip(
        &encode(&["LRANGE", k1, "0", "-1"]),
        b"*1\r\n$5\r\nmoved\r\n",
    );
    pusher.roundtrip(&encode(&["DEL", k1]), b":1\r\n");

    waiter.roundtrip(
        &encode(&["BLMPOP", "0.05", "2", k0, k1, "LEFT"]),
        b"*-1\r\n",
    );

    let id = String::from_utf8(waiter.cmd(&["CLIENT", "ID"])).unwrap();
    let id = id.trim_start_matches(':').trim_end().to_string();
    waiter.send(&encode(&["BRPOP", k1, k0, "0"]));
    sleep(LET_IT_PARK);
    pusher.roundtrip(&encode(&["CLIENT", "UNBLOCK", &id]), b":1\r\n");
    waiter.expect(b"*-1\r\n");

    {
        let mut gone = server.raw();
        gone.send(&encode(&["BLPOP", k0, k1, "0"]));
        gone.expect_silence(STILL_BLOCKED);
    }
    sleep(Duration::from_millis(200));
    pusher.roundtrip(&encode(&["RPUSH", k0, "kept"]), b":1\r\n");
    pusher.roundtrip(&encode(&["LPOP", k0]), b"$4\r\nkept\r\n");
    waiter.roundtrip(&encode(&["PING"]), b"+PONG\r\n");
}

/// The sorted-set blocking pops use the same machinery: woken by ZADD from another
/// client in blocking order, timed out with a null array.
fn sorted_set_pops(server: &Server) {
    let key = &keys_per_shard("zpop", server.shards)[server.shards - 1];
    let mut first = conn_for(server, key);
    let mut second = conn_for(server, key);
    first.send(&encode(&["BZPOPMIN", key, "0"]));
    sleep(LET_IT_PARK);
    second.send(&encode(&["BZMPOP", "0", "1", key, "MAX", "COUNT", "2"]));
    sleep(LET_IT_PARK);
    let mut pusher = conn_for(server, key);
    pusher.roundtrip(
        &encode(&["ZADD", key, "1", "a", "2", "b", "3", "c"]),
        b":3\r\n",
    );
    first.expect(format!("*3\r\n{}$1\r\na\r\n$1\r\n1\r\n", bulk(key)).as_bytes());
    second.expect(
        format!(
            "*2\r\n{}*2\r\n*2\r\n$1\r\nc\r\n$1\r\n3\r\n*2\r\n$1\r\nb\r\n$1\r\n2\r\n",
            bulk(key)
        )
        .as_bytes(),
    );
    pusher.roundtrip(&encode(&["EXISTS", key]), b":0\r\n");
    first.roundtrip(&encode(&["BZPOPMAX", key, "0.02"]), b"*-1\r\n");
}

fn all_cases(server: &Server) {
    wake_by_push_from_another_client(server);
    served_in_the_order_they_blocked(server);
    times_out_with_a_null_array(server);
    client_unblock_releases_it(server);
    disconnect_while_blocked(server);
    pipelined_commands_wait_for_the_blocked_one(server);
    input_behind_a_timed_out_command_runs_once(server);
    blmove_chains_to_the_next_waiter(server);
    info_counts_blocked_clients(server);
    sorted_set_pops(server);
}

#[test]
fn forward_one_shard() {
    all_cases(&Server::forward(1));
}

#[test]
fn forward_two_shards() {
    let server = Server::forward(2);
    all_cases(&server);
    blocking_across_shards(&server);
}

#[test]
fn per_shard_two_shards() {
    all_cases(&Server::per_shard(2));
}
