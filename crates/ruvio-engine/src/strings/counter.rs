//! INCR, DECR, INCRBY, DECRBY (one core, Redis' `incrDecrCommand`) and INCRBYFLOAT.
//! All of them keep the key's TTL, as Redis does.

use ruvio_resp::{Args, Reply};

use super::string_of;
use crate::args::int_arg;
use crate::command::{CmdResult, ExecCtx, Outcome::Done};
use crate::error::CmdError;
use crate::keyspace::{Entry, NewValue};
use crate::longdouble::{incr_by_float, FloatText, LongDouble};
use crate::value::StrRef;
use crate::Engine;

/// Add `delta` to the integer at `key` (0 when missing) and return the result.
fn incr_by(
    engine: &mut Engine,
    ctx: &mut ExecCtx,
    key: &[u8],
    delta: i64,
) -> Result<i64, CmdError> {
    let existing = engine.lookup_write(ctx, key);
    let current = match existing {
        None => 0,
        Some(id) => match string_of(engine.db(ctx.db).entry(id))? {
            StrRef::Int(n) => n,
            StrRef::Bytes(b) => crate::args::parse_i64(b).ok_or(CmdError::NotInteger)?,
        },
    };
    let new = current.checked_add(delta).ok_or(CmdError::IncrOverflow)?;
    store(engine, ctx, key, existing, NewValue::Int(new));
    ctx.changed(key, super::events::INCRBY, 1);
    Ok(new)
}

/// Replace the value of `existing` (keeping its TTL) or add `key`.
fn store(
    engine: &mut Engine,
    ctx: &ExecCtx,
    key: &[u8],
    existing: Option<u32>,
    value: NewValue<'_>,
) {
    let clock = engine.new_clock(ctx.now_ms);
    if existing.is_none() {
        engine.log_new(ctx, ctx.db, key);
    }
    let db = engine.db_mut(ctx.db);
    match existing {
        Some(id) => db.modify(id, |e| e.set_value(value)),
        None => {
            db.insert(Entry::new(key, value, clock));
        }
    }
}

fn reply_int(reply: &mut Reply<'_>, result: Result<i64, CmdError>) -> CmdResult {
    reply.int(result?);
    Ok(Done)
}

/// `INCR key`
pub(crate) fn incr(
    engine: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> CmdResult {
    reply_int(reply, incr_by(engine, ctx, args.get(1), 1))
}

/// `DECR key`
pub(crate) fn decr(
    engine: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> CmdResult {
    reply_int(reply, incr_by(engine, ctx, args.get(1), -1))
}

/// `INCRBY key increment`
pub(crate) fn incrby(
    engine: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> CmdResult {
    let result = int_arg(args.get(2)).and_then(|delta| incr_by(engine, ctx, args.get(1), delta));
    reply_int(reply, result)
}

/// `DECRBY key decrement`
pub(crate) fn decrby(
    engine: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> CmdResult {
    let result = int_arg(args.get(2)).and_then(|delta| {
        let negated = delta.checked_neg().ok_or(CmdError::DecrOverflow)?;
        incr_by(engine, ctx, args.get(1), negated)
    });
    reply_int(reply, result)
}

/// `INCRBYFLOAT key increment`: long double arithmetic and formatting as Redis.
pub(crate) fn incrbyfloat(
    engine: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> CmdResult {
    let key = args.get(1);
    let result = (|| -> Result<FloatText, CmdError> {
        let existing = engine.lookup_write(ctx, key);
        // Redis parses the stored value first, then the increment; both failures
        // are the same error.
        let current = match existing {
            None => LongDouble::ZERO,
            Some(id) => match string_of(engine.db(ctx.db).entry(id))? {
                StrRef::Int(n) => LongDouble::from_i64(n),
                StrRef::Bytes(b) => LongDouble::parse(b).ok_or(CmdError::NotFloat)?,
            },
        };
        let incr = LongDouble::parse(args.get(2)).ok_or(CmdError::NotFloat)?;
        let text = incr_by_float(current, incr)?;
        store(
            engine,
            ctx,
            key,
            existing,
            NewValue::Str {
                bytes: text.as_bytes(),
                raw: false,
            },
        );
        Ok(text)
    })()?;
    // Logged as a SET of the result (KEEPTTL keeps the deadline), as Redis does, so
    // replaying the log cannot drift with the float arithmetic.
    ctx.changed(key, super::events::INCRBYFLOAT, 1);
    ctx.log_as(&[b"SET", key, result.as_bytes(), b"KEEPTTL"]);
    reply.bulk(result.as_bytes());
    Ok(Done)
}
