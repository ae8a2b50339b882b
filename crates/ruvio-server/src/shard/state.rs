//! `ShardCore`: the state of one shard that commands may touch (everything but its
//! sockets and connections), and the few functions over it that other subsystems
//! call (INFO's gauges, the blocked-client count, the end of CLIENT PAUSE).
//!
//! Apart from the loop in `mod.rs` because the state is what the shard's command
//! paths receive while the loop is what steps them. Each field is a subsystem's
//! own part (the keyspace, the log, lending, gathers, blocked clients, watches,
//! notifications, saves, LOADING, the pause, the outbox to other shards), private
//! to the `shard` folder: the functions below the shard take only the parts they
//! touch, or a trait the shard implements (docs/architecture.md).

use crate::clock::unix_ms;
use crate::cluster::topology::Topology;
use crate::cmd::registry::logged_handler;
use crate::config::change::ConfigChange;
use crate::config::{Config, PortMode};
use crate::mesh::forward::Outbox;
use crate::mesh::gather::Gathering;
use crate::mesh::lending::Lending;
use crate::net::conn::Conn;
use crate::net::slab::Slab;
use crate::persistence::import::Imported;
use crate::persistence::wal::{RecoveredEnd, Wal};
use crate::shard::blocking::Blocking;
use crate::shard::pause::Pause;
use crate::shard::Shared;
use crate::stats::ShardStats;
use ruvio_engine::Engine;
use ruvio_resp::Limits;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

/// The shard's state that commands may touch (everything but the connections).
/// Each part is owned by its subsystem's type, and every field is `pub(super)`:
/// only the shard's own files touch them (the compiler keeps it so); the layers
/// below reach what they need through the traits and parts structs that
/// docs/architecture.md names.
pub struct ShardCore {
    pub(super) id: usize,
    pub(super) cfg: Config,
    pub(super) engine: Engine,
    pub(super) topo: Arc<Topology>,
    pub(super) shared: Arc<Shared>,
    pub(super) stats: ShardStats,
    pub(super) limits: Limits,
    /// Wall clock read once per loop iteration.
    pub(super) now_ms: u64,
    /// Connections whose replies changed since the last flush: (index, generation).
    pub(super) dirty: Vec<(u32, u32)>,
    /// Work for other shards, shipped once per loop iteration.
    pub(super) outbox: Outbox,
    /// Commands parked until a key is written (BLPOP ...).
    pub(super) blocking: Blocking,
    /// Connections whose blocking command was answered: run the commands they
    /// received meanwhile.
    pub(super) resume: Vec<(u32, u32)>,
    /// Keys lent to, and commands run on keys borrowed from, other shards.
    pub(super) lending: Lending,
    /// Calls waiting for the other shards to publish (INFO) or apply a change.
    pub(super) gathering: Gathering,
    /// CLIENT PAUSE as this shard applies it.
    pub(super) pause: Pause,
    /// When this shard next returns free allocator pages (see `memory`).
    pub(super) next_trim_ms: u64,
    /// The write-ahead log (durability everysec or always); `None` in memory mode.
    pub(super) wal: Option<crate::persistence::wal::Wal>,
    /// A replica with a log: its place in the primary's stream kept in the log
    /// (see `stream_mark`).
    pub(super) stream_marks: crate::persistence::stream_mark::ShardMarks,
    /// `always`: replies waiting for their log group (see `durable`).
    pub(super) gated: crate::persistence::durable::Gated<
        crate::mesh::forward::Tag,
        crate::shard::blocking::Waiter,
        super::lending::Answer,
    >,
    /// Keyspace notifications waiting for the end of the loop iteration.
    pub(super) notifications: crate::messaging::notify::Pending,
    /// Watched keys of this shard and touched watches of its clients.
    pub(super) watches: crate::transactions::watch::Watches,
    /// This shard's part of a BGSAVE / BGREWRITEAOF (see `snapshot`).
    pub(super) background_save: crate::persistence::snapshot::ShardSave,
    /// Loading the keyspace at start (see `loading`).
    pub(super) loading: crate::persistence::loading::ShardLoading,
    /// The last command's recorded effects, whose buffers the next one reuses.
    pub(super) spare_record: Option<Box<ruvio_engine::command::Recorded>>,
    /// What the owner writes a forwarded command's reply into first, kept from
    /// batch to batch (`messages::run_requests`) rather than allocated per batch.
    pub(super) reply_scratch: Vec<u8>,
    /// This shard's connections in MONITOR mode (see `shard::monitor`).
    pub(super) monitors: crate::observability::monitor::ShardMonitors,
    /// CLIENT TRACKING: the keys of this shard tracking clients read, BCAST
    /// prefixes, invalidations owed (see `tracking`).
    pub(super) tracking: crate::tracking::Tracking,
    /// TLS: the settings new sessions start from (`tls-port` on), reloaded by
    /// CONFIG SET of the certificate settings (see `net::tls`).
    pub(super) tls_settings: Option<crate::net::tls::TlsSettings>,
    /// Command timing and sizes: histograms, what the command logs need.
    pub(super) timing: crate::observability::Timing,
    /// Ruvio as a primary: this shard's records for the replication stream, its
    /// snapshot for a full sync, the replicas and WAIT calls it serves.
    pub(super) replication: crate::replication::serve::ShardPart,
    /// `cluster-enabled yes`: this shard as a node of a Redis Cluster (its
    /// membership, bus links, nodes.conf, slot map); `None` for the fixed
    /// topology (see `cluster::node`).
    pub(super) cluster_node: Option<Box<crate::cluster::node::ShardNode>>,
    /// Forward mode as one node, on the shards but 0 (which owns the node):
    /// the routes by shard 0's slot map (`cluster::slot_map`).
    pub(super) node_follower: Option<Box<crate::cluster::slot_map::NodeRoutes>>,
}

impl ShardCore {
    /// What routing reads of this shard's node (`cluster-enabled yes`): its
    /// own slot map, or in forward mode shard 0's copy.
    #[inline]
    pub(super) fn node_routes(&self) -> Option<&crate::cluster::slot_map::NodeRoutes> {
        match &self.cluster_node {
            Some(node) => Some(node.routes()),
            None => self.node_follower.as_deref(),
        }
    }

    /// The records up to [`log_end`](Self::log_end) (one command, transaction or
    /// keys coming home) replay together from the log and reach replicas as one
    /// transaction.
    pub fn log_begin(&mut self) {
        if let Some(wal) = self.wal.as_mut() {
            wal.begin_atomic();
        }
        self.replication.feed.begin_group();
    }

    pub fn log_end(&mut self) {
        if let Some(wal) = self.wal.as_mut() {
            wal.end_atomic();
        }
        self.replication.feed.end_group();
    }

    /// One record, into the log and the replication stream.
    pub fn log_record<'a>(&mut self, db: usize, record: impl Iterator<Item = &'a [u8]> + Clone) {
        if let Some(wal) = self.wal.as_mut() {
            wal.append(db, &mut record.clone());
        }
        self.replication.feed.record(db, &mut record.clone());
    }

    /// Where this shard's function libraries are kept (its data directory,
    /// saved only with a log).
    pub fn functions_keeper(&self) -> crate::cmd::functions::Keeper<'_> {
        crate::cmd::functions::Keeper {
            cfg: &self.cfg,
            id: self.id,
            logs: self.wal.is_some(),
        }
    }

    /// Records are kept: a log, or replicas to feed.
    pub fn logs(&self) -> bool {
        self.wal.is_some() || self.replication.feed.on()
    }

    /// A snapshot of the keyspace is being written (a background save's part, a
    /// replica's full sync): its state lives in the databases, which must stay.
    pub fn writing_snapshot(&self) -> bool {
        self.background_save.busy() || self.replication.snapshot.is_some()
    }

    /// Reply `seq` of connection `who` (`conn`, out of the slab) was filled: the
    /// connection is flushed at the end of the loop iteration and, if that was the
    /// answer it waited for, runs the commands it received meanwhile.
    pub fn reply_filled(&mut self, conn: &mut Conn, who: (u32, u32), seq: u64) {
        self.dirty.push(who);
        conn.unblock_if_waiting_on(seq, &mut self.resume, who);
    }

    /// Key `key` of `db` was written or came home: the clients parked on it are
    /// tried again (see `parked::serve_ready`).
    pub fn signal_key(&mut self, db: usize, key: &[u8]) {
        self.blocking.signal(db, key);
    }

    /// This shard's counters (INFO stats, commandstats, errorstats), to count in.
    #[inline]
    pub fn counters(&mut self) -> &mut ShardStats {
        &mut self.stats
    }

    /// What a command's scripts published, delivered at the end of the loop
    /// iteration (see `messaging::notify`).
    pub fn queue_published(
        &mut self,
        published: impl IntoIterator<Item = ruvio_engine::command::Published>,
    ) {
        self.notifications.published.extend(published);
    }

    /// Command timing and sizes: whether commands are timed, their clock, the
    /// command logs' settings (see `observability`).
    #[inline]
    pub fn command_timing(&self) -> &crate::observability::Timing {
        &self.timing
    }

    /// The WATCH table (see `transactions::watch`).
    #[inline]
    pub fn watches(&self) -> &crate::transactions::watch::Watches {
        &self.watches
    }

    /// The WATCH table, to check and clear a client's touched watches and to
    /// forget its keys.
    #[inline]
    pub fn watches_mut(&mut self) -> &mut crate::transactions::watch::Watches {
        &mut self.watches
    }

    /// `watcher` watches `keys` of `db` here, as they are in the keyspace now.
    pub fn register_watch(
        &mut self,
        watcher: crate::transactions::watch::WatchingClient,
        db: usize,
        keys: &[Vec<u8>],
    ) {
        let (engine, now_ms) = (&self.engine, self.now_ms);
        self.watches.register(engine, now_ms, watcher, db, keys);
    }

    /// What an EXEC sent to the one owner of its keys touches here
    /// (`mesh::owner_tx::send`): the WATCH table, the outbox, this shard's id.
    pub fn owner_tx_parts(
        &mut self,
    ) -> (&mut crate::transactions::watch::Watches, &mut Outbox, usize) {
        (&mut self.watches, &mut self.outbox, self.id)
    }

    /// Key `key` of `db` changed: its watchers' transactions fail.
    #[inline]
    pub fn touch_watched(&mut self, db: usize, key: &[u8]) {
        let to = crate::transactions::watch::Notify {
            shard: self.id,
            outbox: &mut self.outbox,
        };
        self.watches.touch(to, db, key);
    }

    /// Key `key` of `db` expired: its watchers learn it before a transaction
    /// checks them.
    pub fn touch_watched_if_expired(&mut self, db: usize, key: &[u8]) {
        let (engine, now_ms) = (&self.engine, self.now_ms);
        let to = crate::transactions::watch::Notify {
            shard: self.id,
            outbox: &mut self.outbox,
        };
        self.watches.check_expired(engine, now_ms, to, db, key);
    }

    /// Databases `dbs` were emptied (FLUSHDB, FLUSHALL, SWAPDB, DEBUG RELOAD):
    /// the watchers of their keys that existed learn it.
    pub fn touch_watched_in(&mut self, dbs: &[usize]) {
        let (engine, now_ms) = (&self.engine, self.now_ms);
        let to = crate::transactions::watch::Notify {
            shard: self.id,
            outbox: &mut self.outbox,
        };
        self.watches.flush(engine, now_ms, to, dbs);
    }

    /// Shard `id`'s state without its sockets: an empty keyspace configured from
    /// `cfg`, empty statistics and queues.
    /// Shard `id`'s state: its keyspace loaded (a Redis RDB file to import, then its
    /// snapshot and write-ahead log) now, or, with a log, by a thread while the
    /// shard answers `-LOADING` (see `loading`).
    pub fn new(
        id: usize,
        cfg: Config,
        topo: Arc<Topology>,
        shared: Arc<Shared>,
    ) -> std::io::Result<ShardCore> {
        let limits = Limits {
            bulk_bytes_max: cfg.proto_max_bulk_len,
            ..Limits::default()
        };
        let stats = ShardStats {
            per_command: vec![Default::default(); crate::cmd::registry::registry().stat_slots],
            ..Default::default()
        };
        let shards = topo.nodes.len();
        ruvio_engine::scripting::set_script_watches(shared.scripts.clone(), id);
        ruvio_engine::scripting::set_server_commands(crate::cmd::registry::script_row);
        ruvio_engine::scripting::set_monitor_sink(crate::observability::monitor::feed_script_call);
        ruvio_engine::scripting::set_log_sink(|level, message| {
            let level = crate::serverlog::Level::from_number(i64::from(level))
                .unwrap_or(crate::serverlog::Level::Notice);
            crate::serverlog::log(level, message);
        });
        // In forward mode the process is one node, owned by shard 0.
        let forward = cfg.port_mode == crate::config::PortMode::Forward;
        let owns_node = cfg.cluster_bus() && (id == 0 || !forward);
        let cluster_node = match owns_node {
            true => {
                let mut node =
                    crate::cluster::node::ShardNode::start(&cfg, id, &topo.host, unix_ms())
                        .map_err(std::io::Error::other)?;
                // tls-cluster yes: a bad TLS setting stops the start, as
                // redis-server's does, rather than leave the bus plain.
                if cfg.bus_tls() {
                    let tls = crate::net::tls::bus::bus_tls(&cfg.tls_files())
                        .map_err(std::io::Error::other)?;
                    node.links.set_tls(Some(tls));
                }
                if node.cluster.master_name().is_some() {
                    // A replica from the start (its nodes.conf says so), as
                    // `replicaof` in the config: the log's place in its
                    // master's stream stands (`replica::follow_configured`).
                    shared.replication.may_continue_from_logs();
                }
                Some(Box::new(node))
            }
            false => None,
        };
        let node_follower = (cfg.cluster_bus() && !owns_node)
            .then(|| Box::new(crate::cluster::slot_map::NodeRoutes::new()));
        // Scripts may touch undeclared keys only in this shard's (node's) slots.
        let served = match (&cluster_node, &node_follower) {
            (Some(node), _) => Some(node.served_slots()),
            (None, follower) => follower.as_ref().map(|routes| routes.served_slots()),
        };
        let commands = crate::cmd::script_commands();
        crate::scripting::host::install(&cfg, shared.clone(), topo.clone(), id, commands, served);
        crate::cmd::functions::load_saved(&cfg, id)?;
        // With a log, the keyspace loads on a thread while the shard answers
        // -LOADING (see `loading`); without one, here and now.
        let in_background = cfg.durability.logs();
        let loading = if in_background {
            crate::persistence::loading::start(&cfg, id, &topo, logged_handler)?
        } else {
            Default::default()
        };
        let mut core = ShardCore {
            id,
            engine: crate::persistence::loading::empty_engine(&cfg),
            cfg,
            topo,
            shared,
            stats,
            limits,
            now_ms: unix_ms(),
            dirty: Vec::new(),
            outbox: Outbox::new(id, shards),
            blocking: Blocking::default(),
            resume: Vec::new(),
            lending: Lending::default(),
            gathering: Gathering::default(),
            pause: Pause::default(),
            next_trim_ms: 0,
            wal: None,
            stream_marks: Default::default(),
            gated: Default::default(),
            notifications: Default::default(),
            watches: Default::default(),
            background_save: Default::default(),
            loading,
            spare_record: None,
            reply_scratch: Vec::new(),
            tls_settings: None,
            monitors: Default::default(),
            tracking: crate::tracking::Tracking::new(id, usize::MAX),
            timing: crate::observability::Timing::new(crate::cmd::registry::registry().stat_slots),
            replication: Default::default(),
            cluster_node,
            node_follower,
        };
        core.tracking
            .set_max_keys(crate::tracking::TABLE_KEYS_DEFAULT, shards);
        super::settings::apply_params_at_start(&mut core);
        if !in_background {
            let (engine, end, imported, found) =
                crate::persistence::loading::load(&core.cfg, id, &core.topo, logged_handler)
                    .map_err(std::io::Error::other)?;
            core.install_loaded(engine, end, imported, found)?;
        }
        Ok(core)
    }

    /// What Pub/Sub delivery touches of this shard (see `messaging::pubsub`), and
    /// the outbox that relays a message to the other shards.
    pub fn delivery(&mut self) -> (crate::messaging::pubsub::Delivery<'_>, &mut Outbox) {
        let (to, outbox, _) = self.delivery_parts();
        (to, outbox)
    }

    /// [`delivery`](Self::delivery) and the pending notifications beside it.
    fn delivery_parts(
        &mut self,
    ) -> (
        crate::messaging::pubsub::Delivery<'_>,
        &mut Outbox,
        &mut crate::messaging::notify::Pending,
    ) {
        let to = crate::messaging::pubsub::Delivery {
            subscribers: &self.shared.pubsub,
            shard: self.id,
            dirty: &mut self.dirty,
            limits: &self.cfg.client_output_buffer_limit,
            now_ms: self.now_ms,
        };
        (to, &mut self.outbox, &mut self.notifications)
    }

    /// Publish the keyspace notifications and script publications pending on this
    /// shard (once per loop iteration: see `messaging::notify`).
    pub fn deliver_notifications(&mut self, conns: &mut Slab<Conn>) {
        let flags = self.cfg.notify_keyspace_events;
        let routes = self.publish_scripts_on_bus();
        let (mut to, outbox, pending) = self.delivery_parts();
        pending.deliver(flags, routes, &mut to, outbox, conns);
    }

    /// What scripts published on plain channels goes to the cluster's other
    /// nodes too, as a client's PUBLISH does (Redis Cluster carries a script's
    /// PUBLISH over the bus like any other): from this shard's node, or in
    /// forward mode from shard 0's, asked by a broadcast. Returns the port
    /// mode and whether the bus also reached the process's other shards (a
    /// per-shard node's: they are nodes like any other).
    fn publish_scripts_on_bus(&mut self) -> (PortMode, bool) {
        let mode = self.topo.mode;
        if !self.cfg.cluster_bus() {
            return (mode, false);
        }
        let plain = self
            .notifications
            .published
            .iter()
            .filter(|p| !p.shard_channel);
        for p in plain {
            match self.cluster_node.as_mut() {
                Some(node) => node.publish(&p.channel, &p.message),
                None => self.outbox.broadcast(ConfigChange::BusPublish {
                    channel: p.channel.clone(),
                    message: p.message.clone(),
                }),
            }
        }
        (mode, mode == PortMode::PerShard)
    }

    /// Publish what scripts published before a client's PUBLISH on this shard
    /// (`caller`: the running connection, out of the slab).
    pub fn deliver_published(
        &mut self,
        conns: &mut Slab<Conn>,
        caller: Option<crate::messaging::pubsub::Caller<'_>>,
    ) {
        if self.notifications.published.is_empty() {
            return;
        }
        let routes = self.publish_scripts_on_bus();
        let (mut to, outbox, pending) = self.delivery_parts();
        pending.deliver_published(routes, &mut to, outbox, conns, caller);
    }

    /// What the script lock reads of the server, for this shard (see
    /// `mesh::script_lock`).
    pub fn script_server(&self) -> crate::mesh::script_lock::Server<'_> {
        self.shared.script_server(&self.topo, self.id)
    }

    /// The shards whose subscriptions a PUBSUB or INFO call on this shard sees
    /// (see `messaging::pubsub::visible_shards_of`).
    pub fn visible_shards(&self) -> std::ops::Range<usize> {
        crate::messaging::pubsub::visible_shards_of(self.topo.mode, self.id, self.topo.nodes.len())
    }

    /// This shard's tracking tables and what delivering an invalidation touches
    /// beside them (see `tracking`).
    pub fn tracking_parts(
        &mut self,
    ) -> (&mut crate::tracking::Tracking, crate::tracking::Deliver<'_>) {
        let to = crate::tracking::Deliver {
            outbox: &mut self.outbox,
            directory: &self.shared.tracking,
            dirty: &mut self.dirty,
            limits: &self.cfg.client_output_buffer_limit,
            now_ms: self.now_ms,
        };
        (&mut self.tracking, to)
    }

    /// Put a loaded engine in place: the stand-in's configuration (CONFIG SET may
    /// have changed it meanwhile) and its recording switches carry over; the log
    /// opens where recovery left it; what an imported file brought settles
    /// (the libraries it brought become the shard's).
    pub fn install_loaded(
        &mut self,
        mut engine: Engine,
        end: Option<RecoveredEnd>,
        imported: Option<Imported>,
        found: crate::persistence::stream_mark::Found,
    ) -> std::io::Result<()> {
        *engine.config_mut() = *self.engine.config();
        let notify = self.cfg.notify_keyspace_events;
        engine.record_expired(crate::messaging::notify::expiry_wanted(notify));
        let (added, missed) = crate::messaging::notify::key_notes_wanted(notify);
        engine.record_key_notes(added, missed);
        self.engine = engine;
        if let Some(end) = end {
            let wal = Wal::open(&self.cfg, self.id, end)?;
            self.stream_marks.recovered(&found, &wal);
            self.wal = Some(wal);
        }
        // Before this shard counts as loaded: shard 0 reads every shard's mark
        // once none is loading, to continue the stream where the logs are.
        self.shared
            .replication
            .recovered_mark(self.id, found.exact());
        if let Some(imported) = imported {
            // The file's libraries become the shard's.
            if let Some(payload) = imported.libraries {
                crate::cmd::functions::adopt_imported(self.functions_keeper(), &payload)?;
            }
        }
        self.shared.loading.shard_loaded();
        Ok(())
    }

    /// Once per loop iteration while loading: take this shard's engine when its
    /// thread is done, and stop refusing once every shard is.
    pub fn poll_loading(&mut self) {
        if !self.loading.refuses() {
            return;
        }
        if let Some(loaded) = self.loading.take_loaded() {
            let installed = loaded.and_then(|(engine, end, imported, found)| {
                self.install_loaded(engine, end, imported, found)
                    .map_err(|e| e.to_string())
            });
            if let Err(e) = installed {
                eprintln!("ruvio: shard {}: {e}", self.id);
                std::process::exit(1);
            }
        }
        self.loading.set_refusing(self.shared.loading.any());
    }
}

/// Publish this shard's gauges and statistics tables for the other shards' INFO
/// (on every tick, and when a gathering INFO asks: see [`crate::mesh::gather`]).
pub fn publish_gauges(core: &ShardCore, clients: usize) {
    core.tracking.publish(&core.shared.tracking);
    let g = &core.shared.shards[core.id];
    let engine_stats = core.engine.stats();
    g.clients.store(clients as u64, Relaxed);
    g.commands.store(core.stats.commands, Relaxed);
    g.connections_received
        .store(core.stats.connections_received, Relaxed);
    g.rejected_connections
        .store(core.stats.rejected_connections, Relaxed);
    g.exec_in_place.store(core.stats.exec_in_place, Relaxed);
    g.exec_borrowed.store(core.stats.exec_borrowed, Relaxed);
    g.in_place_joins.store(core.stats.in_place_joins, Relaxed);
    g.ran_on_kept.store(core.stats.ran_on_kept, Relaxed);
    g.net_input_bytes.store(core.stats.net_input_bytes, Relaxed);
    g.net_output_bytes
        .store(core.stats.net_output_bytes, Relaxed);
    g.expired_keys.store(engine_stats.expired_keys, Relaxed);
    g.keyspace_hits.store(engine_stats.keyspace_hits, Relaxed);
    g.keyspace_misses
        .store(engine_stats.keyspace_misses, Relaxed);
    g.evicted_keys.store(engine_stats.evicted_keys, Relaxed);
    g.blocked_clients.store(blocked_here(core), Relaxed);
    g.dirty.store(core.stats.dirty, Relaxed);
    g.ops_per_sec.store(core.stats.ops.per_sec(), Relaxed);
    crate::memory::alloc::note_peak();
    let (cpu_sys_us, cpu_user_us) = crate::stats::thread_cpu_us();
    g.cpu_sys_us.store(cpu_sys_us, Relaxed);
    g.cpu_user_us.store(cpu_user_us, Relaxed);
    let wal_failed = core.wal.as_ref().is_some_and(|w| w.failed().is_some());
    g.wal_failed.store(wal_failed as u64, Relaxed);
    if let Some(log) = core.wal.as_ref().map(|w| w.stats()) {
        g.log_written_bytes.store(log.written_bytes, Relaxed);
        g.log_fsyncs.store(log.fsyncs, Relaxed);
        g.log_fsync_usec.store(log.fsync_us, Relaxed);
    }
    if let Some((sent, received)) = crate::mesh::forward::message_counts() {
        g.mesh_sent.store(sent, Relaxed);
        g.mesh_received.store(received, Relaxed);
    }
    g.dirty_at_save.store(core.stats.dirty_at_save, Relaxed);
    g.epoch.store(core.stats.epoch, Relaxed);
    crate::shard::eviction::publish_sizes(core);
    let mut tables = g.tables.lock().unwrap_or_else(|e| e.into_inner());
    tables.epoch = core.stats.epoch;
    tables.per_command.clone_from(&core.stats.per_command);
    tables.errors.clear();
    tables
        .errors
        .extend(core.stats.errors.iter().map(|(code, &n)| (code.clone(), n)));
    drop(tables);
    // Each gauge is stored once: a reader never sees a database's count at zero
    // in between (eviction decides by them).
    let mut counts = vec![(0u64, 0u64); g.keys.len()];
    for (db, keys, expires) in core.engine.keyspace_info() {
        if let Some(c) = counts.get_mut(db) {
            *c = (keys as u64, expires as u64);
        }
    }
    // A key out on loan is still this shard's (a script's DBSIZE on the
    // borrower leaves it out there).
    for db in core.lending.lent_dbs() {
        if let Some(c) = counts.get_mut(db) {
            c.0 += 1;
        }
    }
    for ((k, e), (keys, expires)) in g.keys.iter().zip(counts) {
        k.store(keys, Relaxed);
        e.store(expires, Relaxed);
    }
}

/// Clients of this shard blocked in a command (parked, or waiting for borrowed keys).
pub fn blocked_here(core: &ShardCore) -> u64 {
    let watches = core.blocking.watches();
    (core.blocking.len() - watches + core.lending.waiting_len()) as u64
}

/// End CLIENT PAUSE on this shard: the connections that waited run what they hold.
pub fn end_pause(core: &mut ShardCore, conns: &mut Slab<Conn>) {
    for who in core.pause.end() {
        if let Some(conn) = conns.get_mut(who.0, who.1) {
            conn.client.paused = false;
            core.resume.push(who);
        }
    }
}

/// Publish what MEMORY STATS reads of this shard beside its gauges: its
/// connections' memory, its log buffer, its databases' table bytes. O(connections
/// + databases): once a second, and when MEMORY STATS asks, not every tick.
pub fn publish_memory(core: &ShardCore, conns: &crate::net::slab::Slab<crate::net::conn::Conn>) {
    let g = &core.shared.shards[core.id];
    let clients: usize = conns
        .iter()
        .map(|(_, c)| c.buffer_use().allocated_bytes)
        .sum();
    g.client_bytes.store(clients as u64, Relaxed);
    let log = core.wal.as_ref().map_or(0, |w| w.filling_bytes());
    g.log_buffer_bytes.store(log as u64, Relaxed);
    let tables = core.engine.table_bytes();
    for (db, (table_gauge, ttl_gauge)) in g.db_overhead.iter().enumerate() {
        let (table, ttl) = tables
            .iter()
            .find(|(d, _, _)| *d == db)
            .map_or((0, 0), |&(_, table, ttl)| (table, ttl));
        table_gauge.store(table as u64, Relaxed);
        ttl_gauge.store(ttl as u64, Relaxed);
    }
}

/// MEMORY STATS' figures: this shard's as of now, the others' as they last
/// published them (the gather asked them to just before), summed over the shards
/// the caller sees (all in forward mode, its own in per-shard mode).
pub fn memory_figures(
    core: &ShardCore,
    conns: &crate::net::slab::Slab<crate::net::conn::Conn>,
) -> crate::stats::memory::MemoryFigures {
    publish_gauges(core, conns.len());
    publish_memory(core, conns);
    let shared = &core.shared;
    let visible =
        crate::messaging::pubsub::visible_shards_of(core.topo.mode, core.id, shared.shards.len());
    let gauges = || visible.clone().map(|s| &shared.shards[s]);
    let mut dbs = Vec::new();
    let mut keys = 0;
    for db in 0..core.cfg.databases {
        let count: u64 = gauges().map(|g| g.keys[db].0.load(Relaxed)).sum();
        if count > 0 {
            keys += count;
            let table = gauges().map(|g| g.db_overhead[db].0.load(Relaxed)).sum();
            let ttl = gauges().map(|g| g.db_overhead[db].1.load(Relaxed)).sum();
            dbs.push((db, table, ttl));
        }
    }
    let (allocator_in_use, allocator_held) = crate::stats::memory::allocator_bytes();
    crate::stats::memory::MemoryFigures {
        total: crate::memory::alloc::note_peak(),
        peak: crate::memory::alloc::peak_bytes(),
        startup: crate::memory::alloc::startup_bytes(),
        clients: gauges().map(|g| g.client_bytes.load(Relaxed)).sum(),
        log_buffer: gauges().map(|g| g.log_buffer_bytes.load(Relaxed)).sum(),
        lua: ruvio_engine::scripting::cache_bytes() as u64,
        functions: ruvio_engine::scripting::functions::code_bytes() as u64,
        dbs,
        keys,
        rss: crate::memory::alloc::rss_bytes(),
        allocator_in_use,
        allocator_held,
    }
}
