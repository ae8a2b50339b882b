//! The database numbers of a command that swaps databases (SWAPDB, MOVE) and the
//! log records that travel home with borrowed keys (the owner logs them): their
//! form, which the shard's side of lending writes and reads
//! (`shard/lending/home.rs`, `shard/lending/owner.rs`).

use ruvio_engine::Entry;

/// Where database `db` is after `swaps` (SWAPDBs, in order).
pub fn after_swaps(swaps: &[(usize, usize)], db: usize) -> usize {
    swaps.iter().fold(db, |db, &swap| swapped(db, swap))
}

/// SWAPDB: it moves every shard's keys between two databases, so in forward mode
/// it runs under the script lock once no key is out on loan but its own
/// transaction's ([`crate::mesh::script_lock::quiet`]), which renames those as they move.
/// `meta`: the command's row.
pub fn swaps_dbs(meta: &ruvio_engine::CommandMeta) -> bool {
    meta.name == "swapdb"
}

/// Where database `db` is after SWAPDB `a` `b`.
pub fn swapped(db: usize, (a, b): (usize, usize)) -> usize {
    match db {
        _ if db == a => b,
        _ if db == b => a,
        _ => db,
    }
}

/// The first of the records going home with keys when the owner's replication
/// feed takes them too, not only its log (see [`log_local_changes`]): no
/// database has this number.
pub const FOR_THE_FEED: usize = usize::MAX;

/// The first of the records going home with keys when the owner's own
/// history takes them too, for a Ruvio replica's shard link (see
/// `shard::lending::take_back`): no database has this number.
pub const FOR_THE_LINKS: usize = usize::MAX - 1;

/// Log records that set keys to a state, whatever it was before: what a command on
/// borrowed keys logs for each key it changed (its arguments would replay on one
/// shard, but its keys' records belong in their owners' logs).
pub type KeyRecords = Vec<(usize, Vec<Vec<u8>>)>;

/// The record that puts `key` in the state of `entry` (`RESTORE ... REPLACE ABSTTL`
/// with Redis' DUMP payload), or deletes it.
pub fn state_record(key: &[u8], entry: Option<&Entry>) -> Vec<Vec<u8>> {
    let Some(entry) = entry else {
        return vec![b"DEL".to_vec(), key.to_vec()];
    };
    let expire_at = entry.expire_at().unwrap_or(0).to_string().into_bytes();
    let payload = ruvio_engine::rdb::dump_payload(entry.value());
    vec![
        b"RESTORE".to_vec(),
        key.to_vec(),
        expire_at,
        payload,
        b"REPLACE".to_vec(),
        b"ABSTTL".to_vec(),
    ]
}
