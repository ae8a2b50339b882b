//! Borrowed keys going back to their owners after the command ran, with the log
//! records of their new state (the owner logs them), and the coordinator's own
//! log and replication records of what the command changed. Apart from
//! `coordinate.rs` because it is the borrowing's last step and its log's side;
//! the records' form is the mesh's (`mesh::lending::state_record`).

use super::owner::take_back;
use crate::config::PortMode;
use crate::mesh::lending::{state_record, KeyRecords, Lent, FOR_THE_FEED, FOR_THE_LINKS};
use crate::net::conn::Conn;
use crate::net::slab::Slab;
use crate::shard::ShardCore;
use ahash::AHashMap;

/// Take the keys `(db, key, owner)` out of this shard's keyspace again and return
/// each to its owner (this shard's own straight back). With a log, each `modified`
/// key travels with the record of its new state, for its owner's log. With `acks`
/// (`always`: the command's ticket), each other owner that gets records is asked
/// to acknowledge once they are on disk; returns how many were asked. With
/// `for_feed` (a full sync's cut is under way, [`log_local_changes`]) the
/// records travel even without a log, marked for the owners' replication feeds;
/// to an owner a Ruvio replica follows over a shard link, marked for its own
/// history (its link applies them again after its barrier: a full sync of
/// this shard's link, which holds this shard's keys only, cannot lose them;
/// `replication::link_barrier`).
pub(super) fn send_home(
    core: &mut ShardCore,
    conns: &mut Slab<Conn>,
    homes: Vec<(usize, Vec<u8>, usize)>,
    modified: &[(usize, Vec<u8>)],
    acks: Option<u64>,
    for_feed: bool,
) -> usize {
    // The owners' logs take the records (replicas got them from this shard,
    // unless `for_feed`: then from their owners).
    let logging = core.wal.is_some() || for_feed;
    let mut returns: AHashMap<usize, (Lent, KeyRecords)> = AHashMap::new();
    // Each key goes home named by the database it is in (a SWAPDB renamed it here
    // and on its owner alike: `Lending::swap_dbs`).
    for (key_db, key, owner) in homes {
        let entry = core.engine.lend(key_db, &key, 0);
        let (entries, records) = returns.entry(owner).or_default();
        let recorded = logging || (!for_feed && owner != core.id && linked(core, owner));
        if recorded && modified.iter().any(|(d, k)| *d == key_db && *k == key) {
            let record = state_record(&key, entry.as_ref());
            if !record.is_empty() {
                records.push((key_db, record));
            }
        }
        entries.push((key_db, key, entry));
    }
    let mut asked = 0;
    for (owner, (entries, mut records)) in returns {
        if for_feed && !records.is_empty() {
            records.insert(0, (FOR_THE_FEED, Vec::new()));
        } else if !records.is_empty() && owner != core.id && linked(core, owner) {
            records.insert(0, (FOR_THE_LINKS, Vec::new()));
        }
        match acks.filter(|_| !records.is_empty()) {
            _ if owner == core.id => take_back(core, conns, owner, entries, records),
            Some(ticket) => {
                asked += 1;
                core.outbox
                    .give_back_acked(owner, entries, records, core.id, ticket);
            }
            None => core.outbox.give_back(owner, entries, records),
        }
    }
    asked
}

/// A Ruvio replica follows this shard and shard `other` over shard links
/// (both have a history of their own): record where `other`'s history ends
/// now, `RUVIO BARRIER other <offset>`, in this shard's own history only
/// (`replication::link_barrier`: the replica's link for this shard applies
/// the records after it once its link for `other` applied that much). Two
/// loads and a branch when no shard link follows this shard.
pub(super) fn record_link_barrier(core: &mut ShardCore, other: usize) {
    if other == core.id || !links_follow(core) {
        return;
    }
    // No history for `other` yet (its link has not asked for one): 0, the
    // replica's link applies the group unless `other`'s link loaded data
    // already, which was cut after it then.
    let theirs = core.shared.replication.node_history(other);
    let offset = match theirs.primary.active() {
        true => theirs.offset(),
        false => 0,
    };
    let record = crate::replication::link_barrier::record(other, offset);
    core.replication.feed.record_link_only(record);
}

/// A Ruvio replica's shard link follows this shard: its own history exists
/// (forward mode) and it records.
pub fn links_follow(core: &ShardCore) -> bool {
    core.replication.feed.on() && linked(core, core.id)
}

/// A Ruvio replica's shard link follows shard `shard` (forward mode): its
/// own history exists. A load and a branch.
pub(super) fn linked(core: &ShardCore, shard: usize) -> bool {
    core.cfg.port_mode == PortMode::Forward
        && core.shared.replication.node_history(shard).primary.active()
}

/// This shard's records may be held back while another shard's go in: a full
/// sync's cut is under way, or a FLUSHALL, FLUSHDB or SWAPDB some shard passed
/// and another has not (this shard's own, still in its feed, included). Three
/// loads and branches, once per cross-shard group.
fn records_wait(core: &ShardCore) -> bool {
    let primary = &core.shared.replication.primary;
    primary.cutting() || primary.barrier_open() || core.replication.feed.has_marks()
}

/// Log the new state of the keys this shard owns that a command on borrowed keys
/// changed and that stay here (not sent home: they were never borrowed); the
/// other keys' records travel home to their owners' logs ([`send_home`]).
/// Replicas get the new state of every key the command changed, borrowed ones
/// included, from here as one group: one MULTI/EXEC however many shards the
/// keys live on (the owners do not replicate the records they get back). This
/// shard's records reach the backlog before the keys leave it (`ship_outbox`
/// flushes first), so an owner's later writes to them follow in the stream.
///
/// Except while records wait ([`records_wait`]; returns true then): a shard
/// that has cut holds its records until every shard has, and one that passed
/// a barrier until every shard has, while others append at once or are
/// released in shard order, so a borrowed key's record held here could land
/// after its owner's later write (docs/replication.md, "A cross-shard group
/// during a full sync's cut" and "... at a barrier"). Then each key's record
/// goes to its owner's feed with the key, in place among the owner's own
/// records, and this shard replicates only its own keys' (the group reaches
/// replicas already online as one MULTI/EXEC per shard).
pub(super) fn log_local_changes(
    core: &mut ShardCore,
    modified: &[(usize, Vec<u8>)],
    homes: &[(usize, Vec<u8>, usize)],
) -> bool {
    if !core.logs() {
        return false;
    }
    let split = core.replication.feed.on() && records_wait(core);
    let mut records = Vec::new();
    for (db, key) in modified {
        let travels = homes.iter().any(|(d, k, _)| d == db && k == key);
        let stays = !travels && core.topo.key_owner(key) == core.id;
        if !stays && (split || !core.replication.feed.on()) {
            continue;
        }
        let entry = core.engine.peek_entry(*db, key, core.now_ms);
        let record = state_record(key, entry);
        if !record.is_empty() {
            records.push((*db, record, stays));
        }
    }
    if let Some(wal) = core.wal.as_mut() {
        // The keys one command or transaction changed here replay together.
        wal.begin_atomic();
        for (db, record, _) in records.iter().filter(|(_, _, stays)| *stays) {
            wal.append(*db, &mut record.iter().map(Vec::as_slice));
        }
        wal.end_atomic();
    }
    let feed = &mut core.replication.feed;
    feed.begin_group();
    for (db, record, _) in &records {
        feed.record(*db, &mut record.iter().map(Vec::as_slice));
    }
    feed.end_group();
    split
}
