//! Pub/Sub delivery: who subscribed to what, and how a message reaches them on
//! every shard (the commands are in [`crate::cmd::pubsub`]; the design and its
//! costs in docs/pubsub.md).
//!
//! A subscription lives on the shard of the subscribing connection: each shard
//! keeps its subscribers in a [`ShardSubscribers`] that the other shards may read
//! (PUBSUB, INFO) and that publishers consult, without a lock, through one counter
//! per kind: a shard with no subscriber of a kind is never sent a message of it.
//!
//! PUBLISH delivers to its own shard's subscribers at once. In forward mode the
//! message then goes to every other shard that has subscribers, in one
//! [`MessageBatch`] per shard and loop iteration; each answers how many it
//! reached, and the publisher's reply is the sum (a held reply, like a split
//! command's: the publisher runs on meanwhile and only its later replies wait).
//! So the count is exact, as one Redis gives it. In per-shard mode (Redis
//! Cluster) a message still reaches every shard, as the cluster bus carries it,
//! but the reply counts the receiving node's subscribers, as Redis Cluster does.
//! Channels between two shards are ordered, so one publisher's messages arrive in
//! the order it sent them.

use crate::config::output_limits::OutputLimits;
use crate::config::PortMode;
use crate::net::conn::{ClientState, Conn};
use crate::net::slab::Slab;
pub use crate::net::subscriptions::{Kind, Subscriptions};
use ahash::{AHashMap, AHashSet};
use ruvio_engine::glob_match;
use ruvio_resp::Protocol;
use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Mutex, MutexGuard};

/// A connection: its slab index and generation.
type Who = (u32, u32);

/// A shard's subscribers by name, per kind.
#[derive(Debug, Default)]
pub struct Registry {
    lists: [AHashMap<Vec<u8>, Vec<Who>>; 3],
}

impl Registry {
    /// Subscribers per name of one kind.
    pub fn of(&self, kind: Kind) -> &AHashMap<Vec<u8>, Vec<Who>> {
        &self.lists[kind as usize]
    }
}

/// One shard's subscribers, readable by every shard.
#[derive(Debug, Default)]
pub struct ShardSubscribers {
    /// Subscriptions of each kind on the shard: a publisher sends nothing to a
    /// shard whose count for the message's kinds is 0. Raised before the
    /// subscription is confirmed, so a publisher that saw the confirmation sends.
    counts: [AtomicU64; 3],
    /// Changed by its shard only; read by PUBSUB and INFO anywhere.
    registry: Mutex<Registry>,
}

impl ShardSubscribers {
    /// The registry, locked.
    pub fn registry(&self) -> MutexGuard<'_, Registry> {
        self.registry.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// True when a message of `kind` may reach someone here.
    pub fn may_receive(&self, kind: Kind) -> bool {
        match kind {
            Kind::Shard => self.counts[2].load(Relaxed) > 0,
            _ => self.counts[0].load(Relaxed) + self.counts[1].load(Relaxed) > 0,
        }
    }
}

/// Every shard's subscribers (a field of the state every shard reads, `shard::Shared`).
#[derive(Debug)]
pub struct Subscribers {
    pub shards: Vec<ShardSubscribers>,
}

impl Subscribers {
    pub fn new(shards: usize) -> Subscribers {
        Subscribers {
            shards: (0..shards).map(|_| ShardSubscribers::default()).collect(),
        }
    }
}

/// Subscribe connection `who` to `name`; false if it already was.
pub fn subscribe(
    subscribers: &Subscribers,
    shard: usize,
    client: &mut ClientState,
    who: Who,
    kind: Kind,
    name: &[u8],
) -> bool {
    if !client.subs.insert(kind, name) {
        return false;
    }
    let here = &subscribers.shards[shard];
    let mut registry = here.registry();
    registry.lists[kind as usize]
        .entry(name.to_vec())
        .or_default()
        .push(who);
    here.counts[kind as usize].fetch_add(1, Relaxed);
    true
}

/// Unsubscribe connection `who` from `name`; false if it was not subscribed.
pub fn unsubscribe(
    subscribers: &Subscribers,
    shard: usize,
    client: &mut ClientState,
    who: Who,
    kind: Kind,
    name: &[u8],
) -> bool {
    if !client.subs.remove(kind, name) {
        return false;
    }
    forget_one(subscribers, shard, who, kind, name);
    true
}

fn forget_one(subscribers: &Subscribers, shard: usize, who: Who, kind: Kind, name: &[u8]) {
    let here = &subscribers.shards[shard];
    let mut registry = here.registry();
    let lists = &mut registry.lists[kind as usize];
    if let Some(list) = lists.get_mut(name) {
        list.retain(|&w| w != who);
        if list.is_empty() {
            lists.remove(name);
        }
    }
    here.counts[kind as usize].fetch_sub(1, Relaxed);
}

/// Drop every subscription of a connection that closes or RESETs, silently:
/// shard `shard`'s entry of the subscriber tables every shard reads, locked (also
/// what a RESET answered while a script keeps the shard busy does, from
/// `shard::busy`).
pub fn forget_all(subscribers: &Subscribers, shard: usize, subs: &mut Subscriptions, who: Who) {
    for kind in [Kind::Channel, Kind::Pattern, Kind::Shard] {
        for name in subs.take(kind) {
            forget_one(subscribers, shard, who, kind, &name);
        }
    }
}

/// The caller's own connection, which is out of the slab while its command runs:
/// a message for it goes straight into its reply.
pub struct Caller<'a> {
    pub out: &'a mut Vec<u8>,
    pub proto: Protocol,
}

/// Where a Pub/Sub frame for the running client goes: into its reply, or, when
/// CLIENT REPLY OFF/SKIP drops that reply, into [`ClientState::pushes`], which the
/// dispatcher sends all the same (as Redis sends every Pub/Sub frame as a push).
pub fn push_sink<'a>(client: &'a mut ClientState, reply: &'a mut Vec<u8>) -> &'a mut Vec<u8> {
    if client.reply_mode.silences() {
        &mut client.pushes
    } else {
        reply
    }
}

/// A message as RESP2 bytes: `*n` then bulk strings. RESP3 differs only in the
/// first byte (`>`), so one encoding serves both.
fn encode(parts: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::with_capacity(16 + parts.iter().map(|p| p.len() + 16).sum::<usize>());
    let _ = write!(out, "*{}\r\n", parts.len());
    for part in parts {
        let _ = write!(out, "${}\r\n", part.len());
        out.extend_from_slice(part);
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// Append an [`encode`]d message for a client speaking `proto`.
fn write_message(out: &mut Vec<u8>, proto: Protocol, encoded: &[u8]) {
    let start = out.len();
    out.extend_from_slice(encoded);
    if proto == Protocol::Resp3 {
        out[start] = b'>';
    }
}

/// What delivering on one shard touches beside the connections: the subscriber
/// tables, the shard's list of connections with new replies, and what output
/// limits need. Built by the shard from its parts (`ShardCore::delivery`).
pub struct Delivery<'a> {
    pub subscribers: &'a Subscribers,
    /// The delivering shard.
    pub shard: usize,
    /// Connections whose replies changed since the last flush.
    pub dirty: &'a mut Vec<Who>,
    pub limits: &'a OutputLimits,
    pub now_ms: u64,
}

/// How a message reaches other shards: the mesh's outbox implements it (the
/// mesh sits above messaging; generic, so the calls stay direct). `Tag` names a
/// held reply of the publisher, which a receiving shard answers with its count.
pub trait Relay {
    type Tag: Copy;
    /// Queue a message for shard `to`'s subscribers; with a tag, `to` answers
    /// how many received it.
    fn message(
        &mut self,
        to: usize,
        tag: Option<Self::Tag>,
        kind: Kind,
        channel: &[u8],
        message: &[u8],
    );
    /// Answer a tagged message of shard `to` with `reply`.
    fn reply(&mut self, to: usize, tag: Self::Tag, reply: &[u8]);
}

/// Deliver a message on `channel` (of kind [`Kind::Channel`] or [`Kind::Shard`])
/// to this shard's subscribers, pattern subscribers included for a plain channel.
/// Returns how many received it (a client subscribed through a channel and a
/// pattern counts twice, as in Redis).
pub fn deliver_here(
    to: &mut Delivery<'_>,
    conns: &mut Slab<Conn>,
    kind: Kind,
    channel: &[u8],
    message: &[u8],
    mut caller: Option<Caller<'_>>,
) -> u64 {
    let Delivery {
        subscribers,
        shard,
        dirty,
        limits,
        now_ms,
    } = to;
    let here = &subscribers.shards[*shard];
    if !here.may_receive(kind) {
        return 0;
    }
    let registry = here.registry();
    let mut received = 0;
    let mut send = |who: Who, encoded: &[u8]| match conns.get_mut(who.0, who.1) {
        Some(conn) => {
            received += 1;
            // A client closed for its output limit gets nothing more (Redis
            // still counts it).
            if !conn.client.killed {
                write_message(conn.replies.sink(), conn.client.proto, encoded);
                dirty.push(who);
                crate::net::outlimit::enforce(limits, *now_ms, dirty, conn, who);
            }
        }
        None => {
            // Only the running connection is out of the slab (a closed one has
            // left the registry).
            if let Some(c) = caller.as_mut() {
                write_message(c.out, c.proto, encoded);
                received += 1;
            }
        }
    };
    let word: &[u8] = match kind {
        Kind::Shard => b"smessage",
        _ => b"message",
    };
    if let Some(list) = registry.of(kind).get(channel) {
        let encoded = encode(&[word, channel, message]);
        list.iter().for_each(|&who| send(who, &encoded));
    }
    if kind == Kind::Channel {
        for (pattern, list) in registry.of(Kind::Pattern) {
            if glob_match(pattern, channel) {
                let encoded = encode(&[b"pmessage", pattern, channel, message]);
                list.iter().for_each(|&who| send(who, &encoded));
            }
        }
    }
    received
}

/// One publication for another shard: its message, and where its receiver count
/// goes (none in per-shard mode, where a node counts its own subscribers only).
#[derive(Debug)]
struct Item<T> {
    tag: Option<T>,
    kind: Kind,
    channel_len: usize,
    message_len: usize,
}

/// The publications one shard sends another in one loop iteration; `T` is the
/// mesh's tag of a held reply ([`Relay::Tag`]).
#[derive(Debug)]
pub struct MessageBatch<T> {
    pub from: usize,
    data: Vec<u8>,
    items: Vec<Item<T>>,
}

impl<T> Default for MessageBatch<T> {
    fn default() -> Self {
        MessageBatch {
            from: 0,
            data: Vec::new(),
            items: Vec::new(),
        }
    }
}

impl<T> MessageBatch<T> {
    pub fn push(&mut self, tag: Option<T>, kind: Kind, channel: &[u8], message: &[u8]) {
        self.data.extend_from_slice(channel);
        self.data.extend_from_slice(message);
        self.items.push(Item {
            tag,
            kind,
            channel_len: channel.len(),
            message_len: message.len(),
        });
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
}

/// Deliver another shard's publications here, answering the receiver counts it asked for.
pub fn deliver_batch<R: Relay>(
    to: &mut Delivery<'_>,
    relay: &mut R,
    conns: &mut Slab<Conn>,
    batch: MessageBatch<R::Tag>,
) {
    let mut offset = 0;
    for item in &batch.items {
        let channel = &batch.data[offset..offset + item.channel_len];
        offset += item.channel_len;
        let message = &batch.data[offset..offset + item.message_len];
        offset += item.message_len;
        let received = deliver_here(to, conns, item.kind, channel, message, None);
        if let Some(tag) = item.tag {
            relay.reply(batch.from, tag, &int_reply(received));
        }
    }
}

/// A receiver count as a RESP integer.
pub fn int_reply(n: u64) -> Vec<u8> {
    format!(":{n}\r\n").into_bytes()
}

/// A PUBLISH (forward mode) whose other receivers are on other shards.
#[derive(Debug)]
pub struct Publication {
    pub kind: Kind,
    pub channel: Vec<u8>,
    pub message: Vec<u8>,
    /// Receivers on the publisher's shard.
    pub local: u64,
    /// The other shards with subscribers.
    pub shards: Vec<usize>,
}

/// The shards whose subscriptions a PUBSUB or INFO call sees: all of them in
/// forward mode (one server), shard `id`'s own in per-shard mode (a cluster node).
pub fn visible_shards_of(mode: PortMode, id: usize, shards: usize) -> std::ops::Range<usize> {
    match mode {
        PortMode::Forward => 0..shards,
        PortMode::PerShard => id..id + 1,
    }
}

/// Distinct names of `kind` subscribed to on shards `range` (INFO's
/// `pubsub_channels`, `pubsub_patterns`, `pubsubshard_channels`; PUBSUB NUMPAT).
pub fn distinct_in(subscribers: &Subscribers, range: std::ops::Range<usize>, kind: Kind) -> u64 {
    let shards = &subscribers.shards;
    if range.len() == 1 {
        return shards[range.start].registry().of(kind).len() as u64;
    }
    let mut names: AHashSet<Vec<u8>> = AHashSet::new();
    for s in range {
        names.extend(shards[s].registry().of(kind).keys().cloned());
    }
    names.len() as u64
}
