//! [`Engine`]: the databases of one shard, the lookups every command goes through
//! (lazy expiry, keyspace hits/misses, access clock), active expiry and memory
//! accounting.

use crate::clock::EvictionPolicy;
use crate::command::ExecCtx;
use crate::keyspace::{Collection, Db, Entry, EntryId, NewValue, TtlScan};
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
    /// Hash fields removed because their expiry time passed, lazily or by active
    /// expiry (Redis 8's `expired_subkeys`).
    pub expired_fields: u64,
    /// Keys removed to stay under `maxmemory`.
    pub evicted_keys: u64,
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
/// Values at least this big are freed in slices after DEL/UNLINK/expiry.
const LAZY_FREE_BYTES_MIN: usize = 64 * 1024;
/// Nodes of lazily freed values released per active expiry call, and the share one
/// `free_some` call gets (a node is at most 64 KiB: well under a millisecond).
const LAZY_FREE_NODES_PER_CYCLE: usize = 256;
const LAZY_FREE_NODES_PER_CALL: usize = 64;
/// Bitmap words active expiry may read per key of budget, so a database with few
/// TTLs among many keys cannot make one call slow.
const TTL_WORDS_PER_BUDGET_KEY: usize = 4;
/// Hash fields active expiry may remove per key of budget: a field costs far less
/// than a key (no index lookup, a heap pop or a block move), so the same time buys
/// several.
const FIELDS_PER_BUDGET_KEY: usize = 4;

/// `hll-sparse-max-bytes`' default: where Redis promotes a sparse HLL.
pub(crate) const HLL_SPARSE_BYTES_MAX_DEFAULT: usize = 3000;

/// Encoding thresholds the families read (Redis' CONFIG parameters of the same
/// names), per shard; CONFIG SET reaches every shard.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EngineConfig {
    /// `list-max-listpack-size`: negative = node size class (-2: 8 KiB), positive =
    /// elements per node.
    pub list_max_listpack_size: i32,
    /// `list-compress-depth`: plain nodes at each end of a new quicklist, the
    /// inner ones LZF-compressed (0: none); a quicklist keeps at most 65535, as
    /// Redis's 16-bit `quicklist->compress`.
    pub list_compress_depth: u32,
    /// `hash-max-listpack-entries`: fields a packed hash may hold.
    pub hash_max_listpack_entries: usize,
    /// `hash-max-listpack-value`: longest field or value a packed hash may hold.
    pub hash_max_listpack_value: usize,
    /// `zset-max-listpack-entries`: members a packed sorted set may hold.
    pub zset_max_listpack_entries: usize,
    /// `zset-max-listpack-value`: longest member a packed sorted set may hold.
    pub zset_max_listpack_value: usize,
    /// `set-max-intset-entries`: members an all-integer set may hold as an intset.
    pub set_max_intset_entries: usize,
    /// `set-max-listpack-entries`: members a packed set may hold.
    pub set_max_listpack_entries: usize,
    /// `set-max-listpack-value`: longest member a packed set may hold.
    pub set_max_listpack_value: usize,
    /// `maxmemory-policy`: which keys go when the server is over `maxmemory`.
    pub maxmemory_policy: EvictionPolicy,
    /// `maxmemory-samples`: keys sampled per eviction.
    pub maxmemory_samples: usize,
    /// `lfu-log-factor`: how slowly the LFU counter grows.
    pub lfu_log_factor: u32,
    /// `lfu-decay-time`: minutes of no access that take one off the LFU counter.
    pub lfu_decay_time: u32,
    /// `proto-max-bulk-len`: SETBIT, GETBIT and BITFIELD refuse a bit offset whose
    /// byte is not below it, as Redis does (Ruvio's strings stop at
    /// `STRING_BYTES_MAX` whatever it says).
    pub proto_max_bulk_len: usize,
    /// Redis' `cluster-enabled`: per-shard mode, where each shard answers as a
    /// cluster node (SORT then refuses BY and GET patterns, as Redis Cluster).
    pub cluster_enabled: bool,
    /// `hll-sparse-max-bytes`: longest sparse HyperLogLog before it turns dense.
    pub hll_sparse_max_bytes: usize,
    /// `stream-node-max-entries`: entries per stream node (0: no limit).
    pub stream_node_max_entries: usize,
    /// `stream-node-max-bytes`: listpack bytes per stream node (0: no limit).
    pub stream_node_max_bytes: usize,
    /// `lazyfree-lazy-user-flush`: FLUSHALL and FLUSHDB without ASYNC or SYNC free
    /// in slices, as with ASYNC.
    pub lazyfree_lazy_user_flush: bool,
    /// DEBUG SET-SKIP-CHECKSUM-VALIDATION: RESTORE takes payloads whose CRC-64 is
    /// wrong (the version is still checked), as Redis's `skip_checksum_validation`
    /// lets its tests feed corrupt payloads to the decoder.
    pub skip_checksum_validation: bool,
}

impl EngineConfig {
    /// What a list change reads of the settings.
    pub fn list_shape(&self) -> crate::values::list::ListShape {
        crate::values::list::ListShape {
            fill: self.list_max_listpack_size,
            compress_depth: self.list_compress_depth.min(u32::from(u16::MAX)) as u16,
        }
    }
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            list_max_listpack_size: -2,
            list_compress_depth: 0,
            hash_max_listpack_entries: 128,
            hash_max_listpack_value: 64,
            zset_max_listpack_entries: 128,
            zset_max_listpack_value: 64,
            set_max_intset_entries: 512,
            set_max_listpack_entries: 128,
            set_max_listpack_value: 64,
            maxmemory_policy: EvictionPolicy::NoEviction,
            maxmemory_samples: 5,
            lfu_log_factor: 10,
            lfu_decay_time: 1,
            proto_max_bulk_len: crate::keyspace::STRING_BYTES_MAX,
            cluster_enabled: false,
            hll_sparse_max_bytes: HLL_SPARSE_BYTES_MAX_DEFAULT,
            stream_node_max_entries: crate::values::stream::value::NODE_ENTRIES_MAX,
            stream_node_max_bytes: crate::values::stream::value::NODE_BYTES_MAX,
            lazyfree_lazy_user_flush: false,
            skip_checksum_validation: false,
        }
    }
}

impl EngineConfig {
    /// How an RDB writer saves an entry's clock under this configuration.
    pub(crate) fn clock_rules(&self) -> crate::clock::ClockRules {
        crate::clock::ClockRules {
            policy: self.maxmemory_policy,
            lfu_decay_time: self.lfu_decay_time,
        }
    }
}

/// The keyspace of one shard: `databases` databases, owned outright.
pub struct Engine {
    dbs: Vec<Db>,
    config: EngineConfig,
    pub(crate) stats: EngineStats,
    rng: u64,
    /// Where active expiry resumes: database and slot.
    expire_cursor: (usize, u32),
    /// Where active hash field expiry resumes: database and slot.
    field_expire_cursor: (usize, u32),
    /// Entry chunks of flushed databases waiting to be freed in slices.
    lazy_free: Vec<Box<[Entry]>>,
    /// Deleted keys whose values are too big to free in one go, freed a slice at a
    /// time by active expiry (so DEL of a million-element list never pauses the
    /// shard), with the heap bytes they still hold.
    lazy_values: Vec<Entry>,
    lazy_value_bytes: usize,
    /// FILLGET's fill leases (see `fill`).
    pub(crate) fills: crate::leases::Leases,
    /// Eviction candidates kept between evictions (see `evict`).
    pub(crate) evict_pool: crate::evict::Pool,
    /// A buffer commands build values in before storing them at their exact size
    /// (PFADD), so building allocates nothing per call.
    pub(crate) scratch: Vec<u8>,
    /// Keys expired since the last [`Engine::take_expired`], `(db, key)`, kept only
    /// while [`Engine::record_expired`] asked for them (keyspace notifications).
    expired_log: Option<Vec<(usize, Vec<u8>)>>,
    /// Keys added and keys read but missing since the last
    /// [`Engine::take_key_notes`], kept only while [`Engine::record_key_notes`]
    /// asked for them (the `new` and `keymiss` keyspace events).
    key_notes: Option<Vec<KeyNote>>,
    /// Which notes [`Engine::record_key_notes`] asked for: added keys, missed keys.
    note_kinds: (bool, bool),
    /// FLUSHALL, FLUSHDB and SWAPDB run here so far ([`Engine::every_shard_writes`]).
    pub(crate) every_shard_writes: u64,
}

/// What happened to a key that Redis announces from the keyspace itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyNoteKind {
    /// A command added it (Redis' `dbAdd`: the `new` event).
    New,
    /// A read looked it up and it was not there (the `keymiss` event).
    Miss,
}

/// A key a command added or missed, with its place among the command's events.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyNote {
    /// What happened.
    pub kind: KeyNoteKind,
    /// How many keyspace events the command had recorded before: the note goes
    /// before event number `before`.
    pub before: usize,
    /// The database it was added to.
    pub db: usize,
    /// Its name.
    pub key: Vec<u8>,
}

/// An empty database serving as database `number`.
fn numbered_db(number: usize) -> Db {
    let mut db = Db::default();
    db.number = number;
    db
}

impl Engine {
    /// An engine with `databases` empty databases (Redis' `databases`, default 16).
    pub fn new(databases: usize) -> Engine {
        let seed = ahash::RandomState::new().hash_one(0x5EED_u64) | 1;
        Engine {
            dbs: (0..databases).map(numbered_db).collect(),
            config: EngineConfig::default(),
            stats: EngineStats::default(),
            rng: seed,
            expire_cursor: (0, 0),
            field_expire_cursor: (0, 0),
            lazy_free: Vec::new(),
            lazy_values: Vec::new(),
            lazy_value_bytes: 0,
            fills: crate::leases::Leases::default(),
            evict_pool: Default::default(),
            scratch: Vec::new(),
            expired_log: None,
            key_notes: None,
            note_kinds: (false, false),
            every_shard_writes: 0,
        }
    }

    /// FLUSHALL, FLUSHDB and SWAPDB this engine ran: a forward-mode server runs
    /// each on every shard, so the n-th of one shard is the n-th of every other
    /// (the replication stream takes each once, at the same place for all).
    pub fn every_shard_writes(&self) -> u64 {
        self.every_shard_writes
    }

    /// Keep the keys commands add (`added`) and the keys reads miss (`missed`) for
    /// [`Engine::take_key_notes`]; neither stops keeping them.
    pub fn record_key_notes(&mut self, added: bool, missed: bool) {
        self.note_kinds = (added, missed);
        match added || missed {
            true => {
                self.key_notes.get_or_insert_with(Vec::new);
            }
            false => self.key_notes = None,
        }
    }

    /// The notes since the last call, in order (none unless recorded).
    pub fn take_key_notes(&mut self) -> Vec<KeyNote> {
        self.key_notes
            .as_mut()
            .map(std::mem::take)
            .unwrap_or_default()
    }

    /// Note that the command of `ctx` adds `key` to database `db`, when asked to.
    pub(crate) fn log_new(&mut self, ctx: &ExecCtx, db: usize, key: &[u8]) {
        if self.note_kinds.0 {
            self.note_key(ctx, KeyNoteKind::New, db, key);
        }
    }

    fn note_key(&mut self, ctx: &ExecCtx, kind: KeyNoteKind, db: usize, key: &[u8]) {
        if let Some(log) = self.key_notes.as_mut() {
            let before = ctx.effects.record.as_ref().map_or(0, |r| r.events.len());
            log.push(KeyNote {
                kind,
                before,
                db,
                key: key.to_vec(),
            });
        }
    }

    /// Keep the keys that expire (lazily or actively) for [`Engine::take_expired`],
    /// or stop keeping them.
    pub fn record_expired(&mut self, on: bool) {
        match on {
            true => {
                self.expired_log.get_or_insert_with(Vec::new);
            }
            false => self.expired_log = None,
        }
    }

    /// Keys expired since the last [`take_expired`](Self::take_expired): a
    /// look that costs the request path a load and a compare.
    #[inline]
    pub fn has_expired(&self) -> bool {
        self.expired_log.as_ref().is_some_and(|log| !log.is_empty())
    }

    /// The keys expired since the last call, `(db, key)` in order (none unless
    /// recorded).
    pub fn take_expired(&mut self) -> Vec<(usize, Vec<u8>)> {
        self.expired_log
            .as_mut()
            .map(std::mem::take)
            .unwrap_or_default()
    }

    /// Note entry `id` of `db` as expired, when asked to.
    fn log_expired(&mut self, db: usize, id: EntryId) {
        if let Some(log) = self.expired_log.as_mut() {
            log.push((db, self.dbs[db].entry(id).key().to_vec()));
        }
    }

    /// Start loading the cache lines a lookup of `key` in `db` will touch, without
    /// waiting for them. The server calls this for every command of a pipelined
    /// batch before running the first one, so the batch's cache misses overlap
    /// instead of being paid one after another (they are most of a GET's cost).
    /// Returns the key's hash in `db`, for [`prefetch_value`](Self::prefetch_value).
    pub fn prefetch(&self, db: usize, key: &[u8]) -> u64 {
        self.dbs.get(db).map_or(0, |db| db.prefetch(key))
    }

    /// Second prefetch pass: with the entries of a batch on their way, start loading
    /// the values that live outside their entry. `hash` is what
    /// [`prefetch`](Self::prefetch) returned for `key` in `db` (a key's hash is
    /// computed once for both passes).
    pub fn prefetch_value(&self, db: usize, key: &[u8], hash: u64) {
        if let Some(db) = self.dbs.get(db) {
            db.prefetch_value(key, hash);
        }
    }

    /// Keys in database `db` (expired ones not yet removed included, as DBSIZE).
    pub fn key_count(&self, db: usize) -> usize {
        self.db(db).len()
    }

    /// Number of databases.
    pub fn db_count(&self) -> usize {
        self.dbs.len()
    }

    /// Make room for about `keys` keys in database `db` while it is empty (a file
    /// being loaded says how many follow; see `Index::reserve`).
    pub fn reserve_keys(&mut self, db: usize, keys: usize) {
        if db < self.db_count() {
            self.db_mut(db).reserve(keys);
        }
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

    /// `(db, table bytes, TTL bitmap bytes)` of every non-empty database (MEMORY
    /// STATS' `db.N`: see `Db::table_bytes`).
    pub fn table_bytes(&self) -> Vec<(usize, usize, usize)> {
        self.dbs
            .iter()
            .enumerate()
            .filter(|(_, db)| !db.is_empty())
            .map(|(i, db)| {
                let (table, ttl) = db.table_bytes();
                (i, table, ttl)
            })
            .collect()
    }

    /// Estimated bytes of the dataset: entry chunks, hash indexes, heap blocks, and
    /// flushed data not freed yet.
    pub fn used_memory_bytes(&self) -> usize {
        let pending =
            self.lazy_free.len() * crate::keyspace::CHUNK_SLOTS * crate::keyspace::ENTRY_BYTES;
        self.dbs.iter().map(Db::memory_bytes).sum::<usize>() + pending + self.lazy_value_bytes
    }

    /// Keys of database `db` hashing to `slot` (CLUSTER COUNTKEYSINSLOT): O(1)
    /// from the database's slot index (built on the first such question).
    pub fn count_keys_in_slot(&mut self, db: usize, slot: u16) -> usize {
        self.dbs[db].count_in_slot(slot)
    }

    /// The number of keys of database `db` in every slot, indexed by slot (CLUSTER
    /// SLOT-STATS), from the database's slot index.
    pub fn key_counts_by_slot(&mut self, db: usize) -> Vec<u64> {
        let db = &mut self.dbs[db];
        (0..crate::slot::SLOT_COUNT)
            .map(|slot| db.count_in_slot(slot) as u64)
            .collect()
    }

    /// Take `fresh`'s databases in place of these (DEBUG RELOAD): the cursors and
    /// the eviction pool, which name entries of the old ones, start over.
    pub(crate) fn adopt_databases(&mut self, fresh: Engine) {
        self.dbs = fresh.dbs;
        self.expire_cursor = (0, 0);
        self.field_expire_cursor = (0, 0);
        self.evict_pool = Default::default();
    }

    /// Up to `count` keys of database `db` in `slot` (CLUSTER GETKEYSINSLOT),
    /// from the database's slot index.
    pub fn keys_in_slot(&mut self, db: usize, slot: u16, count: usize) -> Vec<Vec<u8>> {
        self.dbs[db].keys_in_slot(slot, count)
    }

    /// Empty every database now (the server's FLUSHALL on start-up, tests).
    pub fn flush_all(&mut self) {
        crate::fault::note_mutation();
        crate::undo::mark_unrecoverable();
        for (number, db) in self.dbs.iter_mut().enumerate() {
            *db = numbered_db(number);
        }
        self.expire_cursor = (0, 0);
        self.field_expire_cursor = (0, 0);
    }

    /// Empty database `db`; with `lazy` its entries are freed in slices by
    /// [`Engine::active_expire_cycle`] instead of now.
    pub(crate) fn flush_db(&mut self, db: usize, lazy: bool) {
        crate::fault::note_mutation();
        let chunks = self.dbs[db].take_chunks();
        if lazy {
            self.lazy_free.extend(chunks);
        }
    }

    /// Free `chunks` in slices, as a lazy flush does (a snapshot's frozen slab).
    pub(crate) fn free_later(&mut self, chunks: Vec<Box<[Entry]>>) {
        self.lazy_free.extend(chunks);
    }

    /// Active expiry: examine up to `keys_budget` keys that have a TTL, starting where
    /// the previous call stopped and moving on across databases, and delete those
    /// past their time; then remove up to `keys_budget * FIELDS_PER_BUDGET_KEY` hash
    /// fields past theirs. Also frees a slice of lazily flushed data. Returns the
    /// number of keys expired plus the fields expired in key units (fields divided
    /// by `FIELDS_PER_BUDGET_KEY`); when it is a large share of `keys_budget`, call
    /// again soon (Redis repeats its cycle while more than 25% of the sample was
    /// expired).
    pub fn active_expire_cycle(&mut self, now_ms: u64, keys_budget: usize) -> usize {
        self.free_lazily(LAZY_FREE_CHUNKS_PER_CYCLE);
        if self.dbs.is_empty() {
            return 0;
        }
        let fields_budget = keys_budget.saturating_mul(FIELDS_PER_BUDGET_KEY);
        let fields = self.active_expire_fields(now_ms, fields_budget);
        self.active_expire_keys(now_ms, keys_budget) + fields.div_ceil(FIELDS_PER_BUDGET_KEY)
    }

    /// The key half of [`Engine::active_expire_cycle`]; returns the keys expired.
    fn active_expire_keys(&mut self, now_ms: u64, keys_budget: usize) -> usize {
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
                        self.log_expired(db, id);
                        self.delete(db, id);
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

    /// The field half of [`Engine::active_expire_cycle`]: visit the hashes with
    /// field expiry times (the keyspace's second bitmap) from where the previous call
    /// stopped, removing their expired fields, earliest first, until `fields_budget`
    /// fields are gone (or as many bitmap words were read); a hash left empty is
    /// deleted, as Redis does. Returns the fields removed.
    fn active_expire_fields(&mut self, now_ms: u64, fields_budget: usize) -> usize {
        let mut words_budget = fields_budget
            .saturating_mul(TTL_WORDS_PER_BUDGET_KEY)
            .max(64);
        let (mut db, mut from) = self.field_expire_cursor;
        let (mut removed, mut dbs_passed) = (0, 0);
        while removed < fields_budget && dbs_passed <= self.dbs.len() {
            db %= self.dbs.len();
            match self.dbs[db].next_with_field_ttl(from, &mut words_budget) {
                TtlScan::Found(id) => {
                    from = id + 1;
                    let due = self.dbs[db]
                        .entry(id)
                        .value()
                        .as_hash()
                        .and_then(|h| h.next_expire_at())
                        .is_some_and(|at| now_ms > at);
                    if !due {
                        continue;
                    }
                    let budget = fields_budget - removed;
                    let n = self.dbs[db].modify(id, |e| match e.value_mut() {
                        ValueMut::Hash(h) => h.remove_expired(now_ms, budget),
                        _ => 0,
                    });
                    removed += n;
                    if !self.delete_if_empty(db, id) && n == budget {
                        // Out of budget with expired fields left: resume at this hash.
                        from = id;
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
        self.field_expire_cursor = (db % self.dbs.len(), from);
        self.stats.expired_fields += removed as u64;
        removed
    }

    /// Count `n` hash fields removed lazily because their time passed.
    pub(crate) fn count_expired_fields(&mut self, n: usize) {
        self.stats.expired_fields += n as u64;
    }

    fn free_lazily(&mut self, chunks: usize) {
        let keep = self.lazy_free.len().saturating_sub(chunks);
        self.lazy_free.truncate(keep);
        let mut nodes = LAZY_FREE_NODES_PER_CYCLE;
        while nodes > 0 {
            let Some(entry) = self.lazy_values.last_mut() else {
                break;
            };
            let before = entry.heap_bytes();
            let done = entry.free_some(nodes);
            nodes = nodes.saturating_sub(LAZY_FREE_NODES_PER_CALL);
            let after = if done { 0 } else { entry.heap_bytes() };
            self.lazy_value_bytes = self.lazy_value_bytes.saturating_sub(before - after);
            if done {
                self.lazy_values.pop();
            }
        }
    }

    /// Delete entry `id` of `db`. A value holding more than [`LAZY_FREE_BYTES_MIN`]
    /// is freed in slices later (Redis' lazyfree for UNLINK and big DELs).
    pub(crate) fn delete(&mut self, db: usize, id: EntryId) {
        if let Some(entry) = self.dbs[db].delete(id) {
            self.free_deleted(entry);
        }
    }

    /// Free a deleted entry: a big one later, in slices.
    pub(crate) fn free_deleted(&mut self, entry: Entry) {
        let bytes = entry.heap_bytes();
        if bytes >= LAZY_FREE_BYTES_MIN {
            self.lazy_value_bytes += bytes;
            self.lazy_values.push(entry);
        }
    }

    // ----- helpers for the command families -----

    /// Database `i` (the server guarantees `i < db_count()`).
    pub(crate) fn dbs_iter(&self) -> impl Iterator<Item = &Db> {
        self.dbs.iter()
    }

    /// Keep `buffer` as the scratch buffer for the next call, unless it grew past
    /// what is worth keeping (a huge corrupt value must not pin its size).
    pub(crate) fn give_back_scratch(&mut self, mut buffer: Vec<u8>) {
        /// Largest scratch capacity kept between calls (a dense HLL is 12 KiB).
        const SCRATCH_KEEP_BYTES: usize = 64 << 10;
        if buffer.capacity() > SCRATCH_KEEP_BYTES {
            buffer = Vec::new();
        }
        self.scratch = buffer;
    }

    /// Bytes of values deleted but not yet freed (lazy free).
    pub(crate) fn lazy_pending_bytes(&self) -> usize {
        let chunks =
            self.lazy_free.len() * crate::keyspace::CHUNK_SLOTS * crate::keyspace::ENTRY_BYTES;
        chunks + self.lazy_value_bytes
    }

    pub(crate) fn db(&self, i: usize) -> &Db {
        &self.dbs[i]
    }

    /// Database `i`, mutable.
    pub(crate) fn db_mut(&mut self, i: usize) -> &mut Db {
        &mut self.dbs[i]
    }

    /// Swap two databases (SWAPDB).
    pub(crate) fn swap_dbs(&mut self, a: usize, b: usize) {
        crate::fault::note_mutation();
        self.dbs.swap(a, b);
        self.dbs[a].number = a;
        self.dbs[b].number = b;
        crate::keyspace::journal::record(crate::keyspace::journal::Step::Swapped { a, b });
    }

    /// MOVE: entry `id` of `from` goes on in database `to` (where its key is
    /// absent).
    pub(crate) fn move_entry(&mut self, from: usize, id: EntryId, to: usize) {
        let entry = self.dbs[from].unlink(id);
        let key = crate::undo::recording().then(|| entry.key().to_vec());
        let new_id = self.dbs[to].link(entry, None);
        if let Some(key) = key {
            crate::keyspace::journal::record(crate::keyspace::journal::Step::Moved {
                from: (from, id),
                to: (to, new_id),
                key,
            });
        }
    }

    /// A pseudo-random number (RANDOMKEY; the server's pick of a shard for it).
    pub fn next_random(&mut self) -> u64 {
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
        self.log_expired(db, id);
        self.delete(db, id);
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
                None => {
                    self.stats.keyspace_misses += 1;
                    if self.note_kinds.1 {
                        self.note_key(ctx, KeyNoteKind::Miss, db, key);
                    }
                }
            }
        }
        if let Some(id) = found {
            if how.touch && !ctx.no_touch {
                let old = self.dbs[db].entry(id).clock();
                let clock = self.touched_clock(old, ctx.now_ms);
                self.dbs[db].touch(id, clock);
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
    pub(crate) fn add_collection(
        &mut self,
        ctx: &ExecCtx,
        key: &[u8],
        value: Collection,
    ) -> EntryId {
        let clock = self.new_clock(ctx.now_ms);
        self.log_new(ctx, ctx.db, key);
        self.dbs[ctx.db].insert(Entry::new_collection(key, value, clock))
    }

    /// Change the collection of entry `id` of `db` in place through `change`; the
    /// database's heap accounting follows (collections report their bytes in O(1)).
    /// A big collection's mutators record their inverses for the undo journal
    /// meanwhile (see `undo::keep_preimage`).
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
    pub(crate) fn delete_if_empty(&mut self, db: usize, id: EntryId) -> bool {
        let empty = self.dbs[db].entry(id).value().is_empty_collection();
        if empty {
            self.delete(db, id);
        }
        empty
    }

    /// True when `key` exists in database `db` at `now_ms` (no statistics, no access
    /// time: a server-side probe).
    pub fn exists(&self, db: usize, key: &[u8], now_ms: u64) -> bool {
        let Some(found) = self.dbs.get(db).and_then(|d| d.find(key)) else {
            return false;
        };
        !self.is_expired(db, found, now_ms)
    }

    /// The entry of `key` in database `db` if it exists at `now_ms` (no statistics,
    /// no access time: the server reads it to log its state).
    pub fn peek_entry(&self, db: usize, key: &[u8], now_ms: u64) -> Option<&Entry> {
        let found = self.dbs.get(db)?.find(key)?;
        (!self.is_expired(db, found, now_ms)).then(|| self.dbs[db].entry(found))
    }

    /// True when `key` exists and is not a stream: a value a blocked command may be
    /// able to take now. A stream exists whether or not it holds anything new for
    /// a waiting XREAD, so only a write to it wakes one.
    pub fn exists_for_waiter(&self, db: usize, key: &[u8], now_ms: u64) -> bool {
        let Some(found) = self.dbs.get(db).and_then(|d| d.find(key)) else {
            return false;
        };
        let stream = self.db(db).entry(found).value().as_stream().is_some();
        !stream && !self.is_expired(db, found, now_ms)
    }

    /// Take `key` out of database `db` whole (value, expiry, access clock) to hand it
    /// to another shard for one command (forward mode's cross-shard commands). A key
    /// past its expiry is deleted and reported missing, as any lookup would.
    pub fn lend(&mut self, db: usize, key: &[u8], now_ms: u64) -> Option<Entry> {
        let id = self.dbs.get(db)?.find(key)?;
        if self.is_expired(db, id, now_ms) {
            self.expire_now(db, id);
            return None;
        }
        Some(self.dbs[db].remove(id))
    }

    /// Put an entry lent by [`lend`](Self::lend) into database `db`, replacing a
    /// key of the same name. A running command's undo journal records neither
    /// (a script borrowing keys as it runs): rolled back, the command leaves the
    /// loan here as it came, to go home.
    pub fn adopt(&mut self, db: usize, entry: Entry) {
        if let Some(existing) = self.dbs[db].find(entry.key()) {
            let replaced = self.dbs[db].unlink(existing);
            self.free_deleted(replaced);
        }
        crate::fault::note_mutation();
        self.dbs[db].link(entry, None);
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
        let clock = self.new_clock(ctx.now_ms);
        if existing.is_none() {
            self.log_new(ctx, ctx.db, key);
        }
        // An overwrite keeps the key's access frequency (Redis' dbOverwrite).
        let keep_clock = self.config.maxmemory_policy.is_lfu();
        let db = &mut self.dbs[ctx.db];
        match existing {
            Some(id) => {
                db.modify(id, |e| {
                    e.set_value(value);
                    if !keep_clock {
                        e.set_clock(clock);
                    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::values::list::{End, ListValue};

    #[test]
    fn a_big_deleted_list_is_freed_in_slices() {
        let mut engine = Engine::new(1);
        let mut list = ListValue::new();
        for i in 0..300_000u32 {
            list.push(
                End::Tail,
                format!("{i:032}").as_bytes(),
                crate::values::list::ListShape::with_fill(-2),
            );
        }
        let ctx = ExecCtx::new(0, 1);
        let id = engine.add_collection(&ctx, b"big", Collection::List(list));
        let held = engine.used_memory_bytes();
        engine.delete(0, id);
        assert_eq!(engine.db(0).len(), 0);
        assert!(engine.used_memory_bytes() * 2 > held, "freed at once");
        let mut cycles = 0;
        while !engine.lazy_values.is_empty() {
            engine.active_expire_cycle(1, 10);
            cycles += 1;
            assert!(cycles < 10_000);
        }
        assert!(cycles > 1, "one cycle freed it all");
        assert_eq!(engine.lazy_value_bytes, 0);
    }
}
