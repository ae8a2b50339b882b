//! COMMAND and its subcommands (COUNT, INFO, DOCS, GETKEYS, LIST, HELP), all
//! answered from the command table.

use super::{Ctx, ServerCommand, ServerResult};
use crate::cmd::registry::{registry, Command};
use ruvio_engine::command::CommandTree;
use ruvio_engine::command::{command, flags, reply_help};
use ruvio_engine::{CmdError, KeySpec};
use ruvio_resp::{Args, Reply};

/// The introspection family's table.
#[rustfmt::skip]
pub const COMMANDS: &[ServerCommand] = &[
    command!("command", -1, flags::LOADING | flags::STALE, KeySpec::NONE, ["slow", "connection"], "server",
        "2.8.13", "Returns detailed information about all commands.",
        "O(N) where N is the total number of Redis commands", all, subcommands = SUBCOMMANDS),
];

/// The flags every COMMAND subcommand has.
const SUB_FLAGS: u32 = flags::LOADING | flags::STALE;

/// COMMAND's subcommands, with Redis' arity, flags and ACL categories.
#[rustfmt::skip]
const SUBCOMMANDS: &[ServerCommand] = &[
    command!("command|count", 2, SUB_FLAGS, KeySpec::NONE, ["slow", "connection"], "server", "2.8.13",
        "Get total number of Redis commands", "O(1)", count),
    command!("command|info", -2, SUB_FLAGS, KeySpec::NONE, ["slow", "connection"], "server", "2.8.13",
        "Get array of specific Redis command details, or all when no argument is given.",
        "O(N) where N is the number of commands to look up", info),
    command!("command|docs", -2, SUB_FLAGS, KeySpec::NONE, ["slow", "connection"], "server", "7.0.0",
        "Get array of specific Redis command documentation", "O(N) where N is the number of commands to look up",
        docs),
    command!("command|getkeys", -4, SUB_FLAGS, KeySpec::NONE, ["slow", "connection"], "server", "2.8.13",
        "Extract keys given a full Redis command", "O(N) where N is the number of arguments to the command",
        getkeys),
    command!("command|list", -2, SUB_FLAGS, KeySpec::NONE, ["slow", "connection"], "server", "7.0.0",
        "Get an array of Redis command names", "O(N) where N is the total number of Redis commands", list),
    command!("command|help", 2, SUB_FLAGS, KeySpec::NONE, ["slow", "connection"], "server", "5.0.0",
        "Show helpful text about the different subcommands", "O(1)", help),
];

/// `COMMAND` (no subcommand): the INFO of every command.
fn all(_ctx: &mut Ctx<'_>, _args: Args<'_>, reply: &mut Reply<'_>) -> ServerResult {
    reply_all_info(reply);
    Ok(())
}

/// `COMMAND COUNT`
fn count(_ctx: &mut Ctx<'_>, _args: Args<'_>, reply: &mut Reply<'_>) -> ServerResult {
    reply.int(registry().commands.len() as i64);
    Ok(())
}

/// The INFO of every command, in table order.
fn reply_all_info(reply: &mut Reply<'_>) {
    let all = &registry().commands;
    reply.array(all.len());
    all.iter().for_each(|c| reply_info(reply, c));
}

/// The ten-element description COMMAND INFO gives of one command.
fn reply_info(reply: &mut Reply<'_>, cmd: &Command) {
    let m = cmd.meta;
    reply.array(10);
    reply.bulk(m.name.as_bytes());
    reply.int(m.arity as i64);
    let mut names: Vec<&str> = flags::NAMES
        .iter()
        .filter(|(f, _)| m.has(*f))
        .map(|&(_, n)| n)
        .collect();
    if m.keys.is_movable() {
        names.push("movablekeys");
    }
    reply.set(names.len());
    names.iter().for_each(|n| reply.simple(n));
    let (first, last, step) = m.keys.legacy_range();
    reply.int(first as i64);
    reply.int(last as i64);
    reply.int(step as i64);
    reply.set(m.acl.len());
    m.acl.iter().for_each(|c| reply.simple(&format!("@{c}")));
    reply.array(0);
    reply.array(0);
    reply.array(0);
}

/// `COMMAND INFO [name ...]`: unknown names answer null.
fn info(_ctx: &mut Ctx<'_>, args: Args<'_>, reply: &mut Reply<'_>) -> ServerResult {
    if args.len() == 2 {
        reply_all_info(reply);
        return Ok(());
    }
    reply.array(args.len() - 2);
    for name in args.iter().skip(2) {
        match registry().lookup(name) {
            Some(c) => reply_info(reply, c),
            None => reply.null_array(),
        }
    }
    Ok(())
}

/// `COMMAND DOCS [name ...]`: a map of name to its documentation.
fn docs(_ctx: &mut Ctx<'_>, args: Args<'_>, reply: &mut Reply<'_>) -> ServerResult {
    let selected: Vec<&Command> = if args.len() == 2 {
        registry().commands.iter().collect()
    } else {
        args.iter()
            .skip(2)
            .filter_map(|n| registry().lookup(n))
            .collect()
    };
    reply.map(selected.len());
    for c in selected {
        reply.bulk(c.meta.name.as_bytes());
        reply.map(4);
        reply.bulk(b"summary");
        reply.bulk(c.meta.summary.as_bytes());
        reply.bulk(b"since");
        reply.bulk(c.meta.since.as_bytes());
        reply.bulk(b"group");
        reply.bulk(c.meta.group.as_bytes());
        reply.bulk(b"complexity");
        reply.bulk(c.meta.complexity.as_bytes());
    }
    Ok(())
}

/// `COMMAND GETKEYS command [arg ...]`
fn getkeys(_ctx: &mut Ctx<'_>, args: Args<'_>, reply: &mut Reply<'_>) -> ServerResult {
    let cmd = registry()
        .lookup(args.get(2))
        .ok_or(CmdError::GetKeysUnknownCommand)?;
    if !cmd.meta.arity_ok(args.len() - 2) {
        return Err(CmdError::GetKeysWrongArity);
    }
    // A container's keys are its subcommand's (OBJECT ENCODING key).
    let cmd = cmd.resolve(args.tail(2)).map_err(|e| match e {
        CmdError::WrongArity(_) => CmdError::GetKeysWrongArity,
        _ => CmdError::GetKeysUnknownCommand,
    })?;
    let keys = cmd.meta.keys.positions(args.tail(2));
    if keys.is_empty() && cmd.meta.keys.is_movable() {
        return Err(CmdError::GetKeysInvalidArgs);
    }
    // Shard channels have key specs for routing only (Redis flags them NOT_KEY):
    // they are no keys.
    if keys.is_empty() || cmd.meta.has(flags::PUBSUB) {
        return Err(CmdError::GetKeysNoKeys);
    }
    reply.array(keys.len());
    keys.iter().for_each(|&p| reply.bulk(args.get(p + 2)));
    Ok(())
}

/// `COMMAND LIST [FILTERBY MODULE name | ACLCAT category | PATTERN pattern]`: every
/// command and subcommand the filter keeps.
fn list(_ctx: &mut Ctx<'_>, args: Args<'_>, reply: &mut Reply<'_>) -> ServerResult {
    let filter: Box<dyn Fn(&Command) -> bool> = match args.len() {
        2 => Box::new(|_| true),
        5 if args.get(2).eq_ignore_ascii_case(b"filterby") => {
            let (kind, value) = (
                args.get(3).to_ascii_lowercase(),
                args.get(4).to_ascii_lowercase(),
            );
            match kind.as_slice() {
                b"module" => Box::new(|_| false),
                b"aclcat" => {
                    Box::new(move |c| c.meta.acl.iter().any(|a| a.as_bytes() == value.as_slice()))
                }
                b"pattern" => {
                    Box::new(move |c| ruvio_engine::glob_match(&value, c.meta.name.as_bytes()))
                }
                _ => return Err(CmdError::Syntax),
            }
        }
        _ => return Err(CmdError::Syntax),
    };
    // Subcommands by their full names (`client|list`), as Redis 7.0 lists them;
    // DEBUG's are not in Redis' table, so not listed.
    let names: Vec<&str> = registry()
        .commands
        .iter()
        .flat_map(|c| {
            let listed = !c.meta.has(flags::SUBCOMMANDS_UNLISTED);
            std::iter::once(c).chain(c.subcommands.iter().filter(move |_| listed))
        })
        .filter(|c| filter(c))
        .map(|c| c.meta.name)
        .collect();
    reply.array(names.len());
    names.iter().for_each(|n| reply.bulk(n.as_bytes()));
    Ok(())
}

fn help(_ctx: &mut Ctx<'_>, _args: Args<'_>, reply: &mut Reply<'_>) -> ServerResult {
    reply_help(
        reply,
        b"command",
        &[
            "(no subcommand)",
            "    Return details about all Redis commands.",
            "COUNT",
            "    Return the total number of commands in this Redis server.",
            "LIST",
            "    Return a list of all commands in this Redis server.",
            "INFO [<command-name> ...]",
            "    Return details about multiple Redis commands.",
            "DOCS [<command-name> ...]",
            "    Return documentation details about multiple Redis commands.",
            "GETKEYS <full-command>",
            "    Return the keys from a full Redis command.",
        ],
    );
    Ok(())
}
