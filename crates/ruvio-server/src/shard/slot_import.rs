//! The target's side of a whole-slot migration's pace (docs/cluster.md,
//! "Whole-slot migration"): the source's connection (CLIENT LIST flag `o`,
//! between SYNCSLOTS START and FINISH) runs its commands in the slices
//! `cluster/slot_pace.rs` gives, the same share of the shard's time as an
//! export's work (and one command whenever it waited [`BUSY_SLICE_MAX`]).
//! What it sent meanwhile waits unread in the socket, and TCP holds the
//! source back (its queue fills, it stops reading keys).
//!
//! Why: the stream's RESTOREs cost the target about what reading the keys
//! costs the source, and an idle source sends as fast as the target reads,
//! so a target whose own clients are busy would otherwise spend its time on
//! the import whatever they need.

use super::Shard;
use crate::cluster::slot_migration::SlotMigrations;
use crate::cluster::slot_pace::BUSY_SLICE_MAX;
use crate::shard::ShardCore;
use std::time::{Duration, Instant};

/// The node's migrations, when the shard is a cluster node.
fn migrations(core: &mut ShardCore) -> Option<&mut SlotMigrations> {
    core.cluster_node
        .as_deref_mut()
        .map(|node| &mut node.slot_migrations)
}

/// Before the source's connection's input runs: whether it runs now, in
/// the slice the pace allows; with no budget, one command all the same once
/// it waited [`BUSY_SLICE_MAX`] (a FINISH behind an empty budget would hold
/// the source's writes a sleep of the loop longer), else it waits for a
/// later turn ([`Shard::run_waiting_imports`]).
pub(super) fn begin(core: &mut ShardCore, who: (u32, u32)) -> bool {
    let commands = core.stats.commands;
    let Some(migrations) = migrations(core) else {
        return true;
    };
    let now = Instant::now();
    let waited = |at: Instant| now.saturating_duration_since(at) >= BUSY_SLICE_MAX;
    let slice = match migrations.pace.slice(now, commands) {
        Some(slice) => slice,
        None if migrations.import_ran_at.is_none_or(waited) => Duration::ZERO,
        None => {
            wait_for_slice(migrations, who);
            return false;
        }
    };
    migrations.import_ran_at = Some(now);
    migrations.import_slice = Some((now, slice));
    true
}

/// While the source's connection's commands run: the slice is over (or
/// none began: START made the connection an import in mid-input), and the
/// rest of its input waits.
#[inline]
pub(super) fn time_up(core: &mut ShardCore) -> bool {
    let Some(migrations) = migrations(core) else {
        return false;
    };
    let over = migrations
        .import_slice
        .is_none_or(|(began, slice)| began.elapsed() >= slice);
    migrations.import_cut |= over;
    over
}

/// After the source's connection's input ran: the slice's time is spent;
/// true when the rest of its input waits for a later slice (the connection
/// is then listed for one, and reads no more meanwhile).
pub(super) fn end(core: &mut ShardCore, who: (u32, u32)) -> bool {
    let commands = core.stats.commands;
    let Some(migrations) = migrations(core) else {
        return false;
    };
    match migrations.import_slice.take() {
        Some((began, slice)) => migrations.pace.spent(slice, began.elapsed(), commands),
        // START made the connection an import: not a client's command.
        None => migrations.pace.own_commands(commands),
    }
    let cut = std::mem::take(&mut migrations.import_cut);
    if cut {
        wait_for_slice(migrations, who);
    }
    cut
}

fn wait_for_slice(migrations: &mut SlotMigrations, who: (u32, u32)) {
    if !migrations.import_waiting.contains(&who) {
        migrations.import_waiting.push(who);
    }
}

impl Shard {
    /// On every turn of the loop: the source connections whose input waits
    /// for a slice run, if the pace gives one.
    #[inline]
    pub(super) fn run_waiting_imports(&mut self) {
        let waiting = self
            .core
            .cluster_node
            .as_deref_mut()
            .map(|node| std::mem::take(&mut node.slot_migrations.import_waiting))
            .unwrap_or_default();
        for (index, gen) in waiting {
            self.run_input(index, gen);
        }
    }
}
