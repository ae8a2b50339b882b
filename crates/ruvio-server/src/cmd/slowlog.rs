//! SLOWLOG (Redis 7.0) and COMMANDLOG (Valkey 8.1): reading and resetting the
//! command logs that `observability` keeps.
//!
//! One server, one log: in forward mode a read merges every shard's log newest
//! first (ids are server-wide), LEN counts them together and RESET empties each;
//! the logs are read under their shards' locks, so a command answered before the
//! read is in it whichever shard ran it. The server-wide log is at most the
//! `*-max-len` newest entries, as one Redis's. In per-shard mode each shard is a
//! node of its own and reads only its log, as a Redis Cluster node does.

use super::{parse_i64, Ctx, Server, ServerCommand, ServerResult, SharedReads};
use crate::config::{Config, PortMode};
use crate::observability::commandlog::{Entry, LogKind};
use ruvio_engine::command::{command, flags::*, reply_help};
use ruvio_engine::{CmdError, KeySpec};
use ruvio_resp::{Args, Reply};
use std::ops::Range;

/// The family's table.
#[rustfmt::skip]
pub const COMMANDS: &[ServerCommand] = &[
    command!("slowlog", -2, 0, KeySpec::NONE, ["slow"], "server", "2.2.12",
        "A container for slow log commands", "Depends on subcommand.",
        subcommands = SLOWLOG_SUBCOMMANDS),
    command!("commandlog", -2, 0, KeySpec::NONE, ["slow"], "server", "8.1.0",
        "A container for command log commands", "Depends on subcommand.",
        subcommands = COMMANDLOG_SUBCOMMANDS),
];

#[rustfmt::skip]
const SLOWLOG_SUBCOMMANDS: &[ServerCommand] = &[
    command!("slowlog|get", -2, ADMIN | LOADING | STALE, KeySpec::NONE, ["admin", "slow", "dangerous"],
        "server", "2.2.12", "Get the slow log's entries", "O(N) where N is the number of entries returned",
        slowlog_get),
    command!("slowlog|len", 2, ADMIN | LOADING | STALE, KeySpec::NONE, ["admin", "slow", "dangerous"],
        "server", "2.2.12", "Get the slow log's length", "O(1)", slowlog_len),
    command!("slowlog|reset", 2, ADMIN | LOADING | STALE, KeySpec::NONE, ["admin", "slow", "dangerous"],
        "server", "2.2.12", "Clear all entries from the slow log", "O(N) where N is the number of entries in the slowlog",
        slowlog_reset),
    command!("slowlog|help", 2, LOADING | STALE, KeySpec::NONE, ["slow"], "server", "6.2.0",
        "Show helpful text about the different subcommands", "O(1)", slowlog_help),
];

#[rustfmt::skip]
const COMMANDLOG_SUBCOMMANDS: &[ServerCommand] = &[
    command!("commandlog|get", 4, ADMIN | LOADING | STALE, KeySpec::NONE, ["admin", "slow", "dangerous"],
        "server", "8.1.0", "Returns the specified command log's entries.",
        "O(N) where N is the number of entries returned", commandlog_get),
    command!("commandlog|len", 3, ADMIN | LOADING | STALE, KeySpec::NONE, ["admin", "slow", "dangerous"],
        "server", "8.1.0", "Returns the number of entries in the specified type of command log.", "O(1)",
        commandlog_len),
    command!("commandlog|reset", 3, ADMIN | LOADING | STALE, KeySpec::NONE, ["admin", "slow", "dangerous"],
        "server", "8.1.0", "Clears all entries from the specified type of command log.",
        "O(N) where N is the number of entries in the commandlog", commandlog_reset),
    command!("commandlog|help", 2, LOADING | STALE, KeySpec::NONE, ["slow"], "server", "8.1.0",
        "Show helpful text about the different subcommands", "O(1)", commandlog_help),
];

/// SLOWLOG GET's count without one.
const SLOWLOG_GET_DEFAULT: usize = 10;

/// The shards whose logs a client of shard `id` sees: all of them in forward
/// mode, its own in per-shard mode (a node of a cluster).
pub(crate) fn visible_shards(cfg: &Config, id: usize) -> Range<usize> {
    match cfg.port_mode {
        PortMode::Forward => 0..cfg.shards,
        PortMode::PerShard => id..id + 1,
    }
}

/// A GET's count: -1 or more (`getRangeLongFromObjectOrReply(..., -1, LONG_MAX)`,
/// one message for "not a number" and "too small"); -1 is every entry.
fn count_of(arg: &[u8]) -> Result<usize, CmdError> {
    match parse_i64(arg) {
        Some(-1) => Ok(usize::MAX),
        Some(n) if n >= 0 => Ok(usize::try_from(n).unwrap_or(usize::MAX)),
        _ => Err(CmdError::LogCountRange),
    }
}

fn kind_of(arg: &[u8]) -> Result<LogKind, CmdError> {
    LogKind::parse(arg).ok_or(CmdError::CommandlogType)
}

/// The newest `count` entries of log `kind` the caller sees, as Redis writes them.
fn write_entries<S: Server>(ctx: &Ctx<'_, S>, kind: LogKind, count: usize, reply: &mut Reply<'_>) {
    let core = &*ctx.core;
    let count = count.min(core.command_timing().settings().len_max(kind));
    let entries = core.shared().observatory().newest(
        visible_shards(core.settings(), core.shard_id()),
        kind,
        count,
    );
    reply.array(entries.len());
    for Entry {
        id,
        unix_s,
        amount,
        argv,
        peer,
        name,
    } in &entries
    {
        reply.array(6);
        reply.int(*id as i64);
        reply.int(*unix_s as i64);
        reply.int(*amount as i64);
        reply.array(argv.len());
        for arg in argv {
            reply.bulk(arg);
        }
        reply.bulk(peer.as_bytes());
        reply.bulk(name);
    }
}

fn write_len<S: Server>(ctx: &Ctx<'_, S>, kind: LogKind, reply: &mut Reply<'_>) {
    let core = &*ctx.core;
    let len = core
        .shared()
        .observatory()
        .len(visible_shards(core.settings(), core.shard_id()), kind);
    reply.int(len.min(core.command_timing().settings().len_max(kind)) as i64);
}

/// `SLOWLOG GET [count]`
fn slowlog_get<S: Server>(
    ctx: &mut Ctx<'_, S>,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> ServerResult {
    if args.len() > 3 {
        return Err(CmdError::subcommand_syntax(args.get(1), "slowlog"));
    }
    let count = match args.len() {
        3 => count_of(args.get(2))?,
        _ => SLOWLOG_GET_DEFAULT,
    };
    write_entries(ctx, LogKind::Slow, count, reply);
    Ok(())
}

/// `SLOWLOG LEN`
fn slowlog_len<S: Server>(
    ctx: &mut Ctx<'_, S>,
    _args: Args<'_>,
    reply: &mut Reply<'_>,
) -> ServerResult {
    write_len(ctx, LogKind::Slow, reply);
    Ok(())
}

/// `SLOWLOG RESET`
fn slowlog_reset<S: Server>(
    ctx: &mut Ctx<'_, S>,
    _args: Args<'_>,
    reply: &mut Reply<'_>,
) -> ServerResult {
    let shards = visible_shards(ctx.core.settings(), ctx.core.shard_id());
    ctx.core.shared().observatory().reset(shards, LogKind::Slow);
    reply.ok();
    Ok(())
}

/// `SLOWLOG HELP`: Redis 7.0's text (its own last line, "Prints").
fn slowlog_help<S: Server>(
    _ctx: &mut Ctx<'_, S>,
    _args: Args<'_>,
    reply: &mut Reply<'_>,
) -> ServerResult {
    const LINES: &[&str] = &[
        "SLOWLOG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "GET [<count>]",
        "    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
        "    Entries are made of:",
        "    id, timestamp, time in microseconds, arguments array, client IP and port,",
        "    client name",
        "LEN",
        "    Return the length of the slowlog.",
        "RESET",
        "    Reset the slowlog.",
        "HELP",
        "    Prints this help.",
    ];
    reply.array(LINES.len());
    LINES.iter().for_each(|line| reply.simple(line));
    Ok(())
}

/// `COMMANDLOG GET count slow|large-request|large-reply`
fn commandlog_get<S: Server>(
    ctx: &mut Ctx<'_, S>,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> ServerResult {
    let count = count_of(args.get(2))?;
    let kind = kind_of(args.get(3))?;
    write_entries(ctx, kind, count, reply);
    Ok(())
}

/// `COMMANDLOG LEN slow|large-request|large-reply`
fn commandlog_len<S: Server>(
    ctx: &mut Ctx<'_, S>,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> ServerResult {
    write_len(ctx, kind_of(args.get(2))?, reply);
    Ok(())
}

/// `COMMANDLOG RESET slow|large-request|large-reply`
fn commandlog_reset<S: Server>(
    ctx: &mut Ctx<'_, S>,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> ServerResult {
    let kind = kind_of(args.get(2))?;
    let shards = visible_shards(ctx.core.settings(), ctx.core.shard_id());
    ctx.core.shared().observatory().reset(shards, kind);
    reply.ok();
    Ok(())
}

/// `COMMANDLOG HELP`: Valkey 8.1's text.
fn commandlog_help<S: Server>(
    _ctx: &mut Ctx<'_, S>,
    _args: Args<'_>,
    reply: &mut Reply<'_>,
) -> ServerResult {
    reply_help(
        reply,
        b"commandlog",
        &[
            "GET <count> <type>",
            "    Return top <count> entries of the specified <type> from the commandlog (-1 mean all).",
            "    Entries are made of:",
            "    id, timestamp,",
            "        time in microseconds for type of slow,",
            "        or size in bytes for type of large-request,",
            "        or size in bytes for type of large-reply",
            "    arguments array, client IP and port,",
            "    client name",
            "LEN <type>",
            "    Return the length of the specified type of commandlog.",
            "RESET <type>",
            "    Reset the specified type of commandlog.",
        ],
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_read_as_redis_reads_them() {
        assert_eq!(count_of(b"-1"), Ok(usize::MAX));
        assert_eq!(count_of(b"0"), Ok(0));
        assert_eq!(count_of(b"5"), Ok(5));
        for bad in [&b"-2"[..], b"x", b"", b"1.5", b"99999999999999999999"] {
            assert_eq!(count_of(bad), Err(CmdError::LogCountRange), "{bad:?}");
        }
    }
}
