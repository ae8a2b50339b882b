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
