//! Server administration: INFO, CONFIG (GET, SET, RESETSTAT, HELP), TIME, LASTSAVE,
//! SHUTDOWN, DEBUG SLEEP.
//!
//! INFO reports the whole server: the shard answering reads the gauges every shard
//! publishes on its background tick (see `stats`), so the other shards' numbers are
//! at most one tick (10 ms) old. CONFIG SET and RESETSTAT apply on the answering
//! shard and are broadcast to the others, which apply them within a loop iteration.

use super::{Ctx, ServerCommand, ServerResult};
use crate::config::PortMode;
use crate::shard::ShardCore;
use ruvio_engine::command::{command, flags::*, reply_help};
use ruvio_engine::{CmdError, KeySpec};
use ruvio_resp::{Args, Reply};
use std::fmt::Write;
use std::sync::atomic::Ordering::Relaxed;

/// The server family's table.
#[rustfmt::skip]
pub const COMMANDS: &[ServerCommand] = &[
    command!("info", -1, LOADING | STALE, KeySpec::NONE, ["slow", "dangerous"], "server", "1.0.0",
        "Returns information and statistics about the server.", "O(1)", info),
    command!("config", -2, 0, KeySpec::NONE, ["slow"], "server", "2.0.0",
        "A container for server configuration commands.", "Depends on subcommand.",
        subcommands = CONFIG_SUBCOMMANDS),
    command!("time", 1, LOADING | STALE | FAST, KeySpec::NONE, ["fast"], "server", "2.6.0",
        "Returns the server time.", "O(1)", time),
    command!("lastsave", 1, LOADING | STALE | FAST, KeySpec::NONE, ["fast", "admin", "dangerous"], "server", "1.0.0",
        "Returns the Unix timestamp of the last successful save to disk.", "O(1)", lastsave),
    command!("shutdown", -1, ADMIN | NOSCRIPT | LOADING | STALE | NO_MULTI | ALLOW_BUSY, KeySpec::NONE,
        ["admin", "slow", "dangerous"], "server", "1.0.0",
        "Synchronously saves the database(s) to disk and shuts down the Redis server.",
        "O(N) when saving, where N is the total number of keys in all databases when saving data, otherwise O(1)",
        shutdown),
    command!("debug", -2, ADMIN | NOSCRIPT | LOADING | STALE, KeySpec::NONE, ["admin", "slow", "dangerous"],
        "server", "1.0.0", "A container for debugging commands.", "Depends on subcommand.",
        subcommands = DEBUG_SUBCOMMANDS),
];

/// `INFO [section [section ...]]`
fn info(ctx: &mut Ctx<'_>, args: Args<'_>, reply: &mut Reply<'_>) -> ServerResult {
    let wanted: Vec<String> = args
        .iter()
        .skip(1)
        .map(|a| String::from_utf8_lossy(a).to_ascii_lowercase())
        .collect();
    let text = info_text(ctx, &wanted);
    reply.verbatim("txt", text.as_bytes());
    Ok(())
}

/// The sections INFO prints with no argument, in Redis' order.
const DEFAULT_SECTIONS: &[&str] = &[
    "server",
    "clients",
    "memory",
    "persistence",
    "stats",
    "replication",
    "cpu",
    "modules",
    "errorstats",
    "cluster",
    "keyspace",
];

fn info_text(ctx: &Ctx<'_>, wanted: &[String]) -> String {
    let everything = wanted.iter().any(|w| w == "all" || w == "everything");
    let default = wanted.is_empty() || wanted.iter().any(|w| w == "default");
    let mut sections: Vec<&str> = Vec::new();
    for &name in DEFAULT_SECTIONS.iter().chain(&["commandstats"]) {
        let extra = name == "commandstats";
        if everything || (default && !extra) || wanted.iter().any(|w| w == name) {
            sections.push(name);
        }
    }
    let mut out = String::new();
    for name in sections {
        if !out.is_empty() {
            out.push_str("\r\n");
        }
        let mut title = name.to_string();
        title[..1].make_ascii_uppercase();
        let _ = write!(
            out,
            "# {}\r\n",
            if name == "cpu" {
                "CPU".to_string()
            } else {
                title
            }
        );
        section(ctx.core, name, &mut out);
    }
    out
}

fn human_bytes(n: u64) -> String {
    match n {
        n if n < 1024 => format!("{n}B"),
        n if n < 1 << 20 => format!("{:.2}K", n as f64 / 1024.0),
        n if n < 1 << 30 => format!("{:.2}M", n as f64 / (1u64 << 20) as f64),
        n => format!("{:.2}G", n as f64 / (1u64 << 30) as f64),
    }
}

/// Resident set size of the process in bytes.
pub fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    pages * 4096
}

fn cpu_seconds() -> (f64, f64) {
    // SAFETY: getrusage fills the zeroed struct we own.
    let usage = unsafe {
        let mut u: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut u);
        u
    };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (secs(usage.ru_stime), secs(usage.ru_utime))
}

fn section(core: &ShardCore, name: &str, out: &mut String) {
    let shared = &core.shared;
    let uptime = shared.started.elapsed().as_secs();
    let mut line = |k: &str, v: &dyn std::fmt::Display| {
        let _ = write!(out, "{k}:{v}\r\n");
    };
    match name {
        "server" => {
            line("redis_version", &super::connection::REDIS_VERSION);
            line("redis_git_sha1", &"00000000");
            line("redis_git_dirty", &0);
            line("redis_build_id", &"0");
            line(
                "redis_mode",
                &if core.cfg.port_mode == PortMode::PerShard {
                    "cluster"
                } else {
                    "standalone"
                },
            );
            line(
                "os",
                &format!("{} {}", std::env::consts::OS, std::env::consts::ARCH),
            );
            line("arch_bits", &64);
            line("monotonic_clock", &"POSIX clock_gettime");
            line("multiplexing_api", &"io_uring");
            line("process_id", &std::process::id());
            line("process_supervised", &"no");
            line("run_id", &shared.run_id);
            line("tcp_port", &core.cfg.shard_port(core.id));
            line("server_time_usec", &(core.now_ms * 1000));
            line("uptime_in_seconds", &uptime);
            line("uptime_in_days", &(uptime / 86400));
            line("hz", &core.cfg.hz);
            line("configured_hz", &core.cfg.hz);
            line(
                "executable",
                &std::env::current_exe()
                    .map(|p| p.display().to_string())
                    .unwrap_or_default(),
            );
            line(
                "config_file",
                &core
                    .cfg
                    .config_file
                    .as_ref()
                    .map(|p| p.display().to_string())
                    .unwrap_or_default(),
            );
            line("ruvio_version", &env!("CARGO_PKG_VERSION"));
            line("ruvio_shards", &core.cfg.shards);
            line("ruvio_shard", &core.id);
            line("ruvio_port_mode", &core.cfg.port_mode.name());
        }
        "clients" => {
            line("connected_clients", &shared.sum(|g| &g.clients).max(1));
            line("cluster_connections", &0);
            line("maxclients", &10000);
            line("client_recent_max_input_buffer", &0);
            line("client_recent_max_output_buffer", &0);
            line("blocked_clients", &shared.sum(|g| &g.blocked_clients));
            line("tracking_clients", &0);
            line("clients_in_timeout_table", &0);
        }
        "memory" => {
            let used = shared.sum(|g| &g.used_memory);
            let rss = rss_bytes();
            line("used_memory", &used);
            line("used_memory_human", &human_bytes(used));
            line("used_memory_rss", &rss);
            line("used_memory_rss_human", &human_bytes(rss));
            line("used_memory_peak", &used);
            line("used_memory_peak_human", &human_bytes(used));
            line("used_memory_dataset", &used);
            line("maxmemory", &0);
            line("maxmemory_human", &"0B");
            line("maxmemory_policy", &"noeviction");
            line(
                "mem_fragmentation_ratio",
                &format!("{:.2}", rss as f64 / used.max(1) as f64),
            );
            line("mem_allocator", &"libc");
        }
        "persistence" => {
            line("loading", &0);
            line("async_loading", &0);
            line("rdb_changes_since_last_save", &shared.sum(|g| &g.dirty));
            line("rdb_bgsave_in_progress", &0);
            line("rdb_last_save_time", &(shared.started_unix_ms / 1000));
            line("rdb_last_bgsave_status", &"ok");
            line("aof_enabled", &0);
            line("aof_rewrite_in_progress", &0);
            line("aof_last_write_status", &"ok");
        }
        "stats" => {
            let total = shared.sum(|g| &g.commands);
            line(
                "total_connections_received",
                &shared.sum(|g| &g.connections_received),
            );
            line("total_commands_processed", &total);
            line("instantaneous_ops_per_sec", &0);
            line("total_net_input_bytes", &shared.sum(|g| &g.net_input_bytes));
            line(
                "total_net_output_bytes",
                &shared.sum(|g| &g.net_output_bytes),
            );
            line("rejected_connections", &0);
            line("expired_keys", &shared.sum(|g| &g.expired_keys));
            line("evicted_keys", &0);
            line("keyspace_hits", &shared.sum(|g| &g.keyspace_hits));
            line("keyspace_misses", &shared.sum(|g| &g.keyspace_misses));
            line("pubsub_channels", &0);
            line("pubsub_patterns", &0);
            line(
                "total_error_replies",
                &core.stats.per_command.iter().map(|c| c.failed).sum::<u64>(),
            );
        }
        "replication" => {
            line("role", &"master");
            line("connected_slaves", &0);
            line("master_failover_state", &"no-failover");
            line("master_replid", &shared.run_id);
            line("master_repl_offset", &0);
        }
        "cpu" => {
            let (sys, user) = cpu_seconds();
            line("used_cpu_sys", &format!("{sys:.6}"));
            line("used_cpu_user", &format!("{user:.6}"));
            line("used_cpu_sys_children", &"0.000000");
            line("used_cpu_user_children", &"0.000000");
        }
        "cluster" => line(
            "cluster_enabled",
            &((core.cfg.port_mode == PortMode::PerShard) as u8),
        ),
        "keyspace" => {
            for db in 0..core.cfg.databases {
                let (keys, expires) = if core.cfg.port_mode == PortMode::PerShard {
                    let g = &shared.shards[core.id].keys[db];
                    (g.0.load(Relaxed), g.1.load(Relaxed))
                } else {
                    shared.db_keys(db)
                };
                if keys > 0 {
                    line(
                        &format!("db{db}"),
                        &format!("keys={keys},expires={expires},avg_ttl=0"),
                    );
                }
            }
        }
        "commandstats" => {
            for cmd in &crate::registry::registry().commands {
                let s = core.stats.per_command[cmd.id];
                if s.calls > 0 || s.rejected > 0 {
                    let per_call = s.usec as f64 / s.calls.max(1) as f64;
                    line(&format!("cmdstat_{}", cmd.meta.name), &format!("calls={},usec={},usec_per_call={per_call:.2},rejected_calls={},failed_calls={}", s.calls, s.usec, s.rejected, s.failed));
                }
            }
        }
        _ => {}
    }
}

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

/// Only the values persistence-off servers have: no snapshots, no AOF.
fn set_persistence_off(_core: &mut ShardCore, v: &str) -> Result<(), ()> {
    (v.is_empty() || v == "no").then_some(()).ok_or(())
}

/// `100`, `10kb`, `1gb` ... as Redis' memtoull.
fn parse_memory(v: &str) -> Option<usize> {
    let v = v.to_ascii_lowercase();
    let split = v.find(|c: char| !c.is_ascii_digit()).unwrap_or(v.len());
    let (num, unit) = v.split_at(split);
    let mul: usize = match unit {
        "" | "b" => 1,
        "k" => 1000,
        "kb" => 1024,
        "m" => 1000 * 1000,
        "mb" => 1 << 20,
        "g" => 1000 * 1000 * 1000,
        "gb" => 1 << 30,
        _ => return None,
    };
    num.parse::<usize>().ok()?.checked_mul(mul)
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
        get: |_| String::new(),
        set: Some(set_persistence_off),
    },
    Param {
        name: "appendonly",
        get: |_| "no".into(),
        set: Some(set_persistence_off),
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
        get: |_| "0".into(),
        set: None,
    },
    Param {
        name: "maxmemory-policy",
        get: |_| "noeviction".into(),
        set: None,
    },
    Param {
        name: "maxclients",
        get: |_| "10000".into(),
        set: None,
    },
    Param {
        name: "timeout",
        get: |_| "0".into(),
        set: None,
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
];

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
    command!("config|help", 2, LOADING | STALE, KeySpec::NONE, ["slow"], "server", "5.0.0",
        "Show helpful text about the different subcommands", "O(1)", config_help),
];

/// `CONFIG GET pattern [pattern ...]`
fn config_get(ctx: &mut Ctx<'_>, args: Args<'_>, reply: &mut Reply<'_>) -> ServerResult {
    let matched: Vec<&Param> = PARAMS
        .iter()
        .filter(|p| {
            args.iter()
                .skip(2)
                .any(|pat| ruvio_engine::glob_match(&pat.to_ascii_lowercase(), p.name.as_bytes()))
        })
        .collect();
    reply.map(matched.len());
    for p in matched {
        reply.bulk(p.name.as_bytes());
        reply.bulk((p.get)(ctx.core).as_bytes());
    }
    Ok(())
}

/// `CONFIG SET parameter value [parameter value ...]`
fn config_set(ctx: &mut Ctx<'_>, args: Args<'_>, reply: &mut Reply<'_>) -> ServerResult {
    if !args.len().is_multiple_of(2) {
        return Err(CmdError::WrongArity("config|set"));
    }
    let mut applied = Vec::new();
    for pair in (2..args.len()).step_by(2) {
        let name = args.get(pair).to_ascii_lowercase();
        let value = String::from_utf8_lossy(args.get(pair + 1)).into_owned();
        let param = PARAMS
            .iter()
            .find(|p| p.name.as_bytes() == name)
            .ok_or_else(|| CmdError::config_unknown(&name))?;
        let set = param.set.ok_or_else(|| CmdError::config_immutable(&name))?;
        if set(ctx.core, &value).is_err() {
            return Err(CmdError::config_bad_value(&name));
        }
        applied.push((param.name.to_string(), value));
    }
    ctx.core.outbox.broadcast(ConfigChange::Set(applied));
    reply.ok();
    Ok(())
}

/// A configuration change made on one shard, for every other shard to apply too
/// (one server, one configuration: a client's CONFIG SET lands on one shard).
#[derive(Clone, Debug)]
pub enum ConfigChange {
    /// Parameters already validated by the shard that received CONFIG SET.
    Set(Vec<(String, String)>),
    /// CONFIG RESETSTAT.
    ResetStats,
}

/// Apply a change another shard broadcast.
pub fn apply_config_change(core: &mut ShardCore, change: &ConfigChange) {
    match change {
        ConfigChange::Set(pairs) => {
            for (name, value) in pairs {
                if let Some(set) = PARAMS.iter().find(|p| p.name == name).and_then(|p| p.set) {
                    let _ = set(core, value);
                }
            }
        }
        ConfigChange::ResetStats => reset_stats(core),
    }
}

fn reset_stats(core: &mut ShardCore) {
    let per_command = core.stats.per_command.len();
    core.stats = Default::default();
    core.stats.per_command = vec![Default::default(); per_command];
    core.engine.reset_stats();
}

fn config_resetstat(ctx: &mut Ctx<'_>, _args: Args<'_>, reply: &mut Reply<'_>) -> ServerResult {
    reset_stats(ctx.core);
    ctx.core.outbox.broadcast(ConfigChange::ResetStats);
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
        ],
    );
    Ok(())
}

/// `TIME`
fn time(_ctx: &mut Ctx<'_>, _args: Args<'_>, reply: &mut Reply<'_>) -> ServerResult {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    reply.array(2);
    reply.bulk(now.as_secs().to_string().as_bytes());
    reply.bulk(now.subsec_micros().to_string().as_bytes());
    Ok(())
}

/// `LASTSAVE`: nothing is saved yet, so the start time, as a fresh Redis answers.
fn lastsave(ctx: &mut Ctx<'_>, _args: Args<'_>, reply: &mut Reply<'_>) -> ServerResult {
    reply.int((ctx.core.shared.started_unix_ms / 1000) as i64);
    Ok(())
}

/// `SHUTDOWN [NOSAVE | SAVE] [NOW] [FORCE] [ABORT]`
fn shutdown(_ctx: &mut Ctx<'_>, args: Args<'_>, _reply: &mut Reply<'_>) -> ServerResult {
    for arg in args.iter().skip(1) {
        let known = [&b"nosave"[..], b"save", b"now", b"force"]
            .iter()
            .any(|k| arg.eq_ignore_ascii_case(k));
        if arg.eq_ignore_ascii_case(b"abort") {
            return Err(CmdError::NoShutdownInProgress);
        }
        if !known {
            return Err(CmdError::Syntax);
        }
    }
    eprintln!("ruvio: SHUTDOWN requested, exiting");
    std::process::exit(0);
}

/// DEBUG's subcommands. Redis parses DEBUG's arguments in its handler and has no
/// rows for them; Ruvio gives them rows (DEBUG's flags and categories) so that they
/// are resolved and checked like every other container's.
#[rustfmt::skip]
const DEBUG_SUBCOMMANDS: &[ServerCommand] = &[
    command!("debug|sleep", 3, ADMIN | NOSCRIPT | LOADING | STALE, KeySpec::NONE, ["admin", "slow", "dangerous"],
        "server", "1.0.0", "Stop the server for a number of seconds", "O(1)", debug_sleep),
    command!("debug|protocol", 3, ADMIN | NOSCRIPT | LOADING | STALE, KeySpec::NONE,
        ["admin", "slow", "dangerous"], "server", "1.0.0", "Reply with a test value of a RESP type", "O(1)",
        debug_protocol),
    command!("debug|help", 2, ADMIN | NOSCRIPT | LOADING | STALE, KeySpec::NONE, ["admin", "slow", "dangerous"],
        "server", "1.0.0", "Show helpful text about the different subcommands", "O(1)", debug_help),
];

/// `DEBUG SLEEP seconds`: blocks this shard, as Redis blocks its main thread.
fn debug_sleep(_ctx: &mut Ctx<'_>, args: Args<'_>, reply: &mut Reply<'_>) -> ServerResult {
    let secs = std::str::from_utf8(args.get(2))
        .ok()
        .and_then(|s| s.parse::<f64>().ok())
        .unwrap_or(0.0);
    if secs > 0.0 && secs.is_finite() {
        std::thread::sleep(std::time::Duration::from_secs_f64(secs.min(3600.0)));
    }
    reply.ok();
    Ok(())
}

/// `DEBUG PROTOCOL type`: one reply of each RESP type, for client tests.
fn debug_protocol(ctx: &mut Ctx<'_>, args: Args<'_>, reply: &mut Reply<'_>) -> ServerResult {
    let resp3 = ctx.client.proto == ruvio_resp::Protocol::Resp3;
    match args.get(2).to_ascii_lowercase().as_slice() {
        b"string" => reply.bulk(b"Hello World"),
        b"integer" => reply.int(12345),
        // Redis' fixed test value, not an approximation of pi.
        #[allow(clippy::approx_constant)]
        b"double" => reply.double(3.141),
        b"bignum" if resp3 => reply.raw(b"(1234567999999999999999999999999999999\r\n"),
        b"bignum" => reply.bulk(b"1234567999999999999999999999999999999"),
        b"null" => reply.null(),
        b"array" | b"set" => {
            if args.get(2).eq_ignore_ascii_case(b"set") {
                reply.set(3)
            } else {
                reply.array(3)
            }
            (0..3).for_each(|i| reply.int(i));
        }
        b"map" => {
            reply.map(3);
            for i in 0..3 {
                reply.int(i);
                reply.boolean(i == 1);
            }
        }
        b"attrib" | b"push" if !resp3 => return Err(CmdError::Resp2NotSupported),
        b"attrib" => {
            reply.raw(b"|1\r\n$14\r\nkey-popularity\r\n*2\r\n$7\r\nkey:123\r\n:90\r\n");
            reply.bulk(b"Some real reply following the attribute");
        }
        b"push" => {
            reply.push(2);
            reply.bulk(b"server-cpu-usage");
            reply.int(42);
            reply.bulk(b"Some real reply following the push reply");
        }
        b"verbatim" => reply.verbatim("txt", b"This is a verbatim\nstring"),
        b"true" => reply.boolean(true),
        b"false" => reply.boolean(false),
        _ => return Err(CmdError::DebugProtocolType),
    }
    Ok(())
}

fn debug_help(_ctx: &mut Ctx<'_>, _args: Args<'_>, reply: &mut Reply<'_>) -> ServerResult {
    reply_help(
        reply,
        b"debug",
        &[
            "PROTOCOL <type>",
            "    Reply with a test value of the specified type. <type> can be: string,",
            "    integer, double, bignum, null, array, set, map, attrib, push, verbatim,",
            "    true, false.",
            "SLEEP <seconds>",
            "    Stop the server for <seconds>. Decimals allowed.",
        ],
    );
    Ok(())
}
