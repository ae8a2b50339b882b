//! The refusals a command meets before it runs, in Redis's order, behind one
//! gate ([`needs_checks`]) that lets the usual call skip them all: the ACL check of
//! a restricted user (`-NOPERM`, the row worked out per command row in
//! `acl::check`), RESP2's subscribed mode, `-OOM` of a command that may grow
//! memory, and CLIENT PAUSE holding it. Apart from `dispatch` because each is a
//! question about the command and the client, not a step of running it.

use crate::cmd::registry::{registry, Command};
use crate::config::PortMode;
use crate::memory::limit;
use crate::net::conn::ClientState;
use crate::shard::ShardCore;
use ruvio_engine::command::flags::{ALLOW_BUSY, DENYOOM, LOADING, NO_AUTH};
use ruvio_engine::command::CommandTree;
use ruvio_engine::CmdError;
use ruvio_engine::CommandMeta;
use ruvio_resp::{Args, Protocol};

/// Whether a call must go through [`refusal`]: one test on the request path,
/// false for nearly every call of a running server. Each refusal (and the one
/// side effect, a script's `maxmemory` flag) has an input here that is set
/// whenever it could apply: the row (arity, a script call, EXEC), the client
/// (not authenticated, a restricted ACL user, RESP2 subscribed mode, MULTI),
/// the shard (loading, `maxmemory` set), the server (a replica, or writes
/// refused for want of replicas) and the node (a cluster node replicating its
/// master), those two but for the primary's stream, which they never refuse.
/// When it is true the checks run in Redis's order, exactly as they would
/// without the gate.
#[inline(always)]
pub(super) fn needs_checks(
    core: &ShardCore,
    client: &ClientState,
    cmd: &Command,
    args: Args<'_>,
) -> bool {
    let row = !cmd.meta.arity_ok(args.len()) | cmd.always_checked;
    let conn = !client.authenticated
        | client.acl.restricted
        | client.multi.is_some()
        | (client.proto == Protocol::Resp2 && client.subs.active());
    let replication = &core.shared.replication;
    let server = core.loading.refuses() | (core.cfg.maxmemory != 0);
    // Refusals the primary's own stream never meets (READONLY, NOREPLICAS, a
    // cluster replica's MOVED): on a replica every command of that stream
    // went through the whole chain for nothing.
    let replica = !client.master
        & (replication.is_replica()
            | replication.writes_refused()
            | super::node_replica::following(core));
    row | conn | server | replica
}

/// The refusal a call meets before it runs, in Redis's order (arity, NOAUTH,
/// NOPERM, LOADING, OOM, RESP2 subscribed mode, BUSY, then a replica's
/// READONLY or `min-replicas-to-write`'s NOREPLICAS), when [`needs_checks`]
/// said one may apply. Sets a script call's `maxmemory` flag first.
#[cold]
#[inline(never)]
pub(super) fn refusal(
    core: &mut ShardCore,
    client: &ClientState,
    cmd: &'static Command,
    resolved: &Result<&'static Command, CmdError>,
    args: Args<'_>,
) -> Option<CmdError> {
    if cmd.script_call {
        let over = core.cfg.maxmemory != 0 && limit::must_refuse(core);
        ruvio_engine::scripting::set_oom_at_start(over);
    }
    let row_meta = resolved.as_ref().map_or(cmd.meta, |sub| sub.meta);
    let rejected = if !cmd.meta.arity_ok(args.len()) {
        Some(CmdError::WrongArity(cmd.meta.name))
    } else if !client.authenticated && !cmd.meta.has(NO_AUTH) && core.shared.acl.auth_required() {
        Some(CmdError::NoAuth)
    } else if let Some((row, denied)) = acl_refusal(core, client, resolved, args) {
        // A command the user may run goes on to the checks below.
        Some(acl_denied(core, client, row, args, denied))
    } else if core.loading.refuses() && !row_meta.has(LOADING) {
        Some(CmdError::Line(
            crate::persistence::loading::LOADING_ERROR.to_vec(),
        ))
    } else if core.cfg.maxmemory != 0 && denies_oom(cmd, args) && limit::must_refuse(core) {
        Some(CmdError::Oom)
    } else if client.proto == Protocol::Resp2 && client.subs.active() {
        subscribed_mode_refusal(cmd, args)
    } else if (client.multi.is_some() || cmd.meta.name == "exec") && !cmd.meta.has(ALLOW_BUSY) {
        // Redis refuses a command with -BUSY before queueing it (EXEC aborts,
        // in MULTI or not).
        core.shared.scripts.busy_elsewhere(core.id)
    } else {
        None
    };
    let rejected = match rejected {
        // A cluster replica first: its keyed commands go on to `-MOVED`.
        None if !client.master && super::node_replica::following(core) => {
            super::node_replica::refusal(core, row_meta, args)
        }
        None if core.shared.replication.is_replica() && !client.master => {
            let link_up = core.shared.replication.link_up();
            crate::replication::refusal(link_up, &core.cfg, row_meta, args)
        }
        None if core.shared.replication.writes_refused() && !client.master => {
            // Set while any history refuses: this shard's own decides.
            let state = &core.shared.replication;
            state
                .history(core.id, core.cfg.port_mode)
                .writes_refused()
                .then(|| crate::replication::too_few_replicas(row_meta, args))
                .flatten()
        }
        rejected => rejected,
    };
    if rejected.is_none() && client.multi.is_some() && core.topo.mode == PortMode::Forward {
        // A forward-mode node: a queued command of another node's slot is
        // redirected now, and EXEC aborts (Redis's `flagTransaction`).
        let row = resolved.as_ref().map_or(cmd, |sub| *sub);
        return super::node_replica::queued_refusal(core, client, row, args);
    }
    rejected
}

/// The command (or its subcommand) may grow memory: refused past `maxmemory`.
/// A script's or function's flags decide for EVAL and FCALL, as Redis 7's
/// `evalGetCommandFlags`: with a shebang, refused unless `allow-oom` or
/// `no-writes`.
pub(super) fn denies_oom(cmd: &Command, args: Args<'_>) -> bool {
    match cmd.meta.name {
        "eval" | "evalsha" | "eval_ro" | "evalsha_ro" => ruvio_engine::scripting::denies_oom(args),
        "fcall" | "fcall_ro" => ruvio_engine::scripting::functions::denies_oom(args),
        _ => flags_row(cmd, args).has(DENYOOM),
    }
}

/// The row whose flags govern this call: the subcommand's, or the container's when
/// the subcommand is unknown (that error comes later, from `resolve`).
pub(super) fn flags_row<'a>(cmd: &'a Command, args: Args<'_>) -> &'a CommandMeta {
    cmd.resolve(args).map_or(cmd.meta, |sub| sub.meta)
}

/// Why the client's ACL user may not run this call, when it is restricted
/// ([`acl_denied`] makes the `-NOPERM` error and the ACL LOG entry). Redis
/// checks right after authentication, before routing, so a command for another
/// shard is checked here too. An unknown subcommand passes: its own error comes
/// later. Answers only a small value: [`acl_denied`] builds the error.
fn acl_refusal<'r>(
    core: &mut ShardCore,
    client: &ClientState,
    resolved: &Result<&'r Command, CmdError>,
    args: Args<'_>,
) -> Option<(&'r Command, crate::acl::check::Denied)> {
    if !client.acl.restricted {
        return None;
    }
    let Ok(row) = *resolved else {
        return None;
    };
    let Err(denied) = crate::acl::check::check_row(&client.acl.user, &row.acl, row.meta, args)
    else {
        // Noted once per session (a flag of the row, set when the table was
        // built, rather than name tests per request).
        if row.notes_script_caller && !client.acl.script_caller_noted.get() {
            // It may run on another shard: the user goes with the client's id.
            let info = || crate::cmd::client::info_line(core, client);
            core.shared
                .acl
                .note_script_caller(client.id, &client.acl, info);
        }
        return None;
    };
    Some((row, denied))
}

/// A refused call's ACL LOG entry and `-NOPERM` error.
#[cold]
#[inline(never)]
fn acl_denied(
    core: &mut ShardCore,
    client: &ClientState,
    row: &Command,
    args: Args<'_>,
    denied: crate::acl::check::Denied,
) -> CmdError {
    let object = match denied {
        crate::acl::check::Denied::Command => row.meta.name.as_bytes(),
        crate::acl::check::Denied::Key(i) | crate::acl::check::Denied::Channel(i) => args.get(i),
    };
    let entry = crate::acl::log::Entry {
        count: 1,
        reason: denied.log_reason(),
        context: if client.multi.is_some() || client.in_exec {
            "multi"
        } else {
            "toplevel"
        },
        object: object.to_vec(),
        username: client.acl.name().to_vec(),
        at_ms: crate::clock::unix_ms(),
        client_info: crate::cmd::client::info_line(core, client),
    };
    core.shared.acl.log(entry);
    CmdError::Line(match client.in_exec {
        true => denied.noperm_at_exec_line(),
        false => denied.noperm_line(row.meta.name),
    })
}

/// RESP2 subscribed mode: Redis' error for a command other than (un)subscribing,
/// PING, QUIT and RESET, named as the (sub)command it resolves to.
pub(super) fn subscribed_mode_refusal(cmd: &Command, args: Args<'_>) -> Option<CmdError> {
    let name = flags_row(cmd, args).name;
    let allowed = crate::cmd::pubsub::allowed_while_subscribed(name);
    (!allowed).then(|| crate::cmd::pubsub::not_allowed_while_subscribed(name))
}

/// A command CLIENT PAUSE holds back now (unknown commands and arity errors are
/// answered at once, as Redis rejects them before it looks at the pause).
pub(super) fn waits_for_pause(core: &ShardCore, args: Args<'_>) -> bool {
    let Some(cmd) = registry().lookup(args.get(0)) else {
        return false;
    };
    if !cmd.meta.arity_ok(args.len()) {
        return false;
    }
    core.pause.holds(flags_row(cmd, args), core.now_ms)
}
