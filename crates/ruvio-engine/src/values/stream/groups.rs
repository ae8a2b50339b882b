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

/// A consumer's `active-time` before it owned anything (Redis's -1).
pub const NEVER_ACTIVE: i64 = -1;

/// One consumer (`streamConsumer`).
#[derive(Clone, Debug, Default)]
pub struct Consumer {
    /// Unix ms of the last time a command named it (`seen-time`).
    pub seen_ms: i64,
    /// Unix ms of the last time it was given an entry to own, by XREADGROUP or
    /// a claim (Redis 7.2's `active-time`); [`NEVER_ACTIVE`] before that.
    pub active_ms: i64,
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

/// How to reverse one change of a stream's consumer groups (the undo journal's
/// [`Step::GroupChange`](crate::undo::Step), recorded by the `Groups` methods
/// below while the stream is open). What a change removed is moved here, not
/// copied.
#[derive(Debug)]
pub(crate) enum GroupChange {
    /// The group was created: destroy it.
    Created(Box<[u8]>),
    /// The group was destroyed: put it back.
    Destroyed(Box<[u8]>, Group),
    /// The group had this last ID and entries-read.
    Last {
        group: Box<[u8]>,
        last_id: StreamId,
        entries_read: i64,
    },
    /// The consumer was created: remove it (its pending list is empty again by
    /// the time this is reversed).
    ConsumerCreated {
        group: Box<[u8]>,
        consumer: Arc<[u8]>,
    },
    /// The consumer was last seen at `seen_ms` and active at `active_ms`.
    Seen {
        group: Box<[u8]>,
        consumer: Arc<[u8]>,
        seen_ms: i64,
        active_ms: i64,
    },
    /// The consumer was deleted with its pending entries: put them back.
    ConsumerDeleted {
        group: Box<[u8]>,
        consumer: Arc<[u8]>,
        state: Consumer,
        nacks: Vec<(StreamId, Nack)>,
    },
    /// Pending entry `id` was `was` (`None`: not pending) before a change.
    Nack {
        group: Box<[u8]>,
        id: StreamId,
        was: Option<Nack>,
    },
}

/// Record `change` for the undo journal when the stream is open.
fn record(change: impl FnOnce() -> GroupChange) {
    if crate::undo::inverses_wanted() {
        crate::undo::record_group_change(change());
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

    /// True when the stream has no consumer group.
    pub fn is_empty(&self) -> bool {
        self.by_name.is_empty()
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
        record(|| GroupChange::Created(name.into()));
        true
    }

    /// Destroy a group; false when there is none.
    pub fn destroy(&mut self, name: &[u8]) -> bool {
        let Some(group) = self.by_name.remove(name) else {
            return false;
        };
        self.bytes -= GROUP_BYTES + name.len() + group_contents_bytes(&group);
        record(|| GroupChange::Destroyed(name.into(), group));
        true
    }

    /// Set a group's last ID and entries-read (XGROUP SETID, and XREADGROUP
    /// serving new entries).
    pub fn set_last(&mut self, name: &[u8], last_id: StreamId, entries_read: i64) {
        if let Some(g) = self.by_name.get_mut(name) {
            record(|| GroupChange::Last {
                group: name.into(),
                last_id: g.last_id,
                entries_read: g.entries_read,
            });
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
            active_ms: NEVER_ACTIVE,
            pel: BTreeSet::new(),
        };
        let name: Arc<[u8]> = consumer.into();
        g.consumers.insert(name.clone(), c);
        self.bytes += CONSUMER_BYTES + consumer.len();
        record(|| GroupChange::ConsumerCreated {
            group: group.into(),
            consumer: name,
        });
        true
    }

    /// Note that a command named the consumer now (`seen-time`).
    pub fn touch_consumer(&mut self, group: &[u8], consumer: &[u8], now_ms: i64) {
        if let Some(c) = self.consumer_to_change(group, consumer) {
            c.seen_ms = now_ms;
        }
    }

    /// Note that the consumer was given an entry to own now (`active-time`).
    pub fn mark_active(&mut self, group: &[u8], consumer: &[u8], now_ms: i64) {
        if let Some(c) = self.consumer_to_change(group, consumer) {
            c.active_ms = now_ms;
        }
    }

    /// A consumer whose times are about to change, its times recorded first.
    fn consumer_to_change(&mut self, group: &[u8], consumer: &[u8]) -> Option<&mut Consumer> {
        let g = self.by_name.get_mut(group)?;
        if let Some((name, c)) = g.consumers.get_key_value(consumer) {
            record(|| GroupChange::Seen {
                group: group.into(),
                consumer: name.clone(),
                seen_ms: c.seen_ms,
                active_ms: c.active_ms,
            });
        }
        g.consumers.get_mut(consumer)
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
        let (name, c) = g.consumers.remove_entry(consumer)?;
        let nacks: Vec<(StreamId, Nack)> = c
            .pel
            .iter()
            .filter_map(|id| g.pel.remove(id).map(|n| (*id, n)))
            .collect();
        let pending = c.pel.len();
        self.bytes -= CONSUMER_BYTES + consumer.len() + pending * NACK_BYTES;
        record(|| GroupChange::ConsumerDeleted {
            group: group.into(),
            consumer: name,
            state: c,
            nacks,
        });
        Some(pending)
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
        record(|| GroupChange::Nack {
            group: group.into(),
            id,
            was: g.pel.get(&id).cloned(),
        });
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
        self.mark_active(group, consumer, now_ms);
    }

    /// A history read served entry `id` again: one more delivery, now.
    pub fn redeliver(&mut self, group: &[u8], id: StreamId, now_ms: i64) {
        if let Some(n) = self.by_name.get_mut(group).and_then(|g| g.pel.get_mut(&id)) {
            record(|| GroupChange::Nack {
                group: group.into(),
                id,
                was: Some(n.clone()),
            });
            n.delivery_ms = now_ms;
            n.delivery_count += 1;
        }
    }

    /// Does a group still need entry `id` (Redis 8.2's `streamEntryIsReferenced`,
    /// for the ACKED policy)? It does while it is pending in some group, or
    /// while some group has not had it delivered yet (its last ID is below).
    /// No group: nothing needs it.
    pub fn is_referenced(&self, id: StreamId) -> bool {
        self.by_name
            .values()
            .any(|g| g.last_id < id || g.pel.contains_key(&id))
    }

    /// Drop entry `id` from every group's PEL (the DELREF policy); true when
    /// some group had it pending.
    pub fn drop_refs(&mut self, id: StreamId) -> bool {
        let holding: Vec<Box<[u8]>> = self
            .by_name
            .iter()
            .filter(|(_, g)| g.pel.contains_key(&id))
            .map(|(name, _)| name.clone())
            .collect();
        for name in &holding {
            self.ack(name, id);
        }
        !holding.is_empty()
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
        record(|| GroupChange::Nack {
            group: group.into(),
            id,
            was: Some(nack),
        });
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
        record(|| GroupChange::Nack {
            group: group.into(),
            id,
            was: g.pel.get(&id).cloned(),
        });
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
        self.mark_active(group, consumer, now_ms);
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
        crate::undo::no_inverse();
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
                record(|| GroupChange::Last {
                    group: group.into(),
                    last_id: g.last_id,
                    entries_read: g.entries_read,
                });
                g.last_id = id;
                true
            }
            _ => false,
        }
    }
}

impl Groups {
    /// Reverse one change (the undo journal's roll-back, newest first: each
    /// finds the groups as the change left them).
    pub(crate) fn reverse(&mut self, change: GroupChange) {
        match change {
            GroupChange::Created(name) => drop(self.by_name.remove(&name)),
            GroupChange::Destroyed(name, group) => drop(self.by_name.insert(name, group)),
            GroupChange::Last {
                group,
                last_id,
                entries_read,
            } => {
                if let Some(g) = self.by_name.get_mut(&group) {
                    g.last_id = last_id;
                    g.entries_read = entries_read;
                }
            }
            GroupChange::ConsumerCreated { group, consumer } => {
                if let Some(g) = self.by_name.get_mut(&group) {
                    g.consumers.remove(&consumer);
                }
            }
            GroupChange::Seen {
                group,
                consumer,
                seen_ms,
                active_ms,
            } => {
                if let Some(c) = self
                    .by_name
                    .get_mut(&group)
                    .and_then(|g| g.consumers.get_mut(&consumer))
                {
                    c.seen_ms = seen_ms;
                    c.active_ms = active_ms;
                }
            }
            GroupChange::ConsumerDeleted {
                group,
                consumer,
                state,
                nacks,
            } => {
                if let Some(g) = self.by_name.get_mut(&group) {
                    g.pel.extend(nacks);
                    g.consumers.insert(consumer, state);
                }
            }
            GroupChange::Nack { group, id, was } => {
                if let Some(g) = self.by_name.get_mut(&group) {
                    if let Some(now) = g.pel.remove(&id) {
                        if let Some(c) = g.consumers.get_mut(&now.consumer) {
                            c.pel.remove(&id);
                        }
                    }
                    if let Some(was) = was {
                        if let Some(c) = g.consumers.get_mut(&was.consumer) {
                            c.pel.insert(id);
                        }
                        g.pel.insert(id, was);
                    }
                }
            }
        }
        self.bytes = self
            .by_name
            .iter()
            .map(|(name, g)| GROUP_BYTES + name.len() + group_contents_bytes(g))
            .sum();
    }

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
