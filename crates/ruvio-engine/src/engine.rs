//! [`Engine`]: the databases of one shard, the lookups every command goes through
//! (lazy expiry, keyspace hits/misses, access clock), active expiry and memory
//! accounting.

use crate::command::{EngineCommand, ExecCtx};
use crate::keyspace::{Collection, Db, Entry, EntryId, NewValue, TtlScan, CLOCK_MASK};
use crate::slot::key_slot;
use crate::value::ValueMut;

/// Counters INFO `stats` reports.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EngineStats {
    /// Keys removed because their TTL passed (lazily or by active expiry).
    pub expired_keys: u64,
    /// Read lookups that found their key.
    pub keyspace_hits: u64,
    /// Read lookups that did not.
    pub keyspace_misses: u64,
}

/// How a lookup behaves (Redis' `LOOKUP_*` flags).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Lookup {
    /// Update the access clock (unless the client set CLIENT NO-TOUCH).
    pub touch: bool,
    /// Count a keyspace hit or miss.
    pub stats: bool,
}

impl Lookup {
    /// `lookupKeyRead`.
    pub const READ: Lookup = Lookup {
        touch: true,
        stats: true,
    };
    /// `lookupKeyReadWithFlags(LOOKUP_NOTOUCH)` (EXISTS, TYPE, TTL, OBJECT).
    pub const READ_NOTOUCH: Lookup = Lookup {
        touch: false,
        stats: true,
    };
    /// `lookupKeyWrite`.
    pub const WRITE: Lookup = Lookup {
        touch: true,
        stats: false,
    };
}

/// Chunks of lazily freed entries (FLUSHALL ASYNC) released per active expiry call:
/// 16 x 1024 entries is well under a millisecond even when each owns a heap block.
const LAZY_FREE_CHUNKS_PER_CYCLE: usize = 16;
/// Bitmap words active expiry may read per key of budget, so a database with few
/// TTLs among many keys cannot make one call slow.
const TTL_WORDS_PER_BUDGET_KEY: usize = 4;

/// Encoding thresholds the families read (Redis' CONFIG parameters of the same
/// names), per shard; CONFIG SET reaches every shard.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EngineConfig {
    /// `list-max-listpack-size`: negative = node size class (-2: 8 KiB), positive =
    /// elements per node.
    pub list_max_listpack_size: i32,
    /// `hash-max-listpack-entries`: fields a packed hash may hold.
    pub hash_max_listpack_entries: usize,
    /// `hash-max-listpack-value`: longest field or value a packed hash may hold.
    pub hash_max_listpack_value: usize,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            list_max_listpack_size: -2,
            hash_max_listpack_entries: 128,
            hash_max_listpack_value: 64,
        }
    }
}

/// The keyspace of one shard: `databases` databases, owned outright.
pub struct Engine {
    dbs: Vec<Db>,
    config: EngineConfig,
    stats: EngineStats,
    rng: u64,
    /// Where active expiry resumes: database and slot.
    expire_cursor: (usize, u32),
    /// Entry chunks of flushed databases waiting to be freed in slices.
    lazy_free: Vec<Box<[Entry]>>,
}

/// Redis' LRU clock: seconds, 24 bits.
pub(crate) fn clock_of(now_ms: u64) -> u32 {
    ((now_ms / 1000) as u32) & CLOCK_MASK
}

impl Engine {
    /// An engine with `databases` empty databases (Redis' `databases`, default 16).
    pub fn new(databases: usize) -> Engine {
        let seed = ahash::RandomState::new().hash_one(0x5EED_u64) | 1;
        Engine {
            dbs: (0..databases).map(|_| Db::default()).collect(),
            config: EngineConfig::default(),
            stats: EngineStats::default(),
            rng: seed,
            expire_cursor: (0, 0),
            lazy_free: Vec::new(),
        }
    }

    /// Every command the engine implements (all families' tables).
    pub fn commands() -> impl Iterator<Item = &'static EngineCommand> {
        crate::strings::COMMANDS
            .iter()
            .chain(crate::keys::COMMANDS.iter())
    }

    /// The top-level command named `name` (lower case).
    pub fn command(name: &str) -> Option<&'static EngineCommand> {
        Self::commands().find(|c| c.meta.name == name)
    }

    /// The top-level row named `name`, case-insensitively; a container's subcommand
    /// is then [`resolve`](crate::command::CommandTree::resolve)d from the arguments.
    pub fn find_command(name: &[u8]) -> Option<&'static EngineCommand> {
        Self::commands().find(|c| name.eq_ignore_ascii_case(c.meta.name.as_bytes()))
    }

    /// Start loading the cache lines a lookup of `key` in `db` will touch, without
    /// waiting for them. The server calls this for every command of a pipelined
    /// batch before running the first one, so the batch's cache misses overlap
    /// instead of being paid one after another (they are most of a GET's cost).
    pub fn prefetch(&self, db: usize, key: &[u8]) {
        if let Some(db) = self.dbs.get(db) {
            db.prefetch(key);
        }
    }

    /// Second prefetch pass: with the entries of a batch on their way, start loading
    /// the values that live outside their entry.
    pub fn prefetch_value(&self, db: usize, key: &[u8]) {
        if let Some(db) = self.dbs.get(db) {
            db.prefetch_value(key);
        }
    }

    /// Number of databases.
    pub fn db_count(&self) -> usize {
        self.dbs.len()
    }

    /// Validate a SELECT argument: `Ok(index)` or Redis' error (`ERR invalid DB
    /// index` / `ERR DB index is out of range`).
    pub fn parse_db_index(&self, arg: &[u8]) -> Result<usize, crate::CmdError> {
        use crate::error::CmdError;
        let id = crate::args::i32_arg(arg, CmdError::InvalidDbIndex)?;
        usize::try_from(id)
            .ok()
            .filter(|&i| i < self.dbs.len())
            .ok_or(CmdError::DbIndexOutOfRange)
    }

    /// The encoding thresholds.
    pub fn config(&self) -> &EngineConfig {
        &self.config
    }

    /// The encoding thresholds, for CONFIG SET.
    pub fn config_mut(&mut self) -> &mut EngineConfig {
        &mut self.config
    }

    /// Counters for INFO stats.
    pub fn stats(&self) -> &EngineStats {
        &self.stats
    }

    /// CONFIG RESETSTAT.
    pub fn reset_stats(&mut self) {
        self.stats = EngineStats::default();
    }

    /// `(db, keys, keys with a TTL)` for every non-empty database (INFO keyspace).
    pub fn keyspace_info(&self) -> Vec<(usize, usize, usize)> {
        self.dbs
            .iter()
            .enumerate()
            .filter(|(_, db)| !db.is_empty())
            .map(|(i, db)| (i, db.len(), db.volatile_len()))
            .collect()
    }

    /// Estimated bytes of the dataset: entry chunks, hash indexes, heap blocks, and
    /// flushed data not freed yet.
    pub fn used_memory_bytes(&self) -> usize {
        let pending =
            self.lazy_free.len() * crate::keyspace::CHUNK_SLOTS * crate::keyspace::ENTRY_BYTES;
        self.dbs.iter().map(Db::memory_bytes).sum::<usize>() + pending
    }

    /// Keys of database `db` hashing to `slot` (CLUSTER COUNTKEYSINSLOT). Walks the
    /// database: O(keys), fine for the rare resharding commands.
    pub fn count_keys_in_slot(&self, db: usize, slot: u16) -> usize {
        self.dbs[db]
            .iter()
            .filter(|(_, e)| key_slot(e.key()) == slot)
            .count()
    }

    /// Up to `count` keys of database `db` in `slot` (CLUSTER GETKEYSINSLOT).
    pub fn keys_in_slot(&self, db: usize, slot: u16, count: usize) -> Vec<Vec<u8>> {
        self.dbs[db]
            .iter()
            .filter(|(_, e)| key_slot(e.key()) == slot)
            .take(count)
            .map(|(_, e)| e.key().to_vec())
            .collect()
    }

    /// Empty every database now (the server's FLUSHALL on start-up, tests).
    pub fn flush_all(&mut self) {
        for db in &mut self.dbs {
            *db = Db::default();
        }
        self.expire_cursor = (0, 0);
    }

    /// Empty database `db`; with `lazy` its entries are freed in slices by
    /// [`Engine::active_expire_cycle`] instead of now.
    pub(crate) fn flush_db(&mut self, db: usize, lazy: bool) {
        let chunks = self.dbs[db].take_chunks();
        if lazy {
            self.lazy_free.extend(chunks);
        }
    }

    /// Active expiry: examine up to `keys_budget` keys that have a TTL, starting where
    /// the previous call stopped and moving on across databases, and delete those
    /// past their time. Also frees a slice of lazily flushed data. Returns the number
    /// of keys expired; when it is a large share of `keys_budget`, call again soon
    /// (Redis repeats its cycle while more than 25% of the sample was expired).
    pub fn active_expire_cycle(&mut self, now_ms: u64, keys_budget: usize) -> usize {
        self.free_lazily(LAZY_FREE_CHUNKS_PER_CYCLE);
        if self.dbs.is_empty() {
            return 0;
        }
        let mut words_budget = keys_budget.saturating_mul(TTL_WORDS_PER_BUDGET_KEY).max(64);
        let (mut db, mut from) = self.expire_cursor;
        let (mut examined, mut expired, mut dbs_passed) = (0, 0, 0);
        while examined < keys_budget && dbs_passed <= self.dbs.len() {
            db %= self.dbs.len();
            let scan = if self.dbs[db].volatile_len() == 0 {
                TtlScan::End
            } else {
                self.dbs[db].next_with_ttl(from, &mut words_budget)
            };
            match scan {
                TtlScan::Found(id) => {
                    examined += 1;
                    from = id + 1;
                    if self.dbs[db]
                        .entry(id)
                        .expire_at()
                        .is_some_and(|at| now_ms > at)
                    {
                        self.dbs[db].remove(id);
                        expired += 1;
                    }
                }
                TtlScan::End => {
                    db += 1;
                    from = 0;
                    dbs_passed += 1;
                }
                TtlScan::Budget(next) => {
                    from = next;
                    break;
                }
            }
        }
        self.expire_cursor = (db % self.dbs.len(), from);
        self.stats.expired_keys += expired as u64;
        expired
    }

    fn free_lazily(&mut self, chunks: usize) {
        let keep = self.lazy_free.len().saturating_sub(chunks);
        self.lazy_free.truncate(keep);
    }

    // ----- helpers for the command families -----

    /// Database `i` (the server guarantees `i < db_count()`).
    pub(crate) fn db(&self, i: usize) -> &Db {
        &self.dbs[i]
    }

    /// Database `i`, mutable.
    pub(crate) fn db_mut(&mut self, i: usize) -> &mut Db {
        &mut self.dbs[i]
    }

    /// Swap two databases (SWAPDB).
    pub(crate) fn swap_dbs(&mut self, a: usize, b: usize) {
        self.dbs.swap(a, b);
    }

    /// A pseudo-random number (RANDOMKEY).
    pub(crate) fn next_random(&mut self) -> u64 {
        // xorshift64*: plenty for picking keys.
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        self.rng.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// True when entry `id` of `db` is past its expiry at `now_ms` (Redis: `now > when`).
    pub(crate) fn is_expired(&self, db: usize, id: EntryId, now_ms: u64) -> bool {
        self.dbs[db]
            .entry(id)
            .expire_at()
            .is_some_and(|at| now_ms > at)
    }

    /// Delete entry `id` because it expired.
    pub(crate) fn expire_now(&mut self, db: usize, id: EntryId) {
        self.dbs[db].remove(id);
        self.stats.expired_keys += 1;
    }

    /// Find `key` in database `db` the way Redis' `lookupKey` does: an expired key is
    /// deleted and reported missing; `how` decides the access clock and hit/miss stats.
    pub(crate) fn lookup(
        &mut self,
        ctx: &ExecCtx,
        db: usize,
        key: &[u8],
        how: Lookup,
    ) -> Option<EntryId> {
        let mut found = self.dbs[db].find(key);
        if let Some(id) = found {
            if self.is_expired(db, id, ctx.now_ms) {
                self.expire_now(db, id);
                found = None;
            }
        }
        if how.stats {
            match found {
                Some(_) => self.stats.keyspace_hits += 1,
                None => self.stats.keyspace_misses += 1,
            }
        }
        if let Some(id) = found {
            if how.touch && !ctx.no_touch {
                self.dbs[db].touch(id, clock_of(ctx.now_ms));
            }
        }
        found
    }

    /// `lookupKeyRead` in the client's database.
    pub(crate) fn lookup_read(&mut self, ctx: &ExecCtx, key: &[u8]) -> Option<EntryId> {
        self.lookup(ctx, ctx.db, key, Lookup::READ)
    }

    /// `lookupKeyWrite` in the client's database.
    pub(crate) fn lookup_write(&mut self, ctx: &ExecCtx, key: &[u8]) -> Option<EntryId> {
        self.lookup(ctx, ctx.db, key, Lookup::WRITE)
    }

    /// Add `key` (absent: a write lookup found nothing) holding `value` in the
    /// client's database, without expiry.
    #[allow(dead_code)] // until the list commands land
    pub(crate) fn add_collection(
        &mut self,
        ctx: &ExecCtx,
        key: &[u8],
        value: Collection,
    ) -> EntryId {
        let clock = clock_of(ctx.now_ms);
        self.dbs[ctx.db].insert(Entry::new_collection(key, value, clock))
    }

    /// Change the collection of entry `id` of `db` in place through `change`; the
    /// database's heap accounting follows (collections report their bytes in O(1)).
    #[allow(dead_code)] // until the list commands land
    pub(crate) fn modify_value<R>(
        &mut self,
        db: usize,
        id: EntryId,
        change: impl FnOnce(ValueMut<'_>) -> R,
    ) -> R {
        self.dbs[db].modify(id, |e| change(e.value_mut()))
    }

    /// Delete entry `id` of `db` when its collection is empty (Redis never keeps an
    /// empty list or hash). True when it was deleted.
    #[allow(dead_code)] // until the list commands land
    pub(crate) fn delete_if_empty(&mut self, db: usize, id: EntryId) -> bool {
        let empty = self.dbs[db].entry(id).value().is_empty_collection();
        if empty {
            self.dbs[db].remove(id);
        }
        empty
    }

    /// Redis' `setKey`: store `value` under `key` in the client's database, replacing
    /// `existing` (the id a write lookup returned). The TTL is dropped unless
    /// `keep_ttl`. Returns the entry's id.
    pub(crate) fn set_key(
        &mut self,
        ctx: &ExecCtx,
        key: &[u8],
        existing: Option<EntryId>,
        value: NewValue<'_>,
        keep_ttl: bool,
    ) -> EntryId {
        let clock = clock_of(ctx.now_ms);
        let db = &mut self.dbs[ctx.db];
        match existing {
            Some(id) => {
                db.modify(id, |e| {
                    e.set_value(value);
                    e.set_clock(clock);
                });
                if !keep_ttl {
                    db.set_expire(id, None);
                }
                id
            }
            None => db.insert(Entry::new(key, value, clock)),
        }
    }
}
