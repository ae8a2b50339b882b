//! `maxmemory` on a shard: [`Evicting`] for `ShardCore`, what the limit's rules
//! (`memory::limit`) read and do here: the gauges every shard publishes, the
//! keyspace's eviction, and what an evicted key implies for the log, the
//! replicas, keyspace notifications and CLIENT TRACKING.

use crate::memory::limit::Evicting;
use crate::shard::{ShardCore, Shared};
use ruvio_engine::EvictionPolicy;
use std::sync::atomic::Ordering::Relaxed;

impl Evicting for ShardCore {
    #[inline]
    fn maxmemory_bytes(&self) -> u64 {
        self.cfg.maxmemory
    }

    fn policy(&self) -> EvictionPolicy {
        self.engine.config().maxmemory_policy
    }

    fn publish_sizes(&self) {
        publish_sizes(self);
    }

    fn uncounted_bytes(&self) -> u64 {
        self.shared.sum(|g| &g.reusable_bytes) + not_counted(&self.shared)
    }

    fn datasets(&self) -> (u64, u64, u64) {
        let shared = &self.shared;
        let mine = shared.shards[self.id].dataset_bytes.load(Relaxed);
        (
            mine,
            shared.sum(|g| &g.dataset_bytes),
            shared.shards.len() as u64,
        )
    }

    fn evict_one(&mut self) -> bool {
        let Some((db, key)) = self.engine.evict_one(self.now_ms) else {
            return false;
        };
        // Redis propagates an eviction as a DEL: a restart must not bring it back.
        self.log_record(db, [&b"DEL"[..], &key].into_iter());
        let flags = self.cfg.notify_keyspace_events;
        self.notifications.queue(
            flags,
            crate::config::keyspace_events::EVICTED,
            "evicted",
            db,
            &key,
        );
        // Its readers (CLIENT TRACKING) drop it from their caches, as after a write.
        if self.tracking.active() {
            self.tracking.written(0, false, &key);
        }
        self.stats.dirty += 1;
        true
    }

    fn others_hold_keys(&self, volatile: bool) -> bool {
        let me = self.id;
        self.shared.shards.iter().enumerate().any(|(id, g)| {
            id != me
                && g.keys.iter().any(|(keys, expires)| {
                    let n = if volatile { expires } else { keys };
                    n.load(Relaxed) > 0
                })
        })
    }
}

/// Bytes counted against `maxmemory` now, server-wide (INFO `used_memory` less
/// what the limit leaves out: see `memory::limit::used_for_limit`).
pub fn used_for_limit(shared: &Shared) -> u64 {
    let uncounted = shared.sum(|g| &g.reusable_bytes) + not_counted(shared);
    crate::memory::limit::used_for_limit(uncounted)
}

/// The backlog and the replicas' output bytes (INFO `mem_not_counted_for_evict`).
pub fn not_counted(shared: &Shared) -> u64 {
    shared.sum(|g| &g.replica_output_bytes) + shared.replication.backlog_bytes()
}

/// Publish what this shard's keyspace will reuse and how big its dataset is (on
/// every check, and with the shard's other gauges).
pub fn publish_sizes(core: &ShardCore) {
    let gauges = &core.shared.shards[core.id];
    let reusable = core.engine.reusable_bytes() as u64;
    gauges.reusable_bytes.store(reusable, Relaxed);
    let dataset = core.engine.used_memory_bytes() as u64;
    gauges
        .dataset_bytes
        .store(dataset.saturating_sub(reusable), Relaxed);
}
