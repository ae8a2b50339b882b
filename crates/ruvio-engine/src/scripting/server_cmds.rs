//! Server commands a script may call (`redis.call('TIME')` and the like).
//!
//! The engine's table holds keyspace commands only; the server's rows (connection,
//! server administration) live in the server crate. The server hands the engine a
//! lookup of its rows at start ([`set_server_commands`]), so a script's call of a
//! server command is checked as Redis checks it: arity, then the `noscript` flag
//! (`This Redis command is not allowed from script`), then read-only scripts. The
//! commands scripts commonly use and that need nothing beyond the script's shard are
//! answered here: TIME (BullMQ stamps jobs with it), PING, ECHO and SELECT (which,
//! as in Redis 7, lasts until the script ends: the caller's database is restored).
//! Any other server command (INFO, DBSIZE, ...: they need every shard) answers
//! `Unknown Redis command called from script` (docs/scripting.md).

use std::sync::OnceLock;

use ruvio_resp::{Args, Reply};

use crate::args::parse_i64;
use crate::command::{arity_fits, flags, CommandMeta, ExecCtx};
use crate::error::CmdError;
use crate::Engine;

/// The server's row for a command (resolved to its subcommand), or the error of
/// resolving it; `None` for a name the server does not know.
pub type ServerLookup = fn(Args<'_>) -> Option<Result<&'static CommandMeta, CmdError>>;

static SERVER_LOOKUP: OnceLock<ServerLookup> = OnceLock::new();

/// Give scripts the server's command rows (called once at start; later calls keep
/// the first lookup, which is the same function).
pub fn set_server_commands(lookup: ServerLookup) {
    let _ = SERVER_LOOKUP.set(lookup);
}

const UNKNOWN: &str = "ERR Unknown Redis command called from script";
const WRONG_ARITY: &str = "ERR Wrong number of args calling Redis command from script";

/// Run server command `args` for a script into `reply`, or the error `redis.call`
/// reports without running it.
pub(super) fn call(
    engine: &Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    read_only: bool,
    reply: &mut Reply<'_>,
) -> Result<(), &'static str> {
    let meta = match SERVER_LOOKUP.get().and_then(|lookup| lookup(args)) {
        Some(Ok(meta)) => meta,
        Some(Err(CmdError::WrongArity(_))) => return Err(WRONG_ARITY),
        // Redis' lookupCommand finds no command for an unknown subcommand either.
        None | Some(Err(_)) => return Err(UNKNOWN),
    };
    if !arity_fits(meta.arity, args.len()) {
        return Err(WRONG_ARITY);
    }
    if meta.has(flags::NOSCRIPT) {
        return Err("ERR This Redis command is not allowed from script");
    }
    if read_only && meta.has(flags::WRITE) {
        return Err("ERR Write commands are not allowed from read-only scripts.");
    }
    let result = match meta.name {
        "time" => {
            time(reply);
            Ok(())
        }
        "ping" => match args.len() {
            1 => {
                reply.simple("PONG");
                Ok(())
            }
            2 => {
                reply.bulk(args.get(1));
                Ok(())
            }
            _ => Err(CmdError::WrongArity("ping")),
        },
        "echo" => {
            reply.bulk(args.get(1));
            Ok(())
        }
        "select" => select(engine, ctx, args, reply),
        _ => return Err(UNKNOWN),
    };
    if let Err(e) = result {
        e.write(reply);
    }
    Ok(())
}

/// TIME: seconds and microseconds of the wall clock, as two bulk strings.
fn time(reply: &mut Reply<'_>) {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    reply.array(2);
    reply.bulk(now.as_secs().to_string().as_bytes());
    reply.bulk(now.subsec_micros().to_string().as_bytes());
}

/// SELECT: the script's database from here on (the caller's comes back after it).
fn select(
    engine: &Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> Result<(), CmdError> {
    let index = parse_i64(args.get(1)).ok_or(CmdError::NotInteger)?;
    if index < 0 || index as usize >= engine.db_count() {
        return Err(CmdError::DbIndexOutOfRange);
    }
    ctx.db = index as usize;
    reply.ok();
    Ok(())
}
