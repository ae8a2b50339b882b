//! COMMAND and its subcommands (COUNT, INFO, DOCS, GETKEYS, GETKEYSANDFLAGS, LIST,
//! HELP), all answered from the command table: the rows give name, arity, flags,
//! key positions, ACL categories, summary, since, group, complexity and
//! subcommands; `ruvio_engine::command::docs` gives what Redis publishes beyond
//! them (key specs, tips, doc flags, history, arguments), joined here by full
//! name. Only COMMAND reads that table, so it is parsed on the first COMMAND call
//! and costs other commands nothing.

use super::{Ctx, Server, ServerCommand, ServerResult};
use crate::cmd::registry::{registry, Command};
use ruvio_engine::command::docs::{self, Typed};
use ruvio_engine::command::CommandTree;
use ruvio_engine::command::{command, flags};
use ruvio_engine::{CmdError, KeySpec};
use ruvio_resp::{Args, Reply};

/// The introspection family's table.
#[rustfmt::skip]
pub const COMMANDS: &[ServerCommand] = &[
    command!("command", -1, flags::LOADING | flags::STALE, KeySpec::NONE, ["slow", "connection"], "server",
        "2.8.13", "Get array of Redis command details",
        "O(N) where N is the total number of Redis commands", all, subcommands = SUBCOMMANDS),
];

/// Redis 7.0's ACL categories in the order it lists them (`ACL CAT`, and a
/// command's categories in COMMAND INFO).
const ACL_CATEGORIES: &[&str] = &[
    "keyspace",
    "read",
    "write",
    "set",
    "sortedset",
    "list",
    "hash",
    "string",
    "bitmap",
    "hyperloglog",
    "geo",
    "stream",
    "pubsub",
    "admin",
    "fast",
    "slow",
    "blocking",
    "dangerous",
    "connection",
    "transaction",
    "scripting",
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
    command!("command|getkeysandflags", -4, SUB_FLAGS, KeySpec::NONE, ["slow", "connection"], "server",
        "7.0.0", "Extract keys and access flags given a full Redis command",
        "O(N) where N is the number of arguments to the command", getkeysandflags),
    command!("command|list", -2, SUB_FLAGS, KeySpec::NONE, ["slow", "connection"], "server", "7.0.0",
        "Get an array of Redis command names", "O(N) where N is the total number of Redis commands", list),
    command!("command|help", 2, SUB_FLAGS, KeySpec::NONE, ["slow", "connection"], "server", "5.0.0",
        "Show helpful text about the different subcommands", "O(1)", help),
];

/// `COMMAND` (no subcommand): the INFO of every command.
fn all<S: Server>(_ctx: &mut Ctx<'_, S>, _args: Args<'_>, reply: &mut Reply<'_>) -> ServerResult {
    reply_all_info(reply);
    Ok(())
}

/// `COMMAND COUNT`
fn count<S: Server>(_ctx: &mut Ctx<'_, S>, _args: Args<'_>, reply: &mut Reply<'_>) -> ServerResult {
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
        // Redis lists it just before allow_busy, its last flag.
        let at = names.len() - usize::from(m.has(flags::ALLOW_BUSY));
        names.insert(at, "movablekeys");
    }
    reply.set(names.len());
    names.iter().for_each(|n| reply.simple(n));
    let (first, last, step) = m.keys.legacy_range();
    reply.int(first as i64);
    reply.int(last as i64);
    reply.int(step as i64);
    // In Redis' category order (ACL CAT), whatever the row's order.
    let mut categories = m.acl.to_vec();
    categories.sort_by_key(|c| ACL_CATEGORIES.iter().position(|known| known == c));
    reply.set(categories.len());
    categories
        .iter()
        .for_each(|c| reply.simple(&format!("@{c}")));
    match docs::lookup(m.name) {
        Some(d) => {
            d.tips.write(reply);
            d.key_specs.write(reply);
        }
        None => {
            reply.set(0);
            reply.set(0);
        }
    }
    let subcommands = listed_subcommands(cmd);
    if subcommands.is_empty() {
        reply.set(0);
    } else {
        reply.array(subcommands.len());
        subcommands.iter().for_each(|s| reply_info(reply, s));
    }
}

/// The subcommands COMMAND shows: DEBUG's are not in Redis' table, so none.
fn listed_subcommands(cmd: &Command) -> &[Command] {
    if cmd.meta.has(flags::SUBCOMMANDS_UNLISTED) {
        &[]
    } else {
        &cmd.subcommands
    }
}

/// A command or subcommand by its full name (`get`, `CONFIG|GET`), as Redis 7's
/// `lookupCommandBySds`: more than one `|` names nothing.
fn find(full_name: &[u8]) -> Option<&'static Command> {
    let mut parts = full_name.split(|&b| b == b'|');
    let container = registry().lookup(parts.next()?)?;
    let Some(sub) = parts.next() else {
        return Some(container);
    };
    if parts.next().is_some() {
        return None;
    }
    listed_subcommands(container)
        .iter()
        .find(|s| sub.eq_ignore_ascii_case(s.meta.subcommand_name().as_bytes()))
}

/// `COMMAND INFO [name ...]`: unknown names answer a null bulk string.
fn info<S: Server>(_ctx: &mut Ctx<'_, S>, args: Args<'_>, reply: &mut Reply<'_>) -> ServerResult {
    if args.len() == 2 {
        reply_all_info(reply);
        return Ok(());
    }
    reply.array(args.len() - 2);
    for name in args.iter().skip(2) {
        match find(name) {
            Some(c) => reply_info(reply, c),
            // Redis' addReplyNull: `$-1` under RESP2.
            None => reply.null(),
        }
    }
    Ok(())
}

/// `COMMAND DOCS [name ...]`: a map of name to its documentation; unknown names
/// are left out.
fn docs<S: Server>(_ctx: &mut Ctx<'_, S>, args: Args<'_>, reply: &mut Reply<'_>) -> ServerResult {
    let selected: Vec<&Command> = if args.len() == 2 {
        registry().commands.iter().collect()
    } else {
        args.iter().skip(2).filter_map(find).collect()
    };
    reply.map(selected.len());
    for c in selected {
        reply.bulk(c.meta.name.as_bytes());
        reply_docs(reply, c);
    }
    Ok(())
}

/// One command's COMMAND DOCS map: the row's summary, since, group and
/// complexity (none for a command whose row has none, as MONITOR in Redis), the
/// docs table's fields, then the subcommands' maps.
fn reply_docs(reply: &mut Reply<'_>, cmd: &Command) {
    let m = cmd.meta;
    let extra: &[(Typed, Typed)] = docs::lookup(m.name).map_or(&[], |d| &d.docs);
    let subcommands = listed_subcommands(cmd);
    let fields = [
        ("summary", m.summary),
        ("since", m.since),
        ("group", m.group),
        ("complexity", m.complexity),
    ];
    let shown = fields.iter().filter(|(_, value)| !value.is_empty());
    reply.map(shown.clone().count() + extra.len() + usize::from(!subcommands.is_empty()));
    for (field, value) in shown {
        reply.bulk(field.as_bytes());
        reply.bulk(value.as_bytes());
    }
    for (field, value) in extra {
        field.write(reply);
        value.write(reply);
    }
    if !subcommands.is_empty() {
        reply.bulk(b"subcommands");
        reply.map(subcommands.len());
        for sub in subcommands {
            reply.bulk(sub.meta.name.as_bytes());
            reply_docs(reply, sub);
        }
    }
}

/// `COMMAND GETKEYS command [arg ...]`
fn getkeys<S: Server>(
    _ctx: &mut Ctx<'_, S>,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> ServerResult {
    let (_, keys) = keys_of_call(args)?;
    reply.array(keys.len());
    keys.iter().for_each(|&p| reply.bulk(args.get(p + 2)));
    Ok(())
}

/// `COMMAND GETKEYSANDFLAGS command [arg ...]`: each key with its key spec's
/// flags (`RW`, `access` ...).
fn getkeysandflags<S: Server>(
    _ctx: &mut Ctx<'_, S>,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> ServerResult {
    let (cmd, keys) = keys_of_call(args)?;
    let call = args.tail(2);
    let entry = docs::lookup(cmd.meta.name);
    reply.array(keys.len());
    for &p in &keys {
        reply.array(2);
        reply.bulk(args.get(p + 2));
        let key_flags = entry.map_or(Vec::new(), |d| d.key_flags(cmd.meta.name, call, p));
        reply.set(key_flags.len());
        key_flags.iter().for_each(|f| reply.simple(f));
    }
    Ok(())
}

/// The row a `COMMAND GETKEYS*` call names and the positions of its keys in the
/// call (`args` from 2): the ones routing uses ([`KeySpec::positions`]), so
/// what COMMAND reports is what Ruvio routes by. Redis' errors for an unknown
/// command, a wrong arity and a call without keys.
fn keys_of_call(
    args: Args<'_>,
) -> Result<(&'static Command, ruvio_engine::command::KeyPositions), CmdError> {
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
    Ok((cmd, keys))
}

/// `COMMAND LIST [FILTERBY MODULE name | ACLCAT category | PATTERN pattern]`: every
/// command and subcommand the filter keeps.
fn list<S: Server>(_ctx: &mut Ctx<'_, S>, args: Args<'_>, reply: &mut Reply<'_>) -> ServerResult {
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

/// `COMMAND HELP`: Redis 7.0's text, whose last entry reads "Prints" where
/// other containers' (`reply_help`) read "Print", so it is written whole here.
fn help<S: Server>(_ctx: &mut Ctx<'_, S>, _args: Args<'_>, reply: &mut Reply<'_>) -> ServerResult {
    const LINES: &[&str] = &[
        "COMMAND <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "(no subcommand)",
        "    Return details about all Redis commands.",
        "COUNT",
        "    Return the total number of commands in this Redis server.",
        "LIST",
        "    Return a list of all commands in this Redis server.",
        "INFO [<command-name> ...]",
        "    Return details about multiple Redis commands.",
        "    If no command names are given, documentation details for all",
        "    commands are returned.",
        "DOCS [<command-name> ...]",
        "    Return documentation details about multiple Redis commands.",
        "    If no command names are given, documentation details for all",
        "    commands are returned.",
        "GETKEYS <full-command>",
        "    Return the keys from a full Redis command.",
        "GETKEYSANDFLAGS <full-command>",
        "    Return the keys and the access flags from a full Redis command.",
        "HELP",
        "    Prints this help.",
    ];
    reply.array(LINES.len());
    LINES.iter().for_each(|line| reply.simple(line));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use ruvio_engine::command::KeyShape;
    use ruvio_resp::OwnedArgs;

    /// Every row, subcommands included, has its entry in the docs table, so
    /// COMMAND INFO and DOCS tell its key specs, tips and arguments. Entries
    /// without a row are Redis 7.0 commands Ruvio lacks (the generated file is
    /// Redis' whole table); a hand-written entry always has its row.
    #[test]
    fn every_row_has_docs_and_every_hand_written_entry_a_row() {
        let rows: Vec<&str> = registry().all_rows().map(|c| c.meta.name).collect();
        let missing: Vec<&&str> = rows
            .iter()
            .filter(|name| docs::lookup(name).is_none())
            // DEBUG's subcommands are not in Redis' table, and COMMAND does not list them.
            .filter(|name| !name.starts_with("debug|"))
            .collect();
        assert!(missing.is_empty(), "rows without docs: {missing:?}");
        let hand_written = include_str!("../../../ruvio-engine/src/command/docs/ruvio-only.txt");
        for line in hand_written
            .lines()
            .filter(|l| !l.starts_with('#') && !l.is_empty())
        {
            let name = line.split(' ').next().unwrap_or_default();
            assert!(
                rows.contains(&name),
                "{name}: a hand-written entry without a row"
            );
        }
    }

    /// Every row's ACL categories are Redis 7.0's (COMMAND INFO orders them by
    /// [`ACL_CATEGORIES`], and FILTERBY ACLCAT finds them by these names).
    #[test]
    fn every_acl_category_is_redis_own() {
        for row in registry().all_rows() {
            for category in row.meta.acl {
                assert!(
                    ACL_CATEGORIES.contains(category),
                    "{}: @{category}",
                    row.meta.name
                );
            }
        }
    }

    /// Calls of a command with `n` arguments after its name: `a1`, `a2` ...
    fn synthetic_call(name: &str, n: usize) -> OwnedArgs {
        let mut call: Vec<String> = name.split('|').map(str::to_string).collect();
        let words = call.len();
        call.extend((words..n).map(|i| format!("a{i}")));
        call.iter().map(|a| a.as_bytes()).collect()
    }

    /// The key positions routing uses and the ones the published key specs give
    /// agree, for every row whose keys sit at fixed places (each called with its
    /// least argument count and two more), and for calls of the rows whose keys
    /// move. Where Ruvio routes by more than the specs say, the reason is listed.
    #[test]
    fn key_specs_agree_with_routing() {
        // Keys that Redis finds with a command's own code, beyond its key specs.
        // There, routing may name more keys than the specs, never other ones.
        const ROUTED_BEYOND_SPECS: &[(&str, &str)] = &[
            (
                "sort",
                "STORE's key: Redis' sortGetKeys, the spec is `unknown`",
            ),
            (
                "georadius",
                "the last of repeated STOREs: Redis' georadiusGetKeys",
            ),
            (
                "georadiusbymember",
                "the last of repeated STOREs: Redis' georadiusGetKeys",
            ),
        ];
        let mut checked = 0;
        let mut differences = Vec::new();
        let mut compare = |row: &Command, call: &OwnedArgs| {
            let Some(entry) = docs::lookup(row.meta.name) else {
                return;
            };
            let routed: Vec<usize> = row.meta.keys.positions(call.args()).to_vec();
            let mut from_specs = entry.spec_positions(call.args());
            from_specs.dedup();
            checked += 1;
            let beyond = ROUTED_BEYOND_SPECS.iter().any(|(n, _)| *n == row.meta.name);
            if routed != from_specs && !(beyond && routed.starts_with(&from_specs)) {
                differences.push(format!(
                    "{}: routed {routed:?}, specs {from_specs:?}",
                    row.meta.name
                ));
            }
        };
        for row in registry().all_rows() {
            let m = row.meta;
            let fixed = m.keys.0.iter().all(|s| matches!(s, KeyShape::Range { .. }));
            if m.keys.is_none() || !fixed || m.has(flags::PUBSUB) {
                continue;
            }
            let least = m.arity.unsigned_abs() as usize;
            let counts = if m.arity < 0 {
                least..least + 3
            } else {
                least..least + 1
            };
            for n in counts {
                compare(row, &synthetic_call(m.name, n));
            }
        }
        for line in [
            "lmpop 2 a b left",
            "blmpop 0 2 a b left count 2",
            "zunionstore d 2 a b weights 1 2",
            "zinterstore d 1 a",
            "zdiffstore d 2 a b",
            "zunion 2 a b",
            "zinter 2 a b",
            "zdiff 2 a b",
            "zintercard 2 a b limit 1",
            "zmpop 2 a b min",
            "bzmpop 0 2 a b max",
            "sintercard 2 a b",
            "eval s 2 a b x",
            "evalsha s 1 a",
            "eval_ro s 2 a b",
            "evalsha_ro s 0",
            "fcall f 2 a b x",
            "fcall_ro f 1 a",
            "xread count 1 streams a b 1 2",
            "xreadgroup group g c streams a b > >",
            "georadius g 1 2 3 km store d",
            "georadius g 1 2 3 km storedist d",
            "georadiusbymember g m 3 km store d",
            "sort k",
            "sort k by w store d",
            "georadius g 1 2 3 km store d store e",
            "georadius g 1 2 3 km store d storedist e",
            "sort_ro k",
        ] {
            let call: OwnedArgs = line.split(' ').map(str::as_bytes).collect();
            let row = registry().lookup(call.args().get(0)).expect("a command");
            compare(row, &call);
        }
        assert!(checked > 200, "only {checked} calls");
        assert!(differences.is_empty(), "{}", differences.join("\n"));
    }
}
