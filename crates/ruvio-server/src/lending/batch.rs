//! Batches of locked commands: the locked commands waiting on one shard run in a
//! row under one hold of the script lock, and the keys of other shards they
//! borrowed stay here until the batch ends (docs/scripting.md, "Batches").

use super::{send_home, Borrowing};
use crate::conn::Conn;
use crate::shard::ShardCore;
use crate::slab::Slab;

/// Locked commands (scripts, transactions under the lock) that run in a row under
/// one hold of the script lock, at most: the keys of other shards they borrowed
/// (declared, or reached by their scripts) stay here between them, so a hot key
/// that every run names (a job queue's counters) takes one round trip per batch,
/// not one per script. Other shards' borrowing commands wait for the batch: it is
/// kept short.
const BATCH_MAX: u32 = 128;

/// The locked command that just ran may keep the script lock and its scripts'
/// borrowed keys for the next one: another locked command of this shard waits for
/// the lock, the batch is not full, and no log needs the keys' records now (under
/// a log each command's keys go home, with their records, when it ends).
pub(super) fn may_batch(core: &ShardCore) -> bool {
    core.wal.is_none()
        && core.lending.batched + 1 < BATCH_MAX
        && core
            .lending
            .ops
            .values()
            .any(|op| op.wants_lock && op.borrowing == Borrowing::Idle)
}

/// End a batch that nothing continues (its next command went away): send its
/// borrowed keys home and free the lock.
pub(super) fn end_idle_batch(core: &mut ShardCore, conns: &mut Slab<Conn>) {
    if !core.lending.holding_batch() || core.lending.ops.values().any(|op| op.wants_lock) {
        return;
    }
    let homes = batch_homes(core);
    send_home(core, conns, homes, &[], None);
    core.lending.batched = 0;
    crate::script_lock::unlock(core);
}

/// The keys of other shards among `homes` stay here for the batch's next command;
/// this shard's own go home (returned).
pub(super) fn keep_in_batch(
    core: &ShardCore,
    homes: Vec<(usize, Vec<u8>, usize)>,
) -> Vec<(usize, Vec<u8>, usize)> {
    let (own, others): (Vec<_>, Vec<_>) = homes.into_iter().partition(|(_, _, o)| *o == core.id);
    let kept = others
        .into_iter()
        .filter(|(db, key, _)| !crate::script_lock::batch_holds(*db, key))
        .map(|(db, key, _)| (db, key))
        .collect();
    crate::script_lock::keep_in_batch(kept);
    own
}

/// The keys a batch kept, each with its owner, for [`send_home`].
pub(super) fn batch_homes(core: &ShardCore) -> Vec<(usize, Vec<u8>, usize)> {
    crate::script_lock::take_batch()
        .into_iter()
        .map(|(db, key)| {
            let owner = core.topo.key_owner(&key);
            (db, key, owner)
        })
        .collect()
}
