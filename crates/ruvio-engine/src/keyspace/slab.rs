//! `Slab`: the entries of one database in fixed-size chunks, addressed by a `u32`
//! slot id that never changes while the key lives.
//!
//! Why a slab rather than entries inside the hash table:
//! - the hash index then holds 4-byte ids, so its empty buckets (hash tables run at
//!   44-88% load) cost 5 bytes each instead of 49;
//! - an entry never moves, so SCAN's cursor is simply a slot id: a key present for
//!   the whole scan is returned exactly once, whatever the index does meanwhile;
//! - chunks are allocated one at a time, so growth never copies the entries.
//!
//! Freed slots form a LIFO free list threaded through the vacant entries. One bit per
//! slot marks entries with a TTL, so active expiry walks only those; a second bitmap
//! marks hashes with field expiry times, for active field expiry.

use super::entry::{Entry, ENTRY_BYTES};

/// Slots per chunk: 48 KiB chunks, big enough to amortise the allocation, small
/// enough that an almost empty database stays small.
pub const CHUNK_SLOTS: usize = 1024;
const CHUNK_SHIFT: u32 = CHUNK_SLOTS.trailing_zeros();
const _: () = assert!(CHUNK_SLOTS.is_power_of_two() && CHUNK_SLOTS.is_multiple_of(64));

/// Slot ids are u32; this one means "none".
pub const NO_SLOT: u32 = u32::MAX;
/// Largest number of slots (ids stay below `NO_SLOT`).
pub const SLOTS_MAX: usize = (u32::MAX - 1) as usize;

/// Answer of [`Slab::next_with_ttl`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TtlScan {
    /// This slot has a TTL.
    Found(u32),
    /// No slot with a TTL up to the end of the slab.
    End,
    /// The word budget ran out; continue from this slot.
    Budget(u32),
}

/// Chunked storage of entries.
#[derive(Default)]
pub struct Slab {
    chunks: Vec<Box<[Entry]>>,
    /// One bit per slot: the entry has a TTL.
    ttl_bits: Vec<u64>,
    /// One bit per slot: the entry is a hash with field expiry times.
    field_ttl_bits: Vec<u64>,
    free_head: Option<u32>,
    live: usize,
    /// Slots handed out so far; ids `>= high` were never used.
    high: u32,
}

impl Slab {
    /// Number of live entries.
    pub fn len(&self) -> usize {
        self.live
    }

    /// Slot ids in use are below this.
    pub fn high(&self) -> u32 {
        self.high
    }

    /// Bytes of the chunks and the TTL bitmap.
    /// Bytes of the bitmap that marks the ids with a TTL.
    pub fn ttl_bitmap_bytes(&self) -> usize {
        self.ttl_bits.len() * 8
    }

    pub fn allocated_bytes(&self) -> usize {
        self.chunks.len() * CHUNK_SLOTS * ENTRY_BYTES
            + (self.ttl_bits.len() + self.field_ttl_bits.len()) * 8
            + self.chunks.capacity() * std::mem::size_of::<Box<[Entry]>>()
    }

    /// Store `entry`; returns its slot id.
    pub fn insert(&mut self, entry: Entry) -> u32 {
        debug_assert!(!entry.is_vacant());
        let id = match self.free_head {
            Some(id) => {
                let next = self.get(id).next_free();
                self.free_head = (next != NO_SLOT).then_some(next);
                id
            }
            None => self.fresh_slot(),
        };
        *self.get_mut(id) = entry;
        self.live += 1;
        id
    }

    /// Store `entry` in slot `id`, which must be vacant (taken off the free list:
    /// a walk of it, for the undo journal's rare roll-backs only).
    pub fn insert_at(&mut self, id: u32, entry: Entry) -> u32 {
        debug_assert!(!entry.is_vacant() && self.get(id).is_vacant());
        let next = self.get(id).next_free();
        let next = (next != NO_SLOT).then_some(next);
        if self.free_head == Some(id) {
            self.free_head = next;
        } else {
            let mut at = self.free_head;
            while let Some(slot) = at {
                let after = self.get(slot).next_free();
                if after == id {
                    *self.get_mut(slot) = Entry::vacant(next.unwrap_or(NO_SLOT));
                    break;
                }
                at = (after != NO_SLOT).then_some(after);
            }
        }
        *self.get_mut(id) = entry;
        self.live += 1;
        id
    }

    fn fresh_slot(&mut self) -> u32 {
        assert!((self.high as usize) < SLOTS_MAX, "slab full");
        if self.high as usize == self.chunks.len() * CHUNK_SLOTS {
            let chunk: Box<[Entry]> = (0..CHUNK_SLOTS).map(|_| Entry::vacant(NO_SLOT)).collect();
            self.chunks.push(chunk);
            self.ttl_bits
                .extend(std::iter::repeat_n(0, CHUNK_SLOTS / 64));
            self.field_ttl_bits
                .extend(std::iter::repeat_n(0, CHUNK_SLOTS / 64));
        }
        self.high += 1;
        self.high - 1
    }

    /// Remove and return the entry in slot `id`.
    pub fn remove(&mut self, id: u32) -> Entry {
        let next = self.free_head.unwrap_or(NO_SLOT);
        let old = std::mem::replace(self.get_mut(id), Entry::vacant(next));
        debug_assert!(!old.is_vacant());
        self.set_ttl_bit(id, false);
        self.set_field_ttl_bit(id, false);
        self.free_head = Some(id);
        self.live -= 1;
        old
    }

    /// The entry (or vacant slot) `id`; `id < high()`.
    pub fn get(&self, id: u32) -> &Entry {
        &self.chunks[(id >> CHUNK_SHIFT) as usize][id as usize & (CHUNK_SLOTS - 1)]
    }

    /// Mutable access to slot `id`.
    pub fn get_mut(&mut self, id: u32) -> &mut Entry {
        &mut self.chunks[(id >> CHUNK_SHIFT) as usize][id as usize & (CHUNK_SLOTS - 1)]
    }

    /// Mark or unmark slot `id` as having a TTL.
    pub fn set_ttl_bit(&mut self, id: u32, on: bool) {
        set_bit(&mut self.ttl_bits, id, on);
    }

    /// Mark or unmark slot `id` as a hash with field expiry times.
    pub fn set_field_ttl_bit(&mut self, id: u32, on: bool) {
        set_bit(&mut self.field_ttl_bits, id, on);
    }

    /// The first slot `>= from` with a TTL, reading at most `words_budget` bitmap
    /// words (the budget is decremented by the words read).
    pub fn next_with_ttl(&self, from: u32, words_budget: &mut usize) -> TtlScan {
        next_set_bit(&self.ttl_bits, from, words_budget)
    }

    /// The first slot `>= from` holding a hash with field expiry times, as
    /// [`Slab::next_with_ttl`].
    pub fn next_with_field_ttl(&self, from: u32, words_budget: &mut usize) -> TtlScan {
        next_set_bit(&self.field_ttl_bits, from, words_budget)
    }

    /// Give up the chunks (for freeing them a few at a time).
    pub fn into_chunks(self) -> Vec<Box<[Entry]>> {
        self.chunks
    }
}

fn set_bit(bits: &mut [u64], id: u32, on: bool) {
    let (word, bit) = (id as usize / 64, id % 64);
    if on {
        bits[word] |= 1 << bit;
    } else {
        bits[word] &= !(1 << bit);
    }
}

/// The first set bit `>= from` in `bits`, reading at most `words_budget` words.
fn next_set_bit(bits: &[u64], from: u32, words_budget: &mut usize) -> TtlScan {
    let mut word = from as usize / 64;
    let mut mask = u64::MAX << (from % 64);
    while *words_budget > 0 {
        let Some(&set) = bits.get(word) else {
            return TtlScan::End;
        };
        *words_budget -= 1;
        let set = set & mask;
        if set != 0 {
            return TtlScan::Found((word * 64) as u32 + set.trailing_zeros());
        }
        word += 1;
        mask = u64::MAX;
    }
    if word >= bits.len() {
        TtlScan::End
    } else {
        TtlScan::Budget((word * 64) as u32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keyspace::entry::NewValue;

    fn entry(n: u32) -> Entry {
        Entry::new(&n.to_le_bytes(), NewValue::Int(n as i64), 0)
    }

    #[test]
    fn slots_are_reused_lifo_and_never_move() {
        let mut slab = Slab::default();
        let ids: Vec<u32> = (0..3000).map(|n| slab.insert(entry(n))).collect();
        assert_eq!(ids[2999], 2999);
        assert_eq!(slab.len(), 3000);
        slab.remove(10);
        slab.remove(20);
        assert_eq!(slab.insert(entry(1)), 20);
        assert_eq!(slab.insert(entry(2)), 10);
        assert_eq!(slab.insert(entry(3)), 3000);
        assert_eq!(slab.get(5).key(), &5u32.to_le_bytes());
    }

    #[test]
    fn ttl_bits_are_found_in_order() {
        let mut slab = Slab::default();
        for n in 0..2048 {
            slab.insert(entry(n));
        }
        slab.set_ttl_bit(5, true);
        slab.set_ttl_bit(1500, true);
        let scan = |from, words: usize| slab.next_with_ttl(from, &mut { words });
        assert_eq!(scan(0, 100), TtlScan::Found(5));
        assert_eq!(scan(6, 100), TtlScan::Found(1500));
        assert_eq!(scan(6, 2), TtlScan::Budget(128));
        assert_eq!(scan(1501, 100), TtlScan::End);
        slab.remove(1500);
        assert_eq!(slab.next_with_ttl(6, &mut 100), TtlScan::End);
    }
}
