//! Background saves: BGSAVE and BGREWRITEAOF, answered as Redis answers them; the
//! work is [`crate::snapshot`] (a snapshot of every shard in time slices, no fork).
//! SAVE, LASTSAVE and INFO persistence are in `server`.

use super::{Ctx, ServerCommand, ServerResult};
use crate::snapshot::{Kind, Start};
use ruvio_engine::command::{command, flags::*};
use ruvio_engine::{CmdError, KeySpec};
use ruvio_resp::{Args, Reply};

/// The background-save family's table, with Redis 7's flags and ACL categories.
#[rustfmt::skip]
pub const COMMANDS: &[ServerCommand] = &[
    command!("bgsave", -1, ADMIN | NOSCRIPT | NO_ASYNC_LOADING, KeySpec::NONE, ["admin", "slow", "dangerous"],
        "server", "1.0.0", "Asynchronously saves the database(s) to disk.", "O(1)", bgsave),
    command!("bgrewriteaof", 1, ADMIN | NOSCRIPT | NO_ASYNC_LOADING, KeySpec::NONE, ["admin", "slow", "dangerous"],
        "server", "1.0.0", "Asynchronously rewrites the append-only file to disk.", "O(1)", bgrewriteaof),
];

/// `BGSAVE [SCHEDULE]`
fn bgsave(ctx: &mut Ctx<'_>, args: Args<'_>, reply: &mut Reply<'_>) -> ServerResult {
    let schedule = match args.len() {
        1 => false,
        2 if args.get(1).eq_ignore_ascii_case(b"schedule") => true,
        _ => return Err(CmdError::Syntax),
    };
    needs_a_log(ctx, "BGSAVE")?;
    let state = &ctx.core.shared.background_save;
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
    match crate::snapshot::start(ctx.core, Kind::Rdb) {
        Start::Started => reply.simple("Background saving started"),
        // Another shard's client started one a moment ago.
        Start::SameRunning => return Err(line("ERR Background save already in progress")),
        Start::OtherRunning => {
            ctx.core.shared.background_save.schedule(Kind::Rdb);
            reply.simple("Background saving scheduled");
        }
    }
    Ok(())
}

/// `BGREWRITEAOF`: the log is rewritten as a snapshot of every shard (its older
/// segments are then deleted).
fn bgrewriteaof(ctx: &mut Ctx<'_>, _args: Args<'_>, reply: &mut Reply<'_>) -> ServerResult {
    needs_a_log(ctx, "BGREWRITEAOF")?;
    let state = &ctx.core.shared.background_save;
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
    match crate::snapshot::start(ctx.core, Kind::Aof) {
        Start::Started => reply.simple("Background append only file rewriting started"),
        Start::SameRunning => {
            return Err(line(
                "ERR Background append only file rewriting already in progress",
            ))
        }
        Start::OtherRunning => {
            ctx.core.shared.background_save.schedule(Kind::Aof);
            reply.simple("Background append only file rewriting scheduled");
        }
    }
    Ok(())
}

/// Inside EXEC a save is scheduled, as in Redis (which cannot fork there); Ruvio
/// then starts it at once when none runs, since nothing stops it.
fn start_scheduled_now(ctx: &mut Ctx<'_>) {
    crate::snapshot::start_scheduled(ctx.core);
}

/// Snapshots live next to the log: without one (`--durability memory`) there is
/// nowhere to save.
fn needs_a_log(ctx: &Ctx<'_>, command: &str) -> ServerResult {
    if ctx.core.wal.is_none() {
        return Err(line(&format!(
            "ERR {command} failed: persistence is off (--durability memory)"
        )));
    }
    Ok(())
}

fn line(text: &str) -> CmdError {
    CmdError::Line(text.as_bytes().to_vec())
}
