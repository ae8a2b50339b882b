//! The cluster bus codec (`ruvio_server::cluster::bus::message`) against a real
//! `redis-server --cluster-enabled yes` (7.0): this test plays a node of its own
//! with nothing but the codec. It MEETs the redis-server on its bus port and
//! reads the PONG (the sender's name, slots, ports and flags as CLUSTER MYID and
//! CLUSTER SLOTS say), answers the PINGs of the link the redis-server opens
//! back, and then the redis-server's CLUSTER NODES lists it under its own name,
//! address and slots, `connected`; a PUBLISH on the redis-server reaches the test
//! over the bus, and a PUBLISH the test sends over the bus reaches a subscriber
//! of the redis-server. So both directions of the layout are Redis's.

mod common;

use common::*;
use ruvio_server::cluster::bus::message::{
    frame_len, node_flags, set_slot_bit, Body, Header, Kind, Message, NAME_LEN,
};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const BUS_OFFSET: u16 = 10000;

/// Reads one whole bus message from `stream`.
fn read_message(stream: &mut TcpStream) -> std::io::Result<Message> {
    let mut buf = vec![0; 8];
    stream.read_exact(&mut buf)?;
    let total = frame_len(&buf)
        .expect("8 bytes are enough")
        .map_err(|e| std::io::Error::other(e.to_string()))?;
    buf.resize(total, 0);
    stream.read_exact(&mut buf[8..])?;
    Message::decode(&buf).map_err(|e| std::io::Error::other(e.to_string()))
}

fn send(stream: &mut TcpStream, message: &Message) {
    let mut bytes = Vec::new();
    message.encode(&mut bytes).expect("encodes");
    stream.write_all(&bytes).expect("bus write");
}

/// The test's own node: its name, ports and slots 100-199.
struct TestNode {
    name: [u8; NAME_LEN],
    port: u16,
}

impl TestNode {
    fn header(&self) -> Header {
        let mut header = Header::new(self.name);
        header.port = self.port;
        header.cport = self.port + BUS_OFFSET;
        header.flags = node_flags::MASTER;
        for slot in 100..200 {
            set_slot_bit(&mut header.slots, slot);
        }
        header
    }

    fn message(&self, kind: Kind, body: Body) -> Message {
        Message::new(kind, self.header(), body)
    }

    fn ping_body() -> Body {
        Body::Ping {
            gossip: Vec::new(),
            extensions: Vec::new(),
        }
    }
}

fn hex_name(seed: u64) -> [u8; NAME_LEN] {
    let mut name = [0; NAME_LEN];
    let text = format!(
        "{seed:016x}{:024x}",
        u128::from(seed).wrapping_mul(0x9e37_79b9)
    );
    name.copy_from_slice(&text.as_bytes()[..NAME_LEN]);
    name
}

#[test]
fn a_redis_server_reads_and_answers_the_codec() {
    if require_redis_server("cluster_bus_wire").is_none() {
        return;
    }
    let redis = Server::redis_cluster_node();
    let mut conn = redis.raw();
    assert_eq!(
        conn.cmd(&["CLUSTER", "ADDSLOTSRANGE", "0", "99"]),
        b"+OK\r\n"
    );
    let redis_id = decode(&conn.cmd(&["CLUSTER", "MYID"])).text();
    assert_eq!(redis_id.len(), NAME_LEN);

    let port = free_ports(1, true);
    let node = TestNode {
        name: hex_name(u64::from(port) * 7919 + u64::from(std::process::id())),
        port,
    };
    let listener = TcpListener::bind(("127.0.0.1", port + BUS_OFFSET)).expect("bus listener");

    // MEET on the redis-server's bus port: it answers PONG on the same link.
    let mut outbound =
        TcpStream::connect(("127.0.0.1", redis.port() + BUS_OFFSET)).expect("redis bus port");
    outbound
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    send(
        &mut outbound,
        &node.message(Kind::Meet, TestNode::ping_body()),
    );
    let pong = read_message(&mut outbound).expect("PONG to MEET");
    assert_eq!(pong.kind, Kind::Pong);
    assert_eq!(
        pong.header.sender,
        redis_id.as_bytes(),
        "the sender is CLUSTER MYID"
    );
    assert_eq!(pong.header.port, redis.port());
    assert_eq!(pong.header.cport, redis.port() + BUS_OFFSET);
    assert_ne!(pong.header.flags & node_flags::MASTER, 0);
    assert_ne!(pong.header.flags & node_flags::MYSELF, 0);
    assert_eq!(pong.header.replica_of, [0; NAME_LEN]);
    assert!(
        (0..100).all(|s| pong.header.has_slot(s)),
        "slots 0-99 are its"
    );
    assert!(
        (100..16384).all(|s| !pong.header.has_slot(s)),
        "no other slot"
    );

    // The redis-server's own link to the test node: answer each PING with a PONG
    // and pass on what else arrives.
    let (seen_tx, seen_rx) = mpsc::channel::<Message>();
    let answerer = TestNode {
        name: node.name,
        port: node.port,
    };
    std::thread::spawn(move || {
        let Ok((mut inbound, _)) = listener.accept() else {
            return;
        };
        while let Ok(message) = read_message(&mut inbound) {
            if message.kind == Kind::Ping {
                send(
                    &mut inbound,
                    &answerer.message(Kind::Pong, TestNode::ping_body()),
                );
            }
            if seen_tx.send(message).is_err() {
                return;
            }
        }
    });
    let first = seen_rx
        .recv_timeout(Duration::from_secs(10))
        .expect("the redis-server's PING on its own link");
    assert_eq!(first.kind, Kind::Ping);
    assert_eq!(first.header.sender, redis_id.as_bytes());

    // CLUSTER NODES lists the test node under its name, address and slots.
    let name = String::from_utf8(node.name.to_vec()).unwrap();
    let expected_address = format!("127.0.0.1:{port}@{}", port + BUS_OFFSET);
    let deadline = Instant::now() + Duration::from_secs(15);
    let line = loop {
        let nodes = decode(&conn.cmd(&["CLUSTER", "NODES"])).text();
        let line = nodes
            .lines()
            .find(|l| l.starts_with(&name))
            .map(str::to_owned);
        if let Some(line) = line.filter(|l| l.ends_with(" connected 100-199")) {
            break line;
        }
        assert!(
            Instant::now() < deadline,
            "test node not listed as it is:\n{nodes}"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    let fields: Vec<&str> = line.split(' ').collect();
    assert_eq!(fields[1], expected_address, "{line}");
    assert_eq!(fields[2], "master", "{line}");
    assert_eq!(fields[3], "-", "{line}");
    let info = decode(&conn.cmd(&["CLUSTER", "INFO"])).text();
    assert!(info.contains("cluster_known_nodes:2"), "{info}");
    assert!(info.contains("cluster_slots_assigned:200"), "{info}");

    // A PUBLISH on the redis-server travels the bus to the test node.
    let mut publisher = redis.raw();
    assert_eq!(publisher.cmd(&["PUBLISH", "news", "hello bus"]), b":0\r\n");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let message = seen_rx.recv_timeout(left).expect("PUBLISH over the bus");
        if message.kind == Kind::Publish {
            assert_eq!(
                message.body,
                Body::Publish {
                    channel: b"news".to_vec(),
                    message: b"hello bus".to_vec(),
                }
            );
            break;
        }
    }

    // A PUBLISH the test node sends reaches the redis-server's subscriber.
    let mut subscriber = redis.raw();
    subscriber.send(b"*2\r\n$9\r\nSUBSCRIBE\r\n$9\r\nfrom-test\r\n");
    subscriber.read_until(b":1\r\n");
    send(
        &mut outbound,
        &node.message(
            Kind::Publish,
            Body::Publish {
                channel: b"from-test".to_vec(),
                message: b"over the bus".to_vec(),
            },
        ),
    );
    let delivered = subscriber.read_until(b"over the bus\r\n");
    assert!(
        delivered.ends_with(b"$9\r\nfrom-test\r\n$12\r\nover the bus\r\n"),
        "{}",
        String::from_utf8_lossy(&delivered)
    );
}
