//! The cluster bus as a hostile peer sees it (docs/fuzzing.md): arbitrary bytes
//! through the message decoder, and arbitrary sequences of messages (from a small
//! set of node names, so they hit known nodes, handshakes and slot owners), links
//! accepted and closed, cron ticks, MEET, REPLICATE and ADDSLOTS on one node's
//! membership (`ruvio_server::cluster::membership`).
//!
//! Checks: no panic; a decoded message encodes and decodes to itself; after
//! every step the node's CLUSTER NODES lines and nodes.conf read back to the same
//! text (`cluster::nodes_file`), with exactly one `myself`.

#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use ruvio_server::cluster::bus::message::{
    Body, Extension, Gossip, Header, Kind, MFLAG_EXT_DATA, Message, NAME_LEN, set_slot_bit,
};
use ruvio_server::cluster::membership::{Cluster, LinkId, Settings};
use ruvio_server::cluster::nodes_file::{NodesFile, parse_line, render_line};

#[derive(Arbitrary, Debug)]
enum Step {
    Raw { link: u8, bytes: Vec<u8> },
    Built(Built),
    Accept,
    Close { link: u8 },
    Cron { advance_ms: u16 },
    Meet { node: u8 },
    Replicate { node: u8 },
    AddSlots { first: u16, count: u8 },
}

#[derive(Arbitrary, Debug)]
struct Built {
    link: u8,
    kind: u8,
    sender: u8,
    flags: u16,
    current_epoch: u8,
    config_epoch: u8,
    replica_of: Option<u8>,
    slots: Vec<u16>,
    gossip: Vec<(u8, u16, u8)>,
    about: u8,
    mflags: u8,
    hostname: Option<Vec<u8>>,
}

/// One of eight names (0 is the fuzzed node's own).
fn name(n: u8) -> [u8; NAME_LEN] {
    [b'a' + n % 8; NAME_LEN]
}

fn build(b: &Built) -> Message {
    let kind = Kind::from_code(u16::from(b.kind % 11)).expect("0..11");
    let mut header = Header::new(name(b.sender));
    header.port = 7000 + u16::from(b.sender % 8);
    header.cport = header.port + 10000;
    header.flags = b.flags;
    header.current_epoch = u64::from(b.current_epoch);
    header.config_epoch = u64::from(b.config_epoch);
    header.mflags = [b.mflags, 0, 0];
    if let Some(m) = b.replica_of {
        header.replica_of = name(m);
    }
    for &slot in b.slots.iter().take(64) {
        set_slot_bit(&mut header.slots, slot % 16384);
    }
    let body = match kind {
        Kind::Ping | Kind::Pong | Kind::Meet => Body::Ping {
            gossip: b
                .gossip
                .iter()
                .take(8)
                .map(|&(n, flags, seen)| Gossip {
                    name: name(n),
                    ping_sent: 0,
                    pong_received: u32::from(seen),
                    ip: b"127.0.0.1".to_vec(),
                    port: 7000 + u16::from(n % 8),
                    cport: 17000 + u16::from(n % 8),
                    flags,
                    pport: 0,
                })
                .collect(),
            // A hostname is a C string on the wire: what follows a NUL is not sent.
            extensions: b
                .hostname
                .iter()
                .map(|h| Extension::Hostname(h.split(|&c| c == 0).next().unwrap_or(&[]).to_vec()))
                .collect(),
        },
        Kind::Fail => Body::Fail { node: name(b.about) },
        Kind::Publish | Kind::PublishShard => Body::Publish {
            channel: vec![b.about],
            message: vec![b.sender],
        },
        Kind::Update => Body::Update {
            config_epoch: u64::from(b.config_epoch),
            node: name(b.about),
            slots: header.slots.clone(),
        },
        Kind::Module => Body::Module {
            module_id: 1,
            kind: b.about,
            payload: Vec::new(),
        },
        Kind::FailoverAuthRequest | Kind::FailoverAuthAck | Kind::MfStart => Body::Empty,
    };
    // Encoding sets the extension flag when the body has extensions, and the
    // decoder keeps the flag (it says the sender reads extensions): set it as
    // the wire will carry it.
    if matches!(&body, Body::Ping { extensions, .. } if !extensions.is_empty()) {
        header.mflags[0] |= MFLAG_EXT_DATA;
    }
    Message::new(kind, header, body)
}

fn check_views(cluster: &Cluster) {
    let text = cluster.cluster_nodes();
    for line in text.lines() {
        let parsed = parse_line(line).expect("CLUSTER NODES lines parse");
        let mut again = String::new();
        render_line(&parsed, &mut again);
        assert_eq!(again, line);
    }
    let file = cluster.nodes_file().render();
    let parsed = NodesFile::parse(&file).expect("nodes.conf parses");
    assert_eq!(parsed.render(), file);
}

fuzz_target!(|steps: Vec<Step>| {
    let settings = Settings {
        name: name(0),
        ip: "127.0.0.1".into(),
        port: 7000,
        pport: 0,
        cport: 17000,
        node_timeout: 1000,
        seed: 7,
    };
    let mut now = 1_000_000u64;
    let mut cluster = Cluster::new(settings, now);
    let mut links: Vec<LinkId> = vec![cluster.accepted()];
    for step in steps.iter().take(200) {
        match step {
            Step::Raw { link, bytes } => {
                if let Ok(message) = Message::decode(bytes) {
                    let mut again = Vec::new();
                    message.encode(&mut again).expect("a decoded message encodes");
                    assert_eq!(Message::decode(&again).as_ref(), Ok(&message));
                    let link = links[usize::from(*link) % links.len()];
                    cluster.on_message(link, &message, "127.0.0.1", now);
                }
            }
            Step::Built(built) => {
                let message = build(built);
                let mut bytes = Vec::new();
                if message.encode(&mut bytes).is_ok() {
                    assert_eq!(Message::decode(&bytes).as_ref(), Ok(&message));
                }
                let link = links[usize::from(built.link) % links.len()];
                cluster.on_message(link, &message, "127.0.0.1", now);
            }
            Step::Accept => links.push(cluster.accepted()),
            Step::Close { link } => cluster.link_closed(links[usize::from(*link) % links.len()]),
            Step::Cron { advance_ms } => {
                now += u64::from(*advance_ms);
                cluster.cron(now);
            }
            Step::Meet { node } => {
                let port = 7000 + u16::from(node % 8);
                cluster.meet("127.0.0.1", port, port + 10000, now);
            }
            Step::Replicate { node } => {
                let _ = cluster.replicate(&name(*node));
            }
            Step::AddSlots { first, count } => {
                let first = first % 16384;
                let last = (first + u16::from(*count)).min(16384);
                cluster.add_slots(first..last);
            }
        }
        check_views(&cluster);
    }
});
