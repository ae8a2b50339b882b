//! The server's command families (`cmd`, a floor below) as the shard serves them:
//! [`Server`] and [`SharedReads`] for `ShardCore` and `Shared`, [`RowsFor`]
//! (the command table's rows instantiated for `ShardCore`), the steps a
//! handler asks of the shard without naming it (CLIENT PAUSE and UNPAUSE on
//! every shard, CLIENT UNBLOCK, INFO's gauges as of now, a broadcast to the
//! other shards), and the reads of the core and of `Shared` they make (CLIENT's
//! part of a gathered answer, INFO's sections).

use crate::acl::Acl;
use crate::cluster::node::ShardNode;
use crate::cluster::topology::Topology;
use crate::cmd::{LogBytes, Rows, RowsFor, Server, SharedReads};
use crate::config::change::ConfigChange;
use crate::config::Config;
use crate::mesh::forward::Outbox;
use crate::messaging::pubsub::{Caller, Delivery, Subscribers};
use crate::net::conn::{ClientState, Conn};
use crate::net::slab::Slab;
use crate::observability::{Observatory, Timing};
use crate::persistence::loading::LoadingState;
use crate::persistence::snapshot::SaveState;
use crate::replication::serve::ShardPart;
use crate::shard::{ShardCore, Shared};
use crate::stats::{ShardGauges, ShardStats, StatTables};
use crate::tracking::{Deliver, Directory, Tracking};
use crate::transactions::watch::Watches;
use ruvio_engine::scripting::ScriptWatches;
use ruvio_engine::{CmdError, Engine};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Instant;

/// The command table's server rows run on this shard's core: each handler's
/// one instance is `ShardCore`'s.
impl RowsFor for Rows {
    type Core = ShardCore;
}

impl Server for ShardCore {
    #[inline]
    fn shard_id(&self) -> usize {
        self.id
    }

    #[inline]
    fn now_ms(&self) -> u64 {
        self.now_ms
    }

    #[inline]
    fn settings(&self) -> &Config {
        &self.cfg
    }

    #[inline]
    fn topology(&self) -> &Arc<Topology> {
        &self.topo
    }

    #[inline]
    fn engine(&self) -> &Engine {
        &self.engine
    }

    #[inline]
    fn engine_mut(&mut self) -> &mut Engine {
        &mut self.engine
    }

    #[inline]
    fn watch_table(&self) -> &Watches {
        &self.watches
    }

    #[inline]
    fn tracking_table(&self) -> &Tracking {
        &self.tracking
    }

    #[inline]
    fn mark_conn_dirty(&mut self, who: (u32, u32)) {
        self.dirty.push(who);
    }

    fn pause_everywhere(&mut self, until_ms: u64, all: bool) {
        self.pause.start(until_ms, all);
        self.outbox.broadcast(ConfigChange::Pause { until_ms, all });
    }

    fn unpause_everywhere(&mut self, conns: &mut Slab<Conn>) {
        super::end_pause(self, conns);
        self.outbox.broadcast(ConfigChange::Unpause);
    }

    #[inline]
    fn broadcast(&mut self, change: ConfigChange) {
        self.outbox.broadcast(change);
    }

    #[inline]
    fn unblock_client(&mut self, conns: &mut Slab<Conn>, client_id: u64, error: bool) -> bool {
        super::exec::unblock(self, conns, client_id, error)
    }

    #[inline]
    fn publish_gauges_now(&self, clients: usize) {
        super::publish_gauges(self, clients);
    }

    #[inline]
    fn blocked_clients(&self) -> u64 {
        super::blocked_here(self)
    }

    fn publish_histograms(&self) {
        let histograms = self.timing.histograms();
        self.shared
            .observatory
            .publish_histograms(self.id, histograms);
    }

    #[inline]
    fn live_stats(&self) -> &ShardStats {
        &self.stats
    }

    #[inline]
    fn log_failed(&self) -> bool {
        self.wal.as_ref().is_some_and(|w| w.failed().is_some())
    }

    #[inline]
    fn attach_monitor(&mut self, who: (u32, u32)) {
        self.monitors.attach(&self.shared.monitors, self.id, who);
    }

    #[inline]
    fn detach_monitor(&mut self, who: (u32, u32)) {
        self.monitors.detach(&self.shared.monitors, self.id, who);
    }

    #[inline]
    fn has_log(&self) -> bool {
        self.wal.is_some()
    }

    #[inline]
    fn log_bytes(&self) -> Option<LogBytes> {
        self.wal.as_ref().map(|wal| LogBytes {
            appended: wal.appended_bytes(),
            synced: wal.synced_bytes(),
        })
    }

    #[inline]
    fn command_timing(&self) -> &Timing {
        &self.timing
    }

    #[inline]
    fn tracking_parts(&mut self) -> (&mut Tracking, Deliver<'_>) {
        ShardCore::tracking_parts(self)
    }

    #[inline]
    fn cluster_node(&self) -> Option<&ShardNode> {
        self.cluster_node.as_deref()
    }

    #[inline]
    fn cluster_node_mut(&mut self) -> Option<&mut ShardNode> {
        self.cluster_node.as_deref_mut()
    }

    #[inline]
    fn node_routes(&self) -> Option<&crate::cluster::slot_map::NodeRoutes> {
        ShardCore::node_routes(self)
    }

    #[inline]
    fn delivery(&mut self) -> (Delivery<'_>, &mut Outbox) {
        ShardCore::delivery(self)
    }

    #[inline]
    fn deliver_published(&mut self, conns: &mut Slab<Conn>, caller: Option<Caller<'_>>) {
        ShardCore::deliver_published(self, conns, caller);
    }

    #[inline]
    fn visible_shards(&self) -> std::ops::Range<usize> {
        ShardCore::visible_shards(self)
    }

    #[inline]
    fn replication_part(&mut self) -> &mut ShardPart {
        &mut self.replication
    }

    fn flush_replication_feed(&mut self) {
        crate::shard::primary::flush_feed(self);
    }

    #[inline]
    fn feed_replicas(&mut self, db: usize, argv: &mut dyn Iterator<Item = &[u8]>) {
        self.replication.feed.record(db, argv);
    }

    #[inline]
    fn unwatch(&mut self, client: &mut ClientState) {
        crate::transactions::multi::unwatch(self, client);
    }

    #[inline]
    fn discard(&mut self, client: &mut ClientState) -> Result<(), CmdError> {
        crate::transactions::multi::discard(self, client)
    }

    type Shared = Shared;

    #[inline]
    fn shared(&self) -> &Shared {
        &self.shared
    }
}

impl crate::cmd::migrate::MovesKeys for ShardCore {
    fn delete_moved(&mut self, client: &ClientState, keys: &[&[u8]]) {
        let del = crate::cmd::registry::registry()
            .lookup(b"del")
            .expect("DEL is in the table");
        let argv: ruvio_resp::OwnedArgs = std::iter::once(b"DEL".as_slice())
            .chain(keys.iter().copied())
            .collect();
        let caller = crate::net::caller::Caller::of(client, self.id);
        // DEL's reply (the count) is MIGRATE's business, not the client's.
        let mut discarded = Vec::new();
        super::exec::run_engine(self, del, caller, argv.args(), &mut discarded);
        for key in keys {
            super::node_forward::publish_slot_keys(self, ruvio_engine::slot::key_slot(key));
        }
    }
}

impl SharedReads for Shared {
    #[inline]
    fn used_for_maxmemory(&self) -> u64 {
        super::eviction::used_for_limit(self)
    }

    #[inline]
    fn shards(&self) -> &[ShardGauges] {
        &self.shards
    }

    #[inline]
    fn started(&self) -> Instant {
        self.started
    }

    #[inline]
    fn run_id(&self) -> &str {
        &self.run_id
    }

    #[inline]
    fn last_save_unix_s(&self) -> u64 {
        self.last_save_unix_s.load(Relaxed)
    }

    #[inline]
    fn background_save(&self) -> &SaveState {
        &self.background_save
    }

    #[inline]
    fn loading(&self) -> &LoadingState {
        &self.loading
    }

    #[inline]
    fn pubsub(&self) -> &Subscribers {
        &self.pubsub
    }

    #[inline]
    fn tracking(&self) -> &Directory {
        &self.tracking
    }

    #[inline]
    fn observatory(&self) -> &Observatory {
        &self.observatory
    }

    #[inline]
    fn replication(&self) -> &crate::replication::State {
        &self.replication
    }

    #[inline]
    fn stats_epoch(&self) -> u64 {
        Shared::stats_epoch(self)
    }

    #[inline]
    fn next_stats_epoch(&self) -> u64 {
        Shared::next_stats_epoch(self)
    }

    #[inline]
    fn acl(&self) -> &Arc<Acl> {
        &self.acl
    }

    #[inline]
    fn blocked_on(&self, client_id: u64) -> Option<usize> {
        Shared::blocked_on(self, client_id)
    }

    #[inline]
    fn active_expire(&self) -> &[AtomicBool] {
        &self.active_expire
    }

    #[inline]
    fn scripts(&self) -> &ScriptWatches {
        &self.scripts
    }

    #[inline]
    fn sum(&self, gauge: impl Fn(&ShardGauges) -> &AtomicU64) -> u64 {
        Shared::sum(self, gauge)
    }

    #[inline]
    fn sum_counter(&self, gauge: impl Fn(&ShardGauges) -> &AtomicU64) -> u64 {
        Shared::sum_counter(self, gauge)
    }

    #[inline]
    fn for_tables(
        &self,
        shards: std::ops::Range<usize>,
        skipped: Option<usize>,
        f: impl FnMut(&StatTables),
    ) {
        Shared::for_tables(self, shards, skipped, f);
    }
}
