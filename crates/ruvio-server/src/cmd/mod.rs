//! The server's own command families: commands that need the connection or the
//! server rather than only the keyspace. Each module exports `COMMANDS`, a table
//! of [`ServerCommand`] rows, and container commands (CLIENT, CONFIG, COMMAND,
//! CLUSTER, OBJECT-like) dispatch their subcommands from a [`SubCommand`] table.
//!
//! A handler returns `Err(CmdError)` having written nothing; the dispatcher writes
//! the error once and counts the failure from the type, as for engine commands.

pub mod client;
pub mod cluster;
pub mod connection;
pub mod introspection;
pub mod server;

use crate::conn::{ClientState, Conn};
use crate::shard::ShardCore;
use crate::slab::Slab;
use ruvio_engine::CmdError;
use ruvio_engine::CommandMeta;
use ruvio_resp::{Args, Reply};

/// Everything a server command may look at or change.
pub struct Ctx<'a> {
    pub core: &'a mut ShardCore,
    pub client: &'a mut ClientState,
    /// The shard's other connections (the caller's own is taken out while it runs).
    pub conns: &'a mut Slab<Conn>,
}

/// What a server handler returns: `Ok` after writing its whole reply, or the error
/// the dispatcher writes.
pub type ServerResult = Result<(), CmdError>;

/// A server command handler.
pub type ServerFn = fn(&mut Ctx<'_>, Args<'_>, &mut Reply<'_>) -> ServerResult;

/// One row of a server family's table.
#[derive(Debug)]
pub struct ServerCommand {
    pub meta: CommandMeta,
    pub handler: ServerFn,
}

/// One subcommand of a container command (`CLIENT ID`, `CONFIG GET` ...).
pub struct SubCommand {
    /// Lower-case full name, `container|subcommand` (as CLIENT LIST's `cmd=` shows it).
    pub name: &'static str,
    /// Arity with Redis' sign convention, counting the container and the subcommand.
    pub arity: i32,
    pub handler: ServerFn,
}

/// Every server family's rows.
pub fn commands() -> impl Iterator<Item = &'static ServerCommand> {
    [
        connection::COMMANDS,
        client::COMMANDS,
        cluster::COMMANDS,
        server::COMMANDS,
        introspection::COMMANDS,
    ]
    .into_iter()
    .flatten()
}

/// Run the subcommand named by `args[1]` from `table`, with Redis' errors for an
/// unknown subcommand or a wrong argument count.
pub fn dispatch_sub(
    ctx: &mut Ctx<'_>,
    args: Args<'_>,
    reply: &mut Reply<'_>,
    container: &str,
    table: &[SubCommand],
) -> ServerResult {
    let name = args.get(1);
    let sub_name = |s: &SubCommand| s.name.split_once('|').map_or(s.name, |(_, sub)| sub);
    let Some(sub) = table
        .iter()
        .find(|s| sub_name(s).as_bytes().eq_ignore_ascii_case(name))
    else {
        return Err(CmdError::unknown_subcommand(name, container));
    };
    if !ruvio_engine::command::arity_fits(sub.arity, args.len()) {
        return Err(CmdError::WrongArity(sub.name));
    }
    ctx.client.last_cmd = sub.name;
    (sub.handler)(ctx, args, reply)
}

/// Shorthand for a server command's metadata row.
#[allow(clippy::too_many_arguments)]
pub const fn meta(
    name: &'static str,
    arity: i32,
    flags: u32,
    acl: &'static [&'static str],
    group: &'static str,
    summary: &'static str,
    since: &'static str,
    complexity: &'static str,
) -> CommandMeta {
    CommandMeta {
        name,
        arity,
        flags,
        keys: ruvio_engine::KeySpec::NONE,
        acl,
        group,
        summary,
        since,
        complexity,
        merge: None,
    }
}

/// Parse a whole argument as an i64 the way Redis' string2ll does.
pub use ruvio_resp::string2ll as parse_i64;
