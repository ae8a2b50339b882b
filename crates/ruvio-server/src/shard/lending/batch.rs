//! Batches of locked commands: the locked commands waiting on one shard run in a
//! row under one hold of the script lock, and the keys of other shards they
//! borrowed stay here until the batch ends (docs/scripting.md, "Batches").

use super::home::send_home;
use crate::mesh::lending::{report_written, DbKey};
use crate::net::conn::Conn;
use crate::net::slab::Slab;
use crate::shard::ShardCore;

/// Locked commands (scripts, transactions under the lock) that run in a row under
/// one hold of the script lock, at most: the keys of other shards they borrowed
/// (declared, or reached by their scripts) stay here between them, so a hot key
/// that every run names (a job queue's counters) takes one round trip per batch,
/// not one per script. Other shards' borrowing commands wait for the batch: this
/// bounds their wait. (Handing the lock over at the end of every loop iteration
/// in which another shard waited instead cost 40-70 % of the throughput under
/// contention, and raised the p99: each hand-over sends the kept keys home and
/// borrows them back.)
const BATCH_MAX: u32 = 512;

/// The locked command that just ran may keep the script lock and its scripts'
/// borrowed keys for the next one: the batch is not full and no log needs the
/// keys' records now (under a log each command's keys go home, with their records,
/// when it ends). Whether a next one comes is known at the end of the loop
/// iteration ([`end_batch_if_done`]): the connections answered meanwhile run their
/// next input in the same iteration, and a pipelined script there continues the
/// batch at once instead of waiting for the lock to come round again.
pub(super) fn may_batch(core: &ShardCore) -> bool {
    !core.logs() && core.lending.batched + 1 < BATCH_MAX
}

/// At the end of a loop iteration (and before the parked commands go on), end
/// the batch unless a locked command of this shard continues it: send its
/// borrowed keys home and free the lock. A command holding the lock right now
/// (borrowing its declared keys) keeps it.
pub fn end_batch_if_done(core: &mut ShardCore, conns: &mut Slab<Conn>) {
    let continued = |core: &ShardCore| {
        let ops = core.lending.ops.values();
        ops.filter(|op| !op.swaps_dbs()).any(|op| op.wants_lock)
    };
    // Every loop iteration calls this: the common case (no batch) stops at once.
    if !core.lending.holding_batch() || core.lending.lock_in_use() || continued(core) {
        return;
    }
    let homes = batch_homes(core);
    send_home(core, conns, homes, &[], None, false);
    core.lending.batched = 0;
    crate::mesh::script_lock::unlock(core.script_server());
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
        .filter(|(db, key, _)| !crate::mesh::script_lock::batch_holds(*db, key))
        .map(|(db, key, _)| (db, key))
        .collect();
    crate::mesh::script_lock::keep_in_batch(kept);
    own
}

/// The keys a batch kept, each with its owner, for [`send_home`]; the owners of
/// those its commands wrote are told first (their watchers are touched before
/// the keys are back).
pub(super) fn batch_homes(core: &mut ShardCore) -> Vec<(usize, Vec<u8>, usize)> {
    let kept = crate::mesh::script_lock::take_batch();
    // A batch's writes are several commands': each run of keys with one NOLOOP
    // writer (or none) is reported as its own message, in the order written.
    let written = crate::mesh::script_lock::take_batch_written();
    for run in written.chunk_by(|(_, a), (_, b)| a == b) {
        let keys: Vec<DbKey> = run.iter().map(|(key, _)| key.clone()).collect();
        report_written(core, &keys, run[0].1, None);
    }
    kept.into_iter()
        .map(|(db, key)| {
            let owner = core.topo.key_owner(&key);
            (db, key, owner)
        })
        .collect()
}
