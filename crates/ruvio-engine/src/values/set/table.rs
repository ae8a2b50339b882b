//! `Table`: a big set (OBJECT ENCODING `hashtable`): the members in a dense
//! vector plus a hash index of their positions.
//!
//! Why not a plain hash set: SPOP and SRANDMEMBER need a uniformly random member
//! in O(1), which a dense vector gives by index (Redis's dict walks random
//! buckets instead), and removal is a swap with the last member. SSCAN walks the
//! vector from the end down: a removal only moves the *last* member into the
//! hole, which the walk has already passed, and additions go to the end it has
//! also passed, so every member present for the whole scan is returned, as
//! Redis's reverse-binary cursor guarantees.
//!
//! Heap bytes are kept as a running total of the member chunks, so
//! [`heap_bytes`](Table::heap_bytes) is O(1).

use hashbrown::HashTable;

use super::member::Member;
use crate::memsize::malloc_chunk_bytes;
use crate::undo::{self, Inverse, Kept};

/// The members (see the module docs).
pub struct Table {
    members: Vec<Member>,
    index: HashTable<u32>,
    hasher: ahash::RandomState,
    /// Sum of the glibc chunks of the members' boxes.
    member_chunk_bytes: usize,
}

/// Most members a table holds: positions are `u32` to keep the index small.
pub const TABLE_LEN_MAX: usize = u32::MAX as usize;

fn chunk_of(member: &Member) -> usize {
    malloc_chunk_bytes(member.block_bytes())
}

impl Table {
    /// An empty table with room for `hint` members (capped, so a client's count
    /// never sizes an allocation on its own).
    pub fn with_capacity(hint: usize) -> Table {
        /// Most members reserved up front from a hint.
        const RESERVE_MAX: usize = 1 << 16;
        let hint = hint.min(RESERVE_MAX);
        Table {
            members: Vec::with_capacity(hint),
            index: HashTable::with_capacity(hint),
            hasher: ahash::RandomState::new(),
            member_chunk_bytes: 0,
        }
    }

    /// Number of members.
    pub fn len(&self) -> usize {
        self.members.len()
    }

    /// True without members.
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    fn find(&self, member: &[u8]) -> Option<usize> {
        let hash = self.hasher.hash_one(member);
        self.index
            .find(hash, |&i| &*self.members[i as usize] == member)
            .map(|&i| i as usize)
    }

    /// True when `member` is in the set.
    pub fn contains(&self, member: &[u8]) -> bool {
        self.find(member).is_some()
    }

    /// Add `member`; false when already there or the table is full.
    pub fn insert(&mut self, member: &[u8]) -> bool {
        if self.members.len() >= TABLE_LEN_MAX || self.contains(member) {
            return false;
        }
        let hash = self.hasher.hash_one(member);
        let at = self.members.len() as u32;
        let (members, hasher) = (&self.members, &self.hasher);
        self.index
            .insert_unique(hash, at, |&i| hasher.hash_one(&*members[i as usize]));
        undo::record_inverse(|arena| Inverse::SetRemove(Kept::of(arena, member)));
        let member = Member::new(member);
        self.member_chunk_bytes += chunk_of(&member);
        self.members.push(member);
        true
    }

    /// Remove `member`; false when absent.
    pub fn remove(&mut self, member: &[u8]) -> bool {
        match self.find(member) {
            Some(at) => {
                self.remove_at(at);
                true
            }
            None => false,
        }
    }

    /// Remove the member at position `at` (the last one takes its place) and
    /// return it.
    pub fn remove_at(&mut self, at: usize) -> Member {
        if undo::inverses_wanted() {
            let member = &*self.members[at];
            undo::record_inverse(|arena| Inverse::SetInsert {
                member: Kept::of(arena, member),
                at: at as u32,
            });
        }
        let hash = self.hasher.hash_one(&*self.members[at]);
        if let Ok(slot) = self.index.find_entry(hash, |&i| i as usize == at) {
            slot.remove();
        }
        let last = self.members.len() - 1;
        if at != last {
            let hash = self.hasher.hash_one(&*self.members[last]);
            if let Some(i) = self.index.find_mut(hash, |&i| i as usize == last) {
                *i = at as u32;
            }
        }
        let gone = self.members.swap_remove(at);
        self.member_chunk_bytes -= chunk_of(&gone);
        gone
    }

    /// Reverse one change (the undo journal's roll-back); safe whether or not
    /// the change went through (each is recorded just before it).
    pub(crate) fn reverse(&mut self, inverse: Inverse, arena: &[u8]) {
        match inverse {
            Inverse::SetRemove(member) => drop(self.remove(member.get(arena))),
            Inverse::SetInsert { member, at } => self.put_back(member.get(arena), at as usize),
            other => unreachable!("{other:?} recorded for a set"),
        }
    }

    /// Put back `member`, removed from position `at` (whose place the last member
    /// took): it goes back there and that member back to the end, so positions,
    /// and SSCAN's and SMEMBERS' order, are as before the removal.
    fn put_back(&mut self, member: &[u8], at: usize) {
        if !self.insert(member) {
            return;
        }
        let last = self.members.len() - 1;
        if at >= last {
            return;
        }
        const MOVING: u32 = u32::MAX;
        let hash_at = self.hasher.hash_one(&*self.members[at]);
        let hash_last = self.hasher.hash_one(&*self.members[last]);
        let mut renumber = |hash: u64, from: u32, to: u32| {
            if let Some(i) = self.index.find_mut(hash, |&i| i == from) {
                *i = to;
            }
        };
        renumber(hash_at, at as u32, MOVING);
        renumber(hash_last, last as u32, at as u32);
        renumber(hash_at, MOVING, last as u32);
        self.members.swap(at, last);
    }

    /// Member at position `at` (positions are dense: `0..len`).
    pub fn get(&self, at: usize) -> Option<&[u8]> {
        self.members.get(at).map(|m| &**m)
    }

    /// Members in position order.
    pub fn iter(&self) -> impl Iterator<Item = &[u8]> + '_ {
        self.members.iter().map(|m| &**m)
    }

    /// Heap bytes owned (this struct's box included), O(1).
    pub fn heap_bytes(&self) -> usize {
        let vec = self.members.capacity() * std::mem::size_of::<Member>();
        malloc_chunk_bytes(std::mem::size_of::<Table>())
            + if vec == 0 { 0 } else { malloc_chunk_bytes(vec) }
            + self.index.allocation_size()
            + self.member_chunk_bytes
    }

    /// An independent copy.
    pub fn deep_clone(&self) -> Table {
        let mut copy = Table::with_capacity(self.len());
        for m in self.iter() {
            copy.insert(m);
        }
        copy
    }

    /// Free up to `max` members from the end (lazy freeing of a huge set); true
    /// when none are left. The index goes at once (one allocation): the set is
    /// being dropped, nothing looks members up any more.
    pub fn free_some(&mut self, max: usize) -> bool {
        self.index = HashTable::new();
        let keep = self.members.len().saturating_sub(max);
        for gone in self.members.drain(keep..) {
            self.member_chunk_bytes -= chunk_of(&gone);
        }
        self.members.is_empty()
    }
}
