//! Snapshots on a shard: [`Saving`] for `ShardCore`, what SAVE, BGSAVE and
//! BGREWRITEAOF (`persistence::snapshot`) ask of it: its keyspace and log, its
//! change counts and their gauges, LASTSAVE, its keys out on loan (`lending`),
//! the broadcast that starts the other shards' parts.

use crate::observability::{Observatory, Timing};
use crate::persistence::snapshot::{SaveState, Saving, ShardSave};
use crate::persistence::wal::Wal;
use crate::shard::ShardCore;
use ruvio_engine::Engine;
use std::sync::atomic::Ordering::Relaxed;

impl Saving for ShardCore {
    fn shard(&self) -> usize {
        self.id
    }

    fn shards(&self) -> usize {
        self.topo.nodes.len()
    }

    fn now_ms(&self) -> u64 {
        self.now_ms
    }

    fn wal(&self) -> Option<&Wal> {
        self.wal.as_ref()
    }

    fn engine(&mut self) -> &mut Engine {
        &mut self.engine
    }

    fn snapshot_taken(&mut self) {
        self.lending.snapshot_taken();
    }

    fn stream_mark(&self) -> Option<crate::persistence::stream_mark::StreamMark> {
        self.stream_marks.exact(self.wal.as_ref()?).cloned()
    }

    fn save_state(&self) -> &SaveState {
        &self.shared.background_save
    }

    fn part(&mut self) -> &mut ShardSave {
        &mut self.background_save
    }

    fn changes(&self) -> u64 {
        self.stats.dirty
    }

    fn saved_up_to(&mut self, changes: u64, publish: bool) {
        self.stats.dirty_at_save = changes;
        if publish {
            let gauges = &self.shared.shards[self.id];
            gauges.dirty.store(self.stats.dirty, Relaxed);
            gauges.dirty_at_save.store(changes, Relaxed);
        }
    }

    fn saved_at(&self, unix_s: u64) {
        self.shared.last_save_unix_s.fetch_max(unix_s, Relaxed);
    }

    fn tell_others(&mut self) {
        self.outbox
            .broadcast(crate::config::change::ConfigChange::BackgroundSave);
    }

    fn timing(&self) -> (&Timing, &Observatory) {
        (&self.timing, &self.shared.observatory)
    }
}
