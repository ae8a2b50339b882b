//! The SET family: one generic core ([`set_generic`], Redis' `setGenericCommand`)
//! serves SET, SETNX, SETEX, PSETEX and GETSET; the option parser
//! ([`parse_extended`], Redis' `parseExtendedStringArgumentsOrReply`) serves SET
//! (with Redis 8.4's IFEQ/IFNE/IFDEQ/IFDNE conditions), GETEX and MSETEX.
//! MSET/MSETNX, MSETEX (Redis 8.4) and GETEX are here too since they share the
//! pieces.

use ruvio_resp::{Args, Reply};

use super::digest::{parse_condition, Condition};
use super::{encode_arg, events, get_generic, string_of};
use crate::args::eq_ci;
use crate::command::{CmdResult, ExecCtx, Outcome::Done};
use crate::error::CmdError;
use crate::Engine;

/// Which command's options are being parsed.
#[derive(Clone, Copy, PartialEq, Eq)]
enum OptionsOf {
    Set,
    GetEx,
    /// MSETEX: SET's options without GET (Redis 8.4).
    MsetEx,
}

/// How an expire argument is read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ExpireUnit {
    /// EX: seconds from now.
    Seconds,
    /// PX: milliseconds from now.
    Millis,
    /// EXAT: Unix seconds.
    UnixSeconds,
    /// PXAT: Unix milliseconds.
    UnixMillis,
}

impl ExpireUnit {
    fn in_seconds(self) -> bool {
        matches!(self, ExpireUnit::Seconds | ExpireUnit::UnixSeconds)
    }
    fn relative(self) -> bool {
        matches!(self, ExpireUnit::Seconds | ExpireUnit::Millis)
    }
}

/// Parsed SET/GETEX options.
#[derive(Clone, Copy, Default)]
struct SetOptions<'a> {
    nx: bool,
    xx: bool,
    /// SET's IFEQ / IFNE / IFDEQ / IFDNE (Redis 8.4), exclusive with NX and XX.
    condition: Option<Condition<'a>>,
    get: bool,
    keep_ttl: bool,
    persist: bool,
    expire: Option<(ExpireUnit, &'a [u8])>,
}

/// Redis 7.0's option grammar for SET (from argv[3]) and GETEX (from argv[2]):
/// NX/XX exclude each other, KEEPTTL/PERSIST exclude every expire form, the expire
/// forms exclude each other (repeating the same one is allowed, the last wins).
fn parse_extended<'a>(
    args: Args<'a>,
    from: usize,
    of: OptionsOf,
) -> Result<SetOptions<'a>, CmdError> {
    let mut o = SetOptions::default();
    let mut j = from;
    while j < args.len() {
        let opt = args.get(j);
        let next = (j + 1 < args.len()).then(|| args.get(j + 1));
        let set = matches!(of, OptionsOf::Set | OptionsOf::MsetEx);
        let other_expire = |u: ExpireUnit| o.expire.is_some_and(|(unit, _)| unit != u);
        let conditional = o.condition.is_some();
        let condition_word = ["IFEQ", "IFNE", "IFDEQ", "IFDNE"]
            .iter()
            .any(|w| eq_ci(opt, w));
        if set && eq_ci(opt, "NX") && !o.xx && !conditional {
            o.nx = true;
        } else if set && eq_ci(opt, "XX") && !o.nx && !conditional {
            o.xx = true;
        } else if of == OptionsOf::Set && condition_word {
            let Some(operand) = next.filter(|_| !o.nx && !o.xx && !conditional) else {
                return Err(CmdError::Syntax);
            };
            o.condition = Some(parse_condition(opt, operand)?);
            j += 1;
        } else if of == OptionsOf::Set && eq_ci(opt, "GET") {
            o.get = true;
        } else if set && eq_ci(opt, "KEEPTTL") && !o.persist && o.expire.is_none() {
            o.keep_ttl = true;
        } else if !set && eq_ci(opt, "PERSIST") && o.expire.is_none() && !o.keep_ttl {
            o.persist = true;
        } else if let (Some(unit), Some(value)) = (expire_keyword(opt), next) {
            if o.keep_ttl || o.persist || other_expire(unit) {
                return Err(CmdError::Syntax);
            }
            o.expire = Some((unit, value));
            j += 1;
        } else {
            return Err(CmdError::Syntax);
        }
        j += 1;
    }
    Ok(o)
}

fn expire_keyword(opt: &[u8]) -> Option<ExpireUnit> {
    if eq_ci(opt, "EX") {
        Some(ExpireUnit::Seconds)
    } else if eq_ci(opt, "PX") {
        Some(ExpireUnit::Millis)
    } else if eq_ci(opt, "EXAT") {
        Some(ExpireUnit::UnixSeconds)
    } else if eq_ci(opt, "PXAT") {
        Some(ExpireUnit::UnixMillis)
    } else {
        None
    }
}

/// Redis' `getExpireMillisecondsOrReply`: the absolute expiry in Unix ms, or
/// `invalid expire time in '<cmd>' command` for non-positive or overflowing values.
pub(crate) fn expire_at_ms(
    unit: ExpireUnit,
    arg: &[u8],
    now_ms: u64,
    cmd: &'static str,
) -> Result<u64, CmdError> {
    let invalid = CmdError::InvalidExpireTime(cmd);
    let mut ms = crate::args::int_arg(arg)?;
    if ms <= 0 || (unit.in_seconds() && ms > i64::MAX / 1000) {
        return Err(invalid);
    }
    if unit.in_seconds() {
        ms *= 1000;
    }
    if unit.relative() {
        ms = ms
            .checked_add(now_ms as i64)
            .ok_or_else(|| invalid.clone())?;
    }
    if ms <= 0 {
        return Err(invalid);
    }
    Ok(ms as u64)
}

/// What SET-family commands reply when they did (`ok`) or did not (`abort`) store.
#[derive(Clone, Copy)]
enum Answer {
    /// `+OK` / nil (SET, SETEX, PSETEX).
    OkOrNull,
    /// `:1` / `:0` (SETNX).
    OneOrZero,
}

/// How one SET-family command calls the core.
struct SetCall<'a> {
    /// Index of the value argument.
    value_at: usize,
    options: SetOptions<'a>,
    /// Name in `invalid expire time in '<cmd>' command`.
    cmd: &'static str,
    answer: Answer,
}

/// Redis' `setGenericCommand`.
fn set_generic(
    engine: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    call: SetCall<'_>,
    reply: &mut Reply<'_>,
) -> Result<(), CmdError> {
    let SetCall {
        value_at,
        options,
        cmd,
        answer,
    } = call;
    let key = args.get(1);
    let expire_at = match options.expire {
        Some((unit, arg)) => Some(expire_at_ms(unit, arg, ctx.now_ms, cmd)?),
        None => None,
    };
    let value = encode_arg(args.get(value_at))?;
    // A condition is judged before GET replies, so that its errors (WRONGTYPE, a
    // malformed digest) come before anything is written.
    let condition_holds = match options.condition {
        None => true,
        Some(condition) => match engine.lookup_write(ctx, key) {
            None => condition.holds_for_missing(),
            Some(id) => {
                let mut buf = itoa::Buffer::new();
                let current = string_of(engine.db(ctx.db).entry(id))?;
                condition.holds_for(current.bytes(&mut buf))?
            }
        },
    };
    if options.get {
        get_generic(engine, ctx, key, reply)?;
    }
    let existing = engine.lookup_write(ctx, key);
    if (options.nx && existing.is_some()) || (options.xx && existing.is_none()) || !condition_holds
    {
        if !options.get {
            match answer {
                Answer::OkOrNull => reply.null(),
                Answer::OneOrZero => reply.int(0),
            }
        }
        return Ok(());
    }
    let id = engine.set_key(ctx, key, existing, value, options.keep_ttl);
    ctx.changed(key, events::SET, 1);
    if let Some(at) = expire_at {
        engine.db_mut(ctx.db).set_expire(id, Some(at));
        // Redis announces the TTL as an `expire` event after the `set`.
        ctx.changed(key, crate::keys::events::EXPIRE, 0);
        // A relative TTL is logged as its deadline (Redis 7 propagates SET PXAT).
        let at = itoa::Buffer::new().format(at).to_owned();
        ctx.log_as(&[b"SET", key, args.get(value_at), b"PXAT", at.as_bytes()]);
    }
    if !options.get {
        match answer {
            Answer::OkOrNull => reply.ok(),
            Answer::OneOrZero => reply.int(1),
        }
    }
    Ok(())
}

/// `SET key value [NX | XX] [GET] [EX seconds | PX milliseconds |
/// EXAT unix-time-seconds | PXAT unix-time-milliseconds | KEEPTTL]`
pub(crate) fn set(
    engine: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> CmdResult {
    let options = parse_extended(args, 3, OptionsOf::Set)?;
    let call = SetCall {
        value_at: 2,
        options,
        cmd: "set",
        answer: Answer::OkOrNull,
    };
    set_generic(engine, ctx, args, call, reply)?;
    Ok(Done)
}

/// `SETNX key value`: 1 when set, 0 when the key existed.
pub(crate) fn setnx(
    engine: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> CmdResult {
    let call = SetCall {
        value_at: 2,
        options: SetOptions {
            nx: true,
            ..SetOptions::default()
        },
        cmd: "setnx",
        answer: Answer::OneOrZero,
    };
    set_generic(engine, ctx, args, call, reply)?;
    Ok(Done)
}

/// `SETEX key seconds value`
pub(crate) fn setex(
    engine: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> CmdResult {
    set_expiring(engine, ctx, args, reply, ExpireUnit::Seconds, "setex")
}

/// `PSETEX key milliseconds value`
pub(crate) fn psetex(
    engine: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> CmdResult {
    set_expiring(engine, ctx, args, reply, ExpireUnit::Millis, "psetex")
}

/// SETEX and PSETEX: a SET whose TTL is argument 2 in `unit` and value argument 3.
fn set_expiring(
    engine: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    reply: &mut Reply<'_>,
    unit: ExpireUnit,
    cmd: &'static str,
) -> CmdResult {
    let options = SetOptions {
        expire: Some((unit, args.get(2))),
        ..SetOptions::default()
    };
    let call = SetCall {
        value_at: 3,
        options,
        cmd,
        answer: Answer::OkOrNull,
    };
    set_generic(engine, ctx, args, call, reply)?;
    Ok(Done)
}

/// `GETSET key value`: the old value (or nil), and the new value without TTL.
pub(crate) fn getset(
    engine: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> CmdResult {
    let call = SetCall {
        value_at: 2,
        options: SetOptions {
            get: true,
            ..SetOptions::default()
        },
        cmd: "getset",
        answer: Answer::OkOrNull,
    };
    set_generic(engine, ctx, args, call, reply)?;
    Ok(Done)
}

/// `MSET key value [key value ...]`
pub(crate) fn mset(
    engine: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> CmdResult {
    mset_generic(engine, ctx, args, false, "mset", reply)?;
    Ok(Done)
}

/// `MSETNX key value [key value ...]`: 1 when all were set, 0 (and nothing set) when
/// any key existed.
pub(crate) fn msetnx(
    engine: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> CmdResult {
    mset_generic(engine, ctx, args, true, "msetnx", reply)?;
    Ok(Done)
}

fn mset_generic(
    engine: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    nx: bool,
    cmd: &'static str,
    reply: &mut Reply<'_>,
) -> Result<(), CmdError> {
    if args.len().is_multiple_of(2) {
        return Err(CmdError::WrongArity(cmd));
    }
    let pairs = (1..args.len())
        .step_by(2)
        .map(|i| (args.get(i), args.get(i + 1)));
    if nx
        && pairs
            .clone()
            .any(|(key, _)| engine.lookup_write(ctx, key).is_some())
    {
        reply.int(0);
        return Ok(());
    }
    for (_, value) in pairs.clone() {
        encode_arg(value)?;
    }
    for (key, value) in pairs {
        let existing = engine.lookup_write(ctx, key);
        engine.set_key(ctx, key, existing, encode_arg(value)?, false);
        ctx.changed(key, events::SET, 1);
        crate::fault::point(args.get(0), "mid-write");
    }
    if nx {
        reply.int(1);
    } else {
        reply.ok();
    }
    Ok(())
}

/// MSETEX's `numkeys` above this is refused as Redis refuses it (`kv_count * 2` must
/// not overflow Redis' int).
const MSETEX_NUMKEYS_MAX: i64 = i32::MAX as i64;

/// `MSETEX numkeys key value [key value ...] [NX | XX] [EX seconds |
/// PX milliseconds | EXAT unix-time-seconds | PXAT unix-time-milliseconds | KEEPTTL]`
/// (Redis 8.4): all pairs set with one shared expiry, or none. NX: only when no key
/// exists; XX: only when every key exists. Replies 1 when set, 0 when not.
pub(crate) fn msetex(
    engine: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> CmdResult {
    let pairs = crate::args::parse_i64(args.get(1))
        .filter(|n| (1..=MSETEX_NUMKEYS_MAX).contains(n))
        .ok_or(CmdError::MsetexNumkeys)? as usize;
    let options_at = 2 + 2 * pairs;
    if options_at > args.len() {
        return Err(CmdError::MsetexPairs);
    }
    let options = parse_extended(args, options_at, OptionsOf::MsetEx)?;
    let expire_at = match options.expire {
        Some((unit, arg)) => Some(expire_at_ms(unit, arg, ctx.now_ms, "msetex")?),
        None => None,
    };
    let pairs = (2..options_at)
        .step_by(2)
        .map(|i| (args.get(i), args.get(i + 1)));
    for (_, value) in pairs.clone() {
        encode_arg(value)?;
    }
    let blocked = |existing: bool| (options.nx && existing) || (options.xx && !existing);
    if pairs
        .clone()
        .any(|(key, _)| blocked(engine.lookup_write(ctx, key).is_some()))
    {
        reply.int(0);
        return Ok(Done);
    }
    for (key, value) in pairs {
        let existing = engine.lookup_write(ctx, key);
        let id = engine.set_key(ctx, key, existing, encode_arg(value)?, options.keep_ttl);
        ctx.changed(key, events::SET, 1);
        if let Some(at) = expire_at {
            engine.db_mut(ctx.db).set_expire(id, Some(at));
            ctx.changed(key, crate::keys::events::EXPIRE, 0);
        }
    }
    if let Some(at) = expire_at {
        // A relative TTL is logged as its deadline, and the condition, which held,
        // is dropped: the record replays to the same keys whatever came before.
        let at = itoa::Buffer::new().format(at).to_owned();
        let mut record: Vec<&[u8]> = args.iter().take(options_at).collect();
        record.extend([b"PXAT".as_slice(), at.as_bytes()]);
        ctx.log_as(&record);
    }
    reply.int(1);
    Ok(Done)
}

/// `GETEX key [EX seconds | PX milliseconds | EXAT unix-time-seconds |
/// PXAT unix-time-milliseconds | PERSIST]`: the value, then its TTL changed.
pub(crate) fn getex(
    engine: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> CmdResult {
    getex_body(engine, ctx, args, reply)?;
    Ok(Done)
}

fn getex_body(
    engine: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> Result<(), CmdError> {
    let options = parse_extended(args, 2, OptionsOf::GetEx)?;
    let Some(id) = engine.lookup_read(ctx, args.get(1)) else {
        reply.null();
        return Ok(());
    };
    string_of(engine.db(ctx.db).entry(id))?;
    let expire_at = match options.expire {
        Some((unit, arg)) => Some((unit, expire_at_ms(unit, arg, ctx.now_ms, "getex")?)),
        None => None,
    };
    string_of(engine.db(ctx.db).entry(id))?.reply(reply);
    let key = args.get(1);
    match expire_at {
        Some((unit, at)) if !unit.relative() && at <= ctx.now_ms => {
            engine.delete(ctx.db, id);
            ctx.changed(key, crate::keys::events::DEL, 1);
            ctx.log_as(&[b"DEL", key]);
        }
        Some((_, at)) => {
            engine.db_mut(ctx.db).set_expire(id, Some(at));
            ctx.changed(key, crate::keys::events::EXPIRE, 1);
            let at = itoa::Buffer::new().format(at).to_owned();
            ctx.log_as(&[b"PEXPIREAT", key, at.as_bytes()]);
        }
        None if options.persist && engine.db(ctx.db).entry(id).expire_at().is_some() => {
            engine.db_mut(ctx.db).set_expire(id, None);
            ctx.changed(key, crate::keys::events::PERSIST, 1);
            ctx.log_as(&[b"PERSIST", key]);
        }
        None => {}
    }
    Ok(())
}
