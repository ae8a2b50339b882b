//! Server commands that belong to no larger family: TIME, MONITOR.
//!
//! INFO, CONFIG, DEBUG and the persistence commands have their own modules
//! (`info`, `config`, `debug`, `persistence`).

use super::{Ctx, Server, ServerCommand, ServerResult};
use ruvio_engine::command::{command, flags::*};
use ruvio_engine::{CmdError, KeySpec};
use ruvio_resp::{Args, Reply};

/// The server family's table.
#[rustfmt::skip]
pub const COMMANDS: &[ServerCommand] = &[
    command!("time", 1, LOADING | STALE | FAST, KeySpec::NONE, ["fast"], "server", "2.6.0",
        "Return the current server time", "O(1)", time),
    command!("monitor", 1, ADMIN | NOSCRIPT | LOADING | STALE, KeySpec::NONE,
        ["admin", "slow", "dangerous"], "server", "1.0.0",
        "Listen for all requests received by the server in real time", "", monitor),
];

/// `MONITOR`: from now on the connection receives a line for each command the
/// server runs (see `observability::monitor`). A client already monitoring gets
/// no reply, as from Redis.
fn monitor<S: Server>(
    ctx: &mut Ctx<'_, S>,
    _args: Args<'_>,
    reply: &mut Reply<'_>,
) -> ServerResult {
    if ctx.client.in_exec {
        // Redis marks a transaction's client as one that must not block.
        return Err(CmdError::Line(
            b"ERR MONITOR isn't allowed for DENY BLOCKING client".to_vec(),
        ));
    }
    if ctx.client.monitor {
        return Ok(());
    }
    ctx.client.monitor = true;
    ctx.core.attach_monitor(ctx.who);
    reply.ok();
    Ok(())
}

/// `TIME`
fn time<S: Server>(_ctx: &mut Ctx<'_, S>, _args: Args<'_>, reply: &mut Reply<'_>) -> ServerResult {
    time_reply(reply);
    Ok(())
}

/// TIME's reply: seconds and microseconds since the epoch, as two bulk strings.
pub(crate) fn time_reply(reply: &mut Reply<'_>) {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    reply.array(2);
    reply.bulk(now.as_secs().to_string().as_bytes());
    reply.bulk(now.subsec_micros().to_string().as_bytes());
}
