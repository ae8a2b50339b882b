//! The replication commands: REPLICAOF (and its old name SLAVEOF), ROLE and
//! REPLCONF, with Redis 7.0's arity, flags and replies. They read and change
//! `replication::State`; shard 0 acts on it (see `replication`).

use super::{Ctx, ServerCommand, ServerResult};
use ruvio_engine::command::{command, flags::*};
use ruvio_engine::{CmdError, KeySpec};
use ruvio_resp::{Args, Reply};

/// The replication family's table.
#[rustfmt::skip]
pub const COMMANDS: &[ServerCommand] = &[
    command!("replicaof", 3, ADMIN | NOSCRIPT | STALE | NO_ASYNC_LOADING, KeySpec::NONE,
        ["admin", "slow", "dangerous"], "server", "5.0.0",
        "Make the server a replica of another instance, or promote it as master.", "O(1)", replicaof),
    command!("slaveof", 3, ADMIN | NOSCRIPT | STALE | NO_ASYNC_LOADING, KeySpec::NONE,
        ["admin", "slow", "dangerous"], "server", "1.0.0",
        "Make the server a replica of another instance, or promote it as master.", "O(1)", replicaof),
    command!("role", 1, NOSCRIPT | LOADING | STALE | FAST, KeySpec::NONE,
        ["admin", "fast", "dangerous"], "server", "2.8.12",
        "Return the role of the instance in the context of replication", "O(1)", role),
    command!("replconf", -1, ADMIN | NOSCRIPT | LOADING | STALE | ALLOW_BUSY, KeySpec::NONE,
        ["admin", "slow", "dangerous"], "server", "3.0.0",
        "An internal command for configuring the replication stream", "O(1)", replconf),
];

/// `REPLICAOF host port` / `REPLICAOF NO ONE` (and SLAVEOF): follow a primary, or
/// become one keeping the data. Not with a log yet: Ruvio's own error says so. Per-shard mode is a
/// cluster (`cluster_enabled:1`), where Redis refuses it.
fn replicaof(ctx: &mut Ctx<'_>, args: Args<'_>, reply: &mut Reply<'_>) -> ServerResult {
    if ctx.core.cfg.port_mode == crate::config::PortMode::PerShard {
        return Err(CmdError::Line(
            b"ERR REPLICAOF not allowed in cluster mode.".to_vec(),
        ));
    }
    let state = &ctx.core.shared.replication;
    let (host, port) = (args.get(1), args.get(2));
    if host.eq_ignore_ascii_case(b"no") && port.eq_ignore_ascii_case(b"one") {
        if state.promote() {
            crate::serverlog::log(
                crate::serverlog::Level::Notice,
                "MASTER MODE enabled (user request)",
            );
        }
        reply.ok();
        return Ok(());
    }
    if ctx.core.cfg.durability.logs() {
        // The primary's data would replace the keyspace under the log, which would
        // then replay onto the wrong base at the next start (docs/replication.md).
        return Err(CmdError::Line(
            b"ERR REPLICAOF with --durability everysec or always is not supported yet".to_vec(),
        ));
    }
    let port = super::parse_i64(port)
        .and_then(|p| u16::try_from(p).ok())
        .ok_or_else(|| CmdError::Line(b"ERR Invalid master port".to_vec()))?;
    let host = String::from_utf8_lossy(host).into_owned();
    if !state.follow(&host, port) {
        reply.simple("OK Already connected to specified master");
        return Ok(());
    }
    crate::serverlog::log(
        crate::serverlog::Level::Notice,
        &format!("REPLICAOF {host}:{port} enabled (user request)"),
    );
    reply.ok();
    Ok(())
}

/// `ROLE`
fn role(ctx: &mut Ctx<'_>, _args: Args<'_>, reply: &mut Reply<'_>) -> ServerResult {
    crate::replication::role(&ctx.core.shared.replication, reply);
    Ok(())
}

/// `REPLCONF option value [option value ...]`: from the primary's stream, GETACK
/// is answered with `REPLCONF ACK <offset>` (the one reply the master client
/// gets, written as a push so its silenced replies do not drop it). Ruvio has no
/// replicas of its own yet: the options a replica sends answer `+OK` as Redis's
/// do, ACK answers nothing.
fn replconf(ctx: &mut Ctx<'_>, args: Args<'_>, reply: &mut Reply<'_>) -> ServerResult {
    if args.len().is_multiple_of(2) {
        return Err(CmdError::Syntax);
    }
    let mut i = 1;
    while i < args.len() {
        let option = args.get(i);
        let known = [&b"listening-port"[..], b"ip-address", b"capa", b"rdb-only"];
        if option.eq_ignore_ascii_case(b"ack") {
            return Ok(());
        }
        if option.eq_ignore_ascii_case(b"getack") {
            if ctx.client.master {
                let offset = ctx.core.shared.replication.offset();
                let ack = crate::replication::ack_command(offset);
                ctx.client.pushes.extend_from_slice(&ack);
            }
            return Ok(());
        }
        if !known.iter().any(|k| option.eq_ignore_ascii_case(k)) {
            let option = String::from_utf8_lossy(option);
            return Err(CmdError::Line(
                format!("ERR Unrecognized REPLCONF option: {option}").into_bytes(),
            ));
        }
        i += 2;
    }
    reply.ok();
    Ok(())
}
