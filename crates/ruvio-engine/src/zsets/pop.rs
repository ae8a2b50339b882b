//! The sorted-set pops: ZPOPMIN, ZPOPMAX, ZMPOP and the blocking BZPOPMIN,
//! BZPOPMAX and BZMPOP (which return `Outcome::Block` when every key is missing).
//! As in t_zset.c, every pop goes through [`pop_first`] (`genericZpopCommand`).
//! Apart from `commands` along that seam, so neither file passes 1,000 lines.

use ruvio_resp::{Args, Reply};

use super::commands::removed;
use super::{change_zset, events, reply_pairs, resp3, zset_at};
use crate::args::eq_ci;
use crate::command::{Block, CmdResult, Event, ExecCtx, KeyPositions, Outcome, Outcome::Done};
use crate::error::CmdError;
use crate::lists::parse_timeout;
use crate::Engine;

/// Which end a pop takes from.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Side {
    Min,
    Max,
}

impl Side {
    fn event(self) -> Event {
        match self {
            Side::Min => events::ZPOPMIN,
            Side::Max => events::ZPOPMAX,
        }
    }
    fn command(self) -> &'static [u8] {
        match self {
            Side::Min => b"ZPOPMIN",
            Side::Max => b"ZPOPMAX",
        }
    }
}

/// How a pop answers.
#[derive(Clone, Copy)]
enum PopShape {
    /// ZPOPMIN without count: flat `[m, s]`.
    Single,
    /// ZPOPMIN with count: pairs, nested in RESP3.
    Counted,
    /// BZPOPMIN: `[key, m, s]`.
    Blocking,
    /// ZMPOP/BZMPOP: `[key, [[m, s] ...]]`.
    Multi,
}

/// Pop up to `count` members at `side` from the first of the keys at `keys` that
/// holds a sorted set (`genericZpopCommand`): a key of another type fails the
/// command. False when every key is missing (nothing written).
#[allow(clippy::too_many_arguments)]
fn pop_first(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    keys: &[usize],
    side: Side,
    count: usize,
    shape: PopShape,
    r: &mut Reply<'_>,
) -> Result<bool, CmdError> {
    let mut found = None;
    for &at in keys {
        let key = args.get(at);
        if let Some(id) = e.lookup_write(ctx, key) {
            zset_at(e, ctx.db, id)?;
            found = Some((key, id));
            break;
        }
    }
    let Some((key, id)) = found else {
        return Ok(false);
    };
    let z = zset_at(e, ctx.db, id)?;
    let n = count.min(z.len());
    let popped: Vec<(Vec<u8>, f64)> = z
        .iter_from(0, side == Side::Max)
        .take(n)
        .map(|(m, s)| (m.to_vec(), s))
        .collect();
    let pairs = || popped.iter().map(|(m, s)| (&m[..], *s));
    match shape {
        PopShape::Single | PopShape::Counted => {
            let nested = matches!(shape, PopShape::Counted) && resp3(r);
            reply_pairs(r, pairs(), nested);
        }
        PopShape::Blocking => {
            r.array(3);
            r.bulk(key);
            if let Some((m, s)) = popped.first() {
                r.bulk(m);
                r.double(*s);
            }
        }
        PopShape::Multi => {
            r.array(2);
            r.bulk(key);
            reply_pairs(r, pairs(), true);
        }
    }
    if n > 0 {
        let len = z.len();
        let (lo, hi) = match side {
            Side::Min => (0, n),
            Side::Max => (len - n, len),
        };
        change_zset(e, ctx.db, id, |z| z.remove_ranks(lo, hi))?;
        ctx.changed(key, side.event(), n as u64);
        removed(e, ctx, key, id);
        let mut digits = itoa::Buffer::new();
        ctx.log_as(&[side.command(), key, digits.format(count.max(1)).as_bytes()]);
    }
    Ok(true)
}

/// `ZPOPMIN key [count]`.
pub(super) fn zpopmin(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    zpop_generic(e, ctx, args, r, Side::Min)
}

/// `ZPOPMAX key [count]`.
pub(super) fn zpopmax(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    zpop_generic(e, ctx, args, r, Side::Max)
}

fn zpop_generic(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
    side: Side,
) -> CmdResult {
    if args.len() > 3 {
        return Err(CmdError::Syntax);
    }
    let (count, shape) = if args.len() == 3 {
        let n = crate::args::parse_i64(args.get(2))
            .and_then(|n| usize::try_from(n).ok())
            .ok_or(CmdError::NotPositive)?;
        (n, PopShape::Counted)
    } else {
        (1, PopShape::Single)
    };
    if !pop_first(e, ctx, args, &[1], side, count, shape, r)? {
        r.array(0);
    }
    Ok(Done)
}

/// Parsed `numkeys key [key ...] MIN|MAX [COUNT count]`.
struct MpopArgs {
    keys: KeyPositions,
    side: Side,
    count: usize,
}

/// `zmpopGenericCommand`'s parsing with numkeys at `numkeys_at`.
fn parse_mpop(args: Args<'_>, numkeys_at: usize) -> Result<MpopArgs, CmdError> {
    let numkeys = crate::args::parse_i64(args.get(numkeys_at))
        .filter(|&n| n > 0)
        .ok_or(CmdError::NumkeysNotPositive)?;
    let first = numkeys_at + 1;
    let where_at = usize::try_from(numkeys)
        .ok()
        .and_then(|n| first.checked_add(n))
        .filter(|&at| at < args.len())
        .ok_or(CmdError::Syntax)?;
    let side = match args.get(where_at) {
        w if eq_ci(w, "min") => Side::Min,
        w if eq_ci(w, "max") => Side::Max,
        _ => return Err(CmdError::Syntax),
    };
    let mut count = None;
    let mut j = where_at + 1;
    while j < args.len() {
        if count.is_none() && j + 1 < args.len() && eq_ci(args.get(j), "count") {
            j += 1;
            let n = crate::args::parse_i64(args.get(j))
                .filter(|&n| n > 0)
                .ok_or(CmdError::CountNotPositive)?;
            count = Some(usize::try_from(n).unwrap_or(usize::MAX));
        } else {
            return Err(CmdError::Syntax);
        }
        j += 1;
    }
    Ok(MpopArgs {
        keys: (first..where_at).collect(),
        side,
        count: count.unwrap_or(1),
    })
}

/// `ZMPOP numkeys key [key ...] MIN|MAX [COUNT count]`: `[key, [[m, s] ...]]` from
/// the first non-empty set, or nil.
pub(super) fn zmpop(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    let p = parse_mpop(args, 1)?;
    if !pop_first(e, ctx, args, &p.keys, p.side, p.count, PopShape::Multi, r)? {
        r.null_array();
    }
    Ok(Done)
}

/// `BZPOPMIN key [key ...] timeout`.
pub(super) fn bzpopmin(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    bzpop_generic(e, ctx, args, r, Side::Min)
}

/// `BZPOPMAX key [key ...] timeout`.
pub(super) fn bzpopmax(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    bzpop_generic(e, ctx, args, r, Side::Max)
}

/// Block on `keys` or, where blocking is not allowed, answer Redis's timeout reply.
fn block_or_null(
    ctx: &ExecCtx,
    r: &mut Reply<'_>,
    keys: KeyPositions,
    deadline_ms: Option<u64>,
) -> Outcome {
    if ctx.may_block {
        return Outcome::Block(Block {
            keys,
            deadline_ms,
            rewrite: Vec::new(),
        });
    }
    r.null_array();
    Outcome::Done
}

fn bzpop_generic(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
    side: Side,
) -> CmdResult {
    let last = args.len() - 1;
    let deadline_ms = parse_timeout(args.get(last), ctx.now_ms)?;
    let keys: KeyPositions = (1..last).collect();
    if pop_first(e, ctx, args, &keys, side, 1, PopShape::Blocking, r)? {
        return Ok(Done);
    }
    Ok(block_or_null(ctx, r, keys, deadline_ms))
}

/// `BZMPOP timeout numkeys key [key ...] MIN|MAX [COUNT count]`.
pub(super) fn bzmpop(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    let p = parse_mpop(args, 2)?;
    let deadline_ms = parse_timeout(args.get(1), ctx.now_ms)?;
    if pop_first(e, ctx, args, &p.keys, p.side, p.count, PopShape::Multi, r)? {
        return Ok(Done);
    }
    Ok(block_or_null(ctx, r, p.keys, deadline_ms))
}
