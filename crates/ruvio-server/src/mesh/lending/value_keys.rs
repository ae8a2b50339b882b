//! Commands that read keys named in a value (SORT BY/GET) across shards: the keys
//! their value names are found once the argument keys are held, and borrowed in a
//! further round (docs/cross-shard.md).

use super::{CrossOp, DbKey};
use crate::cluster::topology::Topology;
use ahash::AHashSet;
use ruvio_engine::Engine;

/// Times a command that reads keys named in a value (SORT BY/GET) gives its keys
/// back and borrows again with the keys its value names. The first round borrows
/// the argument keys and finds the pattern keys; the second holds them all unless
/// a writer changed the sorted key in between. After this many rounds (a writer
/// adding elements faster than a round takes) the command runs with what it holds
/// (see docs/cross-shard.md).
const VALUE_KEY_TRIES_MAX: u32 = 16;

/// For a command that reads keys named in a value (SORT BY/GET), with its keys
/// `held`: the keys its value names that are not held, when there are some and
/// it may still borrow again.
pub fn value_keys_missing(
    engine: &Engine,
    now_ms: u64,
    op: &CrossOp,
    held: &[(usize, Vec<u8>, usize)],
) -> Option<Vec<DbKey>> {
    let tries = op.value_key_tries?;
    if tries >= VALUE_KEY_TRIES_MAX {
        return None;
    }
    let db = op.caller.db;
    let held: AHashSet<(usize, &[u8])> = held.iter().map(|(d, k, _)| (*d, k.as_slice())).collect();
    let missing: Vec<DbKey> = engine
        .value_keys(db, op.argv.args(), now_ms)
        .into_iter()
        .filter(|k| !held.contains(&(db, k.as_slice())))
        .map(|k| (db, k))
        .collect();
    (!missing.is_empty()).then_some(missing)
}

/// Add `keys` to the command's plan (each with its owner, in shard order) and
/// start borrowing from the first owner again.
pub fn plan_more(topo: &Topology, op: &mut CrossOp, keys: Vec<DbKey>) {
    for (db, key) in keys {
        let owner = topo.key_owner(&key);
        match op.plan.iter_mut().find(|(o, _)| *o == owner) {
            Some((_, owned)) => owned.push((db, key)),
            None => op.plan.push((owner, vec![(db, key)])),
        }
    }
    for (_, keys) in &mut op.plan {
        keys.sort();
        keys.dedup();
    }
    op.plan.sort_by_key(|(shard, _)| *shard);
    op.next = 0;
    op.value_key_tries = op.value_key_tries.map(|n| n + 1);
}
