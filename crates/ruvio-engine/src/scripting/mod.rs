//! Lua scripting: EVAL, EVALSHA, EVAL_RO, EVALSHA_RO and SCRIPT LOAD / EXISTS /
//! FLUSH / KILL, on the reference Lua 5.1 that Redis embeds (through `mlua`), with
//! Redis' libraries (`cjson`, `bit`, `cmsgpack`, `struct`), long scripts' -BUSY and
//! SCRIPT KILL ([`busy`]) and the server commands scripts may call ([`server_cmds`]).
//!
//! Why engine handlers: a script is keyspace work. Its row declares its keys with
//! `NumKeys { at: 2 }`, so the dispatcher routes it like any multi-key command: to
//! the shard owning the keys (forward mode), MOVED / CROSSSLOT by slot (per-shard
//! mode), or, keys on several shards in forward mode, it runs on the client's shard
//! with the declared keys borrowed. It then runs to completion on that shard (atomic),
//! and every `redis.call` goes through the same engine handlers and `ctx` as a
//! client's command, so blocked clients are woken and `dirty` counts as Redis.
//!
//! One Lua state per shard thread ([`lua`]), created at the first script; script
//! bodies live in one process-wide cache (SCRIPT LOAD on any shard serves EVALSHA on
//! every shard), compiled lazily per shard. SCRIPT FLUSH empties the cache and bumps
//! a generation: each shard drops its state before its next script.
//!
//! Functions (FUNCTION LOAD's libraries, FCALL, FCALL_RO) are [`functions`]: a
//! second Lua state per shard thread, holding every library.

mod acl;
mod api;
mod busy;
mod cjson_decode;
mod cmsgpack;
pub mod functions;
mod libs;
mod lua;
mod luaaux;
mod luastruct;
mod resp;
mod server_cmds;

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use ruvio_resp::{Args, Reply};

use crate::args::eq_ci;
use crate::command::{
    command, flags::*, reply_help, CmdResult, EngineCommand, ExecCtx, KeySpec, Outcome,
};
use crate::error::CmdError;
use crate::Engine;

pub use acl::{set_acl_check, AclCheck};
pub use busy::{
    kill, script_writes, set_script_watches, set_serve_while_busy, ScriptWatches, WatchWhileBusy,
};
pub use lua::set_every_slot_local;
pub use lua::set_oom_at_start;
pub use lua::take_start_over;
pub use server_cmds::{
    set_log_sink, set_monitor_sink, set_monitored, set_script_host, set_server_commands, Elsewhere,
    LogSink, Migrated, MonitorSink, Reach, Reaching, ScriptHost, ServerLookup, Spreading,
    READONLY_REPLICA,
};

/// Bytes of the cached script bodies and their SHA1 names (MEMORY STATS'
/// `lua.caches`).
pub fn cache_bytes() -> usize {
    let cache = cache().lock().unwrap_or_else(|e| e.into_inner());
    cache.iter().map(|(sha, body)| sha.len() + body.len()).sum()
}

/// Script bodies by their lower-case hex SHA1, shared by every shard.
fn cache() -> &'static Mutex<HashMap<String, Arc<[u8]>>> {
    static CACHE: OnceLock<Mutex<HashMap<String, Arc<[u8]>>>> = OnceLock::new();
    CACHE.get_or_init(Default::default)
}

/// Bumped by SCRIPT FLUSH: a shard whose Lua state is older starts a fresh one.
static GENERATION: AtomicU64 = AtomicU64::new(0);

/// The lower-case hex SHA1 of `body` (Redis' `sha1hex`).
pub fn sha1_hex(body: &[u8]) -> String {
    sha1_smol::Sha1::from(body).digest().to_string()
}

/// Store `body` in the cache; its SHA1 and the cached copy.
fn remember(body: &[u8]) -> (String, Arc<[u8]>) {
    let sha = sha1_hex(body);
    let mut cache = cache().lock().unwrap_or_else(|e| e.into_inner());
    let stored = cache.entry(sha.clone()).or_insert_with(|| Arc::from(body));
    (sha, stored.clone())
}

/// The EVAL bodies this shard has cached in one generation, with their SHA1: a
/// repeated EVAL skips hashing its body and the shared cache's lock.
#[derive(Default)]
struct EvalMemo {
    generation: u64,
    shas: ahash::HashMap<Arc<[u8]>, Rc<str>>,
}

thread_local! {
    static EVALED: RefCell<EvalMemo> = RefCell::default();
}

/// The SHA1 of an EVAL's `body`, cached on every shard (as `remember`), looked up in
/// this shard's memo first.
fn remember_eval(generation: u64, body: &[u8]) -> Rc<str> {
    EVALED.with(|memo| {
        let mut memo = memo.borrow_mut();
        if memo.generation != generation {
            *memo = EvalMemo {
                generation,
                shas: Default::default(),
            };
        }
        if let Some(sha) = memo.shas.get(body) {
            return sha.clone();
        }
        let (sha, stored) = remember(body);
        let sha: Rc<str> = sha.into();
        memo.shas.insert(stored, sha.clone());
        sha
    })
}

/// The cached body of `sha` (any case).
fn lookup(sha: &[u8]) -> Option<(String, Arc<[u8]>)> {
    if sha.len() != 40 {
        return None;
    }
    let sha = String::from_utf8(sha.to_ascii_lowercase()).ok()?;
    let cache = cache().lock().unwrap_or_else(|e| e.into_inner());
    cache.get(&sha).cloned().map(|body| (sha, body))
}

/// The number of keys an EVAL declares, checked as Redis does.
fn declared_keys(args: Args<'_>) -> Result<usize, CmdError> {
    let n = crate::args::parse_i64(args.get(2)).ok_or(CmdError::NotInteger)?;
    if n < 0 {
        return Err(CmdError::ScriptNegativeKeys);
    }
    if n as u64 > (args.len() - 3) as u64 {
        return Err(CmdError::ScriptTooManyKeys);
    }
    Ok(n as usize)
}

/// What a `#!lua flags=...` first line says (Redis 7's script flags).
#[derive(Clone, Copy, Default)]
struct Shebang {
    /// The body starts with a shebang line.
    present: bool,
    /// `no-writes`: the script runs as read-only.
    no_writes: bool,
    /// `allow-oom`: runs (and writes) past `maxmemory` (see [`denies_oom`]).
    allow_oom: bool,
    /// `no-cluster`: refused in cluster mode (per-shard mode).
    no_cluster: bool,
    /// `allow-cross-slot-keys`: in cluster mode, may reach keys of several slots
    /// of its node.
    allow_cross_slot: bool,
    /// `allow-stale`: runs on a replica whose link is down under
    /// `replica-serve-stale-data no` (see [`runs_stale`]).
    allow_stale: bool,
}

/// Flags a shebang may name.
const SHEBANG_FLAGS: &[&str] = &[
    "no-writes",
    "allow-oom",
    "allow-stale",
    "no-cluster",
    "allow-cross-slot-keys",
];

/// Parse the shebang of `body`, with Redis' errors.
fn shebang(body: &[u8]) -> Result<Shebang, CmdError> {
    if !body.starts_with(b"#!") {
        return Ok(Shebang::default());
    }
    let Some(end) = body.iter().position(|&b| b == b'\n') else {
        return Err(CmdError::quoted("ERR Invalid script shebang", b"", ""));
    };
    let line = &body[..end];
    let mut words = line.split(|&b| b == b' ').filter(|w| !w.is_empty());
    let engine = words.next().unwrap_or_default();
    if engine != b"#!lua" {
        return Err(CmdError::quoted(
            "ERR Unexpected engine in script shebang: ",
            engine,
            "",
        ));
    }
    let mut parsed = Shebang {
        present: true,
        ..Shebang::default()
    };
    for word in words {
        let Some(list) = word.strip_prefix(b"flags=") else {
            return Err(CmdError::quoted(
                "ERR Unknown lua shebang option: ",
                word,
                "",
            ));
        };
        for flag in list.split(|&b| b == b',').filter(|f| !f.is_empty()) {
            if !SHEBANG_FLAGS.iter().any(|f| f.as_bytes() == flag) {
                return Err(CmdError::quoted(
                    "ERR Unexpected flag in script shebang: ",
                    flag,
                    "",
                ));
            }
            parsed.no_writes |= flag == b"no-writes";
            parsed.allow_oom |= flag == b"allow-oom";
            parsed.no_cluster |= flag == b"no-cluster";
            parsed.allow_cross_slot |= flag == b"allow-cross-slot-keys";
            parsed.allow_stale |= flag == b"allow-stale";
        }
    }
    Ok(parsed)
}

/// Redis's refusal of a `no-cluster` script or function in cluster mode.
pub(crate) fn no_cluster_error() -> CmdError {
    CmdError::quoted(
        "ERR Can not run script on cluster, 'no-cluster' flag is set.",
        b"",
        "",
    )
}

/// Whether this EVAL / EVALSHA (`args`) is refused past `maxmemory`, as Redis 7
/// refuses a script with a shebang that neither allows OOM nor promises no
/// writes (a script without one is EVAL's own flags: not refused up front). An
/// unknown SHA or a bad shebang is the command's own error, later.
pub fn denies_oom(args: Args<'_>) -> bool {
    let body = if args.get(0).eq_ignore_ascii_case(b"evalsha")
        || args.get(0).eq_ignore_ascii_case(b"evalsha_ro")
    {
        match lookup(args.get(1)) {
            Some((_, body)) => body.to_vec(),
            None => return false,
        }
    } else if args.len() > 1 {
        args.get(1).to_vec()
    } else {
        return false;
    };
    match shebang(&body) {
        Ok(flags) => flags.present && !flags.allow_oom && !flags.no_writes,
        Err(_) => false,
    }
}

/// Whether this EVAL / EVALSHA (`args`) counts as a write before it runs, as
/// Redis 7's `scriptFlagsToCmdFlags`: a script with a shebang that does not
/// promise `no-writes` (a script without one has EVAL's own flags: not a write).
pub fn may_write(args: Args<'_>) -> bool {
    let body = if args.get(0).eq_ignore_ascii_case(b"evalsha")
        || args.get(0).eq_ignore_ascii_case(b"evalsha_ro")
    {
        match lookup(args.get(1)) {
            Some((_, body)) => body.to_vec(),
            None => return false,
        }
    } else if args.len() > 1 {
        args.get(1).to_vec()
    } else {
        return false;
    };
    match shebang(&body) {
        Ok(flags) => flags.present && !flags.no_writes,
        Err(_) => false,
    }
}

/// Whether this EVAL / EVALSHA (`args`) gets past a stale replica's check
/// before it runs (`replica-serve-stale-data no`, the link down), as Redis 7's
/// `scriptFlagsToCmdFlags`: a script with a shebang only with `allow-stale`. A
/// script without one passes as EVAL's own `stale` flag lets it, and is refused
/// as it starts ([`run`], Redis's scriptPrepareForRun); an unknown SHA or a bad
/// shebang passes to be the command's own error.
pub fn runs_stale(args: Args<'_>) -> bool {
    let body = if args.get(0).eq_ignore_ascii_case(b"evalsha")
        || args.get(0).eq_ignore_ascii_case(b"evalsha_ro")
    {
        match lookup(args.get(1)) {
            Some((_, body)) => body.to_vec(),
            None => return true,
        }
    } else if args.len() > 1 {
        args.get(1).to_vec()
    } else {
        return true;
    };
    match shebang(&body) {
        Ok(flags) => !flags.present || flags.allow_stale,
        Err(_) => true,
    }
}

/// Redis's `shared.masterdownerr`: a stale replica refuses the script.
fn master_down_error() -> CmdError {
    CmdError::quoted(
        "MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.",
        b"",
        "",
    )
}

/// Run `body` (SHA1 `sha`) with the keys and arguments of `args`.
fn run(
    engine: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    reply: &mut Reply<'_>,
    sha: &str,
    body: &[u8],
    read_only: bool,
) -> CmdResult {
    let numkeys = declared_keys(args)?;
    let flags = shebang(body)?;
    if read_only && flags.present && !flags.no_writes {
        return Err(CmdError::quoted(
            "ERR Can not execute a script with write flag using *_ro command.",
            b"",
            "",
        ));
    }
    let read_only = read_only || flags.no_writes;
    let cluster = engine.config().cluster_enabled;
    if cluster && flags.no_cluster {
        return Err(no_cluster_error());
    }
    // EVAL compatibility mode (no shebang) on a stale replica: Redis's
    // scriptPrepareForRun refuses it here (a script with one was judged by its
    // flags before it ran: [`runs_stale`]).
    if !flags.present && server_cmds::refuses_stale() {
        return Err(master_down_error());
    }
    let keys: Vec<&[u8]> = (3..3 + numkeys).map(|i| args.get(i)).collect();
    let argv: Vec<&[u8]> = (3 + numkeys..args.len()).map(|i| args.get(i)).collect();
    let call = lua::Call {
        sha,
        body,
        keys: &keys,
        argv: &argv,
        read_only,
        // Scripts without a shebang keep Redis 7.0's leniency (EVAL compatibility
        // mode): they may reach keys of several slots of the node.
        one_slot: cluster && flags.present && !flags.allow_cross_slot,
        allow_oom: flags.allow_oom,
        callback: None,
        command: args,
    };
    let generation = GENERATION.load(Ordering::Acquire);
    let may_block = std::mem::replace(&mut ctx.may_block, false);
    // SELECT inside a script lasts until it ends (Redis 7).
    let db = ctx.db;
    let result = lua::run(engine, ctx, reply, generation, &call);
    ctx.db = db;
    ctx.may_block = may_block;
    result?;
    Ok(Outcome::Done)
}

fn eval_generic(
    engine: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    reply: &mut Reply<'_>,
    ro: bool,
) -> CmdResult {
    declared_keys(args)?;
    let body = args.get(1);
    let sha = remember_eval(GENERATION.load(Ordering::Acquire), body);
    run(engine, ctx, args, reply, &sha, body, ro)
}

fn evalsha_generic(
    engine: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    reply: &mut Reply<'_>,
    ro: bool,
) -> CmdResult {
    declared_keys(args)?;
    let (sha, body) = lookup(args.get(1)).ok_or(CmdError::NoScript)?;
    run(engine, ctx, args, reply, &sha, &body, ro)
}

fn eval(
    engine: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> CmdResult {
    eval_generic(engine, ctx, args, reply, false)
}

fn eval_ro(
    engine: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> CmdResult {
    eval_generic(engine, ctx, args, reply, true)
}

fn evalsha(
    engine: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> CmdResult {
    evalsha_generic(engine, ctx, args, reply, false)
}

fn evalsha_ro(
    engine: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> CmdResult {
    evalsha_generic(engine, ctx, args, reply, true)
}

/// SCRIPT LOAD: cache the body (compiled on this shard, so a syntax error is
/// reported now, as Redis does) and answer its SHA1.
fn script_load(
    _: &mut Engine,
    _: &mut ExecCtx,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> CmdResult {
    let body = args.get(2);
    let sha = sha1_hex(body);
    shebang(body)?;
    lua::compile_check(GENERATION.load(Ordering::Acquire), &sha, body)?;
    remember(body);
    reply.bulk(sha.as_bytes());
    Ok(Outcome::Done)
}

/// SCRIPT EXISTS sha...: 1 or 0 each.
fn script_exists(
    _: &mut Engine,
    _: &mut ExecCtx,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> CmdResult {
    reply.array(args.len() - 2);
    for i in 2..args.len() {
        reply.int(lookup(args.get(i)).is_some() as i64);
    }
    Ok(Outcome::Done)
}

/// SCRIPT FLUSH [ASYNC|SYNC]: forget every script on every shard.
fn script_flush(
    _: &mut Engine,
    _: &mut ExecCtx,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> CmdResult {
    match args.len() {
        2 => {}
        3 if eq_ci(args.get(2), "async") || eq_ci(args.get(2), "sync") => {}
        _ => return Err(CmdError::ScriptFlushArgs),
    }
    cache().lock().unwrap_or_else(|e| e.into_inner()).clear();
    GENERATION.fetch_add(1, Ordering::AcqRel);
    reply.ok();
    Ok(Outcome::Done)
}

/// SCRIPT KILL: stop the EVAL script running on any shard (see [`busy`]).
fn script_kill(_: &mut Engine, _: &mut ExecCtx, _: Args<'_>, reply: &mut Reply<'_>) -> CmdResult {
    kill(false)?;
    reply.ok();
    Ok(Outcome::Done)
}

fn script_help(_: &mut Engine, _: &mut ExecCtx, _: Args<'_>, reply: &mut Reply<'_>) -> CmdResult {
    reply_help(
        reply,
        b"SCRIPT",
        &[
            "EXISTS <sha1> [<sha1> ...]",
            "    Return information about the existence of the scripts in the script cache.",
            "FLUSH [ASYNC|SYNC]",
            "    Flush the Lua scripts cache. Very dangerous on replicas.",
            "    When called without the optional mode argument, the behavior is determined by the",
            "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
            "    * ASYNC: Asynchronously flush the scripts cache.",
            "    * SYNC: Synchronously flush the scripts cache.",
            "KILL",
            "    Kill the currently executing Lua script.",
            "LOAD <script>",
            "    Load a script into the scripts cache without executing it.",
        ],
    );
    Ok(Outcome::Done)
}

/// SCRIPT's subcommands.
#[rustfmt::skip]
pub const SCRIPT_SUBCOMMANDS: &[EngineCommand] = &[
    command!("script|load", 3, NOSCRIPT | STALE, KeySpec::NONE, ["slow", "scripting"], "scripting", "2.6.0",
        "Load the specified Lua script into the script cache.", "O(N) with N being the length in bytes of the script body.", script_load),
    command!("script|exists", -3, NOSCRIPT, KeySpec::NONE, ["slow", "scripting"], "scripting", "2.6.0",
        "Check existence of scripts in the script cache.", "O(N) with N being the number of scripts to check (so checking a single script is an O(1) operation).", script_exists),
    command!("script|flush", -2, NOSCRIPT, KeySpec::NONE, ["slow", "scripting"], "scripting", "2.6.0",
        "Remove all the scripts from the script cache.", "O(N) with N being the number of scripts in cache", script_flush),
    command!("script|kill", 2, NOSCRIPT | ALLOW_BUSY, KeySpec::NONE, ["slow", "scripting"], "scripting", "2.6.0",
        "Kill the script currently in execution.", "O(1)", script_kill),
    command!("script|help", 2, LOADING | STALE, KeySpec::NONE, ["slow", "scripting"], "scripting", "5.0.0",
        "Show helpful text about the different subcommands", "O(1)", script_help),
];

/// The scripting family's command table (Redis 7's arity, flags, keys, ACL
/// categories and docs).
#[rustfmt::skip]
pub const COMMANDS: &[EngineCommand] = &[
    command!("eval", -3, NOSCRIPT | SKIP_MONITOR | NO_MANDATORY_KEYS | STALE, KeySpec::NUMKEYS_AT_2,
        ["slow", "scripting"], "scripting", "2.6.0", "Execute a Lua script server side",
        "Depends on the script that is executed.", eval),
    command!("evalsha", -3, NOSCRIPT | SKIP_MONITOR | NO_MANDATORY_KEYS | STALE, KeySpec::NUMKEYS_AT_2,
        ["slow", "scripting"], "scripting", "2.6.0", "Execute a Lua script server side",
        "Depends on the script that is executed.", evalsha),
    command!("eval_ro", -3, NOSCRIPT | SKIP_MONITOR | NO_MANDATORY_KEYS | STALE | READONLY, KeySpec::NUMKEYS_AT_2,
        ["slow", "scripting"], "scripting", "7.0.0", "Execute a read-only Lua script server side",
        "Depends on the script that is executed.", eval_ro),
    command!("evalsha_ro", -3, NOSCRIPT | SKIP_MONITOR | NO_MANDATORY_KEYS | STALE | READONLY, KeySpec::NUMKEYS_AT_2,
        ["slow", "scripting"], "scripting", "7.0.0", "Execute a read-only Lua script server side",
        "Depends on the script that is executed.", evalsha_ro),
    command!("script", -2, 0, KeySpec::NONE, ["slow"], "scripting", "2.6.0",
        "A container for Lua scripts management commands", "Depends on subcommand.",
        subcommands = SCRIPT_SUBCOMMANDS),
    command!("fcall", -3, NOSCRIPT | SKIP_MONITOR | NO_MANDATORY_KEYS | STALE, KeySpec::NUMKEYS_AT_2,
        ["slow", "scripting"], "scripting", "7.0.0", "Invoke a function",
        "Depends on the function that is executed.", functions::fcall),
    command!("fcall_ro", -3, NOSCRIPT | SKIP_MONITOR | NO_MANDATORY_KEYS | STALE | READONLY, KeySpec::NUMKEYS_AT_2,
        ["slow", "scripting"], "scripting", "7.0.0", "Invoke a read-only function",
        "Depends on the function that is executed.", functions::fcall_ro),
];
