//! `Shared`: the state every shard of the process can read, made once in main.rs
//! and handed to each shard as an `Arc`: the shards' published gauges, the client
//! id counter and identity (from `stats`), and the cross-shard parts of other
//! subsystems (Pub/Sub subscribers, running scripts, BGSAVE and SHUTDOWN progress,
//! LOADING, the script lock).
//!
//! It sits with the shard, at the top, because it composes those subsystems' types;
//! each of them reads its own part through the `Arc`. Like `ShardCore` it is a bag
//! to be split (docs/architecture.md, "the debt").

use crate::stats::{ShardGauges, StatTables, SLOT_WORDS};
use ahash::AHashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;
use std::time::Instant;

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
    /// Per shard: keys are expired in the background (DEBUG SET-ACTIVE-EXPIRE).
    pub active_expire: Vec<AtomicBool>,
    /// How many MONITOR clients each shard has (see `observability::monitor`).
    pub monitors: crate::observability::monitor::Monitors,
    /// CLIENT TRACKING: every client's shard and every shard's figures.
    pub tracking: crate::tracking::Directory,
    /// The command logs, the latency monitor, published histograms, the client
    /// directory (see `observability`).
    pub observatory: crate::observability::Observatory,
    /// The ACL users and ACL LOG (see `acl`).
    pub acl: std::sync::Arc<crate::acl::Acl>,
    /// The role, the primary and the link (see `replication`).
    pub replication: std::sync::Arc<crate::replication::State>,
    /// The TLS session cache every shard's sessions share (see `net::tls`).
    pub tls_sessions: crate::net::tls::SessionCaches,
    /// Forward mode as one node of the cluster bus: shard 0's latest slot
    /// map, which the other shards route by once told
    /// (`ConfigChange::NodeSlots`; docs/cluster.md).
    pub node_slots: Mutex<Option<std::sync::Arc<crate::cluster::slot_map::SlotMap>>>,
    /// The generation of that map: a shard compares it with its own before
    /// routing a connection's input (a client told `+OK` by shard 0 may reach
    /// another shard before the broadcast does).
    pub node_slots_generation: AtomicU64,
}

impl Shared {
    pub fn new(shards: usize, databases: usize, now_ms: u64) -> Shared {
        let gauges = (0..shards)
            .map(|_| ShardGauges {
                keys: (0..databases).map(|_| Default::default()).collect(),
                db_overhead: (0..databases).map(|_| Default::default()).collect(),
                slots_with_keys: (0..SLOT_WORDS).map(|_| AtomicU64::new(0)).collect(),
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
            active_expire: (0..shards).map(|_| AtomicBool::new(true)).collect(),
            monitors: crate::observability::monitor::Monitors::new(shards),
            tracking: crate::tracking::Directory::new(shards),
            observatory: crate::observability::Observatory::new(shards),
            acl: std::sync::Arc::new(crate::acl::Acl::new(&crate::cmd::registry::registry().acl)),
            replication: std::sync::Arc::new(crate::replication::State::new(shards)),
            tls_sessions: Default::default(),
            node_slots: Mutex::default(),
            node_slots_generation: AtomicU64::new(u64::MAX),
            run_id: format!(
                "{:020x}{:020x}",
                now_ms,
                std::process::id() as u64 * 0x9e37_79b9
            ),
        }
    }

    /// What the script lock reads of the server, asked by shard `me`
    /// (see `mesh::script_lock`).
    pub fn script_server<'a>(
        &'a self,
        topo: &'a crate::cluster::topology::Topology,
        me: usize,
    ) -> crate::mesh::script_lock::Server<'a> {
        crate::mesh::script_lock::Server {
            lock: &self.script_lock,
            shards: &self.shards,
            topo,
            me,
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

/// What a shard's scripts' host reads of the state every shard shares (see
/// `scripting::host`).
impl crate::scripting::host::ServerState for Shared {
    fn subscribers(&self) -> &crate::messaging::pubsub::Subscribers {
        &self.pubsub
    }

    fn gauges(&self) -> &[ShardGauges] {
        &self.shards
    }

    fn script_lock(&self) -> &crate::mesh::script_lock::ScriptLock {
        &self.script_lock
    }

    fn last_save_unix_s(&self) -> u64 {
        self.last_save_unix_s.load(Relaxed)
    }

    fn is_replica(&self, shard: usize) -> bool {
        self.replication.is_replica() || self.replication.node_history(shard).is_following()
    }

    fn primary_link_up(&self, shard: usize) -> bool {
        let node = self.replication.node_history(shard);
        match node.is_following() {
            true => node.following().up,
            false => self.replication.link_up(),
        }
    }
}
