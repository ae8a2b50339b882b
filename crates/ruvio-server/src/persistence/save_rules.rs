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

/// Redis' default rules.
pub const DEFAULT: &str = "3600 1 300 100 60 10000";

/// Seconds before a failed save is tried again.
const RETRY_DELAY_S: u64 = 5;

/// One rule: a save when at least `changes` changes happened and the last save is
/// more than `seconds` old.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SaveRule {
    pub seconds: u64,
    pub changes: u64,
}

/// Rules from their text, `"<seconds> <changes> ..."` (`""`: none). Like Redis, an
/// odd count, a non-integer, seconds below 1 or negative changes are refused.
pub fn parse(text: &str) -> Result<Vec<SaveRule>, String> {
    let words: Vec<&str> = text.split_whitespace().collect();
    if words.len() % 2 == 1 {
        return Err("Invalid save parameters".into());
    }
    words
        .chunks(2)
        .map(|pair| {
            let seconds = pair[0].parse::<i64>().ok().filter(|&s| s >= 1);
            let changes = pair[1].parse::<i64>().ok().filter(|&c| c >= 0);
            match (seconds, changes) {
                (Some(seconds), Some(changes)) => Ok(SaveRule {
                    seconds: seconds as u64,
                    changes: changes as u64,
                }),
                _ => Err("Invalid save parameters".into()),
            }
        })
        .collect()
}

/// The rules as CONFIG GET shows them.
pub fn format(rules: &[SaveRule]) -> String {
    rules
        .iter()
        .map(|r| format!("{} {}", r.seconds, r.changes))
        .collect::<Vec<_>>()
        .join(" ")
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_parse_as_redis_takes_them() {
        let rules = parse(DEFAULT).unwrap();
        assert_eq!(rules.len(), 3);
        assert_eq!(
            rules[1],
            SaveRule {
                seconds: 300,
                changes: 100
            }
        );
        assert_eq!(format(&rules), DEFAULT);
        assert_eq!(parse("").unwrap(), vec![]);
        assert_eq!(format(&parse("  10   0 ").unwrap()), "10 0");
        for bad in ["1", "0 1", "1 -1", "x 1", "1 1.5", "1 2 3"] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }
}
