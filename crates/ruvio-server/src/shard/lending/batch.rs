//! Batches of locked commands: the locked commands waiting on one shard run in a
//! row under one hold of the script lock, and the keys of other shards they
//! borrowed stay here until the batch ends (docs/scripting.md, "Batches").
//!
//! Batches of borrowing commands (RENAME, LMOVE, SMOVE ... across shards, no
//! lock): the keys of other shards a command borrowed stay here, still lent on
//! their owners, until the end of the loop iteration, so the next commands on
//! them (a pipeline of moves between the same two keys) run at once, without a
//! round trip; then they go home together, one message per owner
//! (docs/cross-shard.md, "Batches of borrowing commands"). The batch never
//! waits for anything, so it cannot close a cycle of waits: a command that
//! cannot run on the kept keys right away asks their owners as usual, and they
//! lend the keys when the batch sent them home.

use super::home::{linked, send_home};
use super::owner::lendable_now;
use crate::mesh::lending::{report_written, CrossOp, DbKey};
use crate::net::conn::Conn;
use crate::net::slab::Slab;
use crate::shard::ShardCore;
use ruvio_engine::command::flags::BLOCKING;

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

/// Some owner after op `op`'s next one lends a key the batch keeps here (the
/// op running on kept keys is counted once, at its last such owner).
pub(super) fn kept_after(core: &ShardCore, op: &CrossOp) -> bool {
    let later = op.plan.get(op.next + 1..).unwrap_or_default();
    later
        .iter()
        .flat_map(|(_, keys)| keys)
        .any(|key| core.lending.kept.contains(key))
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

/// The borrowing command that just ran (not locked, not parked) may keep the
/// keys of other shards it borrowed for the next commands of this loop
/// iteration: nothing needs their records as they change (no log, no replica
/// feed, no owner followed by a replica's shard link, no snapshot being
/// written), no client tracks (its invalidations follow each command's writes,
/// `report_written`'s gather), no locked batch holds the script lock here, it
/// is not a transaction, a script or SORT with patterns, no client is blocked
/// at an owner on a key it borrowed ([`CrossOp::lent_waited`]: served between
/// commands, as by one Redis), and the batch is not full (then it and the kept
/// keys go home).
pub(super) fn may_keep(
    core: &ShardCore,
    op: &CrossOp,
    tracking: bool,
    homes: &[(usize, Vec<u8>, usize)],
) -> bool {
    !tracking
        && !core.logs()
        && !core.writing_snapshot()
        && !core.lending.holding_batch()
        && core.lending.kept_runs + 1 < BATCH_MAX
        && op.transaction.is_none()
        && !op.wants_lock
        && op.value_key_tries.is_none()
        && !op.lent_waited
        && !homes
            .iter()
            .any(|(_, _, owner)| *owner != core.id && linked(core, *owner))
}

/// Op `op` (its owners from `op.next` on still to ask) runs on the keys the
/// batch of borrowing commands keeps here: some of its keys are kept, and each
/// of the others is either kept or this shard's and free, so it completes
/// before the batch can end (the kept keys never leave under it). Only a plain
/// command (no transaction, script, blocking command or SORT with patterns)
/// whose connection has no earlier reply outstanding
/// ([`CrossOp::first_in_line`]): an earlier command of it on a kept key waits
/// at that key's owner and must run first.
pub(super) fn runs_on_kept(core: &ShardCore, op: &CrossOp) -> bool {
    let kept = &core.lending.kept;
    if kept.is_empty()
        || !op.first_in_line
        || op.transaction.is_some()
        || op.wants_lock
        || op.value_key_tries.is_some()
        || op.meta.has(BLOCKING)
    {
        return false;
    }
    let rest = op.plan.get(op.next..).unwrap_or_default();
    let mut keys = rest
        .iter()
        .flat_map(|(owner, keys)| keys.iter().map(move |k| (*owner, k)));
    let any_kept = rest
        .iter()
        .flat_map(|(_, keys)| keys)
        .any(|k| kept.contains(k));
    any_kept
        && keys.all(|(owner, key)| {
            kept.contains(key)
                || (owner == core.id && lendable_now(core, core.id, false, key.0, &key.1))
        })
}

/// A borrowing command whose keys are all here already, each kept by the
/// batch or this shard's own and free ([`runs_on_kept`]'s test, made before
/// any op exists): it runs as a local command, without an op, its plan, its
/// own keys lent to itself and sent home, and its reply held. Its writes to
/// kept keys are reported when the batch ends ([`defer_kept_written`]), as
/// the op's are. False when it does not qualify (it borrows as usual): the
/// batch's conditions ([`may_keep`]: no log or feed, no tracking, no
/// snapshot, no locked batch), a plain command (no script, transaction,
/// blocking command, SORT with patterns, `DB` option), no earlier reply of
/// its connection outstanding, and no script lock held elsewhere (counted as
/// borrowing while it runs, as an op is).
pub fn run_on_kept_now(
    core: &mut ShardCore,
    client: &crate::net::conn::ClientState,
    first_in_line: bool,
    cmd: &crate::cmd::registry::Command,
    args: ruvio_resp::Args<'_>,
    out: &mut Vec<u8>,
) -> bool {
    use ruvio_engine::command::flags::DB_OPTION;
    let caller = crate::net::caller::Caller {
        borrowing: true,
        ..crate::net::caller::Caller::of(client, core.id)
    };
    if core.lending.kept.is_empty()
        || !first_in_line
        || client.in_exec
        || cmd.script_call
        || cmd.meta.has(BLOCKING)
        || cmd.meta.has(DB_OPTION)
        || cmd.meta.keys.reads_keys_from_value()
        || caller.tracking.bits != 0
        || core.tracking.active()
        || core.logs()
        || core.writing_snapshot()
        || core.lending.holding_batch()
        || core.lending.kept_runs + 1 >= BATCH_MAX
    {
        return false;
    }
    let db = client.db;
    let mut any_kept = false;
    for key in cmd.meta.keys.keys(args) {
        let kept = core.lending.kept.iter().any(|(d, k)| *d == db && k == key);
        any_kept |= kept;
        let own_and_free =
            || core.topo.key_owner(key) == core.id && lendable_now(core, core.id, false, db, key);
        if !kept && !own_and_free() {
            return false;
        }
    }
    if !any_kept || !crate::mesh::script_lock::begin_borrowing(core.script_server()) {
        return false;
    }
    let ran = crate::shard::exec::run_engine(core, cmd, caller, args, out);
    crate::mesh::script_lock::end_borrowing(core.script_server());
    // Its own keys written need no report: they are this shard's.
    defer_kept_written(core, &ran.modified, &[]);
    core.lending.kept_runs += 1;
    core.stats.ran_on_kept += 1;
    true
}

/// The keys of other shards among `homes` stay here until the loop iteration
/// ends ([`send_kept_home`]); this shard's own go home (returned).
pub(super) fn keep_borrowed(
    core: &mut ShardCore,
    homes: Vec<(usize, Vec<u8>, usize)>,
) -> Vec<(usize, Vec<u8>, usize)> {
    let (own, others): (Vec<_>, Vec<_>) = homes.into_iter().partition(|(_, _, o)| *o == core.id);
    let new: Vec<DbKey> = others
        .into_iter()
        .map(|(db, key, _)| (db, key))
        .filter(|key| !core.lending.kept.contains(key))
        .collect();
    crate::mesh::script_lock::note_kept(&new);
    core.lending.kept.extend(new);
    core.lending.kept_runs += 1;
    own
}

/// The keys of `modified` the batch keeps (kept already, or among `homes` of
/// another shard: the command that just ran keeps them) are noted to be reported
/// written when the batch ends, once each instead of once per command (nobody
/// tracks while a batch keeps keys, so no invalidation waits for it, and no
/// transaction on the owner checks a key out on loan); the others are returned,
/// to be reported now.
pub(super) fn defer_kept_written(
    core: &mut ShardCore,
    modified: &[DbKey],
    homes: &[(usize, Vec<u8>, usize)],
) -> Vec<DbKey> {
    let mut now = Vec::new();
    for key in modified {
        let owner = core.topo.key_owner(&key.1);
        let kept = owner != core.id
            && (core.lending.kept.contains(key)
                || homes.iter().any(|(db, k, _)| *db == key.0 && *k == key.1));
        match kept {
            true if !core.lending.kept_written.contains(key) => {
                core.lending.kept_written.push(key.clone())
            }
            true => {}
            false => now.push(key.clone()),
        }
    }
    now
}

/// The keys the batch of borrowing commands kept, each with its owner, for
/// [`send_home`]; the batch is over. Their owners hear of the writes to them
/// first (`report_written`), so the keys' watchers are touched before they are
/// back.
pub(super) fn kept_homes(core: &mut ShardCore) -> Vec<(usize, Vec<u8>, usize)> {
    let written = std::mem::take(&mut core.lending.kept_written);
    if !written.is_empty() {
        report_written(core, &written, None, None);
    }
    core.lending.kept_runs = 0;
    crate::mesh::script_lock::forget_kept();
    let kept = std::mem::take(&mut core.lending.kept);
    kept.into_iter()
        .map(|(db, key)| {
            let owner = core.topo.key_owner(&key);
            (db, key, owner)
        })
        .collect()
}

/// At the end of a loop iteration, or before a command of this shard that may
/// touch them goes to another shard: the keys a batch of borrowing commands kept
/// go home, one message per owner (which wakes the commands waiting for them
/// there, and lends them to the next coordinator in line). So a forwarded
/// command never waits at an owner for a key this shard keeps, where a later
/// command of its connection on a key not kept could overtake it.
pub fn send_kept_home(core: &mut ShardCore, conns: &mut Slab<Conn>) {
    // Every loop iteration calls this: the common case (no batch) stops at once.
    if core.lending.kept.is_empty() {
        return;
    }
    let homes = kept_homes(core);
    send_home(core, conns, homes, &[], None, false);
}
