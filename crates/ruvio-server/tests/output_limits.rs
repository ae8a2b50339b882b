//! `client-output-buffer-limit`: Redis' CONFIG GET/SET forms, a normal client that
//! pipelines large GETs and never reads is closed under a set limit while server
//! memory stays bounded, a subscriber that never reads is cut at the pubsub limit,
//! and the other clients are served throughout (1 and 2 shards).

mod common;

use common::*;
use std::io::Write;
use std::time::{Duration, Instant};

fn info_field(conn: &mut RawConn, section: &str, field: &str) -> u64 {
    let info = String::from_utf8(conn.cmd(&["INFO", section])).unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .unwrap_or_else(|| panic!("no {field} in {info}"))
        .trim()
        .parse()
        .unwrap()
}

/// The server process's peak resident memory (VmHWM).
fn peak_rss_bytes(pid: u64) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM in /proc/<pid>/status");
    kb << 10
}

/// Connected clients as the server counts them.
fn clients(conn: &mut RawConn) -> u64 {
    info_field(conn, "clients", "connected_clients")
}

#[test]
fn config_forms_as_redis() {
    let server = Server::forward(2);
    let mut c = server.raw();
    let get = |c: &mut RawConn| c.cmd(&["CONFIG", "GET", "client-output-buffer-limit"]);
    let reply = |value: &str| encode(&["client-output-buffer-limit", value]);
    assert_eq!(
        get(&mut c),
        reply("normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60")
    );
    assert_eq!(
        c.cmd(&[
            "CONFIG",
            "SET",
            "client-output-buffer-limit",
            "normal 1mb 2kb 3"
        ]),
        b"+OK\r\n"
    );
    assert_eq!(
        c.cmd(&[
            "CONFIG",
            "SET",
            "client-output-buffer-limit",
            "replica 1gb 2 3 pubsub 1 1 1"
        ]),
        b"+OK\r\n"
    );
    assert_eq!(
        get(&mut c),
        reply("normal 1048576 2048 3 slave 1073741824 2 3 pubsub 1 1 1")
    );
    let failed = |why: &str| {
        format!(
            "-ERR CONFIG SET failed (possibly related to argument 'client-output-buffer-limit') - {why}\r\n"
        )
        .into_bytes()
    };
    for (value, why) in [
        (
            "normal 1 2",
            "Wrong number of arguments in buffer limit configuration.",
        ),
        (
            "master 1 2 3",
            "Invalid client class specified in buffer limit configuration.",
        ),
        (
            "normal x 2 3",
            "Error in hard, soft or soft_seconds setting in buffer limit configuration.",
        ),
        (
            "normal 1 2 -3",
            "Error in hard, soft or soft_seconds setting in buffer limit configuration.",
        ),
    ] {
        assert_eq!(
            c.cmd(&["CONFIG", "SET", "client-output-buffer-limit", value]),
            failed(why),
            "{value}"
        );
    }
    // Every shard took it: a new connection (any shard) reads the same.
    let mut other = server.raw();
    assert_eq!(
        get(&mut other),
        reply("normal 1048576 2048 3 slave 1073741824 2 3 pubsub 1 1 1")
    );
}

/// A client pipelining 256 GETs of a 1 MB value without reading is closed at an
/// 8 MB hard limit (the pubsub class's too: a shard answering forwarded GETs stops
/// building replies past the larger of the two, see `outlimit::cap_forwarded`); the server's peak memory never holds the 256 MB; others are
/// served.
fn greedy_reader(shards: usize) {
    let server = Server::forward(shards);
    let mut admin = server.raw();
    assert_eq!(
        admin.cmd(&[
            "CONFIG",
            "SET",
            "client-output-buffer-limit",
            "normal 8mb 0 0 pubsub 8mb 0 0"
        ]),
        b"+OK\r\n"
    );
    let big = "x".repeat(1 << 20);
    assert_eq!(admin.cmd(&["SET", "big", &big]), b"+OK\r\n");
    let before = clients(&mut admin);
    let pid = info_field(&mut admin, "server", "process_id");
    let peak_before = peak_rss_bytes(pid);
    let mut greedy = std::net::TcpStream::connect(("127.0.0.1", server.port())).unwrap();
    let mut pipeline = Vec::new();
    for _ in 0..256 {
        pipeline.extend_from_slice(&encode(&["GET", "big"]));
    }
    greedy.write_all(&pipeline).unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    // Wait for it to be gone, serving another client meanwhile.
    while clients(&mut admin) > before {
        assert!(
            Instant::now() < deadline,
            "the greedy client was not closed"
        );
        assert_eq!(admin.cmd(&["PING"]), b"+PONG\r\n");
        std::thread::sleep(Duration::from_millis(5));
    }
    let grown = peak_rss_bytes(pid).saturating_sub(peak_before);
    assert!(
        grown < 64 << 20,
        "peak resident memory grew by {grown} bytes"
    );
    assert_eq!(admin.cmd(&["STRLEN", "big"]), b":1048576\r\n");
}

#[test]
fn greedy_reader_closed_one_shard() {
    greedy_reader(1);
}

#[test]
fn greedy_reader_closed_two_shards() {
    greedy_reader(2);
}

/// A subscriber that never reads while a publisher floods is cut at the pubsub
/// hard limit; one that reads keeps receiving; the publisher is served throughout.
fn stuck_subscriber(shards: usize) {
    let server = Server::forward(shards);
    let mut admin = server.raw();
    assert_eq!(
        admin.cmd(&[
            "CONFIG",
            "SET",
            "client-output-buffer-limit",
            "pubsub 2mb 0 0"
        ]),
        b"+OK\r\n"
    );
    let mut stuck = server.raw();
    stuck.send(&encode(&["SUBSCRIBE", "flood"]));
    stuck.expect(&encode_confirmation());
    let mut reader = server.raw();
    reader.send(&encode(&["SUBSCRIBE", "flood"]));
    reader.expect(&encode_confirmation());
    let mut publisher = server.raw();
    let payload = "p".repeat(64 << 10);
    let message = encode(&["message", "flood", &payload]);
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut sent = 0;
    // Publish until only the reader is left (at most 64 MB, far past any kernel buffer).
    loop {
        let receivers = publisher.cmd(&["PUBLISH", "flood", &payload]);
        sent += 1;
        reader.expect(&message);
        if receivers == b":1\r\n" {
            break;
        }
        assert_eq!(receivers, b":2\r\n");
        assert!(
            sent < 1024 && Instant::now() < deadline,
            "the stuck subscriber was not cut"
        );
    }
    assert_eq!(
        admin.cmd(&["PUBSUB", "NUMSUB", "flood"]),
        b"*2\r\n$5\r\nflood\r\n:1\r\n"
    );
    assert!(
        sent > 16,
        "cut after {sent} messages of 64 KB, before its limit"
    );
}

fn encode_confirmation() -> Vec<u8> {
    b"*3\r\n$9\r\nsubscribe\r\n$5\r\nflood\r\n:1\r\n".to_vec()
}

#[test]
fn stuck_subscriber_cut_one_shard() {
    stuck_subscriber(1);
}

#[test]
fn stuck_subscriber_cut_two_shards() {
    stuck_subscriber(2);
}

/// The soft limit: a subscriber over it is cut only once it stayed over for more
/// than its seconds, while output keeps coming.
#[test]
fn soft_limit_waits_its_seconds() {
    let server = Server::forward(2);
    let mut admin = server.raw();
    assert_eq!(
        admin.cmd(&[
            "CONFIG",
            "SET",
            "client-output-buffer-limit",
            "pubsub 0 256kb 1"
        ]),
        b"+OK\r\n"
    );
    let mut stuck = server.raw();
    stuck.send(&encode(&["SUBSCRIBE", "flood"]));
    stuck.expect(&encode_confirmation());
    let mut publisher = server.raw();
    let payload = "p".repeat(64 << 10);
    let started = Instant::now();
    while publisher.cmd(&["PUBLISH", "flood", &payload]) != b":0\r\n" {
        assert!(started.elapsed() < Duration::from_secs(15), "never cut");
        std::thread::sleep(Duration::from_millis(5));
    }
    let after = started.elapsed();
    assert!(
        after > Duration::from_secs(1),
        "cut after {after:?}, within its second"
    );
}
