//! Redis' `save` rules: `save 3600 1 300 100 60 10000` means "take a background
//! snapshot when at least 1 change happened and the last save is more than 3600 s
//! old, or 100 changes and 300 s, or 10000 changes and 60 s" (Redis' serverCron).
//!
//! The rules are a server setting (config file `save = "..."`, `--save`, CONFIG
//! GET/SET `save`, every shard keeps a copy); shard 0 checks them on its tick
//! against the changes of every shard since the last save (the gauges the shards
//! publish) and starts a BGSAVE of the whole server ([`crate::persistence::snapshot`]). After a
//! failed save the next try waits 5 s, as Redis' `CONFIG_BGSAVE_RETRY_DELAY`.
//! Without a log (`--durability memory`) there is nowhere to save and the rules
//! do nothing.

use crate::persistence::snapshot::Kind;
use crate::shard::ShardCore;
use std::sync::atomic::Ordering::Relaxed;

/// Seconds before a failed save is tried again.
const RETRY_DELAY_S: u64 = 5;

/// Shard 0's tick: start a background save when a rule is met and none runs.
pub fn check(core: &mut ShardCore) {
    if core.id != 0 || core.wal.is_none() || core.cfg.save.is_empty() {
        return;
    }
    let shared = &core.shared;
    let saves = &shared.background_save;
    if saves.running_kind().is_some() {
        return;
    }
    let now_s = core.now_ms / 1000;
    if !saves.last_ok() && now_s.saturating_sub(saves.started_ms() / 1000) <= RETRY_DELAY_S {
        return;
    }
    let changes = shared
        .sum(|g| &g.dirty)
        .saturating_sub(shared.sum(|g| &g.dirty_at_save));
    let since = now_s.saturating_sub(shared.last_save_unix_s.load(Relaxed));
    let Some(rule) = core
        .cfg
        .save
        .iter()
        .find(|r| changes >= r.changes && since > r.seconds)
    else {
        return;
    };
    eprintln!(
        "ruvio: {} changes in {} seconds. Saving...",
        rule.changes, rule.seconds
    );
    crate::persistence::snapshot::start(core, Kind::Rdb);
}
