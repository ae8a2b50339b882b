//! Client limits: `maxclients` counts the connections of every shard; the one past
//! it gets Redis' error and is closed, and a freed place can be taken again.

mod common;

use common::*;
use std::io::{Read, Write};
use std::time::{Duration, Instant};

fn maxclients(shards: usize) {
    let server = Server::forward(shards);
    let mut admin = server.raw();
    assert_eq!(admin.cmd(&["CONFIG", "SET", "maxclients", "6"]), b"+OK\r\n");
    // The admin and five more: six in all.
    let mut open: Vec<RawConn> = (0..5).map(|_| server.raw()).collect();
    for conn in open.iter_mut() {
        assert_eq!(conn.cmd(&["PING"]), b"+PONG\r\n");
    }
    let mut refused = std::net::TcpStream::connect(("127.0.0.1", server.port())).unwrap();
    refused
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut answer = Vec::new();
    refused.read_to_end(&mut answer).unwrap();
    assert_eq!(answer, b"-ERR max number of clients reached\r\n");
    let info = admin.cmd(&["INFO", "stats"]);
    assert!(
        contains(&info, b"rejected_connections:1\r\n"),
        "{}",
        show(&info)
    );
    // One leaves; its place can be taken (the close is seen a moment later).
    drop(open.pop());
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let mut again = std::net::TcpStream::connect(("127.0.0.1", server.port())).unwrap();
        again.write_all(b"PING\r\n").unwrap();
        again
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let mut reply = [0u8; 64];
        let n = again.read(&mut reply).unwrap_or(0);
        if &reply[..n] == b"+PONG\r\n" {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no place freed: {:?}",
            String::from_utf8_lossy(&reply[..n])
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn maxclients_1_shard() {
    maxclients(1);
}

#[test]
fn maxclients_2_shards() {
    maxclients(2);
}

/// `timeout`: an idle client is closed; one that keeps sending commands, and one
/// blocked in BLPOP, are not.
#[test]
fn idle_clients_are_closed() {
    let server = Server::forward(2);
    let mut admin = server.raw();
    assert_eq!(admin.cmd(&["CONFIG", "SET", "timeout", "1"]), b"+OK\r\n");
    let mut idle = std::net::TcpStream::connect(("127.0.0.1", server.port())).unwrap();
    idle.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut busy = server.raw();
    let mut blocked = server.raw();
    blocked.send(&encode(&["BLPOP", "timeout:list", "0"]));
    let started = Instant::now();
    while started.elapsed() < Duration::from_millis(3500) {
        assert_eq!(busy.cmd(&["PING"]), b"+PONG\r\n");
        std::thread::sleep(Duration::from_millis(300));
    }
    let mut byte = [0u8; 1];
    assert_eq!(
        idle.read(&mut byte).unwrap_or(0),
        0,
        "the idle client was closed"
    );
    // (So was `admin`, idle as well.)
    assert_eq!(busy.cmd(&["CONFIG", "SET", "timeout", "0"]), b"+OK\r\n");
    assert_eq!(busy.cmd(&["LPUSH", "timeout:list", "x"]), b":1\r\n");
    blocked.expect(b"*2\r\n$12\r\ntimeout:list\r\n$1\r\nx\r\n");
}

/// A connection's buffers do not keep the size of one large request or reply.
#[test]
fn large_request_buffers_are_given_back() {
    buffers_are_given_back_after_a_large_set(&Server::forward(1));
}

/// Nor do the log's buffers keep the size of one large record, written buffered
/// or directly, under either logged mode.
#[test]
fn large_record_log_buffers_are_given_back() {
    for mode in ["everysec", "always"] {
        let dir = std::env::temp_dir().join(format!("ruvio-limits-{}-{mode}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let args = ["--dir", dir.to_str().unwrap(), "--durability", mode];
        buffers_are_given_back_after_a_large_set(&Server::ruvio_with(PortMode::Forward, 1, &args));
        let _ = std::fs::remove_dir_all(&dir);
    }
}

fn buffers_are_given_back_after_a_large_set(server: &Server) {
    let mut con = server.raw();
    let used = |con: &mut RawConn| -> u64 {
        let info = String::from_utf8_lossy(&con.cmd(&["INFO", "memory"])).into_owned();
        let line = info
            .lines()
            .find(|l| l.starts_with("used_memory:"))
            .unwrap();
        line["used_memory:".len()..].trim().parse().unwrap()
    };
    let before = used(&mut con);
    let big = vec![b'x'; 32 << 20];
    assert_eq!(con.cmd(&[b"SET".as_slice(), b"big", &big]), b"+OK\r\n");
    let reply = con.cmd(&["GET", "big"]);
    assert_eq!(reply.len(), big.len() + 13);
    assert_eq!(con.cmd(&["DEL", "big"]), b":1\r\n");
    // Lazily freed values and the buffers go within a moment.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let now = used(&mut con);
        if now < before + (4 << 20) {
            break;
        }
        assert!(Instant::now() < deadline, "used_memory {now}, was {before}");
        std::thread::sleep(Duration::from_millis(50));
    }
}
