//! FUNCTION: the libraries of Redis 7 functions (LOAD, DELETE, FLUSH, DUMP, RESTORE,
//! LIST, STATS, KILL, HELP). The libraries and FCALL are the engine's
//! (`ruvio_engine::scripting::functions`, one set per shard thread); this family
//! keeps the shards' sets equal and on disk.
//!
//! - **One server, one set (forward mode)**: a change is made on the client's shard
//!   first (its errors are the client's answer), then the whole resulting set goes
//!   to every other shard as a FUNCTION DUMP payload they restore with FLUSH
//!   ([`ConfigChange::Functions`]). The answer waits until every shard applied it
//!   (the same ordered queue as CONFIG SET), so an FCALL sent after it finds the
//!   function wherever its keys route. Sending the whole set, not the change, makes
//!   every shard end with the same libraries whatever order changes cross in.
//!   Each shard that takes a set records it for a Ruvio replica's shard link
//!   (`RUVIO FUNCTIONS`, `replication::link_barrier`): a replica on links
//!   takes each shard's set from that shard's link, never from another shard.
//! - **Per-shard mode**: each node is its own server, as in Redis Cluster: a cluster
//!   client loads a library on every node (redis-py's `RedisCluster` sends
//!   FUNCTION LOAD to all primaries).
//! - **Durability**: with a log (`--durability everysec|always`) each shard writes its
//!   set, the same payload, to `functions.dump` in its data directory after every
//!   change (temp file, fsync, rename) and restores it at start, before the log is
//!   replayed. The libraries of a file imported at start (`--import-rdb`) load on
//!   the loading thread and are handed to the shard ([`adopt_imported`]), then
//!   saved. Libraries change rarely and are small: a file per change costs less
//!   than teaching the log and the snapshot a second kind of record.

use super::{ok_everywhere, Ctx, Server, ServerCommand, ServerResult};
use crate::config::change::ConfigChange;
use crate::config::{Config, PortMode};
use crate::mesh::gather::{Gather, Then};
use ruvio_engine::command::{command, flags::*};
use ruvio_engine::scripting::functions::{self, RestorePolicy};
use ruvio_engine::{CmdError, KeySpec};
use ruvio_resp::{Args, Reply};
use std::path::PathBuf;

/// FUNCTION's subcommands (Redis 7's arity, flags, categories and docs).
#[rustfmt::skip]
const FUNCTION_SUBCOMMANDS: &[ServerCommand] = &[
    command!("function|dump", 2, NOSCRIPT, KeySpec::NONE, ["slow", "scripting"], "scripting", "7.0.0",
        "Dump all functions into a serialized binary payload", "O(N) where N is the number of functions",
        function_dump),
    command!("function|list", -2, NOSCRIPT, KeySpec::NONE, ["slow", "scripting"], "scripting", "7.0.0",
        "List information about all the functions", "O(N) where N is the number of functions", function_list),
    command!("function|load", -3, WRITE | DENYOOM | NOSCRIPT, KeySpec::NONE, ["write", "slow", "scripting"],
        "scripting", "7.0.0", "Create a function with the given arguments (name, code, description)",
        "O(1) (considering compilation time is redundant)", function_load),
    command!("function|delete", 3, WRITE | NOSCRIPT, KeySpec::NONE, ["write", "slow", "scripting"], "scripting",
        "7.0.0", "Delete a function by name", "O(1)", function_delete),
    command!("function|restore", -3, WRITE | DENYOOM | NOSCRIPT, KeySpec::NONE, ["write", "slow", "scripting"],
        "scripting", "7.0.0", "Restore all the functions on the given payload",
        "O(N) where N is the number of functions on the payload", function_restore),
    command!("function|stats", 2, NOSCRIPT | ALLOW_BUSY, KeySpec::NONE, ["slow", "scripting"], "scripting",
        "7.0.0", "Return information about the function currently running (name, description, duration)", "O(1)",
        function_stats),
    command!("function|flush", -2, WRITE | NOSCRIPT, KeySpec::NONE, ["write", "slow", "scripting"], "scripting",
        "7.0.0", "Deleting all functions", "O(N) where N is the number of functions deleted", function_flush),
    command!("function|kill", 2, NOSCRIPT | ALLOW_BUSY, KeySpec::NONE, ["slow", "scripting"], "scripting", "7.0.0",
        "Kill the function currently in execution.", "O(1)", function_kill),
    command!("function|help", 2, LOADING | STALE, KeySpec::NONE, ["slow", "scripting"], "scripting", "7.0.0",
        "Show helpful text about the different subcommands", "O(1)", function_help),
];

/// The function family's table.
#[rustfmt::skip]
pub const COMMANDS: &[ServerCommand] = &[
    command!("function", -2, 0, KeySpec::NONE, ["slow"], "scripting", "7.0.0",
        "A container for function commands", "Depends on subcommand.",
        subcommands = FUNCTION_SUBCOMMANDS),
];

/// The file a shard keeps its libraries in, in its data directory.
const SAVED_FILE: &str = "functions.dump";

fn saved_path(cfg: &Config, shard: usize) -> PathBuf {
    ruvio_wal::segment::shard_dir(&cfg.dir, shard).join(SAVED_FILE)
}

/// At shard start (on the shard's thread, before the log is replayed): the
/// libraries this shard saved, when it keeps a log. A damaged file stops the start,
/// as a damaged log does.
pub fn load_saved(cfg: &Config, shard: usize) -> std::io::Result<()> {
    if !cfg.durability.logs() {
        return Ok(());
    }
    let path = saved_path(cfg, shard);
    let payload = match std::fs::read(&path) {
        Ok(payload) => payload,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    functions::replace_all(&payload)
        .map_err(|e| std::io::Error::other(format!("{}: {}", path.display(), e.message())))
}

/// At start, once the loading thread is done: the libraries of the imported RDB
/// file (`--import-rdb`), loaded there into that thread's set, become this
/// shard's, and with a log they are saved. A saved set wins over the file's: it
/// is the set after the last change (the file is imported only into a data
/// directory without keys, which may still hold libraries loaded since an earlier
/// import). Every shard reads the whole file, so each takes the same libraries.
/// `keeper`: where shard `id`'s libraries are kept ([`Keeper`]).
pub fn adopt_imported(keeper: Keeper<'_>, payload: &[u8]) -> std::io::Result<()> {
    if keeper.logs && saved_path(keeper.cfg, keeper.id).exists() {
        return Ok(());
    }
    functions::replace_all(payload).map_err(|e| {
        std::io::Error::other(format!(
            "the imported function libraries do not load: {}",
            e.message()
        ))
    })?;
    save(keeper, payload);
    Ok(())
}

/// A replica's full sync replaced this shard's libraries with the primary's
/// (`replication::load`): they become its saved set (with a log only).
pub fn keep_current(keeper: Keeper<'_>) {
    save(keeper, &ruvio_engine::scripting::functions::dump());
}

/// Where a shard's libraries are kept: its settings (the data directory) and id,
/// and whether it keeps a log (only then are they saved).
#[derive(Clone, Copy)]
pub struct Keeper<'a> {
    pub cfg: &'a Config,
    pub id: usize,
    pub logs: bool,
}

impl<'a> Keeper<'a> {
    fn of<S: Server>(ctx: &'a Ctx<'_, S>) -> Keeper<'a> {
        Keeper {
            cfg: ctx.core.settings(),
            id: ctx.core.shard_id(),
            logs: ctx.core.has_log(),
        }
    }
}

/// Write this shard's libraries to its file (with a log only).
fn save(keeper: Keeper<'_>, payload: &[u8]) {
    if !keeper.logs {
        return;
    }
    let path = saved_path(keeper.cfg, keeper.id);
    let tmp = path.with_extension("dump.tmp");
    let write = || -> std::io::Result<()> {
        let mut f = std::fs::File::create(&tmp)?;
        std::io::Write::write_all(&mut f, payload)?;
        f.sync_all()?;
        std::fs::rename(&tmp, &path)?;
        std::fs::File::open(path.parent().unwrap_or(&path))?.sync_all()
    };
    if let Err(e) = write() {
        eprintln!(
            "ruvio: shard {}: saving the function libraries to {} failed: {e}",
            keeper.id,
            path.display()
        );
    }
}

/// Several shards answer as one server, and the change is a client's, not a
/// Ruvio primary's on a shard link: each shard of a replica on links takes its
/// libraries from its own link (`replication::link_barrier`, "Function
/// libraries"), so the others are not sent this one's set.
fn one_server<S: Server>(ctx: &Ctx<'_, S>) -> bool {
    ctx.core.topology().nodes.len() > 1
        && ctx.core.settings().port_mode == PortMode::Forward
        && !ctx.client.shard_link
}

/// `+OK`, once every shard took the change when it was sent to them.
fn ok_once_shared<S: Server>(ctx: &mut Ctx<'_, S>, reply: &mut Reply<'_>) {
    match one_server(ctx) {
        true => ok_everywhere(ctx, reply),
        false => reply.ok(),
    }
}

/// After a change on this shard: save the set, send it to the other shards, and
/// record the command for replicas as it came (Redis propagates FUNCTION LOAD,
/// DELETE, FLUSH and RESTORE as they are), once: here, not on every shard.
fn share<S: Server>(ctx: &mut Ctx<'_, S>, args: Args<'_>) {
    ctx.core.feed_replicas(ctx.client.db, &mut args.iter());
    let payload = functions::dump();
    save(Keeper::of(ctx), &payload);
    if one_server(ctx) {
        ctx.core.broadcast(ConfigChange::Functions(payload));
    }
}

/// Another shard changed the libraries: take its set.
pub fn apply(keeper: Keeper<'_>, payload: &[u8]) {
    match functions::replace_all(payload) {
        Ok(()) => save(keeper, payload),
        Err(e) => eprintln!(
            "ruvio: shard {}: the function libraries of another shard did not load: {}",
            keeper.id,
            e.message()
        ),
    }
}

/// `FUNCTION LOAD [REPLACE] code`: the library's name, once every shard has it.
fn function_load<S: Server>(
    ctx: &mut Ctx<'_, S>,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> ServerResult {
    let code_at = args.len() - 1;
    let mut replace = false;
    for option in args.iter().take(code_at).skip(2) {
        if !option.eq_ignore_ascii_case(b"replace") {
            return Err(CmdError::quoted("ERR Unknown option given: ", option, ""));
        }
        replace = true;
    }
    let name = functions::load(args.get(code_at), replace)?;
    share(ctx, args);
    if one_server(ctx) {
        let mut answer = Vec::new();
        Reply::new(&mut answer, ctx.client.proto).bulk(name.as_bytes());
        ctx.gather = Some(Gather::AfterAll(Then::Reply(answer)));
    } else {
        reply.bulk(name.as_bytes());
    }
    Ok(())
}

/// `FUNCTION DELETE library-name`
fn function_delete<S: Server>(
    ctx: &mut Ctx<'_, S>,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> ServerResult {
    functions::delete(args.get(2))?;
    share(ctx, args);
    ok_once_shared(ctx, reply);
    Ok(())
}

/// `FUNCTION FLUSH [ASYNC|SYNC]` (both flush at once: freeing a few libraries
/// takes no time worth a thread).
fn function_flush<S: Server>(
    ctx: &mut Ctx<'_, S>,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> ServerResult {
    match args.len() {
        2 => {}
        3 if args.get(2).eq_ignore_ascii_case(b"async")
            || args.get(2).eq_ignore_ascii_case(b"sync") => {}
        3 => {
            return Err(CmdError::Line(
                b"ERR FUNCTION FLUSH only supports SYNC|ASYNC option".to_vec(),
            ))
        }
        _ => return Err(CmdError::subcommand_syntax(args.get(1), "function")),
    }
    functions::flush();
    share(ctx, args);
    ok_once_shared(ctx, reply);
    Ok(())
}

/// `FUNCTION DUMP`
fn function_dump<S: Server>(
    _ctx: &mut Ctx<'_, S>,
    _args: Args<'_>,
    reply: &mut Reply<'_>,
) -> ServerResult {
    reply.bulk(&functions::dump());
    Ok(())
}

/// `FUNCTION RESTORE payload [FLUSH|APPEND|REPLACE]`
fn function_restore<S: Server>(
    ctx: &mut Ctx<'_, S>,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> ServerResult {
    if args.len() > 4 {
        return Err(CmdError::subcommand_syntax(args.get(1), "function"));
    }
    let policy = match args.len() {
        4 => RestorePolicy::parse(args.get(3)).ok_or_else(|| {
            CmdError::Line(
                b"ERR Wrong restore policy given, value should be either FLUSH, APPEND or REPLACE."
                    .to_vec(),
            )
        })?,
        _ => RestorePolicy::Append,
    };
    let check_crc = !ctx.core.engine().config().skip_checksum_validation;
    functions::restore(args.get(2), policy, check_crc)?;
    share(ctx, args);
    ok_once_shared(ctx, reply);
    Ok(())
}

/// `FUNCTION LIST [LIBRARYNAME pattern] [WITHCODE]`
fn function_list<S: Server>(
    _ctx: &mut Ctx<'_, S>,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> ServerResult {
    let mut with_code = false;
    let mut pattern = None;
    let mut i = 2;
    while i < args.len() {
        let arg = args.get(i);
        if !with_code && arg.eq_ignore_ascii_case(b"withcode") {
            with_code = true;
        } else if pattern.is_none() && arg.eq_ignore_ascii_case(b"libraryname") {
            if i + 1 >= args.len() {
                return Err(CmdError::Line(
                    b"ERR library name argument was not given".to_vec(),
                ));
            }
            i += 1;
            pattern = Some(args.get(i));
        } else {
            return Err(CmdError::quoted("ERR Unknown argument ", arg, ""));
        }
        i += 1;
    }
    functions::list(reply, pattern, with_code);
    Ok(())
}

/// `FUNCTION STATS`: every shard holds the same libraries, so this shard's counts
/// are the server's; a function running on any shard is seen through the script
/// watches.
fn function_stats<S: Server>(
    _ctx: &mut Ctx<'_, S>,
    _args: Args<'_>,
    reply: &mut Reply<'_>,
) -> ServerResult {
    functions::stats(reply)
}

/// `FUNCTION KILL`: stop the function running on any shard, if it has not written
/// (the scripts' kill, `ruvio_engine::scripting::kill`, docs/scripting.md).
fn function_kill<S: Server>(
    _ctx: &mut Ctx<'_, S>,
    _args: Args<'_>,
    reply: &mut Reply<'_>,
) -> ServerResult {
    ruvio_engine::scripting::kill(true)?;
    reply.ok();
    Ok(())
}

/// `FUNCTION HELP`: Redis writes this text itself (its last line says "Prints",
/// not the "Print" of the other containers' help).
fn function_help<S: Server>(
    _ctx: &mut Ctx<'_, S>,
    _args: Args<'_>,
    reply: &mut Reply<'_>,
) -> ServerResult {
    const LINES: &[&str] = &[
            "LOAD [REPLACE] <FUNCTION CODE>",
            "    Create a new library with the given library name and code.",
            "DELETE <LIBRARY NAME>",
            "    Delete the given library.",
            "LIST [LIBRARYNAME PATTERN] [WITHCODE]",
            "    Return general information on all the libraries:",
            "    * Library name",
            "    * The engine used to run the Library",
            "    * Library description",
            "    * Functions list",
            "    * Library code (if WITHCODE is given)",
            "    It also possible to get only function that matches a pattern using LIBRARYNAME argument.",
            "STATS",
            "    Return information about the current function running:",
            "    * Function name",
            "    * Command used to run the function",
            "    * Duration in MS that the function is running",
            "    If no function is running, return nil",
            "    In addition, returns a list of available engines.",
            "KILL",
            "    Kill the current running function.",
            "FLUSH [ASYNC|SYNC]",
            "    Delete all the libraries.",
            "    When called without the optional mode argument, the behavior is determined by the",
            "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
            "    * ASYNC: Asynchronously flush the libraries.",
            "    * SYNC: Synchronously flush the libraries.",
            "DUMP",
            "    Return a serialized payload representing the current libraries, can be restored using FUNCTION RESTORE command",
            "RESTORE <PAYLOAD> [FLUSH|APPEND|REPLACE]",
            "    Restore the libraries represented by the given payload, it is possible to give a restore policy to",
            "    control how to handle existing libraries (default APPEND):",
            "    * FLUSH: delete all existing libraries.",
            "    * APPEND: appends the restored libraries to the existing libraries. On collision, abort.",
            "    * REPLACE: appends the restored libraries to the existing libraries, On collision, replace the old",
            "      libraries with the new libraries (notice that even on this option there is a chance of failure",
            "      in case of functions name collision with another library).",
            "HELP",
            "    Prints this help.",
    ];
    reply.array(LINES.len() + 1);
    reply.simple("FUNCTION <subcommand> [<arg> [value] [opt] ...]. Subcommands are:");
    LINES.iter().for_each(|line| reply.simple(line));
    Ok(())
}
