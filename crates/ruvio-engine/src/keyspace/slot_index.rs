//! A database's keys by hash slot, for the cluster's resharding commands:
//! CLUSTER COUNTKEYSINSLOT, GETKEYSINSLOT, and SETSLOT's check that a slot it
//! gives away is empty.
//!
//! Why: `redis-cli --cluster reshard` asks GETKEYSINSLOT for ten keys at a time
//! and four SETSLOTs per slot, so moving the 4,096 slots of a million keys asks
//! about 110,000 times. A walk of the whole database per question (what these
//! commands did before) is O(keys) each: 20-50 ms at a million keys, hours for the
//! reshard. Here each question is O(1) plus the keys it returns.
//!
//! Why built on the first question rather than always: only a cluster node that
//! reshards asks, so a database that never does pays nothing on its write path
//! and no memory. Built by one walk when first asked, the index is then kept by
//! every insertion and removal of an entry ([`super::Db::link`] and
//! [`super::Db::unlink`]: one CRC16 of the key and a push, or a swap-remove),
//! and dropped with the database (a flush or a load starts without one). It
//! costs about 8 bytes per key (the id in its slot's list and its position there);
//! Redis in cluster mode keeps its slot lists always, at 16 bytes per key.

use super::EntryId;
use crate::slot::{key_slot, SLOT_COUNT};

/// Keys by slot: the ids of each slot's entries, and each entry's place in its
/// slot's list (so a removal is a swap-remove, not a search).
pub(super) struct SlotIndex {
    by_slot: Box<[Vec<EntryId>]>,
    /// Indexed by entry id: where the entry sits in its slot's list.
    position: Vec<u32>,
}

impl SlotIndex {
    /// The index of `entries` (id, key), as one walk of the database gives them.
    pub(super) fn build<'a>(entries: impl Iterator<Item = (EntryId, &'a [u8])>) -> SlotIndex {
        let mut index = SlotIndex {
            by_slot: vec![Vec::new(); usize::from(SLOT_COUNT)].into_boxed_slice(),
            position: Vec::new(),
        };
        for (id, key) in entries {
            index.add(id, key);
        }
        index
    }

    /// Entry `id`, whose key is `key`, was put in.
    pub(super) fn add(&mut self, id: EntryId, key: &[u8]) {
        let list = &mut self.by_slot[usize::from(key_slot(key))];
        let at = id as usize;
        if self.position.len() <= at {
            self.position.resize(at + 1, 0);
        }
        self.position[at] = list.len() as u32;
        list.push(id);
    }

    /// Entry `id`, whose key is `key`, is taken out.
    pub(super) fn remove(&mut self, id: EntryId, key: &[u8]) {
        let list = &mut self.by_slot[usize::from(key_slot(key))];
        let at = self.position[id as usize] as usize;
        debug_assert_eq!(list.get(at), Some(&id), "slot index out of step");
        list.swap_remove(at);
        if let Some(&moved) = list.get(at) {
            self.position[moved as usize] = at as u32;
        }
    }

    /// The ids of `slot`'s entries.
    pub(super) fn ids(&self, slot: u16) -> &[EntryId] {
        &self.by_slot[usize::from(slot) % self.by_slot.len()]
    }

    /// Heap bytes the index holds.
    pub(super) fn allocated_bytes(&self) -> usize {
        let lists: usize = self.by_slot.iter().map(|l| l.capacity()).sum();
        (lists + self.position.capacity()) * std::mem::size_of::<u32>()
            + self.by_slot.len() * std::mem::size_of::<Vec<EntryId>>()
    }
}
