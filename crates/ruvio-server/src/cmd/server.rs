//! Server commands that belong to no larger family: TIME.
//!
//! INFO, CONFIG, DEBUG and the persistence commands have their own modules
//! (`info`, `config`, `debug`, `persistence`).

use super::{Ctx, ServerCommand, ServerResult};
use ruvio_engine::command::{command, flags::*};
use ruvio_engine::KeySpec;
use ruvio_resp::{Args, Reply};

/// The server family's table.
#[rustfmt::skip]
pub const COMMANDS: &[ServerCommand] = &[
    command!("time", 1, LOADING | STALE | FAST, KeySpec::NONE, ["fast"], "server", "2.6.0",
        "Return the current server time", "O(1)", time),
];

/// `TIME`
fn time(_ctx: &mut Ctx<'_>, _args: Args<'_>, reply: &mut Reply<'_>) -> ServerResult {
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
