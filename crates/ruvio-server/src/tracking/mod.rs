//! Client-side caching: CLIENT TRACKING's tables and invalidations (Redis'
//! tracking.c), across shards. The commands are in `cmd::client`; a client's mode
//! lives on its connection (`net::conn::TrackingMode`), because every command
//! reads it.
//!
//! Default mode: the keys a tracking client reads are remembered by the shard
//! that owns each key, in that shard's [`Tracking`] table (key -> the readers'
//! shard and client id), where the read runs: in forward mode often another
//! shard than the client's, which learns of the client through the command's
//! tracking bits (`net::conn::tracking_command`, carried in the forwarding tag).
//! A write of a remembered key (any client, an expiry, a flush) removes the entry
//! and owes each reader one invalidation; the owed messages go out once per loop
//! iteration, to the reader's own shard over the mesh, behind the replies queued
//! for that shard (so a read's reply always comes before the invalidation of
//! what it read). The reader's shard writes the message as a RESP3 push, or
//! passes it to the client's REDIRECT target (a RESP3 push, or a Pub/Sub
//! message on `__redis__:invalidate` to a RESP2 subscriber).
//!
//! Order with the writer's replies, as Redis 7's `tracking_pending_keys`: an
//! invalidation owed to the client whose command caused it comes right after
//! that command's reply (after EXEC's whole array, after a script's reply);
//! the dispatcher and the forwarded-request runner take them at that point.
//!
//! A write split over shards (MSET, DEL, UNLINK) invalidates in the command's
//! key order, as Redis: its owners send what their parts owe back with the
//! parts' replies, and the origin, once every part answered, sends them in key
//! order ([`Tracking::split_answered`]; docs/tracking.md says why relaying them
//! keeps a read's reply first). One for a client of a third shard (three shards
//! or more) carries where its owner's channel to that shard stood, and waits
//! there until that shard took the owner's messages up to it
//! ([`Tracking::relayed`], `mesh::forward::After`). A
//! MULTI/EXEC, MSETNX or script over borrowed keys likewise: the owners answer the
//! coordinator's `Written` with what they owe, and it sends everything in
//! write order ([`Tracking::gather_answered`]); a tracking writer's reply slot
//! stays held until then, so its own come right after its reply
//! (`mesh::lending::HeldWriter`).
//!
//! BCAST: each shard keeps a copy of every client's prefixes (forward mode;
//! per-shard mode keeps each node's own, as Redis Cluster). A written key that
//! matches a prefix is noted with its writer, and once per loop iteration each
//! prefix's subscribers get one message with the keys (without those they wrote
//! themselves under NOLOOP), as Redis' trackingBroadcastInvalidationMessages.
//!
//! Cost when nobody tracks: a command carries tracking bits 0 (one test before
//! remembering), and a shard whose table and prefix list are empty records no
//! written keys for tracking ([`Tracking::active`]).
//!
//! Bounds: each shard's table holds at most its part of
//! `tracking-table-max-keys` (the setting divided over the shards); past it,
//! keys are dropped from the table with an invalidation, as Redis'
//! trackingLimitUsedSlots.

use crate::config::output_limits::OutputLimits;
use crate::mesh::forward::{After, Invalidation, Outbox, PartOwed};
use crate::mesh::lending::HeldWriter;
use crate::net::conn::{tracking_command, tracking_flags, ClientState, Conn, TrackingMode};
use crate::net::slab::Slab;
use ahash::{AHashMap, AHashSet};
use ruvio_resp::Protocol;
use std::collections::BTreeMap;
use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;

/// `tracking-table-max-keys`'s default, as Redis'.
pub const TABLE_KEYS_DEFAULT: u64 = 1_000_000;

/// The Pub/Sub channel a RESP2 redirection target receives invalidations on.
pub const INVALIDATE_CHANNEL: &[u8] = b"__redis__:invalidate";

/// A connection: its slab index and generation.
type Who = (u32, u32);

/// A client that read a key: its shard and id, in one word (the shard in the top
/// [`READER_SHARD_BITS`] bits). The tables hold one per (key, reader): at 10,000
/// clients reading 1,000 keys each that is 10,000,000 of them, and 8 bytes
/// instead of a `(usize, u64)`'s 16 halve the tables (docs/tracking.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Reader(u64);

/// Bits of a [`Reader`] for the shard: shards are CPUs, far below 65,536.
const READER_SHARD_BITS: u32 = 16;
const _: () = assert!(crate::config::SHARDS_MAX <= 1 << READER_SHARD_BITS);
/// Client ids below this fit a [`Reader`]: ids count connections from 1, and
/// 2^48 of them is nine years of a million connections a second.
const READER_CLIENT_ID_END: u64 = 1 << (64 - READER_SHARD_BITS);

impl Reader {
    /// Client `client_id` of `shard`. An id or a shard past the bits is a
    /// broken invariant (ids are a counter, shards a CPU count), not input.
    fn new(shard: usize, client_id: u64) -> Reader {
        assert!(client_id < READER_CLIENT_ID_END && shard >> READER_SHARD_BITS == 0);
        Reader((shard as u64) << (64 - READER_SHARD_BITS) | client_id)
    }

    fn shard(self) -> usize {
        (self.0 >> (64 - READER_SHARD_BITS)) as usize
    }

    fn client_id(self) -> u64 {
        self.0 & (READER_CLIENT_ID_END - 1)
    }
}

/// A table item costs this much beyond its key's entry (docs/tracking.md's bound).
const _: () = assert!(std::mem::size_of::<Reader>() == 8);
/// A key's entry: the key and its readers, two vectors' headers (plus the key's
/// and the readers' heap blocks).
const _: () = assert!(std::mem::size_of::<(Vec<u8>, Vec<Reader>)>() == 48);

/// A BCAST client subscribed to a prefix.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Subscriber {
    shard: usize,
    client_id: u64,
    noloop: bool,
}

/// One BCAST prefix: who subscribed, and the keys written since the last
/// delivery, each with the client that wrote it last (0: no client, an expiry).
#[derive(Debug, Default)]
struct Prefix {
    subscribers: Vec<Subscriber>,
    written: BTreeMap<Vec<u8>, u64>,
}

/// An invalidation waiting for its delivery, and the shard of its client.
#[derive(Debug)]
struct Owed {
    shard: usize,
    invalidation: Invalidation,
}

/// The invalidations owed, in the order they were caused, and who they are
/// for: every command of a tracking client asks for its own
/// ([`Tracking::take_owed_to`]), and a loop iteration of pipelined writes owes
/// hundreds to others, so the question is answered from `clients` (every
/// (shard, client) with an entry, perhaps a few more) before the list is read.
#[derive(Debug, Default)]
struct OwedList {
    items: Vec<Owed>,
    clients: AHashSet<(usize, u64)>,
}

impl OwedList {
    fn push(&mut self, owed: Owed) {
        self.clients
            .insert((owed.shard, owed.invalidation.client_id));
        self.items.push(owed);
    }

    fn extend(&mut self, owed: impl IntoIterator<Item = Owed>) {
        for o in owed {
            self.push(o);
        }
    }

    fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    fn len(&self) -> usize {
        self.items.len()
    }

    /// The entries from `since` on, taken out.
    fn drain_from(&mut self, since: usize) -> Vec<Owed> {
        self.items.split_off(since.min(self.items.len()))
    }

    /// Client `client_id` of `shard`'s entries, taken out in order.
    fn take_for(&mut self, shard: usize, client_id: u64) -> Vec<Owed> {
        if !self.clients.remove(&(shard, client_id)) {
            return Vec::new();
        }
        self.items
            .extract_if(.., |o| {
                o.shard == shard && o.invalidation.client_id == client_id
            })
            .collect()
    }

    /// Every entry, in order; the list starts over.
    fn take_all(&mut self) -> Vec<Owed> {
        self.clients.clear();
        std::mem::take(&mut self.items)
    }
}

/// One shard's part of client-side caching.
#[derive(Debug, Default)]
pub struct Tracking {
    me: usize,
    /// Default mode: each key of this shard read by tracking clients, and who read
    /// it (sorted, each once).
    keys: AHashMap<Vec<u8>, Vec<Reader>>,
    /// Readers over every key (INFO `tracking_total_items`).
    items: usize,
    /// This shard's connections by client id (tracking clients and redirection
    /// targets are found by id).
    conns: AHashMap<u64, Who>,
    /// This shard's clients with tracking on (a flush owes each a null).
    clients: AHashSet<u64>,
    /// BCAST prefixes of the clients of every shard this shard's writes reach.
    prefixes: BTreeMap<Vec<u8>, Prefix>,
    /// Some prefix has written keys to deliver.
    bcast_written: bool,
    /// Invalidations owed, in the order they were caused.
    owed: OwedList,
    /// This shard's part of `tracking-table-max-keys` (`usize::MAX`: no limit).
    keys_max: usize,
    /// Writes of borrowed keys this shard coordinated, by command ticket:
    /// their invalidations gathered until every owner of a written key
    /// answered, then sent in the order the keys were written.
    gathers: AHashMap<u64, Gather>,
    /// Writes split over shards that this shard is the origin of, by
    /// `(connection, generation, reply slot)`: their invalidations gathered
    /// until every part answered, then delivered in key order.
    splits: AHashMap<(u32, u32, u64), Split>,
    /// Three shards or more: invalidations relayed to this shard's clients
    /// that wait for an owner's channel, and the positions they wait on.
    relays: Relays,
}

/// A third shard's side of relayed invalidations (three shards or more,
/// [`After`]): how many messages this shard took from each other shard, and
/// per origin the invalidations it sent that wait (one waits for its owner's
/// channel to reach its position, the rest of its origin's behind it, so an
/// origin's key order holds).
#[derive(Debug, Default)]
struct Relays {
    /// Per shard: messages taken from its channel (handled, or taken as a
    /// waiting script's answer).
    taken: Vec<u64>,
    /// Per origin: its invalidations not delivered yet, in the order sent.
    waiting: Vec<std::collections::VecDeque<Invalidation>>,
    /// Invalidations in `waiting`.
    waiting_len: usize,
}

impl Relays {
    fn taken_from(&self, shard: usize) -> u64 {
        self.taken.get(shard).copied().unwrap_or(0)
    }

    /// Its owner's channel has reached its position (or it waits on none).
    fn ready(&self, inv: &Invalidation) -> bool {
        inv.after.is_none_or(|a| self.taken_from(a.owner) >= a.sent)
    }

    /// `inv` came from `from`: back if it may go now, else it waits.
    fn arrived(&mut self, from: usize, inv: Invalidation) -> Option<Invalidation> {
        let queue_empty = self.waiting.get(from).is_none_or(|q| q.is_empty());
        if queue_empty && self.ready(&inv) {
            return Some(inv);
        }
        if self.waiting.len() <= from {
            self.waiting.resize_with(from + 1, Default::default);
        }
        self.waiting[from].push_back(inv);
        self.waiting_len += 1;
        None
    }

    /// One more message was taken from `from`: what may go now, each
    /// origin's in order up to the first that still waits.
    fn took(&mut self, from: usize) -> Vec<Invalidation> {
        if self.taken.len() <= from {
            self.taken.resize(from + 1, 0);
        }
        self.taken[from] += 1;
        let mut ready = Vec::new();
        if self.waiting_len == 0 {
            return ready;
        }
        for origin in 0..self.waiting.len() {
            while let Some(inv) = self.waiting[origin].front() {
                if !self.ready(inv) {
                    break;
                }
                ready.extend(self.waiting[origin].pop_front());
            }
        }
        self.waiting_len -= ready.len();
        ready
    }
}

/// A coordinated write's invalidations (see [`Tracking::gather_started`]).
#[derive(Debug)]
struct Gather {
    /// Owners not answered yet.
    owners_left: usize,
    /// (the key's place among the written keys, the client's shard, the message).
    items: Vec<(u32, usize, Invalidation)>,
    /// Its tracking writers whose reply slots it keeps, in the order their
    /// commands ran.
    held: Vec<HeldWriter>,
}

/// A split write's invalidations, gathered at its origin (see
/// [`Tracking::split_started`]).
#[derive(Debug)]
struct Split {
    /// Parts not answered yet.
    parts_left: usize,
    /// The part of each of the command's keys, in the command's order.
    order: Vec<u16>,
    /// (part, index of the key in its part, the client's shard, the message).
    items: Vec<(u16, u16, usize, Invalidation)>,
}

/// Every shard's tracking figures and the shard of every client id: what CLIENT
/// TRACKING REDIRECT and INFO need of other shards.
#[derive(Debug)]
pub struct Directory {
    /// Client id -> shard, for every open connection (changed on connect and
    /// close only).
    shard_of: Mutex<AHashMap<u64, usize>>,
    /// Per shard: `[tracking clients, keys, items, prefixes]`.
    gauges: Vec<[AtomicU64; 4]>,
    /// Clients with tracking on, over every shard: a split write gathers its
    /// invalidations at its origin only while some client tracks.
    tracking_clients: AtomicU64,
}

impl Directory {
    /// The directory of `shards` shards.
    pub fn new(shards: usize) -> Directory {
        Directory {
            shard_of: Mutex::default(),
            gauges: (0..shards).map(|_| Default::default()).collect(),
            tracking_clients: AtomicU64::new(0),
        }
    }

    fn map(&self) -> std::sync::MutexGuard<'_, AHashMap<u64, usize>> {
        self.shard_of.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Some client of some shard has tracking on (a client turns it on before
    /// the reads it tracks, so a write after them sees it).
    pub fn anyone_tracks(&self) -> bool {
        self.tracking_clients.load(Relaxed) != 0
    }

    /// The shard client `client_id` is connected to, if it is.
    pub fn shard_of(&self, client_id: u64) -> Option<usize> {
        self.map().get(&client_id).copied()
    }

    /// INFO's figures over `shards`: `(tracking_clients, tracking_total_keys,
    /// tracking_total_items)`, and `tracking_total_prefixes` as the first shard
    /// of them sees it (each shard of one server holds every prefix).
    pub fn figures(&self, shards: std::ops::Range<usize>) -> [u64; 4] {
        let mut sums = [0; 4];
        let first = shards.start;
        for s in shards {
            for (i, sum) in sums.iter_mut().enumerate().take(3) {
                *sum += self.gauges[s][i].load(Relaxed);
            }
        }
        sums[3] = self.gauges.get(first).map_or(0, |g| g[3].load(Relaxed));
        sums
    }
}

/// What delivering an invalidation touches beside this shard's table.
pub struct Deliver<'a> {
    pub outbox: &'a mut Outbox,
    pub directory: &'a Directory,
    /// Connections whose output changed.
    pub dirty: &'a mut Vec<Who>,
    pub limits: &'a OutputLimits,
    pub now_ms: u64,
}

impl Tracking {
    /// Shard `me`'s part, holding at most `keys_max` keys.
    pub fn new(me: usize, keys_max: usize) -> Tracking {
        Tracking {
            me,
            keys_max,
            ..Default::default()
        }
    }

    /// Set this shard's part of `tracking-table-max-keys` (`max_keys` over
    /// `shards`; 0 means no limit).
    pub fn set_max_keys(&mut self, max_keys: u64, shards: usize) {
        self.keys_max = match max_keys {
            0 => usize::MAX,
            n => (n as usize).div_ceil(shards.max(1)),
        };
    }

    /// Some key of this shard is remembered or some BCAST prefix is subscribed:
    /// only then do commands record the keys they write for tracking.
    pub fn active(&self) -> bool {
        !self.keys.is_empty() || !self.prefixes.is_empty()
    }

    /// Invalidations are waiting.
    pub fn owes(&self) -> bool {
        !self.owed.is_empty()
    }

    /// How many invalidations are waiting: a part of a split write takes
    /// those it caused (past this count) for its origin.
    pub fn owed_len(&self) -> usize {
        self.owed.len()
    }

    /// The invalidations of keys one key at a time owed since `since` (by a
    /// part of a split write whose keys are `part_keys`) to clients of shard
    /// `origin` (the command's) or of this shard, taken out with each key's
    /// index in the part. The reader's shard must never get an invalidation
    /// before the reply of the read that remembered it, which came on this
    /// shard's channel to it; sent on through `origin`, that holds when the
    /// reader's shard is `origin` itself (this shard's channel to it carries
    /// the part's reply behind the read's) or this shard (its read was
    /// answered here before). A client of a third shard (three shards or
    /// more) gets its message through `origin` too, tagged with where this
    /// shard's channel to its shard stands ([`After`]): its shard holds it
    /// until it has taken that many messages from here (docs/tracking.md).
    pub fn take_part_owed(
        &mut self,
        since: usize,
        origin: usize,
        part_keys: &[&[u8]],
        outbox: &Outbox,
    ) -> Vec<(u16, usize, Invalidation)> {
        let me = self.me;
        // Something may have delivered meanwhile: then nothing is past `since`.
        let since = since.min(self.owed.len());
        let index = |inv: &Invalidation| match inv.keys.as_deref() {
            Some([key]) => part_keys.iter().position(|k| *k == key.as_slice()),
            _ => None,
        };
        let mut taken = Vec::new();
        let mut kept = Vec::new();
        for mut o in self.owed.drain_from(since) {
            let Some(i) = index(&o.invalidation) else {
                kept.push(o);
                continue;
            };
            // This shard the origin: its own channels carry them either way.
            // Else a third shard's waits there for this shard's channel.
            if origin != me && o.shard != origin && o.shard != me {
                let sent = crate::mesh::forward::position_for(outbox, o.shard);
                o.invalidation.after = Some(After { owner: me, sent });
            }
            taken.push((i as u16, o.shard, o.invalidation));
        }
        self.owed.extend(kept);
        taken
    }

    /// This shard, the origin of a write split into `parts` parts (reply slot
    /// `seq` of connection `who`; `order`: each key's part, in the command's
    /// order), gathers the invalidations its parts owe until every part
    /// answered ([`split_answered`](Self::split_answered)).
    pub fn split_started(&mut self, who: Who, seq: u64, parts: usize, order: Vec<u16>) {
        let split = Split {
            parts_left: parts,
            order,
            items: Vec::new(),
        };
        self.splits.insert((who.0, who.1, seq), split);
    }

    /// This shard coordinated command `ticket`, which wrote borrowed keys of
    /// `owners` other shards (each answers with what it owes: a
    /// [`gather_answered`](Self::gather_answered)) and owes `mine` itself, each
    /// with its key's place among the written keys; `held`: its writers whose
    /// reply slots wait for it.
    pub fn gather_started(
        &mut self,
        to: &mut Deliver<'_>,
        conns: &mut Slab<Conn>,
        ticket: u64,
        owners: usize,
        (mine, held): (Vec<(u32, usize, Invalidation)>, Vec<HeldWriter>),
    ) {
        let gather = Gather {
            owners_left: owners,
            items: mine,
            held,
        };
        if owners == 0 {
            // Its own keys only: in order now, delivered with the rest.
            return self.gathered(to, conns, gather, false);
        }
        self.gathers.insert(ticket, gather);
    }

    /// An owner answered coordinated command `ticket` with what it owes; once
    /// every one did, the command's invalidations go out in write order: to
    /// clients of this shard at once (the writer's after its reply, which
    /// went when the command ran), to others one message each on this
    /// shard's channel.
    pub fn gather_answered(
        &mut self,
        to: &mut Deliver<'_>,
        conns: &mut Slab<Conn>,
        ticket: u64,
        owed: Vec<(u32, usize, Invalidation)>,
    ) {
        let Some(gather) = self.gathers.get_mut(&ticket) else {
            return;
        };
        gather.items.extend(owed);
        gather.owners_left -= 1;
        if gather.owners_left > 0 {
            return;
        }
        let gather = self.gathers.remove(&ticket).expect("present");
        self.gathered(to, conns, gather, true);
    }

    /// Send a gather's items in the order of their places: a held writer's
    /// own into its reply slot (right after its reply, or before it when
    /// another command's write caused it before the writer's ran), then the
    /// slot goes; the others now when `now`, else into the owed list
    /// (delivered once per loop iteration: the write was answered at once, a
    /// writer not held takes its own after its reply from there).
    fn gathered(
        &mut self,
        to: &mut Deliver<'_>,
        conns: &mut Slab<Conn>,
        gather: Gather,
        now: bool,
    ) {
        let Gather {
            mut items, held, ..
        } = gather;
        items.sort_by_key(|&(at, ..)| at);
        // Per held writer: the bytes before its reply and after it.
        let mut around: Vec<(Vec<u8>, Vec<u8>)> = vec![Default::default(); held.len()];
        for (at, shard, invalidation) in items {
            let writer = match shard == self.me {
                true => self.held_writer(&held, at, invalidation.client_id),
                false => None,
            };
            // A writer answered at once is out of the slab while its
            // command ends (then nothing waits: it takes its own after its
            // reply from the owed list).
            let held_conn = match writer {
                Some((w, after)) => {
                    let conn = conns.get_mut(held[w].who.0, held[w].who.1);
                    conn.map(|conn| (conn, w, after))
                }
                None => None,
            };
            match held_conn {
                Some((conn, w, after)) => {
                    let (before_bytes, after_bytes) = &mut around[w];
                    let sink = if after { after_bytes } else { before_bytes };
                    let passed =
                        to_tracking_client(to.directory, &mut conn.client, sink, invalidation);
                    if let Some(passed) = passed {
                        self.pass_on(to, conns, passed);
                    }
                }
                None if !now => self.owed.push(Owed {
                    shard,
                    invalidation,
                }),
                None if shard == self.me => self.deliver(to, conns, invalidation),
                None => to.outbox.invalidate(shard, invalidation),
            }
        }
        for (w, (before, after)) in held.iter().zip(around) {
            let Some(conn) = conns.get_mut(w.who.0, w.who.1) else {
                continue;
            };
            if !before.is_empty() {
                conn.replies.put_before(w.seq, &before);
            }
            if !after.is_empty() {
                conn.replies.put_after(w.seq, &after);
            }
            conn.replies.let_go(w.seq);
            to.dirty.push(w.who);
            crate::net::outlimit::enforce(to.limits, to.now_ms, to.dirty, conn, w.who);
        }
    }

    /// The held writer whose slot takes an invalidation for client
    /// `client_id` of this shard caused at place `at`, and whether it goes
    /// after its reply: the writer whose write caused it, else the client's
    /// first held command that ran after that write (before its reply: Redis
    /// sent it before that command ran), else its last (after it).
    fn held_writer(&self, held: &[HeldWriter], at: u32, client_id: u64) -> Option<(usize, bool)> {
        let here = self.conns.get(&client_id)?;
        let theirs = held
            .iter()
            .enumerate()
            .filter(|(_, w)| w.client_id == client_id && w.who == *here);
        let mut last = None;
        for (i, w) in theirs {
            if w.places.contains(&at) {
                return Some((i, true));
            }
            if w.places.start > at {
                return Some((i, false));
            }
            last = Some(i);
        }
        last.map(|i| (i, true))
    }

    /// Some split write is gathering here.
    pub fn splitting(&self) -> bool {
        !self.splits.is_empty()
    }

    /// Invalidations part `part` of a split write owes (`items`: index of the
    /// key in the part, the client's shard, the message). Without its split
    /// gathering here (nobody tracked when it started) they go out as any.
    pub fn split_owed(
        &mut self,
        who: Who,
        seq: u64,
        part: u16,
        items: impl Iterator<Item = (u16, usize, Invalidation)>,
    ) {
        match self.splits.get_mut(&(who.0, who.1, seq)) {
            Some(split) => split
                .items
                .extend(items.map(|(i, shard, inv)| (part, i, shard, inv))),
            None => self.owed.extend(items.map(|(_, shard, invalidation)| Owed {
                shard,
                invalidation,
            })),
        }
    }

    /// [`split_owed`](Self::split_owed) for what came from another shard.
    pub fn split_owed_from(&mut self, owed: Vec<PartOwed>) {
        for o in owed {
            let item = (o.index, o.shard, o.invalidation);
            let who = (o.tag.conn, o.tag.gen);
            self.split_owed(who, o.tag.seq, o.tag.part, std::iter::once(item));
        }
    }

    /// The split write's part stays out (a key of it was lent: it runs
    /// later): what it gathered goes out in the usual way, and so do the rest.
    pub fn split_abandoned(&mut self, who: Who, seq: u64) {
        if let Some(split) = self.splits.remove(&(who.0, who.1, seq)) {
            self.owed
                .extend(split.items.into_iter().map(|(_, _, shard, inv)| Owed {
                    shard,
                    invalidation: inv,
                }));
        }
    }

    /// The part of a split write that ran here, its origin, answered: other
    /// parts are still out (each part is another shard's).
    pub fn split_answered_here(&mut self, who: Who, seq: u64) {
        if let Some(split) = self.splits.get_mut(&(who.0, who.1, seq)) {
            assert!(split.parts_left > 1, "a split's other parts are out");
            split.parts_left -= 1;
        }
    }

    /// A part of a split write answered (before its reply is filled in): once
    /// every part did, its invalidations go out in the command's key order, as
    /// Redis sends them key by key while it writes: to the writer itself right
    /// after the command's reply (before the replies behind it), to another
    /// client of this shard at once, to a client of another shard as one
    /// message each, in that order, on this shard's channel.
    pub fn split_answered(
        &mut self,
        to: &mut Deliver<'_>,
        conns: &mut Slab<Conn>,
        who: Who,
        seq: u64,
    ) {
        let key = (who.0, who.1, seq);
        let Some(split) = self.splits.get_mut(&key) else {
            return;
        };
        split.parts_left -= 1;
        if split.parts_left > 0 {
            return;
        }
        let Split {
            order, mut items, ..
        } = self.splits.remove(&key).expect("present");
        // Where the `index`-th key of `part` stood in the command.
        let position = |part: u16, index: u16| {
            let mut seen = 0;
            for (at, &p) in order.iter().enumerate() {
                if p == part {
                    if seen == index {
                        return at;
                    }
                    seen += 1;
                }
            }
            order.len()
        };
        items.sort_by_cached_key(|&(part, index, ..)| position(part, index));
        let mut own = Vec::new();
        for (_, _, shard, inv) in items {
            if shard != self.me {
                to.outbox.invalidate(shard, inv);
                continue;
            }
            if self.conns.get(&inv.client_id) != Some(&who) {
                self.deliver(to, conns, inv);
                continue;
            }
            let Some(conn) = conns.get_mut(who.0, who.1) else {
                continue;
            };
            if let Some(passed) = to_tracking_client(to.directory, &mut conn.client, &mut own, inv)
            {
                self.pass_on(to, conns, passed);
            }
        }
        if own.is_empty() {
            return;
        }
        if let Some(conn) = conns.get_mut(who.0, who.1) {
            conn.replies.put_after(seq, &own);
            to.dirty.push(who);
            crate::net::outlimit::enforce(to.limits, to.now_ms, to.dirty, conn, who);
        }
    }

    /// A connection of this shard opened.
    pub fn connected(&mut self, directory: &Directory, client_id: u64, who: Who) {
        self.conns.insert(client_id, who);
        directory.map().insert(client_id, self.me);
    }

    /// A connection of this shard closed: its tracking ends (its entries in the
    /// tables go lazily, as Redis drops them).
    pub fn disconnected(
        &mut self,
        to: &mut Deliver<'_>,
        broadcast: bool,
        client: &mut ClientState,
    ) {
        self.disable(to, broadcast, client);
        if let Some(who) = self.conns.remove(&client.id) {
            // A part parked on its owner and cancelled never answers: what
            // its split gathered, and what comes later, goes out as any.
            let gone: Vec<(u32, u32, u64)> = self
                .splits
                .keys()
                .filter(|k| (k.0, k.1) == who)
                .copied()
                .collect();
            for (conn, gen, seq) in gone {
                self.split_abandoned((conn, gen), seq);
            }
        }
        to.directory.map().remove(&client.id);
    }

    /// CLIENT TRACKING ON: `mode` becomes the client's; BCAST clients subscribe to
    /// `prefixes` here and, when `broadcast`, on every other shard.
    pub fn enable(
        &mut self,
        outbox: &mut Outbox,
        directory: &Directory,
        broadcast: bool,
        client: &mut ClientState,
        mode: TrackingMode,
        prefixes: &[Vec<u8>],
    ) {
        let kept = client.tracking.flags & tracking_flags::CACHING;
        client.tracking = TrackingMode {
            flags: mode.flags | kept,
            ..mode
        };
        if self.clients.insert(client.id) {
            directory.tracking_clients.fetch_add(1, Relaxed);
        }
        if mode.flags & tracking_flags::BCAST == 0 {
            return;
        }
        let noloop = mode.flags & tracking_flags::NOLOOP != 0;
        let mut all = self.prefixes_of(client.id);
        for p in prefixes {
            if !all.contains(p) {
                all.push(p.clone());
            }
        }
        if all.is_empty() {
            all.push(Vec::new());
        }
        self.subscribe(self.me, client.id, noloop, Some(&all));
        if broadcast {
            outbox.bcast_prefixes(client.id, noloop, Some(&all));
        }
    }

    /// CLIENT TRACKING OFF (or RESET, or a closed connection).
    pub fn disable(&mut self, to: &mut Deliver<'_>, broadcast: bool, client: &mut ClientState) {
        self.disable_mode(to, broadcast, client.id, &mut client.tracking);
    }

    /// [`Tracking::disable`] of client `client_id` by its tracking `mode` alone:
    /// also what a RESET answered while a script kept this shard busy leaves for
    /// after the script (`shard::busy::Reset`; the client's own mode was reset
    /// then).
    pub fn disable_mode(
        &mut self,
        to: &mut Deliver<'_>,
        broadcast: bool,
        client_id: u64,
        mode: &mut TrackingMode,
    ) {
        if !mode.on() {
            return;
        }
        if mode.flags & tracking_flags::BCAST != 0 {
            self.subscribe(self.me, client_id, false, None);
            if broadcast {
                to.outbox.bcast_prefixes(client_id, false, None);
            }
        }
        if self.clients.remove(&client_id) {
            to.directory.tracking_clients.fetch_sub(1, Relaxed);
        }
        *mode = TrackingMode::default();
    }

    /// The BCAST prefixes of client `client_id` of this shard, in order.
    pub fn prefixes_of(&self, client_id: u64) -> Vec<Vec<u8>> {
        let me = self.me;
        self.prefixes
            .iter()
            .filter(|(_, p)| {
                p.subscribers
                    .iter()
                    .any(|s| s.shard == me && s.client_id == client_id)
            })
            .map(|(name, _)| name.clone())
            .collect()
    }

    /// Client `client_id` of `shard` subscribes to exactly `prefixes` (`None`:
    /// to none).
    pub fn subscribe(
        &mut self,
        shard: usize,
        client_id: u64,
        noloop: bool,
        prefixes: Option<&[Vec<u8>]>,
    ) {
        let me = Subscriber {
            shard,
            client_id,
            noloop,
        };
        let same = |s: &Subscriber| s.shard == shard && s.client_id == client_id;
        for p in self.prefixes.values_mut() {
            p.subscribers.retain(|s| !same(s));
        }
        for name in prefixes.unwrap_or_default() {
            let prefix = self.prefixes.entry(name.clone()).or_default();
            prefix.subscribers.push(me);
        }
        self.prefixes.retain(|_, p| !p.subscribers.is_empty());
    }

    /// Remember that client `client_id` of `shard` read `keys` (default mode);
    /// past this shard's limit, keys leave the table with an invalidation.
    pub fn remember<'a>(
        &mut self,
        shard: usize,
        client_id: u64,
        keys: impl Iterator<Item = &'a [u8]>,
    ) {
        let reader = Reader::new(shard, client_id);
        for key in keys {
            let readers = match self.keys.get_mut(key) {
                Some(readers) => readers,
                None => self.keys.entry(key.to_vec()).or_default(),
            };
            // Sorted: a key read by thousands of clients finds a reader in a
            // few steps, not a scan of them all per read.
            if let Err(at) = readers.binary_search(&reader) {
                readers.insert(at, reader);
                self.items += 1;
            }
        }
        while self.keys.len() > self.keys_max {
            let Some(key) = self.keys.keys().next().cloned() else {
                break;
            };
            self.invalidate_key(0, false, &key);
        }
    }

    /// Key `key` was written (or expired: `writer` 0) on this shard by client
    /// `writer` (NOLOOP when `noloop`): its readers are owed an invalidation, and
    /// the BCAST prefixes it matches note it.
    pub fn written(&mut self, writer: u64, noloop: bool, key: &[u8]) {
        if !self.prefixes.is_empty() {
            for (name, prefix) in self.prefixes.iter_mut() {
                if key.starts_with(name) {
                    prefix.written.insert(key.to_vec(), writer);
                    self.bcast_written = true;
                }
            }
        }
        if !self.keys.is_empty() {
            self.invalidate_key(writer, noloop, key);
        }
    }

    fn invalidate_key(&mut self, writer: u64, noloop: bool, key: &[u8]) {
        let Some(readers) = self.keys.remove(key) else {
            return;
        };
        self.items -= readers.len();
        for r in readers {
            if noloop && r.client_id() == writer {
                continue;
            }
            self.owed.push(Owed {
                shard: r.shard(),
                invalidation: Invalidation {
                    client_id: r.client_id(),
                    keys: Some(vec![key.to_vec()]),
                    from_table: true,
                    redirected: None,
                    after: None,
                },
            });
        }
    }

    /// A flush (FLUSHDB, FLUSHALL) ran on this shard: every tracking client of
    /// this shard is owed a null (every key), and the table starts over, as
    /// Redis' trackingInvalidateKeysOnFlush. In forward mode each shard runs the
    /// flush, so each client gets one null, from its own shard.
    pub fn flushed(&mut self) {
        let me = self.me;
        let mut ids: Vec<u64> = self.clients.iter().copied().collect();
        ids.sort_unstable();
        for client_id in ids {
            self.owed.push(Owed {
                shard: me,
                invalidation: Invalidation {
                    client_id,
                    keys: None,
                    from_table: false,
                    redirected: None,
                    after: None,
                },
            });
        }
        self.keys.clear();
        self.items = 0;
    }

    /// The invalidations owed to client `client_id` of `shard`, taken out in order.
    pub fn take_owed_to(&mut self, shard: usize, client_id: u64) -> Vec<Invalidation> {
        if self.owed.is_empty() {
            return Vec::new();
        }
        self.owed
            .take_for(shard, client_id)
            .into_iter()
            .map(|o| o.invalidation)
            .collect()
    }

    /// After a command of `client` (connected here, out of the slab while it
    /// ran): what this shard owes it goes into `sink` right after the command's
    /// reply, or on to its redirection target.
    pub fn after_command(
        &mut self,
        to: &mut Deliver<'_>,
        conns: &mut Slab<Conn>,
        client: &mut ClientState,
        sink: &mut Vec<u8>,
    ) {
        for invalidation in self.take_owed_to(self.me, client.id) {
            if let Some(passed) = to_tracking_client(to.directory, client, sink, invalidation) {
                self.pass_on(to, conns, passed);
            }
        }
    }

    /// Deliver what is owed (once per loop iteration): BCAST prefixes' keys
    /// first become messages, then each message goes to its client here or to
    /// the client's shard.
    pub fn deliver_owed(&mut self, to: &mut Deliver<'_>, conns: &mut Slab<Conn>) {
        if self.bcast_written {
            self.bcast_written = false;
            self.owe_broadcasts();
        }
        if self.owed.is_empty() {
            return;
        }
        for owed in self.owed.take_all() {
            match owed.shard == self.me {
                true => self.deliver(to, conns, owed.invalidation),
                false => to.outbox.invalidate(owed.shard, owed.invalidation),
            }
        }
    }

    /// One message per prefix and subscriber with the keys written under the
    /// prefix (a NOLOOP subscriber's own writes left out).
    fn owe_broadcasts(&mut self) {
        for prefix in self.prefixes.values_mut() {
            if prefix.written.is_empty() {
                continue;
            }
            let written = std::mem::take(&mut prefix.written);
            for s in &prefix.subscribers {
                let keys: Vec<Vec<u8>> = written
                    .iter()
                    .filter(|(_, &writer)| !(s.noloop && writer == s.client_id))
                    .map(|(key, _)| key.clone())
                    .collect();
                if keys.is_empty() {
                    continue;
                }
                self.owed.push(Owed {
                    shard: s.shard,
                    invalidation: Invalidation {
                        client_id: s.client_id,
                        keys: Some(keys),
                        from_table: false,
                        redirected: None,
                        after: None,
                    },
                });
            }
        }
    }

    /// Deliver one invalidation for a client of this shard (from here or from
    /// another shard).
    pub fn deliver(&mut self, to: &mut Deliver<'_>, conns: &mut Slab<Conn>, inv: Invalidation) {
        let Some(&who) = self.conns.get(&inv.client_id) else {
            return;
        };
        let Some(conn) = conns.get_mut(who.0, who.1) else {
            return;
        };
        if conn.client.killed {
            return;
        }
        let before = conn.replies.pending_bytes();
        let passed = match inv.redirected {
            Some(payload) => {
                to_target(&conn.client, conn.replies.sink(), &payload);
                None
            }
            None => to_tracking_client(to.directory, &mut conn.client, conn.replies.sink(), inv),
        };
        if conn.replies.pending_bytes() != before {
            to.dirty.push(who);
            crate::net::outlimit::enforce(to.limits, to.now_ms, to.dirty, conn, who);
        }
        if let Some(passed) = passed {
            self.pass_on(to, conns, passed);
        }
    }

    /// Hand an invalidation to a redirection target: here or on its shard.
    fn pass_on(&mut self, to: &mut Deliver<'_>, conns: &mut Slab<Conn>, passed: Passed) {
        if passed.shard == self.me {
            self.deliver(to, conns, passed.invalidation);
        } else {
            to.outbox.invalidate(passed.shard, passed.invalidation);
        }
    }

    /// Three shards or more: an invalidation from shard `from` for a client
    /// of this shard. One relayed for an owner ([`After`]) waits until this
    /// shard took the owner's messages up to its position (the reply of the
    /// read it invalidates among them); anything from `from` waits while
    /// something of `from`'s waits, so an origin's key order holds.
    pub fn relayed(
        &mut self,
        to: &mut Deliver<'_>,
        conns: &mut Slab<Conn>,
        from: usize,
        inv: Invalidation,
    ) {
        if let Some(inv) = self.relays.arrived(from, inv) {
            self.deliver(to, conns, inv);
        }
    }

    /// Three shards or more: this shard took one more message from shard
    /// `from` (it handled it, or a waiting script took it as its answer);
    /// what waited for it goes out.
    pub fn taken_from(&mut self, to: &mut Deliver<'_>, conns: &mut Slab<Conn>, from: usize) {
        for inv in self.relays.took(from) {
            self.deliver(to, conns, inv);
        }
    }

    /// Publish this shard's figures for INFO.
    pub fn publish(&self, directory: &Directory) {
        let g = &directory.gauges[self.me];
        g[0].store(self.clients.len() as u64, Relaxed);
        g[1].store(self.keys.len() as u64, Relaxed);
        g[2].store(self.items as u64, Relaxed);
        g[3].store(self.prefixes.len() as u64, Relaxed);
    }
}

/// An invalidation for a redirection target on `shard`.
struct Passed {
    shard: usize,
    invalidation: Invalidation,
}

/// Write an invalidation for tracking client `client` into its output `sink`,
/// or return it for the client's redirection target (Redis' sendTrackingMessage).
fn to_tracking_client(
    directory: &Directory,
    client: &mut ClientState,
    sink: &mut Vec<u8>,
    inv: Invalidation,
) -> Option<Passed> {
    let mode = client.tracking;
    if !mode.on() || (inv.from_table && mode.flags & tracking_flags::BCAST != 0) {
        return None;
    }
    let resp3 = client.proto == Protocol::Resp3;
    let payload = payload(inv.keys.as_deref(), resp3);
    if mode.redirect == 0 {
        if resp3 {
            push_invalidate(sink, &payload);
        }
        return None;
    }
    match directory.shard_of(mode.redirect) {
        Some(shard) => Some(Passed {
            shard,
            invalidation: Invalidation {
                client_id: mode.redirect,
                keys: None,
                from_table: false,
                redirected: Some(payload),
                after: None,
            },
        }),
        None => {
            client.tracking.flags |= tracking_flags::BROKEN_REDIR;
            if resp3 {
                let _ = write!(
                    sink,
                    ">2\r\n$21\r\ntracking-redir-broken\r\n:{}\r\n",
                    mode.redirect
                );
            }
            None
        }
    }
}

/// Write a redirected invalidation for target `client`: a push in RESP3, a
/// message on [`INVALIDATE_CHANNEL`] to a RESP2 client in Pub/Sub mode, nothing
/// otherwise.
fn to_target(client: &ClientState, sink: &mut Vec<u8>, payload: &[u8]) {
    if client.proto == Protocol::Resp3 {
        push_invalidate(sink, payload);
    } else if client.subs.active() {
        sink.extend_from_slice(b"*3\r\n$7\r\nmessage\r\n$20\r\n");
        sink.extend_from_slice(INVALIDATE_CHANNEL);
        sink.extend_from_slice(b"\r\n");
        sink.extend_from_slice(payload);
    }
}

/// `>2 invalidate <payload>`.
fn push_invalidate(sink: &mut Vec<u8>, payload: &[u8]) {
    sink.extend_from_slice(b">2\r\n$10\r\ninvalidate\r\n");
    sink.extend_from_slice(payload);
}

/// The message's last element: the keys as an array, or the null of the
/// tracking client's protocol (every key).
fn payload(keys: Option<&[Vec<u8>]>, resp3: bool) -> Vec<u8> {
    let mut out = Vec::new();
    match keys {
        None if resp3 => out.extend_from_slice(b"_\r\n"),
        None => out.extend_from_slice(b"$-1\r\n"),
        Some(keys) => {
            let _ = write!(out, "*{}\r\n", keys.len());
            for k in keys {
                let _ = write!(out, "${}\r\n", k.len());
                out.extend_from_slice(k);
                out.extend_from_slice(b"\r\n");
            }
        }
    }
    out
}

/// Whether BCAST prefixes go to every shard: forward mode with several shards
/// (one server). In per-shard mode a node's writes reach its own clients only,
/// as Redis Cluster's.
pub fn broadcasts(topo: &crate::cluster::topology::Topology) -> bool {
    topo.mode == crate::config::PortMode::Forward && topo.nodes.len() > 1
}

/// The invalidations owed to a forwarded command's client that go right after
/// its reply (`out`): a RESP3 client without redirection tracking now, as the
/// command's bits say, and a command forwarded whole (a split command's parts
/// are merged: theirs go through the client's shard, after the merged reply).
pub fn after_forwarded(
    tracking: &mut Tracking,
    from: usize,
    client_id: u64,
    bits: u8,
    resp3: bool,
    out: &mut Vec<u8>,
) {
    use tracking_command::{REDIRECTED, TRACKING, WHOLE};
    let direct = bits & (TRACKING | WHOLE) == TRACKING | WHOLE && bits & REDIRECTED == 0;
    if !direct || !resp3 || !tracking.owes() {
        return;
    }
    for inv in tracking.take_owed_to(from, client_id) {
        push_invalidate(out, &payload(inv.keys.as_deref(), true));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_owes_each_reader_once_and_forgets_the_key() {
        let mut t = Tracking::new(0, usize::MAX);
        t.remember(0, 7, [b"k".as_slice()].into_iter());
        t.remember(1, 8, [b"k".as_slice(), b"k".as_slice()].into_iter());
        assert_eq!((t.keys.len(), t.items), (1, 2));
        t.written(9, false, b"k");
        assert_eq!(t.take_owed_to(1, 8).len(), 1);
        assert_eq!(t.take_owed_to(0, 7).len(), 1);
        assert!(!t.active() && !t.owes());
    }

    #[test]
    fn noloop_skips_the_writer_and_the_limit_evicts() {
        let mut t = Tracking::new(0, usize::MAX);
        t.remember(0, 7, [b"k".as_slice()].into_iter());
        t.written(7, true, b"k");
        assert!(!t.owes());
        t.set_max_keys(2, 1);
        let keys: [&[u8]; 3] = [b"a", b"b", b"c"];
        t.remember(0, 7, keys.into_iter());
        assert_eq!(t.keys.len(), 2);
        assert_eq!(t.take_owed_to(0, 7).len(), 1);
    }

    #[test]
    fn bcast_batches_a_prefix_keys_and_leaves_out_a_noloop_writer() {
        let mut t = Tracking::new(0, usize::MAX);
        t.subscribe(0, 7, false, Some(&[b"user:".to_vec()]));
        t.subscribe(1, 8, true, Some(&[Vec::new()]));
        assert!(t.active());
        t.written(8, true, b"user:2");
        t.written(9, false, b"user:1");
        t.written(9, false, b"other");
        t.owe_broadcasts();
        let to_7 = t.take_owed_to(0, 7);
        assert_eq!(to_7.len(), 1);
        assert_eq!(
            to_7[0].keys,
            Some(vec![b"user:1".to_vec(), b"user:2".to_vec()])
        );
        let to_8: Vec<_> = t.take_owed_to(1, 8).into_iter().map(|i| i.keys).collect();
        // Its prefix "" matches every key; its own write is left out.
        let other_and_user_1 = vec![b"other".to_vec(), b"user:1".to_vec()];
        assert_eq!(to_8, [Some(other_and_user_1)]);
        t.subscribe(1, 8, false, None);
        t.subscribe(0, 7, false, None);
        assert!(!t.active());
    }

    /// A part of a split write takes what it owes, with each key's index in
    /// the part: a third shard's tagged with where this shard's channel to
    /// it will stand once what is queued for it is sent. The origin puts the
    /// parts' keys back in the command's order.
    #[test]
    fn split_parts_owe_their_origin_in_key_order() {
        let mut owner = Tracking::new(1, usize::MAX);
        for (shard, id) in [(0, 7), (1, 8), (2, 9)] {
            owner.remember(shard, id, [b"b".as_slice(), b"d".as_slice()].into_iter());
        }
        let since = owner.owed_len();
        owner.written(5, false, b"d");
        owner.written(5, false, b"b");
        let part_keys: [&[u8]; 2] = [b"b", b"d"];
        // One message queued for shard 2 (a read's reply batch, say).
        let mut outbox = Outbox::new(1, 3);
        outbox.invalidate(2, Invalidation::default());
        let taken = owner.take_part_owed(since, 0, &part_keys, &outbox);
        let shown: Vec<(u16, usize, Option<After>)> =
            taken.iter().map(|t| (t.0, t.1, t.2.after)).collect();
        let after = Some(After { owner: 1, sent: 1 });
        let expected = [(1, 0, None), (1, 1, None), (1, 2, after)];
        let expected_b = [(0, 0, None), (0, 1, None), (0, 2, after)];
        assert_eq!(shown, [expected, expected_b].concat());
        assert!(!owner.owes());

        // The origin (shard 0): MSET a b c d, a and c its own (part 0), b and
        // d shard 1's (part 1).
        let mut origin = Tracking::new(0, usize::MAX);
        origin.split_started((3, 1), 0, 2, vec![0, 1, 0, 1]);
        assert!(origin.splitting());
        let inv = |key: &[u8]| Invalidation {
            client_id: 7,
            keys: Some(vec![key.to_vec()]),
            from_table: true,
            redirected: None,
            after: None,
        };
        let mine = [(1, 1, inv(b"c")), (0, 1, inv(b"a"))];
        origin.split_owed((3, 1), 0, 0, mine.into_iter());
        origin.split_answered_here((3, 1), 0);
        let theirs = [(1, 1, inv(b"d")), (0, 1, inv(b"b"))];
        origin.split_owed((3, 1), 0, 1, theirs.into_iter());
        let split = &origin.splits[&(3, 1, 0)];
        assert_eq!(split.parts_left, 1);
        assert_eq!(split.items.len(), 4);
        // Without its split gathering here, what a part owes goes out as any.
        origin.split_abandoned((3, 1), 0);
        assert!(!origin.splitting());
        assert_eq!(origin.take_owed_to(1, 7).len(), 4);
    }

    /// What a coordinated write owes a client whose commands are held
    /// writers of it goes after the reply of the command that caused it,
    /// before the reply of its command that ran after the cause, or after its
    /// last; a client that wrote nothing in it is not held.
    /// A third shard holds an invalidation relayed for an owner until it
    /// took the owner's messages up to its position, and everything its
    /// origin sent behind it; another origin's go at once.
    #[test]
    fn a_relayed_invalidation_waits_for_its_owner_channel() {
        let inv = |key: &[u8], after: Option<After>| Invalidation {
            client_id: 7,
            keys: Some(vec![key.to_vec()]),
            from_table: true,
            after,
            ..Default::default()
        };
        let mut relays = Relays::default();
        let (origin, owner, other) = (0, 1, 3);
        let waits = Some(After { owner, sent: 2 });
        assert_eq!(relays.arrived(origin, inv(b"a", waits)), None);
        assert_eq!(relays.arrived(origin, inv(b"b", None)), None);
        let elsewhere = inv(b"c", None);
        assert_eq!(relays.arrived(other, elsewhere.clone()), Some(elsewhere));
        assert_eq!(relays.took(owner), []);
        assert_eq!(relays.took(origin), []);
        let keys = |v: Vec<Invalidation>| v.into_iter().map(|i| i.keys).collect::<Vec<_>>();
        let a_then_b = vec![Some(vec![b"a".to_vec()]), Some(vec![b"b".to_vec()])];
        assert_eq!(keys(relays.took(owner)), a_then_b);
        assert_eq!(relays.waiting_len, 0);
        // Past its position already: at once.
        let past = inv(b"d", Some(After { owner, sent: 1 }));
        assert_eq!(relays.arrived(origin, past.clone()), Some(past));
    }

    #[test]
    fn a_held_writer_takes_its_own_around_its_reply() {
        let mut t = Tracking::new(0, usize::MAX);
        t.conns.insert(7, (1, 1));
        t.conns.insert(8, (2, 1));
        let writer = |who, seq, client_id, places| HeldWriter {
            who,
            seq,
            client_id,
            places,
        };
        // Client 7's EXEC wrote places 0..2, client 8's rode on it (2..4),
        // then client 7's next EXEC (4..6).
        let held = [
            writer((1, 1), 10, 7, 0..2),
            writer((2, 1), 3, 8, 2..4),
            writer((1, 1), 11, 7, 4..6),
        ];
        assert_eq!(t.held_writer(&held, 1, 7), Some((0, true)));
        assert_eq!(t.held_writer(&held, 3, 7), Some((2, false)));
        assert_eq!(t.held_writer(&held, 5, 7), Some((2, true)));
        assert_eq!(t.held_writer(&held, 0, 8), Some((1, false)));
        assert_eq!(t.held_writer(&held, 5, 8), Some((1, true)));
        assert_eq!(t.held_writer(&held, 0, 9), None);
        // A client id now on another connection is not the writer's.
        t.conns.insert(8, (5, 2));
        assert_eq!(t.held_writer(&held, 2, 8), None);
    }

    #[test]
    fn a_reader_is_one_word_of_shard_and_id() {
        let edge = Reader::new(65_535, READER_CLIENT_ID_END - 1);
        assert_eq!(
            (edge.shard(), edge.client_id()),
            (65_535, READER_CLIENT_ID_END - 1)
        );
        let small = Reader::new(1, 7);
        assert_eq!((small.shard(), small.client_id()), (1, 7));
        assert_ne!(Reader::new(0, 7), Reader::new(1, 7));
    }

    #[test]
    fn payload_is_resp() {
        assert_eq!(payload(None, true), b"_\r\n");
        assert_eq!(payload(None, false), b"$-1\r\n");
        assert_eq!(
            payload(Some(&[b"ab".to_vec()]), true),
            b"*1\r\n$2\r\nab\r\n"
        );
    }
}
