//! LATENCY (Redis 7.0): the latency monitor's LATEST, HISTORY, RESET, GRAPH and
//! DOCTOR, the per-command HISTOGRAM, and INFO's `latencystats` section.
//!
//! The monitor is one for the process (`observability::latency`), so its
//! subcommands read it directly on whichever shard answers. The histograms are
//! each shard's own: in forward mode LATENCY HISTOGRAM, like INFO, first has every
//! other shard publish its histograms ([`crate::mesh::gather`]) and answers from
//! their merge, so it counts every command answered before it.

use super::{Ctx, Server, ServerCommand, ServerResult, SharedReads};
use crate::cmd::registry::Command;
use crate::config::{Config, Durability, PortMode};
use crate::mesh::gather::{Gather, Then};
use crate::observability::histograms::{cumulative_buckets, percentile_usec, CommandHistograms};
use crate::observability::latency::{anon_huge_pages, DoctorInput};
use crate::observability::{Observatory, Timing};
use ruvio_engine::command::{command, flags::*, CommandTree};
use ruvio_engine::{CmdError, KeySpec};
use ruvio_resp::{Args, Protocol, Reply};
use std::fmt::Write;
use std::ops::Range;

/// The family's table.
#[rustfmt::skip]
pub const COMMANDS: &[ServerCommand] = &[
    command!("latency", -2, 0, KeySpec::NONE, ["slow"], "server", "2.8.13",
        "A container for latency diagnostics commands", "Depends on subcommand.",
        subcommands = SUBCOMMANDS),
];

#[rustfmt::skip]
const SUBCOMMANDS: &[ServerCommand] = &[
    command!("latency|doctor", 2, ADMIN | NOSCRIPT | LOADING | STALE, KeySpec::NONE,
        ["admin", "slow", "dangerous"], "server", "2.8.13", "Return a human readable latency analysis report.",
        "O(1)", doctor),
    command!("latency|graph", 3, ADMIN | NOSCRIPT | LOADING | STALE, KeySpec::NONE,
        ["admin", "slow", "dangerous"], "server", "2.8.13", "Return a latency graph for the event.", "O(1)",
        graph),
    command!("latency|history", 3, ADMIN | NOSCRIPT | LOADING | STALE, KeySpec::NONE,
        ["admin", "slow", "dangerous"], "server", "2.8.13", "Return timestamp-latency samples for the event.",
        "O(1)", history),
    command!("latency|latest", 2, ADMIN | NOSCRIPT | LOADING | STALE, KeySpec::NONE,
        ["admin", "slow", "dangerous"], "server", "2.8.13", "Return the latest latency samples for all events.",
        "O(1)", latest),
    command!("latency|reset", -2, ADMIN | NOSCRIPT | LOADING | STALE, KeySpec::NONE,
        ["admin", "slow", "dangerous"], "server", "2.8.13", "Reset latency data for one or more events.",
        "O(1)", reset),
    command!("latency|histogram", -2, ADMIN | NOSCRIPT | LOADING | STALE, KeySpec::NONE,
        ["admin", "slow", "dangerous"], "server", "7.0.0",
        "Return the cumulative distribution of latencies of a subset of commands or all.",
        "O(N) where N is the number of commands with latency information being retrieved.", histogram),
    command!("latency|help", 2, LOADING | STALE, KeySpec::NONE, ["slow"], "server", "2.8.13",
        "Show helpful text about the different subcommands.", "O(1)", help),
];

fn now_s() -> u64 {
    crate::clock::unix_ms() / 1000
}

/// `LATENCY DOCTOR`
fn doctor<S: Server>(ctx: &mut Ctx<'_, S>, _args: Args<'_>, reply: &mut Reply<'_>) -> ServerResult {
    let settings = ctx.core.command_timing().settings();
    let input = DoctorInput {
        threshold_ms: settings.monitor_ms,
        slow_us: settings.slow_us,
        hz: ctx.core.settings().hz,
        fsync_always: ctx.core.settings().durability == Durability::Always,
        anon_huge_pages: anon_huge_pages(),
    };
    let report = ctx
        .core
        .shared()
        .observatory()
        .monitor()
        .doctor(input, now_s());
    reply.verbatim("txt", report.as_bytes());
    Ok(())
}

/// `LATENCY GRAPH event`
fn graph<S: Server>(ctx: &mut Ctx<'_, S>, args: Args<'_>, reply: &mut Reply<'_>) -> ServerResult {
    let event = args.get(2);
    let monitor = ctx.core.shared().observatory().monitor();
    let Some(text) = monitor.graph(event, now_s()) else {
        return Err(CmdError::quoted(
            "ERR No samples available for event '",
            event,
            "'",
        ));
    };
    reply.verbatim("txt", text.as_bytes());
    Ok(())
}

/// `LATENCY HISTORY event`
fn history<S: Server>(ctx: &mut Ctx<'_, S>, args: Args<'_>, reply: &mut Reply<'_>) -> ServerResult {
    let samples = ctx
        .core
        .shared()
        .observatory()
        .monitor()
        .history(args.get(2));
    reply.array(samples.len());
    for (unix_s, ms) in samples {
        reply.array(2);
        reply.int(unix_s as i64);
        reply.int(ms as i64);
    }
    Ok(())
}

/// `LATENCY LATEST`
fn latest<S: Server>(ctx: &mut Ctx<'_, S>, _args: Args<'_>, reply: &mut Reply<'_>) -> ServerResult {
    let rows = ctx.core.shared().observatory().monitor().latest();
    reply.array(rows.len());
    for row in rows {
        reply.array(4);
        reply.bulk(row.event.as_bytes());
        reply.int(row.unix_s as i64);
        reply.int(row.ms as i64);
        reply.int(row.max_ms as i64);
    }
    Ok(())
}

/// `LATENCY RESET [event ...]`
fn reset<S: Server>(ctx: &mut Ctx<'_, S>, args: Args<'_>, reply: &mut Reply<'_>) -> ServerResult {
    let events: Vec<&[u8]> = args.iter().skip(2).collect();
    let forgotten = ctx.core.shared().observatory().monitor().reset(&events);
    reply.int(forgotten as i64);
    Ok(())
}

/// `LATENCY HISTOGRAM [command ...]`
fn histogram<S: Server>(
    ctx: &mut Ctx<'_, S>,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> ServerResult {
    let commands: Vec<Vec<u8>> = args.iter().skip(2).map(|a| a.to_vec()).collect();
    if ctx.core.settings().port_mode == PortMode::Forward && ctx.core.topology().nodes.len() > 1 {
        // The other shards publish their histograms first.
        ctx.gather = Some(Gather::AfterAll(Then::LatencyHistogram(commands)));
        return Ok(());
    }
    let core = &*ctx.core;
    let shards = super::slowlog::visible_shards(core.settings(), core.shard_id());
    let observatory = core.shared().observatory();
    write_histograms(
        (core.command_timing(), observatory, core.shard_id(), shards),
        &commands,
        reply,
    );
    Ok(())
}

/// The histograms a reply reads: this shard's (`Timing`, shard id) and those the
/// shards in the range published.
pub type HistogramSource<'a> = (&'a Timing, &'a Observatory, usize, Range<usize>);

/// LATENCY HISTOGRAM's reply, once every shard published: a map of command name
/// to `calls` and `histogram_usec` (Redis's `latencySpecificCommandsFillCDF`:
/// a named container brings its subcommands, an unknown name nothing).
pub fn histogram_reply(
    source: HistogramSource<'_>,
    proto: Protocol,
    commands: &[Vec<u8>],
) -> Vec<u8> {
    let mut out = Vec::new();
    write_histograms(source, commands, &mut Reply::new(&mut out, proto));
    out
}

fn write_histograms(
    (timing, observatory, id, shards): HistogramSource<'_>,
    commands: &[Vec<u8>],
    reply: &mut Reply<'_>,
) {
    observatory.publish_histograms(id, timing.histograms());
    let merged = observatory.merged_histograms(shards);
    let registry = crate::cmd::registry::registry();
    let mut rows: Vec<(&str, usize)> = Vec::new();
    let called =
        |cmd: &'static Command| merged.called(cmd.stat).then_some((cmd.meta.name, cmd.stat));
    // A command and, for a container, its subcommands.
    let with_subs = |cmd: &'static Command| {
        std::iter::once(cmd)
            .chain(cmd.subcommands())
            .filter_map(called)
    };
    if commands.is_empty() {
        rows.extend(registry.commands.iter().flat_map(with_subs));
    } else {
        for name in commands {
            match named(name) {
                Some(Named::Command(cmd)) => rows.extend(with_subs(cmd)),
                Some(Named::Sub(sub)) => rows.extend(called(sub)),
                None => {}
            }
        }
    }
    reply.map(rows.len());
    for (name, stat) in rows {
        write_cdf(&merged, stat, name, reply);
    }
}

/// One command's entry: `name => {calls, histogram_usec => {bucket => calls}}`.
fn write_cdf(merged: &CommandHistograms, stat: usize, name: &str, reply: &mut Reply<'_>) {
    let Some(h) = merged.get(stat) else {
        return;
    };
    reply.bulk(name.as_bytes());
    reply.map(2);
    reply.bulk(b"calls");
    reply.int(h.len() as i64);
    reply.bulk(b"histogram_usec");
    let buckets = cumulative_buckets(&h);
    reply.map(buckets.len());
    for (usec, calls) in buckets {
        reply.int(usec as i64);
        reply.int(calls as i64);
    }
}

/// What a name in LATENCY HISTOGRAM stands for.
enum Named {
    Command(&'static Command),
    /// `container|sub`.
    Sub(&'static Command),
}

/// The command `name` names (Redis's `lookupCommandBySds`: `config|get` is a
/// subcommand).
fn named(name: &[u8]) -> Option<Named> {
    let registry = crate::cmd::registry::registry();
    let mut parts = name.splitn(2, |&b| b == b'|');
    let container = registry.lookup(parts.next()?)?;
    match parts.next() {
        None => Some(Named::Command(container)),
        Some(sub) => container
            .subcommands()
            .iter()
            .find(|s| {
                let short = s.meta.name.rsplit('|').next().unwrap_or_default();
                short.as_bytes().eq_ignore_ascii_case(sub)
            })
            .map(Named::Sub),
    }
}

/// `LATENCY HELP`: Redis 7.0's text.
fn help<S: Server>(_ctx: &mut Ctx<'_, S>, _args: Args<'_>, reply: &mut Reply<'_>) -> ServerResult {
    const LINES: &[&str] = &[
        "LATENCY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "DOCTOR",
        "    Return a human readable latency analysis report.",
        "GRAPH <event>",
        "    Return an ASCII latency graph for the <event> class.",
        "HISTORY <event>",
        "    Return time-latency samples for the <event> class.",
        "LATEST",
        "    Return the latest latency samples for all events.",
        "RESET [<event> ...]",
        "    Reset latency data of one or more <event> classes.",
        "    (default: reset all data for all event classes)",
        "HISTOGRAM [COMMAND ...]",
        "    Return a cumulative distribution of latencies in the format of a histogram for the specified command names.",
        "    If no commands are specified then all histograms are replied.",
        "HELP",
        "    Prints this help.",
    ];
    reply.array(LINES.len());
    LINES.iter().for_each(|line| reply.simple(line));
    Ok(())
}

/// INFO's `latencystats` lines of shards `shards` (their published histograms):
/// `latency_percentiles_usec_<command>:p50=1.003,p99=...` for every command
/// called, when `latency-tracking` is on.
pub fn info_section(
    cfg: &Config,
    observatory: &Observatory,
    shards: Range<usize>,
    out: &mut String,
) {
    if cfg.param("latency-tracking") != "yes" {
        return;
    }
    let percentiles: Vec<(&str, f64)> = cfg
        .param("latency-tracking-info-percentiles")
        .split_whitespace()
        .filter_map(|w| Some((w, w.parse().ok()?)))
        .collect();
    let merged = observatory.merged_histograms(shards);
    for cmd in crate::cmd::registry::registry().all_rows() {
        let Some(h) = merged.get(cmd.stat) else {
            continue;
        };
        let _ = write!(out, "latency_percentiles_usec_{}:", cmd.meta.name);
        for (i, (shown, p)) in percentiles.iter().enumerate() {
            let sep = if i == 0 { "" } else { "," };
            let _ = write!(out, "{sep}p{shown}={:.3}", percentile_usec(&h, *p));
        }
        out.push_str("\r\n");
    }
}
