//! Connection commands: PING, ECHO, QUIT, RESET, HELLO, AUTH, SELECT.

use super::{parse_i64, Ctx, Server, ServerCommand, ServerResult, SharedReads};
use crate::acl::rules::User;
use crate::acl::{Acl, Session};
use crate::net::conn::ReplyMode;
use ruvio_engine::command::{command, flags::*};
use ruvio_engine::{CmdError, KeySpec};
use ruvio_resp::{Args, Protocol, Reply};
use std::sync::Arc;

/// The Redis version Ruvio answers as (HELLO, INFO). Clients read it to pick features.
pub const REDIS_VERSION: &str = ruvio_engine::REDIS_VERSION;

/// The connection family's table.
#[rustfmt::skip]
pub const COMMANDS: &[ServerCommand] = &[
    command!("ping", -1, FAST, KeySpec::NONE, ["fast", "connection"], "connection", "1.0.0",
        "Ping the server", "O(1)", ping),
    command!("echo", 2, LOADING | STALE | FAST, KeySpec::NONE, ["fast", "connection"], "connection", "1.0.0",
        "Echo the given string", "O(1)", echo),
    command!("quit", -1, ALLOW_BUSY | NOSCRIPT | LOADING | STALE | FAST | NO_AUTH, KeySpec::NONE,
        ["fast", "connection"], "connection", "1.0.0", "Close the connection", "O(1)", quit),
    command!("reset", 1, NOSCRIPT | LOADING | STALE | FAST | NO_AUTH | ALLOW_BUSY, KeySpec::NONE,
        ["fast", "connection"], "connection", "6.2.0", "Reset the connection", "O(1)", reset),
    command!("hello", -1, NOSCRIPT | LOADING | STALE | FAST | NO_AUTH | ALLOW_BUSY, KeySpec::NONE,
        ["fast", "connection"], "connection", "6.0.0", "Handshake with Redis", "O(1)", hello),
    command!("auth", -2, NOSCRIPT | LOADING | STALE | FAST | NO_AUTH | ALLOW_BUSY, KeySpec::NONE,
        ["fast", "connection"], "connection", "1.0.0", "Authenticate to the server",
        "O(N) where N is the number of passwords defined for the user", auth),
    command!("select", 2, LOADING | STALE | FAST, KeySpec::NONE, ["fast", "connection"], "connection", "1.0.0",
        "Change the selected database for the current connection", "O(1)", select),
];

/// `PING [message]`
fn ping<S: Server>(ctx: &mut Ctx<'_, S>, args: Args<'_>, reply: &mut Reply<'_>) -> ServerResult {
    if ctx.client.proto == Protocol::Resp2 && ctx.client.subs.active() && args.len() <= 2 {
        // Subscribed mode: an array, as a subscriber reads only arrays then.
        reply.array(2);
        reply.bulk(b"pong");
        reply.bulk(if args.len() == 2 { args.get(1) } else { b"" });
        return Ok(());
    }
    match args.len() {
        1 => reply.simple("PONG"),
        2 => reply.bulk(args.get(1)),
        _ => return Err(CmdError::WrongArity("ping")),
    }
    Ok(())
}

/// `ECHO message`
fn echo<S: Server>(_ctx: &mut Ctx<'_, S>, args: Args<'_>, reply: &mut Reply<'_>) -> ServerResult {
    reply.bulk(args.get(1));
    Ok(())
}

/// `QUIT`: reply OK, then close once the reply is written.
fn quit<S: Server>(ctx: &mut Ctx<'_, S>, _args: Args<'_>, reply: &mut Reply<'_>) -> ServerResult {
    reply.ok();
    ctx.client.closing = true;
    Ok(())
}

/// `RESET`: back to a fresh connection's state.
fn reset<S: Server>(ctx: &mut Ctx<'_, S>, _args: Args<'_>, reply: &mut Reply<'_>) -> ServerResult {
    let c = &mut *ctx.client;
    let acl = ctx.core.shared().acl().clone();
    reset_connection(c, &acl);
    let core = &*ctx.core;
    crate::messaging::pubsub::forget_all(
        core.shared().pubsub(),
        core.shard_id(),
        &mut c.subs,
        ctx.who,
    );
    ctx.core.unwatch(ctx.client);
    if std::mem::take(&mut ctx.client.monitor) {
        ctx.core.detach_monitor(ctx.who);
    }
    let broadcast = crate::tracking::broadcasts(ctx.core.topology());
    let (tracking, mut to) = ctx.core.tracking_parts();
    tracking.disable(&mut to, broadcast, ctx.client);
    reply.proto = Protocol::Resp2;
    reply.simple("RESET");
    Ok(())
}

/// RESET's part that needs only the connection: a fresh connection's database,
/// protocol, name, reply mode and flags, no transaction, the `default` user's
/// session (authenticated unless it needs a password; also what a busy script's
/// shard does: `shard::busy`).
pub fn reset_connection(c: &mut crate::net::conn::ClientState, acl: &Acl) {
    c.db = 0;
    c.proto = Protocol::Resp2;
    c.name.clear();
    c.reply_mode = ReplyMode::On;
    c.no_evict = false;
    c.no_touch = false;
    c.readonly = false;
    (c.authenticated, c.acl) = acl.new_session();
    acl.forget_client(c.id);
    c.multi = None;
}

/// AUTH's answer: the user to run as, or Redis's error. Also what a busy
/// script's shard answers (see `shard::busy`), which has no command context.
pub fn authenticate(acl: &Acl, args: Args<'_>) -> Result<Arc<User>, CmdError> {
    let (user, pass) = match args.len() {
        2 if !acl.auth_required() => return Err(CmdError::AuthNotConfigured),
        2 => (&b"default"[..], args.get(1)),
        3 => (args.get(1), args.get(2)),
        _ => return Err(CmdError::Syntax),
    };
    acl.authenticate(user, pass).ok_or(CmdError::WrongPass)
}

/// Log a failed AUTH (or HELLO AUTH) for `user` in ACL LOG.
fn log_failed_auth<S: Server>(ctx: &mut Ctx<'_, S>, args: Args<'_>, user: &[u8]) {
    super::acl::log_denial(ctx, "auth", args.get(0), user);
}

/// `AUTH [username] password`
fn auth<S: Server>(ctx: &mut Ctx<'_, S>, args: Args<'_>, reply: &mut Reply<'_>) -> ServerResult {
    match authenticate(ctx.core.shared().acl(), args) {
        Ok(user) => {
            ctx.client.authenticated = true;
            ctx.client.acl = Session::new(user);
            ctx.core.shared().acl().forget_client(ctx.client.id);
            reply.ok();
            Ok(())
        }
        Err(CmdError::WrongPass) => {
            let user = if args.len() == 2 {
                b"default".as_slice()
            } else {
                args.get(1)
            };
            log_failed_auth(ctx, args, user);
            Err(CmdError::WrongPass)
        }
        Err(e) => Err(e),
    }
}

/// `HELLO [protover [AUTH username password] [SETNAME clientname]]`
fn hello<S: Server>(ctx: &mut Ctx<'_, S>, args: Args<'_>, reply: &mut Reply<'_>) -> ServerResult {
    let acl = ctx.core.shared().acl().clone();
    let cluster = ctx.core.settings().cluster_mode();
    if let Err(e) = hello_reply(ctx.client, &acl, cluster, args, reply) {
        if e == CmdError::WrongPass {
            // ACL LOG records the failed AUTH (its user is after AUTH).
            let at = (2..args.len()).find(|&i| args.get(i).eq_ignore_ascii_case(b"AUTH"));
            if let Some(user) = at.map(|i| args.get(i + 1)) {
                log_failed_auth(ctx, args, user);
            }
        }
        return Err(e);
    }
    // SETNAME: the command logs name the client as it is now called.
    let named = (2..args.len()).any(|i| args.get(i).eq_ignore_ascii_case(b"SETNAME"));
    if named {
        let observatory = ctx.core.shared().observatory();
        observatory.client_named(ctx.client.id, &ctx.client.name);
    }
    Ok(())
}

/// HELLO on connection `client`, given the ACL users and the port mode: its
/// changes to the connection and its reply (also what a busy script's shard
/// answers: `shard::busy`).
pub fn hello_reply(
    client: &mut crate::net::conn::ClientState,
    acl: &Acl,
    cluster: bool,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> ServerResult {
    let mut proto = None;
    let mut i = 1;
    if args.len() > 1 {
        match parse_i64(args.get(1)) {
            Some(2) => proto = Some(Protocol::Resp2),
            Some(3) => proto = Some(Protocol::Resp3),
            Some(_) => return Err(CmdError::NoProto),
            None => return Err(CmdError::ProtoNotInteger),
        }
        i = 2;
    }
    let mut auth = None;
    let mut name = None;
    while i < args.len() {
        let more = args.len() - i - 1;
        let opt = args.get(i);
        if opt.eq_ignore_ascii_case(b"AUTH") && more >= 2 {
            auth = Some((args.get(i + 1), args.get(i + 2)));
            i += 3;
        } else if opt.eq_ignore_ascii_case(b"SETNAME") && more >= 1 {
            name = Some(args.get(i + 1));
            i += 2;
        } else {
            return Err(CmdError::hello_option(opt));
        }
    }
    if let Some((user, pass)) = auth {
        let Some(found) = acl.authenticate(user, pass) else {
            return Err(CmdError::WrongPass);
        };
        client.authenticated = true;
        client.acl = Session::new(found);
        acl.forget_client(client.id);
    }
    if !client.authenticated {
        return Err(CmdError::HelloNoAuth);
    }
    if let Some(name) = name {
        if !super::client::valid_client_name(name) {
            return Err(CmdError::BadClientName);
        }
        client.name = name.to_vec();
    }
    if let Some(p) = proto {
        client.proto = p;
        reply.proto = p;
    }
    reply.map(7);
    reply.bulk(b"server");
    reply.bulk(b"redis");
    reply.bulk(b"version");
    reply.bulk(REDIS_VERSION.as_bytes());
    reply.bulk(b"proto");
    reply.int(if client.proto == Protocol::Resp3 {
        3
    } else {
        2
    });
    reply.bulk(b"id");
    reply.int(client.id as i64);
    reply.bulk(b"mode");
    reply.bulk(match cluster {
        true => b"cluster",
        false => b"standalone",
    });
    reply.bulk(b"role");
    reply.bulk(b"master");
    reply.bulk(b"modules");
    reply.array(0);
    Ok(())
}

/// `SELECT index`
fn select<S: Server>(ctx: &mut Ctx<'_, S>, args: Args<'_>, reply: &mut Reply<'_>) -> ServerResult {
    ctx.client.db = select_index(ctx.core.engine(), args.get(1))?;
    reply.ok();
    Ok(())
}

/// The database SELECT's `index` names, or SELECT's error (also for a SELECT
/// queued in a transaction, `multi`).
pub(crate) fn select_index(engine: &ruvio_engine::Engine, index: &[u8]) -> Result<usize, CmdError> {
    let index = parse_i64(index).ok_or(CmdError::NotInteger)?;
    if index < 0 || index as usize >= engine.db_count() {
        return Err(CmdError::DbIndexOutOfRange);
    }
    Ok(index as usize)
}
