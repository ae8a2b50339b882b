//! Expiry commands (Redis' expire.c): EXPIRE, PEXPIRE, EXPIREAT, PEXPIREAT with
//! NX/XX/GT/LT (one core, `expireGenericCommand`), TTL, PTTL, EXPIRETIME,
//! PEXPIRETIME (one core, `ttlGenericCommand`) and PERSIST.
//!
//! Times are absolute Unix milliseconds inside the engine, so a WAL can log
//! `PEXPIREAT key <ms>` for any of them.

use ruvio_resp::{Args, Reply};

use crate::args::{eq_ci, int_arg};
use crate::command::{CmdResult, ExecCtx, Outcome::Done};
use crate::engine::Lookup;
use crate::error::CmdError;
use crate::Engine;

/// EXPIRE's condition flags.
#[derive(Clone, Copy, Default)]
struct Conditions {
    nx: bool,
    xx: bool,
    gt: bool,
    lt: bool,
}

/// Redis' `parseExtendedExpireArgumentsOrReply`.
fn parse_conditions(args: Args<'_>) -> Result<Conditions, CmdError> {
    let mut c = Conditions::default();
    for opt in args.iter().skip(3) {
        if eq_ci(opt, "NX") {
            c.nx = true;
        } else if eq_ci(opt, "XX") {
            c.xx = true;
        } else if eq_ci(opt, "GT") {
            c.gt = true;
        } else if eq_ci(opt, "LT") {
            c.lt = true;
        } else {
            return Err(CmdError::unsupported_option(opt));
        }
    }
    if c.nx && (c.xx || c.gt || c.lt) {
        return Err(CmdError::ExpireNxWithOthers);
    }
    if c.gt && c.lt {
        return Err(CmdError::ExpireGtAndLt);
    }
    Ok(c)
}

/// The unit and base of one EXPIRE variant.
#[derive(Clone, Copy)]
struct Variant {
    name: &'static str,
    seconds: bool,
    relative: bool,
}

/// Redis' `expireGenericCommand`: 1 when the expiry was set (or the key deleted
/// because the time is already past), 0 when the key is missing or a condition failed.
fn expire_generic(
    engine: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    v: Variant,
    reply: &mut Reply<'_>,
) -> CmdResult {
    let conditions = parse_conditions(args)?;
    let done = expire_body(engine, ctx, args, v, conditions)?;
    reply.int(done as i64);
    Ok(Done)
}

fn expire_body(
    engine: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    v: Variant,
    c: Conditions,
) -> Result<bool, CmdError> {
    let invalid = CmdError::InvalidExpireTime(v.name);
    let mut when = int_arg(args.get(2))?;
    if v.seconds {
        when = when.checked_mul(1000).ok_or_else(|| invalid.clone())?;
    }
    if v.relative {
        when = when
            .checked_add(ctx.now_ms as i64)
            .ok_or_else(|| invalid.clone())?;
    }
    let Some(id) = engine.lookup_write(ctx, args.get(1)) else {
        return Ok(false);
    };
    let current = engine.db(ctx.db).entry(id).expire_at().map(|at| at as i64);
    let refused = (c.nx && current.is_some())
        || (c.xx && current.is_none())
        || (c.gt && current.is_none_or(|cur| when <= cur))
        || (c.lt && current.is_some_and(|cur| when >= cur));
    if refused {
        return Ok(false);
    }
    let key = args.get(1);
    if when <= ctx.now_ms as i64 {
        engine.delete(ctx.db, id);
        ctx.changed(key, super::events::DEL, 1);
        ctx.log_as(&[b"DEL", key]);
    } else {
        engine.db_mut(ctx.db).set_expire(id, Some(when as u64));
        ctx.changed(key, super::events::EXPIRE, 1);
        let when = itoa::Buffer::new().format(when).to_owned();
        ctx.log_as(&[b"PEXPIREAT", key, when.as_bytes()]);
    }
    Ok(true)
}

/// `EXPIRE key seconds [NX | XX | GT | LT]`
pub(crate) fn expire(
    engine: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> CmdResult {
    expire_generic(
        engine,
        ctx,
        args,
        Variant {
            name: "expire",
            seconds: true,
            relative: true,
        },
        reply,
    )
}

/// `PEXPIRE key milliseconds [NX | XX | GT | LT]`
pub(crate) fn pexpire(
    engine: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> CmdResult {
    expire_generic(
        engine,
        ctx,
        args,
        Variant {
            name: "pexpire",
            seconds: false,
            relative: true,
        },
        reply,
    )
}

/// `EXPIREAT key unix-time-seconds [NX | XX | GT | LT]`
pub(crate) fn expireat(
    engine: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> CmdResult {
    expire_generic(
        engine,
        ctx,
        args,
        Variant {
            name: "expireat",
            seconds: true,
            relative: false,
        },
        reply,
    )
}

/// `PEXPIREAT key unix-time-milliseconds [NX | XX | GT | LT]`
pub(crate) fn pexpireat(
    engine: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> CmdResult {
    expire_generic(
        engine,
        ctx,
        args,
        Variant {
            name: "pexpireat",
            seconds: false,
            relative: false,
        },
        reply,
    )
}

/// Redis' `ttlGenericCommand`: -2 when missing, -1 without TTL, else the remaining
/// time (or the absolute time) in ms or rounded seconds.
fn ttl_generic(engine: &mut Engine, ctx: &ExecCtx, key: &[u8], in_ms: bool, absolute: bool) -> i64 {
    let Some(id) = engine.lookup(ctx, ctx.db, key, Lookup::READ_NOTOUCH) else {
        return -2;
    };
    let Some(at) = engine.db(ctx.db).entry(id).expire_at() else {
        return -1;
    };
    let at = at as i64;
    let ttl = if absolute {
        at
    } else {
        (at - ctx.now_ms as i64).max(0)
    };
    if in_ms {
        ttl
    } else {
        (ttl + 500) / 1000
    }
}

/// `TTL key`
pub(crate) fn ttl(
    engine: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> CmdResult {
    reply.int(ttl_generic(engine, ctx, args.get(1), false, false));
    Ok(Done)
}

/// `PTTL key`
pub(crate) fn pttl(
    engine: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> CmdResult {
    reply.int(ttl_generic(engine, ctx, args.get(1), true, false));
    Ok(Done)
}

/// `EXPIRETIME key`
pub(crate) fn expiretime(
    engine: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> CmdResult {
    reply.int(ttl_generic(engine, ctx, args.get(1), false, true));
    Ok(Done)
}

/// `PEXPIRETIME key`
pub(crate) fn pexpiretime(
    engine: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> CmdResult {
    reply.int(ttl_generic(engine, ctx, args.get(1), true, true));
    Ok(Done)
}

/// `PERSIST key`: 1 when a TTL was removed.
pub(crate) fn persist(
    engine: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> CmdResult {
    let removed = match engine.lookup_write(ctx, args.get(1)) {
        Some(id) if engine.db(ctx.db).entry(id).expire_at().is_some() => {
            engine.db_mut(ctx.db).set_expire(id, None);
            true
        }
        _ => false,
    };
    if removed {
        ctx.changed(args.get(1), super::events::PERSIST, 1);
    }
    reply.int(removed as i64);
    Ok(Done)
}
