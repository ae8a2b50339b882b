//! CONFIG: GET, SET, RESETSTAT, REWRITE, HELP, over one table of parameters
//! (`PARAMS`: how each is shown and, if mutable, set).
//!
//! One server, one configuration: CONFIG SET and RESETSTAT apply on the answering
//! shard and are broadcast to the others as a [`ConfigChange`], which they apply
//! within a loop iteration ([`apply_config_change`]). The same message carries the
//! other server-wide changes a command on one shard makes (CLIENT PAUSE, SAVE,
//! SHUTDOWN, FUNCTION ...).

use super::{Ctx, ServerCommand, ServerResult};
use crate::config::change::ConfigChange;
use crate::config::{parse_memory, PortMode};
use crate::net::conn::Conn;
use crate::net::slab::Slab;
use crate::shard::ShardCore;
use crate::stats::ShardStats;
use ruvio_engine::command::{command, flags::*, reply_help};
use ruvio_engine::{CmdError, EvictionPolicy, KeySpec};
use ruvio_resp::{Args, Reply};

/// The CONFIG family's table (its subcommands are `CONFIG_SUBCOMMANDS`).
#[rustfmt::skip]
pub const COMMANDS: &[ServerCommand] = &[
    command!("config", -2, 0, KeySpec::NONE, ["slow"], "server", "2.0.0",
        "A container for server configuration commands.", "Depends on subcommand.",
        subcommands = CONFIG_SUBCOMMANDS),
];

/// Applies a CONFIG SET value; `Err` when the value is not acceptable.
type ParamSetter = fn(&mut ShardCore, &str) -> Result<(), ()>;

/// A CONFIG parameter: how to show it and (if mutable) how to set it.
struct Param {
    name: &'static str,
    get: fn(&ShardCore) -> String,
    set: Option<ParamSetter>,
}

fn set_hz(core: &mut ShardCore, v: &str) -> Result<(), ()> {
    core.cfg.hz = v.parse::<u32>().map_err(|_| ())?.clamp(1, 500);
    Ok(())
}

fn set_requirepass(core: &mut ShardCore, v: &str) -> Result<(), ()> {
    core.cfg.requirepass = (!v.is_empty()).then(|| v.to_string());
    Ok(())
}

fn set_bulk_len(core: &mut ShardCore, v: &str) -> Result<(), ()> {
    let n = parse_memory(v).filter(|&n| n >= 1 << 20).ok_or(())?;
    core.cfg.proto_max_bulk_len = n;
    core.limits.bulk_bytes_max = n;
    core.engine.config_mut().proto_max_bulk_len = n;
    Ok(())
}

fn set_query_limit(core: &mut ShardCore, v: &str) -> Result<(), ()> {
    core.cfg.client_query_buffer_limit = parse_memory(v).filter(|&n| n >= 1 << 20).ok_or(())?;
    Ok(())
}

fn set_list_max_listpack_size(core: &mut ShardCore, v: &str) -> Result<(), ()> {
    core.engine.config_mut().list_max_listpack_size = v.parse::<i32>().map_err(|_| ())?;
    Ok(())
}

/// Redis' size_t configs take 0..=LONG_MAX.
fn parse_size(v: &str) -> Result<usize, ()> {
    v.parse::<usize>()
        .ok()
        .filter(|&n| n <= i64::MAX as usize)
        .ok_or(())
}

fn set_hash_max_listpack_entries(core: &mut ShardCore, v: &str) -> Result<(), ()> {
    core.engine.config_mut().hash_max_listpack_entries = parse_size(v)?;
    Ok(())
}

fn set_hash_max_listpack_value(core: &mut ShardCore, v: &str) -> Result<(), ()> {
    core.engine.config_mut().hash_max_listpack_value = parse_size(v)?;
    Ok(())
}

fn set_zset_max_listpack_entries(core: &mut ShardCore, v: &str) -> Result<(), ()> {
    core.engine.config_mut().zset_max_listpack_entries = parse_size(v)?;
    Ok(())
}

fn set_zset_max_listpack_value(core: &mut ShardCore, v: &str) -> Result<(), ()> {
    core.engine.config_mut().zset_max_listpack_value = parse_size(v)?;
    Ok(())
}

/// `save` rules (see `save_rules`).
fn set_save_rules(core: &mut ShardCore, v: &str) -> Result<(), ()> {
    core.cfg.save = crate::config::save::parse(v).map_err(|_| ())?;
    Ok(())
}
const PARAMS: &[Param] = &[
    Param {
        name: "bind",
        get: |c| c.cfg.bind.clone(),
        set: None,
    },
    Param {
        name: "port",
        get: |c| c.cfg.port.to_string(),
        set: None,
    },
    Param {
        name: "databases",
        get: |c| c.cfg.databases.to_string(),
        set: None,
    },
    Param {
        name: "save",
        get: |c| crate::config::save::format(&c.cfg.save),
        set: Some(set_save_rules),
    },
    Param {
        name: "appendonly",
        get: |c| if c.cfg.durability.logs() { "yes" } else { "no" }.into(),
        set: Some(|c, v| {
            let now = if c.cfg.durability.logs() { "yes" } else { "no" };
            (v == now).then_some(()).ok_or(())
        }),
    },
    Param {
        name: "appendfsync",
        get: |_| "everysec".into(),
        set: None,
    },
    Param {
        name: "requirepass",
        get: |c| c.cfg.requirepass.clone().unwrap_or_default(),
        set: Some(set_requirepass),
    },
    Param {
        name: "hz",
        get: |c| c.cfg.hz.to_string(),
        set: Some(set_hz),
    },
    Param {
        name: "proto-max-bulk-len",
        get: |c| c.cfg.proto_max_bulk_len.to_string(),
        set: Some(set_bulk_len),
    },
    Param {
        name: "client-query-buffer-limit",
        get: |c| c.cfg.client_query_buffer_limit.to_string(),
        set: Some(set_query_limit),
    },
    Param {
        name: "list-max-listpack-size",
        get: |c| c.engine.config().list_max_listpack_size.to_string(),
        set: Some(set_list_max_listpack_size),
    },
    Param {
        name: "list-max-ziplist-size",
        get: |c| c.engine.config().list_max_listpack_size.to_string(),
        set: Some(set_list_max_listpack_size),
    },
    Param {
        name: "hash-max-listpack-entries",
        get: |c| c.engine.config().hash_max_listpack_entries.to_string(),
        set: Some(set_hash_max_listpack_entries),
    },
    Param {
        name: "hash-max-ziplist-entries",
        get: |c| c.engine.config().hash_max_listpack_entries.to_string(),
        set: Some(set_hash_max_listpack_entries),
    },
    Param {
        name: "hash-max-listpack-value",
        get: |c| c.engine.config().hash_max_listpack_value.to_string(),
        set: Some(set_hash_max_listpack_value),
    },
    Param {
        name: "hash-max-ziplist-value",
        get: |c| c.engine.config().hash_max_listpack_value.to_string(),
        set: Some(set_hash_max_listpack_value),
    },
    Param {
        name: "zset-max-listpack-entries",
        get: |c| c.engine.config().zset_max_listpack_entries.to_string(),
        set: Some(set_zset_max_listpack_entries),
    },
    Param {
        name: "zset-max-ziplist-entries",
        get: |c| c.engine.config().zset_max_listpack_entries.to_string(),
        set: Some(set_zset_max_listpack_entries),
    },
    Param {
        name: "zset-max-listpack-value",
        get: |c| c.engine.config().zset_max_listpack_value.to_string(),
        set: Some(set_zset_max_listpack_value),
    },
    Param {
        name: "zset-max-ziplist-value",
        get: |c| c.engine.config().zset_max_listpack_value.to_string(),
        set: Some(set_zset_max_listpack_value),
    },
    Param {
        name: "set-max-intset-entries",
        get: |c| c.engine.config().set_max_intset_entries.to_string(),
        set: Some(|c, v| {
            c.engine.config_mut().set_max_intset_entries = parse_size(v)?;
            Ok(())
        }),
    },
    Param {
        name: "set-max-listpack-entries",
        get: |c| c.engine.config().set_max_listpack_entries.to_string(),
        set: Some(|c, v| {
            c.engine.config_mut().set_max_listpack_entries = parse_size(v)?;
            Ok(())
        }),
    },
    Param {
        name: "set-max-listpack-value",
        get: |c| c.engine.config().set_max_listpack_value.to_string(),
        set: Some(|c, v| {
            c.engine.config_mut().set_max_listpack_value = parse_size(v)?;
            Ok(())
        }),
    },
    Param {
        name: "hll-sparse-max-bytes",
        get: |c| c.engine.config().hll_sparse_max_bytes.to_string(),
        set: Some(|c, v| {
            let n = parse_memory(v)
                .filter(|&n| n <= i64::MAX as usize)
                .ok_or(())?;
            c.engine.config_mut().hll_sparse_max_bytes = n;
            Ok(())
        }),
    },
    Param {
        name: "maxmemory",
        get: |c| c.cfg.maxmemory.to_string(),
        set: Some(|c, v| {
            c.cfg.maxmemory = parse_memory(v).ok_or(())? as u64;
            Ok(())
        }),
    },
    Param {
        name: "maxmemory-policy",
        get: |c| c.engine.config().maxmemory_policy.name().into(),
        set: Some(|c, v| {
            c.engine.config_mut().maxmemory_policy = EvictionPolicy::parse(v).ok_or(())?;
            Ok(())
        }),
    },
    Param {
        name: "maxmemory-samples",
        get: |c| c.engine.config().maxmemory_samples.to_string(),
        set: Some(|c, v| {
            let n = v.parse::<usize>().map_err(|_| ())?;
            c.engine.config_mut().maxmemory_samples =
                (1..=64).contains(&n).then_some(n).ok_or(())?;
            Ok(())
        }),
    },
    Param {
        name: "lfu-log-factor",
        get: |c| c.engine.config().lfu_log_factor.to_string(),
        set: Some(|c, v| {
            c.engine.config_mut().lfu_log_factor = v.parse().map_err(|_| ())?;
            Ok(())
        }),
    },
    Param {
        name: "lfu-decay-time",
        get: |c| c.engine.config().lfu_decay_time.to_string(),
        set: Some(|c, v| {
            c.engine.config_mut().lfu_decay_time = v.parse().map_err(|_| ())?;
            Ok(())
        }),
    },
    Param {
        name: "maxclients",
        get: |c| c.cfg.maxclients.to_string(),
        set: Some(|c, v| {
            c.cfg.maxclients = v.parse::<u64>().ok().filter(|&n| n >= 1).ok_or(())?;
            Ok(())
        }),
    },
    Param {
        name: "notify-keyspace-events",
        get: |c| crate::config::keyspace_events::render(c.cfg.notify_keyspace_events),
        set: Some(|c, v| {
            let flags = crate::config::keyspace_events::parse(v).ok_or(())?;
            c.cfg.notify_keyspace_events = flags;
            c.engine
                .record_expired(crate::messaging::notify::expiry_wanted(flags));
            let (added, missed) = crate::messaging::notify::key_notes_wanted(flags);
            c.engine.record_key_notes(added, missed);
            Ok(())
        }),
    },
    Param {
        name: "client-output-buffer-limit",
        get: |c| c.cfg.client_output_buffer_limit.render(),
        set: Some(|c, v| {
            c.cfg.client_output_buffer_limit = c
                .cfg
                .client_output_buffer_limit
                .updated(v)
                .map_err(|_| ())?;
            Ok(())
        }),
    },
    Param {
        name: "timeout",
        get: |c| c.cfg.timeout_s.to_string(),
        set: Some(|c, v| {
            c.cfg.timeout_s = v.parse().map_err(|_| ())?;
            Ok(())
        }),
    },
    Param {
        name: "cluster-announce-ip",
        get: |c| c.cfg.cluster_announce_ip.clone(),
        set: Some(|c, v| {
            c.cfg.cluster_announce_ip = v.to_string();
            Ok(())
        }),
    },
    Param {
        name: "cluster-enabled",
        get: |c| {
            if c.cfg.port_mode == PortMode::PerShard {
                "yes".into()
            } else {
                "no".into()
            }
        },
        set: None,
    },
    Param {
        name: "io-threads",
        get: |_| "1".into(),
        set: None,
    },
    // Ruvio never forks into the background; known so that CONFIG SET answers
    // Redis' "can't set immutable config" rather than "Unknown option".
    Param {
        name: "daemonize",
        get: |_| "no".into(),
        set: None,
    },
    Param {
        name: "shards",
        get: |c| c.cfg.shards.to_string(),
        set: None,
    },
    Param {
        name: "port-mode",
        get: |c| c.cfg.port_mode.name().into(),
        set: None,
    },
    Param {
        name: "durability",
        get: |c| c.cfg.durability.name().into(),
        set: None,
    },
    Param {
        name: "busy-reply-threshold",
        get: |c| c.shared.scripts.threshold_ms().to_string(),
        set: Some(set_busy_reply_threshold),
    },
    Param {
        name: "lua-time-limit",
        get: |c| c.shared.scripts.threshold_ms().to_string(),
        set: Some(set_busy_reply_threshold),
    },
];

/// `busy-reply-threshold` (alias `lua-time-limit`), ms: one value for every shard.
fn set_busy_reply_threshold(core: &mut ShardCore, v: &str) -> Result<(), ()> {
    let ms = v
        .parse::<u64>()
        .ok()
        .filter(|&ms| ms <= i64::MAX as u64)
        .ok_or(())?;
    core.shared.scripts.set_threshold_ms(ms);
    Ok(())
}

/// CONFIG's subcommands, with Redis' arity, flags and ACL categories.
#[rustfmt::skip]
const CONFIG_SUBCOMMANDS: &[ServerCommand] = &[
    command!("config|get", -3, ADMIN | NOSCRIPT | LOADING | STALE, KeySpec::NONE, ["admin", "slow", "dangerous"],
        "server", "2.0.0", "Get the values of configuration parameters",
        "O(N) when N is the number of configuration parameters provided", config_get),
    command!("config|set", -4, ADMIN | NOSCRIPT | LOADING | STALE, KeySpec::NONE, ["admin", "slow", "dangerous"],
        "server", "2.0.0", "Set configuration parameters to the given values",
        "O(N) when N is the number of configuration parameters provided", config_set),
    command!("config|resetstat", 2, ADMIN | NOSCRIPT | LOADING | STALE, KeySpec::NONE,
        ["admin", "slow", "dangerous"], "server", "2.0.0", "Reset the stats returned by INFO", "O(1)",
        config_resetstat),
    command!("config|rewrite", 2, ADMIN | NOSCRIPT | LOADING | STALE, KeySpec::NONE,
        ["admin", "slow", "dangerous"], "server", "2.8.0",
        "Overwrite the configuration file with the in-memory configuration", "O(1)", config_rewrite),
    command!("config|help", 2, LOADING | STALE, KeySpec::NONE, ["slow"], "server", "5.0.0",
        "Show helpful text about the different subcommands", "O(1)", config_help),
];

/// `CONFIG GET pattern [pattern ...]`: each parameter once, under the spelling of
/// the first pattern that matched it when that one is a plain name (Redis 7.0 keeps
/// the name as typed: `CONFIG GET HZ` answers `HZ`), else under its own name. A plain
/// name is compared without case, a pattern with `[`, `*` or `?` is a glob.
fn config_get(ctx: &mut Ctx<'_>, args: Args<'_>, reply: &mut Reply<'_>) -> ServerResult {
    let patterns: Vec<&[u8]> = args.iter().skip(2).collect();
    let matched: Vec<(&Param, &[u8])> = PARAMS
        .iter()
        .filter_map(|p| {
            let name = p.name.as_bytes();
            patterns.iter().find_map(|&pattern| {
                if !pattern.iter().any(|b| matches!(b, b'[' | b'*' | b'?')) {
                    pattern.eq_ignore_ascii_case(name).then_some((p, pattern))
                } else {
                    ruvio_engine::glob_match(&pattern.to_ascii_lowercase(), name)
                        .then_some((p, name))
                }
            })
        })
        .collect();
    reply.map(matched.len());
    for (p, shown) in matched {
        reply.bulk(shown);
        reply.bulk((p.get)(ctx.core).as_bytes());
    }
    Ok(())
}

/// `CONFIG SET parameter value [parameter value ...]`: all or nothing, as Redis 7:
/// names are checked first, then values applied in order; when one fails, the
/// ones applied before it get their old values back. As in Redis 7.0, a bad name
/// (unknown, immutable, given twice) is quoted as typed, a bad value's parameter
/// by its own name, and a name without a value is a syntax error.
fn config_set(ctx: &mut Ctx<'_>, args: Args<'_>, reply: &mut Reply<'_>) -> ServerResult {
    if !args.len().is_multiple_of(2) {
        return Err(CmdError::Syntax);
    }
    let mut changes: Vec<(&Param, ParamSetter, String)> = Vec::new();
    for pair in (2..args.len()).step_by(2) {
        let typed = args.get(pair);
        let value = String::from_utf8_lossy(args.get(pair + 1)).into_owned();
        let param = PARAMS
            .iter()
            .find(|p| p.name.as_bytes().eq_ignore_ascii_case(typed))
            .ok_or_else(|| CmdError::config_unknown(typed))?;
        let set = param.set.ok_or_else(|| CmdError::config_immutable(typed))?;
        if changes.iter().any(|(p, ..)| p.name == param.name) {
            return Err(CmdError::config_duplicate(typed));
        }
        changes.push((param, set, value));
    }
    let before: Vec<String> = changes.iter().map(|(p, ..)| (p.get)(ctx.core)).collect();
    for (i, (param, set, value)) in changes.iter().enumerate() {
        if set(ctx.core, value).is_err() {
            for ((_, undo, _), old) in changes[..i].iter().zip(&before).rev() {
                let _ = undo(ctx.core, old);
            }
            return Err(bad_value(param.name, value));
        }
    }
    let applied = changes
        .into_iter()
        .map(|(p, _, v)| (p.name.to_string(), v))
        .collect();
    ctx.core.outbox.broadcast(ConfigChange::Set(applied));
    crate::scripting::host::refresh(ctx.core);
    super::ok_everywhere(ctx, reply);
    Ok(())
}

/// CONFIG SET's error for a value `name` cannot take, with Redis' reason.
fn bad_value(name: &str, value: &str) -> CmdError {
    let reason = match name {
        "maxmemory-policy" => format!(
            "argument(s) must be one of the following: {}",
            EvictionPolicy::names()
        ),
        "maxmemory" | "proto-max-bulk-len" | "client-query-buffer-limit" => {
            "argument must be a memory value".into()
        }
        "notify-keyspace-events" => crate::config::keyspace_events::INVALID.into(),
        "save" => "Invalid save parameters".into(),
        "client-output-buffer-limit" => crate::config::output_limits::OutputLimits::default()
            .updated(value)
            .err()
            .unwrap_or_default()
            .into(),
        _ => return CmdError::config_bad_value(name.as_bytes()),
    };
    CmdError::config_failed(name.as_bytes(), &reason)
}

/// Apply a change another shard broadcast.
pub fn apply_config_change(core: &mut ShardCore, conns: &mut Slab<Conn>, change: &ConfigChange) {
    match change {
        ConfigChange::Set(pairs) => {
            for (name, value) in pairs {
                if let Some(set) = PARAMS.iter().find(|p| p.name == name).and_then(|p| p.set) {
                    let _ = set(core, value);
                }
            }
            crate::scripting::host::refresh(core);
        }
        ConfigChange::ResetStats { epoch } => reset_stats(core, *epoch),
        ConfigChange::Pause { until_ms, all } => core.pause.start(*until_ms, *all),
        ConfigChange::Unpause => crate::shard::end_pause(core, conns),
        ConfigChange::ExportRdb(path) => {
            if let Err(e) =
                crate::persistence::export::write_part(&core.engine, core.now_ms, core.id, path)
            {
                eprintln!("shard {}: DEBUG EXPORT-RDB {path}: {e}", core.id);
            }
        }
        ConfigChange::Snapshot => {
            if let Err(e) = crate::persistence::snapshot::save(core) {
                eprintln!("ruvio: shard {}: SAVE failed: {e}", core.id);
            }
        }
        ConfigChange::BackgroundSave => crate::persistence::snapshot::request(core),
        ConfigChange::Exit { save } => crate::persistence::shutdown::prepare(core, *save),
        ConfigChange::Functions(payload) => super::functions::apply(core, payload),
        ConfigChange::SkipChecksumValidation(skip) => {
            core.engine.config_mut().skip_checksum_validation = *skip
        }
    }
}

/// Zero the counters Redis' CONFIG RESETSTAT zeroes (not the dataset's change count)
/// and move to statistics epoch `epoch`.
fn reset_stats(core: &mut ShardCore, epoch: u64) {
    let stats = &mut core.stats;
    *stats = ShardStats {
        per_command: vec![Default::default(); stats.per_command.len()],
        dirty: stats.dirty,
        epoch,
        ..Default::default()
    };
    core.engine.reset_stats();
}

fn config_resetstat(ctx: &mut Ctx<'_>, _args: Args<'_>, reply: &mut Reply<'_>) -> ServerResult {
    let epoch = ctx.core.shared.next_stats_epoch();
    reset_stats(ctx.core, epoch);
    ctx.core
        .outbox
        .broadcast(ConfigChange::ResetStats { epoch });
    // Answered once every shard reset: a command sent after the OK, on whichever
    // shard it runs, counts in the new epoch.
    super::ok_everywhere(ctx, reply);
    Ok(())
}

/// `CONFIG REWRITE`: the config file Ruvio started with gets the running values of
/// the settings CONFIG SET can change, in place: its comments, order and other
/// settings stay as they are; a setting the file lacks is appended. The new file
/// replaces the old one by a rename, so a crash leaves one or the other.
fn config_rewrite(ctx: &mut Ctx<'_>, _args: Args<'_>, reply: &mut Reply<'_>) -> ServerResult {
    let Some(path) = ctx.core.cfg.config_file.clone() else {
        return Err(CmdError::NoConfigFile);
    };
    let settings: Vec<(String, String)> = PARAMS
        .iter()
        .filter(|p| p.set.is_some() && !p.name.contains("ziplist"))
        .map(|p| (p.name.replace('-', "_"), (p.get)(ctx.core)))
        .collect();
    crate::config::rewrite(&path, &settings).map_err(|e| CmdError::rewrite_failed(&e))?;
    reply.ok();
    Ok(())
}

fn config_help(_ctx: &mut Ctx<'_>, _args: Args<'_>, reply: &mut Reply<'_>) -> ServerResult {
    reply_help(
        reply,
        b"config",
        &[
            "GET <pattern>",
            "    Return parameters matching the glob-like <pattern> and their values.",
            "SET <directive> <value>",
            "    Set the configuration <directive> to <value>.",
            "RESETSTAT",
            "    Reset statistics reported by the INFO command.",
            "REWRITE",
            "    Rewrite the configuration file.",
        ],
    );
    Ok(())
}
