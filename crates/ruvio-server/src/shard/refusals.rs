//! The refusals a command meets before it runs, in Redis's order: the ACL check of
//! a restricted user (`-NOPERM`, the row worked out per command row in
//! `acl::check`), RESP2's subscribed mode, `-OOM` of a command that may grow
//! memory, and CLIENT PAUSE holding it. Apart from `dispatch` because each is a
//! question about the command and the client, not a step of running it.

use crate::cmd::registry::{registry, Command};
use crate::net::conn::ClientState;
use crate::shard::ShardCore;
use ruvio_engine::command::flags::DENYOOM;
use ruvio_engine::command::CommandTree;
use ruvio_engine::CmdError;
use ruvio_engine::CommandMeta;
use ruvio_resp::Args;

/// EVAL, EVALSHA, FCALL and their read-only forms.
pub(super) fn is_script_call(cmd: &Command) -> bool {
    matches!(
        cmd.meta.name,
        "eval" | "evalsha" | "eval_ro" | "evalsha_ro" | "fcall" | "fcall_ro"
    )
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
/// later. Inlined into the request path, answering only a small value (the
/// error built here cost the allowed calls its moves).
#[inline(always)]
pub(super) fn acl_refusal<'r>(
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
pub(super) fn acl_denied(
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
