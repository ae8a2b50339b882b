//! Server commands a script may call (`redis.call('TIME')` and the like).
//!
//! The engine's table holds keyspace commands only; the server's rows (connection,
//! server administration) live in the server crate. The server hands the engine a
//! lookup of its rows at start ([`set_server_commands`]), so a script's call of a
//! server command is checked as Redis checks it: arity, then the `noscript` flag
//! (`This Redis command is not allowed from script`), then read-only scripts. The
//! commands scripts commonly use are answered here: TIME (BullMQ stamps jobs with
//! it), PING, ECHO and SELECT (which, as in Redis 7, lasts until the script ends:
//! the caller's database is restored), and, through the shard's [`ScriptHost`],
//! those that need the rest of the server: PUBLISH / SPUBLISH (counted now from
//! every shard's subscriptions, delivered by the server after the script: see
//! [`crate::command::Published`]), DBSIZE's other shards, KEYS / FLUSHDB /
//! FLUSHALL / SWAPDB on every shard ([`EVERY_SHARD`]), SCAN and RANDOMKEY where a
//! client's would go ([`SPREAD`]), and the commands the host
//! answers from what every shard shares and the engine (LASTSAVE, PUBSUB's
//! subcommands, INFO), and MIGRATE, whose keys the host sends and the script
//! deletes (`lua/migrate.rs`). Any other server command answers `Unknown Redis
//! command called from script` (docs/scripting.md).

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::OnceLock;

use ruvio_resp::{Args, Reply};

use crate::args::parse_i64;
use crate::command::{arity_fits, flags, CommandMeta, ExecCtx, Published};
use crate::error::CmdError;
use crate::Engine;

/// The server's row for a command (resolved to its subcommand), or the error of
/// resolving it; `None` for a name the server does not know.
pub type ServerLookup = fn(Args<'_>) -> Option<Result<&'static CommandMeta, CmdError>>;

static SERVER_LOOKUP: OnceLock<ServerLookup> = OnceLock::new();

/// Where `redis.log` writes: the server log, given the level (Redis's `LL_*`,
/// 0 debug .. 3 warning) and the message.
pub type LogSink = fn(u8, &str);

static LOG_SINK: OnceLock<LogSink> = OnceLock::new();

/// Give scripts the server log (called once at start).
pub fn set_log_sink(sink: LogSink) {
    let _ = LOG_SINK.set(sink);
}

/// `redis.log`'s message at `level`, to the server log if one was given.
pub(super) fn log(level: u8, message: &str) {
    if let Some(sink) = LOG_SINK.get() {
        sink(level, message);
    }
}

/// Where a script's commands are shown while a client is in MONITOR mode: the
/// database and the arguments of each command a script runs (Redis feeds its
/// monitors every `redis.call` as `[db lua]`).
pub type MonitorSink = fn(usize, Args<'_>);

static MONITOR_SINK: OnceLock<MonitorSink> = OnceLock::new();

/// Whether a MONITOR is attached anywhere in the server: the one test a script's
/// call pays while none is.
static MONITORED: AtomicBool = AtomicBool::new(false);

/// Give scripts the server's MONITOR feed (called once at start).
pub fn set_monitor_sink(sink: MonitorSink) {
    let _ = MONITOR_SINK.set(sink);
}

/// Whether scripts' commands go to the MONITOR feed (the server says so as the
/// first monitor attaches and the last leaves).
pub fn set_monitored(on: bool) {
    MONITORED.store(on, Relaxed);
}

/// Show a script's command `args`, run in database `db`, to the monitors.
#[inline]
pub(super) fn monitor(db: usize, args: Args<'_>) {
    if MONITORED.load(Relaxed) {
        if let Some(sink) = MONITOR_SINK.get() {
            sink(db, args);
        }
    }
}

/// The server's row for `args`, when the server gave its lookup.
pub(super) fn lookup(args: Args<'_>) -> Option<Result<&'static CommandMeta, CmdError>> {
    SERVER_LOOKUP.get().and_then(|lookup| lookup(args))
}

/// Give scripts the server's command rows (called once at start; later calls keep
/// the first lookup, which is the same function).
pub fn set_server_commands(lookup: ServerLookup) {
    let _ = SERVER_LOOKUP.set(lookup);
}

/// What a script's server commands need from the server around the engine: one
/// per shard thread ([`set_script_host`]).
pub trait ScriptHost {
    /// How many subscribers a message on `channel` reaches now (pattern
    /// subscribers included for a plain channel), counted as the server counts a
    /// client's PUBLISH (`shard_channel`: SPUBLISH's); `None` for a shard channel
    /// of another node (per-shard mode), which a script may not publish to.
    fn receivers(&self, shard_channel: bool, channel: &[u8]) -> Option<u64>;
    /// Keys in database `db` on the shards other than this one (as they last
    /// published them), less those of theirs borrowed here for the running script.
    fn keys_elsewhere(&self, db: usize) -> u64;
    /// Answer server command `name` (its row's name: `lastsave`, `pubsub|numsub`,
    /// `info` ...) from what every shard shares and the script's `engine`; `None`
    /// for a command the host cannot answer from a script.
    fn call(
        &self,
        engine: &Engine,
        name: &str,
        args: Args<'_>,
        reply: &mut Reply<'_>,
    ) -> Option<Result<(), CmdError>>;
    /// MIGRATE `args` from a script: send the keys of database `db` (as they
    /// are at `now_ms`) to the target, as a client's MIGRATE sends them; the
    /// keys the target took, which the script then deletes as a DEL, and the
    /// reply.
    fn migrate(&self, engine: &Engine, db: usize, now_ms: u64, args: Args<'_>) -> Migrated;
    /// A script's call names keys it did not declare (`call`): bring those of
    /// other shards into `engine` for the rest of the script, or say why not.
    fn reach(&self, engine: &mut Engine, call: Reaching<'_>) -> Reach;
    /// A script's call of a command each shard answers for its part (KEYS,
    /// FLUSHDB, FLUSHALL: [`EVERY_SHARD`]): the other shards' replies in shard
    /// order (none for a node of a cluster), or why not.
    fn elsewhere(&self, call: Elsewhere<'_>) -> Result<Vec<Vec<u8>>, Reach>;
    /// A script's SCAN or RANDOMKEY ([`SPREAD`]): the whole reply, from the shards
    /// the cursor or a weighted pick names, this one answering through `here`; or
    /// why not.
    fn spread(
        &self,
        call: Spreading<'_>,
        here: &mut dyn FnMut(Args<'_>) -> Vec<u8>,
    ) -> Result<Vec<u8>, Reach>;
    /// The server is a read-only replica: a script's write calls answer
    /// `-READONLY` (Redis's scriptVerifyWriteCommandAllow).
    fn refuses_writes(&self) -> bool {
        false
    }
    /// The server is a replica whose link is down under
    /// `replica-serve-stale-data no`: a script's calls of commands without the
    /// `stale` flag are refused (Redis's scriptVerifyAllowStale).
    fn refuses_stale(&self) -> bool {
        false
    }
}

/// What a script's MIGRATE did ([`ScriptHost::migrate`]).
#[derive(Debug)]
pub struct Migrated {
    /// The keys the target accepted: deleted by the script as `DEL` (none with
    /// COPY), which is how Redis propagates a MIGRATE.
    pub moved: Vec<Vec<u8>>,
    /// The call's reply once they are deleted: a status (`OK`, `NOKEY`) or
    /// an error (one after some keys moved deletes those all the same).
    pub reply: Result<&'static str, CmdError>,
}

/// The commands a script runs on every shard (forward mode), whose parts merge
/// into one reply ([`merge_parts`]).
pub(super) const EVERY_SHARD: &[&str] = &["keys", "flushdb", "flushall", "swapdb"];

/// The error of [`Reach::Unsupported`].
pub(super) const SWAPDB_HOLDING: &[u8] =
    b"ERR SWAPDB is not supported in a script that holds keys of other shards";

/// The commands a script runs on the shards that hold their answer: SCAN (the
/// shard its cursor names, then the next ones) and RANDOMKEY (a shard picked by its
/// number of keys), as the server routes a client's ([`ScriptHost::spread`]).
pub(super) const SPREAD: &[&str] = &["scan", "randomkey"];

/// A script's call of one of [`SPREAD`] ([`ScriptHost::spread`]).
#[derive(Clone, Copy, Debug)]
pub struct Spreading<'a> {
    /// The call, as for [`EVERY_SHARD`].
    pub call: Elsewhere<'a>,
    /// Keys of the call's database in this shard's keyspace.
    pub here_keys: u64,
    /// A random number for RANDOMKEY's pick of a shard.
    pub pick: u32,
}

/// A script's call of one of [`EVERY_SHARD`] ([`ScriptHost::elsewhere`]).
#[derive(Clone, Copy, Debug)]
pub struct Elsewhere<'a> {
    /// The script's database at the call.
    pub db: usize,
    /// The command.
    pub args: Args<'a>,
    /// The script's protocol (`redis.setresp`) is RESP3.
    pub resp3: bool,
    /// The script has changed something already (then it cannot start over).
    pub wrote: bool,
}

/// A script's call of keys it did not declare ([`ScriptHost::reach`]).
#[derive(Clone, Copy, Debug)]
pub struct Reaching<'a> {
    /// Their database.
    pub db: usize,
    /// Their names.
    pub keys: &'a [&'a [u8]],
    /// Some are outside the slots of the declared keys (what Redis Cluster
    /// refuses; the others are in a declared key's slot, so on its shard).
    pub outside: bool,
    /// The script has changed something already (then it cannot start over).
    pub wrote: bool,
}

/// What a script's call of undeclared keys of other shards gets ([`ScriptHost::reach`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reach {
    /// The keys are here now, until the script ends.
    Here,
    /// The script stops at once, changes nothing more, and runs again from its
    /// start where it can reach every key (the server discards this run's reply).
    StartOver,
    /// Redis Cluster's error: the keys stay where they are.
    Refused,
    /// SWAPDB while the script holds keys of other shards (they would go home to
    /// the wrong database): [`SWAPDB_HOLDING`].
    Unsupported,
}

thread_local! {
    static HOST: RefCell<Option<Box<dyn ScriptHost>>> = const { RefCell::new(None) };
}

/// Give this shard thread's scripts the server around them (called at shard start).
pub fn set_script_host(host: Box<dyn ScriptHost>) {
    HOST.with(|h| *h.borrow_mut() = Some(host));
}

/// `f` of this thread's host; `None` for an engine alone (unit tests, tools).
fn with_host<R>(f: impl FnOnce(&dyn ScriptHost) -> R) -> Option<R> {
    HOST.with(|h| h.borrow().as_deref().map(f))
}

/// [`ScriptHost::migrate`] of this thread's host; `None` for an engine alone.
pub(super) fn migrate(engine: &Engine, db: usize, now_ms: u64, args: Args<'_>) -> Option<Migrated> {
    with_host(|h| h.migrate(engine, db, now_ms, args))
}

/// [`ScriptHost::reach`] of this thread's host; an engine alone refuses.
pub(super) fn reach(engine: &mut Engine, call: Reaching<'_>) -> Reach {
    with_host(|h| h.reach(engine, call)).unwrap_or(Reach::Refused)
}

/// Redis's `shared.roslaveerr`: a read-only replica's answer to a write, a
/// script's write call included.
pub const READONLY_REPLICA: &[u8] = b"READONLY You can't write against a read only replica.";

/// Redis's error for a script's call refused on a stale replica.
pub const STALE_REPLICA: &[u8] = b"ERR Can not execute the command on a stale replica";

/// [`ScriptHost::refuses_stale`] of this thread's host; an engine alone is never
/// stale.
pub(super) fn refuses_stale() -> bool {
    with_host(|h| h.refuses_stale()).unwrap_or(false)
}

/// [`ScriptHost::refuses_writes`] of this thread's host; an engine alone writes.
pub(super) fn refuses_writes() -> bool {
    with_host(|h| h.refuses_writes()).unwrap_or(false)
}

/// [`ScriptHost::elsewhere`] of this thread's host; an engine alone has no other
/// shard.
pub(super) fn elsewhere(call: Elsewhere<'_>) -> Result<Vec<Vec<u8>>, Reach> {
    with_host(|h| h.elsewhere(call)).unwrap_or(Ok(Vec::new()))
}

/// [`ScriptHost::spread`] of this thread's host; an engine alone answers here.
pub(super) fn spread(
    call: Spreading<'_>,
    here: &mut dyn FnMut(Args<'_>) -> Vec<u8>,
) -> Result<Vec<u8>, Reach> {
    with_host(|h| h.spread(call, &mut *here)).unwrap_or_else(|| Ok(here(call.call.args)))
}

/// `here`, this shard's reply to one of [`EVERY_SHARD`], becomes the whole
/// reply with the other shards' `parts`: KEYS' arrays joined, FLUSHDB's and
/// FLUSHALL's `+OK` once; an error of any part is the reply.
pub(super) fn merge_parts(here: &mut Vec<u8>, mut parts: Vec<Vec<u8>>) {
    // A shard that did not answer is exiting with the process.
    parts.retain(|p| !p.is_empty());
    if parts.is_empty() || here.first() == Some(&b'-') {
        return;
    }
    if let Some(error) = parts.iter().find(|p| p.first() != Some(&here[0])) {
        *here = error.clone();
        return;
    }
    if here.first() != Some(&b'*') {
        return; // +OK from every shard (FLUSHDB, FLUSHALL, SWAPDB)
    }
    let mut total = 0u64;
    let mut bodies = Vec::new();
    for part in std::iter::once(&*here).chain(parts.iter()) {
        let Some(end) = part.iter().position(|&b| b == b'\r') else {
            continue;
        };
        total += std::str::from_utf8(&part[1..end])
            .ok()
            .and_then(|n| n.parse::<u64>().ok())
            .unwrap_or(0);
        bodies.extend_from_slice(part.get(end + 2..).unwrap_or_default());
    }
    here.clear();
    here.push(b'*');
    here.extend_from_slice(total.to_string().as_bytes());
    here.extend_from_slice(b"\r\n");
    here.extend_from_slice(&bodies);
}

/// DBSIZE from a script: this shard's keys plus the other shards' (a whole
/// server's count in forward mode, as Redis answers; the node's own in per-shard
/// mode, whose host reports no other shard).
pub(super) fn dbsize(here: usize, db: usize) -> u64 {
    here as u64 + with_host(|h| h.keys_elsewhere(db)).unwrap_or(0)
}

/// Commands Redis marks `may-replicate` that a read-only script may not call:
/// PUBLISH and SPUBLISH (COMMAND INFO does not list the flag for them).
const PUBLISHING: &[&str] = &["publish", "spublish"];

pub(super) const UNKNOWN: &str = "ERR Unknown Redis command called from script";
const WRONG_ARITY: &str = "ERR Wrong number of args calling Redis command from script";

/// The server's row for a script's call `args`, checked as Redis checks it, or
/// the error `redis.call` reports without running it.
pub(super) fn checked(
    args: Args<'_>,
    read_only: bool,
) -> Result<&'static CommandMeta, &'static str> {
    let meta = match lookup(args) {
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
    super::acl::check_call(meta, args)?;
    if read_only
        && (meta.has(flags::WRITE | flags::MAY_REPLICATE) || PUBLISHING.contains(&meta.name))
    {
        return Err("ERR Write commands are not allowed from read-only scripts.");
    }
    Ok(meta)
}

/// Run server command `args` (its row `meta`, [`checked`]) for a script into
/// `reply`, or the error `redis.call` reports without running it. MIGRATE is the
/// script's own (`lua.rs`): it deletes keys.
pub(super) fn call(
    engine: &Engine,
    ctx: &mut ExecCtx,
    meta: &'static CommandMeta,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> Result<(), &'static str> {
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
        "publish" | "spublish" => {
            publish(ctx, meta.name == "spublish", args, reply)?;
            monitor(ctx.db, args);
            return Ok(());
        }
        name => match with_host(|h| h.call(engine, name, args, reply)).flatten() {
            Some(result) => result,
            None => return Err(UNKNOWN),
        },
    };
    if let Err(e) = result {
        e.write(reply);
    }
    // After the call, as Redis feeds it: a SELECT shows the database it chose.
    monitor(ctx.db, args);
    Ok(())
}

/// PUBLISH / SPUBLISH: the receivers a client's publication would reach now; the
/// message itself goes out once the script is over (the engine cannot reach the
/// subscribers' connections: the server delivers the command's `published`). A
/// shard channel of another node is refused as Redis Cluster refuses a non-local
/// key.
fn publish(
    ctx: &mut ExecCtx,
    shard_channel: bool,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> Result<(), &'static str> {
    let (channel, message) = (args.get(1), args.get(2));
    let receivers = with_host(|h| h.receivers(shard_channel, channel)).unwrap_or(Some(0));
    let Some(receivers) = receivers else {
        return Err("ERR Script attempted to access a non local key in a cluster node");
    };
    ctx.effects.published.push(Published {
        shard_channel,
        channel: channel.to_vec(),
        message: message.to_vec(),
    });
    reply.int(receivers as i64);
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
