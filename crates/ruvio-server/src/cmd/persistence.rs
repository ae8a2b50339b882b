//! Persistence: SAVE, LASTSAVE, SHUTDOWN, and the background saves BGSAVE and
//! BGREWRITEAOF, answered as Redis answers them. SAVE is [`crate::persistence::snapshot::save`]
//! on every shard; a background save is [`crate::persistence::snapshot`] (a snapshot of every
//! shard in time slices, no fork); SHUTDOWN's orderly exit is [`crate::persistence::shutdown`].
//! INFO persistence is in `info`.

use super::{Ctx, Server, ServerCommand, ServerResult, SharedReads};
use crate::config::change::ConfigChange;
use crate::mesh::gather::{Gather, Then};
use crate::persistence::shutdown::Leaving;
use crate::persistence::snapshot::Saving;
use crate::persistence::snapshot::{Kind, Start};
use ruvio_engine::command::{command, flags::*};
use ruvio_engine::{CmdError, KeySpec};
use ruvio_resp::{Args, Reply};

/// The persistence family's table, with Redis 7's flags and ACL categories.
#[rustfmt::skip]
pub const COMMANDS: &[ServerCommand] = &[
    command!("lastsave", 1, LOADING | STALE | FAST, KeySpec::NONE, ["fast", "admin", "dangerous"], "server", "1.0.0",
        "Get the UNIX time stamp of the last successful save to disk", "O(1)", lastsave),
    command!("save", 1, ADMIN | NOSCRIPT | NO_ASYNC_LOADING | NO_MULTI, KeySpec::NONE, ["admin", "slow", "dangerous"],
        "server", "1.0.0", "Synchronously save the dataset to disk", "O(N) where N is the total number of keys in all databases", save),
    command!("shutdown", -1, ADMIN | NOSCRIPT | LOADING | STALE | NO_MULTI | ALLOW_BUSY, KeySpec::NONE,
        ["admin", "slow", "dangerous"], "server", "1.0.0",
        "Synchronously save the dataset to disk and then shut down the server",
        "O(N) when saving, where N is the total number of keys in all databases when saving data, otherwise O(1)",
        shutdown),
    command!("bgsave", -1, ADMIN | NOSCRIPT | NO_ASYNC_LOADING, KeySpec::NONE, ["admin", "slow", "dangerous"],
        "server", "1.0.0", "Asynchronously save the dataset to disk", "O(1)", bgsave),
    command!("bgrewriteaof", 1, ADMIN | NOSCRIPT | NO_ASYNC_LOADING, KeySpec::NONE, ["admin", "slow", "dangerous"],
        "server", "1.0.0", "Asynchronously rewrite the append-only file", "O(1)", bgrewriteaof),
];

/// `LASTSAVE`: the last completed SAVE, or the start time before one (as a fresh
/// Redis answers).
fn lastsave<S: Server>(
    ctx: &mut Ctx<'_, S>,
    _args: Args<'_>,
    reply: &mut Reply<'_>,
) -> ServerResult {
    reply.int(ctx.core.shared().last_save_unix_s() as i64);
    Ok(())
}

/// `SAVE`: every shard writes a snapshot of its keys and drops the log it covers
/// (docs/durability.md); `+OK` once all have, in both port modes (the shards are
/// one process with one data directory, as for BGSAVE). Needs a log
/// (`--durability everysec` or `always`).
fn save<S: Server + Saving>(
    ctx: &mut Ctx<'_, S>,
    _args: Args<'_>,
    reply: &mut Reply<'_>,
) -> ServerResult {
    if !ctx.core.has_log() {
        return dump_everywhere(ctx, reply, "SAVE", b"+OK\r\n");
    }
    if ctx.core.shared().background_save().running_kind().is_some() {
        return Err(CmdError::Line(
            b"ERR Background save already in progress".to_vec(),
        ));
    }
    crate::persistence::snapshot::save(ctx.core)
        .map_err(|e| CmdError::Line(format!("ERR SAVE failed: {e}").into_bytes()))?;
    if ctx.core.topology().nodes.len() > 1 {
        ctx.core.broadcast(ConfigChange::Snapshot);
        ctx.gather = Some(Gather::AfterAll(Then::Reply(b"+OK\r\n".to_vec())));
    } else {
        reply.ok();
    }
    Ok(())
}

/// `SHUTDOWN [NOSAVE | SAVE] [NOW] [FORCE] [ABORT]`
/// (see `shutdown`: every shard saves or syncs its log first).
fn shutdown<S: Server + Leaving>(
    ctx: &mut Ctx<'_, S>,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> ServerResult {
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
    let shards = ctx.core.topology().nodes.len();
    // The busy shard cannot take part in an orderly exit: NOSAVE ends at once.
    match (0..shards).find_map(|s| ctx.core.shared().scripts().busy_error(s)) {
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
    let save = crate::persistence::shutdown::saves(ctx.core, has(b"save"), has(b"nosave"));
    crate::persistence::shutdown::begin(ctx.core, save);
    let force = has(b"force");
    if shards > 1 || !crate::persistence::shutdown::every_shard_prepared(ctx.core) {
        ctx.gather = Some(Gather::AfterAll(Then::Shutdown { force }));
    } else {
        reply.raw(&crate::persistence::shutdown::conclude(ctx.core, force));
    }
    Ok(())
}

/// `BGSAVE [SCHEDULE]`
fn bgsave<S: Server + Saving>(
    ctx: &mut Ctx<'_, S>,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> ServerResult {
    let schedule = match args.len() {
        1 => false,
        2 if args.get(1).eq_ignore_ascii_case(b"schedule") => true,
        _ => return Err(CmdError::Syntax),
    };
    if !ctx.core.has_log() {
        let started = b"+Background saving started\r\n";
        return dump_everywhere(ctx, reply, "BGSAVE", started);
    }
    let state = ctx.core.shared().background_save();
    if state.running_kind() == Some(Kind::Rdb) {
        return Err(line("ERR Background save already in progress"));
    }
    if state.running_kind().is_some() || ctx.client.in_exec {
        if !(schedule || ctx.client.in_exec) {
            return Err(line("ERR Another child process is active (AOF?): can't BGSAVE right now. Use BGSAVE SCHEDULE in order to schedule a BGSAVE whenever possible."));
        }
        state.schedule(Kind::Rdb);
        start_scheduled_now(ctx);
        reply.simple("Background saving scheduled");
        return Ok(());
    }
    match crate::persistence::snapshot::start(ctx.core, Kind::Rdb) {
        Start::Started => reply.simple("Background saving started"),
        // Another shard's client started one a moment ago.
        Start::SameRunning => return Err(line("ERR Background save already in progress")),
        Start::OtherRunning => {
            ctx.core.shared().background_save().schedule(Kind::Rdb);
            reply.simple("Background saving scheduled");
        }
    }
    Ok(())
}

/// `BGREWRITEAOF`: the log is rewritten as a snapshot of every shard (its older
/// segments are then deleted).
fn bgrewriteaof<S: Server + Saving>(
    ctx: &mut Ctx<'_, S>,
    _args: Args<'_>,
    reply: &mut Reply<'_>,
) -> ServerResult {
    needs_a_log(ctx, "BGREWRITEAOF")?;
    let state = ctx.core.shared().background_save();
    if state.running_kind() == Some(Kind::Aof) {
        return Err(line(
            "ERR Background append only file rewriting already in progress",
        ));
    }
    if state.running_kind().is_some() || ctx.client.in_exec {
        state.schedule(Kind::Aof);
        start_scheduled_now(ctx);
        reply.simple("Background append only file rewriting scheduled");
        return Ok(());
    }
    match crate::persistence::snapshot::start(ctx.core, Kind::Aof) {
        Start::Started => reply.simple("Background append only file rewriting started"),
        Start::SameRunning => {
            return Err(line(
                "ERR Background append only file rewriting already in progress",
            ))
        }
        Start::OtherRunning => {
            ctx.core.shared().background_save().schedule(Kind::Aof);
            reply.simple("Background append only file rewriting scheduled");
        }
    }
    Ok(())
}

/// Inside EXEC a save is scheduled, as in Redis (which cannot fork there); Ruvio
/// then starts it at once when none runs, since nothing stops it.
fn start_scheduled_now<S: Server + Saving>(ctx: &mut Ctx<'_, S>) {
    crate::persistence::snapshot::start_scheduled(ctx.core);
}

/// SAVE and BGSAVE without a log (`--durability memory`), as Redis with AOF off:
/// every shard's keys (both port modes: one process, one dump) into one RDB file
/// at `dir`/`dbfilename` that redis-server loads (see
/// [`crate::persistence::export`], the shards' parts by `Configured::write_dump_part`); each shard writes its part while it waits, as
/// Redis's SAVE blocks (BGSAVE too here: it answers once the file is complete, so
/// LASTSAVE has moved by the time a client hears "started"). A failure is
/// Redis's `-ERR` for a failed save and leaves the previous file in place.
fn dump_everywhere<S: Server>(
    ctx: &mut Ctx<'_, S>,
    reply: &mut Reply<'_>,
    command: &str,
    answer: &[u8],
) -> ServerResult {
    // The dump file of `--durability memory`: `dir`/`dbfilename`, as Redis's.
    let path = ctx
        .core
        .settings()
        .dir
        .join(ctx.core.settings().param("dbfilename"))
        .to_string_lossy()
        .into_owned();
    let shards = ctx.core.topology().nodes.len();
    if let Some(dir) = std::path::Path::new(&path).parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    crate::persistence::export::remove_parts(&path, shards);
    ctx.core
        .write_dump_part(&path)
        .map_err(|e| line(&format!("ERR {command} failed: {e}")))?;
    if shards > 1 {
        ctx.core.broadcast(ConfigChange::DumpPart(path.clone()));
        ctx.gather = Some(Gather::AfterAll(Then::Dump {
            path,
            answer: answer.to_vec(),
        }));
    } else {
        reply.raw(&ctx.core.finish_dump(&path, answer));
    }
    Ok(())
}

/// Snapshots live next to the log: without one (`--durability memory`) there is
/// nowhere to save.
fn needs_a_log<S: Server>(ctx: &Ctx<'_, S>, command: &str) -> ServerResult {
    if !ctx.core.has_log() {
        return Err(line(&format!(
            "ERR {command} failed: persistence is off (--durability memory)"
        )));
    }
    Ok(())
}

fn line(text: &str) -> CmdError {
    CmdError::Line(text.as_bytes().to_vec())
}
