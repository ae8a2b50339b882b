//! Server statistics. Each shard counts into its own plain fields (no atomics on
//! the request path) and publishes a snapshot into [`Shared`] on every background
//! tick, so INFO on any shard can report the whole server (at most one tick stale
//! for the other shards).

use ahash::AHashMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;
use std::time::Instant;

/// Counters of one shard, owned by that shard.
#[derive(Debug, Default)]
pub struct ShardStats {
    pub commands: u64,
    pub connections_received: u64,
    pub net_input_bytes: u64,
    pub net_output_bytes: u64,
    /// Changes to the dataset (Redis' `dirty`, INFO `rdb_changes_since_last_save`).
    pub dirty: u64,
    /// Per command id: calls, sampled microseconds, failed calls.
    pub per_command: Vec<CommandStat>,
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
    pub net_input_bytes: AtomicU64,
    pub net_output_bytes: AtomicU64,
    pub expired_keys: AtomicU64,
    pub keyspace_hits: AtomicU64,
    pub keyspace_misses: AtomicU64,
    pub used_memory: AtomicU64,
    pub blocked_clients: AtomicU64,
    pub dirty: AtomicU64,
    /// Per database: keys and keys with a TTL.
    pub keys: Vec<(AtomicU64, AtomicU64)>,
}

/// State every shard can read: gauges, the client id counter, identity.
#[derive(Debug)]
pub struct Shared {
    pub shards: Vec<ShardGauges>,
    next_client_id: AtomicU64,
    pub started: Instant,
    pub started_unix_ms: u64,
    pub run_id: String,
    /// Which shard holds each blocked client's parked command (CLIENT UNBLOCK may
    /// arrive on any shard). Touched only when a client blocks or is released,
    /// never on the request path of other commands.
    blocked_clients: Mutex<AHashMap<u64, usize>>,
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
            started_unix_ms: now_ms,
            blocked_clients: Mutex::default(),
            run_id: format!(
                "{:020x}{:020x}",
                now_ms,
                std::process::id() as u64 * 0x9e37_79b9
            ),
        }
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

    /// Keys and keys with a TTL in `db`, summed over all shards.
    pub fn db_keys(&self, db: usize) -> (u64, u64) {
        self.shards.iter().fold((0, 0), |(k, e), s| {
            let (keys, expires) = &s.keys[db];
            (k + keys.load(Relaxed), e + expires.load(Relaxed))
        })
    }
}
