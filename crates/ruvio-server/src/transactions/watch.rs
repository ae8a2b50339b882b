//! WATCH: optimistic locking for MULTI/EXEC (see docs/transactions.md).
//!
//! A watched key is registered with the shard that owns it, in that shard's
//! [`Watches`] table, with the client's shard, id and watch epoch. When the owner
//! writes the key (any client, a lent key coming back written, an expiry, a flush)
//! every watcher is *touched*: the client's own shard notes `(client id, epoch)`, by
//! a [`ShardMsg::Touched`](crate::mesh::forward::ShardMsg) message when it is another
//! shard. EXEC runs only when the client's current epoch is not touched.
//!
//! Why epochs: UNWATCH (and EXEC, DISCARD, RESET) start a new epoch instead of
//! waiting for every owner to confirm, so a touch still in flight for the old
//! watches cannot abort a later transaction; and an owner told to forget drops
//! only the watches of the epochs that ended, so a WATCH of the next epoch that
//! reached it first is kept.
//!
//! Why this is exact across shards: a WATCH answers only once every owner has
//! registered the keys, and EXEC borrows the watched keys with the others (see
//! [`crate::mesh::lending`]). Messages between two shards arrive in order, so a touch an
//! owner sent before lending a key has arrived before the key has, and no write can
//! happen between the check and the transaction: the keys are out on loan.
//!
//! Cost: nothing while no key of a shard is watched (one emptiness test per engine
//! command); otherwise the engine records the keys each command writes and each is
//! looked up in the table.

use crate::mesh::forward::Outbox;
use crate::mesh::lending::DbKey;
use ahash::AHashMap;
use ruvio_engine::Engine;

/// One client watching a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Watcher {
    /// The shard the client is connected to.
    shard: usize,
    client_id: u64,
    epoch: u64,
    /// The key existed and was not expired when it was watched: its expiry
    /// touches the watcher (Redis 7: a key already expired at WATCH that is then
    /// deleted is no change).
    alive: bool,
}

/// This shard's watched keys, and its clients whose watches were touched.
#[derive(Debug, Default)]
pub struct Watches {
    keys: AHashMap<DbKey, Vec<Watcher>>,
    /// Client id -> the epoch that was touched.
    touched: AHashMap<u64, u64>,
}

impl Watches {
    /// True when some key of this shard is watched: only then do commands record
    /// the keys they write.
    pub fn any(&self) -> bool {
        !self.keys.is_empty()
    }

    /// True when the watches of `client_id`'s `epoch` were touched.
    pub fn is_touched(&self, client_id: u64, epoch: u64) -> bool {
        self.touched.get(&client_id) == Some(&epoch)
    }

    /// Forget the touch of a client that starts a new epoch or goes away.
    pub fn clear_touched(&mut self, client_id: u64) {
        self.touched.remove(&client_id);
    }

    /// Note a touch of one of this shard's clients (from here or another shard).
    /// A touch of an older epoch arriving late never hides a newer one.
    pub fn mark_touched(&mut self, client_id: u64, epoch: u64) {
        let touched = self.touched.entry(client_id).or_insert(epoch);
        *touched = (*touched).max(epoch);
    }
}

/// Who watches: a client of `shard`, in its watch `epoch`.
#[derive(Debug, Clone, Copy)]
pub struct WatchingClient {
    pub shard: usize,
    pub client_id: u64,
    pub epoch: u64,
}

/// Where a touch goes: this shard's own table, or the client's shard over the mesh.
pub struct Notify<'a> {
    /// This shard.
    pub shard: usize,
    pub outbox: &'a mut Outbox,
}

impl Watches {
    /// The owner's side of WATCH: register `keys` of `db` for `client`; `engine`
    /// says which keys are alive now.
    pub fn register(
        &mut self,
        engine: &Engine,
        now_ms: u64,
        client: WatchingClient,
        db: usize,
        keys: &[Vec<u8>],
    ) {
        let WatchingClient {
            shard,
            client_id,
            epoch,
        } = client;
        for key in keys {
            let alive = engine.exists(db, key, now_ms);
            let watcher = Watcher {
                shard,
                client_id,
                epoch,
                alive,
            };
            let watchers = self.keys.entry((db, key.clone())).or_default();
            if !watchers
                .iter()
                .any(|w| w.shard == shard && w.client_id == client_id && w.epoch == epoch)
            {
                watchers.push(watcher);
            }
        }
    }

    /// The owner's side of UNWATCH: forget `client_id`'s watches of `keys` in
    /// epochs below `below_epoch`. A watch of a later epoch stays: while a script
    /// keeps a shard busy, a client's UNWATCH and its next WATCH may reach an
    /// owner in the other order (the WATCH registered as the script ends, the
    /// UNWATCH's message handled after: `shard::busy`).
    pub fn unregister(&mut self, client_id: u64, below_epoch: u64, keys: &[DbKey]) {
        for key in keys {
            if let Some(watchers) = self.keys.get_mut(key) {
                watchers.retain(|w| w.client_id != client_id || w.epoch >= below_epoch);
                if watchers.is_empty() {
                    self.keys.remove(key);
                }
            }
        }
    }

    /// Key `key` of `db` was written on this shard: touch its watchers. (An expiry
    /// is not a write here: [`Watches::check_expired`] handles it, with Redis 7's rule.)
    pub fn touch(&mut self, to: Notify<'_>, db: usize, key: &[u8]) {
        // Nothing watched (the usual case): no key copied to ask.
        if self.keys.is_empty() {
            return;
        }
        if let Some(watchers) = self.keys.remove(&(db, key.to_vec())) {
            self.notify_all(to, watchers);
        }
    }

    /// A watched key of this shard that was alive when watched and is expired (or
    /// gone) now touches those watchers, as its expiry would in Redis. Called before
    /// EXEC looks at the touches (and before the key is lent to a coordinating EXEC).
    pub fn check_expired(
        &mut self,
        engine: &Engine,
        now_ms: u64,
        to: Notify<'_>,
        db: usize,
        key: &[u8],
    ) {
        if self.keys.is_empty() {
            return;
        }
        let Some(watchers) = self.keys.get(&(db, key.to_vec())) else {
            return;
        };
        if engine.exists(db, key, now_ms) || !watchers.iter().any(|w| w.alive) {
            return;
        }
        let watchers = self.keys.remove(&(db, key.to_vec())).unwrap_or_default();
        let (expired, kept): (Vec<Watcher>, Vec<Watcher>) =
            watchers.into_iter().partition(|w| w.alive);
        self.notify_all(to, expired);
        if !kept.is_empty() {
            self.keys.insert((db, key.to_vec()), kept);
        }
    }

    /// FLUSHDB, FLUSHALL and SWAPDB touch the watched keys that exist in a database
    /// they empty or replace (`dbs`), as Redis' touchAllWatchedKeysInDb.
    pub fn flush(&mut self, engine: &Engine, now_ms: u64, to: Notify<'_>, dbs: &[usize]) {
        let hit: Vec<DbKey> = self
            .keys
            .keys()
            .filter(|(db, key)| {
                dbs.contains(db) && dbs.iter().any(|&d| engine.exists(d, key, now_ms))
            })
            .cloned()
            .collect();
        for (db, key) in hit {
            if let Some(watchers) = self.keys.remove(&(db, key)) {
                let to = Notify {
                    shard: to.shard,
                    outbox: &mut *to.outbox,
                };
                self.notify_all(to, watchers);
            }
        }
    }

    fn notify_all(&mut self, to: Notify<'_>, watchers: Vec<Watcher>) {
        for w in watchers {
            if w.shard == to.shard {
                self.mark_touched(w.client_id, w.epoch);
            } else {
                to.outbox.touched(w.shard, w.client_id, w.epoch);
            }
        }
    }
}

/// The databases a keyless write empties or replaces, for the commands that
/// touch every watched key of a database (FLUSHDB, FLUSHALL, SWAPDB).
pub fn flushed_dbs(
    engine: &Engine,
    name: &str,
    db: usize,
    args: ruvio_resp::Args<'_>,
) -> Vec<usize> {
    match name {
        "flushdb" => vec![db],
        "flushall" => (0..engine.db_count()).collect(),
        "swapdb" => (1..3)
            .filter_map(|i| engine.parse_db_index(args.get(i)).ok())
            .collect(),
        _ => Vec::new(),
    }
}
