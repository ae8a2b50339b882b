//! The owner's side of lending: lend keys to a coordinator (or queue the request
//! while they are out), take them back with the records of what changed, and
//! keep track of where a SWAPDB moved a key while it was out.

use super::{lent, state_record, DbKey, KeyRecords, LendRequest, Lending, Lent};
use crate::conn::Conn;
use crate::durable;
use crate::exec;
use crate::shard::ShardCore;
use crate::slab::Slab;
use ahash::AHashMap;

/// An owner's side: lend the keys now, or queue the request until they are back.
pub fn lend(core: &mut ShardCore, conns: &mut Slab<Conn>, request: LendRequest) {
    let busy = request.keys.iter().any(|(db, k)| {
        core.lending.is_lent(*db, k)
            || core.lending.lent_from(*db, k)
            || (!request.now && crate::owner_tx::is_claimed(core, request.from, *db, k))
    });
    if busy {
        core.lending.waiting.push_back(request);
        return;
    }
    let mut entries = Lent::with_capacity(request.keys.len());
    for (db, key) in request.keys {
        if core.watches.any() {
            // Its watchers learn of an expiry before a transaction checks them.
            crate::watch::check_expired(core, db, &key);
        }
        let entry = core.engine.lend(db, &key, core.now_ms);
        core.lending.lent.insert((db, key.clone()));
        entries.push((db, key, entry));
    }
    count_lent(core);
    if request.from == core.id {
        lent(core, conns, request.ticket, entries);
    } else {
        core.outbox.lent(request.from, request.ticket, entries);
    }
}

/// Publish how many keys of this shard are out on loan (the script lock's quiet
/// server has none but its own command's).
fn count_lent(core: &ShardCore) {
    let lent = core.lending.lent.len() as u64;
    core.shared.shards[core.id]
        .lent
        .store(lent, std::sync::atomic::Ordering::SeqCst);
}

impl Lending {
    /// SWAPDB `a` `b` ran here: the keys out on loan from either database come
    /// back into the other one, where their database went. Their borrower still
    /// names them by the database it borrowed them from, unless the swap is one
    /// of [`Lending::holder_swapping`]: then it renames them as they move, and so
    /// does this shard.
    pub fn swap_dbs(&mut self, a: usize, b: usize) {
        let swap = |db: usize| super::swapped(db, (a, b));
        if self.holder_swapping {
            let rename = |(db, key): DbKey| (swap(db), key);
            self.lent = self.lent.drain().map(rename).collect();
            self.missed_by_snapshot = self.missed_by_snapshot.drain().map(rename).collect();
            self.moved = self
                .moved
                .drain()
                .map(|(from, now)| (rename(from), swap(now)))
                .collect();
            return;
        }
        let touches = |(db, _): &&DbKey| *db == a || *db == b;
        let touched: Vec<DbKey> = self.lent.iter().filter(touches).cloned().collect();
        if touched.is_empty() {
            return;
        }
        let lent_from: AHashMap<DbKey, usize> = self
            .moved
            .iter()
            .map(|((from, key), now)| ((*now, key.clone()), *from))
            .collect();
        let mut missed = Vec::new();
        for db_key in &touched {
            self.lent.remove(db_key);
            if self.missed_by_snapshot.remove(db_key) {
                missed.push((swap(db_key.0), db_key.1.clone()));
            }
        }
        for (now, key) in touched {
            let from = lent_from.get(&(now, key.clone())).copied().unwrap_or(now);
            match swap(now) {
                back if back == from => self.moved.remove(&(from, key.clone())),
                other => self.moved.insert((from, key.clone()), other),
            };
            self.lent.insert((swap(now), key));
        }
        self.missed_by_snapshot.extend(missed);
    }

    /// A key lent from `db` as `key` is out on loan in another database now (a
    /// SWAPDB moved it): lending `db`'s new `key` too would give two keys out under
    /// one name, so that waits until the first comes home.
    fn lent_from(&self, db: usize, key: &[u8]) -> bool {
        !self.moved.is_empty() && self.moved.contains_key(&(db, key.to_vec()))
    }

    /// The database key `key`, lent from `db`, is in now.
    fn db_now(&self, db: usize, key: &[u8]) -> usize {
        if self.moved.is_empty() {
            return db;
        }
        self.moved.get(&(db, key.to_vec())).copied().unwrap_or(db)
    }

    /// Cross-shard blocking commands waiting here (INFO `blocked_clients`).
    pub fn waiting_len(&self) -> usize {
        self.ops.values().filter(|op| op.is_parked()).count()
    }

    /// A snapshot is taken now: the keys out on loan are not in it, so their
    /// state is logged when they come home.
    pub fn snapshot_taken(&mut self) {
        self.missed_by_snapshot.extend(self.lent.iter().cloned());
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
    take_back(core, conns, entries, records);
    durable::acknowledge_given_back(core, from, ticket, mark);
}

/// An owner's side: its keys are back (changed or gone). Wake whoever waited on
/// them, then lend to the next coordinator in line.
pub fn take_back(core: &mut ShardCore, conns: &mut Slab<Conn>, entries: Lent, records: KeyRecords) {
    if let Some(wal) = core.wal.as_mut() {
        // The keys one command or transaction changed here replay together.
        wal.begin_atomic();
        for (db, record) in &records {
            // A state record's key is its second word (`state_record`).
            let db = record
                .get(1)
                .map_or(*db, |key| core.lending.db_now(*db, key));
            wal.append(db, &mut record.iter().map(Vec::as_slice));
        }
        wal.end_atomic();
    }
    for (db, key, entry) in entries {
        let (from, db) = (db, core.lending.db_now(db, &key));
        if db != from {
            core.lending.moved.remove(&(from, key.clone()));
        }
        let db_key = (db, key.clone());
        core.lending.lent.remove(&db_key);
        if core.lending.missed_by_snapshot.remove(&db_key) {
            let record = state_record(&key, entry.as_ref());
            if let (Some(wal), false) = (core.wal.as_mut(), record.is_empty()) {
                wal.append(db, &mut record.iter().map(Vec::as_slice));
            }
        }
        if let Some(entry) = entry {
            core.engine.adopt(db, entry);
        }
        core.blocking.signal(db, &key);
    }
    count_lent(core);
    exec::serve_ready(core, conns);
    crate::owner_tx::run_deferred(core, conns);
    let waiting = std::mem::take(&mut core.lending.waiting);
    for request in waiting {
        lend(core, conns, request);
    }
}
