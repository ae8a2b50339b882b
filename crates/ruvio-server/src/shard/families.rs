//! The server's command families (`cmd`, a floor below) as the shard serves them:
//! [`Server`] and [`SharedReads`] for `ShardCore` and `Shared`, the steps a
//! handler asks of the shard without naming it (CLIENT PAUSE's end, CLIENT
//! UNBLOCK, INFO's gauges as of now), and the reads of the core and of `Shared`
//! they make (CLIENT's part of a gathered answer, INFO's sections).

use crate::cluster::topology::Topology;
use crate::cmd::{Server, SharedReads};
use crate::config::Config;
use crate::messaging::pubsub::Subscribers;
use crate::net::conn::Conn;
use crate::net::slab::Slab;
use crate::observability::Observatory;
use crate::persistence::loading::LoadingState;
use crate::persistence::snapshot::SaveState;
use crate::shard::{ShardCore, Shared};
use crate::stats::{ShardGauges, ShardStats, StatTables};
use crate::tracking::Directory;
use crate::transactions::watch::Watches;
use ruvio_engine::Engine;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Instant;

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
    fn tracking_table(&self) -> &crate::tracking::Tracking {
        &self.tracking
    }

    #[inline]
    fn mark_conn_dirty(&mut self, who: (u32, u32)) {
        self.dirty.push(who);
    }

    #[inline]
    fn end_pause(&mut self, conns: &mut Slab<Conn>) {
        super::end_pause(self, conns);
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

    type Shared = Shared;

    #[inline]
    fn shared(&self) -> &Shared {
        &self.shared
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
