//! Consumer groups: the state Redis keeps per group (`streamCG`) inside the
//! stream value, and the operations the group commands are made of.
//!
//! Why this shape: a group is its last-delivered ID, its entries-read counter, a
//! pending-entries list (PEL) and its consumers, each with its own PEL. Redis keeps
//! both PELs as radix trees sharing one NACK per entry; here the group's PEL owns
//! the NACK (`BTreeMap<StreamId, Nack>`) and names its consumer, and each consumer
//! keeps the set of its IDs, so "this consumer's pending entries" and "the group's"
//! are both ordered walks. Names are `Arc<[u8]>`: a NACK shares its consumer's name
//! instead of copying it (and a value stays `Send`, as values may move to the shard
//! that borrows them).
//!
//! Memory accounting stays O(1) (the contracts ask it of `heap_bytes`): every
//! change goes through [`Groups`], which keeps a running estimate of its bytes.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use super::id::StreamId;

/// Redis's `SCG_INVALID_ENTRIES_READ`: the group's entries-read is unknown.
pub const ENTRIES_READ_UNKNOWN: i64 = -1;

/// Estimated bytes of one group besides its name (the map slot, the struct, two
/// empty trees).
const GROUP_BYTES: usize = 160;
/// Estimated bytes of one consumer besides its name (map slot, `Arc` header, PEL
/// set).
const CONSUMER_BYTES: usize = 112;
/// Estimated bytes of one pending entry: its slot in the group's PEL (ID, NACK,
/// tree share) and in its consumer's set. Measured: 100,000 entries made pending
/// by XREADGROUP grow a fresh server's RSS by 136 bytes each (Redis 7.0's
/// `used_memory` by 148).
const NACK_BYTES: usize = 136;

/// One pending entry (`streamNACK`).
#[derive(Clone, Debug)]
pub struct Nack {
    /// Unix ms of the last delivery.
    pub delivery_ms: i64,
    /// Times delivered.
    pub delivery_count: u64,
    /// The consumer that owns it.
    pub consumer: Arc<[u8]>,
}

/// One consumer (`streamConsumer`).
#[derive(Clone, Debug, Default)]
pub struct Consumer {
    /// Unix ms of the last time a command named it (Redis 7.0's `seen-time`).
    pub seen_ms: i64,
    /// Its pending IDs.
    pub pel: BTreeSet<StreamId>,
}

/// One consumer group (`streamCG`).
#[derive(Clone, Debug, Default)]
pub struct Group {
    /// The last ID delivered to the group.
    pub last_id: StreamId,
    /// Entries the group has read, or [`ENTRIES_READ_UNKNOWN`].
    pub entries_read: i64,
    /// Every pending entry, with its owner.
    pub pel: BTreeMap<StreamId, Nack>,
    /// The consumers, by name (Redis's rax order: bytewise).
    pub consumers: BTreeMap<Arc<[u8]>, Consumer>,
}

impl Group {
    /// The consumer named `name`.
    pub fn consumer(&self, name: &[u8]) -> Option<&Consumer> {
        self.consumers.get(name)
    }
}

/// A stream's groups and their estimated size.
#[derive(Clone, Debug, Default)]
pub struct Groups {
    by_name: BTreeMap<Box<[u8]>, Group>,
    bytes: usize,
}

/// What [`Groups::claim`] did to one pending entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Claimed {
    /// Not claimed (no NACK, or not idle long enough).
    No,
    /// Claimed; the consumer was created for it when `created`.
    Yes {
        /// The consumer did not exist before.
        created: bool,
    },
}

impl Groups {
    /// Estimated heap bytes.
    pub fn heap_bytes(&self) -> usize {
        self.bytes
    }

    /// Number of groups.
    pub fn len(&self) -> usize {
        self.by_name.len()
    }

    /// The groups in name order.
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], &Group)> {
        self.by_name.iter().map(|(k, g)| (&**k, g))
    }

    /// The group named `name`.
    pub fn get(&self, name: &[u8]) -> Option<&Group> {
        self.by_name.get(name)
    }

    /// Create a group; false when one with that name exists (`streamCreateCG`).
    pub fn create(&mut self, name: &[u8], last_id: StreamId, entries_read: i64) -> bool {
        if self.by_name.contains_key(name) {
            return false;
        }
        let group = Group {
            last_id,
            entries_read,
            ..Group::default()
        };
        self.by_name.insert(name.into(), group);
        self.bytes += GROUP_BYTES + name.len();
        true
    }

    /// Destroy a group; false when there is none.
    pub fn destroy(&mut self, name: &[u8]) -> bool {
        let Some(group) = self.by_name.remove(name) else {
            return false;
        };
        self.bytes -= GROUP_BYTES + name.len() + group_contents_bytes(&group);
        true
    }

    /// Set a group's last ID and entries-read (XGROUP SETID, and XREADGROUP
    /// serving new entries).
    pub fn set_last(&mut self, name: &[u8], last_id: StreamId, entries_read: i64) {
        if let Some(g) = self.by_name.get_mut(name) {
            g.last_id = last_id;
            g.entries_read = entries_read;
        }
    }

    /// Create consumer `consumer` in `group` seen at `now_ms`; false when it exists
    /// (or the group does not).
    pub fn create_consumer(&mut self, group: &[u8], consumer: &[u8], now_ms: i64) -> bool {
        let Some(g) = self.by_name.get_mut(group) else {
            return false;
        };
        if g.consumers.contains_key(consumer) {
            return false;
        }
        let c = Consumer {
            seen_ms: now_ms,
            pel: BTreeSet::new(),
        };
        g.consumers.insert(consumer.into(), c);
        self.bytes += CONSUMER_BYTES + consumer.len();
        true
    }

    /// Note that a command named the consumer now (`seen-time`).
    pub fn touch_consumer(&mut self, group: &[u8], consumer: &[u8], now_ms: i64) {
        if let Some(c) = self
            .by_name
            .get_mut(group)
            .and_then(|g| g.consumers.get_mut(consumer))
        {
            c.seen_ms = now_ms;
        }
    }

    /// The consumer, created when missing; true when it was created.
    pub fn ensure_consumer(&mut self, group: &[u8], consumer: &[u8], now_ms: i64) -> bool {
        let exists = self
            .by_name
            .get(group)
            .is_some_and(|g| g.consumers.contains_key(consumer));
        if exists {
            self.touch_consumer(group, consumer, now_ms);
            false
        } else {
            self.create_consumer(group, consumer, now_ms)
        }
    }

    /// Delete a consumer and its pending entries; the number it had pending, or
    /// `None` when there is no such consumer.
    pub fn delete_consumer(&mut self, group: &[u8], consumer: &[u8]) -> Option<usize> {
        let g = self.by_name.get_mut(group)?;
        let c = g.consumers.remove(consumer)?;
        for id in &c.pel {
            g.pel.remove(id);
        }
        self.bytes -= CONSUMER_BYTES + consumer.len() + c.pel.len() * NACK_BYTES;
        Some(c.pel.len())
    }

    /// Deliver entry `id` to `consumer` (which exists): a new NACK, or the
    /// existing one moved to it with its count reset to 1 (XREADGROUP, which may
    /// find an entry pending after XGROUP SETID moved the group back).
    pub fn deliver(&mut self, group: &[u8], consumer: &[u8], id: StreamId, now_ms: i64) {
        let Some(g) = self.by_name.get_mut(group) else {
            return;
        };
        let Some((name, _)) = g.consumers.get_key_value(consumer) else {
            return;
        };
        let name = name.clone();
        let nack = Nack {
            delivery_ms: now_ms,
            delivery_count: 1,
            consumer: name.clone(),
        };
        match g.pel.insert(id, nack) {
            Some(old) => {
                if let Some(c) = g.consumers.get_mut(&old.consumer) {
                    c.pel.remove(&id);
                }
            }
            None => self.bytes += NACK_BYTES,
        }
        if let Some(c) = g.consumers.get_mut(&name) {
            c.pel.insert(id);
        }
    }

    /// A history read served entry `id` again: one more delivery, now.
    pub fn redeliver(&mut self, group: &[u8], id: StreamId, now_ms: i64) {
        if let Some(n) = self.by_name.get_mut(group).and_then(|g| g.pel.get_mut(&id)) {
            n.delivery_ms = now_ms;
            n.delivery_count += 1;
        }
    }

    /// Acknowledge `id`: removed from the group's and its consumer's PEL; false
    /// when it was not pending.
    pub fn ack(&mut self, group: &[u8], id: StreamId) -> bool {
        let Some(g) = self.by_name.get_mut(group) else {
            return false;
        };
        let Some(nack) = g.pel.remove(&id) else {
            return false;
        };
        if let Some(c) = g.consumers.get_mut(&nack.consumer) {
            c.pel.remove(&id);
        }
        self.bytes -= NACK_BYTES;
        true
    }

    /// XCLAIM / XAUTOCLAIM on one pending entry (`xclaimCommand`'s loop body):
    /// with `force`, a missing NACK is made first; a NACK delivered less than
    /// `min_idle` ms ago stays (unless just made). A claimed NACK moves to
    /// `consumer` (created when missing), gets `delivery_ms`, and its count is set
    /// to `retry` or incremented unless `justid`.
    pub fn claim(
        &mut self,
        group: &[u8],
        consumer: &[u8],
        id: StreamId,
        claim: &ClaimArgs,
        now_ms: i64,
    ) -> Claimed {
        let Some(g) = self.by_name.get_mut(group) else {
            return Claimed::No;
        };
        let fresh = !g.pel.contains_key(&id);
        if fresh && !claim.force {
            return Claimed::No;
        }
        if !fresh && claim.min_idle > 0 {
            let idle = now_ms - g.pel[&id].delivery_ms;
            if idle < claim.min_idle {
                return Claimed::No;
            }
        }
        let created = self.ensure_consumer(group, consumer, now_ms);
        let g = self.by_name.get_mut(group).expect("group checked above");
        let name = g
            .consumers
            .get_key_value(consumer)
            .map(|(k, _)| k.clone())
            .expect("consumer ensured above");
        if fresh {
            g.pel.insert(
                id,
                // `streamCreateNACK`: a new NACK counts one delivery.
                Nack {
                    delivery_ms: claim.delivery_ms,
                    delivery_count: 1,
                    consumer: name.clone(),
                },
            );
            self.bytes += NACK_BYTES;
        }
        let nack = g.pel.get_mut(&id).expect("NACK present");
        let previous = std::mem::replace(&mut nack.consumer, name.clone());
        nack.delivery_ms = claim.delivery_ms;
        match claim.retry {
            Some(n) => nack.delivery_count = n,
            None if !claim.justid => nack.delivery_count += 1,
            None => {}
        }
        if !fresh && previous != name {
            if let Some(c) = g.consumers.get_mut(&previous) {
                c.pel.remove(&id);
            }
        }
        if let Some(c) = g.consumers.get_mut(&name) {
            c.pel.insert(id);
        }
        Claimed::Yes { created }
    }

    /// A pending entry loaded from RDB, owned by `consumer` (which exists).
    pub fn restore_pending(
        &mut self,
        group: &[u8],
        consumer: &[u8],
        id: StreamId,
        ms: i64,
        count: u64,
    ) {
        let Some(g) = self.by_name.get_mut(group) else {
            return;
        };
        let Some(name) = g.consumers.get_key_value(consumer).map(|(k, _)| k.clone()) else {
            return;
        };
        let nack = Nack {
            delivery_ms: ms,
            delivery_count: count,
            consumer: name,
        };
        if g.pel.insert(id, nack).is_none() {
            self.bytes += NACK_BYTES;
        }
        if let Some(c) = g.consumers.get_mut(consumer) {
            c.pel.insert(id);
        }
    }

    /// Raise the group's last ID to `id` when below it (XCLAIM LASTID); true when
    /// raised.
    pub fn raise_last_id(&mut self, group: &[u8], id: StreamId) -> bool {
        match self.by_name.get_mut(group) {
            Some(g) if id > g.last_id => {
                g.last_id = id;
                true
            }
            _ => false,
        }
    }
}

impl Groups {
    /// Drop up to `max` pending entries (lazy freeing of a deleted stream); true
    /// when none is left.
    pub fn free_some(&mut self, max: usize) -> bool {
        let mut budget = max;
        for g in self.by_name.values_mut() {
            while budget > 0 {
                let Some((id, nack)) = g.pel.pop_first() else {
                    break;
                };
                if let Some(c) = g.consumers.get_mut(&nack.consumer) {
                    c.pel.remove(&id);
                }
                budget -= 1;
            }
        }
        self.by_name.values().all(|g| g.pel.is_empty())
    }
}

/// How XCLAIM / XAUTOCLAIM treat each entry.
#[derive(Clone, Copy, Debug)]
pub struct ClaimArgs {
    /// Skip entries delivered less than this many ms ago.
    pub min_idle: i64,
    /// The delivery time to set.
    pub delivery_ms: i64,
    /// The delivery count to set (RETRYCOUNT).
    pub retry: Option<u64>,
    /// Create missing NACKs (FORCE).
    pub force: bool,
    /// Leave the delivery count alone (JUSTID).
    pub justid: bool,
}

/// The bytes of a group's consumers and pending entries.
fn group_contents_bytes(g: &Group) -> usize {
    g.consumers
        .keys()
        .map(|k| CONSUMER_BYTES + k.len())
        .sum::<usize>()
        + g.pel.len() * NACK_BYTES
}
