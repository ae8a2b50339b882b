//! `Table`: a big hash (Redis's `hashtable` encoding) as a slab of field nodes plus
//! a hash index of slot ids, with a min-heap of field expiry times.
//!
//! ```text
//!   index: HashTable<u32>  --id-->  slots: Vec<Slot>  --ptr-->  node block
//!   (ahash of the field)            (8 bytes per id)            [flen vlen ttl_pos]
//!                                                               [field][value]
//!   expiry: Vec<TtlItem> min-heap by time, each node knows its heap position
//! ```
//!
//! Why this layout (the keyspace's own slab + index idea, one level down):
//! - **One allocation per field**: a node holds the field and the value behind a
//!   12-byte header; the index holds 4-byte ids, so an empty index bucket costs 5
//!   bytes, not a pointer pair.
//! - **Resumable scans (HSCAN)**: ids never change while a field lives, so the cursor
//!   is an id. Every field present for the whole scan is returned exactly once,
//!   however the index grows meanwhile. Freed ids are reused LIFO; a field added
//!   during a scan may or may not be returned, as in Redis.
//! - **Shrinking without breaking cursors**: when fewer than one slot in
//!   [`COMPACT_SPARSENESS`] is live the slab is compacted (ids renumbered, order
//!   kept). Compaction bumps an epoch carried in bits 32.. of the cursor; a cursor
//!   from an older epoch restarts at 0, so a field may come back twice but never goes
//!   missing (Redis's guarantee on shrink). The epoch is a `u32`: a cursor kept across
//!   2^32 compactions could be mistaken for a current one.
//! - **Random fields (HRANDFIELD)**: an id is O(1) to read. Compaction keeps the slab
//!   at least 1/[`COMPACT_SPARSENESS`] live once it has [`COMPACT_SLOTS_MIN`] slots,
//!   so a random probe finds a live field in a bounded expected number of tries.
//! - **Field expiry**: only fields with a TTL are in the heap (12 bytes each), so a
//!   hash without TTLs pays one `u32` per node. The next time to expire is the heap's
//!   root, and active expiry pops expired roots: O(log n) per field, never a scan.
//!
//! Invariants: every occupied slot owns a live node; the index maps each live field to
//! its id; `ttl_pos` of a node is its position in `expiry` or [`NO_TTL`]; `node_bytes`
//! is the sum of the nodes' glibc chunks.

use std::alloc::{alloc, dealloc, handle_alloc_error, realloc, Layout};
use std::ptr::NonNull;

use hashbrown::HashTable;

use crate::memsize::malloc_chunk_bytes;
use crate::undo::{self, Inverse, Kept};

/// Largest number of slots: ids are `u32` and [`NO_ID`] is reserved. Reaching it
/// needs more than 100 GiB of nodes, which the memory limit stops long before.
pub const TABLE_SLOTS_MAX: usize = (u32::MAX - 1) as usize;

/// "No id" in the free list.
const NO_ID: u32 = u32::MAX;

/// A node's `ttl_pos` when the field has no expiry.
const NO_TTL: u32 = u32::MAX;

/// Compact when fewer than 1 slot in this many is live: at most 7/8 of the slab is
/// holes (8 bytes each), and a random probe succeeds within 8 tries on average.
pub const COMPACT_SPARSENESS: usize = 8;

/// No compaction below this many slots: a small slab costs little, and compacting it
/// would restart in-flight scans for nothing.
pub const COMPACT_SLOTS_MIN: usize = 64;

/// Slots an HSCAN step examines per field it is asked for (Redis's `count * 10`
/// bucket budget), so a sparse slab cannot make one call slow.
pub const SCAN_SLOTS_PER_COUNT: usize = 10;

/// Header of a node block, followed by the field and the value bytes.
#[repr(C)]
struct NodeHeader {
    field_len: u32,
    value_len: u32,
    /// Position in the expiry heap, or NO_TTL.
    ttl_pos: u32,
}

const NODE_HEADER_BYTES: usize = std::mem::size_of::<NodeHeader>();
const _: () = assert!(NODE_HEADER_BYTES == 12);

fn node_layout(field: usize, value: usize) -> Layout {
    // Cannot fail: both lengths are below u32::MAX and the alignment is 4.
    Layout::from_size_align(
        NODE_HEADER_BYTES + field + value,
        std::mem::align_of::<NodeHeader>(),
    )
    .expect("hash node layout")
}

fn to_u32(n: usize) -> u32 {
    u32::try_from(n).expect("hash field or value longer than u32")
}

/// glibc chunk of a container allocation, 0 when nothing is allocated.
fn container_chunk(bytes: usize) -> usize {
    if bytes == 0 {
        0
    } else {
        malloc_chunk_bytes(bytes)
    }
}

/// A slab slot: a node pointer, or (vacant) the next free id shifted left with the
/// low bit set. Nodes are 4-aligned, so the low bit tells them apart.
#[derive(Clone, Copy)]
struct Slot(*mut NodeHeader);

impl Slot {
    fn vacant(next_free: u32) -> Slot {
        Slot(std::ptr::without_provenance_mut(
            ((next_free as usize) << 1) | 1,
        ))
    }

    fn node(self) -> Option<NonNull<NodeHeader>> {
        if self.0.addr() & 1 == 1 {
            None
        } else {
            NonNull::new(self.0)
        }
    }

    fn next_free(self) -> u32 {
        debug_assert!(self.node().is_none());
        (self.0.addr() >> 1) as u32
    }
}

/// An entry of the expiry heap: when, and which id. Split into `u32`s so the
/// entry is 12 bytes, not 16.
#[derive(Clone, Copy, Debug)]
struct TtlItem {
    at_hi: u32,
    at_lo: u32,
    id: u32,
}

impl TtlItem {
    fn new(at: u64, id: u32) -> TtlItem {
        TtlItem {
            at_hi: (at >> 32) as u32,
            at_lo: at as u32,
            id,
        }
    }

    fn at(&self) -> u64 {
        (u64::from(self.at_hi) << 32) | u64::from(self.at_lo)
    }
}

const _: () = assert!(std::mem::size_of::<TtlItem>() == 12);

/// Borrowed view of a live node.
#[derive(Clone, Copy)]
struct NodeRef<'a> {
    ptr: NonNull<NodeHeader>,
    _table: std::marker::PhantomData<&'a Table>,
}

impl<'a> NodeRef<'a> {
    fn header(self) -> &'a NodeHeader {
        // SAFETY: a NodeRef only exists for a live node of a table borrowed for 'a.
        unsafe { self.ptr.as_ref() }
    }

    fn bytes(self) -> *const u8 {
        // SAFETY: the field and value follow the header inside the same block.
        unsafe { (self.ptr.as_ptr() as *const u8).add(NODE_HEADER_BYTES) }
    }

    fn field(self) -> &'a [u8] {
        let h = self.header();
        // SAFETY: `field_len` initialised bytes follow the header.
        unsafe { std::slice::from_raw_parts(self.bytes(), h.field_len as usize) }
    }

    fn value(self) -> &'a [u8] {
        let h = self.header();
        // SAFETY: `value_len` initialised bytes follow the field.
        unsafe {
            std::slice::from_raw_parts(self.bytes().add(h.field_len as usize), h.value_len as usize)
        }
    }

    fn block_bytes(self) -> usize {
        let h = self.header();
        NODE_HEADER_BYTES + h.field_len as usize + h.value_len as usize
    }
}

fn alloc_node(field: &[u8], value: &[u8]) -> NonNull<NodeHeader> {
    let layout = node_layout(field.len(), value.len());
    // SAFETY: the layout has a non-zero size (the header).
    let raw = unsafe { alloc(layout) } as *mut NodeHeader;
    let Some(ptr) = NonNull::new(raw) else {
        handle_alloc_error(layout)
    };
    // SAFETY: the block is fresh and big enough for the header, field and value.
    unsafe {
        ptr.as_ptr().write(NodeHeader {
            field_len: to_u32(field.len()),
            value_len: to_u32(value.len()),
            ttl_pos: NO_TTL,
        });
        let bytes = (ptr.as_ptr() as *mut u8).add(NODE_HEADER_BYTES);
        std::ptr::copy_nonoverlapping(field.as_ptr(), bytes, field.len());
        std::ptr::copy_nonoverlapping(value.as_ptr(), bytes.add(field.len()), value.len());
    }
    ptr
}

/// Free a node block.
///
/// # Safety
/// `ptr` is a live node no slot refers to any more.
unsafe fn free_node(ptr: NonNull<NodeHeader>) {
    // SAFETY: the caller hands over a live node allocated with this layout.
    unsafe {
        let h = ptr.as_ref();
        let layout = node_layout(h.field_len as usize, h.value_len as usize);
        dealloc(ptr.as_ptr() as *mut u8, layout);
    }
}

/// One field as iteration yields it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TableEntry<'a> {
    /// Its slot id (stable while the field lives).
    pub id: u32,
    /// The field.
    pub field: &'a [u8],
    /// The value.
    pub value: &'a [u8],
    /// The absolute expiry time in Unix ms, if any.
    pub expire_at: Option<u64>,
}

/// A big hash. See the module docs for the layout and its guarantees.
pub struct Table {
    index: HashTable<u32>,
    slots: Vec<Slot>,
    expiry: Vec<TtlItem>,
    hasher: ahash::RandomState,
    /// Head of the LIFO list of vacant slots.
    free_head: u32,
    /// Live fields.
    len: u32,
    /// Bumped by every compaction (cursor bits 32..).
    epoch: u32,
    /// Sum of the nodes' glibc chunks.
    node_bytes: usize,
}

// SAFETY: a Table uniquely owns its nodes (the raw pointers are never shared).
unsafe impl Send for Table {}

impl Table {
    /// An empty table with room for `capacity` fields.
    pub fn with_capacity(capacity: usize) -> Table {
        Table {
            index: HashTable::with_capacity(capacity),
            slots: Vec::with_capacity(capacity),
            expiry: Vec::new(),
            hasher: ahash::RandomState::new(),
            free_head: NO_ID,
            len: 0,
            epoch: 0,
            node_bytes: 0,
        }
    }

    /// Live fields (expired ones not yet removed included).
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// Fields with an expiry time.
    pub fn ttl_len(&self) -> usize {
        self.expiry.len()
    }

    /// Ids in use are below this (positions for [`Table::at`]).
    pub fn slot_count(&self) -> usize {
        self.slots.len()
    }

    fn node(&self, id: u32) -> NodeRef<'_> {
        node_at(&self.slots, id)
    }

    fn node_ptr(&self, id: u32) -> NonNull<NodeHeader> {
        self.slots[id as usize]
            .node()
            .expect("hash table id of a vacant slot")
    }

    fn set_ttl_pos(&mut self, id: u32, pos: u32) {
        let ptr = self.node_ptr(id);
        // SAFETY: the node is live and `&mut self` makes the write unique.
        unsafe { (*ptr.as_ptr()).ttl_pos = pos }
    }

    /// The id of `field`.
    pub fn find(&self, field: &[u8]) -> Option<u32> {
        let hash = self.hasher.hash_one(field);
        self.index
            .find(hash, |&id| self.node(id).field() == field)
            .copied()
    }

    /// The entry with id `id`, if that slot is occupied.
    pub fn at(&self, id: usize) -> Option<TableEntry<'_>> {
        let slot = *self.slots.get(id)?;
        slot.node()?;
        Some(self.entry(id as u32))
    }

    fn entry(&self, id: u32) -> TableEntry<'_> {
        let n = self.node(id);
        let pos = n.header().ttl_pos;
        TableEntry {
            id,
            field: n.field(),
            value: n.value(),
            expire_at: (pos != NO_TTL).then(|| self.expiry[pos as usize].at()),
        }
    }

    /// The entry of `field`.
    pub fn get(&self, field: &[u8]) -> Option<TableEntry<'_>> {
        self.find(field).map(|id| self.entry(id))
    }

    /// Add a field known to be absent (no expiry); returns its id.
    pub fn insert(&mut self, field: &[u8], value: &[u8]) -> u32 {
        debug_assert!(self.find(field).is_none());
        let node = alloc_node(field, value);
        self.node_bytes += malloc_chunk_bytes(NODE_HEADER_BYTES + field.len() + value.len());
        let id = if self.free_head != NO_ID {
            let id = self.free_head;
            self.free_head = self.slots[id as usize].next_free();
            self.slots[id as usize] = Slot(node.as_ptr());
            id
        } else {
            assert!(self.slots.len() < TABLE_SLOTS_MAX, "hash table full");
            self.slots.push(Slot(node.as_ptr()));
            (self.slots.len() - 1) as u32
        };
        self.len += 1;
        let hash = self.hasher.hash_one(field);
        let Table {
            index,
            slots,
            hasher,
            ..
        } = self;
        index.insert_unique(hash, id, |&x| hasher.hash_one(node_at(slots, x).field()));
        undo::record_inverse(|arena| Inverse::HashRemove(Kept::of(arena, field)));
        id
    }

    /// Replace the value of `id` (its expiry stays).
    pub fn set_value(&mut self, id: u32, value: &[u8]) {
        if undo::inverses_wanted() {
            let node = self.node(id);
            undo::record_inverse(|arena| Inverse::HashValue {
                field: Kept::of(arena, node.field()),
                value: Kept::of(arena, node.value()),
            });
        }
        let ptr = self.node_ptr(id);
        let (flen, vlen) = {
            // SAFETY: the node is live.
            let h = unsafe { ptr.as_ref() };
            (h.field_len as usize, h.value_len as usize)
        };
        let ptr = if vlen == value.len() {
            ptr
        } else {
            self.node_bytes -= malloc_chunk_bytes(NODE_HEADER_BYTES + flen + vlen);
            self.node_bytes += malloc_chunk_bytes(NODE_HEADER_BYTES + flen + value.len());
            // SAFETY: the block was allocated with this layout; the new size is non-zero.
            let raw = unsafe {
                realloc(
                    ptr.as_ptr() as *mut u8,
                    node_layout(flen, vlen),
                    NODE_HEADER_BYTES + flen + value.len(),
                )
            } as *mut NodeHeader;
            let Some(moved) = NonNull::new(raw) else {
                handle_alloc_error(node_layout(flen, value.len()))
            };
            self.slots[id as usize] = Slot(moved.as_ptr());
            moved
        };
        // SAFETY: the block now holds header + field + value.len() bytes; the value
        // comes from outside the table (it is borrowed mutably).
        unsafe {
            (*ptr.as_ptr()).value_len = to_u32(value.len());
            let at = (ptr.as_ptr() as *mut u8).add(NODE_HEADER_BYTES + flen);
            std::ptr::copy_nonoverlapping(value.as_ptr(), at, value.len());
        }
    }

    /// Remove field `id`.
    pub fn remove(&mut self, id: u32) {
        self.unlink(id);
        self.maybe_compact();
    }

    /// Remove field `id` without compacting.
    fn unlink(&mut self, id: u32) {
        if undo::inverses_wanted() {
            let entry = self.entry(id);
            undo::record_inverse(|arena| Inverse::HashInsert {
                field: Kept::of(arena, entry.field),
                value: Kept::of(arena, entry.value),
                expire_at: entry.expire_at,
            });
        }
        let ptr = self.node_ptr(id);
        let node = self.node(id);
        let hash = self.hasher.hash_one(node.field());
        let pos = node.header().ttl_pos;
        let bytes = node.block_bytes();
        match self.index.find_entry(hash, |&x| x == id) {
            Ok(entry) => {
                entry.remove();
            }
            Err(_) => unreachable!("hash table id missing from its index"),
        }
        if pos != NO_TTL {
            self.heap_remove(pos as usize);
        }
        self.slots[id as usize] = Slot::vacant(self.free_head);
        self.free_head = id;
        self.len -= 1;
        self.node_bytes -= malloc_chunk_bytes(bytes);
        // SAFETY: the slot no longer refers to the node.
        unsafe { free_node(ptr) }
    }

    /// Set or replace the expiry time of `id`.
    pub fn set_expire(&mut self, id: u32, at: u64) {
        self.record_old_expiry(id);
        let pos = self.node(id).header().ttl_pos;
        if pos == NO_TTL {
            let pos = self.expiry.len();
            self.expiry.push(TtlItem::new(at, id));
            self.set_ttl_pos(id, pos as u32);
            self.sift_up(pos);
        } else {
            let pos = pos as usize;
            self.expiry[pos] = TtlItem::new(at, id);
            let pos = self.sift_up(pos);
            self.sift_down(pos);
        }
    }

    /// Remove the expiry of `id`; true if it had one.
    pub fn persist(&mut self, id: u32) -> bool {
        let pos = self.node(id).header().ttl_pos;
        if pos == NO_TTL {
            return false;
        }
        self.record_old_expiry(id);
        self.heap_remove(pos as usize);
        self.set_ttl_pos(id, NO_TTL);
        true
    }

    /// For the undo journal (when a big hash is open): the expiry field `id` has
    /// before a change of it. Recorded first: putting back an unchanged expiry
    /// changes nothing.
    fn record_old_expiry(&self, id: u32) {
        if undo::inverses_wanted() {
            let entry = self.entry(id);
            undo::record_inverse(|arena| Inverse::HashExpire {
                field: Kept::of(arena, entry.field),
                expire_at: entry.expire_at,
            });
        }
    }

    /// Reverse one change (the undo journal's roll-back). Each inverse puts back
    /// what it names whether or not the change it reverses went through, so one
    /// recorded before its change is safe.
    pub(crate) fn reverse(&mut self, inverse: Inverse, arena: &[u8]) {
        let found = |t: &Table, field: Kept| t.find(field.get(arena));
        match inverse {
            Inverse::HashRemove(field) => {
                if let Some(id) = found(self, field) {
                    self.remove(id);
                }
            }
            Inverse::HashInsert {
                field,
                value,
                expire_at,
            } => {
                let id = match found(self, field) {
                    Some(id) => {
                        self.set_value(id, value.get(arena));
                        id
                    }
                    None => self.insert(field.get(arena), value.get(arena)),
                };
                self.put_expiry(id, expire_at);
            }
            Inverse::HashValue { field, value } => {
                if let Some(id) = found(self, field) {
                    self.set_value(id, value.get(arena));
                }
            }
            Inverse::HashExpire { field, expire_at } => {
                if let Some(id) = found(self, field) {
                    self.put_expiry(id, expire_at);
                }
            }
            other => unreachable!("{other:?} recorded for a hash"),
        }
    }

    fn put_expiry(&mut self, id: u32, expire_at: Option<u64>) {
        match expire_at {
            Some(at) => self.set_expire(id, at),
            None => drop(self.persist(id)),
        }
    }

    /// The earliest expiry time, expired or not.
    pub fn next_expire_at(&self) -> Option<u64> {
        self.expiry.first().map(TtlItem::at)
    }

    /// Remove up to `budget` fields with `now_ms > expire_at`, earliest first.
    pub fn remove_expired(&mut self, now_ms: u64, budget: usize) -> usize {
        let mut removed = 0;
        while removed < budget {
            match self.expiry.first() {
                Some(top) if now_ms > top.at() => {
                    let id = top.id;
                    self.unlink(id);
                    removed += 1;
                }
                _ => break,
            }
        }
        if removed > 0 {
            self.maybe_compact();
        }
        removed
    }

    fn heap_swap(&mut self, a: usize, b: usize) {
        self.expiry.swap(a, b);
        let (ia, ib) = (self.expiry[a].id, self.expiry[b].id);
        self.set_ttl_pos(ia, a as u32);
        self.set_ttl_pos(ib, b as u32);
    }

    /// Move the item at `pos` up while it is earlier than its parent; returns where
    /// it ended.
    fn sift_up(&mut self, mut pos: usize) -> usize {
        while pos > 0 {
            let parent = (pos - 1) / 2;
            if self.expiry[pos].at() >= self.expiry[parent].at() {
                break;
            }
            self.heap_swap(pos, parent);
            pos = parent;
        }
        pos
    }

    fn sift_down(&mut self, mut pos: usize) {
        let n = self.expiry.len();
        loop {
            let (l, r) = (2 * pos + 1, 2 * pos + 2);
            let mut min = pos;
            if l < n && self.expiry[l].at() < self.expiry[min].at() {
                min = l;
            }
            if r < n && self.expiry[r].at() < self.expiry[min].at() {
                min = r;
            }
            if min == pos {
                return;
            }
            self.heap_swap(pos, min);
            pos = min;
        }
    }

    /// Take the item at `pos` out of the heap (the node's `ttl_pos` is the caller's).
    fn heap_remove(&mut self, pos: usize) {
        let last = self.expiry.len() - 1;
        if pos != last {
            self.heap_swap(pos, last);
        }
        self.expiry.pop();
        if pos < self.expiry.len() {
            let pos = self.sift_up(pos);
            self.sift_down(pos);
        }
    }

    fn maybe_compact(&mut self) {
        if self.slots.len() >= COMPACT_SLOTS_MIN
            && self.len() * COMPACT_SPARSENESS < self.slots.len()
        {
            self.compact();
        }
    }

    /// Renumber the live fields densely (order kept), rebuild the index, shrink the
    /// containers and start a new cursor epoch.
    fn compact(&mut self) {
        let mut slots = Vec::with_capacity(self.len());
        for slot in std::mem::take(&mut self.slots) {
            if let Some(ptr) = slot.node() {
                let id = slots.len() as u32;
                slots.push(slot);
                // SAFETY: the node is live.
                let pos = unsafe { ptr.as_ref().ttl_pos };
                if pos != NO_TTL {
                    self.expiry[pos as usize].id = id;
                }
            }
        }
        self.slots = slots;
        self.free_head = NO_ID;
        self.expiry.shrink_to_fit();
        let mut index = HashTable::with_capacity(self.len());
        for id in 0..self.slots.len() as u32 {
            let hash = self.hasher.hash_one(self.node(id).field());
            let slots = &self.slots;
            let hasher = &self.hasher;
            index.insert_unique(hash, id, |&x| hasher.hash_one(node_at(slots, x).field()));
        }
        self.index = index;
        self.epoch = self.epoch.wrapping_add(1);
    }

    /// Every live entry in slot order, expired ones included.
    pub fn iter(&self) -> TableIter<'_> {
        TableIter { table: self, id: 0 }
    }

    /// One HSCAN step from `cursor`: calls `f` for the fields of the slots examined
    /// (expired ones included: the caller filters), stopping after `count` fields or
    /// `count * SCAN_SLOTS_PER_COUNT` slots; returns the next cursor, 0 at the end.
    pub fn scan<'a>(
        &'a self,
        cursor: u64,
        count: usize,
        mut f: impl FnMut(TableEntry<'a>) -> bool,
    ) -> u64 {
        let epoch = (cursor >> 32) as u32;
        let mut id = if cursor != 0 && epoch == self.epoch {
            (cursor & u64::from(u32::MAX)) as usize
        } else {
            0
        };
        let count = count.max(1);
        let mut slots_budget = count.saturating_mul(SCAN_SLOTS_PER_COUNT);
        let mut emitted = 0;
        while id < self.slots.len() && emitted < count && slots_budget > 0 {
            if self.slots[id].node().is_some() && f(self.entry(id as u32)) {
                emitted += 1;
            }
            id += 1;
            slots_budget -= 1;
        }
        if id >= self.slots.len() {
            0
        } else {
            (u64::from(self.epoch) << 32) | id as u64
        }
    }

    /// Heap bytes: the table itself (boxed), the containers and the nodes, each as
    /// glibc chunks. O(1).
    pub fn heap_bytes(&self) -> usize {
        malloc_chunk_bytes(std::mem::size_of::<Table>())
            + container_chunk(self.index.allocation_size())
            + container_chunk(self.slots.capacity() * std::mem::size_of::<Slot>())
            + container_chunk(self.expiry.capacity() * std::mem::size_of::<TtlItem>())
            + self.node_bytes
    }

    /// [`Table::heap_bytes`] recomputed by walking every node (tests).
    #[cfg(test)]
    pub fn heap_bytes_recomputed(&self) -> usize {
        let nodes: usize = self
            .slots
            .iter()
            .filter_map(|s| s.node())
            .map(|p| {
                malloc_chunk_bytes(
                    NodeRef {
                        ptr: p,
                        _table: std::marker::PhantomData,
                    }
                    .block_bytes(),
                )
            })
            .sum();
        self.heap_bytes() - self.node_bytes + nodes
    }

    /// Check every invariant (tests).
    #[cfg(test)]
    pub fn check(&self) {
        let live = self.slots.iter().filter(|s| s.node().is_some()).count();
        assert_eq!(live, self.len());
        assert_eq!(self.index.len(), self.len());
        let mut free = 0;
        let mut at = self.free_head;
        while at != NO_ID {
            assert!(self.slots[at as usize].node().is_none());
            at = self.slots[at as usize].next_free();
            free += 1;
        }
        assert_eq!(free + live, self.slots.len());
        for e in self.iter() {
            assert_eq!(self.find(e.field), Some(e.id));
        }
        for (pos, item) in self.expiry.iter().enumerate() {
            assert_eq!(self.node(item.id).header().ttl_pos, pos as u32);
            if pos > 0 {
                assert!(self.expiry[(pos - 1) / 2].at() <= item.at());
            }
        }
        let with_ttl = self.iter().filter(|e| e.expire_at.is_some()).count();
        assert_eq!(with_ttl, self.expiry.len());
        assert_eq!(self.heap_bytes(), self.heap_bytes_recomputed());
    }

    /// An independent copy with the same ids, order and expiry times.
    pub fn deep_clone(&self) -> Table {
        let slots = self
            .slots
            .iter()
            .map(|&s| match s.node() {
                Some(p) => {
                    let n = NodeRef {
                        ptr: p,
                        _table: std::marker::PhantomData,
                    };
                    let copy = alloc_node(n.field(), n.value());
                    // SAFETY: fresh node we own.
                    unsafe { (*copy.as_ptr()).ttl_pos = n.header().ttl_pos };
                    Slot(copy.as_ptr())
                }
                None => s,
            })
            .collect();
        Table {
            index: self.index.clone(),
            slots,
            expiry: self.expiry.clone(),
            hasher: self.hasher.clone(),
            free_head: self.free_head,
            len: self.len,
            epoch: self.epoch,
            node_bytes: self.node_bytes,
        }
    }

    /// Free up to `budget` nodes from the end of the slab (lazy freeing of a deleted
    /// big hash), forgetting the index and the expiry heap on the first call (O(1):
    /// they hold plain integers). Only for a table being destroyed: afterwards
    /// nothing but further calls, [`Table::heap_bytes`] and drop may touch it.
    /// Returns true when no node is left.
    pub fn free_some(&mut self, budget: usize) -> bool {
        if !self.index.is_empty() || self.expiry.capacity() > 0 {
            self.index = HashTable::new();
            self.expiry = Vec::new();
            self.free_head = NO_ID;
        }
        for _ in 0..budget {
            let Some(slot) = self.slots.pop() else { break };
            if let Some(ptr) = slot.node() {
                let bytes = NodeRef {
                    ptr,
                    _table: std::marker::PhantomData,
                }
                .block_bytes();
                self.node_bytes -= malloc_chunk_bytes(bytes);
                self.len -= 1;
                // SAFETY: popped: nothing refers to the node any more.
                unsafe { free_node(ptr) }
            }
        }
        if self.slots.is_empty() {
            self.slots = Vec::new();
        }
        self.slots.is_empty()
    }
}

/// Iterator of [`Table::iter`].
pub struct TableIter<'a> {
    table: &'a Table,
    id: usize,
}

impl<'a> Iterator for TableIter<'a> {
    type Item = TableEntry<'a>;

    fn next(&mut self) -> Option<TableEntry<'a>> {
        while self.id < self.table.slots.len() {
            let id = self.id;
            self.id += 1;
            if self.table.slots[id].node().is_some() {
                return Some(self.table.entry(id as u32));
            }
        }
        None
    }
}

fn node_at(slots: &[Slot], id: u32) -> NodeRef<'_> {
    let ptr = slots[id as usize]
        .node()
        .expect("hash table id of a vacant slot");
    NodeRef {
        ptr,
        _table: std::marker::PhantomData,
    }
}

impl Drop for Table {
    fn drop(&mut self) {
        for slot in self.slots.drain(..) {
            if let Some(ptr) = slot.node() {
                // SAFETY: drained: nothing refers to the node any more.
                unsafe { free_node(ptr) }
            }
        }
    }
}

impl std::fmt::Debug for Table {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insert_find_remove_and_reuse_ids() {
        let mut t = Table::with_capacity(0);
        for i in 0..100u32 {
            let f = format!("field:{i}");
            assert_eq!(t.insert(f.as_bytes(), b"v"), i);
        }
        t.check();
        t.remove(t.find(b"field:7").unwrap());
        t.remove(t.find(b"field:9").unwrap());
        assert_eq!(t.insert(b"new", b"x"), 9, "LIFO reuse");
        t.set_value(t.find(b"new").unwrap(), &[b'y'; 500]);
        assert_eq!(t.get(b"new").unwrap().value, &[b'y'; 500][..]);
        t.check();
        assert_eq!(t.len(), 99);
    }

    #[test]
    fn expiry_heap_orders_and_removes() {
        let mut t = Table::with_capacity(0);
        for i in 0..50u64 {
            let id = t.insert(format!("f{i}").as_bytes(), b"v");
            t.set_expire(id, 1000 - i * 7 % 13);
        }
        t.check();
        let id = t.find(b"f3").unwrap();
        t.set_expire(id, 5);
        assert_eq!(t.next_expire_at(), Some(5));
        assert!(t.persist(id));
        assert!(!t.persist(id));
        t.check();
        let removed = t.remove_expired(995, 3);
        assert_eq!(removed, 3);
        t.check();
        let removed = t.remove_expired(u64::MAX, usize::MAX);
        assert_eq!(removed, 46);
        assert_eq!(t.len(), 1);
        assert_eq!(t.next_expire_at(), None);
        t.check();
    }

    #[test]
    fn compaction_restarts_old_cursors_and_keeps_order() {
        let mut t = Table::with_capacity(0);
        for i in 0..200u32 {
            t.insert(format!("f{i}").as_bytes(), b"v");
        }
        let mut seen = Vec::new();
        let cursor = t.scan(0, 10, |e| {
            seen.push(e.field.to_vec());
            true
        });
        assert_eq!(cursor, 10);
        for i in 0..190u32 {
            t.remove(t.find(format!("f{i}").as_bytes()).unwrap());
        }
        t.check();
        assert!(t.slot_count() < 200, "compacted");
        let mut rest = Vec::new();
        let mut c = cursor;
        loop {
            c = t.scan(c, 3, |e| {
                rest.push(e.field.to_vec());
                true
            });
            if c == 0 {
                break;
            }
        }
        let expect: Vec<Vec<u8>> = (190..200).map(|i| format!("f{i}").into_bytes()).collect();
        assert_eq!(rest, expect, "old epoch restarts at 0, order kept");
    }

    #[test]
    fn free_some_is_bounded() {
        let mut t = Table::with_capacity(0);
        for i in 0..1000u32 {
            t.insert(format!("f{i}").as_bytes(), b"v");
        }
        let mut calls = 0;
        while !t.free_some(100) {
            calls += 1;
        }
        assert_eq!(calls, 9);
    }
}
