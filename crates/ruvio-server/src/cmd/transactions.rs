//! Transactions: MULTI, EXEC, DISCARD, WATCH, UNWATCH. The state is
//! [`crate::transactions::multi`], the running of queued commands the shard's
//! (`shard/multi.rs`, `shard/exec_run.rs`); watched keys are [`crate::transactions::watch`].

use super::{Ctx, Server, ServerCommand, ServerResult};
use ruvio_engine::command::{command, flags::*};
use ruvio_engine::KeySpec;
use ruvio_resp::{Args, Reply};

/// The transaction family's table, with Redis 7's flags and ACL categories.
#[rustfmt::skip]
pub const COMMANDS: &[ServerCommand] = &[
    command!("multi", 1, NOSCRIPT | LOADING | STALE | FAST | ALLOW_BUSY, KeySpec::NONE,
        ["fast", "transaction"], "transactions", "1.2.0", "Mark the start of a transaction block", "O(1)", multi),
    command!("exec", 1, NOSCRIPT | LOADING | STALE | SKIP_SLOWLOG, KeySpec::NONE, ["slow", "transaction"],
        "transactions", "1.2.0", "Execute all commands issued after MULTI",
        "Depends on commands in the transaction", run_by_dispatcher),
    command!("discard", 1, NOSCRIPT | LOADING | STALE | FAST | ALLOW_BUSY, KeySpec::NONE,
        ["fast", "transaction"], "transactions", "2.0.0", "Discard all commands issued after MULTI",
        "O(N), when N is the number of queued commands", discard),
    command!("watch", -2, NOSCRIPT | LOADING | STALE | FAST | ALLOW_BUSY, KeySpec::ALL,
        ["fast", "transaction"], "transactions", "2.2.0",
        "Watch the given keys to determine execution of the MULTI/EXEC block", "O(1) for every key.",
        run_by_dispatcher),
    command!("unwatch", 1, NOSCRIPT | LOADING | STALE | FAST | ALLOW_BUSY, KeySpec::NONE,
        ["fast", "transaction"], "transactions", "2.2.0",
        "Forget about all watched keys", "O(1)", unwatch),
];

/// `MULTI`
fn multi<S: Server>(ctx: &mut Ctx<'_, S>, _args: Args<'_>, reply: &mut Reply<'_>) -> ServerResult {
    crate::transactions::multi::multi(ctx.client)?;
    reply.ok();
    Ok(())
}

/// `DISCARD`
fn discard<S: Server>(
    ctx: &mut Ctx<'_, S>,
    _args: Args<'_>,
    reply: &mut Reply<'_>,
) -> ServerResult {
    ctx.core.discard(ctx.client)?;
    reply.ok();
    Ok(())
}

/// `UNWATCH`
fn unwatch<S: Server>(
    ctx: &mut Ctx<'_, S>,
    _args: Args<'_>,
    reply: &mut Reply<'_>,
) -> ServerResult {
    ctx.core.unwatch(ctx.client);
    reply.ok();
    Ok(())
}

/// EXEC and WATCH answer through the reply queue (a held slot while other shards
/// work): the dispatcher runs them (`shard::multi::exec`, `shard::multi::watch_keys`).
fn run_by_dispatcher<S: Server>(
    _ctx: &mut Ctx<'_, S>,
    args: Args<'_>,
    _reply: &mut Reply<'_>,
) -> ServerResult {
    unreachable!(
        "{} is run by the dispatcher",
        String::from_utf8_lossy(args.get(0))
    )
}
