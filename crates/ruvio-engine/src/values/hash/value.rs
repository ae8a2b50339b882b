//! `HashValue`: a hash in one machine word, its encoding in the pointer's low bit.
//!
//! The keyspace entry keeps a value in one 8-byte word (see `keyspace::entry`), so a
//! hash must be a thin pointer too: bit 0 clear, the word is a [`Packed`] block
//! (`listpack` / `listpackex`); bit 0 set, it points (minus the tag) at a boxed
//! [`Table`] (`hashtable`). Both allocations are at least 2-aligned, so the bit is
//! free, and the entry can hand out `&HashValue` / `&mut HashValue` borrowed from
//! its word: a `Packed` that reallocates writes its new pointer straight into it.
//!
//! # When a hash converts (Redis 7.4/8.0's rules, never back)
//!
//! - `listpack` -> `listpackex`: the first [`HashValue::set_field_expire`] (or
//!   [`HashValue::enable_field_expiry`], which the command layer calls where Redis's
//!   `hashTypeSetExInit` runs: every HEXPIRE-family command on a listpack, even when
//!   no field matches). A `listpackex` stays one when its TTLs are gone.
//! - packed -> `hashtable`, before a write:
//!   - [`HashValue::convert_for_args`] (Redis's `hashTypeTryConversion`, called by
//!     HSET/HMSET/HSETNX/HSETEX with the raw field/value arguments): any argument
//!     longer than `hash-max-listpack-value`, or the block would pass
//!     [`PACKED_BYTES_MAX`] (Redis 7.2+ also converts, pre-sized, when there are
//!     more pairs than `hash-max-listpack-entries`, even if some repeat or exist
//!     already: see [`CONVERT_ON_PAIR_COUNT`]);
//!   - inside every `set*`: the field or the value is longer than
//!     `hash-max-listpack-value` (Redis's check in `hashTypeSet`, which is what
//!     catches HINCRBY/HINCRBYFLOAT results);
//!   - inside every `set*` of a new field: the block would pass [`PACKED_BYTES_MAX`]
//!     or [`PACKED_FIELDS_MAX`](super::listpack::PACKED_FIELDS_MAX) fields (Ruvio's own caps, far above the defaults).
//! - packed -> `hashtable`, after a `set*`: more fields than
//!   `hash-max-listpack-entries` (Redis checks after every `hashTypeSet`, update or not).
//!
//! # Expired fields
//!
//! A field whose expiry time is in the past (`now_ms > expire_at`, as keys) is
//! logically gone. Readers (`&self`) take `now_ms` and skip it; it stays stored until
//! a writer removes it: [`HashValue::remove_if_expired`] (lazy, on access) or
//! [`HashValue::remove_expired`] (active, bounded). [`HashValue::len`] counts stored
//! fields, expired ones included (Redis's HLEN does the same). The `set*` writers see
//! stored fields: setting an expired-but-stored field is an update, as in Redis's
//! `hashTypeSet`; the command layer decides whether to expire it first.

use std::ptr::NonNull;

use super::listpack::{
    entry_bytes, Located, Packed, PackedEntry, PackedIter, BLOCK_ALIGN, ENTRY_OVERHEAD_MAX,
    PACKED_BYTES_MAX,
};
use super::table::{Table, TableEntry, TableIter};
use super::{HashEncoding, HashLimits};

/// Whether [`HashValue::convert_for_args`] converts as soon as a command brings more
/// field/value pairs than `hash-max-listpack-entries` (Redis 7.2+, to pre-size the
/// table) instead of only once the hash really holds more fields (Redis 7.0). Off:
/// the project's reference server and its differential tests are Redis 7.0, and
/// the two differ only for a command whose pairs repeat fields or update existing
/// ones (`HSET h f 1 f 2 f 3` with `hash-max-listpack-entries 2` stays a listpack in
/// 7.0 and becomes a hashtable in 7.2+).
pub const CONVERT_ON_PAIR_COUNT: bool = false;

/// Tag bit of a boxed table.
const TABLE_TAG: usize = 1;
const _: () = assert!(BLOCK_ALIGN > TABLE_TAG && std::mem::align_of::<Table>() > TABLE_TAG);

/// Random probes [`HashValue::random_entry`] makes before it counts live fields
/// instead. A compacted table is at least 1/8 live, so 32 probes all missing is rare.
pub const RANDOM_PROBES_MAX: usize = 32;

/// A hash value: one word, owning its memory. See the module docs.
#[repr(transparent)]
pub struct HashValue {
    ptr: NonNull<u8>,
}

const _: () = assert!(std::mem::size_of::<HashValue>() == 8);
const _: () = assert!(std::mem::size_of::<Option<HashValue>>() == 8);

// SAFETY: a HashValue uniquely owns its block or table, like a Box.
unsafe impl Send for HashValue {}

/// One field of a hash.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FieldRef<'a> {
    /// The field.
    pub field: &'a [u8],
    /// The value.
    pub value: &'a [u8],
    /// The absolute expiry time in Unix ms, if any.
    pub expire_at: Option<u64>,
}

impl FieldRef<'_> {
    /// True when the field is past its expiry at `now_ms`.
    pub fn is_expired(&self, now_ms: u64) -> bool {
        self.expire_at.is_some_and(|at| now_ms > at)
    }
}

impl<'a> From<PackedEntry<'a>> for FieldRef<'a> {
    fn from(e: PackedEntry<'a>) -> Self {
        FieldRef {
            field: e.field,
            value: e.value,
            expire_at: e.expire_at,
        }
    }
}

impl<'a> From<TableEntry<'a>> for FieldRef<'a> {
    fn from(e: TableEntry<'a>) -> Self {
        FieldRef {
            field: e.field,
            value: e.value,
            expire_at: e.expire_at,
        }
    }
}

enum Repr<'a> {
    Packed(&'a Packed),
    Table(&'a Table),
}

enum ReprMut<'a> {
    Packed(&'a mut Packed),
    Table(&'a mut Table),
}

impl Default for HashValue {
    fn default() -> Self {
        HashValue::new()
    }
}

impl HashValue {
    /// An empty `listpack` hash.
    pub fn new() -> HashValue {
        Self::from_packed(Packed::new(false))
    }

    fn from_packed(p: Packed) -> HashValue {
        // The block is 2-aligned, so the tag bit is clear; the word takes ownership.
        HashValue { ptr: p.into_raw() }
    }

    fn from_table(t: Box<Table>) -> HashValue {
        let raw = Box::into_raw(t) as *mut u8;
        let tagged = raw.map_addr(|a| a | TABLE_TAG);
        // SAFETY: a Box pointer is non-null, and setting a low bit keeps it so.
        HashValue {
            ptr: unsafe { NonNull::new_unchecked(tagged) },
        }
    }

    fn table_ptr(&self) -> *mut Table {
        self.ptr.as_ptr().map_addr(|a| a & !TABLE_TAG) as *mut Table
    }

    fn is_table(&self) -> bool {
        self.ptr.as_ptr().addr() & TABLE_TAG != 0
    }

    fn repr(&self) -> Repr<'_> {
        if self.is_table() {
            // SAFETY: a tagged word points at a live boxed Table we own.
            Repr::Table(unsafe { &*self.table_ptr() })
        } else {
            // SAFETY: an untagged word is a Packed (same repr), borrowed with self.
            Repr::Packed(unsafe { &*(self as *const HashValue as *const Packed) })
        }
    }

    fn repr_mut(&mut self) -> ReprMut<'_> {
        if self.is_table() {
            // SAFETY: as in `repr`; `&mut self` makes the access unique.
            ReprMut::Table(unsafe { &mut *self.table_ptr() })
        } else {
            // SAFETY: as in `repr`. A Packed that reallocates stores a new 2-aligned
            // pointer into this very word, so the tag stays clear.
            ReprMut::Packed(unsafe { &mut *(self as *mut HashValue as *mut Packed) })
        }
    }

    /// What OBJECT ENCODING reports.
    pub fn encoding(&self) -> HashEncoding {
        match self.repr() {
            Repr::Packed(p) if p.has_ttl() => HashEncoding::ListpackEx,
            Repr::Packed(_) => HashEncoding::Listpack,
            Repr::Table(_) => HashEncoding::Hashtable,
        }
    }

    /// Number of stored fields, expired ones not yet removed included (HLEN). O(1).
    pub fn len(&self) -> usize {
        match self.repr() {
            Repr::Packed(p) => p.len(),
            Repr::Table(t) => t.len(),
        }
    }

    /// True when no field is stored (the keyspace then deletes the key).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Number of fields live at `now_ms`. O(expired prefix) for `listpackex` (its
    /// fields are ordered by time), O(fields with a TTL) for a table.
    pub fn live_len(&self, now_ms: u64) -> usize {
        let expired = match self.repr() {
            Repr::Packed(p) if p.has_ttl() => p
                .iter()
                .take_while(|e| e.expire_at.is_some_and(|at| now_ms > at))
                .count(),
            Repr::Packed(_) => 0,
            Repr::Table(t) if t.ttl_len() == 0 => 0,
            Repr::Table(t) => t
                .iter()
                .filter(|e| e.expire_at.is_some_and(|at| now_ms > at))
                .count(),
        };
        self.len() - expired
    }

    /// Heap bytes owned, as glibc chunks. O(1).
    pub fn heap_bytes(&self) -> usize {
        match self.repr() {
            Repr::Packed(p) => p.heap_bytes(),
            Repr::Table(t) => t.heap_bytes(),
        }
    }

    /// The one heap block that holds the whole value in a compact encoding, as
    /// (bytes, alignment): plain bytes, no pointer inside and nothing depending on
    /// its address, so a byte copy at another address is the same value (the undo
    /// journal's copies, `keyspace::entry::FlatCopy`). None for a big encoding.
    pub(crate) fn flat_block(&self) -> Option<(usize, usize)> {
        match self.repr() {
            Repr::Packed(p) => Some((p.block_bytes(), super::listpack::BLOCK_ALIGN)),
            Repr::Table(_) => None,
        }
    }

    /// Where the value's block starts (for prefetching); reading it is the caller's
    /// business.
    pub fn block_ptr(&self) -> *const u8 {
        match self.repr() {
            Repr::Packed(p) => p.block_ptr(),
            Repr::Table(t) => t as *const Table as *const u8,
        }
    }

    /// The stored field `field`, expired or not.
    pub fn lookup(&self, field: &[u8]) -> Option<FieldRef<'_>> {
        match self.repr() {
            Repr::Packed(p) => p.find(field).map(|(_, e)| e.into()),
            Repr::Table(t) => t.get(field).map(Into::into),
        }
    }

    /// The value of `field` if it is live at `now_ms`.
    pub fn get(&self, field: &[u8], now_ms: u64) -> Option<&[u8]> {
        self.lookup(field)
            .filter(|f| !f.is_expired(now_ms))
            .map(|f| f.value)
    }

    /// True when `field` is live at `now_ms`.
    pub fn contains(&self, field: &[u8], now_ms: u64) -> bool {
        self.get(field, now_ms).is_some()
    }

    /// The stored expiry time of `field` (even when already past; callers compare
    /// with their clock). `None` when the field is not stored or has no expiry.
    pub fn field_expire_at(&self, field: &[u8]) -> Option<u64> {
        self.lookup(field).and_then(|f| f.expire_at)
    }

    /// The earliest expiry time of any stored field (so the keyspace can find hashes
    /// with fields to expire). O(1).
    pub fn next_expire_at(&self) -> Option<u64> {
        match self.repr() {
            Repr::Packed(p) if p.has_ttl() => p.iter().next().and_then(|e| e.expire_at),
            Repr::Packed(_) => None,
            Repr::Table(t) => t.next_expire_at(),
        }
    }

    /// Convert to a table now (keeps order and expiry times).
    fn convert_to_table(&mut self, reserve: usize) {
        let table = match self.repr() {
            Repr::Table(_) => return,
            Repr::Packed(p) => {
                let mut t = Table::with_capacity(p.len().max(reserve));
                for e in p.iter() {
                    let id = t.insert(e.field, e.value);
                    if let Some(at) = e.expire_at {
                        t.set_expire(id, at);
                    }
                }
                t
            }
        };
        // Dropping the old word frees the packed block.
        drop(std::mem::replace(
            self,
            HashValue::from_table(Box::new(table)),
        ));
    }

    /// Redis's `hashTypeTryConversion`: `args` are the raw field/value arguments of
    /// HSET, HMSET, HSETNX or HSETEX, checked before any is written. Converts to a
    /// table when an argument is longer than `listpack_value_bytes_max`, or when they
    /// could not fit the block (and, with [`CONVERT_ON_PAIR_COUNT`], pre-sized when
    /// there are more pairs than `listpack_entries_max`). Returns true if it
    /// converted.
    pub fn convert_for_args<A, I>(&mut self, args: I, limits: HashLimits) -> bool
    where
        A: AsRef<[u8]>,
        I: IntoIterator<Item = A>,
        I::IntoIter: ExactSizeIterator,
    {
        let Repr::Packed(p) = self.repr() else {
            return false;
        };
        let data_len = p.data_len();
        let args = args.into_iter();
        let pairs = args.len() / 2;
        if CONVERT_ON_PAIR_COUNT && pairs > limits.listpack_entries_max {
            self.convert_to_table(pairs);
            return true;
        }
        let mut sum: usize = 0;
        for a in args {
            let len = a.as_ref().len();
            if len > limits.listpack_value_bytes_max {
                self.convert_to_table(0);
                return true;
            }
            sum = sum.saturating_add(len);
        }
        if data_len.saturating_add(sum) > PACKED_BYTES_MAX {
            self.convert_to_table(0);
            return true;
        }
        false
    }

    /// Convert `listpack` to `listpackex` (Redis's `hashTypeSetExInit`); no-op for the
    /// other encodings.
    ///
    /// A block too close to [`PACKED_BYTES_MAX`] for the extra byte per field
    /// becomes a table instead (only reachable with a raised
    /// `hash-max-listpack-value`; Redis's own cap is the same 1 GiB).
    pub fn enable_field_expiry(&mut self) {
        if let Repr::Packed(p) = self.repr() {
            if p.has_ttl() {
                return;
            }
            if p.data_len() + p.len() > PACKED_BYTES_MAX {
                self.convert_to_table(0);
                return;
            }
            let ex = p.with_ttl_slots();
            drop(std::mem::replace(self, HashValue::from_packed(ex)));
        }
    }

    /// HSET: set `field` to `value` and clear its expiry. True if the field was not
    /// stored before (an expired-but-stored field counts as stored, as in Redis).
    pub fn set(&mut self, field: &[u8], value: &[u8], limits: HashLimits) -> bool {
        self.set_generic(field, value, limits, false)
    }

    /// Like [`HashValue::set`] but an existing field keeps its expiry (HSETEX KEEPTTL,
    /// HINCRBY/HINCRBYFLOAT, Redis's `HASH_SET_KEEP_TTL`).
    pub fn set_keep_ttl(&mut self, field: &[u8], value: &[u8], limits: HashLimits) -> bool {
        self.set_generic(field, value, limits, true)
    }

    /// HSETNX: first remove `field` if it is expired at `now_ms` (lazy expiry), then
    /// set it only if absent. True if it was set.
    pub fn set_if_absent(
        &mut self,
        field: &[u8],
        value: &[u8],
        limits: HashLimits,
        now_ms: u64,
    ) -> bool {
        self.remove_if_expired(field, now_ms);
        if self.lookup(field).is_some() {
            return false;
        }
        self.set_generic(field, value, limits, false)
    }

    fn set_generic(
        &mut self,
        field: &[u8],
        value: &[u8],
        limits: HashLimits,
        keep_ttl: bool,
    ) -> bool {
        /// What a write to a packed hash does.
        enum Plan {
            Table,
            Update(Located),
            Insert,
        }
        if field.len() > limits.listpack_value_bytes_max
            || value.len() > limits.listpack_value_bytes_max
        {
            self.convert_to_table(0);
        }
        let plan = match self.repr() {
            Repr::Table(_) => Plan::Table,
            Repr::Packed(p) => match p.find(field) {
                Some((loc, _)) => {
                    let with = entry_bytes(field.len(), value.len(), loc.expire_at, p.has_ttl());
                    if p.data_len() - (loc.end - loc.start) + with <= PACKED_BYTES_MAX {
                        Plan::Update(loc)
                    } else {
                        Plan::Table
                    }
                }
                None if p.fits(field.len(), value.len(), true) => Plan::Insert,
                None => Plan::Table,
            },
        };
        let new = match (plan, self.repr_mut()) {
            (Plan::Update(loc), ReprMut::Packed(p)) => {
                if loc.expire_at.is_some() && !keep_ttl {
                    // Redis re-inserts the field at the end, without a TTL.
                    p.reinsert(loc, value, None);
                } else {
                    p.replace_value(loc, value);
                }
                false
            }
            (Plan::Insert, ReprMut::Packed(p)) => {
                p.insert(field, value, None);
                true
            }
            _ => {
                self.convert_to_table(0);
                self.set_in_table(field, value, keep_ttl)
            }
        };
        if let Repr::Packed(p) = self.repr() {
            if p.len() > limits.listpack_entries_max {
                self.convert_to_table(0);
            }
        }
        new
    }

    fn set_in_table(&mut self, field: &[u8], value: &[u8], keep_ttl: bool) -> bool {
        let ReprMut::Table(t) = self.repr_mut() else {
            unreachable!("set_in_table on a packed hash")
        };
        match t.find(field) {
            Some(id) => {
                t.set_value(id, value);
                if !keep_ttl {
                    t.persist(id);
                }
                false
            }
            None => {
                t.insert(field, value);
                true
            }
        }
    }

    /// Reverse one change of a big hash (the undo journal's roll-back).
    pub(crate) fn reverse(&mut self, inverse: crate::undo::Inverse, arena: &[u8]) {
        match self.repr_mut() {
            ReprMut::Table(t) => t.reverse(inverse, arena),
            ReprMut::Packed(_) => unreachable!("a hash table never becomes packed"),
        }
    }

    /// HDEL: remove the stored `field` (expired or not); true if it was stored.
    pub fn remove(&mut self, field: &[u8]) -> bool {
        match self.repr_mut() {
            ReprMut::Packed(p) => match p.find(field) {
                Some((loc, _)) => {
                    p.remove(loc);
                    true
                }
                None => false,
            },
            ReprMut::Table(t) => match t.find(field) {
                Some(id) => {
                    t.remove(id);
                    true
                }
                None => false,
            },
        }
    }

    /// Lazy expiry on write access: remove `field` if it is stored and past its time
    /// at `now_ms`; true if it removed it.
    pub fn remove_if_expired(&mut self, field: &[u8], now_ms: u64) -> bool {
        let expired = self.lookup(field).is_some_and(|f| f.is_expired(now_ms));
        expired && self.remove(field)
    }

    /// Set the expiry of `field` to `at_ms` (absolute Unix ms, at least 1: 0 is taken
    /// as 1). Converts `listpack` to `listpackex` first, whether or not the field is
    /// stored. True if the field is stored. Conditions (NX XX GT LT) and times already
    /// past are the command layer's: it reads [`HashValue::field_expire_at`] first.
    pub fn set_field_expire(&mut self, field: &[u8], at_ms: u64) -> bool {
        debug_assert!(at_ms != 0, "expiry time 0 means none in a packed hash");
        let at_ms = at_ms.max(1);
        self.enable_field_expiry();
        if let Repr::Packed(p) = self.repr() {
            // A time takes up to one varint more than "none".
            if p.data_len() + ENTRY_OVERHEAD_MAX > PACKED_BYTES_MAX {
                self.convert_to_table(0);
            }
        }
        match self.repr_mut() {
            ReprMut::Packed(p) => match p.find(field) {
                Some((loc, e)) => {
                    if e.expire_at != Some(at_ms) {
                        let value = e.value.to_vec();
                        p.reinsert(loc, &value, Some(at_ms));
                    }
                    true
                }
                None => false,
            },
            ReprMut::Table(t) => match t.find(field) {
                Some(id) => {
                    t.set_expire(id, at_ms);
                    true
                }
                None => false,
            },
        }
    }

    /// HPERSIST: remove the expiry of `field`; true if it had one.
    pub fn persist_field(&mut self, field: &[u8]) -> bool {
        match self.repr_mut() {
            ReprMut::Packed(p) => match p.find(field) {
                Some((loc, e)) if e.expire_at.is_some() => {
                    let value = e.value.to_vec();
                    // Redis moves the field to the end, among those without a TTL.
                    p.reinsert(loc, &value, None);
                    true
                }
                _ => false,
            },
            ReprMut::Table(t) => match t.find(field) {
                Some(id) => t.persist(id),
                None => false,
            },
        }
    }

    /// Active expiry: remove up to `budget` fields past their time at `now_ms`,
    /// earliest first. Returns how many it removed. Bounded: O(budget log n) for a
    /// table, one move of the block for a packed hash.
    pub fn remove_expired(&mut self, now_ms: u64, budget: usize) -> usize {
        match self.repr_mut() {
            ReprMut::Packed(p) if p.has_ttl() => {
                let n = p
                    .iter()
                    .take(budget)
                    .take_while(|e| e.expire_at.is_some_and(|at| now_ms > at))
                    .count();
                if n > 0 {
                    p.remove_prefix(n);
                }
                n
            }
            ReprMut::Packed(_) => 0,
            ReprMut::Table(t) => t.remove_expired(now_ms, budget),
        }
    }

    /// Every stored field in order, expired ones included: insertion order for
    /// `listpack`; expiry order (fields without one last) for `listpackex`, as Redis;
    /// slot order for a table.
    pub fn entries(&self) -> Entries<'_> {
        match self.repr() {
            Repr::Packed(p) => Entries::Packed(p.iter()),
            Repr::Table(t) => Entries::Table(t.iter()),
        }
    }

    /// The fields live at `now_ms`, as (field, value), in [`HashValue::entries`] order.
    pub fn iter(&self, now_ms: u64) -> impl Iterator<Item = (&[u8], &[u8])> + '_ {
        self.entries()
            .filter(move |f| !f.is_expired(now_ms))
            .map(|f| (f.field, f.value))
    }

    /// Positions for [`HashValue::entry_at`] are below this: the field count of a
    /// packed hash, the slot count of a table.
    pub fn position_bound(&self) -> usize {
        match self.repr() {
            Repr::Packed(p) => p.len(),
            Repr::Table(t) => t.slot_count(),
        }
    }

    /// The stored field at `pos` (HRANDFIELD): O(pos) for a packed hash, O(1) for a
    /// table, where a vacant slot answers `None`.
    pub fn entry_at(&self, pos: usize) -> Option<FieldRef<'_>> {
        match self.repr() {
            Repr::Packed(p) => p.nth(pos).map(Into::into),
            Repr::Table(t) => t.at(pos).map(Into::into),
        }
    }

    /// A uniformly random field live at `now_ms`, from `rng`'s numbers: a table
    /// probes up to [`RANDOM_PROBES_MAX`] random slots, then (or for a packed hash)
    /// picks the k-th live field by walking. `None` when no field is live.
    pub fn random_entry(&self, now_ms: u64, rng: &mut impl FnMut() -> u64) -> Option<FieldRef<'_>> {
        if let Repr::Table(t) = self.repr() {
            let slots = t.slot_count() as u64;
            if slots == 0 {
                return None;
            }
            for _ in 0..RANDOM_PROBES_MAX {
                let pos = (rng() % slots) as usize;
                if let Some(e) = t.at(pos).filter(|e| !FieldRef::from(*e).is_expired(now_ms)) {
                    return Some(e.into());
                }
            }
        }
        let live = self.entries().filter(|f| !f.is_expired(now_ms)).count();
        if live == 0 {
            return None;
        }
        let k = (rng() % live as u64) as usize;
        self.entries().filter(|f| !f.is_expired(now_ms)).nth(k)
    }

    /// One HSCAN step: calls `f` with the fields live at `now_ms` and returns the next
    /// cursor (0 when done). A packed hash answers everything at once with cursor 0,
    /// whatever the cursor (as Redis). For a table, `count` is the number of fields
    /// wanted; see the `table` module for the cursor's guarantee: every field stored
    /// and live for the whole scan is returned at least once.
    pub fn scan<'a>(
        &'a self,
        cursor: u64,
        count: usize,
        now_ms: u64,
        mut f: impl FnMut(&'a [u8], &'a [u8]),
    ) -> u64 {
        match self.repr() {
            Repr::Packed(p) => {
                for e in p.iter() {
                    if !FieldRef::from(e).is_expired(now_ms) {
                        f(e.field, e.value);
                    }
                }
                0
            }
            Repr::Table(t) => t.scan(cursor, count, |e| {
                let live = !FieldRef::from(e).is_expired(now_ms);
                if live {
                    f(e.field, e.value);
                }
                live
            }),
        }
    }

    /// An independent copy with the same encoding, order and expiry times (COPY).
    pub fn deep_clone(&self) -> HashValue {
        match self.repr() {
            Repr::Packed(p) => HashValue::from_packed(p.deep_clone()),
            Repr::Table(t) => HashValue::from_table(Box::new(t.deep_clone())),
        }
    }

    /// Free up to `nodes_max` fields of a big hash so a deleted one is released in
    /// slices (the engine's lazy free); true when what is left is one block. Only for
    /// a value being destroyed: afterwards nothing but further calls,
    /// [`HashValue::heap_bytes`] and drop may touch it.
    pub fn free_some(&mut self, nodes_max: usize) -> bool {
        match self.repr_mut() {
            ReprMut::Packed(_) => true,
            ReprMut::Table(t) => t.free_some(nodes_max),
        }
    }

    /// Heap bytes recomputed from scratch (tests).
    #[cfg(test)]
    pub fn heap_bytes_recomputed(&self) -> usize {
        match self.repr() {
            Repr::Packed(p) => crate::memsize::malloc_chunk_bytes(p.block_bytes()),
            Repr::Table(t) => {
                t.check();
                t.heap_bytes_recomputed()
            }
        }
    }
}

impl Drop for HashValue {
    fn drop(&mut self) {
        if self.is_table() {
            // SAFETY: a tagged word owns a Box<Table>; this is its only release.
            drop(unsafe { Box::from_raw(self.table_ptr()) });
        } else {
            // SAFETY: an untagged word is a Packed we own; read it out to drop it once.
            drop(unsafe { std::ptr::read(self as *const HashValue as *const Packed) });
        }
    }
}

impl std::fmt::Debug for HashValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.repr() {
            Repr::Packed(p) => write!(f, "HashValue::{:?}{:?}", self.encoding(), p),
            Repr::Table(t) => write!(f, "HashValue::Hashtable{t:?}"),
        }
    }
}

/// Iterator of [`HashValue::entries`].
pub enum Entries<'a> {
    /// Over a packed block.
    Packed(PackedIter<'a>),
    /// Over a table's slots.
    Table(TableIter<'a>),
}

impl<'a> Iterator for Entries<'a> {
    type Item = FieldRef<'a>;

    fn next(&mut self) -> Option<FieldRef<'a>> {
        match self {
            Entries::Packed(it) => it.next().map(Into::into),
            Entries::Table(it) => it.next().map(Into::into),
        }
    }
}
