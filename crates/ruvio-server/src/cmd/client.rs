//! CLIENT and its subcommands: ID, SETNAME, GETNAME, LIST, INFO, KILL, SETINFO,
//! NO-EVICT, NO-TOUCH, REPLY, UNBLOCK, TRACKING, CACHING, GETREDIR, TRACKINGINFO,
//! HELP (the tracking tables and invalidations are [`crate::tracking`]'s).
//!
//! A shard knows only its own connections. In forward mode CLIENT LIST and CLIENT
//! KILL ask every shard ([`ClientQuery`], gathered by [`crate::mesh::gather`]), so they see
//! every client of the server; in per-shard mode they see the shard's own, the
//! "node" a Redis Cluster client expects.

use super::{Ctx, Server, ServerCommand, ServerResult, SharedReads};
use crate::config::PortMode;
use crate::mesh::gather::Gather;
use crate::mesh::queries::{ClientFilter, ClientQuery};
use crate::net::conn::{BufferUse, ClientState, Conn, Described, Merge, ReplyMode};
use crate::net::slab::Slab;
use ruvio_engine::command::{command, flags::*, reply_help};
use ruvio_engine::{CmdError, KeySpec};
use ruvio_resp::{Args, Protocol, Reply};

/// The client family's table.
#[rustfmt::skip]
pub const COMMANDS: &[ServerCommand] = &[
    command!("client", -2, 0, KeySpec::NONE, ["slow"], "connection", "2.4.0",
        "A container for client connection commands", "Depends on subcommand.",
        subcommands = SUBCOMMANDS),
];

/// CLIENT's subcommands, with Redis' arity, flags and ACL categories.
#[rustfmt::skip]
const SUBCOMMANDS: &[ServerCommand] = &[
    command!("client|id", 2, NOSCRIPT | LOADING | STALE, KeySpec::NONE, ["slow", "connection"], "connection",
        "5.0.0", "Returns the client ID for the current connection", "O(1)", id),
    command!("client|setname", 3, NOSCRIPT | LOADING | STALE, KeySpec::NONE, ["slow", "connection"], "connection",
        "2.6.9", "Set the current connection name", "O(1)", setname),
    command!("client|getname", 2, NOSCRIPT | LOADING | STALE, KeySpec::NONE, ["slow", "connection"], "connection",
        "2.6.9", "Get the current connection name", "O(1)", getname),
    command!("client|list", -2, ADMIN | NOSCRIPT | LOADING | STALE, KeySpec::NONE,
        ["admin", "slow", "dangerous", "connection"], "connection", "2.4.0", "Get the list of client connections",
        "O(N) where N is the number of client connections", list),
    command!("client|info", 2, NOSCRIPT | LOADING | STALE, KeySpec::NONE, ["slow", "connection"], "connection",
        "6.2.0", "Returns information about the current client connection.", "O(1)", info),
    command!("client|kill", -3, ADMIN | NOSCRIPT | LOADING | STALE, KeySpec::NONE,
        ["admin", "slow", "dangerous", "connection"], "connection", "2.4.0", "Kill the connection of a client",
        "O(N) where N is the number of client connections", kill),
    command!("client|setinfo", 4, NOSCRIPT | LOADING | STALE, KeySpec::NONE, ["slow", "connection"], "connection",
        "7.2.0", "Sets information specific to the client or connection.", "O(1)", setinfo),
    command!("client|no-evict", 3, ADMIN | NOSCRIPT | LOADING | STALE, KeySpec::NONE,
        ["admin", "slow", "dangerous", "connection"], "connection", "7.0.0",
        "Set client eviction mode for the current connection", "O(1)", no_evict),
    command!("client|no-touch", 3, NOSCRIPT | LOADING | STALE, KeySpec::NONE, ["slow", "connection"], "connection",
        "7.2.0", "Controls whether commands sent by the client affect the LRU/LFU of accessed keys.", "O(1)",
        no_touch),
    command!("client|reply", 3, NOSCRIPT | LOADING | STALE, KeySpec::NONE, ["slow", "connection"], "connection",
        "3.2.0", "Instruct the server whether to reply to commands", "O(1)", reply_mode),
    command!("client|unblock", -3, ADMIN | NOSCRIPT | LOADING | STALE, KeySpec::NONE,
        ["admin", "slow", "dangerous", "connection"], "connection", "5.0.0",
        "Unblock a client blocked in a blocking command from a different connection",
        "O(log N) where N is the number of client connections", unblock),
    command!("client|pause", -3, ADMIN | NOSCRIPT | LOADING | STALE, KeySpec::NONE,
        ["admin", "slow", "dangerous", "connection"], "connection", "2.9.50",
        "Stop processing commands from clients for some time", "O(1)", pause),
    command!("client|unpause", 2, ADMIN | NOSCRIPT | LOADING | STALE, KeySpec::NONE,
        ["admin", "slow", "dangerous", "connection"], "connection", "6.2.0",
        "Resume processing of clients that were paused", "O(N) Where N is the number of paused clients",
        unpause),
    command!("client|tracking", -3, NOSCRIPT | LOADING | STALE, KeySpec::NONE, ["slow", "connection"],
        "connection", "6.0.0", "Enable or disable server assisted client side caching support",
        "O(1). Some options may introduce additional complexity.", tracking),
    command!("client|caching", 3, NOSCRIPT | LOADING | STALE, KeySpec::NONE, ["slow", "connection"],
        "connection", "6.0.0", "Instruct the server about tracking or not keys in the next request",
        "O(1)", caching),
    command!("client|getredir", 2, NOSCRIPT | LOADING | STALE, KeySpec::NONE, ["slow", "connection"],
        "connection", "6.0.0", "Get tracking notifications redirection client ID if any", "O(1)", getredir),
    command!("client|trackinginfo", 2, NOSCRIPT | LOADING | STALE, KeySpec::NONE, ["slow", "connection"],
        "connection", "6.2.0", "Return information about server assisted client side caching for the current connection",
        "O(1)", trackinginfo),
    command!("client|help", 2, LOADING | STALE, KeySpec::NONE, ["slow", "connection"], "connection", "5.0.0",
        "Show helpful text about the different subcommands", "O(1)", help),
];

/// Names (and library names) may hold only printable ASCII without spaces.
pub fn valid_client_name(name: &[u8]) -> bool {
    name.iter().all(|&b| (b'!'..=b'~').contains(&b))
}

fn id<S: Server>(ctx: &mut Ctx<'_, S>, _args: Args<'_>, reply: &mut Reply<'_>) -> ServerResult {
    reply.int(ctx.client.id as i64);
    Ok(())
}

fn setname<S: Server>(ctx: &mut Ctx<'_, S>, args: Args<'_>, reply: &mut Reply<'_>) -> ServerResult {
    let name = args.get(2);
    if !valid_client_name(name) {
        return Err(CmdError::BadClientName);
    }
    ctx.client.name = name.to_vec();
    ctx.core
        .shared()
        .observatory()
        .client_named(ctx.client.id, name);
    reply.ok();
    Ok(())
}

fn getname<S: Server>(
    ctx: &mut Ctx<'_, S>,
    _args: Args<'_>,
    reply: &mut Reply<'_>,
) -> ServerResult {
    if ctx.client.name.is_empty() {
        reply.null();
    } else {
        reply.bulk(&ctx.client.name);
    }
    Ok(())
}

/// Answer `query` for this shard's clients (`caller` is the connection running the
/// command, when it is on this shard). The reply is one part of a gathered answer
/// ([`Merge::ClientLines`], [`Merge::SumInts`], [`Merge::KillOne`]), or the whole
/// answer on one shard.
pub fn answer<S: Server>(
    core: &mut S,
    conns: &mut Slab<Conn>,
    caller: Option<Caller<'_>>,
    query: &ClientQuery,
) -> Vec<u8> {
    let now = core.now_ms();
    let mut out = Vec::new();
    let (caller, caller_argv_bytes) = match caller {
        Some(Caller { client, argv_bytes }) => (Some(client), argv_bytes),
        None => (None, 0),
    };
    match query {
        ClientQuery::List(filter) => {
            let mut clients: Vec<(&ClientState, Described)> = conns
                .iter()
                .map(|(_, conn)| {
                    (
                        &conn.client,
                        described(core, &conn.client, conn.buffer_use(), 0),
                    )
                })
                .collect();
            if let Some(me) = caller.as_deref() {
                let seen = described(core, me, me.batch_buffers, caller_argv_bytes);
                clients.push((me, seen));
            }
            clients.sort_by_key(|(c, _)| c.id);
            let mut text = String::new();
            for (c, seen) in clients.into_iter().filter(|(c, _)| filter.matches(c, now)) {
                text.push_str(&c.describe(now, &seen));
                text.push('\n');
            }
            Reply::new(&mut out, Protocol::Resp2).bulk(text.as_bytes());
        }
        ClientQuery::Kill(filter) => {
            let mut killed = 0;
            for (index, conn) in conns.iter_mut() {
                if filter.matches(&conn.client, now) {
                    conn.client.closing = true;
                    conn.client.killed = true;
                    core.mark_conn_dirty((index, conn.gen));
                    killed += 1;
                }
            }
            if let Some(me) = caller.filter(|c| filter.matches(c, now)) {
                me.closing = true;
                killed += 1;
            }
            Reply::new(&mut out, Protocol::Resp2).int(killed);
        }
        ClientQuery::Unblock { client_id, error } => {
            let unblocked = core.unblock_client(conns, *client_id, *error);
            Reply::new(&mut out, Protocol::Resp2).int(i64::from(unblocked));
        }
        ClientQuery::DatasetDigest => {
            let mut parts = Vec::new();
            for (db, part) in core.engine().digest_parts() {
                parts.extend_from_slice(&(db as u32).to_be_bytes());
                parts.extend_from_slice(&part);
            }
            Reply::new(&mut out, Protocol::Resp2).bulk(&parts);
        }
        ClientQuery::ValueDigests { db, keys } => {
            let digests: Vec<u8> = keys
                .iter()
                .flat_map(|k| core.engine().debug_value_digest(*db, k))
                .collect();
            Reply::new(&mut out, Protocol::Resp2).bulk(&digests);
        }
        ClientQuery::Populate {
            db,
            count,
            prefix,
            value_bytes,
        } => {
            let forward = core.settings().port_mode == PortMode::Forward;
            let (topo, id) = (core.topology().clone(), core.shard_id());
            let keep = |key: &[u8]| !forward || topo.key_owner(key) == id;
            core.engine_mut()
                .debug_populate(*db, now, *count, prefix, *value_bytes, keep);
            Reply::new(&mut out, Protocol::Resp2).ok();
        }
        ClientQuery::DebugKey { db, key, report } => {
            use ruvio_engine::debug_digest::debug_key_report;
            let mut reply = Reply::new(&mut out, Protocol::Resp2);
            match debug_key_report(core.engine(), *db, key, now, *report) {
                None => reply.null(),
                Some(Ok((status, printout))) => {
                    if let Some(text) = printout {
                        eprintln!("{text}");
                    }
                    reply.simple(&status);
                }
                Some(Err(error)) => reply.error(error),
            }
        }
        // Run by the row's handler on the shard asked (`shard::node_forward`):
        // a handler runs on the shard's own type, which this answer is generic over.
        ClientQuery::Run(_) => {
            Reply::new(&mut out, Protocol::Resp2).error("ERR internal: a command asked elsewhere")
        }
    }
    out
}

/// The connection running CLIENT LIST or KILL, and its command's argument bytes.
pub struct Caller<'a> {
    pub client: &'a mut ClientState,
    pub argv_bytes: usize,
}

/// What the shard knows of `client` beside its state, for its CLIENT LIST line.
fn described<S: Server>(
    core: &S,
    client: &ClientState,
    buffers: BufferUse,
    argv_bytes: usize,
) -> Described {
    Described {
        buffers,
        dirty_cas: !client.watching.is_empty()
            && core.watch_table().is_touched(client.id, client.watch_epoch),
        argv_bytes,
        thread: core.shard_id(),
    }
}

/// Run `query` on every shard's clients (forward mode, several shards) or on this
/// shard's (per-shard mode keeps the node view, as a Redis Cluster node).
pub(crate) fn ask_every_shard<S: Server>(
    ctx: &mut Ctx<'_, S>,
    args: Args<'_>,
    query: ClientQuery,
    merge: Merge,
    reply: &mut Reply<'_>,
) -> ServerResult {
    let caller = Caller {
        client: ctx.client,
        argv_bytes: args.byte_len(),
    };
    let local = answer(ctx.core, ctx.conns, Some(caller), &query);
    let gathered =
        ctx.core.settings().port_mode == PortMode::Forward && ctx.core.settings().shards > 1;
    if gathered {
        ctx.gather = Some(Gather::Clients {
            query,
            merge,
            local,
        });
    } else {
        let mut whole = Vec::new();
        crate::net::conn::merge_into(merge, &[local], &[], &mut whole);
        reply.raw(&whole);
    }
    Ok(())
}

/// `CLIENT LIST [TYPE normal|master|replica|pubsub] [ID id [id ...]]`
fn list<S: Server>(ctx: &mut Ctx<'_, S>, args: Args<'_>, reply: &mut Reply<'_>) -> ServerResult {
    let mut filter = ClientFilter::default();
    let mut i = 2;
    while i < args.len() {
        let opt = args.get(i);
        if opt.eq_ignore_ascii_case(b"TYPE") && i + 1 < args.len() {
            let ty = args.get(i + 1).to_ascii_lowercase();
            if !filter.client_type(&ty) {
                return Err(CmdError::unknown_client_type(args.get(i + 1)));
            }
            i += 2;
        } else if opt.eq_ignore_ascii_case(b"ID") && i + 1 < args.len() {
            let mut wanted = Vec::new();
            for j in i + 1..args.len() {
                match super::parse_i64(args.get(j)) {
                    Some(n) if n > 0 => wanted.push(n as u64),
                    _ => return Err(CmdError::InvalidClientId),
                }
            }
            filter.ids = Some(wanted);
            i = args.len();
        } else {
            return Err(CmdError::Syntax);
        }
    }
    let merge = Merge::ClientLines {
        verbatim: ctx.client.proto == Protocol::Resp3,
    };
    ask_every_shard(ctx, args, ClientQuery::List(filter), merge, reply)
}

/// The CLIENT LIST line of `client` now (ACL LOG's `client-info`).
pub fn info_line<S: Server>(core: &S, client: &ClientState) -> String {
    let seen = described(core, client, client.batch_buffers, 0);
    client.describe(core.now_ms(), &seen)
}

/// `CLIENT INFO`
fn info<S: Server>(ctx: &mut Ctx<'_, S>, args: Args<'_>, reply: &mut Reply<'_>) -> ServerResult {
    let argv_bytes = args.byte_len();
    let seen = described(ctx.core, ctx.client, ctx.client.batch_buffers, argv_bytes);
    let mut line = ctx.client.describe(ctx.core.now_ms(), &seen);
    line.push('\n');
    reply.verbatim("txt", line.as_bytes());
    Ok(())
}

/// `CLIENT KILL ip:port` or `CLIENT KILL [ID id] [ADDR ip:port] [LADDR ip:port] [USER name] [SKIPME yes|no] [MAXAGE secs]`
fn kill<S: Server>(ctx: &mut Ctx<'_, S>, args: Args<'_>, reply: &mut Reply<'_>) -> ServerResult {
    if args.len() == 3 {
        let filter = ClientFilter {
            addr: Some(String::from_utf8_lossy(args.get(2)).into_owned()),
            ..Default::default()
        };
        return ask_every_shard(ctx, args, ClientQuery::Kill(filter), Merge::KillOne, reply);
    }
    if !args.len().is_multiple_of(2) {
        return Err(CmdError::Syntax);
    }
    let mut filter = ClientFilter::default();
    let mut skip_me = true;
    for pair in (2..args.len()).step_by(2) {
        let (opt, value) = (args.get(pair).to_ascii_lowercase(), args.get(pair + 1));
        let text = String::from_utf8_lossy(value).into_owned();
        match opt.as_slice() {
            b"id" => match super::parse_i64(value) {
                Some(n) if n > 0 => filter.ids = Some(vec![n as u64]),
                _ => return Err(CmdError::ClientIdNotPositive),
            },
            b"addr" => filter.addr = Some(text),
            b"laddr" => filter.laddr = Some(text),
            b"user" => {
                if ctx.core.shared().acl().user(value).is_none() {
                    return Err(CmdError::quoted("ERR No such user '", value, "'"));
                }
                filter.user = Some(value.to_vec());
            }
            b"type" => {
                if !filter.client_type(&value.to_ascii_lowercase()) {
                    return Err(CmdError::unknown_client_type(value));
                }
            }
            b"skipme" => match text.to_ascii_lowercase().as_str() {
                "yes" => skip_me = true,
                "no" => skip_me = false,
                _ => return Err(CmdError::Syntax),
            },
            b"maxage" => match super::parse_i64(value) {
                Some(secs) => filter.min_age_ms = Some(secs.saturating_mul(1000)),
                None => return Err(CmdError::NotInteger),
            },
            _ => return Err(CmdError::Syntax),
        }
    }
    filter.skip_id = skip_me.then_some(ctx.client.id);
    ask_every_shard(ctx, args, ClientQuery::Kill(filter), Merge::SumInts, reply)
}

/// `CLIENT SETINFO LIB-NAME|LIB-VER value`
fn setinfo<S: Server>(ctx: &mut Ctx<'_, S>, args: Args<'_>, reply: &mut Reply<'_>) -> ServerResult {
    let (attr, value) = (args.get(2), args.get(3));
    let (slot, invalid) = if attr.eq_ignore_ascii_case(b"lib-name") {
        (&mut ctx.client.lib_name, CmdError::BadLibName)
    } else if attr.eq_ignore_ascii_case(b"lib-ver") {
        (&mut ctx.client.lib_ver, CmdError::BadLibVer)
    } else {
        return Err(CmdError::unrecognized_option(attr));
    };
    if !valid_client_name(value) {
        return Err(invalid);
    }
    *slot = value.to_vec();
    reply.ok();
    Ok(())
}

/// Parse `ON|OFF` into a bool.
fn on_off(arg: &[u8]) -> Option<bool> {
    if arg.eq_ignore_ascii_case(b"on") {
        Some(true)
    } else if arg.eq_ignore_ascii_case(b"off") {
        Some(false)
    } else {
        None
    }
}

fn no_evict<S: Server>(
    ctx: &mut Ctx<'_, S>,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> ServerResult {
    ctx.client.no_evict = on_off(args.get(2)).ok_or(CmdError::Syntax)?;
    reply.ok();
    Ok(())
}

fn no_touch<S: Server>(
    ctx: &mut Ctx<'_, S>,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> ServerResult {
    ctx.client.no_touch = on_off(args.get(2)).ok_or(CmdError::Syntax)?;
    reply.ok();
    Ok(())
}

/// `CLIENT UNBLOCK client-id [TIMEOUT | ERROR]`: 1 when the client was blocked and
/// is now answered (a null array, or `-UNBLOCKED` with ERROR), 0 otherwise. The
/// parked command may live on another shard (forward mode): that shard is asked
/// ([`Gather::Ask`]), unblocks and logs it, and its 1 or 0 is the answer; this
/// command is recorded after it, as Redis logs the unblocked command first.
fn unblock<S: Server>(ctx: &mut Ctx<'_, S>, args: Args<'_>, reply: &mut Reply<'_>) -> ServerResult {
    if args.len() > 4 {
        return Err(CmdError::UnblockArgs);
    }
    let error = match args.iter().nth(3) {
        None => false,
        Some(reason) if reason.eq_ignore_ascii_case(b"timeout") => false,
        Some(reason) if reason.eq_ignore_ascii_case(b"error") => true,
        Some(_) => return Err(CmdError::UnblockReason),
    };
    let id = super::parse_i64(args.get(2)).ok_or(CmdError::NotInteger)?;
    let Ok(id) = u64::try_from(id) else {
        reply.int(0);
        return Ok(());
    };
    let answered = match ctx.core.shared().blocked_on(id) {
        None => false,
        Some(shard) if shard == ctx.core.shard_id() => {
            ctx.core.unblock_client(ctx.conns, id, error)
        }
        Some(shard) => {
            let query = ClientQuery::Unblock {
                client_id: id,
                error,
            };
            ctx.gather = Some(Gather::Ask { shard, query });
            return Ok(());
        }
    };
    reply.int(answered as i64);
    Ok(())
}

/// `CLIENT PAUSE timeout [WRITE|ALL]`: every shard pauses before the `+OK`.
fn pause<S: Server>(ctx: &mut Ctx<'_, S>, args: Args<'_>, reply: &mut Reply<'_>) -> ServerResult {
    if args.len() > 4 {
        return Err(CmdError::subcommand_syntax(args.get(1), "client"));
    }
    let timeout = super::parse_i64(args.get(2)).ok_or(CmdError::TimeoutNotInteger)?;
    if timeout < 0 {
        return Err(CmdError::TimeoutNegative);
    }
    let all = match args.iter().nth(3) {
        None => true,
        Some(mode) if mode.eq_ignore_ascii_case(b"all") => true,
        Some(mode) if mode.eq_ignore_ascii_case(b"write") => false,
        Some(_) => return Err(CmdError::PauseMode),
    };
    let until_ms = ctx.core.now_ms().saturating_add(timeout as u64);
    ctx.core.pause_everywhere(until_ms, all);
    super::ok_everywhere(ctx, reply);
    Ok(())
}

/// `CLIENT UNPAUSE`
fn unpause<S: Server>(
    ctx: &mut Ctx<'_, S>,
    _args: Args<'_>,
    reply: &mut Reply<'_>,
) -> ServerResult {
    ctx.core.unpause_everywhere(ctx.conns);
    super::ok_everywhere(ctx, reply);
    Ok(())
}

/// `CLIENT REPLY ON|OFF|SKIP`: OFF and SKIP are not answered.
fn reply_mode<S: Server>(
    ctx: &mut Ctx<'_, S>,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> ServerResult {
    let mode = args.get(2);
    if mode.eq_ignore_ascii_case(b"on") {
        ctx.client.reply_mode = ReplyMode::On;
        reply.ok();
    } else if mode.eq_ignore_ascii_case(b"off") {
        ctx.client.reply_mode = ReplyMode::Off;
    } else if mode.eq_ignore_ascii_case(b"skip") {
        if ctx.client.reply_mode != ReplyMode::Off {
            ctx.client.reply_mode = ReplyMode::SkipNext;
        }
    } else {
        return Err(CmdError::Syntax);
    }
    Ok(())
}

/// Redis' CLIENT TRACKING and CACHING errors (networking.c, tracking.c).
mod tracking_errors {
    pub const ONE_REDIRECT: &str = "ERR A client can only redirect to a single other client";
    pub const NO_SUCH_REDIRECT: &str = "ERR The client ID you want redirect to does not exist";
    pub const PREFIX_NEEDS_BCAST: &str = "ERR PREFIX option requires BCAST mode to be enabled";
    pub const BCAST_SWITCH: &str = "ERR You can't switch BCAST mode on/off before disabling \
        tracking for this client, and then re-enabling it with a different mode.";
    pub const OPT_WITH_BCAST: &str = "ERR OPTIN and OPTOUT are not compatible with BCAST";
    pub const OPTIN_AND_OPTOUT: &str = "ERR You can't specify both OPTIN mode and OPTOUT mode";
    pub const OPT_SWITCH: &str = "ERR You can't switch OPTIN/OPTOUT mode before disabling \
        tracking for this client, and then re-enabling it with a different mode.";
    pub const CACHING_NEEDS_OPT: &str = "ERR CLIENT CACHING can be called only when the client is \
        in tracking mode with OPTIN or OPTOUT mode enabled";
    pub const CACHING_YES: &str =
        "ERR CLIENT CACHING YES is only valid when tracking is enabled in OPTIN mode.";
    pub const CACHING_NO: &str =
        "ERR CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode.";
}

fn line_error(text: &str) -> CmdError {
    CmdError::Line(text.as_bytes().to_vec())
}

/// `CLIENT TRACKING ON|OFF [REDIRECT id] [PREFIX prefix [PREFIX prefix ...]] [BCAST] [OPTIN] [OPTOUT] [NOLOOP]`,
/// with Redis' checks in Redis' order (see [`crate::tracking`]).
fn tracking<S: Server>(
    ctx: &mut Ctx<'_, S>,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> ServerResult {
    use crate::net::conn::{tracking_flags as f, TrackingMode};
    use tracking_errors::*;
    let mut mode = TrackingMode {
        flags: f::ON,
        redirect: 0,
    };
    let mut prefixes: Vec<Vec<u8>> = Vec::new();
    let mut j = 3;
    while j < args.len() {
        let opt = args.get(j);
        let more = j + 1 < args.len();
        if opt.eq_ignore_ascii_case(b"redirect") && more {
            j += 1;
            if mode.redirect != 0 {
                return Err(line_error(ONE_REDIRECT));
            }
            let id = super::parse_i64(args.get(j)).ok_or(CmdError::NotInteger)?;
            let exists = u64::try_from(id)
                .ok()
                .and_then(|id| ctx.core.shared().tracking().shard_of(id))
                .is_some();
            if !exists {
                return Err(line_error(NO_SUCH_REDIRECT));
            }
            mode.redirect = id as u64;
        } else if opt.eq_ignore_ascii_case(b"bcast") {
            mode.flags |= f::BCAST;
        } else if opt.eq_ignore_ascii_case(b"optin") {
            mode.flags |= f::OPTIN;
        } else if opt.eq_ignore_ascii_case(b"optout") {
            mode.flags |= f::OPTOUT;
        } else if opt.eq_ignore_ascii_case(b"noloop") {
            mode.flags |= f::NOLOOP;
        } else if opt.eq_ignore_ascii_case(b"prefix") && more {
            j += 1;
            prefixes.push(args.get(j).to_vec());
        } else {
            return Err(CmdError::Syntax);
        }
        j += 1;
    }
    let switch = args.get(2);
    let broadcast = crate::tracking::broadcasts(ctx.core.topology());
    if switch.eq_ignore_ascii_case(b"off") {
        let (tracking, mut to) = ctx.core.tracking_parts();
        tracking.disable(&mut to, broadcast, ctx.client);
        reply.ok();
        return Ok(());
    }
    if !switch.eq_ignore_ascii_case(b"on") {
        return Err(CmdError::Syntax);
    }
    let old = ctx.client.tracking;
    let bcast = mode.flags & f::BCAST != 0;
    if !bcast && !prefixes.is_empty() {
        return Err(line_error(PREFIX_NEEDS_BCAST));
    }
    if old.on() && (old.flags & f::BCAST != 0) != bcast {
        return Err(line_error(BCAST_SWITCH));
    }
    let (optin, optout) = (mode.flags & f::OPTIN != 0, mode.flags & f::OPTOUT != 0);
    if bcast && (optin || optout) {
        return Err(line_error(OPT_WITH_BCAST));
    }
    if optin && optout {
        return Err(line_error(OPTIN_AND_OPTOUT));
    }
    if (optin && old.flags & f::OPTOUT != 0) || (optout && old.flags & f::OPTIN != 0) {
        return Err(line_error(OPT_SWITCH));
    }
    if bcast {
        let held = ctx.core.tracking_table().prefixes_of(ctx.client.id);
        if let Some(e) = prefix_collision(&prefixes, &held) {
            return Err(e);
        }
    }
    ctx.core.engine_mut().record_expired(true);
    let (tracking, to) = ctx.core.tracking_parts();
    tracking.enable(
        to.outbox,
        to.directory,
        broadcast,
        ctx.client,
        mode,
        &prefixes,
    );
    if bcast {
        // Every shard knows the prefixes before the client hears +OK.
        super::ok_everywhere(ctx, reply);
    } else {
        reply.ok();
    }
    Ok(())
}

/// Redis' checkPrefixCollisionsOrReply: a new prefix may not overlap one held,
/// nor another new one.
fn prefix_collision(new: &[Vec<u8>], held: &[Vec<u8>]) -> Option<CmdError> {
    let overlap = |a: &[u8], b: &[u8]| a.starts_with(b) || b.starts_with(a);
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    for (i, p) in new.iter().enumerate() {
        if let Some(h) = held.iter().find(|h| overlap(p, h)) {
            return Some(line_error(&format!(
                "ERR Prefix '{}' overlaps with an existing prefix '{}'. Prefixes for a single client must not overlap.",
                text(p),
                text(h)
            )));
        }
        if let Some(q) = new[i + 1..].iter().find(|q| overlap(p, q)) {
            return Some(line_error(&format!(
                "ERR Prefix '{}' overlaps with another provided prefix '{}'. Prefixes for a single client must not overlap.",
                text(p),
                text(q)
            )));
        }
    }
    None
}

/// `CLIENT CACHING YES|NO`: whether the next command's reads are remembered
/// (OPTIN, OPTOUT).
fn caching<S: Server>(ctx: &mut Ctx<'_, S>, args: Args<'_>, reply: &mut Reply<'_>) -> ServerResult {
    use crate::net::conn::tracking_flags as f;
    use tracking_errors::*;
    let flags = ctx.client.tracking.flags;
    if flags & f::ON == 0 {
        return Err(line_error(CACHING_NEEDS_OPT));
    }
    let value = args.get(2);
    if value.eq_ignore_ascii_case(b"yes") {
        if flags & f::OPTIN == 0 {
            return Err(line_error(CACHING_YES));
        }
    } else if value.eq_ignore_ascii_case(b"no") {
        if flags & f::OPTOUT == 0 {
            return Err(line_error(CACHING_NO));
        }
    } else {
        return Err(CmdError::Syntax);
    }
    ctx.client.tracking.flags |= f::CACHING;
    reply.ok();
    Ok(())
}

/// `CLIENT GETREDIR`: the redirection (0: none) while tracking, -1 otherwise.
fn getredir<S: Server>(
    ctx: &mut Ctx<'_, S>,
    _args: Args<'_>,
    reply: &mut Reply<'_>,
) -> ServerResult {
    let mode = ctx.client.tracking;
    reply.int(if mode.on() { mode.redirect as i64 } else { -1 });
    Ok(())
}

/// `CLIENT TRACKINGINFO`: flags, redirect and prefixes, as Redis 7's map.
fn trackinginfo<S: Server>(
    ctx: &mut Ctx<'_, S>,
    _args: Args<'_>,
    reply: &mut Reply<'_>,
) -> ServerResult {
    use crate::net::conn::tracking_flags as f;
    let mode = ctx.client.tracking;
    let caching = mode.flags & f::CACHING != 0;
    let mut flags: Vec<&str> = vec![if mode.on() { "on" } else { "off" }];
    for (set, name) in [
        (mode.flags & f::BCAST != 0, "bcast"),
        (mode.flags & f::OPTIN != 0, "optin"),
        (mode.flags & f::OPTIN != 0 && caching, "caching-yes"),
        (mode.flags & f::OPTOUT != 0, "optout"),
        (mode.flags & f::OPTOUT != 0 && caching, "caching-no"),
        (mode.flags & f::NOLOOP != 0, "noloop"),
        (mode.flags & f::BROKEN_REDIR != 0, "broken_redirect"),
    ] {
        if set {
            flags.push(name);
        }
    }
    reply.map(3);
    reply.bulk(b"flags");
    reply.set(flags.len());
    for name in flags {
        reply.bulk(name.as_bytes());
    }
    reply.bulk(b"redirect");
    reply.int(if mode.on() { mode.redirect as i64 } else { -1 });
    reply.bulk(b"prefixes");
    let prefixes = ctx.core.tracking_table().prefixes_of(ctx.client.id);
    reply.array(prefixes.len());
    for p in &prefixes {
        reply.bulk(p);
    }
    Ok(())
}

fn help<S: Server>(_ctx: &mut Ctx<'_, S>, _args: Args<'_>, reply: &mut Reply<'_>) -> ServerResult {
    reply_help(
        reply,
        b"client",
        &[
            "CACHING (YES|NO)",
            "    Enable/disable tracking of the keys for next command in OPTIN/OPTOUT modes.",
            "GETREDIR",
            "    Return the client ID we are redirecting to when tracking is enabled.",
            "GETNAME",
            "    Return the name of the current connection.",
            "ID",
            "    Return the ID of the current connection.",
            "INFO",
            "    Return information about the current client connection.",
            "KILL <ip:port>",
            "    Kill connection made from <ip:port>.",
            "KILL <option> <value> [<option> <value> [...]]",
            "    Kill connections. Options are: ID, ADDR, LADDR, USER, SKIPME, MAXAGE.",
            "LIST [options ...]",
            "    Return information about client connections. Options: TYPE, ID.",
            "PAUSE <timeout> [WRITE|ALL]",
            "    Suspend all, or just write, clients for <timeout> milliseconds.",
            "UNPAUSE",
            "    Stop the current client pause, resuming traffic.",
            "TRACKING (ON|OFF) [REDIRECT <id>] [BCAST] [PREFIX <prefix> [...]]",
            "         [OPTIN] [OPTOUT] [NOLOOP]",
            "    Control server assisted client side caching.",
            "TRACKINGINFO",
            "    Report tracking status for the current connection.",
            "NO-EVICT (ON|OFF)",
            "    Protect current client connection from eviction.",
            "NO-TOUCH (ON|OFF)",
            "    Will not touch LRU/LFU stats when this mode is on.",
            "REPLY (ON|OFF|SKIP)",
            "    Control the replies sent to the current connection.",
            "SETNAME <name>",
            "    Assign the name <name> to the current connection.",
            "SETINFO <option> <value>",
            "    Set client meta attr. Options are: LIB-NAME, LIB-VER.",
            "UNBLOCK <clientid> [TIMEOUT|ERROR]",
            "    Unblock the specified blocked client.",
        ],
    );
    Ok(())
}
