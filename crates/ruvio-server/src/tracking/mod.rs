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
//!
//! Files: the table, its readers and prefixes, and what a shard owes (here);
//! a write over several shards gathered in key order (`split.rs`); delivery to
//! clients, redirection targets and other shards (`delivery.rs`).

use crate::mesh::forward::{Invalidation, Outbox};
use crate::net::conn::{tracking_flags, ClientState, TrackingMode};
use ahash::{AHashMap, AHashSet};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;

mod delivery;
mod split;

use delivery::Relays;
pub use delivery::{after_forwarded, Deliver};
use split::{Gather, Split};

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
}

/// Whether BCAST prefixes go to every shard: forward mode with several shards
/// (one server). In per-shard mode a node's writes reach its own clients only,
/// as Redis Cluster's.
pub fn broadcasts(topo: &crate::cluster::topology::Topology) -> bool {
    topo.mode == crate::config::PortMode::Forward && topo.nodes.len() > 1
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
}
