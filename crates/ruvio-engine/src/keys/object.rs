//! Introspection containers: `OBJECT ENCODING|REFCOUNT|IDLETIME|FREQ|HELP` and
//! `MEMORY USAGE|DOCTOR|MALLOC-STATS|PURGE|HELP`.
//!
//! The container rows (`object`, `memory`) are in the family table and carry these
//! subcommand rows (`object|encoding` ...), each with Redis' arity, flags and key
//! position. The caller resolves the subcommand (`CommandTree::resolve`, with Redis'
//! `unknown subcommand` and subcommand-arity errors) and runs its handler directly.

use crate::command::reply_help;
use ruvio_resp::{Args, Reply};

use crate::args::{eq_ci, int_arg};
use crate::clock::clock_of;
use crate::clock::idle_seconds;
use crate::command::{
    command, flags::*, CmdResult, EngineCommand, ExecCtx, KeySpec, Outcome::Done,
};
use crate::engine::Lookup;
use crate::error::CmdError;
use crate::Engine;

/// OBJECT's subcommands.
#[rustfmt::skip]
pub const OBJECT_SUBCOMMANDS: &[EngineCommand] = &[
    command!("object|encoding", 3, READONLY, KeySpec::SECOND, ["keyspace", "read", "slow"], "generic", "2.2.3",
        "Inspect the internal encoding of a Redis object", "O(1)", object_encoding),
    command!("object|freq", 3, READONLY, KeySpec::SECOND, ["keyspace", "read", "slow"], "generic", "4.0.0",
        "Get the logarithmic access frequency counter of a Redis object", "O(1)", object_freq),
    command!("object|idletime", 3, READONLY, KeySpec::SECOND, ["keyspace", "read", "slow"], "generic", "2.2.3",
        "Get the time since a Redis object was last accessed", "O(1)", object_idletime),
    command!("object|refcount", 3, READONLY, KeySpec::SECOND, ["keyspace", "read", "slow"], "generic", "2.2.3",
        "Get the number of references to the value of the key", "O(1)", object_refcount),
    command!("object|help", 2, LOADING | STALE, KeySpec::NONE, ["keyspace", "slow"], "generic", "6.2.0",
        "Show helpful text about the different subcommands", "O(1)", object_help),
];

/// MEMORY's subcommands the engine can answer (STATS needs server-wide numbers:
/// the server adds it, `ruvio_server::cmd::memory`).
#[rustfmt::skip]
pub const MEMORY_SUBCOMMANDS: &[EngineCommand] = &[
    command!("memory|usage", -3, READONLY, KeySpec::SECOND, ["read", "slow"], "server", "4.0.0",
        "Estimate the memory usage of a key", "O(N) where N is the number of samples.", memory_usage),
    command!("memory|doctor", 2, 0, KeySpec::NONE, ["slow"], "server", "4.0.0",
        "Outputs memory problems report", "O(1)", memory_doctor),
    command!("memory|malloc-stats", 2, 0, KeySpec::NONE, ["slow"], "server", "4.0.0",
        "Show allocator internal stats", "Depends on how much memory is allocated, could be slow", memory_malloc_stats),
    command!("memory|purge", 2, 0, KeySpec::NONE, ["slow"], "server", "4.0.0",
        "Ask the allocator to release memory", "Depends on how much memory is allocated, could be slow", memory_purge),
    command!("memory|help", 2, LOADING | STALE, KeySpec::NONE, ["slow"], "server", "4.0.0",
        "Show helpful text about the different subcommands", "O(1)", memory_help),
];

/// OBJECT HELP's lines between Redis' standard header and footer.
const OBJECT_HELP: &[&str] = &[
    "ENCODING <key>",
    "    Return the kind of internal representation used in order to store the value",
    "    associated with a <key>.",
    "FREQ <key>",
    "    Return the access frequency index of the <key>. The returned integer is",
    "    proportional to the logarithm of the recent access frequency of the key.",
    "IDLETIME <key>",
    "    Return the idle time of the <key>, that is the approximated number of",
    "    seconds elapsed since the last access to the key.",
    "REFCOUNT <key>",
    "    Return the number of references of the value associated with the specified",
    "    <key>.",
];

/// MEMORY HELP's lines: Redis' for the subcommands Ruvio has (not STATS).
const MEMORY_HELP: &[&str] = &[
    "DOCTOR",
    "    Return memory problems reports.",
    "MALLOC-STATS",
    "    Return internal statistics report from the memory allocator.",
    "PURGE",
    "    Attempt to purge dirty pages for reclamation by the allocator.",
    "STATS",
    "    Return information about the memory usage of the server.",
    "USAGE <key> [SAMPLES <count>]",
    "    Return memory in bytes used by <key> and its value. Nested values are",
    "    sampled up to <count> times (default: 5, 0 means sample all).",
];

/// Below this much data MEMORY DOCTOR declines to judge (Redis: 5 MB).
const DOCTOR_BYTES_MIN: usize = 5 * 1024 * 1024;

/// The entry OBJECT looks at (no touch, counts a hit or miss); replies nil when missing.
fn object_lookup(
    engine: &mut Engine,
    ctx: &ExecCtx,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> Option<u32> {
    let found = engine.lookup(ctx, ctx.db, args.get(2), Lookup::READ_NOTOUCH);
    if found.is_none() {
        reply.null();
    }
    found
}

/// `OBJECT ENCODING key`: `int`, `embstr` or `raw`, as Redis 7.0 would report.
fn object_encoding(
    engine: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> CmdResult {
    if let Some(id) = object_lookup(engine, ctx, args, reply) {
        reply.bulk(engine.db(ctx.db).entry(id).encoding().name().as_bytes());
    }
    Ok(Done)
}

/// `OBJECT REFCOUNT key`: 2147483647 for shared small integers, else 1.
fn object_refcount(
    engine: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> CmdResult {
    if let Some(id) = object_lookup(engine, ctx, args, reply) {
        reply.int(engine.db(ctx.db).entry(id).refcount());
    }
    Ok(Done)
}

/// `OBJECT IDLETIME key`: seconds since the last access.
fn object_idletime(
    engine: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> CmdResult {
    if engine.config().maxmemory_policy.is_lfu() {
        return match engine.lookup(ctx, ctx.db, args.get(2), Lookup::READ_NOTOUCH) {
            Some(_) => Err(CmdError::LruNotSelected),
            None => {
                reply.null();
                Ok(Done)
            }
        };
    }
    if let Some(id) = object_lookup(engine, ctx, args, reply) {
        let then = engine.db(ctx.db).entry(id).clock();
        reply.int(idle_seconds(clock_of(ctx.now_ms), then) as i64);
    }
    Ok(Done)
}

/// `OBJECT FREQ key`: the LFU counter (after decay) under an LFU policy, else
/// Redis' error.
fn object_freq(
    engine: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> CmdResult {
    let lfu = engine.config().maxmemory_policy.is_lfu();
    match engine.lookup(ctx, ctx.db, args.get(2), Lookup::READ_NOTOUCH) {
        Some(_) if !lfu => Err(CmdError::LfuNotSelected),
        Some(id) => {
            let clock = engine.db(ctx.db).entry(id).clock();
            let decay = engine.config().lfu_decay_time;
            reply.int(crate::clock::lfu_decayed(clock, ctx.now_ms, decay) as i64);
            Ok(Done)
        }
        None => {
            reply.null();
            Ok(Done)
        }
    }
}

/// `OBJECT HELP`
fn object_help(
    _engine: &mut Engine,
    _ctx: &mut ExecCtx,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> CmdResult {
    reply_help(reply, args.get(0), OBJECT_HELP);
    Ok(Done)
}

/// `MEMORY USAGE key [SAMPLES count]`: bytes the key costs in Ruvio's layout (its
/// entry, its index slot and its heap blocks); nil when missing. Like Redis it does
/// not check the key's TTL.
fn memory_usage(
    engine: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> CmdResult {
    let mut j = 3;
    while j < args.len() {
        if eq_ci(args.get(j), "SAMPLES") && j + 1 < args.len() {
            if int_arg(args.get(j + 1))? < 0 {
                return Err(CmdError::Syntax);
            }
            j += 2;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    let db = engine.db(ctx.db);
    match db.find(args.get(2)) {
        None => reply.null(),
        Some(id) => reply.int((db.entry_overhead_bytes() + db.entry(id).heap_bytes()) as i64),
    }
    Ok(Done)
}

/// `MEMORY DOCTOR`: Redis' verdicts for a small or a healthy instance.
fn memory_doctor(
    engine: &mut Engine,
    _ctx: &mut ExecCtx,
    _args: Args<'_>,
    reply: &mut Reply<'_>,
) -> CmdResult {
    let text: &[u8] = if engine.used_memory_bytes() < DOCTOR_BYTES_MIN {
        b"Hi Sam, this instance is empty or is using very little memory, my issues detector can't be used in these conditions. Please, leave for your mission on Earth and fill it with some data. The new Sam and I will be back to our programming as soon as I finished rebooting."
    } else {
        b"Hi Sam, I can't find any memory issue in your instance. I can only account for what occurs on this base."
    };
    reply.verbatim("txt", text);
    Ok(Done)
}

/// `MEMORY MALLOC-STATS`: what Redis answers when not built with jemalloc.
fn memory_malloc_stats(
    _engine: &mut Engine,
    _ctx: &mut ExecCtx,
    _args: Args<'_>,
    reply: &mut Reply<'_>,
) -> CmdResult {
    reply.verbatim("txt", b"Stats not supported for the current allocator");
    Ok(Done)
}

/// `MEMORY PURGE`: a no-op `OK`, as Redis without jemalloc.
fn memory_purge(
    _engine: &mut Engine,
    _ctx: &mut ExecCtx,
    _args: Args<'_>,
    reply: &mut Reply<'_>,
) -> CmdResult {
    reply.ok();
    Ok(Done)
}

/// `MEMORY HELP`
fn memory_help(
    _engine: &mut Engine,
    _ctx: &mut ExecCtx,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> CmdResult {
    reply_help(reply, args.get(0), MEMORY_HELP);
    Ok(Done)
}
