//! The owner's side of lending: lend keys to a coordinator (or queue the request
//! while they are out) and take them back with the records of what changed
//! (renaming the keys out on loan when their borrower swaps databases is the
//! table's own step, `mesh::lending::Lending::swap_dbs`).

use super::coordinate::lent;
use crate::mesh::lending::{
    state_record, KeyRecords, LendRequest, Lent, FOR_THE_FEED, FOR_THE_LINKS,
};
use crate::net::conn::Conn;
use crate::net::slab::Slab;
use crate::persistence::durable;
use crate::shard::exec;
use crate::shard::ShardCore;

/// An owner's side: lend the keys now, or queue the request until they are back.
pub fn lend(core: &mut ShardCore, conns: &mut Slab<Conn>, request: LendRequest) {
    let busy = request
        .keys
        .iter()
        .any(|(db, k)| !lendable_now(core, request.from, request.now, *db, k));
    if busy {
        core.lending.waiting.push_back(request);
        return;
    }
    let mut entries = Lent::with_capacity(request.keys.len());
    let mut waited = false;
    for (db, key) in request.keys {
        if core.watches().any() {
            // Its watchers learn of an expiry before a transaction checks them.
            core.touch_watched_if_expired(db, &key);
        }
        let entry = core.engine.lend(db, &key, core.now_ms);
        let key = (db, key);
        waited |= core.blocking.is_waited(&key);
        let (db, key) = key;
        core.lending.lent.insert((db, key.clone()));
        entries.push((db, key, entry));
    }
    count_lent(core);
    if request.from == core.id {
        lent(core, conns, request.ticket, entries, waited);
    } else {
        core.outbox
            .lent(request.from, request.ticket, entries, waited);
    }
}

/// Key `key` of `db` of this shard can be lent to coordinator `from` at once: it
/// is not out on loan or held in place, nor (unless the request must be served
/// `now`) claimed by a transaction waiting here.
pub(super) fn lendable_now(
    core: &ShardCore,
    from: usize,
    now: bool,
    db: usize,
    key: &[u8],
) -> bool {
    !core.lending.is_lent(db, key)
        && (now || !crate::mesh::owner_tx::is_claimed(&core.lending, from, db, key))
}

/// Publish how many keys of this shard are out on loan or held in place (the
/// script lock's quiet server has none but its own command's); when none is,
/// wake the lock's holder, which may be waiting for every key to be home before
/// it swaps databases.
pub fn count_lent(core: &ShardCore) {
    use std::sync::atomic::Ordering::SeqCst;
    let lent = (core.lending.lent.len() + core.lending.held.len()) as u64;
    core.shared.shards[core.id].lent.store(lent, SeqCst);
    let holder = core.shared.script_lock.holder();
    if let Some(holder) = holder.filter(|&h| lent == 0 && h != core.id) {
        crate::mesh::forward::ring(holder);
    }
}

/// An owner's side under `always`: as [`take_back`], then acknowledge to
/// coordinator `from`'s command `ticket` once the records are on disk.
pub fn take_back_acked(
    core: &mut ShardCore,
    conns: &mut Slab<Conn>,
    entries: Lent,
    records: KeyRecords,
    from: usize,
    ticket: u64,
) {
    let mark = core.wal.as_ref().map_or(0, |w| w.filling_bytes());
    take_back(core, conns, from, entries, records);
    durable::acknowledge_given_back(core, from, ticket, mark);
}

/// An owner's side: its keys are back from coordinator `from` (changed or
/// gone). Wake whoever waited on them, then lend to the next coordinator in
/// line. A Ruvio replica's shard links learn where `from`'s stream stood
/// (its records of the command are in its history now): this shard's later
/// records follow them there (`record_link_barrier`).
pub fn take_back(
    core: &mut ShardCore,
    conns: &mut Slab<Conn>,
    from: usize,
    entries: Lent,
    records: KeyRecords,
) {
    super::home::record_link_barrier(core, from);
    // Marked: a full sync's cut was under way, so replicas get these records
    // from here, among this shard's own (`home::log_local_changes`); or a
    // Ruvio replica's shard links follow: its link for this shard applies
    // them again, after the barrier above (`replication::link_barrier`).
    let marker = records.first().map(|(db, _)| *db);
    let for_feed = marker == Some(FOR_THE_FEED);
    let for_links = marker == Some(FOR_THE_LINKS);
    let records = &records[(for_feed || for_links) as usize..];
    if let Some(wal) = core.wal.as_mut() {
        // The keys one command or transaction changed here replay together
        // (replicas got these records from the shard that ran it, unless
        // marked).
        wal.begin_atomic();
        for (db, record) in records {
            wal.append(*db, &mut record.iter().map(Vec::as_slice));
        }
        wal.end_atomic();
    }
    if for_feed {
        let feed = &mut core.replication.feed;
        feed.begin_group();
        for (db, record) in records {
            feed.record(*db, &mut record.iter().map(Vec::as_slice));
        }
        feed.end_group();
    } else if for_links {
        for (db, record) in records {
            core.replication.feed.record_link_only_in(*db, record);
        }
    }
    for (db, key, entry) in entries {
        let db_key = (db, key);
        core.lending.lent.remove(&db_key);
        let missed = core.lending.missed_by_snapshot.remove(&db_key);
        let (db, key) = db_key;
        if missed {
            let record = state_record(&key, entry.as_ref());
            if core.logs() && !record.is_empty() {
                core.log_record(db, record.iter().map(Vec::as_slice));
            }
        }
        if let Some(entry) = entry {
            core.engine.adopt(db, entry);
        }
        core.signal_key(db, &key);
    }
    keys_free(core, conns);
}

/// Keys of this shard came home or were released (a transaction run in place,
/// `shard::in_place`): the commands parked on them run, then what waited on
/// them from other shards (transactions, parts, lend requests), in that order.
pub fn keys_free(core: &mut ShardCore, conns: &mut Slab<Conn>) {
    count_lent(core);
    exec::serve_ready(core, conns);
    crate::shard::messages::run_deferred(core, conns);
    let waiting = std::mem::take(&mut core.lending.waiting);
    for request in waiting {
        lend(core, conns, request);
    }
}
