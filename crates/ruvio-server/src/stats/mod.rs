//! Server statistics. Each shard counts into its own plain fields (no atomics on
//! the request path) and publishes a snapshot into [`crate::shard::Shared`] on every background
//! tick, so INFO on any shard can report the whole server (at most one tick stale
//! for the other shards).
//!
//! CONFIG RESETSTAT on any shard starts a new statistics *epoch*: every shard resets
//! its counters when the broadcast reaches it, and until it has published counters of
//! the new epoch, readers count it as zero. So INFO right after RESETSTAT never shows
//! counts from before it, on any shard.

pub mod memory;

use ahash::AHashMap;
use ruvio_engine::CmdError;
use std::sync::atomic::AtomicU64;
use std::sync::Mutex;

/// Counters of one shard, owned by that shard.
#[derive(Debug, Default)]
pub struct ShardStats {
    pub commands: u64,
    pub connections_received: u64,
    /// Connections refused at `maxclients`.
    pub rejected_connections: u64,
    /// EXECs over several shards' keys this shard coordinated, run in place
    /// (`mesh::in_place`) or on borrowed keys (`mesh::lending`): INFO stats'
    /// `cross_shard_exec_in_place` and `cross_shard_exec_borrowed`.
    pub exec_in_place: u64,
    pub exec_borrowed: u64,
    /// Parts of transactions run in place that ran on keys their own chain held
    /// here (lock passing, `mesh::lending::HeldKeys`): INFO stats'
    /// `cross_shard_exec_parts_joined`.
    pub in_place_joins: u64,
    /// Borrowing commands that ran on keys a batch of borrowing commands kept
    /// here, without a round trip (`shard/lending/batch.rs`): INFO stats'
    /// `cross_shard_ran_on_kept_keys`.
    pub ran_on_kept: u64,
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
    /// One call of the row with statistics slot `stat` ran (INFO's
    /// `total_commands_processed`, commandstats' `calls`).
    #[inline]
    pub fn count_call(&mut self, stat: usize) {
        self.commands += 1;
        self.per_command[stat].calls += 1;
    }

    /// A call of `stat` ran and failed with `error` (commandstats'
    /// `failed_calls`, errorstats).
    pub fn count_failed(&mut self, stat: usize, error: &CmdError) {
        self.per_command[stat].failed += 1;
        self.count_error(error);
    }

    /// A call of `stat` was refused before it ran (commandstats'
    /// `rejected_calls`, errorstats).
    pub fn count_rejected(&mut self, stat: usize, error: &CmdError) {
        self.per_command[stat].rejected += 1;
        self.count_error(error);
    }

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

/// Words of a one-bit-a-slot map ([`ShardGauges::slots_with_keys`]).
pub const SLOT_WORDS: usize = ruvio_engine::slot::SLOT_COUNT as usize / 64;
const _: () = assert!(SLOT_WORDS * 64 == ruvio_engine::slot::SLOT_COUNT as usize);

/// Whether `slot`'s bit is set in a map of [`SLOT_WORDS`] words.
pub fn slot_bit(words: &[AtomicU64], slot: u16) -> bool {
    let word = words
        .get(usize::from(slot) / 64)
        .map_or(0, |w| w.load(std::sync::atomic::Ordering::Relaxed));
    word & (1 << (slot % 64)) != 0
}

/// What a shard publishes for the others to read.
#[derive(Debug, Default)]
pub struct ShardGauges {
    pub clients: AtomicU64,
    pub commands: AtomicU64,
    pub connections_received: AtomicU64,
    pub rejected_connections: AtomicU64,
    pub exec_in_place: AtomicU64,
    pub exec_borrowed: AtomicU64,
    pub in_place_joins: AtomicU64,
    pub ran_on_kept: AtomicU64,
    pub net_input_bytes: AtomicU64,
    pub net_output_bytes: AtomicU64,
    pub expired_keys: AtomicU64,
    pub keyspace_hits: AtomicU64,
    pub keyspace_misses: AtomicU64,
    /// Bytes the shard's keyspace reuses before allocating (see `memory`).
    pub reusable_bytes: AtomicU64,
    /// Bytes of the shard's dataset, as its engine estimates them (see `memory`).
    pub dataset_bytes: AtomicU64,
    /// Bytes waiting in the output of the replicas this shard serves (not counted
    /// against `maxmemory`, as Redis's `freeMemoryGetNotCountedMemory`).
    pub replica_output_bytes: AtomicU64,
    /// The log's record bytes appended and covered by an fsync (WAITAOF).
    pub log_appended_bytes: AtomicU64,
    pub log_synced_bytes: AtomicU64,
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
    /// The shard thread's CPU time in microseconds, system and user, as of its
    /// last publish ([`thread_cpu_us`]; INFO cpu's per-shard lines).
    pub cpu_sys_us: AtomicU64,
    pub cpu_user_us: AtomicU64,
    /// Memory beside the dataset, as of the shard's last publish of it (once a
    /// second, and when MEMORY STATS asks): its connections' buffers and state,
    /// and its log's group being filled.
    pub client_bytes: AtomicU64,
    pub log_buffer_bytes: AtomicU64,
    /// Per database: bytes of its table (entries and index) and of its TTL marks.
    pub db_overhead: Vec<(AtomicU64, AtomicU64)>,
    /// Per database: keys and keys with a TTL.
    pub keys: Vec<(AtomicU64, AtomicU64)>,
    /// Forward mode as one node: the slots whose keys the shard holds that
    /// hold some, one bit a slot (`SLOT_WORDS` words), so shard 0's SETSLOT
    /// NODE refuses a slot with keys on another shard (as of its last tick).
    pub slots_with_keys: Box<[AtomicU64]>,
    /// The shard's log: record bytes written, fsyncs and their total microseconds
    /// (never reset: the metrics endpoint's counters).
    pub log_written_bytes: AtomicU64,
    pub log_fsyncs: AtomicU64,
    pub log_fsync_usec: AtomicU64,
    /// Messages the shard sent to and received from the other shards (never reset).
    pub mesh_sent: AtomicU64,
    pub mesh_received: AtomicU64,
    pub tables: Mutex<StatTables>,
}

/// The calling thread's CPU time in microseconds, system and user
/// (`getrusage(RUSAGE_THREAD)`, as Redis reads its main thread's).
pub fn thread_cpu_us() -> (u64, u64) {
    // SAFETY: getrusage fills the zeroed struct we own.
    let usage = unsafe {
        let mut u: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_THREAD, &mut u);
        u
    };
    let micros = |t: libc::timeval| t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64;
    (micros(usage.ru_stime), micros(usage.ru_utime))
}
