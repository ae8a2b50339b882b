//! The keyspace of one database: a slab of compact entries plus a hash index.
//!
//! Layout, from the bottom up:
//! - [`entry`]: one key with its value, expiry and access clock in 48 bytes; short
//!   keys and values inline, longer ones behind a thin pointer; integers as `i64`.
//! - [`slab`]: entries in 1024-slot chunks, addressed by stable `u32` ids; a bitmap
//!   marks the ids that have a TTL (so keys without one pay nothing for expiry and
//!   active expiry walks only the others).
//! - [`index`]: key hash -> id, an extendible hash table of small hashbrown tables
//!   that split one at a time, so no resize ever touches more than ~1800 ids.
//!
//! Per key that is 48 bytes of entry plus ~5-8 bytes of index (4-byte id and a
//! control byte at 60-88% load) and 1/8 byte of TTL bitmap; a key or value too long
//! to sit inline adds one heap block.
//!
//! - [`cow`]: a snapshot in progress (BGSAVE without fork): entries are written
//!   out before they change, so a scan in slices sees the database as it began
//!   (with `crate::values::rdb`'s writer of one value, below).
//! - [`slot_index`]: keys by hash slot, built when a cluster's resharding
//!   first asks and kept from then on.
//! - [`journal`]: the undo journal's steps of database changes (an insert, a
//!   deleted entry, an entry as it was before a change in place ...), recorded by
//!   the mutators here and reversed by the engine (`crate::rollback`).
//!
//! Why this is the floor every command stands on, and what is below it: the values
//! an entry holds (`crate::values`) know nothing of keys or databases, so the
//! keyspace imports them and no value imports the keyspace.
//!
//! Hashing: ahash with a per-database random seed (ahash's runtime RNG), so keys
//! crafted to collide cannot be precomputed. Nothing depends on hash order: SCAN
//! cursors are slot ids.

mod cow;
mod entry;
mod heapstr;
mod index;
pub(crate) mod journal;
mod slab;
mod slot_index;

pub(crate) use cow::write_entry;
pub use entry::{Collection, Entry, NewValue, ENTRY_BYTES};
pub use heapstr::STRING_BYTES_MAX;
pub use slab::{TtlScan, CHUNK_SLOTS};

use crate::clock::ClockRules;
use crate::undo;
use crate::value::ValueMut;
use crate::values::stream::groups::GroupChange;
use index::Index;
use journal::Step;
use slab::Slab;
use slot_index::SlotIndex;

/// Bytes of one occupied index bucket: the `u32` id and hashbrown's control byte.
const INDEX_SLOT_BYTES: usize = 5;

/// A stable handle of a live entry (its slab slot).
pub type EntryId = u32;

/// One database: entries, their index and the counters INFO needs.
pub struct Db {
    slab: Slab,
    index: Index,
    hasher: ahash::RandomState,
    /// Heap bytes owned by the entries (see [`Entry::heap_bytes`]).
    heap_bytes: usize,
    /// Entries with a TTL.
    volatile: usize,
    /// The snapshot in progress, if any (see [`cow`]).
    pub(crate) cow: Option<Box<cow::Cow>>,
    /// Keys by hash slot, once a resharding command asked (see [`slot_index`]).
    slot_index: Option<Box<SlotIndex>>,
    /// The database number the engine serves this as (SWAPDB changes it): how the
    /// undo journal names it ([`crate::undo`]).
    pub(crate) number: usize,
}

impl Default for Db {
    fn default() -> Self {
        Db {
            slab: Slab::default(),
            index: Index::default(),
            hasher: ahash::RandomState::new(),
            heap_bytes: 0,
            volatile: 0,
            cow: None,
            slot_index: None,
            number: 0,
        }
    }
}

impl Db {
    /// Number of keys (including logically expired ones not yet removed, as DBSIZE).
    pub fn len(&self) -> usize {
        self.slab.len()
    }

    /// True when the database holds no key.
    pub fn is_empty(&self) -> bool {
        self.slab.len() == 0
    }

    /// Number of keys with a TTL.
    pub fn volatile_len(&self) -> usize {
        self.volatile
    }

    fn hash(&self, key: &[u8]) -> u64 {
        self.hasher.hash_one(key)
    }

    /// The id of `key`, expired or not.
    pub fn find(&self, key: &[u8]) -> Option<EntryId> {
        let slab = &self.slab;
        self.index
            .find(self.hash(key), |id| slab.get(id).key() == key)
    }

    /// Touch the index slots `key` hashes to and prefetch the candidate entries,
    /// reading none of them (see [`crate::Engine::prefetch`]); the key's hash,
    /// for the second pass ([`prefetch_value`](Self::prefetch_value)).
    pub fn prefetch(&self, key: &[u8]) -> u64 {
        let slab = &self.slab;
        let hash = self.hash(key);
        self.index.find(hash, |id| {
            prefetch_bytes(
                slab.get(id) as *const Entry as *const u8,
                std::mem::size_of::<Entry>(),
            );
            false
        });
        hash
    }

    /// Prefetch the heap block of `key`'s value (a second pass after [`prefetch`](Self::prefetch),
    /// when the entry is on its way); `hash` is the key's, as the first pass
    /// returned it (not computed again).
    pub fn prefetch_value(&self, key: &[u8], hash: u64) {
        let slab = &self.slab;
        if let Some(block) = self
            .index
            .find(hash, |id| slab.get(id).key() == key)
            .and_then(|id| slab.get(id).value_block())
        {
            // Two lines: the block header and the start of the value rarely share one.
            prefetch_bytes(block, 65);
        }
    }

    /// The live entry `id`.
    pub fn entry(&self, id: EntryId) -> &Entry {
        self.slab.get(id)
    }

    /// Make room for about `keys` keys while this database is empty (a file being
    /// loaded says how many follow; see [`Index::reserve`]).
    pub fn reserve(&mut self, keys: usize) {
        self.index.reserve(keys);
    }

    /// Add `entry` (whose key must be absent); its expiry is honoured.
    pub fn insert(&mut self, entry: Entry) -> EntryId {
        crate::fault::note_mutation();
        let id = self.link(entry, None);
        journal::record(Step::Inserted {
            db: self.number,
            id,
        });
        id
    }

    /// Put `entry` into slot `id` (vacant), as it was before a rolled-back command
    /// took it out.
    pub(crate) fn insert_at(&mut self, id: EntryId, entry: Entry) {
        crate::fault::note_mutation();
        self.link(entry, Some(id));
    }

    /// Put `entry` in (into slot `at` if given), unrecorded and uncounted (the
    /// caller counts the change: a move takes an entry out and puts it back in one
    /// change); returns its slot.
    pub(crate) fn link(&mut self, entry: Entry, at: Option<EntryId>) -> EntryId {
        let hash = self.hash(entry.key());
        let volatile = entry.expire_at().is_some();
        self.heap_bytes += entry.heap_bytes();
        let field_ttls = entry.has_field_ttls();
        let id = match at {
            Some(id) => self.slab.insert_at(id, entry),
            None => self.slab.insert(entry),
        };
        if let Some(cow) = self.cow.as_deref_mut() {
            cow.filled(id);
        }
        if field_ttls {
            self.slab.set_field_ttl_bit(id, true);
        }
        if volatile {
            self.slab.set_ttl_bit(id, true);
            self.volatile += 1;
        }
        let Db {
            slab,
            index,
            hasher,
            slot_index,
            ..
        } = self;
        index.insert(hash, id, |x| hasher.hash_one(slab.get(x).key()));
        if let Some(slots) = slot_index.as_deref_mut() {
            slots.add(id, slab.get(id).key());
        }
        id
    }

    /// Remove entry `id` and return it, to be kept elsewhere (lent to another
    /// shard): a command that does so cannot be rolled back here.
    pub fn remove(&mut self, id: EntryId) -> Entry {
        undo::mark_unrecoverable();
        self.unlink(id)
    }

    /// Delete entry `id`. While a command runs the undo journal keeps the entry
    /// until the command ends; otherwise it is returned for the caller to free.
    pub(crate) fn delete(&mut self, id: EntryId) -> Option<Entry> {
        let entry = self.unlink(id);
        let bytes = entry.heap_bytes();
        let step = journal::hold(
            Step::Deleted {
                db: self.number,
                id,
                entry,
            },
            bytes,
        );
        match step {
            Some(Step::Deleted { entry, .. }) => Some(entry),
            _ => None,
        }
    }

    /// RENAME: entry `id` goes on under `key` (absent); returns its new id.
    pub(crate) fn rename(&mut self, id: EntryId, key: &[u8]) -> EntryId {
        let entry = self.unlink(id);
        let old_key = undo::recording().then(|| entry.key().to_vec());
        let new_id = self.link(entry.rekey(key), None);
        if let Some(old_key) = old_key {
            journal::record(Step::Moved {
                from: (self.number, id),
                to: (self.number, new_id),
                key: old_key,
            });
        }
        new_id
    }

    /// Take entry `id` out, unrecorded (the caller records what it does with it).
    pub(crate) fn unlink(&mut self, id: EntryId) -> Entry {
        crate::fault::note_mutation();
        self.before_change(id);
        let hash = self.hash(self.slab.get(id).key());
        let removed = self.index.remove(hash, id);
        debug_assert!(removed, "entry missing from the index");
        if let Some(slots) = self.slot_index.as_deref_mut() {
            slots.remove(id, self.slab.get(id).key());
        }
        if self.slab.get(id).expire_at().is_some() {
            self.volatile -= 1;
        }
        let entry = self.slab.remove(id);
        self.heap_bytes -= entry.heap_bytes();
        entry
    }

    /// Change entry `id`'s value through `change` (which cannot touch the key or the
    /// expiry); keeps the heap accounting and the field-TTL bitmap right. While a
    /// command runs the undo journal keeps a copy of the entry first or, for a big
    /// value, has its mutators record their inverses (`undo::keep_preimage`).
    pub fn modify<R>(&mut self, id: EntryId, change: impl FnOnce(&mut Entry) -> R) -> R {
        crate::fault::note_mutation();
        self.before_change(id);
        let opened = journal::keep_preimage(self.number, id, self.slab.get(id));
        let entry = self.slab.get_mut(id);
        let before = entry.heap_bytes();
        let had_field_ttls = entry.has_field_ttls();
        let result = change(entry);
        if opened {
            journal::close_open_entry();
        }
        crate::fault::change_point();
        self.after_change(id, before, had_field_ttls);
        result
    }

    /// Reverse one primitive change of the big value in slot `id` (a roll-back;
    /// the heap accounting is recounted afterwards).
    pub(crate) fn reverse(&mut self, id: EntryId, inverse: undo::Inverse, arena: &[u8]) {
        crate::fault::note_mutation();
        self.before_change(id);
        match self.slab.get_mut(id).value_mut() {
            ValueMut::List(list) => list.reverse(inverse, arena),
            ValueMut::Hash(hash) => hash.reverse(inverse, arena),
            ValueMut::Set(set) => set.reverse(inverse, arena),
            ValueMut::ZSet(zset) => zset.reverse(inverse, arena),
            ValueMut::Str => self.slab.get_mut(id).reverse_str(inverse, arena),
            ValueMut::Stream(stream) => stream.reverse(inverse, arena),
        }
        let field_ttls = self.slab.get(id).has_field_ttls();
        self.slab.set_field_ttl_bit(id, field_ttls);
    }

    /// Reverse one change of the consumer groups of the stream in slot `id` (a
    /// roll-back).
    pub(crate) fn reverse_groups(&mut self, id: EntryId, change: GroupChange) {
        crate::fault::note_mutation();
        self.before_change(id);
        if let ValueMut::Stream(stream) = self.slab.get_mut(id).value_mut() {
            stream.groups_mut().reverse(change);
        }
    }

    /// Keep the heap accounting and the field-TTL bitmap right after entry `id`
    /// changed from `before` heap bytes.
    fn after_change(&mut self, id: EntryId, before: usize, had_field_ttls: bool) {
        let entry = self.slab.get(id);
        let after = entry.heap_bytes();
        let field_ttls = entry.has_field_ttls();
        self.heap_bytes = self.heap_bytes + after - before;
        // Strings never touch the bitmap (no cache line for it on SET's path).
        if field_ttls != had_field_ttls {
            self.slab.set_field_ttl_bit(id, field_ttls);
        }
    }

    /// Put back entry `id` as it was before a rolled-back change in place (same
    /// key), expiry included. The heap accounting is left to
    /// [`Db::recount_heap_bytes`]: a change cut short by a panic never updated it.
    pub(crate) fn restore(&mut self, id: EntryId, before: Entry) {
        crate::fault::note_mutation();
        self.before_change(id);
        let at = before.expire_at();
        let field_ttls = before.has_field_ttls();
        let had_expiry = std::mem::replace(self.slab.get_mut(id), before)
            .expire_at()
            .is_some();
        self.slab.set_field_ttl_bit(id, field_ttls);
        self.count_expiry_change(id, had_expiry, at);
    }

    /// Count the entries' heap bytes afresh (after a roll-back; O(keys)).
    pub(crate) fn recount_heap_bytes(&mut self) {
        self.heap_bytes = self.iter().map(|(_, e)| e.heap_bytes()).sum();
    }

    /// Set the access clock of entry `id`.
    pub fn touch(&mut self, id: EntryId, clock: u32) {
        self.slab.get_mut(id).set_clock(clock);
    }

    /// Set or clear the expiry of entry `id`.
    pub fn set_expire(&mut self, id: EntryId, at_ms: Option<u64>) {
        crate::fault::note_mutation();
        self.before_change(id);
        let entry = self.slab.get_mut(id);
        let was = entry.expire_at();
        if was == at_ms {
            return;
        }
        entry.set_expire_at(at_ms);
        self.count_expiry_change(id, was.is_some(), at_ms);
        journal::record(Step::Expiry {
            db: self.number,
            id,
            was,
        });
    }

    /// Keep the count of entries with a TTL and the TTL bitmap right after entry
    /// `id`'s expiry changed.
    fn count_expiry_change(&mut self, id: EntryId, had: bool, at_ms: Option<u64>) {
        match (had, at_ms.is_some()) {
            (false, true) => self.volatile += 1,
            (true, false) => self.volatile -= 1,
            _ => {}
        }
        self.slab.set_ttl_bit(id, at_ms.is_some());
    }

    /// Slot ids are below this; SCAN walks `0..slots_high()`.
    pub fn slots_high(&self) -> u32 {
        self.slab.high()
    }

    /// The live entry in slot `id`, if the slot is in use.
    pub fn slot(&self, id: u32) -> Option<&Entry> {
        (id < self.slab.high())
            .then(|| self.slab.get(id))
            .filter(|e| !e.is_vacant())
    }

    /// Every live entry with its id, in slot order.
    pub fn iter(&self) -> impl Iterator<Item = (EntryId, &Entry)> {
        (0..self.slab.high())
            .map(|id| (id, self.slab.get(id)))
            .filter(|(_, e)| !e.is_vacant())
    }

    /// The next entry with a TTL at or after slot `from` (see [`TtlScan`]).
    pub fn next_with_ttl(&self, from: u32, words_budget: &mut usize) -> TtlScan {
        self.slab.next_with_ttl(from, words_budget)
    }

    /// The next hash with field expiry times at or after slot `from` (active field
    /// expiry; see [`TtlScan`]).
    pub fn next_with_field_ttl(&self, from: u32, words_budget: &mut usize) -> TtlScan {
        self.slab.next_with_field_ttl(from, words_budget)
    }

    /// A random live entry: random slots first, then a walk from a random slot.
    pub fn random(&self, mut random: impl FnMut() -> u64) -> Option<EntryId> {
        const RANDOM_PROBES_MAX: usize = 64;
        let high = self.slab.high() as u64;
        if self.is_empty() || high == 0 {
            return None;
        }
        for _ in 0..RANDOM_PROBES_MAX {
            let id = (random() % high) as u32;
            if !self.slab.get(id).is_vacant() {
                return Some(id);
            }
        }
        let start = (random() % high) as u32;
        (start..self.slab.high())
            .chain(0..start)
            .find(|&id| !self.slab.get(id).is_vacant())
    }

    /// Bytes of entry slots allocated but free (new keys take them first).
    pub fn free_slot_bytes(&self) -> usize {
        self.slab
            .allocated_bytes()
            .saturating_sub(self.slab.len() * ENTRY_BYTES)
    }

    /// Entry slots in use or freed (random picks range over them).
    pub fn slot_count(&self) -> u32 {
        self.slab.high()
    }

    /// Estimated bytes used: chunks, index, heap blocks (and the slot index
    /// while there is one).
    pub fn memory_bytes(&self) -> usize {
        let slot_index = self.slot_index.as_ref().map_or(0, |s| s.allocated_bytes());
        self.slab.allocated_bytes() + self.index.allocated_bytes() + self.heap_bytes + slot_index
    }

    /// The number of keys hashing to `slot` (expired or not, as Redis's slot
    /// lists keep them), from the slot index.
    pub fn count_in_slot(&mut self, slot: u16) -> usize {
        self.build_slot_index();
        self.slot_index.as_deref().map_or(0, |s| s.ids(slot).len())
    }

    /// Up to `count` keys hashing to `slot`, from the slot index.
    pub fn keys_in_slot(&mut self, slot: u16, count: usize) -> Vec<Vec<u8>> {
        self.build_slot_index();
        let Some(slots) = self.slot_index.as_deref() else {
            return Vec::new();
        };
        let ids = slots.ids(slot).iter().take(count);
        ids.map(|&id| self.slab.get(id).key().to_vec()).collect()
    }

    /// The slot index, built by one walk the first time it is asked for
    /// (see [`slot_index`]).
    fn build_slot_index(&mut self) {
        if self.slot_index.is_none() {
            let built = SlotIndex::build(self.iter().map(|(id, e)| (id, e.key())));
            self.slot_index = Some(Box::new(built));
        }
    }

    /// What MEMORY STATS calls the database's hash table overhead: its entry
    /// chunks and index (Redis: the dict's entries and buckets), and the TTL
    /// bitmap (Redis: the expires dict), in bytes.
    pub fn table_bytes(&self) -> (usize, usize) {
        let ttl = self.slab.ttl_bitmap_bytes();
        let table = self.slab.allocated_bytes() - ttl + self.index.allocated_bytes();
        (table, ttl)
    }

    /// Bytes one key costs besides its heap blocks: its entry and its index slot (a
    /// 4-byte id and a 1-byte control byte; empty buckets are not charged, as Redis'
    /// MEMORY USAGE does not charge its bucket array).
    pub fn entry_overhead_bytes(&self) -> usize {
        ENTRY_BYTES + INDEX_SLOT_BYTES
    }

    /// Empty the database, handing back its entry chunks for freeing later; during
    /// a snapshot the snapshot keeps them instead (its scan reads them).
    pub fn take_chunks(&mut self) -> Vec<Box<[Entry]>> {
        undo::mark_unrecoverable();
        let cow = self.cow.take();
        let number = self.number;
        let slab = std::mem::take(self).slab;
        self.number = number;
        let Some(mut cow) = cow else {
            return slab.into_chunks();
        };
        let unneeded = cow.freeze(slab);
        self.cow = Some(cow);
        unneeded.map(Slab::into_chunks).unwrap_or_default()
    }

    /// Entry `id` is about to change: a snapshot that has not written it yet
    /// writes its old state now.
    fn before_change(&mut self, id: EntryId) {
        if let Some(cow) = self.cow.as_deref_mut() {
            cow.before_change(&self.slab, id);
        }
    }

    /// Start a snapshot of this database, saved as database `db_index`, its
    /// entries written as of `began_ms`, their clocks saved by `clock`.
    pub(crate) fn snapshot_begin(&mut self, db_index: usize, clock: ClockRules, began_ms: u64) {
        let end = self.slab.high();
        let mut cow = cow::Cow::new(db_index, end, clock, began_ms);
        cow.sizes = Some((self.len(), self.volatile_len()));
        self.cow = Some(Box::new(cow));
    }

    /// The snapshot's next bytes for this database: the entries written ahead of
    /// the scan, then up to `budget` more scanned ones (counted off `budget`),
    /// preceded by `SELECTDB` when there are any. True once the scan is done.
    pub(crate) fn snapshot_step(&mut self, out: &mut Vec<u8>, budget: &mut usize) -> bool {
        let Db { cow, slab, .. } = self;
        let Some(cow) = cow.as_deref_mut() else {
            return true;
        };
        let mark = out.len();
        crate::values::rdb::write_select_db(out, cow.db_index);
        if let Some((keys, volatile)) = cow.sizes {
            crate::values::rdb::write_resize_db(out, keys, volatile);
        }
        let keys_at = out.len();
        out.append(&mut cow.ahead);
        let done = cow.scan(slab, out, budget);
        if out.len() > keys_at {
            cow.sizes = None;
        } else {
            out.truncate(mark);
        }
        done
    }

    /// End this database's snapshot: the RDB version its entries need or the
    /// first one that could not be written, and the chunks a flush left to it.
    pub(crate) fn snapshot_end(&mut self) -> (Result<u16, String>, Vec<Box<[Entry]>>) {
        let Some(cow) = self.cow.take() else {
            return (Ok(crate::values::rdb::RDB_VERSION), Vec::new());
        };
        let result = match &cow.error {
            Some(e) => Err(e.clone()),
            None => Ok(cow.version),
        };
        let chunks = cow.into_frozen().map(Slab::into_chunks).unwrap_or_default();
        (result, chunks)
    }
}

/// Ask the CPU to start loading the cache lines of `len` bytes at `ptr`. A hint
/// only: it never faults and changes nothing but the cache.
fn prefetch_bytes(ptr: *const u8, len: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        // SAFETY: prefetch is a hint that never dereferences or faults, and SSE is
        // part of the x86_64 baseline.
        unsafe {
            _mm_prefetch::<_MM_HINT_T0>(ptr as *const i8);
            _mm_prefetch::<_MM_HINT_T0>(ptr.wrapping_add(len.saturating_sub(1)) as *const i8);
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (ptr, len);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memsize::malloc_chunk_bytes;

    fn put(db: &mut Db, key: &str, value: &str) -> EntryId {
        db.insert(Entry::new(
            key.as_bytes(),
            NewValue::Str {
                bytes: value.as_bytes(),
                raw: false,
            },
            0,
        ))
    }

    #[test]
    fn insert_find_remove() {
        let mut db = Db::default();
        for n in 0..5000 {
            put(&mut db, &format!("key:{n:012}"), "v");
        }
        assert_eq!(db.len(), 5000);
        let id = db.find(b"key:000000000042").unwrap();
        assert_eq!(db.entry(id).key(), b"key:000000000042");
        db.set_expire(id, Some(1000));
        assert_eq!(db.volatile_len(), 1);
        let removed = db.remove(id);
        assert_eq!(removed.expire_at(), Some(1000));
        assert_eq!(db.volatile_len(), 0);
        assert_eq!(db.find(b"key:000000000042"), None);
        assert_eq!(db.len(), 4999);
        assert_eq!(db.iter().count(), 4999);
    }

    #[test]
    fn heap_accounting_follows_changes() {
        let mut db = Db::default();
        let id = put(&mut db, "k", "short");
        assert_eq!(db.heap_bytes, 0);
        db.modify(id, |e| {
            e.set_value(NewValue::Str {
                bytes: &[b'x'; 100],
                raw: false,
            })
        });
        assert_eq!(db.heap_bytes, malloc_chunk_bytes(108));
        db.remove(id);
        assert_eq!(db.heap_bytes, 0);
    }

    #[test]
    fn random_finds_the_only_key() {
        let mut db = Db::default();
        for n in 0..3000 {
            put(&mut db, &n.to_string(), "v");
        }
        for n in 0..3000 {
            if n != 1234 {
                let id = db.find(n.to_string().as_bytes()).unwrap();
                db.remove(id);
            }
        }
        let mut x = 1u64;
        let id = db.random(|| {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
            x >> 11
        });
        assert_eq!(db.entry(id.unwrap()).key(), b"1234");
    }

    /// Keys of each slot by a walk of the database, sorted.
    fn walked(db: &Db, slot: u16) -> Vec<Vec<u8>> {
        let mut keys: Vec<Vec<u8>> = db
            .iter()
            .filter(|(_, e)| crate::slot::key_slot(e.key()) == slot)
            .map(|(_, e)| e.key().to_vec())
            .collect();
        keys.sort();
        keys
    }

    #[derive(Debug, Clone)]
    enum Op {
        Put(u8),
        Delete(u8),
        Rename(u8, u8),
        Flush,
        Ask,
    }

    fn op() -> impl proptest::strategy::Strategy<Value = Op> {
        use proptest::prelude::*;
        prop_oneof![
            6 => any::<u8>().prop_map(Op::Put),
            3 => any::<u8>().prop_map(Op::Delete),
            2 => (any::<u8>(), any::<u8>()).prop_map(|(a, b)| Op::Rename(a, b)),
            1 => Just(Op::Flush),
            1 => Just(Op::Ask),
        ]
    }

    /// Keys in a few slots: `{t}n` for a handful of hash tags, so slots share keys.
    fn key(n: u8) -> String {
        format!("{{{}}}k{n}", n % 5)
    }

    proptest::proptest! {
        /// Whatever insertions, deletions, renames and flushes came before or
        /// after the index was built, each slot's keys and count are what a walk
        /// of the database finds.
        #[test]
        fn the_slot_index_agrees_with_a_walk(ops in proptest::collection::vec(op(), 1..200)) {
            let mut db = Db::default();
            for op in ops {
                match op {
                    Op::Put(n) => {
                        if db.find(key(n).as_bytes()).is_none() {
                            put(&mut db, &key(n), "v");
                        }
                    }
                    Op::Delete(n) => {
                        if let Some(id) = db.find(key(n).as_bytes()) {
                            db.remove(id);
                        }
                    }
                    Op::Rename(a, b) => {
                        let to = format!("{}r", key(b));
                        if let (Some(id), None) = (db.find(key(a).as_bytes()), db.find(to.as_bytes())) {
                            db.rename(id, to.as_bytes());
                        }
                    }
                    Op::Flush => drop(db.take_chunks()),
                    Op::Ask => {
                        let slot = crate::slot::key_slot(b"{0}");
                        db.count_in_slot(slot);
                    }
                }
            }
            for tag in 0..5 {
                let slot = crate::slot::key_slot(format!("{{{tag}}}").as_bytes());
                let want = walked(&db, slot);
                proptest::prop_assert_eq!(db.count_in_slot(slot), want.len());
                let mut got = db.keys_in_slot(slot, usize::MAX);
                got.sort();
                proptest::prop_assert_eq!(got, want);
                proptest::prop_assert_eq!(db.keys_in_slot(slot, 2).len(), db.count_in_slot(slot).min(2));
            }
        }
    }
}
