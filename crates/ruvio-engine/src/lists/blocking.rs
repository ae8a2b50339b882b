//! The blocking list commands: BLPOP, BRPOP, BLMOVE, BRPOPLPUSH, BLMPOP.
//!
//! Why they are this small: with something to pop they are their non-blocking
//! cousins (logged as those, `LPOP key`, `LMOVE ...`); with nothing they return
//! [`Outcome::Block`] naming the keys to wait on and the deadline, write nothing,
//! and the server parks the client and runs the same command again when one of
//! those keys is written (Redis 7's re-execution), or answers a null array at the
//! deadline. Where blocking is not allowed (`ctx.may_block` false: MULTI, scripts)
//! they answer at once what Redis answers there: a null array, or for BLMOVE and
//! BRPOPLPUSH a null bulk.

use ruvio_resp::{Args, Reply};

use super::{list_at, lmove_generic, parse_end, parse_mpop, pop_from_first, End, PopReply};
use crate::command::{Block, CmdResult, ExecCtx, KeyPositions, Outcome};
use crate::error::CmdError;
use crate::longdouble::LongDouble;
use crate::Engine;

/// Milliseconds per second of a timeout argument.
const MS_PER_SECOND: f64 = 1000.0;

/// Redis 7.2's `getTimeoutFromObjectOrReply` in seconds: a `long double`, scaled to
/// milliseconds and rounded up; 0 is "forever" (`None`), otherwise the absolute
/// deadline after `now_ms`.
pub(crate) fn parse_timeout(arg: &[u8], now_ms: u64) -> Result<Option<u64>, CmdError> {
    let seconds = LongDouble::parse(arg).ok_or(CmdError::TimeoutNotFloat)?;
    let ms = seconds.to_f64() * MS_PER_SECOND;
    if ms > i64::MAX as f64 {
        return Err(CmdError::TimeoutOutOfRange);
    }
    // `as` saturates (-inf becomes i64::MIN), as the C cast of ceill does on x86.
    let ms = ms.ceil() as i64;
    if ms < 0 {
        return Err(CmdError::TimeoutNegative);
    }
    if ms == 0 {
        return Ok(None);
    }
    let now = i64::try_from(now_ms).unwrap_or(i64::MAX);
    if ms > i64::MAX - now {
        return Err(CmdError::TimeoutOutOfRange);
    }
    Ok(Some((now + ms) as u64))
}

/// `BLPOP key [key ...] timeout`: `[key, element]` from the first non-empty list,
/// or block on all the keys.
pub(super) fn blpop(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    bpop_generic(e, ctx, args, r, End::Head)
}

/// `BRPOP key [key ...] timeout`: as BLPOP from the tail.
pub(super) fn brpop(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    bpop_generic(e, ctx, args, r, End::Tail)
}

fn bpop_generic(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
    end: End,
) -> CmdResult {
    let last = args.len() - 1;
    let deadline_ms = parse_timeout(args.get(last), ctx.now_ms)?;
    if pop_from_first(e, ctx, args, 1..last, end, PopReply::One, r)? {
        return Ok(Outcome::Done);
    }
    Ok(block_or_answer(
        ctx,
        r,
        (1..last).collect(),
        deadline_ms,
        Nothing::NullArray,
    ))
}

/// `BLMPOP timeout numkeys key [key ...] LEFT|RIGHT [COUNT count]`: as LMPOP, or
/// block on the keys. The other arguments are checked before the timeout.
pub(super) fn blmpop(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    let parsed = parse_mpop(args, 2)?;
    let deadline_ms = parse_timeout(args.get(1), ctx.now_ms)?;
    let how = PopReply::Range(parsed.count);
    if pop_from_first(e, ctx, args, parsed.keys.clone(), parsed.end, how, r)? {
        return Ok(Outcome::Done);
    }
    Ok(block_or_answer(
        ctx,
        r,
        parsed.keys.collect(),
        deadline_ms,
        Nothing::NullArray,
    ))
}

/// `BLMOVE source destination LEFT|RIGHT LEFT|RIGHT timeout`: as LMOVE (logged as
/// one), or block on the source.
pub(super) fn blmove(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    let from = parse_end(args.get(3))?;
    let to = parse_end(args.get(4))?;
    let deadline_ms = parse_timeout(args.get(5), ctx.now_ms)?;
    let log = [
        &b"LMOVE"[..],
        args.get(1),
        args.get(2),
        args.get(3),
        args.get(4),
    ];
    blmove_generic(e, ctx, args, r, (from, to), deadline_ms, &log)
}

/// `BRPOPLPUSH source destination timeout`: BLMOVE RIGHT LEFT, logged as RPOPLPUSH.
pub(super) fn brpoplpush(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    let deadline_ms = parse_timeout(args.get(3), ctx.now_ms)?;
    let log = [&b"RPOPLPUSH"[..], args.get(1), args.get(2)];
    blmove_generic(e, ctx, args, r, (End::Tail, End::Head), deadline_ms, &log)
}

/// `blmoveGenericCommand`: a missing source blocks (on the source only).
fn blmove_generic(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
    (from, to): (End, End),
    deadline_ms: Option<u64>,
    log: &[&[u8]],
) -> CmdResult {
    match e.lookup_write(ctx, args.get(1)) {
        Some(id) => {
            list_at(e, ctx.db, id)?;
            let done = lmove_generic(e, ctx, args, r, from, to)?;
            ctx.log_as(log);
            Ok(done)
        }
        None => Ok(block_or_answer(
            ctx,
            r,
            KeyPositions::from_slice(&[1]),
            deadline_ms,
            Nothing::Null,
        )),
    }
}

/// What a blocking command answers when it may not block and has nothing.
enum Nothing {
    NullArray,
    Null,
}

/// Block on `keys` until `deadline_ms`, or answer at once when blocking is not
/// allowed here.
fn block_or_answer(
    ctx: &ExecCtx,
    r: &mut Reply<'_>,
    keys: KeyPositions,
    deadline_ms: Option<u64>,
    nothing: Nothing,
) -> Outcome {
    if ctx.may_block {
        return Outcome::Block(Block {
            keys,
            deadline_ms,
            rewrite: Vec::new(),
        });
    }
    match nothing {
        Nothing::NullArray => r.null_array(),
        Nothing::Null => r.null(),
    }
    Outcome::Done
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeouts_follow_redis_7_2() {
        let now = 1_000;
        assert_eq!(parse_timeout(b"0", now), Ok(None));
        assert_eq!(parse_timeout(b"1", now), Ok(Some(2_000)));
        assert_eq!(parse_timeout(b"0.0001", now), Ok(Some(1_001)), "rounded up");
        assert_eq!(parse_timeout(b"-0.0001", now), Ok(None), "ceil(-0.1) is 0");
        assert_eq!(parse_timeout(b"0x10", now), Ok(Some(17_000)));
        assert_eq!(parse_timeout(b"1e3", now), Ok(Some(1_001_000)));
        assert_eq!(parse_timeout(b"-1", now), Err(CmdError::TimeoutNegative));
        assert_eq!(parse_timeout(b"-inf", now), Err(CmdError::TimeoutNegative));
        assert_eq!(parse_timeout(b"inf", now), Err(CmdError::TimeoutOutOfRange));
        assert_eq!(
            parse_timeout(b"1e30", now),
            Err(CmdError::TimeoutOutOfRange)
        );
        assert_eq!(
            parse_timeout(b"9223372036854775", now),
            Err(CmdError::TimeoutOutOfRange)
        );
        assert_eq!(parse_timeout(b"abc", now), Err(CmdError::TimeoutNotFloat));
        assert_eq!(parse_timeout(b" 1", now), Err(CmdError::TimeoutNotFloat));
        assert_eq!(parse_timeout(b"nan", now), Err(CmdError::TimeoutNotFloat));
        assert_eq!(parse_timeout(b"", now), Err(CmdError::TimeoutNotFloat));
    }
}
