//! ACL and its subcommands, with Redis 7.0's replies and errors. The users,
//! rules and log are `crate::acl`'s; this family parses, answers, and makes a
//! change reach every shard before the reply: the table is shared, and each
//! shard then takes the new rules into its connections and closes those of a
//! deleted user (`ConfigChange::AclUsers`, answered once all shards applied it,
//! as CONFIG SET).

use super::{parse_i64, Ctx, Server, ServerCommand, ServerResult, SharedReads};
use crate::acl::check::Denied;
use crate::acl::{describe, log, Acl, SetUserError};
use crate::config::change::ConfigChange;
use crate::mesh::gather::{Gather, Then};
use crate::messaging::pubsub::Kind;
use crate::net::conn::{ClientState, Conn};
use crate::net::slab::Slab;
use ruvio_engine::command::{command, flags::*, reply_help, CommandTree};
use ruvio_engine::error::until_nul;
use ruvio_engine::{CmdError, KeySpec};
use ruvio_resp::{Args, Reply};

/// The ACL family's table.
#[rustfmt::skip]
pub const COMMANDS: &[ServerCommand] = &[
    command!("acl", -2, 0, KeySpec::NONE, ["slow"], "server", "6.0.0",
        // Redis 7.0 writes the summary with a space at the end.
        "A container for Access List Control commands ", "Depends on subcommand.",
        subcommands = SUBCOMMANDS),
];

const ADMIN_ROW: u32 = ADMIN | NOSCRIPT | LOADING | STALE;

/// ACL's subcommands, with Redis 7.0's arity, flags and categories.
#[rustfmt::skip]
const SUBCOMMANDS: &[ServerCommand] = &[
    command!("acl|cat", -2, NOSCRIPT | LOADING | STALE, KeySpec::NONE, ["slow"], "server", "6.0.0",
        "List the ACL categories or the commands inside a category",
        "O(1) since the categories and commands are a fixed set.", cat),
    command!("acl|deluser", -3, ADMIN_ROW, KeySpec::NONE, ["admin", "slow", "dangerous"], "server", "6.0.0",
        "Remove the specified ACL users and the associated rules",
        "O(1) amortized time considering the typical user.", deluser),
    command!("acl|dryrun", -4, ADMIN_ROW, KeySpec::NONE, ["admin", "slow", "dangerous"], "server", "7.0.0",
        "Returns whether the user can execute the given command without executing the command.", "O(1).",
        dryrun),
    command!("acl|genpass", -2, NOSCRIPT | LOADING | STALE, KeySpec::NONE, ["slow"], "server", "6.0.0",
        "Generate a pseudorandom secure password to use for ACL users", "O(1)", genpass),
    command!("acl|getuser", 3, ADMIN_ROW, KeySpec::NONE, ["admin", "slow", "dangerous"], "server", "6.0.0",
        "Get the rules for a specific ACL user",
        "O(N). Where N is the number of password, command and pattern rules that the user has.", getuser),
    command!("acl|help", 2, LOADING | STALE, KeySpec::NONE, ["slow"], "server", "6.0.0",
        "Show helpful text about the different subcommands", "O(1)", help),
    command!("acl|list", 2, ADMIN_ROW, KeySpec::NONE, ["admin", "slow", "dangerous"], "server", "6.0.0",
        "List the current ACL rules in ACL config file format",
        "O(N). Where N is the number of configured users.", list),
    command!("acl|load", 2, ADMIN_ROW, KeySpec::NONE, ["admin", "slow", "dangerous"], "server", "6.0.0",
        "Reload the ACLs from the configured ACL file", "O(N). Where N is the number of configured users.",
        load),
    command!("acl|log", -2, ADMIN_ROW, KeySpec::NONE, ["admin", "slow", "dangerous"], "server", "6.0.0",
        "List latest events denied because of ACLs in place",
        "O(N) with N being the number of entries shown.", log_cmd),
    command!("acl|save", 2, ADMIN_ROW, KeySpec::NONE, ["admin", "slow", "dangerous"], "server", "6.0.0",
        "Save the current ACL rules in the configured ACL file",
        "O(N). Where N is the number of configured users.", save),
    command!("acl|setuser", -3, ADMIN_ROW, KeySpec::NONE, ["admin", "slow", "dangerous"], "server", "6.0.0",
        "Modify or create the rules for a specific ACL user",
        "O(N). Where N is the number of rules provided.", setuser),
    command!("acl|users", 2, ADMIN_ROW, KeySpec::NONE, ["admin", "slow", "dangerous"], "server", "6.0.0",
        "List the username of all the configured ACL rules",
        "O(N). Where N is the number of configured users.", users),
    command!("acl|whoami", 2, NOSCRIPT | LOADING | STALE, KeySpec::NONE, ["slow"], "server", "6.0.0",
        "Return the name of the user associated to the current connection", "O(1)", whoami),
];

/// Bits ACL GENPASS gives at most (Redis's `GENPASS_MAX_BITS`).
const GENPASS_BITS_MAX: i64 = 4096;
/// ACL LOG's default count.
const LOG_COUNT_DEFAULT: usize = 10;

/// `acl-pubsub-default allchannels`: new selectors start with `&*`.
fn pubsub_all<S: Server>(ctx: &Ctx<'_, S>) -> bool {
    ctx.core
        .settings()
        .param("acl-pubsub-default")
        .eq_ignore_ascii_case("allchannels")
}

/// Record an event in ACL LOG for the running client (`context` from whether it
/// is in MULTI).
pub fn log_denial<S: Server>(
    ctx: &mut Ctx<'_, S>,
    reason: &'static str,
    object: &[u8],
    username: &[u8],
) {
    let entry = log::Entry {
        count: 1,
        reason,
        context: if ctx.client.multi.is_some() || ctx.client.in_exec {
            "multi"
        } else {
            "toplevel"
        },
        object: object.to_vec(),
        username: username.to_vec(),
        at_ms: crate::clock::unix_ms(),
        client_info: super::client::info_line(ctx.core, ctx.client),
    };
    ctx.core.shared().acl().log(entry);
}

/// Take the table as it is now into `conns`: a connection whose user is gone
/// is closed (`mark_dirty` gets it, as CLIENT KILL does).
pub fn refresh_connections(
    acl: &Acl,
    conns: &mut Slab<Conn>,
    mut mark_dirty: impl FnMut((u32, u32)),
) {
    for (index, conn) in conns.iter_mut() {
        if !keeps_access(acl, &mut conn.client) {
            conn.client.closing = true;
            conn.client.killed = true;
            mark_dirty((index, conn.gen));
        }
    }
}

/// Take the client's user as it is now: false when the user is gone, or when
/// the client is subscribed to a channel its user may no longer use (Redis's
/// `ACLKillPubsubClientsIfNeeded`): the connection closes.
pub fn keeps_access(acl: &Acl, client: &mut ClientState) -> bool {
    if !client.acl.refresh(acl) {
        return false;
    }
    if !client.subs.active() {
        return true;
    }
    let user = &client.acl.user;
    let allowed = |channel: &[u8], pattern: bool| {
        user.selectors
            .iter()
            .any(|s| crate::acl::check::channel_ok(s, channel, pattern))
    };
    let subs = &client.subs;
    subs.of(Kind::Pattern).iter().all(|p| allowed(p, true))
        && subs.of(Kind::Channel).iter().all(|c| allowed(c, false))
        && subs.of(Kind::Shard).iter().all(|c| allowed(c, false))
}

/// The users changed: this shard's connections take the change now, the other
/// shards' before `answer` is sent.
fn changed_everywhere<S: Server>(ctx: &mut Ctx<'_, S>, answer: Vec<u8>, reply: &mut Reply<'_>) {
    let acl = ctx.core.shared().acl().clone();
    refresh_connections(&acl, ctx.conns, |who| ctx.core.mark_conn_dirty(who));
    if !keeps_access(&acl, ctx.client) {
        // Its own user is gone: answered, then closed (Redis's close-after-reply).
        ctx.client.closing = true;
    }
    if ctx.core.topology().nodes.len() > 1 {
        ctx.core.broadcast(ConfigChange::AclUsers);
        ctx.gather = Some(Gather::AfterAll(Then::Reply(answer)));
    } else {
        reply.raw(&answer);
    }
}

/// `ACL SETUSER username [rule [rule ...]]`
fn setuser<S: Server>(ctx: &mut Ctx<'_, S>, args: Args<'_>, reply: &mut Reply<'_>) -> ServerResult {
    let rules: Vec<&[u8]> = args.iter().skip(3).collect();
    let all_channels = pubsub_all(ctx);
    match ctx
        .core
        .shared()
        .acl()
        .set_user(args.get(2), &rules, all_channels)
    {
        Ok(()) => {
            changed_everywhere(ctx, b"+OK\r\n".to_vec(), reply);
            Ok(())
        }
        Err(SetUserError::BadName) => Err(CmdError::Line(
            b"ERR Usernames can't contain spaces or null characters".to_vec(),
        )),
        Err(SetUserError::Unmatched(i)) => Err(CmdError::quoted(
            "ERR Unmatched parenthesis in acl selector starting at '",
            until_nul(rules[i]),
            "'.",
        )),
        Err(SetUserError::Rule(rule, e)) => Err(CmdError::quoted(
            "ERR Error in ACL SETUSER modifier '",
            until_nul(&rule),
            &format!("': {}", e.text()),
        )),
    }
}

/// `ACL DELUSER username [username ...]`
fn deluser<S: Server>(ctx: &mut Ctx<'_, S>, args: Args<'_>, reply: &mut Reply<'_>) -> ServerResult {
    let names: Vec<&[u8]> = args.iter().skip(2).collect();
    if names.iter().any(|n| *n == b"default") {
        return Err(CmdError::Line(
            b"ERR The 'default' user cannot be removed".to_vec(),
        ));
    }
    let deleted = ctx.core.shared().acl().delete_users(&names);
    changed_everywhere(ctx, format!(":{deleted}\r\n").into_bytes(), reply);
    Ok(())
}

/// `ACL GETUSER username`
fn getuser<S: Server>(ctx: &mut Ctx<'_, S>, args: Args<'_>, reply: &mut Reply<'_>) -> ServerResult {
    let acl = ctx.core.shared().acl();
    let Some(user) = acl.user(args.get(2)) else {
        reply.null();
        return Ok(());
    };
    let catalog = acl.catalog();
    reply.map(6);
    reply.bulk(b"flags");
    let flags = describe::flags(&user);
    reply.set(flags.len());
    for f in flags {
        reply.bulk(f.as_bytes());
    }
    reply.bulk(b"passwords");
    reply.array(user.passwords.len());
    for p in &user.passwords {
        reply.bulk(p.as_bytes());
    }
    let selector = |reply: &mut Reply<'_>, s| {
        reply.bulk(b"commands");
        reply.bulk(&describe::command_rules(catalog, s));
        reply.bulk(b"keys");
        reply.bulk(&describe::keys_field(s));
        reply.bulk(b"channels");
        reply.bulk(&describe::channels_field(s));
    };
    selector(reply, user.root());
    reply.bulk(b"selectors");
    reply.array(user.selectors.len() - 1);
    for s in &user.selectors[1..] {
        reply.map(3);
        selector(reply, s);
    }
    Ok(())
}

/// `ACL LIST`
fn list<S: Server>(ctx: &mut Ctx<'_, S>, _args: Args<'_>, reply: &mut Reply<'_>) -> ServerResult {
    let acl = ctx.core.shared().acl();
    let users = acl.users();
    reply.array(users.len());
    for user in users.values() {
        reply.bulk(&describe::user_line(acl.catalog(), user));
    }
    Ok(())
}

/// `ACL USERS`
fn users<S: Server>(ctx: &mut Ctx<'_, S>, _args: Args<'_>, reply: &mut Reply<'_>) -> ServerResult {
    let users = ctx.core.shared().acl().users();
    reply.array(users.len());
    for name in users.keys() {
        reply.bulk(name);
    }
    Ok(())
}

/// `ACL WHOAMI`
fn whoami<S: Server>(ctx: &mut Ctx<'_, S>, _args: Args<'_>, reply: &mut Reply<'_>) -> ServerResult {
    reply.bulk(ctx.client.acl.name());
    Ok(())
}

/// `ACL CAT [category]`
fn cat<S: Server>(ctx: &mut Ctx<'_, S>, args: Args<'_>, reply: &mut Reply<'_>) -> ServerResult {
    use crate::acl::catalog::{category_bit, CATEGORIES};
    match args.len() {
        2 => {
            reply.array(CATEGORIES.len());
            for c in CATEGORIES {
                reply.bulk(c.as_bytes());
            }
        }
        3 => {
            let Some(bit) = category_bit(args.get(2)) else {
                let name = &args.get(2)[..args.get(2).len().min(128)];
                return Err(CmdError::quoted(
                    "ERR Unknown category '",
                    until_nul(name),
                    "'",
                ));
            };
            let catalog = ctx.core.shared().acl().catalog();
            let rows: Vec<usize> = catalog
                .walk()
                .filter(|&b| catalog.row(b).categories & bit != 0)
                .collect();
            reply.array(rows.len());
            for b in rows {
                reply.bulk(catalog.row(b).name.as_bytes());
            }
        }
        _ => return Err(CmdError::subcommand_syntax(args.get(1), "acl")),
    }
    Ok(())
}

/// `ACL GENPASS [bits]`
fn genpass<S: Server>(
    _ctx: &mut Ctx<'_, S>,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> ServerResult {
    let bits = match args.len() {
        2 => 256,
        3 => parse_i64(args.get(2)).ok_or(CmdError::NotInteger)?,
        _ => return Err(CmdError::subcommand_syntax(args.get(1), "acl")),
    };
    if bits <= 0 || bits > GENPASS_BITS_MAX {
        return Err(CmdError::Line(
            format!(
                "ERR ACL GENPASS argument must be the number of bits for the output password, \
                 a positive number up to {GENPASS_BITS_MAX}"
            )
            .into_bytes(),
        ));
    }
    let chars = (bits as usize).div_ceil(4);
    let mut random = vec![0u8; chars.div_ceil(2)];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut random))
        .map_err(|_| CmdError::Line(b"ERR cannot read random bytes".to_vec()))?;
    let hex: Vec<u8> = random
        .iter()
        .flat_map(|b| [b >> 4, b & 0xf])
        .take(chars)
        .map(|n| b"0123456789abcdef"[n as usize])
        .collect();
    reply.bulk(&hex);
    Ok(())
}

/// `ACL LOG [count | RESET]`
fn log_cmd<S: Server>(ctx: &mut Ctx<'_, S>, args: Args<'_>, reply: &mut Reply<'_>) -> ServerResult {
    let count = match args.len() {
        2 => LOG_COUNT_DEFAULT,
        3 if args.get(2).eq_ignore_ascii_case(b"reset") => {
            ctx.core.shared().acl().log_reset();
            reply.ok();
            return Ok(());
        }
        3 => parse_i64(args.get(2)).ok_or(CmdError::NotInteger)?.max(0) as usize,
        _ => return Err(CmdError::subcommand_syntax(args.get(1), "acl")),
    };
    let entries = ctx.core.shared().acl().log_entries(count);
    let now = crate::clock::unix_ms();
    reply.array(entries.len());
    for logged in entries {
        let e = &logged.entry;
        reply.map(10);
        reply.bulk(b"count");
        reply.int(e.count as i64);
        reply.bulk(b"reason");
        reply.bulk(e.reason.as_bytes());
        reply.bulk(b"context");
        reply.bulk(e.context.as_bytes());
        reply.bulk(b"object");
        reply.bulk(&e.object);
        reply.bulk(b"username");
        reply.bulk(&e.username);
        reply.bulk(b"age-seconds");
        reply.double(now.saturating_sub(e.at_ms) as f64 / 1000.0);
        reply.bulk(b"client-info");
        reply.bulk(e.client_info.as_bytes());
        reply.bulk(b"entry-id");
        reply.int(logged.entry_id as i64);
        reply.bulk(b"timestamp-created");
        reply.int(logged.created_ms as i64);
        reply.bulk(b"timestamp-last-updated");
        reply.int(e.at_ms as i64);
    }
    Ok(())
}

/// `ACL DRYRUN username command [arg ...]`
fn dryrun<S: Server>(ctx: &mut Ctx<'_, S>, args: Args<'_>, reply: &mut Reply<'_>) -> ServerResult {
    let Some(user) = ctx.core.shared().acl().user(args.get(2)) else {
        return Err(CmdError::quoted(
            "ERR User '",
            until_nul(args.get(2)),
            "' not found",
        ));
    };
    let call = args.tail(3);
    let found = super::registry::registry()
        .lookup(call.get(0))
        .and_then(|c| c.resolve(call).ok());
    let Some(row) = found else {
        return Err(CmdError::quoted(
            "ERR Command '",
            until_nul(call.get(0)),
            "' not found",
        ));
    };
    if !row.meta.arity_ok(call.len()) {
        return Err(CmdError::Line(
            format!(
                "ERR wrong number of arguments for '{}' command",
                row.meta.name
            )
            .into_bytes(),
        ));
    }
    match crate::acl::check::check(&user, row.stat, row.meta, call) {
        Ok(()) => reply.ok(),
        Err(denied) => reply.bulk(dryrun_text(denied, row.meta.name, call).as_bytes()),
    }
    Ok(())
}

/// ACL DRYRUN's answer for a refused call.
fn dryrun_text(denied: Denied, name: &str, call: Args<'_>) -> String {
    match denied {
        Denied::Command => format!("This user has no permissions to run the '{name}' command"),
        Denied::Key(i) => format!(
            "This user has no permissions to access the '{}' key",
            String::from_utf8_lossy(call.get(i))
        ),
        Denied::Channel(i) => format!(
            "This user has no permissions to access the '{}' channel",
            String::from_utf8_lossy(call.get(i))
        ),
    }
}

/// Redis's answer to ACL LOAD / SAVE without `aclfile`.
const NO_ACL_FILE: &str = "ERR This Redis instance is not configured to use an ACL file. You may \
    want to specify users via the ACL SETUSER command and then issue a CONFIG REWRITE (assuming \
    you have a Redis configuration file set) in order to store users in the Redis configuration.";

/// `ACL LOAD`
fn load<S: Server>(ctx: &mut Ctx<'_, S>, _args: Args<'_>, reply: &mut Reply<'_>) -> ServerResult {
    let path = ctx.core.settings().param("aclfile").to_string();
    if path.is_empty() {
        return Err(CmdError::Line(NO_ACL_FILE.as_bytes().to_vec()));
    }
    let acl = ctx.core.shared().acl().clone();
    let users = crate::acl::file::load(&acl, &path, pubsub_all(ctx))
        .map_err(|errors| CmdError::quoted("ERR ", errors.as_bytes(), ""))?;
    acl.replace_all(users);
    changed_everywhere(ctx, b"+OK\r\n".to_vec(), reply);
    Ok(())
}

/// `ACL SAVE`
fn save<S: Server>(ctx: &mut Ctx<'_, S>, _args: Args<'_>, reply: &mut Reply<'_>) -> ServerResult {
    let path = ctx.core.settings().param("aclfile").to_string();
    if path.is_empty() {
        return Err(CmdError::Line(NO_ACL_FILE.as_bytes().to_vec()));
    }
    if let Err(e) = crate::acl::file::save(ctx.core.shared().acl(), &path) {
        crate::serverlog::log(
            crate::serverlog::Level::Warning,
            &format!("Saving the ACL file {path} failed: {e}"),
        );
        return Err(CmdError::Line(
            b"ERR There was an error trying to save the ACLs. Please check the server logs for more information"
                .to_vec(),
        ));
    }
    reply.ok();
    Ok(())
}

fn help<S: Server>(_ctx: &mut Ctx<'_, S>, _args: Args<'_>, reply: &mut Reply<'_>) -> ServerResult {
    reply_help(
        reply,
        b"acl",
        &[
            "CAT [<category>]",
            "    List all commands that belong to <category>, or all command categories",
            "    when no category is specified.",
            "DELUSER <username> [<username> ...]",
            "    Delete a list of users.",
            "DRYRUN <username> <command> [<arg> ...]",
            "    Returns whether the user can execute the given command without executing the command.",
            "GETUSER <username>",
            "    Get the user's details.",
            "GENPASS [<bits>]",
            "    Generate a secure 256-bit user password. The optional `bits` argument can",
            "    be used to specify a different size.",
            "LIST",
            "    Show users details in config file format.",
            "LOAD",
            "    Reload users from the ACL file.",
            "LOG [<count> | RESET]",
            "    Show the ACL log entries.",
            "SAVE",
            "    Save the current config to the ACL file.",
            "SETUSER <username> <attribute> [<attribute> ...]",
            "    Create or modify a user with the specified attributes.",
            "USERS",
            "    List all the registered usernames.",
            "WHOAMI",
            "    Return the current connection username.",
        ],
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::acl::{describe, Acl};
    use proptest::prelude::*;

    /// Rules of every kind, right and wrong, and any bytes.
    fn rule() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            proptest::sample::select(vec![
                "on",
                "off",
                ">pw",
                "<pw",
                "nopass",
                "resetpass",
                "reset",
                "~a*",
                "%R~r",
                "%W~w",
                "allkeys",
                "resetkeys",
                "&c*",
                "allchannels",
                "resetchannels",
                "+get",
                "-get",
                "+@read",
                "-@write",
                "+@all",
                "-@all",
                "+config|get",
                "-config|set",
                "+select|0",
                "(+get ~x)",
                "(",
                "-set)",
                "clearselectors",
                "sanitize-payload",
                "+client",
                "-client|kill",
                "+@dangerous",
                "-@keyspace",
            ])
            .prop_map(|r| r.as_bytes().to_vec()),
            proptest::collection::vec(any::<u8>(), 0..8),
        ]
    }

    proptest! {
        /// Over the real command table: a refused SETUSER changes nothing, and
        /// a user's rules (ACL LIST's), applied to a new user, read back the
        /// same (the fuzz target `acl_rules` checks the same at length).
        #[test]
        fn rules_read_back_the_same(calls in proptest::collection::vec(proptest::collection::vec(rule(), 0..6), 0..6)) {
            let acl = Acl::new(&super::super::registry::registry().acl);
            for rules in &calls {
                let before: Vec<_> = acl.users().values().map(|u| describe::user_line(acl.catalog(), u)).collect();
                let rules: Vec<&[u8]> = rules.iter().map(Vec::as_slice).collect();
                if acl.set_user(b"u", &rules, false).is_err() {
                    let after: Vec<_> = acl.users().values().map(|u| describe::user_line(acl.catalog(), u)).collect();
                    prop_assert_eq!(before, after);
                }
            }
            let Some(user) = acl.user(b"u") else { return Ok(()) };
            let clean = |b: &[u8]| !b.iter().any(|&c| c == b'(' || c == b')' || c.is_ascii_whitespace() || c == 0);
            let plain = user.selectors.iter().all(|s| {
                s.keys.iter().all(|k| clean(&k.pattern))
                    && s.channels.iter().all(|c| clean(c))
                    && s.firstargs.iter().flat_map(|(_, a)| a).all(|a| clean(a))
            });
            if plain {
                let rules = describe::user_rules(acl.catalog(), &user);
                let split: Vec<&[u8]> = rules.split(|&b| b == b' ').collect();
                let again = Acl::new(&super::super::registry::registry().acl);
                prop_assert!(again.set_user(b"copy", &split, false).is_ok(), "{:?}", String::from_utf8_lossy(&rules));
                let back = describe::user_rules(again.catalog(), &again.user(b"copy").unwrap());
                prop_assert_eq!(String::from_utf8_lossy(&rules), String::from_utf8_lossy(&back));
            }
        }
    }
}
