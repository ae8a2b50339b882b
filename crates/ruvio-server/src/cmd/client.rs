//! CLIENT and its subcommands: ID, SETNAME, GETNAME, LIST, INFO, KILL, SETINFO,
//! NO-EVICT, NO-TOUCH, REPLY, UNBLOCK, HELP.
//!
//! A shard knows only its own connections. In forward mode CLIENT LIST and CLIENT
//! KILL ask every shard ([`ClientQuery`], gathered by [`crate::mesh::gather`]), so they see
//! every client of the server; in per-shard mode they see the shard's own, the
//! "node" a Redis Cluster client expects.

use super::{Ctx, ServerCommand, ServerResult};
use crate::config::change::ConfigChange;
use crate::config::PortMode;
use crate::mesh::gather::Gather;
use crate::net::conn::{BufferUse, ClientState, Conn, Described, Merge, ReplyMode};
use crate::net::slab::Slab;
use crate::shard::ShardCore;
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
    command!("client|help", 2, LOADING | STALE, KeySpec::NONE, ["slow", "connection"], "connection", "5.0.0",
        "Show helpful text about the different subcommands", "O(1)", help),
];

/// Names (and library names) may hold only printable ASCII without spaces.
pub fn valid_client_name(name: &[u8]) -> bool {
    name.iter().all(|&b| (b'!'..=b'~').contains(&b))
}

fn id(ctx: &mut Ctx<'_>, _args: Args<'_>, reply: &mut Reply<'_>) -> ServerResult {
    reply.int(ctx.client.id as i64);
    Ok(())
}

fn setname(ctx: &mut Ctx<'_>, args: Args<'_>, reply: &mut Reply<'_>) -> ServerResult {
    let name = args.get(2);
    if !valid_client_name(name) {
        return Err(CmdError::BadClientName);
    }
    ctx.client.name = name.to_vec();
    reply.ok();
    Ok(())
}

fn getname(ctx: &mut Ctx<'_>, _args: Args<'_>, reply: &mut Reply<'_>) -> ServerResult {
    if ctx.client.name.is_empty() {
        reply.null();
    } else {
        reply.bulk(&ctx.client.name);
    }
    Ok(())
}

/// Which clients CLIENT LIST or CLIENT KILL names: every filter given must match.
/// Plain data, so the question can go to the other shards (forward mode).
#[derive(Clone, Debug, Default)]
pub struct ClientFilter {
    ids: Option<Vec<u64>>,
    addr: Option<String>,
    laddr: Option<String>,
    /// A TYPE or USER that no client here has (pubsub, replica, another user).
    nobody: bool,
    /// MAXAGE: connected at least this many milliseconds.
    min_age_ms: Option<i64>,
    /// SKIPME yes: the caller, who is not killed.
    skip_id: Option<u64>,
    /// TYPE pubsub (true) or normal (false): a client with subscriptions is of
    /// the pubsub class.
    pubsub: Option<bool>,
    /// TYPE master (true), or pubsub or normal (false): the primary's link is of
    /// the master class whatever else it is, as Redis's getClientType.
    master: Option<bool>,
}

impl ClientFilter {
    fn matches(&self, c: &ClientState, now_ms: u64) -> bool {
        !self.nobody
            && self.skip_id != Some(c.id)
            && self.ids.as_ref().is_none_or(|ids| ids.contains(&c.id))
            && self.addr.as_ref().is_none_or(|a| *a == c.peer)
            && self.laddr.as_ref().is_none_or(|a| *a == c.local)
            && self
                .min_age_ms
                .is_none_or(|age| now_ms.saturating_sub(c.created_ms) as i64 >= age)
            && self.pubsub.is_none_or(|p| p == c.subs.active())
            && self.master.is_none_or(|m| m == c.master)
    }

    /// TYPE `ty` (lowercase): false when Redis knows no such type.
    fn client_type(&mut self, ty: &[u8]) -> bool {
        match ty {
            b"normal" => (self.pubsub, self.master) = (Some(false), Some(false)),
            b"pubsub" => (self.pubsub, self.master) = (Some(true), Some(false)),
            b"master" => self.master = Some(true),
            b"replica" | b"slave" => self.nobody = true,
            _ => return false,
        }
        true
    }
}

/// A question every shard answers for its own part of the server: its clients
/// (CLIENT LIST, KILL) or its keys (DEBUG DIGEST, DIGEST-VALUE).
#[derive(Clone, Debug)]
pub enum ClientQuery {
    /// CLIENT LIST: each shard answers a bulk string of its lines.
    List(ClientFilter),
    /// CLIENT KILL: each shard closes its matching clients and answers how many.
    Kill(ClientFilter),
    /// DEBUG DIGEST: each shard answers its databases' parts ([`Merge::Digest`]).
    DatasetDigest,
    /// DEBUG DIGEST-VALUE: each shard answers the digest of each key of database
    /// `db` it holds, zeros for the rest ([`Merge::Digest`]).
    ValueDigests {
        /// The client's database.
        db: usize,
        /// The keys, in request order.
        keys: Vec<Vec<u8>>,
    },
    /// DEBUG POPULATE: each shard adds the keys it owns in forward mode (all of
    /// them in per-shard mode, as a Redis Cluster node does) and answers `+OK`.
    Populate {
        /// The client's database.
        db: usize,
        /// How many keys.
        count: u64,
        /// The key prefix (`key` by default).
        prefix: Vec<u8>,
        /// The value length (0: the value text as it is).
        value_bytes: usize,
    },
    /// DEBUG OBJECT, LISTPACK, QUICKLIST: the shard holding the key answers, the
    /// others nil ([`Merge::FoundOrNoSuchKey`]).
    DebugKey {
        /// The client's database.
        db: usize,
        /// The key.
        key: Vec<u8>,
        /// What is asked.
        report: ruvio_engine::debug_digest::KeyReport,
    },
}

/// Answer `query` for this shard's clients (`caller` is the connection running the
/// command, when it is on this shard). The reply is one part of a gathered answer
/// ([`Merge::ClientLines`], [`Merge::SumInts`], [`Merge::KillOne`]), or the whole
/// answer on one shard.
pub fn answer(
    core: &mut ShardCore,
    conns: &mut Slab<Conn>,
    caller: Option<Caller<'_>>,
    query: &ClientQuery,
) -> Vec<u8> {
    let now = core.now_ms;
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
                    core.dirty.push((index, conn.gen));
                    killed += 1;
                }
            }
            if let Some(me) = caller.filter(|c| filter.matches(c, now)) {
                me.closing = true;
                killed += 1;
            }
            Reply::new(&mut out, Protocol::Resp2).int(killed);
        }
        ClientQuery::DatasetDigest => {
            let mut parts = Vec::new();
            for (db, part) in core.engine.digest_parts() {
                parts.extend_from_slice(&(db as u32).to_be_bytes());
                parts.extend_from_slice(&part);
            }
            Reply::new(&mut out, Protocol::Resp2).bulk(&parts);
        }
        ClientQuery::ValueDigests { db, keys } => {
            let digests: Vec<u8> = keys
                .iter()
                .flat_map(|k| core.engine.debug_value_digest(*db, k))
                .collect();
            Reply::new(&mut out, Protocol::Resp2).bulk(&digests);
        }
        ClientQuery::Populate {
            db,
            count,
            prefix,
            value_bytes,
        } => {
            let forward = core.cfg.port_mode == PortMode::Forward;
            let (topo, id) = (core.topo.clone(), core.id);
            let keep = |key: &[u8]| !forward || topo.key_owner(key) == id;
            core.engine
                .debug_populate(*db, now, *count, prefix, *value_bytes, keep);
            Reply::new(&mut out, Protocol::Resp2).ok();
        }
        ClientQuery::DebugKey { db, key, report } => {
            use ruvio_engine::debug_digest::debug_key_report;
            let mut reply = Reply::new(&mut out, Protocol::Resp2);
            match debug_key_report(&core.engine, *db, key, now, *report) {
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
    }
    out
}

/// The connection running CLIENT LIST or KILL, and its command's argument bytes.
pub struct Caller<'a> {
    pub client: &'a mut ClientState,
    pub argv_bytes: usize,
}

/// What the shard knows of `client` beside its state, for its CLIENT LIST line.
fn described(
    core: &ShardCore,
    client: &ClientState,
    buffers: BufferUse,
    argv_bytes: usize,
) -> Described {
    Described {
        buffers,
        dirty_cas: !client.watching.is_empty()
            && core.watches.is_touched(client.id, client.watch_epoch),
        argv_bytes,
        thread: core.id,
    }
}

/// Run `query` on every shard's clients (forward mode, several shards) or on this
/// shard's (per-shard mode keeps the node view, as a Redis Cluster node).
pub(crate) fn ask_every_shard(
    ctx: &mut Ctx<'_>,
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
    let gathered = ctx.core.cfg.port_mode == PortMode::Forward && ctx.core.cfg.shards > 1;
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
fn list(ctx: &mut Ctx<'_>, args: Args<'_>, reply: &mut Reply<'_>) -> ServerResult {
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

/// `CLIENT INFO`
fn info(ctx: &mut Ctx<'_>, args: Args<'_>, reply: &mut Reply<'_>) -> ServerResult {
    let argv_bytes = args.byte_len();
    let seen = described(ctx.core, ctx.client, ctx.client.batch_buffers, argv_bytes);
    let mut line = ctx.client.describe(ctx.core.now_ms, &seen);
    line.push('\n');
    reply.verbatim("txt", line.as_bytes());
    Ok(())
}

/// `CLIENT KILL ip:port` or `CLIENT KILL [ID id] [ADDR ip:port] [LADDR ip:port] [USER name] [SKIPME yes|no] [MAXAGE secs]`
fn kill(ctx: &mut Ctx<'_>, args: Args<'_>, reply: &mut Reply<'_>) -> ServerResult {
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
            b"user" => filter.nobody |= text != "default",
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
fn setinfo(ctx: &mut Ctx<'_>, args: Args<'_>, reply: &mut Reply<'_>) -> ServerResult {
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

fn no_evict(ctx: &mut Ctx<'_>, args: Args<'_>, reply: &mut Reply<'_>) -> ServerResult {
    ctx.client.no_evict = on_off(args.get(2)).ok_or(CmdError::Syntax)?;
    reply.ok();
    Ok(())
}

fn no_touch(ctx: &mut Ctx<'_>, args: Args<'_>, reply: &mut Reply<'_>) -> ServerResult {
    ctx.client.no_touch = on_off(args.get(2)).ok_or(CmdError::Syntax)?;
    reply.ok();
    Ok(())
}

/// `CLIENT UNBLOCK client-id [TIMEOUT | ERROR]`: 1 when the client was blocked and
/// is now answered (a null array, or `-UNBLOCKED` with ERROR), 0 otherwise. The
/// parked command may live on another shard (forward mode): the shard that holds it
/// is told, and the answer is 1 if it was parked when asked.
fn unblock(ctx: &mut Ctx<'_>, args: Args<'_>, reply: &mut Reply<'_>) -> ServerResult {
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
    let answered = match ctx.core.shared.blocked_on(id) {
        None => false,
        Some(shard) if shard == ctx.core.id => {
            crate::shard::exec::unblock(ctx.core, ctx.conns, id, error)
        }
        Some(shard) => {
            let control = crate::mesh::forward::Control::Unblock {
                client_id: id,
                error,
            };
            ctx.core.outbox.control(shard, control);
            true
        }
    };
    reply.int(answered as i64);
    Ok(())
}

/// `CLIENT PAUSE timeout [WRITE|ALL]`: every shard pauses before the `+OK`.
fn pause(ctx: &mut Ctx<'_>, args: Args<'_>, reply: &mut Reply<'_>) -> ServerResult {
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
    let until_ms = ctx.core.now_ms.saturating_add(timeout as u64);
    ctx.core.pause.start(until_ms, all);
    ctx.core
        .outbox
        .broadcast(ConfigChange::Pause { until_ms, all });
    super::ok_everywhere(ctx, reply);
    Ok(())
}

/// `CLIENT UNPAUSE`
fn unpause(ctx: &mut Ctx<'_>, _args: Args<'_>, reply: &mut Reply<'_>) -> ServerResult {
    crate::shard::end_pause(ctx.core, ctx.conns);
    ctx.core.outbox.broadcast(ConfigChange::Unpause);
    super::ok_everywhere(ctx, reply);
    Ok(())
}

/// `CLIENT REPLY ON|OFF|SKIP`: OFF and SKIP are not answered.
fn reply_mode(ctx: &mut Ctx<'_>, args: Args<'_>, reply: &mut Reply<'_>) -> ServerResult {
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

fn help(_ctx: &mut Ctx<'_>, _args: Args<'_>, reply: &mut Reply<'_>) -> ServerResult {
    reply_help(
        reply,
        b"client",
        &[
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
