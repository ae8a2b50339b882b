//! The codec's tests: round trips of every message type, Redis 7's byte
//! layout, and bad input refused.

use super::*;
use proptest::prelude::*;

fn name(c: u8) -> NodeName {
    [c; NAME_LEN]
}

fn header() -> Header {
    let mut h = Header::new(name(b'a'));
    h.port = 7000;
    h.cport = 17000;
    h.current_epoch = 5;
    h.config_epoch = 3;
    h.offset = 1234;
    h.ip = b"10.0.0.1".to_vec();
    h.flags = node_flags::MASTER;
    // As every Ruvio header: the sender reads extensions.
    h.mflags[0] = MFLAG_EXT_DATA;
    set_slot_bit(&mut h.slots, 0);
    set_slot_bit(&mut h.slots, 16383);
    h
}

fn round_trip(message: &Message) -> Vec<u8> {
    let mut bytes = Vec::new();
    message.encode(&mut bytes).expect("encodes");
    assert_eq!(frame_len(&bytes), Some(Ok(bytes.len())));
    assert_eq!(&Message::decode(&bytes).expect("decodes"), message);
    bytes
}

#[test]
fn the_header_sits_at_redis_offsets() {
    let message = Message::new(Kind::FailoverAuthAck, header(), Body::Empty);
    let bytes = round_trip(&message);
    assert_eq!(bytes.len(), HEADER_LEN);
    assert_eq!(&bytes[..4], b"RCmb");
    assert_eq!(be32(&bytes, 4), HEADER_LEN as u32);
    assert_eq!(be16(&bytes, 8), 1);
    assert_eq!(be16(&bytes, 10), 7000);
    assert_eq!(be16(&bytes, 12), 6);
    assert_eq!(be64(&bytes, 32), 1234);
    assert_eq!(bytes[80], 1, "slot 0 is bit 0 of the bitmap's first byte");
    assert_eq!(
        bytes[80 + SLOT_BYTES - 1],
        0x80,
        "slot 16383 is the last bit"
    );
    assert_eq!(&bytes[2168..2176], b"10.0.0.1");
    assert_eq!(be16(&bytes, 2248), 17000);
    assert_eq!(be16(&bytes, 2250), node_flags::MASTER);
}

#[test]
fn every_body_round_trips() {
    let gossip = Gossip {
        name: name(b'b'),
        ping_sent: 1_700_000_000,
        pong_received: 1_700_000_001,
        ip: b"::1".to_vec(),
        port: 7001,
        cport: 17001,
        flags: node_flags::REPLICA | node_flags::PFAIL,
        pport: 0,
    };
    let ping = Message::new(
        Kind::Ping,
        header(),
        Body::Ping {
            gossip: vec![gossip.clone(), gossip],
            extensions: vec![
                Extension::Hostname(b"node-a.example".to_vec()),
                Extension::Other {
                    kind: 1,
                    data: [b'c'; 40].to_vec(),
                },
            ],
        },
    );
    let bytes = round_trip(&ping);
    assert_eq!(bytes.len(), HEADER_LEN + 2 * GOSSIP_LEN + 24 + 48);
    assert_eq!(bytes[AT_MFLAGS] & MFLAG_EXT_DATA, MFLAG_EXT_DATA);
    let mut slots = Box::new([0; SLOT_BYTES]);
    set_slot_bit(&mut slots, 42);
    for (kind, body) in [
        (Kind::Fail, Body::Fail { node: name(b'f') }),
        (
            Kind::Publish,
            Body::Publish {
                channel: b"news".to_vec(),
                message: b"hello".to_vec(),
            },
        ),
        (
            Kind::PublishShard,
            Body::Publish {
                channel: Vec::new(),
                message: Vec::new(),
            },
        ),
        (
            Kind::Update,
            Body::Update {
                config_epoch: 9,
                node: name(b'u'),
                slots,
            },
        ),
        (
            Kind::Module,
            Body::Module {
                module_id: 77,
                kind: 3,
                payload: b"xyz".to_vec(),
            },
        ),
        (Kind::FailoverAuthRequest, Body::Empty),
        (Kind::MfStart, Body::Empty),
        (
            Kind::Meet,
            Body::Ping {
                gossip: Vec::new(),
                extensions: Vec::new(),
            },
        ),
    ] {
        round_trip(&Message::new(kind, header(), body));
    }
}

#[test]
fn a_shard_id_travels_as_extension_type_3_aligned() {
    let shard_id = *b"0123456789abcdef0123456789abcdef01234567";
    let pong = Message::new(
        Kind::Pong,
        header(),
        Body::Ping {
            gossip: Vec::new(),
            extensions: vec![
                Extension::Hostname(b"abc".to_vec()),
                Extension::ShardId(shard_id),
            ],
        },
    );
    let bytes = round_trip(&pong);
    // The hostname's 8 + 4 bytes padded to 16, then the id's 8 + 40.
    assert_eq!(bytes.len(), HEADER_LEN + 16 + 48);
    assert_eq!(be16(&bytes, AT_EXTENSIONS), 2);
    let id_ext = &bytes[HEADER_LEN + 16..];
    assert_eq!(be32(id_ext, 0), 48, "the length counts the header");
    assert_eq!(be16(id_ext, 4), 3);
    assert_eq!(&id_ext[6..8], &[0, 0]);
    assert_eq!(&id_ext[8..], &shard_id);
    assert!(bytes[HEADER_LEN..].len().is_multiple_of(8));

    // The flag is the sender's word that it reads extensions, kept whether
    // or not any went along.
    let mut bare = Vec::new();
    let empty = Body::Ping {
        gossip: Vec::new(),
        extensions: Vec::new(),
    };
    Message::new(Kind::Ping, header(), empty.clone())
        .encode(&mut bare)
        .unwrap();
    let read = Message::decode(&bare).unwrap();
    assert_eq!(read.header.mflags[0] & MFLAG_EXT_DATA, MFLAG_EXT_DATA);
    let mut silent = header();
    silent.mflags[0] = 0;
    let mut old = Vec::new();
    Message::new(Kind::Ping, silent, empty)
        .encode(&mut old)
        .unwrap();
    assert_eq!(Message::decode(&old).unwrap().header.mflags[0], 0);

    // A type-3 payload too short for an id is kept as bytes, not read as one.
    let mut short = bytes[..HEADER_LEN].to_vec();
    short[AT_EXTENSIONS..AT_EXTENSIONS + 2].copy_from_slice(&1u16.to_be_bytes());
    short.extend_from_slice(&16u32.to_be_bytes());
    short.extend_from_slice(&3u16.to_be_bytes());
    short.extend_from_slice(&[0, 0, b'a', b'b', 0, 0, 0, 0, 0, 0]);
    let total = short.len() as u32;
    short[4..8].copy_from_slice(&total.to_be_bytes());
    let Body::Ping { extensions, .. } = Message::decode(&short).unwrap().body else {
        panic!("a pong");
    };
    assert_eq!(
        extensions,
        [Extension::Other {
            kind: 3,
            data: vec![b'a', b'b', 0, 0, 0, 0, 0, 0]
        }]
    );
}

#[test]
fn lengths_that_disagree_are_refused() {
    let mut bytes = Vec::new();
    Message::new(Kind::Fail, header(), Body::Fail { node: name(b'x') })
        .encode(&mut bytes)
        .unwrap();
    let mut short = bytes.clone();
    short.pop();
    let total = short.len() as u32;
    short[4..8].copy_from_slice(&total.to_be_bytes());
    assert_eq!(
        Message::decode(&short),
        Err(BusError::Invalid {
            kind: Kind::Fail,
            total: u64::from(total),
            expected: u64::from(total) + 1,
        })
    );
    assert_eq!(
        Message::decode(&short).unwrap_err().to_string(),
        format!(
            "Received invalid fail packet of length {total} but expected length {}",
            total + 1
        )
    );
    let mut ping = Vec::new();
    let body = Body::Ping {
        gossip: Vec::new(),
        extensions: Vec::new(),
    };
    Message::new(Kind::Ping, header(), body)
        .encode(&mut ping)
        .unwrap();
    ping[AT_COUNT..AT_COUNT + 2].copy_from_slice(&1u16.to_be_bytes());
    assert_eq!(
        Message::decode(&ping),
        Err(BusError::Invalid {
            kind: Kind::Ping,
            total: HEADER_LEN as u64,
            expected: (HEADER_LEN + GOSSIP_LEN) as u64,
        })
    );
    let mut bad_version = bytes.clone();
    bad_version[9] = 2;
    assert_eq!(Message::decode(&bad_version), Err(BusError::Version(2)));
    let mut bad_type = bytes;
    bad_type[13] = 11;
    assert_eq!(Message::decode(&bad_type), Err(BusError::UnknownType(11)));
    assert_eq!(frame_len(b"RCmb\0\0\0\x01"), Some(Err(BusError::Length(1))));
    assert_eq!(frame_len(b"HTTP/1.1"), Some(Err(BusError::Signature)));
    assert_eq!(
        Message::new(Kind::Ping, header(), Body::Empty).encode(&mut Vec::new()),
        Err(BusError::BodyMismatch)
    );
}

proptest! {
    /// Bytes from the network never panic the decoder, whatever the header says.
    #[test]
    fn arbitrary_bytes_never_panic(
        kind in 0u16..13,
        count in 0u16..4,
        extensions in 0u16..3,
        ext_flag in any::<bool>(),
        tail in proptest::collection::vec(any::<u8>(), 0..600),
    ) {
        let mut bytes = Vec::new();
        Message::new(Kind::MfStart, header(), Body::Empty).encode(&mut bytes).unwrap();
        bytes[AT_TYPE..AT_TYPE + 2].copy_from_slice(&kind.to_be_bytes());
        bytes[AT_COUNT..AT_COUNT + 2].copy_from_slice(&count.to_be_bytes());
        bytes[AT_EXTENSIONS..AT_EXTENSIONS + 2].copy_from_slice(&extensions.to_be_bytes());
        bytes[AT_MFLAGS] = if ext_flag { MFLAG_EXT_DATA } else { 0 };
        bytes.extend_from_slice(&tail);
        let total = bytes.len() as u32;
        bytes[4..8].copy_from_slice(&total.to_be_bytes());
        if let Ok(message) = Message::decode(&bytes) {
            // What decodes encodes back to the same bytes (padding aside).
            let mut again = Vec::new();
            message.encode(&mut again).unwrap();
            prop_assert_eq!(Message::decode(&again).unwrap(), message);
        }
    }

    #[test]
    fn gossip_round_trips(
        entries in proptest::collection::vec(
            (any::<[u8; 8]>(), any::<u32>(), any::<u16>(), any::<u16>(), "[0-9.]{0,45}"),
            0..6,
        ),
        hostname in "[a-z.-]{0,60}",
    ) {
        let gossip = entries
            .into_iter()
            .map(|(tag, seen, port, flags, ip)| {
                let mut name = [b'0'; NAME_LEN];
                name[..8].copy_from_slice(&tag);
                Gossip {
                    name,
                    ping_sent: seen,
                    pong_received: seen / 2,
                    ip: ip.into_bytes(),
                    port,
                    cport: port.wrapping_add(10000),
                    flags,
                    pport: 0,
                }
            })
            .collect();
        let extensions = if hostname.is_empty() {
            Vec::new()
        } else {
            vec![Extension::Hostname(hostname.into_bytes())]
        };
        round_trip(&Message::new(Kind::Pong, header(), Body::Ping { gossip, extensions }));
    }
}
