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

use crate::config::save::SaveRule;
use crate::persistence::snapshot::SaveState;

/// Seconds before a failed save is tried again.
const RETRY_DELAY_S: u64 = 5;

/// Shard 0's tick (with a log): the rule that asks for a background save now, if
/// one does and no save runs, given the changes of every shard since the last save
/// and that save's time. The caller starts the save (`snapshot::start`): deciding
/// needs only these numbers, not the shard.
pub fn due<'r>(
    rules: &'r [SaveRule],
    saves: &SaveState,
    changes: u64,
    last_save_unix_s: u64,
    now_ms: u64,
) -> Option<&'r SaveRule> {
    if rules.is_empty() || saves.running_kind().is_some() {
        return None;
    }
    let now_s = now_ms / 1000;
    if !saves.last_ok() && now_s.saturating_sub(saves.started_ms() / 1000) <= RETRY_DELAY_S {
        return None;
    }
    let since = now_s.saturating_sub(last_save_unix_s);
    let rule = rules
        .iter()
        .find(|r| changes >= r.changes && since > r.seconds)?;
    eprintln!(
        "ruvio: {} changes in {} seconds. Saving...",
        rule.changes, rule.seconds
    );
    Some(rule)
}
