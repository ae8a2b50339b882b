//! Server administration: INFO, CONFIG (GET, SET, RESETSTAT, HELP), TIME, LASTSAVE,
//! SHUTDOWN, DEBUG SLEEP.
//!
//! INFO reports the whole server: the shard answering reads the gauges every shard
//! publishes on its background tick (see `stats`), so the other shards' numbers are
//! at most one tick (10 ms) old. CONFIG SET and RESETSTAT apply on the answering
//! shard and are broadcast to the others, which apply them within a loop iteration.

use super::{Ctx, ServerCommand, ServerResult};
use crate::config::PortMode;
use crate::conn::Conn;
use crate::gather::{Gather, Then};
use crate::pubsub::Kind;
use crate::shard::ShardCore;
use crate::slab::Slab;
use crate::stats::{CommandStat, ShardGauges, ShardStats};
use ruvio_engine::command::{command, flags::*, reply_help};
use ruvio_engine::{CmdError, EvictionPolicy, KeySpec};
use ruvio_resp::{Args, Reply};
use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

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
    command!("save", 1, ADMIN | NOSCRIPT | NO_ASYNC_LOADING | NO_MULTI, KeySpec::NONE, ["admin", "slow", "dangerous"],
        "server", "1.0.0", "Synchronously saves the database(s) to disk.", "O(N) where N is the total number of keys in all databases", save),
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
    if ctx.core.cfg.port_mode == PortMode::Forward && ctx.core.cfg.shards > 1 {
        // The other shards publish first: INFO counts everything done before it.
        ctx.gather = Some(Gather::AfterAll(Then::Info { sections: wanted }));
        return Ok(());
    }
    // `len` counts the caller's slot too (taken out while it runs).
    let text = info_text(ctx.core, ctx.conns.len(), &wanted);
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

/// INFO's text for section names `wanted`; `clients` is this shard's connection
/// count (the other shards' come from what they published).
pub fn info_text(core: &ShardCore, clients: usize, wanted: &[String]) -> String {
    // This shard's own gauges as of now (the tick publishes them only now and then):
    // a SAVE or write it just answered must show.
    crate::shard::publish_gauges(core, clients);
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
        section(core, clients, name, &mut out);
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

fn section(core: &ShardCore, clients: usize, name: &str, out: &mut String) {
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
            let gauge_here = |gauge: fn(&ShardGauges) -> &AtomicU64| {
                gauge(&shared.shards[core.id]).load(Relaxed)
            };
            let (clients_elsewhere, blocked_elsewhere) = match core.cfg.port_mode {
                PortMode::PerShard => (0, 0),
                PortMode::Forward => (
                    shared.sum(|g| &g.clients) - gauge_here(|g| &g.clients),
                    shared.sum(|g| &g.blocked_clients) - gauge_here(|g| &g.blocked_clients),
                ),
            };
            line("connected_clients", &(clients as u64 + clients_elsewhere));
            line("cluster_connections", &0);
            line("maxclients", &core.cfg.maxclients);
            line("client_recent_max_input_buffer", &0);
            line("client_recent_max_output_buffer", &0);
            let blocked = crate::shard::blocked_here(core) + blocked_elsewhere;
            line("blocked_clients", &blocked);
            line("tracking_clients", &0);
            line("clients_in_timeout_table", &0);
        }
        "memory" => {
            let used = crate::alloc::allocated_bytes();
            let rss = rss_bytes();
            line("used_memory", &used);
            line("used_memory_human", &human_bytes(used));
            line("used_memory_rss", &rss);
            line("used_memory_rss_human", &human_bytes(rss));
            line("used_memory_peak", &used);
            line("used_memory_peak_human", &human_bytes(used));
            line("used_memory_dataset", &used);
            // What maxmemory limits: allocated bytes less what the keyspaces reuse.
            line(
                "ruvio_used_memory_for_maxmemory",
                &crate::memory::used_for_limit(core),
            );
            line("maxmemory", &core.cfg.maxmemory);
            line("maxmemory_human", &human_bytes(core.cfg.maxmemory));
            line(
                "maxmemory_policy",
                &core.engine.config().maxmemory_policy.name(),
            );
            line(
                "mem_fragmentation_ratio",
                &format!("{:.2}", rss as f64 / used.max(1) as f64),
            );
            line("mem_allocator", &"libc");
        }
        "persistence" => {
            line("loading", &u8::from(shared.loading.any()));
            line("async_loading", &0);
            let saved = shared.sum(|g| &g.dirty_at_save);
            line(
                "rdb_changes_since_last_save",
                &shared.sum(|g| &g.dirty).saturating_sub(saved),
            );
            let last_save = shared.last_save_unix_s.load(Relaxed);
            let saves = &shared.background_save;
            saves.info_rdb(core.now_ms, last_save, &mut line);
            line("aof_enabled", &(core.cfg.durability.logs() as u8));
            saves.info_aof(core.now_ms, &mut line);
            let failed = shared
                .shards
                .iter()
                .any(|g| g.wal_failed.load(Relaxed) != 0)
                || core.wal.as_ref().is_some_and(|w| w.failed().is_some());
            line("aof_last_write_status", &if failed { "err" } else { "ok" });
        }
        "stats" => {
            let engine = core.engine.stats();
            let counter = |live: u64, gauge: fn(&ShardGauges) -> &AtomicU64| {
                server_counter(core, live, gauge)
            };
            let stats = &core.stats;
            line(
                "total_connections_received",
                &counter(stats.connections_received, |g| &g.connections_received),
            );
            line(
                "total_commands_processed",
                &counter(stats.commands, |g| &g.commands),
            );
            line(
                "instantaneous_ops_per_sec",
                &counter(stats.ops.per_sec(), |g| &g.ops_per_sec),
            );
            line(
                "total_net_input_bytes",
                &counter(stats.net_input_bytes, |g| &g.net_input_bytes),
            );
            line(
                "total_net_output_bytes",
                &counter(stats.net_output_bytes, |g| &g.net_output_bytes),
            );
            line(
                "rejected_connections",
                &counter(stats.rejected_connections, |g| &g.rejected_connections),
            );
            line(
                "expired_keys",
                &counter(engine.expired_keys, |g| &g.expired_keys),
            );
            line(
                "evicted_keys",
                &counter(engine.evicted_keys, |g| &g.evicted_keys),
            );
            line(
                "keyspace_hits",
                &counter(engine.keyspace_hits, |g| &g.keyspace_hits),
            );
            line(
                "keyspace_misses",
                &counter(engine.keyspace_misses, |g| &g.keyspace_misses),
            );
            line(
                "pubsub_channels",
                &crate::pubsub::distinct(core, Kind::Channel),
            );
            line(
                "pubsub_patterns",
                &crate::pubsub::distinct(core, Kind::Pattern),
            );
            line(
                "pubsubshard_channels",
                &crate::pubsub::distinct(core, Kind::Shard),
            );
            let errors: u64 = server_errors(core).iter().map(|(_, n)| n).sum();
            line("total_error_replies", &errors);
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
            let mut dbs = vec![(0u64, 0u64); core.cfg.databases];
            for (db, keys, expires) in core.engine.keyspace_info() {
                if let Some(counts) = dbs.get_mut(db) {
                    *counts = (keys as u64, expires as u64);
                }
            }
            if core.cfg.port_mode == PortMode::Forward {
                let others = shared
                    .shards
                    .iter()
                    .enumerate()
                    .filter(|&(id, _)| id != core.id);
                for (_, gauges) in others {
                    for (counts, (keys, expires)) in dbs.iter_mut().zip(&gauges.keys) {
                        counts.0 += keys.load(Relaxed);
                        counts.1 += expires.load(Relaxed);
                    }
                }
            }
            for (db, (keys, expires)) in dbs.into_iter().enumerate() {
                if keys > 0 {
                    line(
                        &format!("db{db}"),
                        &format!("keys={keys},expires={expires},avg_ttl=0"),
                    );
                }
            }
        }
        "commandstats" => {
            let per_command = server_command_stats(core);
            for cmd in crate::registry::registry().all_rows() {
                let s = per_command[cmd.stat];
                if s.calls > 0 || s.rejected > 0 || s.failed > 0 {
                    let per_call = s.usec as f64 / s.calls.max(1) as f64;
                    line(&format!("cmdstat_{}", cmd.meta.name), &format!("calls={},usec={},usec_per_call={per_call:.2},rejected_calls={},failed_calls={}", s.calls, s.usec, s.rejected, s.failed));
                }
            }
        }
        "errorstats" => {
            for (code, count) in server_errors(core) {
                line(&format!("errorstat_{code}"), &format!("count={count}"));
            }
        }
        _ => {}
    }
}

/// A resettable counter of the whole server: this shard's live value plus what the
/// other shards published in the current statistics epoch. Per-shard mode reports
/// the node alone, as a Redis Cluster node does.
fn server_counter(core: &ShardCore, live: u64, gauge: fn(&ShardGauges) -> &AtomicU64) -> u64 {
    if core.cfg.port_mode == PortMode::PerShard {
        return live;
    }
    let others: u64 = core
        .shared
        .sum_counter(gauge)
        .saturating_sub(gauge_of_mine(core, gauge));
    live + others
}

/// This shard's own published value of a counter, if it is of the current epoch.
fn gauge_of_mine(core: &ShardCore, gauge: fn(&ShardGauges) -> &AtomicU64) -> u64 {
    let mine = &core.shared.shards[core.id];
    if mine.epoch.load(Relaxed) >= core.shared.stats_epoch() {
        gauge(mine).load(Relaxed)
    } else {
        0
    }
}

/// INFO commandstats of the whole server (of the node in per-shard mode).
fn server_command_stats(core: &ShardCore) -> Vec<CommandStat> {
    let mut total = core.stats.per_command.clone();
    if core.cfg.port_mode == PortMode::Forward {
        core.shared.for_other_tables(core.id, |tables| {
            for (sum, s) in total.iter_mut().zip(&tables.per_command) {
                sum.calls += s.calls;
                sum.usec += s.usec;
                sum.failed += s.failed;
                sum.rejected += s.rejected;
            }
        });
    }
    total
}

/// INFO errorstats of the whole server (of the node in per-shard mode), by code.
fn server_errors(core: &ShardCore) -> Vec<(Box<str>, u64)> {
    let mut total: Vec<(Box<str>, u64)> = core
        .stats
        .errors
        .iter()
        .map(|(code, &n)| (code.clone(), n))
        .collect();
    if core.cfg.port_mode == PortMode::Forward {
        core.shared.for_other_tables(core.id, |tables| {
            for (code, n) in &tables.errors {
                match total.iter_mut().find(|(c, _)| c == code) {
                    Some((_, sum)) => *sum += n,
                    None => total.push((code.clone(), *n)),
                }
            }
        });
    }
    total.sort();
    total
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
    core.cfg.save = crate::save_rules::parse(v).map_err(|_| ())?;
    Ok(())
}

/// `100`, `10kb`, `1gb` ... as Redis' memtoull.
use crate::config::parse_memory;

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
        get: |c| crate::save_rules::format(&c.cfg.save),
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
        get: |c| crate::notify::render(c.cfg.notify_keyspace_events),
        set: Some(|c, v| {
            let flags = crate::notify::parse(v).ok_or(())?;
            c.cfg.notify_keyspace_events = flags;
            c.engine.record_expired(crate::notify::expiry_wanted(flags));
            let (added, missed) = crate::notify::key_notes_wanted(flags);
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

/// `CONFIG SET parameter value [parameter value ...]`: all or nothing, as Redis 7:
/// names are checked first, then values applied in order; when one fails, the
/// ones applied before it get their old values back.
fn config_set(ctx: &mut Ctx<'_>, args: Args<'_>, reply: &mut Reply<'_>) -> ServerResult {
    if !args.len().is_multiple_of(2) {
        return Err(CmdError::WrongArity("config|set"));
    }
    let mut changes: Vec<(&Param, ParamSetter, String)> = Vec::new();
    for pair in (2..args.len()).step_by(2) {
        let name = args.get(pair).to_ascii_lowercase();
        let value = String::from_utf8_lossy(args.get(pair + 1)).into_owned();
        let param = PARAMS
            .iter()
            .find(|p| p.name.as_bytes() == name)
            .ok_or_else(|| CmdError::config_unknown(&name))?;
        let set = param.set.ok_or_else(|| CmdError::config_immutable(&name))?;
        if changes.iter().any(|(p, ..)| p.name == param.name) {
            return Err(CmdError::config_duplicate(&name));
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
        "notify-keyspace-events" => crate::notify::INVALID.into(),
        "save" => "Invalid save parameters".into(),
        "client-output-buffer-limit" => crate::outlimit::OutputLimits::default()
            .updated(value)
            .err()
            .unwrap_or_default()
            .into(),
        _ => return CmdError::config_bad_value(name.as_bytes()),
    };
    CmdError::config_failed(name.as_bytes(), &reason)
}

/// A configuration change made on one shard, for every other shard to apply too
/// (one server, one configuration: a client's CONFIG SET lands on one shard).
#[derive(Clone, Debug)]
pub enum ConfigChange {
    /// Parameters already validated by the shard that received CONFIG SET.
    Set(Vec<(String, String)>),
    /// CONFIG RESETSTAT, which started this statistics epoch.
    ResetStats { epoch: u64 },
    /// CLIENT PAUSE until `until_ms` (ALL when `all`, else WRITE).
    Pause { until_ms: u64, all: bool },
    /// CLIENT UNPAUSE.
    Unpause,
    /// DEBUG EXPORT-RDB: write this shard's part of the file at this path.
    ExportRdb(String),
    /// SAVE: take this shard's snapshot.
    Snapshot,
    /// BGSAVE / BGREWRITEAOF: begin this shard's part (see `snapshot`).
    BackgroundSave,
    /// SHUTDOWN or a signal: prepare to exit, saving or not (see `shutdown`).
    Exit { save: bool },
    /// The function libraries after a FUNCTION change, as a FUNCTION DUMP payload.
    Functions(Vec<u8>),
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
        }
        ConfigChange::ResetStats { epoch } => reset_stats(core, *epoch),
        ConfigChange::Pause { until_ms, all } => core.pause.start(*until_ms, *all),
        ConfigChange::Unpause => crate::shard::end_pause(core, conns),
        ConfigChange::ExportRdb(path) => {
            if let Err(e) = crate::export::write_part(core, path) {
                eprintln!("shard {}: DEBUG EXPORT-RDB {path}: {e}", core.id);
            }
        }
        ConfigChange::Snapshot => {
            if let Err(e) = crate::wal::snapshot(core) {
                eprintln!("ruvio: shard {}: SAVE failed: {e}", core.id);
            }
        }
        ConfigChange::BackgroundSave => crate::snapshot::request(core),
        ConfigChange::Exit { save } => crate::shutdown::prepare(core, *save),
        ConfigChange::Functions(payload) => super::functions::apply(core, payload),
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
    reply.ok();
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

/// `LASTSAVE`: the last completed SAVE, or the start time before one (as a fresh
/// Redis answers).
fn lastsave(ctx: &mut Ctx<'_>, _args: Args<'_>, reply: &mut Reply<'_>) -> ServerResult {
    reply.int(ctx.core.shared.last_save_unix_s.load(Relaxed) as i64);
    Ok(())
}

/// `SAVE`: every shard writes a snapshot of its keys and drops the log it covers
/// (docs/durability.md); `+OK` once all have. Needs a log (`--durability everysec`
/// or `always`).
fn save(ctx: &mut Ctx<'_>, _args: Args<'_>, reply: &mut Reply<'_>) -> ServerResult {
    if ctx.core.shared.background_save.running_kind().is_some() {
        return Err(CmdError::Line(
            b"ERR Background save already in progress".to_vec(),
        ));
    }
    crate::wal::snapshot(ctx.core)
        .map_err(|e| CmdError::Line(format!("ERR SAVE failed: {e}").into_bytes()))?;
    if ctx.core.topo.nodes.len() > 1 && ctx.core.cfg.port_mode == PortMode::Forward {
        ctx.core.outbox.broadcast(ConfigChange::Snapshot);
        ctx.gather = Some(Gather::AfterAll(Then::Reply(b"+OK\r\n".to_vec())));
    } else {
        reply.ok();
    }
    Ok(())
}

/// `SHUTDOWN [NOSAVE | SAVE] [NOW] [FORCE] [ABORT]`
/// (see `shutdown`: every shard saves or syncs its log first).
fn shutdown(ctx: &mut Ctx<'_>, args: Args<'_>, reply: &mut Reply<'_>) -> ServerResult {
    let has = |flag: &[u8]| args.iter().skip(1).any(|a| a.eq_ignore_ascii_case(flag));
    for arg in args.iter().skip(1) {
        let known = [&b"nosave"[..], b"save", b"now", b"force", b"abort"]
            .iter()
            .any(|k| arg.eq_ignore_ascii_case(k));
        if !known {
            return Err(CmdError::Syntax);
        }
    }
    // A script past busy-reply-threshold: only SHUTDOWN NOSAVE ends the server.
    let shards = ctx.core.topo.nodes.len();
    // The busy shard cannot take part in an orderly exit: NOSAVE ends at once.
    match (0..shards).find_map(|s| ctx.core.shared.scripts.busy_error(s)) {
        Some(busy) if !has(b"nosave") => return Err(busy),
        Some(_) => {
            eprintln!("ruvio: SHUTDOWN NOSAVE while a script is busy, exiting");
            std::process::exit(0);
        }
        None => {}
    }
    // Redis' illegal combinations: ABORT with anything, SAVE with NOSAVE.
    let abort = has(b"abort");
    if (abort && args.len() > 2) || (has(b"save") && has(b"nosave")) {
        return Err(CmdError::Syntax);
    }
    if abort {
        return Err(CmdError::NoShutdownInProgress);
    }
    eprintln!("ruvio: SHUTDOWN requested");
    let save = crate::shutdown::saves(ctx.core, has(b"save"), has(b"nosave"));
    crate::shutdown::begin(ctx.core, save);
    let force = has(b"force");
    if shards > 1 {
        ctx.gather = Some(Gather::AfterAll(Then::Shutdown { force }));
    } else {
        reply.raw(&crate::shutdown::conclude(ctx.core, force));
    }
    Ok(())
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
    command!("debug|export-rdb", 3, ADMIN | NOSCRIPT | LOADING | STALE, KeySpec::NONE,
        ["admin", "slow", "dangerous"], "server", "1.0.0",
        "Write the keyspace as a Redis RDB file (Ruvio's own subcommand)", "O(N)", debug_export_rdb),
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

/// `DEBUG EXPORT-RDB path`: every shard's keys in one RDB file (see
/// [`crate::export`]); `+OK` once the file is complete.
fn debug_export_rdb(ctx: &mut Ctx<'_>, args: Args<'_>, reply: &mut Reply<'_>) -> ServerResult {
    let path = String::from_utf8_lossy(args.get(2)).into_owned();
    let shards = ctx.core.topo.nodes.len();
    let failed = |e: String| CmdError::Line(format!("ERR EXPORT-RDB failed: {e}").into_bytes());
    crate::export::remove_parts(&path, shards);
    crate::export::write_part(ctx.core, &path).map_err(|e| failed(e.to_string()))?;
    if shards > 1 && ctx.core.cfg.port_mode == PortMode::Forward {
        ctx.core
            .outbox
            .broadcast(ConfigChange::ExportRdb(path.clone()));
        ctx.gather = Some(Gather::AfterAll(Then::ExportRdb(path)));
    } else {
        crate::export::assemble(&path, [ctx.core.id]).map_err(failed)?;
        reply.ok();
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
            "EXPORT-RDB <path>",
            "    Write every key as a Redis RDB file at <path> (Ruvio only).",
        ],
    );
    Ok(())
}
