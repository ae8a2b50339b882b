//! One message of the Redis Cluster bus, as Redis 7 lays it out on the wire
//! (`clusterMsg` in Redis's `cluster.h`): a fixed 2,256-byte header, then a body
//! whose shape the header's type decides (gossip entries and extensions for
//! PING/PONG/MEET, a node name for FAIL, a channel and message for PUBLISH, a
//! slot bitmap for UPDATE, nothing for the failover votes and MFSTART).
//!
//! Why a codec of its own, apart from any link or node table: every byte here is
//! fixed by Redis (field offsets are part of its compatibility promise, checked by
//! static asserts there), so a Ruvio node and a `redis-server --cluster-enabled
//! yes` node read each other only if this layout is exact, and that is tested
//! against a real redis-server (tests/cluster_bus_wire.rs) apart from whatever
//! the membership logic does with the messages. Decoding never trusts a length:
//! a message whose total length disagrees with its type and counts is refused as
//! Redis refuses it (`clusterIsValidPacket`), and nothing panics on bytes from
//! the network.
//!
//! Integers are big-endian (Redis's `htons`/`htonl`/`htonu64`); names are 40
//! hex characters; IP addresses are NUL-padded to 46 bytes.

/// "RCmb": Redis Cluster message bus.
pub const SIGNATURE: [u8; 4] = *b"RCmb";
/// The bus protocol's version (`CLUSTER_PROTO_VER`).
pub const PROTOCOL_VERSION: u16 = 1;
/// A node name: 40 hex characters (`CLUSTER_NAMELEN`).
pub const NAME_LEN: usize = 40;
/// `NET_IP_STR_LEN`: an IPv6 address as text, NUL included.
pub const IP_LEN: usize = 46;
/// One bit per hash slot.
pub const SLOT_BYTES: usize = 16384 / 8;
/// The header every message starts with (`CLUSTERMSG_MIN_LEN`).
pub const HEADER_LEN: usize = 2256;
/// One gossip entry (`clusterMsgDataGossip`).
pub const GOSSIP_LEN: usize = 104;
/// An UPDATE's body: config epoch, node name, slot bitmap.
const UPDATE_LEN: usize = 8 + NAME_LEN + SLOT_BYTES;
/// A PUBLISH body's two lengths before the bytes.
const PUBLISH_FIXED: usize = 8;
/// A MODULE body's fixed part (module id, length, type).
const MODULE_FIXED: usize = 13;
/// An extension's own header: length, type, padding.
const EXT_HEADER: usize = 8;

/// Message flags in `mflags[0]`.
pub const MFLAG_PAUSED: u8 = 1 << 0;
pub const MFLAG_FORCEACK: u8 = 1 << 1;
pub const MFLAG_EXT_DATA: u8 = 1 << 2;

/// Node flags (`CLUSTER_NODE_*`), in the header and in each gossip entry.
pub mod node_flags {
    pub const MASTER: u16 = 1;
    pub const REPLICA: u16 = 2;
    pub const PFAIL: u16 = 4;
    pub const FAIL: u16 = 8;
    pub const MYSELF: u16 = 16;
    pub const HANDSHAKE: u16 = 32;
    pub const NOADDR: u16 = 64;
    pub const MEET: u16 = 128;
    pub const MIGRATE_TO: u16 = 256;
    pub const NOFAILOVER: u16 = 512;
}

/// A node's name as it travels: 40 bytes (hex characters; all zero for "none").
pub type NodeName = [u8; NAME_LEN];

/// The message types (`CLUSTERMSG_TYPE_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Ping,
    Pong,
    Meet,
    Fail,
    Publish,
    FailoverAuthRequest,
    FailoverAuthAck,
    Update,
    MfStart,
    Module,
    PublishShard,
}

impl Kind {
    const ALL: [Kind; 11] = [
        Kind::Ping,
        Kind::Pong,
        Kind::Meet,
        Kind::Fail,
        Kind::Publish,
        Kind::FailoverAuthRequest,
        Kind::FailoverAuthAck,
        Kind::Update,
        Kind::MfStart,
        Kind::Module,
        Kind::PublishShard,
    ];

    /// The type's number on the wire.
    pub fn code(self) -> u16 {
        Kind::ALL.iter().position(|k| *k == self).unwrap_or(0) as u16
    }

    /// The type of wire number `code`, if Redis 7 defines it.
    pub fn from_code(code: u16) -> Option<Kind> {
        Kind::ALL.get(usize::from(code)).copied()
    }

    /// What Redis's `clusterGetMessageTypeString` calls the type (its log
    /// lines and CLUSTER INFO's counters name types so).
    pub fn name(self) -> &'static str {
        match self {
            Kind::Ping => "ping",
            Kind::Pong => "pong",
            Kind::Meet => "meet",
            Kind::Fail => "fail",
            Kind::Publish => "publish",
            Kind::FailoverAuthRequest => "auth-req",
            Kind::FailoverAuthAck => "auth-ack",
            Kind::Update => "update",
            Kind::MfStart => "mfstart",
            Kind::Module => "module",
            Kind::PublishShard => "publishshard",
        }
    }

    /// PING, PONG and MEET share one layout (gossip and extensions).
    pub fn is_ping_like(self) -> bool {
        matches!(self, Kind::Ping | Kind::Pong | Kind::Meet)
    }
}

/// The header's fields, but the type, total length and counts (which the body
/// decides).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header {
    /// The sender's client port (its TLS port when it serves TLS).
    pub port: u16,
    pub current_epoch: u64,
    /// A master's config epoch, or its master's as the replica last saw it.
    pub config_epoch: u64,
    /// A master's replication offset, or a replica's processed offset.
    pub offset: u64,
    pub sender: NodeName,
    /// The slots the sender (or its master) serves: bit `slot % 8` of byte `slot / 8`.
    pub slots: Box<[u8; SLOT_BYTES]>,
    /// The master a replica follows; all zero for a master.
    pub replica_of: NodeName,
    /// The sender's IP as it announces it; empty: take it from the link.
    pub ip: Vec<u8>,
    /// The plaintext client port when `port` is a TLS port.
    pub pport: u16,
    /// The sender's bus port.
    pub cport: u16,
    /// The sender's node flags (`node_flags`).
    pub flags: u16,
    /// The cluster's state as the sender sees it: 0 ok, 1 fail.
    pub state: u8,
    /// Message flags (`MFLAG_*` in byte 0). `MFLAG_EXT_DATA` says the sender
    /// reads PING extensions (Redis 7.2.7+ and Ruvio set it on every message;
    /// Redis 7.0 only when it sends one); encoding also sets it when extensions
    /// go along, as a receiver reads them only then.
    pub mflags: [u8; 3],
}

impl Header {
    /// A header with every field empty, from `sender`.
    pub fn new(sender: NodeName) -> Header {
        Header {
            port: 0,
            current_epoch: 0,
            config_epoch: 0,
            offset: 0,
            sender,
            slots: Box::new([0; SLOT_BYTES]),
            replica_of: [0; NAME_LEN],
            ip: Vec::new(),
            pport: 0,
            cport: 0,
            flags: 0,
            state: 0,
            mflags: [0; 3],
        }
    }

    /// Whether the sender claims `slot`.
    pub fn has_slot(&self, slot: u16) -> bool {
        slot_bit(&self.slots, slot)
    }
}

/// Whether `slot` is set in a bus slot bitmap.
pub fn slot_bit(slots: &[u8; SLOT_BYTES], slot: u16) -> bool {
    let slot = usize::from(slot);
    slot < SLOT_BYTES * 8 && slots[slot / 8] & (1 << (slot % 8)) != 0
}

/// Sets `slot` in a bus slot bitmap.
pub fn set_slot_bit(slots: &mut [u8; SLOT_BYTES], slot: u16) {
    let slot = usize::from(slot);
    if slot < SLOT_BYTES * 8 {
        slots[slot / 8] |= 1 << (slot % 8);
    }
}

/// What a PING/PONG/MEET tells of another node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Gossip {
    pub name: NodeName,
    /// Seconds (Unix time) the sender last pinged it.
    pub ping_sent: u32,
    /// Seconds (Unix time) the sender last heard its PONG.
    pub pong_received: u32,
    pub ip: Vec<u8>,
    pub port: u16,
    pub cport: u16,
    pub flags: u16,
    pub pport: u16,
}

/// An extension of a PING/PONG/MEET (`clusterMsgPingExt`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Extension {
    /// `cluster-announce-hostname` (type 0).
    Hostname(Vec<u8>),
    /// The sender's shard id (type 3, Redis 7.2): 40 hex characters its
    /// replicas share with it.
    ShardId(NodeName),
    /// A type this codec does not read (human node names, forgotten nodes,
    /// later versions' types): kept as its bytes, so it can be skipped or
    /// passed on.
    Other { kind: u16, data: Vec<u8> },
}

const EXT_HOSTNAME: u16 = 0;
/// `CLUSTERMSG_EXT_TYPE_SHARDID`: a payload of `shard_id[40]`.
const EXT_SHARD_ID: u16 = 3;
// Redis refuses an extension whose length is not a multiple of 8; a shard id
// needs no padding.
const _: () = assert!((EXT_HEADER + NAME_LEN).is_multiple_of(8));

/// A message's body, by type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Body {
    /// PING, PONG, MEET.
    Ping {
        gossip: Vec<Gossip>,
        extensions: Vec<Extension>,
    },
    /// FAIL: `node` is failing.
    Fail { node: NodeName },
    /// PUBLISH and PUBLISHSHARD.
    Publish { channel: Vec<u8>, message: Vec<u8> },
    /// UPDATE: `node` serves `slots` at `config_epoch`.
    Update {
        config_epoch: u64,
        node: NodeName,
        slots: Box<[u8; SLOT_BYTES]>,
    },
    /// MODULE: a module's message, kept as bytes.
    Module {
        module_id: u64,
        kind: u8,
        payload: Vec<u8>,
    },
    /// FAILOVER_AUTH_REQUEST, FAILOVER_AUTH_ACK, MFSTART: the header alone.
    Empty,
}

/// One bus message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    pub kind: Kind,
    pub header: Header,
    pub body: Body,
}

/// Why bytes are not a message Redis would accept.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BusError {
    /// The first four bytes are not "RCmb".
    Signature,
    /// The total length is below the header or above `max`.
    Length(u32),
    /// A protocol version other than 1 (Redis drops such messages).
    Version(u16),
    /// A type number Redis 7 does not define.
    UnknownType(u16),
    /// The total length disagrees with what the type, counts and extensions
    /// make (`expected`, as far as it could be read).
    Invalid {
        kind: Kind,
        total: u64,
        expected: u64,
    },
    /// A message this node was asked to encode does not fit the wire format,
    /// or [`Message::decode`] was given bytes that are not one whole frame.
    Malformed(&'static str),
    /// The body does not match the type given to [`Message::encode`].
    BodyMismatch,
}

impl std::fmt::Display for BusError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BusError::Signature => write!(f, "not a cluster bus message (bad signature)"),
            BusError::Length(n) => write!(f, "cluster bus message of impossible length {n}"),
            BusError::Version(v) => write!(f, "cluster bus protocol version {v}"),
            BusError::UnknownType(t) => write!(f, "unknown cluster bus message type {t}"),
            // Redis's own log line for it (`clusterIsValidPacket`).
            BusError::Invalid {
                kind,
                total,
                expected,
            } => write!(
                f,
                "Received invalid {} packet of length {total} but expected length {expected}",
                kind.name()
            ),
            BusError::Malformed(why) => write!(f, "malformed cluster bus message: {why}"),
            BusError::BodyMismatch => write!(f, "message body does not match its type"),
        }
    }
}

/// The largest message a link reads: a PING with gossip about every node of a
/// large cluster and its extensions stays far below (Redis has no cap of its own
/// beyond memory; Ruvio's keeps a hostile peer from growing a buffer forever).
pub const MAX_MESSAGE: u32 = 1 << 24;

/// How many bytes the message starting at `buf` takes, once its first 8 bytes are
/// there (`None` before). A link reads this many, then calls [`Message::decode`].
pub fn frame_len(buf: &[u8]) -> Option<Result<usize, BusError>> {
    if buf.len() < 8 {
        return None;
    }
    if buf[..4] != SIGNATURE {
        return Some(Err(BusError::Signature));
    }
    let total = u32::from_be_bytes([buf[4], buf[5], buf[6], buf[7]]);
    if (total as usize) < HEADER_LEN || total > MAX_MESSAGE {
        return Some(Err(BusError::Length(total)));
    }
    Some(Ok(total as usize))
}

/// Big-endian reads at fixed offsets of a slice known to be long enough.
fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn be64(b: &[u8], at: usize) -> u64 {
    let mut word = [0; 8];
    word.copy_from_slice(&b[at..at + 8]);
    u64::from_be_bytes(word)
}

fn name_at(b: &[u8], at: usize) -> NodeName {
    let mut name = [0; NAME_LEN];
    name.copy_from_slice(&b[at..at + NAME_LEN]);
    name
}

/// The bytes of `field` before its first NUL.
fn until_nul(field: &[u8]) -> Vec<u8> {
    let end = field.iter().position(|&c| c == 0).unwrap_or(field.len());
    field[..end].to_vec()
}

/// A NUL-padded text field of `len` bytes: its last byte is always the NUL
/// (Redis's C strings), so at most `len - 1` bytes of text.
fn text_at(b: &[u8], at: usize, len: usize) -> Vec<u8> {
    until_nul(&b[at..at + len - 1])
}

/// Writes `text` NUL-padded into `len` bytes (cut to `len - 1`: the NUL stays).
fn put_text(out: &mut Vec<u8>, text: &[u8], len: usize) {
    let kept = text.len().min(len - 1);
    out.extend_from_slice(&text[..kept]);
    out.resize(out.len() + (len - kept), 0);
}

fn slots_at(b: &[u8], at: usize) -> Box<[u8; SLOT_BYTES]> {
    let mut slots = Box::new([0; SLOT_BYTES]);
    slots.copy_from_slice(&b[at..at + SLOT_BYTES]);
    slots
}

// Header field offsets (Redis's static asserts).
const AT_TOTLEN: usize = 4;
const AT_VER: usize = 8;
const AT_PORT: usize = 10;
const AT_TYPE: usize = 12;
const AT_COUNT: usize = 14;
const AT_CURRENT_EPOCH: usize = 16;
const AT_CONFIG_EPOCH: usize = 24;
const AT_OFFSET: usize = 32;
const AT_SENDER: usize = 40;
const AT_SLOTS: usize = 80;
const AT_REPLICA_OF: usize = 2128;
const AT_IP: usize = 2168;
const AT_EXTENSIONS: usize = 2214;
const AT_PPORT: usize = 2246;
const AT_CPORT: usize = 2248;
const AT_FLAGS: usize = 2250;
const AT_STATE: usize = 2252;
const AT_MFLAGS: usize = 2253;

impl Message {
    /// A message of `kind` from `header` carrying `body`.
    pub fn new(kind: Kind, header: Header, body: Body) -> Message {
        Message { kind, header, body }
    }

    /// Reads one whole message (`buf` is exactly [`frame_len`]'s bytes), refusing
    /// what Redis's `clusterIsValidPacket` refuses.
    pub fn decode(buf: &[u8]) -> Result<Message, BusError> {
        let total = match frame_len(buf) {
            None => return Err(BusError::Malformed("shorter than a header")),
            Some(total) => total?,
        };
        if buf.len() != total {
            return Err(BusError::Malformed("total length is not the bytes given"));
        }
        let version = be16(buf, AT_VER);
        if version != PROTOCOL_VERSION {
            return Err(BusError::Version(version));
        }
        let code = be16(buf, AT_TYPE);
        let kind = Kind::from_code(code).ok_or(BusError::UnknownType(code))?;
        let count = usize::from(be16(buf, AT_COUNT));
        let mut mflags = [0; 3];
        mflags.copy_from_slice(&buf[AT_MFLAGS..AT_MFLAGS + 3]);
        let header = Header {
            port: be16(buf, AT_PORT),
            current_epoch: be64(buf, AT_CURRENT_EPOCH),
            config_epoch: be64(buf, AT_CONFIG_EPOCH),
            offset: be64(buf, AT_OFFSET),
            sender: name_at(buf, AT_SENDER),
            slots: slots_at(buf, AT_SLOTS),
            replica_of: name_at(buf, AT_REPLICA_OF),
            ip: text_at(buf, AT_IP, IP_LEN),
            pport: be16(buf, AT_PPORT),
            cport: be16(buf, AT_CPORT),
            flags: be16(buf, AT_FLAGS),
            state: buf[AT_STATE],
            mflags,
        };
        let data = &buf[HEADER_LEN..];
        // The total length the type and its counts make, when it is not `buf`'s.
        let invalid = |expected_body: u64| BusError::Invalid {
            kind,
            total: buf.len() as u64,
            expected: HEADER_LEN as u64 + expected_body,
        };
        let body = match kind {
            Kind::Ping | Kind::Pong | Kind::Meet => {
                let extension_count = if mflags[0] & MFLAG_EXT_DATA != 0 {
                    usize::from(be16(buf, AT_EXTENSIONS))
                } else {
                    0
                };
                decode_ping(data, count, extension_count).map_err(invalid)?
            }
            Kind::Fail => {
                if data.len() != NAME_LEN {
                    return Err(invalid(NAME_LEN as u64));
                }
                Body::Fail {
                    node: name_at(data, 0),
                }
            }
            Kind::Publish | Kind::PublishShard => {
                if data.len() < PUBLISH_FIXED {
                    return Err(invalid(PUBLISH_FIXED as u64));
                }
                let channel_len = be32(data, 0) as usize;
                let message_len = be32(data, 4) as usize;
                let expected = PUBLISH_FIXED as u64 + channel_len as u64 + message_len as u64;
                if expected != data.len() as u64 {
                    return Err(invalid(expected));
                }
                let bulk = &data[PUBLISH_FIXED..];
                Body::Publish {
                    channel: bulk[..channel_len].to_vec(),
                    message: bulk[channel_len..].to_vec(),
                }
            }
            Kind::Update => {
                if data.len() != UPDATE_LEN {
                    return Err(invalid(UPDATE_LEN as u64));
                }
                Body::Update {
                    config_epoch: be64(data, 0),
                    node: name_at(data, 8),
                    slots: slots_at(data, 8 + NAME_LEN),
                }
            }
            Kind::Module => {
                if data.len() < MODULE_FIXED {
                    return Err(invalid(MODULE_FIXED as u64));
                }
                let len = be32(data, 8) as usize;
                if MODULE_FIXED as u64 + len as u64 != data.len() as u64 {
                    return Err(invalid(MODULE_FIXED as u64 + len as u64));
                }
                Body::Module {
                    module_id: be64(data, 0),
                    kind: data[12],
                    payload: data[MODULE_FIXED..].to_vec(),
                }
            }
            Kind::FailoverAuthRequest | Kind::FailoverAuthAck | Kind::MfStart => {
                if !data.is_empty() {
                    return Err(invalid(0));
                }
                Body::Empty
            }
        };
        Ok(Message { kind, header, body })
    }

    /// Appends the message's bytes to `out`: the header with its type, total
    /// length, counts and the extension flag worked out from the body.
    pub fn encode(&self, out: &mut Vec<u8>) -> Result<(), BusError> {
        let body_fits = match (&self.body, self.kind) {
            (Body::Ping { .. }, k) => k.is_ping_like(),
            (Body::Fail { .. }, Kind::Fail) => true,
            (Body::Publish { .. }, Kind::Publish | Kind::PublishShard) => true,
            (Body::Update { .. }, Kind::Update) => true,
            (Body::Module { .. }, Kind::Module) => true,
            (Body::Empty, Kind::FailoverAuthRequest | Kind::FailoverAuthAck | Kind::MfStart) => {
                true
            }
            _ => false,
        };
        if !body_fits {
            return Err(BusError::BodyMismatch);
        }
        let start = out.len();
        let h = &self.header;
        let (count, extension_count) = match &self.body {
            Body::Ping { gossip, extensions } => (gossip.len(), extensions.len()),
            _ => (0, 0),
        };
        let mut mflags = h.mflags;
        if extension_count > 0 {
            mflags[0] |= MFLAG_EXT_DATA;
        }
        out.extend_from_slice(&SIGNATURE);
        out.extend_from_slice(&[0; 4]); // the total length, written last
        out.extend_from_slice(&PROTOCOL_VERSION.to_be_bytes());
        out.extend_from_slice(&h.port.to_be_bytes());
        out.extend_from_slice(&self.kind.code().to_be_bytes());
        let count = u16::try_from(count).map_err(|_| BusError::Malformed("too much gossip"))?;
        out.extend_from_slice(&count.to_be_bytes());
        out.extend_from_slice(&h.current_epoch.to_be_bytes());
        out.extend_from_slice(&h.config_epoch.to_be_bytes());
        out.extend_from_slice(&h.offset.to_be_bytes());
        out.extend_from_slice(&h.sender);
        out.extend_from_slice(&h.slots[..]);
        out.extend_from_slice(&h.replica_of);
        put_text(out, &h.ip, IP_LEN);
        let extension_count = u16::try_from(extension_count)
            .map_err(|_| BusError::Malformed("too many extensions"))?;
        out.extend_from_slice(&extension_count.to_be_bytes());
        out.extend_from_slice(&[0; 30]);
        out.extend_from_slice(&h.pport.to_be_bytes());
        out.extend_from_slice(&h.cport.to_be_bytes());
        out.extend_from_slice(&h.flags.to_be_bytes());
        out.push(h.state);
        out.extend_from_slice(&mflags);
        debug_assert_eq!(out.len() - start, HEADER_LEN);
        match &self.body {
            Body::Ping { gossip, extensions } => {
                for g in gossip {
                    out.extend_from_slice(&g.name);
                    out.extend_from_slice(&g.ping_sent.to_be_bytes());
                    out.extend_from_slice(&g.pong_received.to_be_bytes());
                    put_text(out, &g.ip, IP_LEN);
                    out.extend_from_slice(&g.port.to_be_bytes());
                    out.extend_from_slice(&g.cport.to_be_bytes());
                    out.extend_from_slice(&g.flags.to_be_bytes());
                    out.extend_from_slice(&g.pport.to_be_bytes());
                    out.extend_from_slice(&[0; 2]);
                }
                for extension in extensions {
                    encode_extension(extension, out)?;
                }
            }
            Body::Fail { node } => out.extend_from_slice(node),
            Body::Publish { channel, message } => {
                let lens = (u32::try_from(channel.len()), u32::try_from(message.len()));
                let (Ok(channel_len), Ok(message_len)) = lens else {
                    return Err(BusError::Malformed("PUBLISH too long"));
                };
                out.extend_from_slice(&channel_len.to_be_bytes());
                out.extend_from_slice(&message_len.to_be_bytes());
                out.extend_from_slice(channel);
                out.extend_from_slice(message);
            }
            Body::Update {
                config_epoch,
                node,
                slots,
            } => {
                out.extend_from_slice(&config_epoch.to_be_bytes());
                out.extend_from_slice(node);
                out.extend_from_slice(&slots[..]);
            }
            Body::Module {
                module_id,
                kind,
                payload,
            } => {
                let len =
                    u32::try_from(payload.len()).map_err(|_| BusError::Malformed("MODULE"))?;
                out.extend_from_slice(&module_id.to_be_bytes());
                out.extend_from_slice(&len.to_be_bytes());
                out.push(*kind);
                out.extend_from_slice(payload);
            }
            Body::Empty => {}
        }
        let total = out.len() - start;
        if total > MAX_MESSAGE as usize {
            out.truncate(start);
            return Err(BusError::Length(u32::try_from(total).unwrap_or(u32::MAX)));
        }
        out[start + AT_TOTLEN..start + AT_TOTLEN + 4]
            .copy_from_slice(&(total as u32).to_be_bytes());
        Ok(())
    }
}

/// A PING/PONG/MEET body: `count` gossip entries, then `extension_count`
/// extensions (Redis writes each 8-byte aligned but reads any length of at least
/// its own header), ending exactly at the message's end. `Err`: the body
/// length the counts and the extensions read so far make instead.
fn decode_ping(data: &[u8], count: usize, extension_count: usize) -> Result<Body, u64> {
    let gossip_bytes = count * GOSSIP_LEN;
    if data.len() < gossip_bytes {
        return Err(gossip_bytes as u64);
    }
    let gossip = data[..gossip_bytes]
        .chunks_exact(GOSSIP_LEN)
        .map(|g| Gossip {
            name: name_at(g, 0),
            ping_sent: be32(g, 40),
            pong_received: be32(g, 44),
            ip: text_at(g, 48, IP_LEN),
            port: be16(g, 94),
            cport: be16(g, 96),
            flags: be16(g, 98),
            pport: be16(g, 100),
        })
        .collect();
    let mut rest = &data[gossip_bytes..];
    let mut extensions = Vec::with_capacity(extension_count.min(16));
    for _ in 0..extension_count {
        let read = (data.len() - rest.len()) as u64;
        if rest.len() < EXT_HEADER {
            return Err(read + EXT_HEADER as u64);
        }
        let len = be32(rest, 0) as usize;
        let kind = be16(rest, 4);
        if len < EXT_HEADER || len > rest.len() {
            return Err(read + len.max(EXT_HEADER) as u64);
        }
        let payload = &rest[EXT_HEADER..len];
        extensions.push(match kind {
            EXT_HOSTNAME => Extension::Hostname(until_nul(payload)),
            // Redis reads the id's 40 bytes whatever padding follows; a shorter
            // payload is not an id (kept as bytes, never read as one).
            EXT_SHARD_ID if payload.len() >= NAME_LEN => Extension::ShardId(name_at(payload, 0)),
            _ => Extension::Other {
                kind,
                data: payload.to_vec(),
            },
        });
        rest = &rest[len..];
    }
    if !rest.is_empty() {
        return Err((data.len() - rest.len()) as u64);
    }
    Ok(Body::Ping { gossip, extensions })
}

/// An extension: a hostname (cut at a NUL it holds) NUL-terminated and padded
/// with NULs to a multiple of 8, as Redis writes it; a shard id as its 40 bytes
/// (48 with the header: aligned already); another kind's bytes exactly as they
/// were read.
fn encode_extension(extension: &Extension, out: &mut Vec<u8>) -> Result<(), BusError> {
    let (kind, payload, len) = match extension {
        Extension::Hostname(name) => {
            // A C string on the wire: nothing after a NUL would be read back.
            let name = &name[..name.iter().position(|&c| c == 0).unwrap_or(name.len())];
            (
                EXT_HOSTNAME,
                name,
                (EXT_HEADER + name.len() + 1).div_ceil(8) * 8,
            )
        }
        Extension::ShardId(id) => (EXT_SHARD_ID, id.as_slice(), EXT_HEADER + NAME_LEN),
        Extension::Other { kind, data } => (*kind, data.as_slice(), EXT_HEADER + data.len()),
    };
    let len32 = u32::try_from(len).map_err(|_| BusError::Malformed("extension too long"))?;
    out.extend_from_slice(&len32.to_be_bytes());
    out.extend_from_slice(&kind.to_be_bytes());
    out.extend_from_slice(&[0; 2]);
    out.extend_from_slice(payload);
    out.resize(out.len() + (len - EXT_HEADER - payload.len()), 0);
    Ok(())
}

#[cfg(test)]
#[path = "message_tests.rs"]
mod tests;
