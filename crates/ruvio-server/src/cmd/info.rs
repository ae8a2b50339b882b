//! INFO: the whole server's report, section by section in Redis' order and format.
//!
//! INFO reports the whole server: the shard answering reads the gauges every shard
//! publishes on its background tick (see `stats`), so the other shards' numbers are
//! at most one tick (10 ms) old. In forward mode with several shards the answer
//! waits until every shard has published ([`crate::mesh::gather`]), so that INFO counts
//! everything done before it. The process-wide numbers (RSS, CPU) are read here too.
//!
//! A script's INFO (`redis.call('INFO')`) runs inside its shard's engine, where the
//! shard's other state is out of reach and no shard can be waited for: it reads
//! the engine itself and what every shard published, its own shard's included (at
//! most one tick old), through the same [`Source`].

use super::{Ctx, Server, ServerCommand, ServerResult, SharedReads};
use crate::config::{Config, PortMode};
use crate::mesh::gather::{Gather, Then};
use crate::messaging::pubsub::Kind;
use crate::stats::{CommandStat, ShardGauges, ShardStats, StatTables};
use ruvio_engine::command::{command, flags::*};
use ruvio_engine::{Engine, KeySpec};
use ruvio_resp::{Args, Reply};
use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// The INFO family's table.
#[rustfmt::skip]
pub const COMMANDS: &[ServerCommand] = &[
    command!("info", -1, LOADING | STALE, KeySpec::NONE, ["slow", "dangerous"], "server", "1.0.0",
        "Get information and statistics about the server", "O(1)", info),
];

/// `INFO [section [section ...]]`
fn info<S: Server>(ctx: &mut Ctx<'_, S>, args: Args<'_>, reply: &mut Reply<'_>) -> ServerResult {
    let wanted: Vec<String> = args
        .iter()
        .skip(1)
        .map(|a| String::from_utf8_lossy(a).to_ascii_lowercase())
        .collect();
    if ctx.core.settings().port_mode == PortMode::Forward && ctx.core.settings().shards > 1 {
        // The other shards publish first: INFO counts everything done before it.
        ctx.gather = Some(Gather::AfterAll(Then::Info { sections: wanted }));
        return Ok(());
    }
    // `len` counts the caller's slot too (taken out while it runs).
    let text = info_text(ctx.core, ctx.conns.len(), &wanted);
    reply.verbatim("txt", text.as_bytes());
    Ok(())
}

/// Every section, in Redis' order.
const SECTIONS: &[&str] = &[
    "server",
    "clients",
    "memory",
    "persistence",
    "stats",
    "replication",
    "cpu",
    "modules",
    "commandstats",
    "errorstats",
    "latencystats",
    "cluster",
    "keyspace",
];

/// The sections INFO prints only when named (or with `all`, `everything`).
const EXTRA_SECTIONS: &[&str] = &["commandstats", "latencystats"];

/// What INFO reads: the shard's settings, engine and place in the server, and
/// its live numbers when it answers between commands (`live`); without them (a
/// script's INFO) its own published gauges stand in.
pub struct Source<'a, Sh> {
    pub cfg: &'a Config,
    pub shared: &'a Sh,
    pub id: usize,
    pub now_ms: u64,
    pub engine: &'a Engine,
    pub live: Option<Live<'a>>,
}

/// A shard's numbers as of now, which it publishes only now and then.
pub struct Live<'a> {
    pub stats: &'a ShardStats,
    /// Its connections.
    pub clients: usize,
    /// Its blocked clients ([`Server::blocked_clients`]).
    pub blocked: u64,
    pub wal_failed: bool,
}

/// A script's INFO (`scripting::host`): the text for section names `wanted` of
/// shard `id` from what every shard published, without its live counters.
pub fn script_text<Sh: SharedReads>(
    cfg: &Config,
    shared: &Sh,
    id: usize,
    engine: &Engine,
    wanted: &[String],
) -> String {
    let source = Source {
        cfg,
        shared,
        id,
        now_ms: crate::clock::unix_ms(),
        engine,
        live: None,
    };
    text(&source, wanted)
}

/// A client's INFO: the text for section names `wanted`; `clients` is this
/// shard's connection count (the other shards' come from what they published).
pub fn info_text<S: Server>(core: &S, clients: usize, wanted: &[String]) -> String {
    // This shard's own gauges as of now (the tick publishes them only now and then):
    // a SAVE or write it just answered must show.
    core.publish_gauges_now(clients);
    if wanted
        .iter()
        .any(|w| matches!(w.as_str(), "latencystats" | "all" | "everything"))
    {
        core.publish_histograms();
    }
    let live = Live {
        stats: core.live_stats(),
        clients,
        blocked: core.blocked_clients(),
        wal_failed: core.log_failed(),
    };
    let source = Source {
        cfg: core.settings(),
        shared: core.shared(),
        id: core.shard_id(),
        now_ms: core.now_ms(),
        engine: core.engine(),
        live: Some(live),
    };
    text(&source, wanted)
}

/// INFO's text for section names `wanted`, read from `source`.
pub fn text<Sh: SharedReads>(source: &Source<'_, Sh>, wanted: &[String]) -> String {
    let everything = wanted.iter().any(|w| w == "all" || w == "everything");
    let default = wanted.is_empty() || wanted.iter().any(|w| w == "default");
    let mut sections: Vec<&str> = Vec::new();
    for &name in SECTIONS {
        let extra = EXTRA_SECTIONS.contains(&name);
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
        section(source, name, &mut out);
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

/// The process's CPU time in seconds: (system, user).
pub fn cpu_seconds() -> (f64, f64) {
    // SAFETY: getrusage fills the zeroed struct we own.
    let usage = unsafe {
        let mut u: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut u);
        u
    };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (secs(usage.ru_stime), secs(usage.ru_utime))
}

fn section<Sh: SharedReads>(src: &Source<'_, Sh>, name: &str, out: &mut String) {
    let (shared, cfg) = (src.shared, src.cfg);
    let uptime = shared.started().elapsed().as_secs();
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
                &if cfg.cluster_mode() {
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
            line("run_id", &shared.run_id());
            line("tcp_port", &cfg.shard_port(src.id));
            line("server_time_usec", &(src.now_ms * 1000));
            line("uptime_in_seconds", &uptime);
            line("uptime_in_days", &(uptime / 86400));
            line("hz", &cfg.hz);
            line("configured_hz", &cfg.hz);
            line(
                "executable",
                &std::env::current_exe()
                    .map(|p| p.display().to_string())
                    .unwrap_or_default(),
            );
            line(
                "config_file",
                &cfg.config_file
                    .as_ref()
                    .map(|p| p.display().to_string())
                    .unwrap_or_default(),
            );
            line("ruvio_version", &env!("CARGO_PKG_VERSION"));
            line("ruvio_shards", &cfg.shards);
            line("ruvio_shard", &src.id);
            line("ruvio_port_mode", &cfg.port_mode.name());
        }
        "clients" => {
            let live = src.live.as_ref();
            let clients = server_gauge(src, live.map(|l| l.clients as u64), |g| &g.clients);
            line("connected_clients", &clients);
            line("cluster_connections", &0);
            line("maxclients", &cfg.maxclients);
            line("client_recent_max_input_buffer", &0);
            line("client_recent_max_output_buffer", &0);
            let blocked = server_gauge(src, live.map(|l| l.blocked), |g| &g.blocked_clients);
            line("blocked_clients", &blocked);
            line("tracking_clients", &tracking_figures(src)[0]);
            line("clients_in_timeout_table", &0);
        }
        "memory" => {
            let used = crate::memory::alloc::allocated_bytes();
            let rss = crate::memory::alloc::rss_bytes();
            line("used_memory", &used);
            line("used_memory_human", &human_bytes(used));
            line("used_memory_rss", &rss);
            line("used_memory_rss_human", &human_bytes(rss));
            let peak = crate::memory::alloc::peak_bytes();
            line("used_memory_peak", &peak);
            line("used_memory_peak_human", &human_bytes(peak));
            line("used_memory_dataset", &used);
            // What maxmemory limits: allocated bytes less what the keyspaces reuse.
            line(
                "ruvio_used_memory_for_maxmemory",
                &shared.used_for_maxmemory(),
            );
            line("maxmemory", &cfg.maxmemory);
            line("maxmemory_human", &human_bytes(cfg.maxmemory));
            line(
                "maxmemory_policy",
                &src.engine.config().maxmemory_policy.name(),
            );
            line(
                "mem_fragmentation_ratio",
                &format!("{:.2}", rss as f64 / used.max(1) as f64),
            );
            // Neither is counted against maxmemory, as in Redis; the backlog is
            // this node's own in per-shard mode (`replication::history`).
            let state = shared.replication();
            let backlog = state.history(src.id, cfg.port_mode).primary.backlog_bytes();
            let replica_output = shared.sum(|g| &g.replica_output_bytes);
            line(
                "mem_not_counted_for_evict",
                &(replica_output + state.backlog_bytes()),
            );
            line("mem_replication_backlog", &backlog);
            line("mem_allocator", &"libc");
        }
        "persistence" => {
            line("loading", &u8::from(shared.loading().any()));
            line("async_loading", &0);
            let saved = shared.sum(|g| &g.dirty_at_save);
            line(
                "rdb_changes_since_last_save",
                &shared.sum(|g| &g.dirty).saturating_sub(saved),
            );
            let last_save = shared.last_save_unix_s();
            let saves = shared.background_save();
            saves.info_rdb(src.now_ms, last_save, &mut line);
            line("aof_enabled", &(cfg.durability.logs() as u8));
            saves.info_aof(src.now_ms, &mut line);
            let failed = shared
                .shards()
                .iter()
                .any(|g| g.wal_failed.load(Relaxed) != 0)
                || src.live.as_ref().is_some_and(|l| l.wal_failed);
            line("aof_last_write_status", &if failed { "err" } else { "ok" });
        }
        "stats" => {
            let engine = src.engine.stats();
            let counter = |live: u64, gauge: fn(&ShardGauges) -> &AtomicU64| {
                server_counter(src, Some(live), gauge)
            };
            // The shard's own counters: live, or as it last published them.
            let shard = |live: fn(&ShardStats) -> u64, gauge: fn(&ShardGauges) -> &AtomicU64| {
                server_counter(src, src.live.as_ref().map(|l| live(l.stats)), gauge)
            };
            line(
                "total_connections_received",
                &shard(|s| s.connections_received, |g| &g.connections_received),
            );
            line(
                "total_commands_processed",
                &shard(|s| s.commands, |g| &g.commands),
            );
            line(
                "instantaneous_ops_per_sec",
                &shard(|s| s.ops.per_sec(), |g| &g.ops_per_sec),
            );
            line(
                "total_net_input_bytes",
                &shard(|s| s.net_input_bytes, |g| &g.net_input_bytes),
            );
            line(
                "total_net_output_bytes",
                &shard(|s| s.net_output_bytes, |g| &g.net_output_bytes),
            );
            line(
                "rejected_connections",
                &shard(|s| s.rejected_connections, |g| &g.rejected_connections),
            );
            let history = shared.replication().history(src.id, cfg.port_mode);
            let syncs = history.sync_counts();
            line("sync_full", &syncs[0]);
            line("sync_partial_ok", &syncs[1]);
            line("sync_partial_err", &syncs[2]);
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
            line("pubsub_channels", &distinct(src, Kind::Channel));
            line("pubsub_patterns", &distinct(src, Kind::Pattern));
            line("pubsubshard_channels", &distinct(src, Kind::Shard));
            let [_, keys, items, prefixes] = tracking_figures(src);
            line("tracking_total_keys", &keys);
            line("tracking_total_items", &items);
            line("tracking_total_prefixes", &prefixes);
            let errors: u64 = server_errors(src).iter().map(|(_, n)| n).sum();
            line("total_error_replies", &errors);
            // Beyond Redis: how EXECs over several shards' keys ran (forward mode,
            // docs/transactions.md).
            line(
                "cross_shard_exec_in_place",
                &shard(|s| s.exec_in_place, |g| &g.exec_in_place),
            );
            line(
                "cross_shard_exec_borrowed",
                &shard(|s| s.exec_borrowed, |g| &g.exec_borrowed),
            );
            line(
                "cross_shard_exec_parts_joined",
                &shard(|s| s.in_place_joins, |g| &g.in_place_joins),
            );
            line(
                "cross_shard_ran_on_kept_keys",
                &shard(|s| s.ran_on_kept, |g| &g.ran_on_kept),
            );
        }
        "replication" => {
            let now_ms = crate::clock::unix_ms();
            let state = shared.replication();
            let history = state.history(src.id, cfg.port_mode);
            crate::replication::info(state, history, cfg, now_ms, &mut line);
        }
        "cpu" => {
            let (sys, user) = cpu_seconds();
            line("used_cpu_sys", &format!("{sys:.6}"));
            line("used_cpu_user", &format!("{user:.6}"));
            line("used_cpu_sys_children", &"0.000000");
            line("used_cpu_user_children", &"0.000000");
            // Redis's main thread is the one that ran INFO: here, this shard's.
            let seconds = |us: u64| format!("{:.6}", us as f64 / 1e6);
            let (sys, user) = crate::stats::thread_cpu_us();
            line("used_cpu_sys_main_thread", &seconds(sys));
            line("used_cpu_user_main_thread", &seconds(user));
            // Beyond Redis: each shard thread's own (this one's now, the others'
            // as they last published it).
            let (mode, shards) = (cfg.port_mode, shared.shards().len());
            for id in crate::messaging::pubsub::visible_shards_of(mode, src.id, shards) {
                let g = &shared.shards()[id];
                let (sys, user) = match id == src.id && src.live.is_some() {
                    true => (sys, user),
                    false => (g.cpu_sys_us.load(Relaxed), g.cpu_user_us.load(Relaxed)),
                };
                line(&format!("used_cpu_sys_shard_{id}"), &seconds(sys));
                line(&format!("used_cpu_user_shard_{id}"), &seconds(user));
            }
        }
        "cluster" => line("cluster_enabled", &(cfg.cluster_mode() as u8)),
        "keyspace" => {
            let mut dbs = vec![(0u64, 0u64); cfg.databases];
            for (db, keys, expires) in src.engine.keyspace_info() {
                if let Some(counts) = dbs.get_mut(db) {
                    *counts = (keys as u64, expires as u64);
                }
            }
            if cfg.port_mode == PortMode::Forward {
                let others = shared
                    .shards()
                    .iter()
                    .enumerate()
                    .filter(|&(id, _)| id != src.id);
                for (_, gauges) in others {
                    for (counts, (keys, expires)) in dbs.iter_mut().zip(&gauges.keys) {
                        counts.0 += keys.load(Relaxed);
                        counts.1 += expires.load(Relaxed);
                    }
                }
                if src.live.is_none() {
                    // A script's: the other shards' keys it borrowed count on them.
                    for (db, counts) in dbs.iter_mut().enumerate() {
                        counts.0 = counts
                            .0
                            .saturating_sub(crate::mesh::script_lock::held_here(db));
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
            let per_command = server_command_stats(src);
            for cmd in crate::cmd::registry::registry().all_rows() {
                let s = per_command[cmd.stat];
                if s.calls > 0 || s.rejected > 0 || s.failed > 0 {
                    let per_call = s.usec as f64 / s.calls.max(1) as f64;
                    line(&format!("cmdstat_{}", cmd.meta.name), &format!("calls={},usec={},usec_per_call={per_call:.2},rejected_calls={},failed_calls={}", s.calls, s.usec, s.rejected, s.failed));
                }
            }
        }
        "latencystats" => {
            let shards = match cfg.port_mode {
                PortMode::Forward => 0..cfg.shards,
                PortMode::PerShard => src.id..src.id + 1,
            };
            super::latency::info_section(cfg, shared.observatory(), shards, out);
        }
        "errorstats" => {
            for (code, count) in server_errors(src) {
                line(&format!("errorstat_{code}"), &format!("count={count}"));
            }
        }
        _ => {}
    }
}

/// A resettable counter of the whole server: this shard's live value (or, without
/// one, its published value) plus what the other shards published in the current
/// statistics epoch. Per-shard mode reports the node alone, as a Redis Cluster
/// node does.
fn server_counter<Sh: SharedReads>(
    src: &Source<'_, Sh>,
    live: Option<u64>,
    gauge: fn(&ShardGauges) -> &AtomicU64,
) -> u64 {
    let mine = gauge_of_mine(src, gauge);
    let here = live.unwrap_or(mine);
    if src.cfg.port_mode == PortMode::PerShard {
        return here;
    }
    here + src.shared.sum_counter(gauge).saturating_sub(mine)
}

/// A gauge of the whole server (connected or blocked clients), as
/// [`server_counter`] for a value no epoch resets.
fn server_gauge<Sh: SharedReads>(
    src: &Source<'_, Sh>,
    live: Option<u64>,
    gauge: fn(&ShardGauges) -> &AtomicU64,
) -> u64 {
    let mine = gauge(&src.shared.shards()[src.id]).load(Relaxed);
    let here = live.unwrap_or(mine);
    if src.cfg.port_mode == PortMode::PerShard {
        return here;
    }
    here + src.shared.sum(gauge).saturating_sub(mine)
}

/// This shard's own published value of a counter, if it is of the current epoch.
fn gauge_of_mine<Sh: SharedReads>(
    src: &Source<'_, Sh>,
    gauge: fn(&ShardGauges) -> &AtomicU64,
) -> u64 {
    let mine = &src.shared.shards()[src.id];
    if mine.epoch.load(Relaxed) >= src.shared.stats_epoch() {
        gauge(mine).load(Relaxed)
    } else {
        0
    }
}

/// Distinct names of `kind` subscribed to on the shards INFO reports.
/// CLIENT TRACKING's figures over the shards INFO describes (see
/// [`crate::tracking::Directory::figures`]).
fn tracking_figures<Sh: SharedReads>(src: &Source<'_, Sh>) -> [u64; 4] {
    let shards = src.shared.shards().len();
    let range = crate::messaging::pubsub::visible_shards_of(src.cfg.port_mode, src.id, shards);
    src.shared.tracking().figures(range)
}

fn distinct<Sh: SharedReads>(src: &Source<'_, Sh>, kind: Kind) -> u64 {
    let shards =
        crate::messaging::pubsub::visible_shards_of(src.cfg.port_mode, src.id, src.cfg.shards);
    crate::messaging::pubsub::distinct_in(src.shared.pubsub(), shards, kind)
}

/// Visit the published statistics tables that complete this shard's own: the
/// other shards' (forward mode), and this shard's when its live ones are not at
/// hand (a script's INFO).
fn published_tables<Sh: SharedReads>(src: &Source<'_, Sh>, f: impl FnMut(&StatTables)) {
    let skipped = if src.live.is_some() {
        Some(src.id)
    } else {
        None
    };
    let shards = match src.cfg.port_mode {
        PortMode::Forward => 0..src.cfg.shards,
        PortMode::PerShard => src.id..src.id + 1,
    };
    src.shared.for_tables(shards, skipped, f);
}

/// INFO commandstats of the whole server (of the node in per-shard mode).
fn server_command_stats<Sh: SharedReads>(src: &Source<'_, Sh>) -> Vec<CommandStat> {
    let slots = crate::cmd::registry::registry().stat_slots;
    let mut total = match &src.live {
        Some(live) => live.stats.per_command.clone(),
        None => vec![CommandStat::default(); slots],
    };
    published_tables(src, |tables| {
        for (sum, s) in total.iter_mut().zip(&tables.per_command) {
            sum.calls += s.calls;
            sum.usec += s.usec;
            sum.failed += s.failed;
            sum.rejected += s.rejected;
        }
    });
    total
}

/// INFO errorstats of the whole server (of the node in per-shard mode), by code.
fn server_errors<Sh: SharedReads>(src: &Source<'_, Sh>) -> Vec<(Box<str>, u64)> {
    let mut total: Vec<(Box<str>, u64)> = match &src.live {
        Some(live) => live
            .stats
            .errors
            .iter()
            .map(|(code, &n)| (code.clone(), n))
            .collect(),
        None => Vec::new(),
    };
    published_tables(src, |tables| {
        for (code, n) in &tables.errors {
            match total.iter_mut().find(|(c, _)| c == code) {
                Some((_, sum)) => *sum += n,
                None => total.push((code.clone(), *n)),
            }
        }
    });
    total.sort();
    total
}
