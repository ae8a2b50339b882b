//! Server statistics. Each shard counts into its own plain fields (no atomics on
//! the request path) and publishes a snapshot into [`Shared`] on every background
//! tick, so INFO on any shard can report the whole server (at most one tick stale
//! for the other shards).
//!
//! CONFIG RESETSTAT on any shard starts a new statistics *epoch*: every shard resets
//! its counters when the broadcast reaches it, and until it has published counters of
//! the new epoch, readers count it as zero. So INFO right after RESETSTAT never shows
//! counts from before it, on any shard.

use ahash::AHashMap;
use ruvio_engine::CmdError;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;
use std::time::Instant;

/// Counters of one shard, owned by that shard.
#[derive(Debug, Default)]
pub struct ShardStats {
    pub commands: u64,
    pub connections_received: u64,
    /// Connections refused at `maxclients`.
    pub rejected_connections: u64,
    pub net_input_bytes: u64,
    pub net_output_bytes: u64,
    /// Changes to the dataset (Redis' `dirty`, INFO `rdb_changes_since_last_save`).
    pub dirty: u64,
    /// `dirty` when this shard last saved a snapshot.
    pub dirty_at_save: u64,
    /// Per command id: calls, sampled microseconds, failed calls.
    pub per_command: Vec<CommandStat>,
    /// Error replies by their code (the first word: `ERR`, `WRONGTYPE` ...), for INFO
    /// errorstats.
    pub errors: AHashMap<Box<str>, u64>,
    /// The statistics epoch these counters belong to (see the module docs).
    pub epoch: u64,
    /// `instantaneous_ops_per_sec`'s samples.
    pub ops: OpsSampler,
}

/// Distinct error codes INFO errorstats tracks, as Redis' `ERROR_STATS_NUMBER`: a
/// client inventing codes (a script's `redis.error_reply`) cannot grow the table.
const ERROR_CODES_MAX: usize = 128;

impl ShardStats {
    /// Count one error reply under its code.
    pub fn count_error(&mut self, error: &CmdError) {
        let message = error.message();
        let code = message.split(' ').next().unwrap_or_default();
        if let Some(n) = self.errors.get_mut(code) {
            *n += 1;
        } else if self.errors.len() < ERROR_CODES_MAX {
            self.errors.insert(code.into(), 1);
        }
    }
}

/// Redis' instantaneous_ops_per_sec: the mean rate over the last 16 samples taken
/// every 100 ms.
#[derive(Debug, Default)]
pub struct OpsSampler {
    samples: [u64; OPS_SAMPLES],
    next: usize,
    last_ms: u64,
    last_commands: u64,
}

const OPS_SAMPLES: usize = 16;
const OPS_SAMPLE_EVERY_MS: u64 = 100;

impl OpsSampler {
    /// Take a sample if 100 ms passed; `commands` is the shard's running count.
    pub fn tick(&mut self, now_ms: u64, commands: u64) {
        let elapsed = now_ms.saturating_sub(self.last_ms);
        if elapsed < OPS_SAMPLE_EVERY_MS {
            return;
        }
        let done = commands.saturating_sub(self.last_commands);
        self.samples[self.next] = done * 1000 / elapsed.max(1);
        self.next = (self.next + 1) % OPS_SAMPLES;
        self.last_ms = now_ms;
        self.last_commands = commands;
    }

    /// Operations per second, averaged over the samples.
    pub fn per_sec(&self) -> u64 {
        self.samples.iter().sum::<u64>() / OPS_SAMPLES as u64
    }
}

/// What a shard publishes of its tables on every tick (read under a lock that only
/// INFO and the tick take).
#[derive(Debug, Default)]
pub struct StatTables {
    pub epoch: u64,
    pub per_command: Vec<CommandStat>,
    pub errors: Vec<(Box<str>, u64)>,
}

/// INFO commandstats for one command.
#[derive(Debug, Default, Clone, Copy)]
pub struct CommandStat {
    pub calls: u64,
    /// Sum of sampled durations, scaled by the sampling rate.
    pub usec: u64,
    pub failed: u64,
    pub rejected: u64,
}

/// One timing sample every this many calls of a command: timing every call costs
/// nearly as much as a GET (seed 001, the Valkey fast-path PR).
pub const TIMING_SAMPLE_EVERY: u64 = 64;

/// What a shard publishes for the others to read.
#[derive(Debug, Default)]
pub struct ShardGauges {
    pub clients: AtomicU64,
    pub commands: AtomicU64,
    pub connections_received: AtomicU64,
    pub rejected_connections: AtomicU64,
    pub net_input_bytes: AtomicU64,
    pub net_output_bytes: AtomicU64,
    pub expired_keys: AtomicU64,
    pub keyspace_hits: AtomicU64,
    pub keyspace_misses: AtomicU64,
    /// Bytes the shard's keyspace reuses before allocating (see `memory`).
    pub reusable_bytes: AtomicU64,
    /// Bytes of the shard's dataset, as its engine estimates them (see `memory`).
    pub dataset_bytes: AtomicU64,
    pub evicted_keys: AtomicU64,
    pub blocked_clients: AtomicU64,
    pub dirty: AtomicU64,
    pub ops_per_sec: AtomicU64,
    /// 1 once the shard's write-ahead log failed (INFO aof_last_write_status).
    pub wal_failed: AtomicU64,
    /// `dirty` at the shard's last snapshot.
    pub dirty_at_save: AtomicU64,
    /// The statistics epoch of the counters above (see the module docs).
    pub epoch: AtomicU64,
    /// Commands of the shard borrowing keys now, and keys of the shard out on
    /// loan (see `script_lock`).
    pub borrowing: AtomicU64,
    pub lent: AtomicU64,
    /// Per database: keys and keys with a TTL.
    pub keys: Vec<(AtomicU64, AtomicU64)>,
    pub tables: Mutex<StatTables>,
}

/// State every shard can read: gauges, the client id counter, identity.
#[derive(Debug)]
pub struct Shared {
    pub shards: Vec<ShardGauges>,
    next_client_id: AtomicU64,
    pub started: Instant,
    /// Unix seconds of the last completed SAVE (the start time before one).
    pub last_save_unix_s: AtomicU64,
    pub run_id: String,
    /// Which shard holds each blocked client's parked command (CLIENT UNBLOCK may
    /// arrive on any shard). Touched only when a client blocks or is released,
    /// never on the request path of other commands.
    blocked_clients: Mutex<AHashMap<u64, usize>>,
    /// The current statistics epoch (CONFIG RESETSTAT starts the next one).
    stats_epoch: AtomicU64,
    /// Connections open on every shard (`maxclients` counts them).
    open_clients: AtomicU64,
    /// Every shard's Pub/Sub subscribers.
    pub pubsub: crate::messaging::pubsub::Subscribers,
    /// Every shard's running script and `busy-reply-threshold` (`-BUSY`, SCRIPT KILL).
    pub scripts: std::sync::Arc<ruvio_engine::scripting::ScriptWatches>,
    /// BGSAVE / BGREWRITEAOF across the shards (see `snapshot`).
    pub background_save: crate::persistence::snapshot::SaveState,
    /// SHUTDOWN / SIGTERM in progress (see `shutdown`).
    pub exit: crate::persistence::shutdown::ExitState,
    /// Shards still loading their keyspace (see `loading`).
    pub loading: crate::persistence::loading::LoadingState,
    /// The script lock and the scripts known to need it (see `script_lock`).
    pub script_lock: crate::mesh::script_lock::ScriptLock,
}

impl Shared {
    pub fn new(shards: usize, databases: usize, now_ms: u64) -> Shared {
        let gauges = (0..shards)
            .map(|_| ShardGauges {
                keys: (0..databases).map(|_| Default::default()).collect(),
                ..Default::default()
            })
            .collect();
        Shared {
            shards: gauges,
            next_client_id: AtomicU64::new(1),
            started: Instant::now(),
            last_save_unix_s: AtomicU64::new(now_ms / 1000),
            blocked_clients: Mutex::default(),
            stats_epoch: AtomicU64::new(0),
            open_clients: AtomicU64::new(0),
            pubsub: crate::messaging::pubsub::Subscribers::new(shards),
            scripts: std::sync::Arc::new(ruvio_engine::scripting::ScriptWatches::new(shards)),
            background_save: Default::default(),
            exit: Default::default(),
            loading: crate::persistence::loading::LoadingState::new(shards),
            script_lock: Default::default(),
            run_id: format!(
                "{:020x}{:020x}",
                now_ms,
                std::process::id() as u64 * 0x9e37_79b9
            ),
        }
    }

    /// Count a new connection unless `maxclients` are open already (then false).
    pub fn admit_client(&self, maxclients: u64) -> bool {
        let admitted = self
            .open_clients
            .fetch_update(Relaxed, Relaxed, |n| (n < maxclients).then_some(n + 1));
        admitted.is_ok()
    }

    /// A connection counted by [`admit_client`](Self::admit_client) closed.
    pub fn client_gone(&self) {
        self.open_clients.fetch_sub(1, Relaxed);
    }

    /// A new client id, unique across shards (used once per accepted connection).
    pub fn next_client_id(&self) -> u64 {
        self.next_client_id.fetch_add(1, Relaxed)
    }

    /// Record that `client_id` is parked on `shard` (or no longer parked).
    pub fn note_blocked(&self, client_id: u64, shard: Option<usize>) {
        let mut map = self
            .blocked_clients
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        match shard {
            Some(shard) => map.insert(client_id, shard),
            None => map.remove(&client_id),
        };
    }

    /// The shard where `client_id` is parked, if it is blocked.
    pub fn blocked_on(&self, client_id: u64) -> Option<usize> {
        let map = self
            .blocked_clients
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        map.get(&client_id).copied()
    }

    /// Sum one gauge over all shards.
    pub fn sum(&self, gauge: impl Fn(&ShardGauges) -> &AtomicU64) -> u64 {
        self.shards.iter().map(|s| gauge(s).load(Relaxed)).sum()
    }

    /// Sum a resettable counter over the shards that have published counters of the
    /// current statistics epoch (the others were reset and count as zero).
    pub fn sum_counter(&self, gauge: impl Fn(&ShardGauges) -> &AtomicU64) -> u64 {
        let epoch = self.stats_epoch();
        self.shards
            .iter()
            .filter(|s| s.epoch.load(Relaxed) >= epoch)
            .map(|s| gauge(s).load(Relaxed))
            .sum()
    }

    /// The current statistics epoch.
    pub fn stats_epoch(&self) -> u64 {
        self.stats_epoch.load(Relaxed)
    }

    /// Start a new statistics epoch (CONFIG RESETSTAT); returns it.
    pub fn next_stats_epoch(&self) -> u64 {
        self.stats_epoch.fetch_add(1, Relaxed) + 1
    }

    /// Read the published tables of the current epoch of shards `shards`, but
    /// `skipped`.
    pub fn for_tables(
        &self,
        shards: std::ops::Range<usize>,
        skipped: Option<usize>,
        mut f: impl FnMut(&StatTables),
    ) {
        let epoch = self.stats_epoch();
        for id in shards.filter(|&id| Some(id) != skipped) {
            let Some(shard) = self.shards.get(id) else {
                continue;
            };
            let tables = shard.tables.lock().unwrap_or_else(|e| e.into_inner());
            if tables.epoch >= epoch {
                f(&tables);
            }
        }
    }
}
