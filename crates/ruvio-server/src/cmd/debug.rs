//! DEBUG: the subcommands Ruvio keeps (SLEEP, PROTOCOL, SET-ACTIVE-EXPIRE,
//! SET-SKIP-CHECKSUM-VALIDATION, DIGEST, DIGEST-VALUE, OBJECT, LISTPACK, QUICKLIST,
//! LOG, ERROR, RELOAD, POPULATE,
//! EXPORT-RDB, SHARD, HELP).
//!
//! Redis' DEBUG is a grab bag for its test suite; Ruvio implements what clients'
//! tests use (PROTOCOL: one reply of each RESP type; SLEEP: a blocked shard;
//! SET-ACTIVE-EXPIRE: expired keys stay until read), its
//! own EXPORT-RDB, which writes the keyspace as a Redis RDB file, and its own
//! SHARD, the shard serving the connection (tests that need a connection on a
//! given shard).

use super::{Ctx, Server, ServerCommand, ServerResult, SharedReads};
use crate::cmd::client::ask_every_shard;
use crate::config::change::{ConfigChange, ReloadOutcome, RELOAD_WAITS_FOR_SAVE};
use crate::config::PortMode;
use crate::mesh::gather::{Gather, Then};
use crate::mesh::queries::ClientQuery;
use crate::net::conn::Merge;
use ruvio_engine::command::{command, flags::*, reply_help};
use ruvio_engine::debug_digest::KeyReport;
use ruvio_engine::{CmdError, KeySpec};
use ruvio_resp::{Args, Reply};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

/// The DEBUG family's table (its subcommands are `DEBUG_SUBCOMMANDS`).
#[rustfmt::skip]
pub const COMMANDS: &[ServerCommand] = &[
    command!("debug", -2, ADMIN | NOSCRIPT | LOADING | STALE | SUBCOMMANDS_UNLISTED, KeySpec::NONE,
        ["admin", "slow", "dangerous"],
        "server", "1.0.0", "A container for debugging commands", "Depends on subcommand.",
        subcommands = DEBUG_SUBCOMMANDS),
];

/// rows for them; Ruvio gives them rows (DEBUG's flags and categories) so that they
/// are resolved and checked like every other container's.
#[rustfmt::skip]
const DEBUG_SUBCOMMANDS: &[ServerCommand] = &[
    command!("debug|sleep", 3, ADMIN | NOSCRIPT | LOADING | STALE, KeySpec::NONE, ["admin", "slow", "dangerous"],
        "server", "1.0.0", "Stop the server for a number of seconds", "O(1)", debug_sleep),
    command!("debug|protocol", 3, ADMIN | NOSCRIPT | LOADING | STALE, KeySpec::NONE,
        ["admin", "slow", "dangerous"], "server", "1.0.0", "Reply with a test value of a RESP type", "O(1)",
        debug_protocol),
    command!("debug|set-active-expire", 3, ADMIN | NOSCRIPT | LOADING | STALE, KeySpec::NONE,
        ["admin", "slow", "dangerous"], "server", "1.0.0",
        "Turn the active expiry of keys off (0) or on", "O(1)", debug_set_active_expire),
    command!("debug|help", 2, ADMIN | NOSCRIPT | LOADING | STALE, KeySpec::NONE, ["admin", "slow", "dangerous"],
        "server", "1.0.0", "Show helpful text about the different subcommands", "O(1)", debug_help),
    command!("debug|shard", 2, ADMIN | NOSCRIPT | LOADING | STALE, KeySpec::NONE, ["admin", "slow", "dangerous"],
        "server", "1.0.0", "The shard serving the connection (Ruvio's own subcommand)", "O(1)", debug_shard),
    command!("debug|digest", 2, ADMIN | NOSCRIPT | LOADING | STALE, KeySpec::NONE, ["admin", "slow", "dangerous"],
        "server", "1.0.0", "The digest of the whole dataset", "O(N)", debug_digest),
    command!("debug|digest-value", -2, ADMIN | NOSCRIPT | LOADING | STALE, KeySpec::NONE,
        ["admin", "slow", "dangerous"], "server", "1.0.0", "The digest of each key's value", "O(N)",
        debug_digest_value),
    command!("debug|object", 3, ADMIN | NOSCRIPT | LOADING | STALE, KeySpec::NONE, ["admin", "slow", "dangerous"],
        "server", "1.0.0", "Low-level facts about a key's value", "O(N)", debug_object),
    command!("debug|listpack", 3, ADMIN | NOSCRIPT | LOADING | STALE, KeySpec::NONE, ["admin", "slow", "dangerous"],
        "server", "1.0.0", "Print a listpack-encoded value's layout to the server's output", "O(N)",
        debug_listpack),
    command!("debug|quicklist", -3, ADMIN | NOSCRIPT | LOADING | STALE, KeySpec::NONE, ["admin", "slow", "dangerous"],
        "server", "1.0.0", "Print a quicklist's nodes to the server's output", "O(N)", debug_quicklist),
    command!("debug|log", 3, ADMIN | NOSCRIPT | LOADING | STALE, KeySpec::NONE, ["admin", "slow", "dangerous"],
        "server", "1.0.0", "Write a message to the server's log", "O(1)", debug_log),
    command!("debug|error", 3, ADMIN | NOSCRIPT | LOADING | STALE, KeySpec::NONE, ["admin", "slow", "dangerous"],
        "server", "1.0.0", "Reply with an error of the given text", "O(1)", debug_error),
    command!("debug|reload", -2, ADMIN | NOSCRIPT | LOADING | STALE, KeySpec::NONE, ["admin", "slow", "dangerous"],
        "server", "1.0.0", "Save the dataset and load it back", "O(N)", debug_reload),
    command!("debug|quicklist-packed-threshold", 3, ADMIN | NOSCRIPT | LOADING | STALE, KeySpec::NONE,
        ["admin", "slow", "dangerous"], "server", "1.0.0",
        "Validate a quicklist packed-node threshold (no effect in Ruvio)", "O(1)",
        debug_quicklist_packed_threshold),
    command!("debug|populate", -3, ADMIN | NOSCRIPT | LOADING | STALE, KeySpec::NONE, ["admin", "slow", "dangerous"],
        "server", "1.0.0", "Create string keys for tests", "O(N)", debug_populate),
    command!("debug|set-skip-checksum-validation", 3, ADMIN | NOSCRIPT | LOADING | STALE, KeySpec::NONE,
        ["admin", "slow", "dangerous"], "server", "1.0.0",
        "RESTORE without checking payload checksums (1) or with (0)", "O(1)",
        debug_set_skip_checksum_validation),
    command!("debug|change-repl-id", 2, ADMIN | NOSCRIPT | LOADING | STALE, KeySpec::NONE,
        ["admin", "slow", "dangerous"], "server", "1.0.0",
        "Take a new replication ID and forget the second one", "O(1)", debug_change_repl_id),
    command!("debug|export-rdb", 3, ADMIN | NOSCRIPT | LOADING | STALE, KeySpec::NONE,
        ["admin", "slow", "dangerous"], "server", "1.0.0",
        "Write the keyspace as a Redis RDB file (Ruvio's own subcommand)", "O(N)", debug_export_rdb),
];

/// `DEBUG SLEEP seconds`: blocks this shard, as Redis blocks its main thread.
fn debug_sleep<S: Server>(
    _ctx: &mut Ctx<'_, S>,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> ServerResult {
    let secs = std::str::from_utf8(args.get(2))
        .ok()
        .and_then(|s| s.parse::<f64>().ok())
        .unwrap_or(0.0);
    if secs > 0.0 && secs.is_finite() {
        std::thread::sleep(std::time::Duration::from_secs_f64(secs.min(3600.0)));
    }
    reply.ok();
    Ok(())
}

/// `DEBUG CHANGE-REPL-ID`: a new replication ID and no second one (Redis's
/// changeReplicationId and clearReplicationId2): replicas must sync in full.
fn debug_change_repl_id<S: Server>(
    ctx: &mut Ctx<'_, S>,
    _args: Args<'_>,
    reply: &mut Reply<'_>,
) -> ServerResult {
    let core = &*ctx.core;
    let state = core.shared().replication();
    state
        .history(core.shard_id(), core.settings().port_mode)
        .new_history();
    reply.ok();
    Ok(())
}

/// `DEBUG SET-ACTIVE-EXPIRE <0|1>`: with 0 no key is expired in the background
/// (a read still expires it), as Redis' `active_expire_enabled`; the argument is
/// read as C's `atoi` reads it (anything but a non-zero number turns it off). In
/// forward mode every shard follows (one server); in per-shard mode the node only.
fn debug_set_active_expire<S: Server>(
    ctx: &mut Ctx<'_, S>,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> ServerResult {
    let enabled = atoi(args.get(2)) != 0;
    let flags = ctx.core.shared().active_expire();
    match ctx.core.settings().port_mode {
        PortMode::Forward => flags.iter().for_each(|f| f.store(enabled, Relaxed)),
        PortMode::PerShard => flags[ctx.core.shard_id()].store(enabled, Relaxed),
    }
    reply.ok();
    Ok(())
}

/// C's `atoi`: leading spaces, a sign, then digits up to the first other byte (0
/// when there are none); wrapping as the C library does on overflow.
fn atoi(bytes: &[u8]) -> i64 {
    let mut rest = bytes
        .iter()
        .skip_while(|b| b.is_ascii_whitespace())
        .peekable();
    let negative = match rest.peek() {
        Some(b'-') => {
            rest.next();
            true
        }
        Some(b'+') => {
            rest.next();
            false
        }
        _ => false,
    };
    let value = rest.take_while(|b| b.is_ascii_digit()).fold(0i64, |n, &d| {
        n.wrapping_mul(10).wrapping_add(i64::from(d - b'0'))
    });
    if negative {
        value.wrapping_neg()
    } else {
        value
    }
}

/// `DEBUG SHARD`: the index of the shard serving this connection.
fn debug_shard<S: Server>(
    ctx: &mut Ctx<'_, S>,
    _args: Args<'_>,
    reply: &mut Reply<'_>,
) -> ServerResult {
    reply.int(ctx.core.shard_id() as i64);
    Ok(())
}

/// `DEBUG PROTOCOL type`: one reply of each RESP type, for client tests.
fn debug_protocol<S: Server>(
    ctx: &mut Ctx<'_, S>,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> ServerResult {
    let resp3 = ctx.client.proto == ruvio_resp::Protocol::Resp3;
    match args.get(2).to_ascii_lowercase().as_slice() {
        b"string" => reply.bulk(b"Hello World"),
        b"integer" => reply.int(12345),
        // Redis' fixed test value, not an approximation of pi.
        #[allow(clippy::approx_constant)]
        b"double" => reply.double(3.141),
        b"bignum" if resp3 => reply.raw(b"(1234567999999999999999999999999999999\r\n"),
        b"bignum" => reply.bulk(b"1234567999999999999999999999999999999"),
        b"null" => reply.null(),
        b"array" | b"set" => {
            if args.get(2).eq_ignore_ascii_case(b"set") {
                reply.set(3)
            } else {
                reply.array(3)
            }
            (0..3).for_each(|i| reply.int(i));
        }
        b"map" => {
            reply.map(3);
            for i in 0..3 {
                reply.int(i);
                reply.boolean(i == 1);
            }
        }
        b"attrib" | b"push" if !resp3 => return Err(CmdError::Resp2NotSupported),
        b"attrib" => {
            reply.raw(b"|1\r\n$14\r\nkey-popularity\r\n*2\r\n$7\r\nkey:123\r\n:90\r\n");
            reply.bulk(b"Some real reply following the attribute");
        }
        b"push" => {
            reply.push(2);
            reply.bulk(b"server-cpu-usage");
            reply.int(42);
            reply.bulk(b"Some real reply following the push reply");
        }
        b"verbatim" => reply.verbatim("txt", b"This is a verbatim\nstring"),
        b"true" => reply.boolean(true),
        b"false" => reply.boolean(false),
        _ => return Err(CmdError::DebugProtocolType),
    }
    Ok(())
}

/// `DEBUG DIGEST`: Redis's dataset digest (40 hex digits; all zeros for an empty
/// dataset), from every shard in forward mode, from this node in per-shard mode.
fn debug_digest<S: Server>(
    ctx: &mut Ctx<'_, S>,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> ServerResult {
    let merge = Merge::Digest { keys: None };
    ask_every_shard(ctx, args, ClientQuery::DatasetDigest, merge, reply)
}

/// `DEBUG DIGEST-VALUE [key ...]`: each key's value digest (zeros for a missing
/// key; a logically expired key still has its value, as Redis reads its dict).
fn debug_digest_value<S: Server>(
    ctx: &mut Ctx<'_, S>,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> ServerResult {
    let keys: Vec<Vec<u8>> = args.iter().skip(2).map(<[u8]>::to_vec).collect();
    let merge = Merge::Digest {
        // Arguments number far below 2^32.
        keys: Some(keys.len() as u32),
    };
    let query = ClientQuery::ValueDigests {
        db: ctx.client.db,
        keys,
    };
    ask_every_shard(ctx, args, query, merge, reply)
}

/// `DEBUG OBJECT key`: Redis 7.0's line (`Value at:... refcount:... encoding:...
/// serializedlength:... lru:... lru_seconds_idle:...`, quicklist figures after),
/// from whichever shard holds the key; `no such key` when none does.
fn debug_object<S: Server>(
    ctx: &mut Ctx<'_, S>,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> ServerResult {
    debug_key(ctx, args, KeyReport::Object, reply)
}

/// `DEBUG LISTPACK key`: prints the listpack to the server's output and says so;
/// `Not a listpack encoded object.` for other encodings.
fn debug_listpack<S: Server>(
    ctx: &mut Ctx<'_, S>,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> ServerResult {
    debug_key(ctx, args, KeyReport::Listpack, reply)
}

/// `DEBUG QUICKLIST key [0|1]`: prints the quicklist's nodes to the server's output
/// and says so; `Not a quicklist encoded object.` for other encodings.
fn debug_quicklist<S: Server>(
    ctx: &mut Ctx<'_, S>,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> ServerResult {
    // Three or four arguments: the row's arity says at least three.
    if args.len() > 4 {
        return Err(CmdError::subcommand_syntax(args.get(1), "debug"));
    }
    debug_key(ctx, args, KeyReport::Quicklist, reply)
}

/// The DEBUG subcommands about one key, answered by the shard holding it.
fn debug_key<S: Server>(
    ctx: &mut Ctx<'_, S>,
    args: Args<'_>,
    report: KeyReport,
    reply: &mut Reply<'_>,
) -> ServerResult {
    let query = ClientQuery::DebugKey {
        db: ctx.client.db,
        key: args.get(2).to_vec(),
        report,
    };
    ask_every_shard(ctx, args, query, Merge::FoundOrNoSuchKey, reply)
}

/// Redis's DEBUG RELOAD options.
const RELOAD_OPTIONS: &[&str] = &["MERGE", "NOFLUSH", "NOSAVE"];

/// `DEBUG RELOAD`: the dataset written in its RDB form and loaded back in place
/// (`Engine::reload_through_rdb`), as Redis saves its dump, empties and loads it;
/// `+OK` and `DB reloaded by DEBUG RELOAD` in the log. Redis's options (MERGE,
/// NOFLUSH, NOSAVE) work on its dump file, which Ruvio does not keep: they are
/// refused. In forward mode with several shards every shard reloads its own
/// keyspace (`config::reload_shard`, broadcast as [`ConfigChange::Reload`]) and the
/// answer comes once every shard did; a shard that failed makes it Redis's
/// error. Keys out on loan between shards (`mesh::lending`) are out of their
/// owner's keyspace meanwhile: not reloaded there, they come home by name into
/// the reloaded one (those a script batch keeps on its shard are reloaded with
/// that shard's keys). Per-shard mode reloads the node.
fn debug_reload<S: Server>(
    ctx: &mut Ctx<'_, S>,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> ServerResult {
    let known = |opt: &[u8]| {
        RELOAD_OPTIONS
            .iter()
            .any(|o| opt.eq_ignore_ascii_case(o.as_bytes()))
    };
    if !args.iter().skip(2).all(known) {
        return Err(CmdError::Line(
            b"ERR DEBUG RELOAD only supports the MERGE, NOFLUSH and NOSAVE options.".to_vec(),
        ));
    }
    let refuse = |text: &str| Err(CmdError::Line(text.as_bytes().to_vec()));
    if args.len() > 2 {
        return refuse("ERR DEBUG RELOAD's MERGE, NOFLUSH and NOSAVE need a dump file, which Ruvio does not keep");
    }
    let everywhere =
        ctx.core.settings().port_mode == PortMode::Forward && ctx.core.topology().nodes.len() > 1;
    // A save any shard is writing (each shard checks its own again when the
    // reload reaches it: a BGSAVE may start in between).
    if everywhere && ctx.core.shared().background_save().running_kind().is_some() {
        return refuse(RELOAD_WAITS_FOR_SAVE);
    }
    let outcome = Arc::new(ReloadOutcome::default());
    ctx.core.reload_keyspace(&outcome);
    if everywhere {
        ctx.core
            .broadcast(ConfigChange::Reload(Arc::clone(&outcome)));
        ctx.gather = Some(Gather::AfterAll(Then::Reload(outcome)));
        return Ok(());
    }
    match outcome.error() {
        Some(line) => refuse(line),
        None => {
            eprintln!("DB reloaded by DEBUG RELOAD ({} keys)", outcome.keys());
            reply.ok();
            Ok(())
        }
    }
}

/// The largest threshold Redis takes: 4 GB less 1 MB (`quicklistSetPackedThreshold`).
const PACKED_THRESHOLD_BYTES_MAX: usize = (1 << 32) - (1 << 20);

/// `DEBUG QUICKLIST-PACKED-THRESHOLD size`: Redis's validation and replies (a
/// memory value up to 4 GB less 1 MB; 0 means 1 GB). Redis stores elements at or
/// over the threshold in plain nodes of their own; Ruvio has no plain nodes, so
/// the value is checked and answered as Redis answers but changes nothing
/// (docs: README, DEBUG row).
fn debug_quicklist_packed_threshold<S: Server>(
    _ctx: &mut Ctx<'_, S>,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> ServerResult {
    let size = std::str::from_utf8(args.get(2))
        .ok()
        .and_then(crate::config::parse_memory)
        .filter(|&n| n <= PACKED_THRESHOLD_BYTES_MAX);
    if size.is_none() {
        return Err(CmdError::Line(
            b"ERR argument must be a memory value bigger than 1 and smaller than 4gb".to_vec(),
        ));
    }
    reply.ok();
    Ok(())
}

/// `DEBUG POPULATE count [prefix] [size]`: string keys `prefix:0` ...
/// (`key:0` ... by default) holding `value:0` ... (cut or zero-padded to `size`),
/// existing keys left alone; `+OK`. In forward mode every shard adds its own keys.
/// As in Redis the keys are not propagated (not in the write-ahead log: a restart
/// keeps them only through a snapshot, as Redis's AOF does not have them).
fn debug_populate<S: Server>(
    ctx: &mut Ctx<'_, S>,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> ServerResult {
    if args.len() > 5 {
        return Err(CmdError::subcommand_syntax(args.get(1), "debug"));
    }
    // Redis's `getPositiveLongFromObjectOrReply`: one message for both failures.
    let positive = |arg: &[u8]| -> Result<u64, CmdError> {
        super::parse_i64(arg)
            .and_then(|n| u64::try_from(n).ok())
            .ok_or(CmdError::NotPositive)
    };
    let count = positive(args.get(2))?;
    let value_bytes = match args.len() {
        5 => positive(args.get(4))? as usize,
        _ => 0,
    };
    let prefix = match args.len() {
        3 => b"key".to_vec(),
        _ => args.get(3).to_vec(),
    };
    let query = ClientQuery::Populate {
        db: ctx.client.db,
        count,
        prefix,
        value_bytes,
    };
    ask_every_shard(ctx, args, query, Merge::AllOk, reply)
}

/// `DEBUG SET-SKIP-CHECKSUM-VALIDATION <0|1>`: with a non-zero number (C's
/// `atoi`), RESTORE takes payloads whose CRC-64 is wrong, as Redis's tests use it
/// to feed corrupt payloads to the decoder. Every shard follows in forward mode
/// (one server); the node only in per-shard mode.
fn debug_set_skip_checksum_validation<S: Server>(
    ctx: &mut Ctx<'_, S>,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> ServerResult {
    let skip = atoi(args.get(2)) != 0;
    ctx.core.engine_mut().config_mut().skip_checksum_validation = skip;
    if ctx.core.settings().port_mode == PortMode::Forward {
        let change = ConfigChange::SkipChecksumValidation(skip);
        ctx.core.broadcast(change);
    }
    super::ok_everywhere(ctx, reply);
    Ok(())
}

/// `DEBUG LOG message`: the message in the server's log, as Redis's `DEBUG LOG: `
/// warning line (test suites mark their steps with it).
fn debug_log<S: Server>(
    _ctx: &mut Ctx<'_, S>,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> ServerResult {
    eprintln!("DEBUG LOG: {}", String::from_utf8_lossy(args.get(2)));
    reply.ok();
    Ok(())
}

/// `DEBUG ERROR message`: the message itself as the error line, as Redis's
/// `addReplyErrorSds` sends it (no `ERR` added).
fn debug_error<S: Server>(
    _ctx: &mut Ctx<'_, S>,
    args: Args<'_>,
    _reply: &mut Reply<'_>,
) -> ServerResult {
    Err(CmdError::Line(args.get(2).to_vec()))
}

/// `DEBUG EXPORT-RDB path`: every shard's keys in one RDB file (see
/// [`crate::persistence::export`]); `+OK` once the file is complete.
fn debug_export_rdb<S: Server>(
    ctx: &mut Ctx<'_, S>,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> ServerResult {
    let path = String::from_utf8_lossy(args.get(2)).into_owned();
    let shards = ctx.core.topology().nodes.len();
    let failed = |e: String| CmdError::Line(format!("ERR EXPORT-RDB failed: {e}").into_bytes());
    crate::persistence::export::remove_parts(&path, shards);
    crate::persistence::export::write_part(
        ctx.core.engine(),
        ctx.core.now_ms(),
        ctx.core.shard_id(),
        &path,
    )
    .map_err(|e| failed(e.to_string()))?;
    if shards > 1 && ctx.core.settings().port_mode == PortMode::Forward {
        ctx.core.broadcast(ConfigChange::ExportRdb(path.clone()));
        ctx.gather = Some(Gather::AfterAll(Then::ExportRdb(path)));
    } else {
        crate::persistence::export::assemble(&path, [ctx.core.shard_id()]).map_err(failed)?;
        reply.ok();
    }
    Ok(())
}

fn debug_help<S: Server>(
    _ctx: &mut Ctx<'_, S>,
    _args: Args<'_>,
    reply: &mut Reply<'_>,
) -> ServerResult {
    reply_help(
        reply,
        b"debug",
        &[
            "CHANGE-REPL-ID",
            "    Change the replication IDs of the instance.",
            "    Dangerous: should be used only for testing the replication subsystem.",
            "DIGEST",
            "    Output a hex signature representing the current DB content.",
            "DIGEST-VALUE <key> [<key> ...]",
            "    Output a hex signature of the values of all the specified keys.",
            "ERROR <string>",
            "    Return a Redis protocol error with <string> as message. Useful for clients",
            "    unit tests to simulate Redis errors.",
            "LOG <message>",
            "    Write <message> to the server log.",
            "LISTPACK <key>",
            "    Show low level info about the listpack encoding of <key>.",
            "QUICKLIST <key> [<0|1>]",
            "    Show low level info about the quicklist encoding of <key>.",
            "    The optional argument (0 by default) sets the level of detail",
            "OBJECT <key>",
            "    Show low level info about the `key` and associated value.",
            "POPULATE <count> [<prefix>] [<size>]",
            "    Create <count> string keys named key:<num>. If <prefix> is specified then",
            "    it is used instead of the 'key' prefix. These are not propagated to",
            "    replicas. Cluster slots are not respected so keys not belonging to the",
            "    current node can be created in cluster mode.",
            "PROTOCOL <type>",
            "    Reply with a test value of the specified type. <type> can be: string,",
            "    integer, double, bignum, null, array, set, map, attrib, push, verbatim,",
            "    true, false.",
            "RELOAD [option ...]",
            "    Save the RDB on disk and reload it back to memory. Valid <option> values:",
            "    * MERGE: conflicting keys will be loaded from RDB.",
            "    * NOFLUSH: the existing database will not be removed before load, but",
            "      conflicting keys will generate an exception and kill the server.",
            "    * NOSAVE: the database will be loaded from an existing RDB file.",
            "    Examples:",
            "    * DEBUG RELOAD: verify that the server is able to persist, flush and reload",
            "      the database.",
            "    * DEBUG RELOAD NOSAVE: replace the current database with the contents of an",
            "      existing RDB file.",
            "    * DEBUG RELOAD NOSAVE NOFLUSH MERGE: add the contents of an existing RDB",
            "      file to the database.",
            "QUICKLIST-PACKED-THRESHOLD <size>",
            "    Sets the threshold for elements to be inserted as plain vs packed nodes",
            "    Default value is 1GB, allows values up to 4GB. Setting to 0 restores to default.",
            "SET-ACTIVE-EXPIRE <0|1>",
            "    Setting it to 0 disables expiring keys in background when they are not",
            "    accessed (otherwise the Redis behavior). Setting it to 1 reenables back the",
            "    default.",
            "SET-SKIP-CHECKSUM-VALIDATION <0|1>",
            "    Enables or disables checksum checks for RDB files and RESTORE's payload.",
            "SLEEP <seconds>",
            "    Stop the server for <seconds>. Decimals allowed.",
            "EXPORT-RDB <path>",
            "    Write every key as a Redis RDB file at <path> (Ruvio only).",
            "SHARD",
            "    Return the index of the shard serving this connection (Ruvio only).",
        ],
    );
    Ok(())
}
