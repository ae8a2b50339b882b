//! Bad input on a live node's bus port (issue 35, "Tests across hosts": bad
//! input on the bus is dropped with a log line; the node keeps serving). Two
//! `ruvio --cluster-enabled yes` nodes (one shard each, per-shard mode) share
//! the slots under config epochs 5 and 6; the test opens raw TCP connections
//! to the first one's bus port and sends what a broken or hostile peer could:
//! a truncated header, a wrong signature, a total length that disagrees with
//! the type, a huge total length, random bytes, and well-formed messages
//! claiming the node's slots under an old config epoch, from an unknown node
//! and in the name of the known peer. Each is dropped where Redis 7.0 drops it
//! (the link closed for a bad signature or length, kept for a message of the
//! wrong length), with its log line, and afterwards the node answers PING,
//! its CLUSTER NODES is what it was (every slot with its owner, the epochs
//! kept), the cluster is `ok`, and the peer still sees it connected.

mod common;

use common::bus_node::{agreed, wait_for};
use common::cluster_process::{cluster_nodes, ok, split_at, text, Node};
use common::*;
use ruvio_server::cluster::bus::message::{
    frame_len, node_flags, set_slot_bit, Body, Header, Kind, Message, NAME_LEN,
};
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

const BUS_OFFSET: u16 = 10000;
/// The tested node serves the slots below this, its peer the rest.
const SPLIT: u16 = 8192;

/// The two nodes, the tested one first.
struct Pair {
    tested: Node,
    peer: Node,
}

impl Pair {
    /// Two nodes with config epochs 5 and 6 sharing the slots, up, the tested
    /// node logging at `verbose` (the level of some of the lines asserted).
    fn start() -> Pair {
        let dir = unique_dir("bus-input");
        let (tested_dir, peer_dir) = (dir.join("tested"), dir.join("peer"));
        std::fs::create_dir_all(&tested_dir).expect("dir");
        std::fs::create_dir_all(&peer_dir).expect("dir");
        let verbose = ["--loglevel", "verbose"];
        let tested = Node::start_bound(free_ports(1, true), 1, &tested_dir, "127.0.0.1", &verbose);
        let peer = Node::start(free_ports(1, true), 1, &peer_dir);
        ok(tested.port, &["CLUSTER", "SET-CONFIG-EPOCH", "5"]);
        ok(peer.port, &["CLUSTER", "SET-CONFIG-EPOCH", "6"]);
        split_at(tested.port, peer.port, SPLIT);
        Pair { tested, peer }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.tested.dir.join("ruvio.log")).unwrap_or_default()
    }

    /// Waits until the tested node's log holds `line` (a part of a line) more
    /// often than `before` of it did.
    fn wait_log(&self, before: &str, line: &str) {
        let already = before.matches(line).count();
        wait_for(&format!("the log line {line:?}"), || {
            match self.log().matches(line).count() > already {
                true => Ok(()),
                false => Err(self.log()),
            }
        });
    }

    fn bus(&self) -> TcpStream {
        let stream =
            TcpStream::connect(("127.0.0.1", self.tested.port + BUS_OFFSET)).expect("bus port");
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        stream
    }

    fn name_of(&self, port: u16) -> [u8; NAME_LEN] {
        let id = text(&RawConn::connect(port).cmd(&["CLUSTER", "MYID"]));
        id.as_bytes().try_into().expect("a 40-character name")
    }
}

/// A header from `sender` claiming the tested node's slots under `epoch`.
fn claim(sender: [u8; NAME_LEN], port: u16, epoch: u64) -> Header {
    let mut header = Header::new(sender);
    header.port = port;
    header.cport = port + BUS_OFFSET;
    header.flags = node_flags::MASTER;
    header.config_epoch = epoch;
    header.current_epoch = epoch;
    for slot in 0..SPLIT {
        set_slot_bit(&mut header.slots, slot);
    }
    header
}

fn ping_body() -> Body {
    Body::Ping {
        gossip: Vec::new(),
        extensions: Vec::new(),
    }
}

fn bytes_of(message: &Message) -> Vec<u8> {
    let mut bytes = Vec::new();
    message.encode(&mut bytes).expect("encodes");
    bytes
}

/// Reads one whole bus message.
fn read_message(stream: &mut TcpStream) -> Message {
    let mut buf = vec![0; 8];
    stream.read_exact(&mut buf).expect("a message");
    let total = frame_len(&buf).expect("8 bytes").expect("a bus message");
    buf.resize(total, 0);
    stream.read_exact(&mut buf[8..]).expect("the whole message");
    Message::decode(&buf).expect("decodes")
}

/// The node closed the connection (end of stream or a reset).
fn closed_by_node(stream: &mut TcpStream) -> bool {
    let mut byte = [0u8; 1];
    match stream.read(&mut byte) {
        Ok(0) => true,
        Err(e) => e.kind() == ErrorKind::ConnectionReset,
        Ok(_) => false,
    }
}

/// The link still works: a PING from an unknown node without slots is
/// answered with the tested node's PONG.
fn still_answers(stream: &mut TcpStream, tested: [u8; NAME_LEN]) {
    let stranger = Message::new(Kind::Ping, Header::new([b'e'; NAME_LEN]), ping_body());
    stream.write_all(&bytes_of(&stranger)).expect("write");
    let pong = read_message(stream);
    assert_eq!(pong.kind, Kind::Pong);
    assert_eq!(pong.header.sender, tested);
}

/// Bytes that look like nothing (xorshift), never starting with "RCmb".
fn garbage(len: usize) -> Vec<u8> {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut bytes: Vec<u8> = (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    bytes[0] = b'G';
    bytes
}

#[test]
fn bad_input_on_the_bus_is_dropped_and_the_node_keeps_serving() {
    let pair = Pair::start();
    let (tested, peer) = (pair.tested.port, pair.peer.port);
    let tested_name = pair.name_of(tested);
    let peer_name = pair.name_of(peer);
    let before = cluster_nodes(tested);
    let epochs = |lines: &[ruvio_server::cluster::nodes_file::NodeLine]| {
        let mut epochs: Vec<(String, u64)> = lines
            .iter()
            .map(|l| (l.name.clone(), l.config_epoch))
            .collect();
        epochs.sort();
        epochs
    };
    let valid_ping = bytes_of(&Message::new(
        Kind::Ping,
        claim([b'a'; NAME_LEN], 1, 0),
        ping_body(),
    ));

    // A truncated header, then the connection closed.
    let log = pair.log();
    let mut stream = pair.bus();
    stream.write_all(&valid_ping[..100]).expect("write");
    drop(stream);
    pair.wait_log(
        &log,
        "Cluster bus link closed in the middle of a message (100 bytes of it dropped)",
    );

    // The wrong signature: the node closes the link (Redis's clusterReadHandler).
    let bad_signature = "Bad message length or signature received from Cluster bus.";
    let log = pair.log();
    let mut stream = pair.bus();
    let mut wrong = valid_ping.clone();
    wrong[..4].copy_from_slice(b"RCmx");
    stream.write_all(&wrong).expect("write");
    assert!(
        closed_by_node(&mut stream),
        "a wrong signature ends the link"
    );
    pair.wait_log(&log, bad_signature);

    // A total length that disagrees with the type (a FAIL a byte short): the
    // message is dropped, the link kept (clusterProcessPacket returns 1).
    let log = pair.log();
    let mut stream = pair.bus();
    let mut fail = bytes_of(&Message::new(
        Kind::Fail,
        Header::new(peer_name),
        Body::Fail { node: tested_name },
    ));
    fail.pop();
    let total = fail.len() as u32;
    fail[4..8].copy_from_slice(&total.to_be_bytes());
    stream.write_all(&fail).expect("write");
    still_answers(&mut stream, tested_name);
    pair.wait_log(
        &log,
        &format!(
            "Received invalid fail packet of length {total} but expected length {}",
            total + 1
        ),
    );
    drop(stream);

    // A huge total length: refused before anything is buffered, link closed.
    let log = pair.log();
    let mut stream = pair.bus();
    let mut huge = valid_ping.clone();
    huge[4..8].copy_from_slice(&u32::MAX.to_be_bytes());
    stream.write_all(&huge[..64]).expect("write");
    assert!(closed_by_node(&mut stream), "a huge length ends the link");
    pair.wait_log(&log, bad_signature);

    // Random bytes: not a bus message, link closed.
    let log = pair.log();
    let mut stream = pair.bus();
    stream.write_all(&garbage(4096)).expect("write");
    assert!(closed_by_node(&mut stream), "garbage ends the link");
    pair.wait_log(&log, bad_signature);

    // An unknown node claiming the tested node's slots under an old epoch:
    // answered (a PING gets its PONG), its claim ignored, said in the log.
    let stranger = [b'b'; NAME_LEN];
    let log = pair.log();
    let mut stream = pair.bus();
    let ping = Message::new(Kind::Ping, claim(stranger, 1, 1), ping_body());
    stream.write_all(&bytes_of(&ping)).expect("write");
    assert_eq!(read_message(&mut stream).kind, Kind::Pong);
    let stranger_text = String::from_utf8_lossy(&stranger).into_owned();
    pair.wait_log(
        &log,
        &format!(
            "Ignoring the {SPLIT} slots claimed by unknown node {stranger_text} \
             (config epoch 1) in a ping packet"
        ),
    );
    // ... and its UPDATE giving itself those slots.
    let log = pair.log();
    let update = Message::new(
        Kind::Update,
        Header::new(stranger),
        Body::Update {
            config_epoch: 1,
            node: stranger,
            slots: claim(stranger, 1, 1).slots,
        },
    );
    stream.write_all(&bytes_of(&update)).expect("write");
    pair.wait_log(
        &log,
        &format!("Ignoring UPDATE message from unknown node {stranger_text} about {stranger_text}"),
    );
    still_answers(&mut stream, tested_name);
    drop(stream);

    // The known peer's name claiming the tested node's slots under epoch 1
    // (older than the tested node's 5): nothing moves, the sender is told
    // with an UPDATE about the owner (Redis's "has old slots configuration").
    // Then an UPDATE in the peer's name giving it those slots under an epoch
    // older than the peer's own (6). Both in one write: the PING makes this
    // link the peer's inbound link, and the real peer's next PING on its own
    // link would free it (Redis's setClusterNodeToInboundClusterLink) before
    // a later write's UPDATE were read.
    let log = pair.log();
    let mut stream = pair.bus();
    let stale = Message::new(Kind::Ping, claim(peer_name, peer, 1), ping_body());
    let update = Message::new(
        Kind::Update,
        Header::new(peer_name),
        Body::Update {
            config_epoch: 2,
            node: peer_name,
            slots: claim(peer_name, peer, 2).slots,
        },
    );
    let mut both = bytes_of(&stale);
    both.extend_from_slice(&bytes_of(&update));
    stream.write_all(&both).expect("write");
    assert_eq!(read_message(&mut stream).kind, Kind::Pong);
    let told = read_message(&mut stream);
    match &told.body {
        Body::Update {
            config_epoch, node, ..
        } => assert_eq!((*config_epoch, *node), (5, tested_name)),
        other => panic!("{:?}: {other:?}", told.kind),
    }
    let peer_text = String::from_utf8_lossy(&peer_name).into_owned();
    let tested_text = String::from_utf8_lossy(&tested_name).into_owned();
    pair.wait_log(
        &log,
        &format!(
            "Node {peer_text} has old slots configuration, sending an UPDATE message \
             about {tested_text}"
        ),
    );
    pair.wait_log(
        &log,
        &format!("Ignoring UPDATE message about {peer_text} with config epoch 2: not newer than 6"),
    );
    drop(stream);

    // The node kept serving, and nothing it knows changed.
    assert_eq!(RawConn::connect(tested).cmd(&["PING"]), b"+PONG\r\n");
    let after = cluster_nodes(tested);
    assert_eq!(agreed(&after), agreed(&before));
    assert_eq!(epochs(&after), epochs(&before));
    let own = after.iter().find(|l| l.has_flag("myself")).expect("myself");
    assert_eq!(own.slots, vec![(0, SPLIT - 1)]);
    let info = text(&RawConn::connect(tested).cmd(&["CLUSTER", "INFO"]));
    assert!(info.lines().any(|l| l == "cluster_state:ok"), "{info}");
    let seen_by_peer = cluster_nodes(peer);
    let line = seen_by_peer
        .iter()
        .find(|l| l.name == tested_text)
        .expect("the peer knows the tested node");
    assert!(line.connected, "{line:?}");
    assert!(
        !line.has_flag("fail") && !line.has_flag("fail?"),
        "{line:?}"
    );
    assert_eq!(line.slots, vec![(0, SPLIT - 1)]);
    assert!(!pair.log().contains("panicked"), "{}", pair.log());
}
