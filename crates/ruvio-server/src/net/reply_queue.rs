//! A connection's reply queue: replies released strictly in request order, and the
//! merges that turn a held reply's parts (one per shard) into the one reply the
//! client sees.
//!
//! Replies are normally encoded straight into `ReplyQueue::ready`. A reply that is
//! not known yet (a command forwarded to another shard, a write waiting for its WAL
//! group's fsync) takes a *held slot*: everything after it queues behind the slot
//! until the slot is filled. This is the only mechanism for asynchronous replies;
//! forwarding and durability share it. Apart from `conn.rs` because it knows bytes,
//! slots and merges, nothing of a client's state or socket.

use super::conn::OUTPUT_PAUSE_BYTES;
use crate::observability::Awaited;
use smallvec::SmallVec;
use std::collections::VecDeque;

/// How the parts of one held reply combine (multi-key commands split across shards).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Merge {
    /// A single part: its bytes are the reply.
    Single,
    /// Integer replies summed (DEL, UNLINK, EXISTS, TOUCH, DBSIZE).
    SumInts,
    /// Arrays concatenated in part order (KEYS).
    ConcatArrays,
    /// Array elements put back in request order: element i comes from part
    /// `order[i]` (MGET split across shards).
    Scatter,
    /// Every part answered `+OK`: reply `+OK` once (MSET, FLUSHALL).
    AllOk,
    /// The first part that is not a null reply (a RANDOMKEY that no shard weighs).
    FirstNonNull,
    /// RANDOMKEY over shards: parts come in pairs from each shard, its key count
    /// (DBSIZE) then its random key; the shard whose share of the keys holds the
    /// point `pick` (a fraction of 2^32) answers, so every key is equally likely.
    /// A null from it (its keys just expired) falls back to any other key.
    WeightedPick { pick: u32 },
    /// A SCAN answered by shards `shard`, `shard + 1` ... (part i from shard
    /// `shard + i`): see [`merge_scan`].
    Scan { shard: u16 },
    /// CLIENT LIST: each part a bulk string of lines; the lines of every shard in
    /// client id order, as a verbatim string under RESP3.
    ClientLines { verbatim: bool },
    /// CLIENT KILL ip:port (the old form): `+OK` when some shard killed the client.
    KillOne,
    /// DEBUG DIGEST (`keys: None`: each part a bulk of `(db u32, 20 bytes)` per
    /// non-empty database) or DIGEST-VALUE (`keys: Some(n)`: each part a bulk of n
    /// 20-byte digests): the shards' digests XORed, as a status (an array of them).
    Digest { keys: Option<u32> },
    /// DEBUG OBJECT: the part that is not nil (the shard holding the key), else
    /// Redis's `no such key`.
    FoundOrNoSuchKey,
}

/// Engine SCAN cursors stay below 2^40; the server keeps the shard index above.
pub const SCAN_SHARD_SHIFT: u32 = 40;

/// One part's reply as it arrives at its held slot: a buffer of its own (moved
/// in), or a slice of a message's reply batch (`shard::messages`), copied once,
/// straight into the ready bytes when it completes the front slot.
#[derive(Debug)]
pub enum PartBytes<'a> {
    Owned(Vec<u8>),
    Borrowed(&'a [u8]),
}

impl PartBytes<'_> {
    fn len(&self) -> usize {
        match self {
            PartBytes::Owned(v) => v.len(),
            PartBytes::Borrowed(b) => b.len(),
        }
    }

    fn into_vec(self) -> Vec<u8> {
        match self {
            PartBytes::Owned(v) => v,
            PartBytes::Borrowed(b) => b.to_vec(),
        }
    }

    /// Append to `ready`. A buffer larger than what `ready` holds, with nothing
    /// before it, becomes the ready bytes (a large reply is not copied); a
    /// smaller one is copied, so `ready` keeps its capacity for the replies
    /// after it (moving a 20-byte reply in freed `ready`'s buffer and made every
    /// following reply of the pipeline grow a new one).
    #[inline(always)]
    fn append_to(self, ready: &mut Vec<u8>) {
        match self {
            PartBytes::Owned(v) if ready.is_empty() && v.len() > ready.capacity() => *ready = v,
            PartBytes::Owned(v) => ready.extend_from_slice(&v),
            PartBytes::Borrowed(b) => ready.extend_from_slice(b),
        }
    }
}

impl From<Vec<u8>> for PartBytes<'_> {
    fn from(v: Vec<u8>) -> Self {
        PartBytes::Owned(v)
    }
}

impl<'a> From<&'a [u8]> for PartBytes<'a> {
    fn from(b: &'a [u8]) -> Self {
        PartBytes::Borrowed(b)
    }
}

/// A reply waiting for `parts` answers; `after` holds the replies that follow it.
#[derive(Debug)]
struct Held {
    seq: u64,
    merge: Merge,
    /// Inline for one part (a forwarded command's reply): holding it allocates nothing.
    parts: SmallVec<[Option<Vec<u8>>; 1]>,
    missing: u32,
    /// For [`Merge::Scatter`]: the part each result element comes from.
    order: Box<[u16]>,
    /// CLIENT REPLY OFF/SKIP was in force for the command: drop its reply.
    silent: bool,
    after: Vec<u8>,
    /// The command recorded once this reply is complete (a gathered or split
    /// command; see [`Awaited`]).
    record: Option<Box<Awaited>>,
}

/// Merge held slot `h`'s parts (every one is in) into its one reply now, for a
/// record that needs the reply's size; returns the reply's bytes. The slot then
/// releases that reply as it would have merged it.
fn merge_now(h: &mut Held) -> usize {
    let merged = if h.merge == Merge::Single && h.parts.len() == 1 {
        h.parts[0].take().unwrap_or_default()
    } else {
        let parts: Vec<Vec<u8>> = h.parts.iter_mut().filter_map(Option::take).collect();
        let mut out = Vec::new();
        merge_into(h.merge, &parts, &h.order, &mut out);
        out
    };
    let bytes = merged.len();
    // The parts' vector is kept: one part now, no allocation.
    h.parts.clear();
    h.parts.push(Some(merged));
    h.merge = Merge::Single;
    bytes
}

/// Replies of one connection in request order.
#[derive(Debug, Default)]
pub struct ReplyQueue {
    /// Bytes ready to be sent.
    pub ready: Vec<u8>,
    held: VecDeque<Held>,
    /// Bytes parked behind every held slot but the last (the last one's `after` is
    /// still being written through [`sink`](Self::sink)); kept as slots come and go
    /// so [`immediate_bytes`](Self::immediate_bytes) stays constant time.
    parked_closed: usize,
    /// The largest recent filled reply, decaying by an eighth per fill: sizes the
    /// number of replies this connection may await ([`held_limit`](Self::held_limit)).
    recent_fill_bytes: usize,
    next_seq: u64,
    /// Slots held from now on belong to a command whose reply is dropped (CLIENT
    /// REPLY OFF/SKIP); set around one command by the dispatcher.
    pub silent_new: bool,
    /// `always`: the last gate held for a logged write, `(seq, log group)` (see
    /// `durable`).
    pub last_gate: Option<(u64, u64)>,
}

impl ReplyQueue {
    /// Where the next immediate reply must be written. Always inlined: every
    /// command asks, and with the parked buffer's refill (out of line) the
    /// compiler stopped inlining it (in process, a local GET 25 instructions
    /// more).
    #[inline(always)]
    pub fn sink(&mut self) -> &mut Vec<u8> {
        if let Some(h) = self.held.back_mut() {
            if h.after.capacity() == 0 {
                h.after = super::parked_buffers::take();
            }
            return &mut h.after;
        }
        &mut self.ready
    }

    /// How many bytes [`sink`](Self::sink) holds, without making it room.
    #[inline]
    pub fn sink_len(&self) -> usize {
        self.held.back().map_or(self.ready.len(), |h| h.after.len())
    }

    /// Put `bytes` right after held slot `seq`'s reply, before the replies
    /// queued behind it (a split write's own invalidations, as Redis writes
    /// them after the command's reply); after everything when `seq` is no
    /// longer held.
    pub fn put_after(&mut self, seq: u64, bytes: &[u8]) {
        let last = self.held.len().saturating_sub(1);
        let at = self.held.iter().position(|h| h.seq == seq);
        match at {
            Some(i) => {
                self.held[i].after.splice(0..0, bytes.iter().copied());
                if i != last {
                    self.parked_closed += bytes.len();
                }
            }
            None => self.sink().extend_from_slice(bytes),
        }
    }

    /// Put `bytes` right before held slot `seq`'s reply, after the replies
    /// queued before it (an invalidation a coordinated write owes a client
    /// whose later command rode on its keys: Redis sent it before that
    /// command ran); after everything when `seq` is no longer held.
    pub fn put_before(&mut self, seq: u64, bytes: &[u8]) {
        match self.held.iter().position(|h| h.seq == seq) {
            Some(0) => self.ready.extend_from_slice(bytes),
            Some(i) => {
                self.held[i - 1].after.extend_from_slice(bytes);
                self.parked_closed += bytes.len();
            }
            None => self.sink().extend_from_slice(bytes),
        }
    }

    /// Keep held slot `seq` (a [`Merge::Single`] reply) held, whenever its
    /// reply comes, until [`let_go`](Self::let_go): a write over borrowed keys
    /// keeps its writer's slot until every owner said what the write owes the
    /// writer, which then goes right after the reply
    /// ([`put_after`](Self::put_after)). False when the slot is not held or
    /// merges parts (or is kept already).
    pub fn keep(&mut self, seq: u64) -> bool {
        let Some(h) = self.held_slot(seq) else {
            return false;
        };
        if h.merge != Merge::Single || h.parts.len() != 1 {
            return false;
        }
        // The kept part: an empty one, which the merge of a single reply
        // appends (an error reply stays whole: `merge_into`).
        h.parts.push(None);
        h.missing += 1;
        true
    }

    /// Slot `seq`, kept by [`keep`](Self::keep), may go once its reply is in.
    pub fn let_go(&mut self, seq: u64) {
        let kept = self.held_slot(seq).map(|h| h.parts.len() - 1);
        if let Some(part @ 1..) = kept {
            self.fill(seq, part, Vec::new());
        }
    }

    /// Held slot `seq`, if it is still held.
    fn held_slot(&mut self, seq: u64) -> Option<&mut Held> {
        let front = self.held.front()?.seq;
        self.held.get_mut(seq.checked_sub(front)? as usize)
    }

    /// Reserve a held slot with `parts` parts; returns its sequence number.
    pub fn hold(&mut self, merge: Merge, parts: usize) -> u64 {
        self.hold_ordered(merge, parts, Vec::new())
    }

    /// Like [`hold`](Self::hold), with the element order of a [`Merge::Scatter`].
    pub fn hold_ordered(&mut self, merge: Merge, parts: usize, order: Vec<u16>) -> u64 {
        self.push_held(
            merge,
            smallvec::smallvec![None; parts],
            order.into_boxed_slice(),
        )
    }

    /// [`hold`](Self::hold) of one reply as it comes (a command forwarded whole):
    /// inlined, every forwarded command holds one.
    #[inline]
    pub fn hold_one(&mut self) -> u64 {
        self.push_held(Merge::Single, smallvec::smallvec![None], Box::default())
    }

    /// A new held slot at the back, of `parts` parts none of which is in yet.
    #[inline]
    fn push_held(
        &mut self,
        merge: Merge,
        parts: SmallVec<[Option<Vec<u8>>; 1]>,
        order: Box<[u16]>,
    ) -> u64 {
        let seq = self.next_seq;
        self.next_seq += 1;
        if let Some(last) = self.held.back() {
            self.parked_closed += last.after.len();
        }
        self.held.push_back(Held {
            seq,
            merge,
            missing: parts.len() as u32,
            parts,
            order,
            silent: self.silent_new,
            after: Vec::new(),
            record: None,
        });
        seq
    }

    /// Held slots with replies queued behind them (CLIENT LIST `oll`): the
    /// replies wait as Redis' reply list does; a blocked command's own slot,
    /// with nothing after it, is not one.
    pub fn parked_replies(&self) -> usize {
        self.held.iter().filter(|h| !h.after.is_empty()).count()
    }

    /// CLIENT REPLY OFF/SKIP (and a primary's stream, whose master client is
    /// silent): drop the immediate reply of the command that began when the
    /// sink was `before` bytes long and the next slot was `first`. Its own
    /// slots drop their parts (`silent`); what it wrote is cut wherever it
    /// went: after the slot that was the newest when it began (or the ready
    /// bytes, when none was held), and after each slot it held, including
    /// one already released again (an `always` gate of a write that logged
    /// nothing opens at once, its bytes and those queued behind it moved to
    /// the ready bytes). A slot held before the command is never released
    /// while it runs (its reply comes from another shard or a log group, in
    /// a later step of the loop).
    pub fn drop_immediate(&mut self, first: u64, before: usize) {
        if self.next_seq == first {
            self.sink().truncate(before);
            return;
        }
        // From the newest slot back to the one that was the newest when it
        // began (the slots it held are the last few: no walk of the others).
        let last = self.held.len().saturating_sub(1);
        let (mut parked, mut held_before) = (0, false);
        for (i, h) in self.held.iter_mut().enumerate().rev() {
            held_before = h.seq < first;
            let keep = if held_before { before } else { 0 };
            if i != last {
                parked += h.after.len().saturating_sub(keep);
            }
            h.after.truncate(keep);
            if held_before {
                break;
            }
        }
        self.parked_closed -= parked;
        if !held_before {
            // Nothing was held when it began: its bytes went to the ready ones.
            self.ready.truncate(before);
        }
    }

    /// The sequence number the next held slot will get.
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// Bytes waiting to be sent or parked behind held slots (output back-pressure).
    pub fn pending_bytes(&self) -> usize {
        let parked: usize = self
            .held
            .iter()
            .map(|h| h.after.len() + h.parts.iter().flatten().map(Vec::len).sum::<usize>())
            .sum();
        self.ready.len() + parked
    }

    /// True once held slot `seq` has been filled and released.
    pub fn is_released(&self, seq: u64) -> bool {
        self.held.front().is_none_or(|h| h.seq > seq)
    }

    /// True when some reply is still outstanding.
    pub fn is_holding(&self) -> bool {
        !self.held.is_empty()
    }

    /// Fill part `part` of held slot `seq`; releases every leading slot that is complete.
    pub fn fill(&mut self, seq: u64, part: usize, bytes: Vec<u8>) {
        // The fills that may complete a slot with a record use `fill_part`.
        let _ = self.fill_part(seq, part, bytes, 0);
    }

    /// Keep `record` with held slot `seq` until the fill that completes it
    /// ([`fill_part`](Self::fill_part)); it comes back at once (with the reply's
    /// bytes when known) if the slot is complete already.
    pub fn await_record(&mut self, seq: u64, mut record: Box<Awaited>) -> Option<Box<Awaited>> {
        let Some(h) = self.held.iter_mut().find(|h| h.seq == seq) else {
            return Some(record);
        };
        if h.missing == 0 {
            record.reply_bytes = merge_now(h);
            return Some(record);
        }
        h.record = Some(record);
        None
    }

    /// [`fill`](Self::fill), for a part that ran `ran_ns` on its shard (0: not
    /// timed): when it completes a slot kept with a record ([`await_record`](Self::await_record)),
    /// the record comes back with the part times added and the whole reply's bytes.
    pub fn fill_part<'a>(
        &mut self,
        seq: u64,
        part: usize,
        bytes: impl Into<PartBytes<'a>>,
        ran_ns: u64,
    ) -> Option<Box<Awaited>> {
        let front = self.held.front()?;
        let at = seq.checked_sub(front.seq)? as usize;
        let h = self.held.get_mut(at)?;
        let bytes = match bytes.into() {
            // The front slot's one reply, with no record to size: straight into
            // the ready bytes, from the message's batch when it comes from one
            // (no copy of its own, nothing allocated or freed for it).
            bytes
                if at == 0
                    && part == 0
                    && h.merge == Merge::Single
                    && h.parts.len() == 1
                    && h.missing == 1
                    && h.record.is_none() =>
            {
                let Held {
                    parts,
                    order,
                    silent,
                    after,
                    record,
                    ..
                } = self.held.pop_front().expect("front exists");
                // Nothing of these to free: one inline part not in yet (the
                // one missing), a single reply's empty order, no record.
                // Forgotten rather than dropped: the drop's checks cost every
                // forwarded reply some 16 instructions (scripts/forward_cost.py).
                debug_assert!(!parts.spilled() && parts[0].is_none() && order.is_empty());
                std::mem::forget((parts, order, record));
                if !self.held.is_empty() {
                    self.parked_closed -= after.len();
                }
                self.recent_fill_bytes = bytes.len().max(self.recent_fill_bytes * 7 / 8);
                if !silent {
                    bytes.append_to(&mut self.ready);
                }
                if !after.is_empty() {
                    // (Every slot of a pipeline forwarded whole parks nothing:
                    // no call to copy nothing.)
                    self.ready.extend_from_slice(&after);
                }
                super::parked_buffers::give_back(after);
                self.release_complete();
                return None;
            }
            bytes => bytes.into_vec(),
        };
        let mut answered = None;
        if let Some(slot @ None) = h.parts.get_mut(part) {
            self.recent_fill_bytes = bytes.len().max(self.recent_fill_bytes * 7 / 8);
            *slot = Some(bytes);
            h.missing -= 1;
            if let Some(record) = h.record.as_mut() {
                record.add_ns(ran_ns);
            }
            if h.missing == 0 {
                if let Some(mut record) = h.record.take() {
                    record.reply_bytes = merge_now(h);
                    answered = Some(record);
                }
            }
        }
        self.release_complete();
        answered
    }

    /// Release every leading slot that is complete, in order. Inlined up to the
    /// front's test: a reply that lands usually completes nothing behind it.
    #[inline]
    fn release_complete(&mut self) {
        if self.held.front().is_some_and(|h| h.missing == 0) {
            self.release_completed();
        }
    }

    /// [`release_complete`](Self::release_complete) once the front is complete.
    #[inline(never)]
    fn release_completed(&mut self) {
        while self.held.front().is_some_and(|h| h.missing == 0) {
            let h = self.held.pop_front().expect("front exists");
            if !self.held.is_empty() {
                self.parked_closed -= h.after.len();
            }
            if !h.silent {
                if h.merge == Merge::Single && h.parts.len() == 1 {
                    if let Some(only) = h.parts.into_iter().flatten().next() {
                        PartBytes::Owned(only).append_to(&mut self.ready);
                    }
                } else {
                    let parts: Vec<Vec<u8>> = h.parts.into_iter().flatten().collect();
                    merge_into(h.merge, &parts, &h.order, &mut self.ready);
                }
            }
            self.ready.extend_from_slice(&h.after);
            super::parked_buffers::give_back(h.after);
        }
    }

    /// Bytes of the ready replies and of those parked behind every held slot, in
    /// constant time: what the dispatcher checks before each command of a batch so
    /// that one read of a pipeline cannot queue unbounded replies (counting only the
    /// last slot's let a pipeline alternating local and forwarded commands park a
    /// reply behind each of its [`HELD_REPLIES_MAX`] slots unseen).
    pub fn immediate_bytes(&self) -> usize {
        self.ready.len() + self.parked_closed + self.held.back().map_or(0, |h| h.after.len())
    }

    /// The client's replies are backed up: unsent bytes past
    /// [`OUTPUT_PAUSE_BYTES`], or [`HELD_REPLIES_MAX`] replies still awaited from
    /// other shards. The rest of its input waits (not read, not run) until they go.
    pub fn is_backed_up(&self, sending: usize) -> bool {
        sending + self.immediate_bytes() > OUTPUT_PAUSE_BYTES
            || (!self.held.is_empty() && self.held.len() >= self.held_limit())
    }

    /// How many replies this connection may await at once: [`HELD_REPLIES_MAX`],
    /// fewer once large replies have been arriving, so that about
    /// [`HELD_BYTES_BUDGET`] of them are on their way.
    fn held_limit(&self) -> usize {
        (HELD_BYTES_BUDGET / self.recent_fill_bytes.max(1)).clamp(1, HELD_REPLIES_MAX)
    }
}

/// Replies one connection may await from other shards at once. A forwarded reply's
/// size is known only when it arrives, so this count is what bounds them: one read
/// of 500 forwarded GETs of a 1 MiB value queued 500 MiB without it. 64 in flight
/// per connection still hides the mesh round trip of a deep pipeline.
pub const HELD_REPLIES_MAX: usize = 64;

/// Bytes of replies a connection should have on their way from other shards: once
/// replies of 1 MiB arrive, 4 are awaited at a time instead of 64 (a pipeline of
/// forwarded GETs of 1 MiB values held 64 MiB in flight plus 64 MiB ready; large
/// replies need no depth to hide the mesh round trip).
pub const HELD_BYTES_BUDGET: usize = 4 << 20;

/// Combine reply parts per `merge`, appending the result to `out`.
pub fn merge_into(merge: Merge, parts: &[Vec<u8>], order: &[u16], out: &mut Vec<u8>) {
    if let Some(err) = parts.iter().find(|p| p.first() == Some(&b'-')) {
        out.extend_from_slice(err);
        return;
    }
    match merge {
        Merge::Single => parts.iter().for_each(|p| out.extend_from_slice(p)),
        Merge::AllOk => out.extend_from_slice(b"+OK\r\n"),
        Merge::SumInts => {
            let sum: i64 = parts
                .iter()
                .filter_map(|p| ruvio_resp::parse_int_reply(p))
                .sum();
            out.push(b':');
            out.extend_from_slice(sum.to_string().as_bytes());
            out.extend_from_slice(b"\r\n");
        }
        Merge::ConcatArrays => {
            let bodies: Vec<(usize, &[u8])> = parts
                .iter()
                .filter_map(|p| ruvio_resp::array_body(p))
                .collect();
            let count: usize = bodies.iter().map(|(n, _)| n).sum();
            out.push(b'*');
            out.extend_from_slice(count.to_string().as_bytes());
            out.extend_from_slice(b"\r\n");
            bodies
                .iter()
                .for_each(|(_, body)| out.extend_from_slice(body));
        }
        Merge::Scatter => scatter(parts, order, out),
        Merge::Scan { shard, .. } => merge_scan(parts, shard as u64, out),
        Merge::ClientLines { verbatim } => client_lines(parts, verbatim, out),
        Merge::Digest { keys } => merge_digests(parts, keys, out),
        Merge::FoundOrNoSuchKey => match parts.iter().find(|p| !p.starts_with(b"$-1")) {
            Some(found) => out.extend_from_slice(found),
            None => out.extend_from_slice(b"-ERR no such key\r\n"),
        },
        Merge::KillOne => {
            let killed: i64 = parts
                .iter()
                .filter_map(|p| ruvio_resp::parse_int_reply(p))
                .sum();
            match killed {
                0 => out.extend_from_slice(b"-ERR No such client\r\n"),
                _ => out.extend_from_slice(b"+OK\r\n"),
            }
        }
        Merge::WeightedPick { pick } => {
            let counts: Vec<u64> = parts
                .iter()
                .step_by(2)
                .map(|p| ruvio_resp::parse_int_reply(p).unwrap_or(0).max(0) as u64)
                .collect();
            let keys: Vec<Vec<u8>> = parts.iter().skip(1).step_by(2).cloned().collect();
            let first = weighted_pick(&counts, pick).unwrap_or(0);
            let ordered: Vec<Vec<u8>> = keys[first..]
                .iter()
                .chain(&keys[..first])
                .cloned()
                .collect();
            merge_into(Merge::FirstNonNull, &ordered, order, out);
        }
        Merge::FirstNonNull => {
            let is_null = |p: &Vec<u8>| p.starts_with(b"$-1") || p.starts_with(b"_");
            match parts.iter().find(|p| !is_null(p)).or(parts.first()) {
                Some(p) => out.extend_from_slice(p),
                None => out.extend_from_slice(b"$-1\r\n"),
            }
        }
    }
}

/// [`Merge::Digest`]: XOR is commutative, so the shards' parts combine in any
/// order; a dataset's databases are then mixed in database order, as Redis's
/// `computeDatasetDigest` does.
fn merge_digests(parts: &[Vec<u8>], keys: Option<u32>, out: &mut Vec<u8>) {
    use ruvio_engine::debug_digest::{combine_databases, hex, Digest};
    const DIGEST_BYTES: usize = 20;
    let xor = |into: &mut Digest, from: &[u8]| {
        into.iter_mut().zip(from).for_each(|(a, b)| *a ^= b);
    };
    let bodies = parts.iter().filter_map(|p| bulk_text(p));
    match keys {
        Some(n) => {
            let mut digests = vec![[0u8; DIGEST_BYTES]; n as usize];
            for body in bodies {
                for (d, chunk) in digests.iter_mut().zip(body.chunks_exact(DIGEST_BYTES)) {
                    xor(d, chunk);
                }
            }
            out.extend_from_slice(format!("*{n}\r\n").as_bytes());
            for d in &digests {
                out.extend_from_slice(format!("+{}\r\n", hex(d)).as_bytes());
            }
        }
        None => {
            let mut dbs: std::collections::BTreeMap<u32, Digest> = Default::default();
            for body in bodies {
                for record in body.chunks_exact(4 + DIGEST_BYTES) {
                    let db = u32::from_be_bytes([record[0], record[1], record[2], record[3]]);
                    xor(dbs.entry(db).or_default(), &record[4..]);
                }
            }
            let total = combine_databases(dbs.into_iter().map(|(db, d)| (db as usize, d)));
            out.extend_from_slice(format!("+{}\r\n", hex(&total)).as_bytes());
        }
    }
}

/// CLIENT LIST's parts (bulk strings of lines) as one text, lines by client id.
fn client_lines(parts: &[Vec<u8>], verbatim: bool, out: &mut Vec<u8>) {
    let mut lines: Vec<&[u8]> = parts
        .iter()
        .filter_map(|p| bulk_text(p))
        .flat_map(|text| text.split_inclusive(|&b| b == b'\n'))
        .collect();
    let id_of = |line: &[u8]| -> u64 {
        let digits = line.get(3..).unwrap_or_default();
        let end = digits
            .iter()
            .position(|b| !b.is_ascii_digit())
            .unwrap_or(digits.len());
        std::str::from_utf8(&digits[..end])
            .ok()
            .and_then(|d| d.parse().ok())
            .unwrap_or(0)
    };
    lines.sort_by_key(|l| id_of(l));
    let len: usize = lines.iter().map(|l| l.len()).sum();
    let (kind, prefix): (u8, &[u8]) = if verbatim {
        (b'=', b"txt:")
    } else {
        (b'$', b"")
    };
    out.push(kind);
    out.extend_from_slice((len + prefix.len()).to_string().as_bytes());
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(prefix);
    lines.iter().for_each(|l| out.extend_from_slice(l));
    out.extend_from_slice(b"\r\n");
}

/// The contents of a RESP2 bulk string reply.
fn bulk_text(reply: &[u8]) -> Option<&[u8]> {
    let rest = reply.strip_prefix(b"$")?;
    let eol = rest.iter().position(|&b| b == b'\r')?;
    let len: usize = std::str::from_utf8(&rest[..eol]).ok()?.parse().ok()?;
    rest.get(eol + 2..eol + 2 + len)
}

/// The index of `counts` that the random `pick` (0..2^32) falls on when each index
/// has a share as large as its count; `None` when every count is 0 (RANDOMKEY's
/// shard, picked by its number of keys).
pub(crate) fn weighted_pick(counts: &[u64], pick: u32) -> Option<usize> {
    let total: u64 = counts.iter().sum();
    let mut point = ((total as u128 * pick as u128) >> 32) as u64;
    counts.iter().position(|&n| {
        let here = point < n;
        point = point.saturating_sub(n);
        here
    })
}

/// A SCAN cursor taken apart: the shard in its high bits and that shard's own
/// cursor; `None` for a shard past the last (the scan is over).
pub(crate) fn scan_cursor(cursor: u64, shards: usize) -> Option<(usize, u64)> {
    let shard = (cursor >> SCAN_SHARD_SHIFT) as usize;
    (shard < shards).then_some((shard, cursor & ((1 << SCAN_SHARD_SHIFT) - 1)))
}

/// A shard's SCAN reply taken apart: its own cursor, its key count and the keys.
pub(crate) fn scan_parts(reply: &[u8]) -> Option<(u64, usize, &[u8])> {
    let (_, body) = ruvio_resp::array_body(reply)?;
    let cursor_len = ruvio_resp::reply_len(body)?;
    let cursor_reply = &body[..cursor_len];
    let start = cursor_reply.iter().position(|&b| b == b'\n')? + 1;
    let inner: u64 = std::str::from_utf8(&cursor_reply[start..cursor_len - 2])
        .ok()?
        .parse()
        .ok()?;
    let (count, keys) = ruvio_resp::array_body(&body[cursor_len..])?;
    Some((inner, count, keys))
}

/// SCAN answered by shards `shard`, `shard + 1` ...: the keys of every shard up to
/// the first one with more to give, and that shard's cursor (with the shard in the
/// bits above [`SCAN_SHARD_SHIFT`]); cursor 0 when every shard is done. A small
/// database comes back whole in one call, as from Redis; the keys of the shards
/// after that one are dropped (the scan reaches them later from their start).
pub(crate) fn merge_scan(parts: &[Vec<u8>], shard: u64, out: &mut Vec<u8>) {
    let mut next = 0;
    let mut total = 0;
    let mut keys: Vec<&[u8]> = Vec::with_capacity(parts.len());
    for (j, part) in parts.iter().enumerate() {
        let Some((inner, count, body)) = scan_parts(part) else {
            out.extend_from_slice(part);
            return;
        };
        total += count;
        keys.push(body);
        if inner != 0 {
            next = ((shard + j as u64) << SCAN_SHARD_SHIFT) | inner;
            break;
        }
    }
    let next = next.to_string();
    out.extend_from_slice(format!("*2\r\n${}\r\n{}\r\n*{total}\r\n", next.len(), next).as_bytes());
    keys.iter().for_each(|k| out.extend_from_slice(k));
}

/// Rebuild an array whose element i is the next element of part `order[i]`.
fn scatter(parts: &[Vec<u8>], order: &[u16], out: &mut Vec<u8>) {
    let mut bodies: Vec<&[u8]> = parts
        .iter()
        .map(|p| ruvio_resp::array_body(p).map_or(&[][..], |(_, b)| b))
        .collect();
    out.push(b'*');
    out.extend_from_slice(order.len().to_string().as_bytes());
    out.extend_from_slice(b"\r\n");
    for &part in order {
        let body = &mut bodies[part as usize];
        let len = ruvio_resp::reply_len(body).unwrap_or(body.len());
        out.extend_from_slice(&body[..len]);
        *body = &body[len..];
    }
}

#[cfg(test)]
#[path = "reply_queue_tests.rs"]
mod tests;
