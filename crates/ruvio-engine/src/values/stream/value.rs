//! `StreamValue`: a stream in one machine word (a `Box`), entries packed in nodes.
//!
//! Why nodes: a stream is mostly appended to and read in ID order, and its entries
//! are small. A map from ID to a boxed entry would cost a tree slot, an ID and an
//! allocation per entry (about 60 bytes before the payload); Redis packs up to
//! `stream-node-max-entries` (100) entries in one listpack per radix-tree node.
//! Ruvio does the same with a `BTreeMap` keyed by each node's first (master) ID and
//! a byte vector per node: an entry costs its payload plus a few bytes of header.
//! Node boundaries are Redis's (`stream-node-max-entries`, 100, or
//! `stream-node-max-bytes`, 4096, of Redis's listpack encoding of them: see
//! [`NodeLimits`]), so `MAXLEN ~`, which only drops whole nodes, keeps what Redis
//! keeps.
//!
//! An entry in a node: a flag byte (deleted or not), the ms part as a delta from
//! the node's master ID, the sequence, the pair count, then each field and value
//! with its length (LEB128 varints throughout). Deleting marks the flag; a node
//! whose entries are all deleted is dropped, as Redis does.

use std::collections::BTreeMap;

use super::groups::{Groups, ENTRIES_READ_UNKNOWN};
use super::id::StreamId;
use crate::undo::{self, Inverse, Kept};
use crate::varint;

/// Entries per node before a new one starts: `stream-node-max-entries`' default.
pub const NODE_ENTRIES_MAX: usize = 100;
/// Listpack bytes per node before a new one starts: `stream-node-max-bytes`'
/// default.
pub const NODE_BYTES_MAX: usize = 4096;
/// The largest node Redis lets a listpack grow to (`STREAM_LISTPACK_MAX_SIZE`,
/// 1 GiB): `stream-node-max-bytes` 0 (no limit) or above it means this.
const NODE_BYTES_CEILING: usize = 1 << 30;

/// Where a node closes (`stream-node-max-entries`, `stream-node-max-bytes`),
/// read from the configuration at each append as Redis reads its globals, so
/// CONFIG SET applies to the next XADD.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NodeLimits {
    /// Entries (deleted ones included) per node; 0: no limit.
    pub entries_max: usize,
    /// Listpack bytes per node; 0: up to [`NODE_BYTES_CEILING`].
    pub bytes_max: usize,
}

impl Default for NodeLimits {
    fn default() -> Self {
        NodeLimits {
            entries_max: NODE_ENTRIES_MAX,
            bytes_max: NODE_BYTES_MAX,
        }
    }
}

const LIVE: u8 = 0;
const DELETED: u8 = 1;
/// Bytes of a stream's counters and IDs as the undo journal keeps them.
const META_BYTES: usize = 6 * 8;

/// For the undo journal (when the stream is open): node `master` as it is,
/// before a change drops it.
fn record_node_back(master: StreamId, node: &Node) {
    if !undo::inverses_wanted() {
        return;
    }
    let (count, live, lp_bytes) = (node.count as u32, node.live as u32, node.lp_bytes as u32);
    undo::record_inverse(|arena| Inverse::StreamNodeBack {
        master,
        bytes: Kept::of(arena, &node.bytes),
        count,
        live,
        lp_bytes,
    });
}

/// Estimated bookkeeping per node: its tree slot (ID and vector) and the vector's
/// allocation header, with the tree's half-full nodes.
const NODE_OVERHEAD_BYTES: usize = 2 * (16 + 24) + 16;

/// The varint at `bytes[*at..]`; moves `at` past it.
#[inline]
fn get_varint(bytes: &[u8], at: &mut usize) -> u64 {
    let (v, next) = varint::read(bytes, *at);
    *at = next;
    v
}

/// One node: entries packed in ID order.
#[derive(Clone, Debug, Default)]
struct Node {
    bytes: Vec<u8>,
    /// Entries written, deleted ones included.
    count: usize,
    /// Entries not deleted.
    live: usize,
    /// The size Redis's listpack for these entries would have: Redis closes a node
    /// by it, so Ruvio does too (see [`listpack`]).
    lp_bytes: usize,
}

/// Redis's listpack sizes, for node boundaries only (`lpEncodeBacklen`,
/// `lpStringToInt64`, t_stream.c's entry layout with master-field compression).
mod listpack {
    /// Header (total bytes, count) and end byte.
    pub const EMPTY: usize = 7;

    fn backlen(encoded: usize) -> usize {
        match encoded {
            0..=127 => 1,
            128..=16382 => 2,
            16383..=2097150 => 3,
            2097151..=268435454 => 4,
            _ => 5,
        }
    }

    pub fn int(v: i64) -> usize {
        let encoded = match v {
            0..=127 => 1,
            -4096..=4095 => 2,
            -32768..=32767 => 3,
            -8388608..=8388607 => 4,
            -2147483648..=2147483647 => 5,
            _ => 9,
        };
        encoded + backlen(encoded)
    }

    /// A string element: an integer when it reads as one, as `lpAppend` stores it.
    pub fn string(s: &[u8]) -> usize {
        if let Some(n) = crate::args::parse_i64(s)
            .filter(|n| s.len() <= 20 && itoa::Buffer::new().format(*n).as_bytes() == s)
        {
            return int(n);
        }
        let encoded = match s.len() {
            0..=63 => 1 + s.len(),
            64..=4095 => 2 + s.len(),
            n => 5 + n,
        };
        encoded + backlen(encoded)
    }

    /// The master entry of a node whose first entry has `fields`.
    pub fn master(fields: &[&[u8]]) -> usize {
        let names: usize = fields.iter().step_by(2).map(|f| string(f)).sum();
        int(1) + int(0) + int((fields.len() / 2) as i64) + names + int(0)
    }

    /// One entry: flags, ms and seq deltas, the fields unless they are the
    /// master's, the values, and the entry's element count.
    pub fn entry(ms_delta: u64, seq_delta: u64, fields: &[&[u8]], same_fields: bool) -> usize {
        let pairs = fields.len() / 2;
        let flags = if same_fields { 2 } else { 0 };
        let mut total = int(flags) + int(ms_delta as i64) + int(seq_delta as i64);
        if same_fields {
            total += fields
                .iter()
                .skip(1)
                .step_by(2)
                .map(|v| string(v))
                .sum::<usize>();
            total + int(pairs as i64 + 3)
        } else {
            total += int(pairs as i64);
            total += fields.iter().map(|f| string(f)).sum::<usize>();
            total + int(2 * pairs as i64 + 4)
        }
    }
}

/// One entry read from a node.
#[derive(Clone, Copy, Debug)]
pub struct EntryRef<'a> {
    /// Its ID.
    pub id: StreamId,
    /// Where it starts in its node (for marking it deleted).
    at: usize,
    deleted: bool,
    pairs: usize,
    body: &'a [u8],
}

impl<'a> EntryRef<'a> {
    /// Number of field/value pairs.
    pub fn pairs(&self) -> usize {
        self.pairs
    }

    /// Fields and values, alternating.
    pub fn fields(&self) -> impl Iterator<Item = &'a [u8]> + 'a {
        let body = self.body;
        let mut at = 0;
        (0..self.pairs * 2).map(move |_| {
            let len = get_varint(body, &mut at) as usize;
            let s = &body[at..at + len];
            at += len;
            s
        })
    }
}

impl Node {
    fn push(&mut self, master: StreamId, id: StreamId, fields: &[&[u8]]) {
        let same_fields = match self.entries(master).next() {
            None => {
                self.lp_bytes = listpack::EMPTY + listpack::master(fields);
                true
            }
            Some(first) => {
                first.pairs == fields.len() / 2
                    && first
                        .fields()
                        .step_by(2)
                        .eq(fields.iter().step_by(2).copied())
            }
        };
        self.lp_bytes += listpack::entry(
            id.ms.wrapping_sub(master.ms),
            id.seq.wrapping_sub(master.seq),
            fields,
            same_fields,
        );
        self.bytes.push(LIVE);
        // After XSETID below a deleted master entry an ID may be below its
        // node's master: the delta wraps, as Redis's signed one does.
        varint::push(&mut self.bytes, id.ms.wrapping_sub(master.ms));
        varint::push(&mut self.bytes, id.seq);
        varint::push(&mut self.bytes, (fields.len() / 2) as u64);
        for f in fields {
            varint::push(&mut self.bytes, f.len() as u64);
            self.bytes.extend_from_slice(f);
        }
        self.count += 1;
        self.live += 1;
    }

    /// Every entry, deleted ones included, in order.
    fn entries(&self, master: StreamId) -> NodeIter<'_> {
        NodeIter {
            bytes: &self.bytes,
            at: 0,
            master,
        }
    }

    fn live_entries(&self, master: StreamId) -> impl Iterator<Item = EntryRef<'_>> {
        self.entries(master).filter(|e| !e.deleted)
    }

    /// [`live_entries`](Self::live_entries) backwards. Entries are only
    /// decodable forwards; nodes are small (at most 100 entries), so collecting
    /// them costs one short vector per node walked.
    fn live_entries_rev(&self, master: StreamId) -> impl Iterator<Item = EntryRef<'_>> {
        let all: Vec<EntryRef<'_>> = self.live_entries(master).collect();
        all.into_iter().rev()
    }

    fn mark_deleted(&mut self, at: usize) {
        self.bytes[at] = DELETED;
        self.live -= 1;
    }

    /// Redis's rule for a new node before appending an entry whose fields and
    /// values total `payload` bytes (`streamAppendItem`: bytes first, then the
    /// entry count, deleted entries included).
    fn full_for(&self, payload: usize, limits: NodeLimits) -> bool {
        let bytes_max = match limits.bytes_max {
            0 => NODE_BYTES_CEILING,
            n => n.min(NODE_BYTES_CEILING),
        };
        self.lp_bytes + payload >= bytes_max
            || (limits.entries_max != 0 && self.count >= limits.entries_max)
    }

    fn heap_bytes(&self) -> usize {
        self.bytes.capacity() + NODE_OVERHEAD_BYTES
    }
}

struct NodeIter<'a> {
    bytes: &'a [u8],
    at: usize,
    master: StreamId,
}

impl<'a> Iterator for NodeIter<'a> {
    type Item = EntryRef<'a>;

    fn next(&mut self) -> Option<EntryRef<'a>> {
        let bytes = self.bytes;
        if self.at >= bytes.len() {
            return None;
        }
        let start = self.at;
        let mut at = start + 1;
        let ms = self.master.ms.wrapping_add(get_varint(bytes, &mut at));
        let seq = get_varint(bytes, &mut at);
        let pairs = get_varint(bytes, &mut at) as usize;
        let body_start = at;
        for _ in 0..pairs * 2 {
            let len = get_varint(bytes, &mut at) as usize;
            at += len;
        }
        self.at = at;
        Some(EntryRef {
            id: StreamId::new(ms, seq),
            at: start,
            deleted: bytes[start] == DELETED,
            pairs,
            body: &bytes[body_start..at],
        })
    }
}

/// One entry of a node as RDB writes it, deleted ones included.
#[derive(Clone, Debug)]
pub struct NodeEntry<'a> {
    /// Its ID.
    pub id: StreamId,
    /// Marked deleted (XDEL, or an exact trim inside the node).
    pub deleted: bool,
    /// Fields and values, alternating.
    pub fields: Vec<&'a [u8]>,
}

/// How a trim is bounded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TrimTo {
    /// Keep at most this many entries.
    MaxLen(u64),
    /// Drop entries below this ID.
    MinId(StreamId),
}

/// The stream behind the handle.
#[derive(Clone, Debug, Default)]
struct Stream {
    nodes: BTreeMap<StreamId, Node>,
    len: u64,
    last_id: StreamId,
    max_deleted_id: StreamId,
    entries_added: u64,
    node_bytes: usize,
    groups: Groups,
}

/// A Redis stream (one word: the boxed stream).
#[derive(Clone, Debug, Default)]
pub struct StreamValue(Box<Stream>);

impl StreamValue {
    /// An empty stream, last ID `0-0`.
    pub fn new() -> StreamValue {
        StreamValue::default()
    }

    /// Entries not deleted.
    pub fn len(&self) -> u64 {
        self.0.len
    }

    /// True with no entry (a stream key may still exist empty).
    pub fn is_empty(&self) -> bool {
        self.0.len == 0
    }

    /// The greatest ID ever added (or set by XSETID).
    pub fn last_id(&self) -> StreamId {
        self.0.last_id
    }

    /// The greatest ID deleted by XDEL.
    pub fn max_deleted_id(&self) -> StreamId {
        self.0.max_deleted_id
    }

    /// Entries ever added.
    pub fn entries_added(&self) -> u64 {
        self.0.entries_added
    }

    /// XSETID: the new last ID, and optionally entries-added and max-deleted-id.
    pub fn set_last_id(&mut self, id: StreamId, added: Option<u64>, max_deleted: Option<StreamId>) {
        self.record_meta();
        let s = &mut self.0;
        s.last_id = id;
        if let Some(n) = added {
            s.entries_added = n;
        }
        if let Some(m) = max_deleted {
            s.max_deleted_id = m;
        }
    }

    /// Append an entry with `id`, which the caller made greater than
    /// [`last_id`](Self::last_id); `fields` alternate field and value. A new
    /// node starts when the last one is full by `limits`.
    pub fn append(&mut self, id: StreamId, fields: &[&[u8]], limits: NodeLimits) {
        debug_assert!(id > self.0.last_id || self.0.entries_added == 0);
        self.record_meta();
        let s = &mut *self.0;
        let payload = fields.iter().map(|f| f.len()).sum();
        match s.nodes.last_entry() {
            Some(mut node) if !node.get().full_for(payload, limits) => {
                let master = *node.key();
                if undo::inverses_wanted() {
                    let n = node.get();
                    let cut = Inverse::StreamNodeCut {
                        master,
                        len: n.bytes.len() as u32,
                        count: n.count as u32,
                        live: n.live as u32,
                        lp_bytes: n.lp_bytes as u32,
                    };
                    undo::record_inverse(|_| cut);
                }
                let before = node.get().heap_bytes();
                node.get_mut().push(master, id, fields);
                s.node_bytes = s.node_bytes + node.get().heap_bytes() - before;
            }
            last => {
                // A full node gets no more entries: give back its growth room.
                if let Some(mut full) = last {
                    let before = full.get().heap_bytes();
                    full.get_mut().bytes.shrink_to_fit();
                    s.node_bytes = s.node_bytes + full.get().heap_bytes() - before;
                }
                let mut node = Node::default();
                node.push(id, id, fields);
                s.node_bytes += node.heap_bytes();
                s.nodes.insert(id, node);
                undo::record_inverse(|_| Inverse::StreamNodeOut { master: id });
            }
        }
        s.len += 1;
        s.last_id = id;
        s.entries_added += 1;
    }

    /// Live entries with IDs in `[start, end]`, ascending.
    pub fn range(&self, start: StreamId, end: StreamId) -> impl Iterator<Item = EntryRef<'_>> {
        let first_node = self
            .0
            .nodes
            .range(..=start)
            .next_back()
            .map(|(k, _)| *k)
            .unwrap_or(StreamId::MIN);
        // No stop at a node whose master is past `end`: after XSETID below a
        // deleted master, the last node may hold entries below its master.
        self.0
            .nodes
            .range(first_node..)
            .flat_map(|(master, node)| node.live_entries(*master))
            .skip_while(move |e| e.id < start)
            .take_while(move |e| e.id <= end)
    }

    /// Live entries with IDs in `[start, end]`, descending.
    pub fn range_rev(&self, start: StreamId, end: StreamId) -> impl Iterator<Item = EntryRef<'_>> {
        // The node after `end` too: it may hold entries below its master (see
        // `range`).
        let next = self.0.nodes.range(end..).find(|(m, _)| **m > end);
        next.into_iter()
            .chain(self.0.nodes.range(..=end).rev())
            .flat_map(|(master, node)| node.live_entries_rev(*master))
            .skip_while(move |e| e.id > end)
            .take_while(move |e| e.id >= start)
    }

    /// The last live entry's ID (`streamLastValidID`).
    pub fn last_entry_id(&self) -> Option<StreamId> {
        self.range_rev(StreamId::MIN, StreamId::MAX)
            .next()
            .map(|e| e.id)
    }

    /// The first live entry's ID.
    pub fn first_id(&self) -> Option<StreamId> {
        self.range(StreamId::MIN, StreamId::MAX)
            .next()
            .map(|e| e.id)
    }

    /// Delete the entry `id`; false when there is none.
    pub fn delete(&mut self, id: StreamId) -> bool {
        self.record_meta();
        let s = &mut *self.0;
        let Some((&master, node)) = s.nodes.range_mut(..=id).next_back() else {
            return false;
        };
        let Some(at) = node
            .entries(master)
            .find(|e| e.id == id && !e.deleted)
            .map(|e| e.at)
        else {
            return false;
        };
        match node.live {
            1 => record_node_back(master, node),
            _ => undo::record_inverse(|_| Inverse::StreamUndelete {
                master,
                at: at as u32,
            }),
        }
        node.mark_deleted(at);
        if node.live == 0 {
            let gone = s.nodes.remove(&master).map_or(0, |n| n.heap_bytes());
            s.node_bytes -= gone;
        }
        s.len -= 1;
        if id > s.max_deleted_id {
            s.max_deleted_id = id;
        }
        true
    }

    /// `streamTrim`: drop entries from the head down to `to`. `approx` drops whole
    /// nodes only; `limit` (0: none) caps the entries an approximate trim drops.
    /// Returns the number dropped.
    pub fn trim(&mut self, to: TrimTo, approx: bool, limit: u64) -> u64 {
        self.trim_noting(to, approx, limit, None)
    }

    /// [`trim`](Self::trim), pushing the ID of every entry it drops to
    /// `dropped` when given (XADD/XTRIM DELREF drops their references).
    pub fn trim_noting(
        &mut self,
        to: TrimTo,
        approx: bool,
        limit: u64,
        mut dropped_ids: Option<&mut Vec<StreamId>>,
    ) -> u64 {
        self.record_meta();
        let s = &mut *self.0;
        let mut dropped = 0u64;
        while let Some(mut first) = s.nodes.first_entry() {
            let master = *first.key();
            let node = first.get_mut();
            let whole = match to {
                TrimTo::MaxLen(max) => {
                    if s.len <= max {
                        break;
                    }
                    s.len - node.live as u64 >= max
                }
                TrimTo::MinId(min) => {
                    let last = node.entries(master).last().map_or(master, |e| e.id);
                    last < min
                }
            };
            if limit != 0 && dropped + node.live as u64 > limit {
                break;
            }
            if whole {
                let live = node.live as u64;
                if let Some(ids) = dropped_ids.as_deref_mut() {
                    ids.extend(node.live_entries(master).map(|e| e.id));
                }
                record_node_back(master, node);
                let gone = first.remove().heap_bytes();
                s.node_bytes -= gone;
                s.len -= live;
                dropped += live;
                continue;
            }
            if approx {
                break;
            }
            // Redis stops at the first entry at or past MINID, deleted or not
            // (after XSETID a deleted entry may be above later ones).
            let doomed: Vec<usize> = match to {
                TrimTo::MaxLen(max) => node
                    .entries(master)
                    .filter(|e| !e.deleted)
                    .take((s.len - max) as usize)
                    .map(|e| e.at)
                    .collect(),
                TrimTo::MinId(min) => node
                    .entries(master)
                    .take_while(|e| e.id < min)
                    .filter(|e| !e.deleted)
                    .map(|e| e.at)
                    .collect(),
            };
            if let Some(ids) = dropped_ids.as_deref_mut() {
                let doomed_at = |e: &EntryRef<'_>| doomed.binary_search(&e.at).is_ok();
                ids.extend(node.entries(master).filter(doomed_at).map(|e| e.id));
            }
            for &at in &doomed {
                let at32 = at as u32;
                undo::record_inverse(|_| Inverse::StreamUndelete { master, at: at32 });
                node.mark_deleted(at);
            }
            // A node left with deleted entries only stays, as in Redis (its
            // entries still count towards its fill).
            s.len -= doomed.len() as u64;
            dropped += doomed.len() as u64;
            break;
        }
        dropped
    }

    /// [`trim`](Self::trim) under Redis 8.2's ACKED (XADD / XTRIM): an entry
    /// the strategy would drop goes only when no consumer group still needs it
    /// (none has it pending and every group was delivered past it,
    /// [`Groups::is_referenced`]); the others stay and the trim goes on past
    /// them. A node goes whole only when none of its entries is needed; an
    /// approximate trim stops at the first node that cannot go whole. With no
    /// group nothing is needed, and this is [`trim`](Self::trim).
    pub fn trim_acked(&mut self, to: TrimTo, approx: bool, limit: u64) -> u64 {
        use std::ops::Bound::{Excluded, Unbounded};
        if self.0.groups.is_empty() {
            return self.trim(to, approx, limit);
        }
        self.record_meta();
        let s = &mut *self.0;
        let mut dropped = 0u64;
        let mut after: Option<StreamId> = None;
        loop {
            if matches!(to, TrimTo::MaxLen(max) if s.len <= max) {
                break;
            }
            let next = match after {
                None => s.nodes.range_mut(..).next(),
                Some(prev) => s.nodes.range_mut((Excluded(prev), Unbounded)).next(),
            };
            let Some((&master, node)) = next else {
                break;
            };
            after = Some(master);
            let groups = &s.groups;
            let needed = node
                .live_entries(master)
                .any(|e| groups.is_referenced(e.id));
            let past_min = match to {
                TrimTo::MaxLen(max) => s.len - node.live as u64 >= max,
                TrimTo::MinId(min) => node.entries(master).last().map_or(master, |e| e.id) < min,
            };
            if limit != 0 && dropped + node.live as u64 > limit {
                break;
            }
            if past_min && !needed {
                let live = node.live as u64;
                record_node_back(master, node);
                let gone = s.nodes.remove(&master).map_or(0, |n| n.heap_bytes());
                s.node_bytes -= gone;
                s.len -= live;
                dropped += live;
                continue;
            }
            if approx {
                break;
            }
            // Entry by entry, skipping what a group needs; MINID stops at the
            // first entry at or past it, deleted or not (as `trim_noting`).
            let mut doomed: Vec<usize> = Vec::new();
            let mut reached_min = false;
            for e in node.entries(master) {
                match to {
                    TrimTo::MaxLen(max) if s.len - doomed.len() as u64 <= max => break,
                    TrimTo::MinId(min) if e.id >= min => {
                        reached_min = true;
                        break;
                    }
                    _ => {}
                }
                if !e.deleted && !groups.is_referenced(e.id) {
                    doomed.push(e.at);
                }
            }
            for &at in &doomed {
                let at32 = at as u32;
                undo::record_inverse(|_| Inverse::StreamUndelete { master, at: at32 });
                node.mark_deleted(at);
            }
            s.len -= doomed.len() as u64;
            dropped += doomed.len() as u64;
            if reached_min {
                break;
            }
        }
        dropped
    }

    /// Heap bytes (O(1)).
    pub fn heap_bytes(&self) -> usize {
        std::mem::size_of::<Stream>() + self.0.node_bytes + self.0.groups.heap_bytes()
    }

    /// The consumer groups.
    pub fn groups(&self) -> &Groups {
        &self.0.groups
    }

    /// The consumer groups, to change.
    pub fn groups_mut(&mut self) -> &mut Groups {
        &mut self.0.groups
    }

    /// For the undo journal (when the stream is open): its counters and IDs
    /// before a change.
    fn record_meta(&self) {
        if !undo::inverses_wanted() {
            return;
        }
        let s = &*self.0;
        let mut raw = [0u8; META_BYTES];
        let words = [
            s.len,
            s.last_id.ms,
            s.last_id.seq,
            s.max_deleted_id.ms,
            s.max_deleted_id.seq,
            s.entries_added,
        ];
        for (chunk, word) in raw.chunks_exact_mut(8).zip(words) {
            chunk.copy_from_slice(&word.to_le_bytes());
        }
        undo::record_inverse(|arena| Inverse::StreamMeta(Kept::of(arena, &raw)));
    }

    /// Reverse one change (the undo journal's roll-back).
    pub(crate) fn reverse(&mut self, inverse: Inverse, arena: &[u8]) {
        let s = &mut *self.0;
        match inverse {
            Inverse::StreamMeta(raw) => {
                let mut words = raw
                    .get(arena)
                    .chunks_exact(8)
                    .map(|c| u64::from_le_bytes(c.try_into().unwrap_or_default()));
                let mut next = || words.next().unwrap_or_default();
                s.len = next();
                s.last_id = StreamId {
                    ms: next(),
                    seq: next(),
                };
                s.max_deleted_id = StreamId {
                    ms: next(),
                    seq: next(),
                };
                s.entries_added = next();
                // Counted afresh: a roll-back may leave a node's room different.
                s.node_bytes = s.nodes.values().map(Node::heap_bytes).sum();
            }
            Inverse::StreamNodeBack {
                master,
                bytes,
                count,
                live,
                lp_bytes,
            } => {
                let node = Node {
                    bytes: bytes.get(arena).to_vec(),
                    count: count as usize,
                    live: live as usize,
                    lp_bytes: lp_bytes as usize,
                };
                s.nodes.insert(master, node);
            }
            Inverse::StreamNodeOut { master } => drop(s.nodes.remove(&master)),
            Inverse::StreamNodeCut {
                master,
                len,
                count,
                live,
                lp_bytes,
            } => {
                if let Some(node) = s.nodes.get_mut(&master) {
                    node.bytes.truncate(len as usize);
                    node.count = count as usize;
                    node.live = live as usize;
                    node.lp_bytes = lp_bytes as usize;
                }
            }
            Inverse::StreamUndelete { master, at } => {
                if let Some(node) = s.nodes.get_mut(&master) {
                    if node.bytes[at as usize] == DELETED {
                        node.bytes[at as usize] = LIVE;
                        node.live += 1;
                    }
                }
            }
            other => unreachable!("{other:?} recorded for a stream"),
        }
    }

    /// True when entry `id` is in the stream (`streamEntryExists`).
    pub fn contains(&self, id: StreamId) -> bool {
        self.range(id, id).next().is_some()
    }

    /// Redis's `first_id`: the first live entry, `0-0` when empty.
    pub fn recorded_first_id(&self) -> StreamId {
        self.first_id().unwrap_or(StreamId::MIN)
    }

    /// Each node's master ID and every entry it holds, deleted ones included
    /// (what Redis's listpack for the node holds).
    pub fn nodes(&self) -> impl Iterator<Item = (StreamId, Vec<NodeEntry<'_>>)> + '_ {
        self.0.nodes.iter().map(|(master, node)| {
            let entries = node
                .entries(*master)
                .map(|e| NodeEntry {
                    id: e.id,
                    deleted: e.deleted,
                    fields: e.fields().collect(),
                })
                .collect();
            (*master, entries)
        })
    }

    /// Add a node loaded from RDB after the last one, entries as they were
    /// (deleted ones marked). The caller sets the last ID and counters after.
    pub fn push_loaded_node(&mut self, master: StreamId, entries: &[(StreamId, bool, Vec<&[u8]>)]) {
        undo::no_inverse();
        let s = &mut *self.0;
        let mut node = Node::default();
        for (id, _, fields) in entries {
            node.push(master, *id, fields);
        }
        let doomed: Vec<usize> = node
            .entries(master)
            .zip(entries)
            .filter(|(_, (_, deleted, _))| *deleted)
            .map(|(e, _)| e.at)
            .collect();
        for at in doomed {
            node.mark_deleted(at);
        }
        s.len += node.live as u64;
        s.node_bytes += node.heap_bytes();
        s.nodes.insert(master, node);
    }

    /// Number of nodes (XINFO's `radix-tree-keys`).
    pub fn node_count(&self) -> usize {
        self.0.nodes.len()
    }

    /// The nodes' master IDs, ascending (the keys of Redis's radix tree).
    pub fn node_keys(&self) -> impl Iterator<Item = StreamId> + '_ {
        self.0.nodes.keys().copied()
    }

    /// `streamRangeHasTombstones(s, start, NULL)`: may entries at or after `start`
    /// have been deleted?
    pub fn has_tombstones_from(&self, start: StreamId) -> bool {
        let s = &*self.0;
        if s.len == 0 || s.max_deleted_id == StreamId::MIN {
            return false;
        }
        if self.recorded_first_id() > s.max_deleted_id {
            return false;
        }
        start <= s.max_deleted_id
    }

    /// `streamEstimateDistanceFromFirstEverEntry`: the entries-read counter of a
    /// group whose last ID is `id`, or [`ENTRIES_READ_UNKNOWN`].
    pub fn entries_read_at(&self, id: StreamId) -> i64 {
        let s = &*self.0;
        let added = s.entries_added as i64;
        if s.entries_added == 0 {
            return 0;
        }
        if s.len == 0 && id <= s.last_id {
            return added;
        }
        match id.cmp(&s.last_id) {
            std::cmp::Ordering::Equal => return added,
            std::cmp::Ordering::Greater => return ENTRIES_READ_UNKNOWN,
            std::cmp::Ordering::Less => {}
        }
        let first = self.recorded_first_id();
        if s.max_deleted_id == StreamId::MIN || s.max_deleted_id < first {
            match id.cmp(&first) {
                std::cmp::Ordering::Less => return added - s.len as i64,
                std::cmp::Ordering::Equal => return added - s.len as i64 + 1,
                std::cmp::Ordering::Greater => {}
            }
        }
        ENTRIES_READ_UNKNOWN
    }

    /// A group's lag (`streamReplyWithCGLag`), `None` when unknowable.
    pub fn lag(&self, last_id: StreamId, entries_read: i64) -> Option<i64> {
        let added = self.0.entries_added as i64;
        if added == 0 {
            return Some(0);
        }
        if entries_read != ENTRIES_READ_UNKNOWN && !self.has_tombstones_from(last_id) {
            return Some(added - entries_read);
        }
        match self.entries_read_at(last_id) {
            ENTRIES_READ_UNKNOWN => None,
            read => Some(added - read),
        }
    }

    /// A deep copy (COPY).
    pub fn deep_clone(&self) -> StreamValue {
        self.clone()
    }

    /// Free some nodes, then some pending entries (lazy freeing); true when what
    /// is left is cheap to drop.
    pub fn free_some(&mut self, nodes_max: usize) -> bool {
        for _ in 0..nodes_max {
            if self.0.nodes.pop_first().is_none() {
                break;
            }
        }
        // A node holds up to 100 entries: a pending entry is far smaller.
        self.0.nodes.is_empty() && self.0.groups.free_some(nodes_max * NODE_ENTRIES_MAX)
    }
}
