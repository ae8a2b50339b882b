//! The sorted-set commands but the algebra: thin handlers over the cores below,
//! each in Redis's order of checks (which error wins when several apply is part
//! of the behaviour). As in t_zset.c, ZADD and ZINCRBY share [`zadd_generic`],
//! every ZRANGE form shares [`zrange_generic`], the three ZREMRANGEBY* share
//! [`zremrange_generic`]; the pops are in `pop`.

use ruvio_resp::{Args, Reply};

use super::score::{parse_score, LexRange, ScoreRange};
use super::{change_zset, events, limits, reply_pairs, resp3, zset_at, ZLimits, ZSetValue};
use crate::args::{eq_ci, int_arg, parse_cursor, parse_scan_args, ScanArgs, ScanOf};
use crate::command::{CmdResult, Event, ExecCtx, Outcome::Done};
use crate::error::CmdError;
use crate::keyspace::{Collection, EntryId};
use crate::lists::clamp_range;
use crate::Engine;

/// Redis's default ZSCAN COUNT.
/// ZRANDMEMBER with a negative count picks this many at most per call before
/// checking nothing else is needed; the reply itself is bounded by the count.
const RANDOM_PICKS_INLINE: usize = 64;

/// Most members ZRANDMEMBER with a negative count answers, as for SRANDMEMBER and
/// HRANDFIELD: Redis streams up to 2^63 of them, which ends in an out-of-memory
/// kill (tests/hostile.rs saw 3 GB in a few seconds, and the shard never stopped);
/// Ruvio answers "value is out of range" instead.
const ZRANDMEMBER_REPEATS_MAX: u64 = 1 << 24;

/// Delete the key of entry `id` when its set is empty, with Redis's `del` event.
pub(super) fn removed(engine: &mut Engine, ctx: &mut ExecCtx, key: &[u8], id: EntryId) {
    if engine.delete_if_empty(ctx.db, id) {
        ctx.changed(key, crate::keys::events::DEL, 0);
    }
}

// ---- ZADD / ZINCRBY ---------------------------------------------------------

/// `ZADD key [NX|XX] [GT|LT] [CH] [INCR] score member [score member ...]`.
pub(super) fn zadd(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    zadd_generic(e, ctx, args, r, false)
}

/// `ZINCRBY key increment member`: ZADD INCR without options.
pub(super) fn zincrby(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    zadd_generic(e, ctx, args, r, true)
}

#[derive(Default)]
struct ZaddFlags {
    nx: bool,
    xx: bool,
    gt: bool,
    lt: bool,
    ch: bool,
    incr: bool,
}

/// `zaddGenericCommand`: flags, then every score parsed before the key is looked
/// up; a listpack receiving many elements converts first.
fn zadd_generic(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
    zincrby: bool,
) -> CmdResult {
    let key = args.get(1);
    let mut f = ZaddFlags {
        incr: zincrby,
        ..ZaddFlags::default()
    };
    let mut at = 2;
    if !zincrby {
        while at < args.len() {
            let opt = args.get(at);
            let flag = match () {
                _ if eq_ci(opt, "nx") => &mut f.nx,
                _ if eq_ci(opt, "xx") => &mut f.xx,
                _ if eq_ci(opt, "gt") => &mut f.gt,
                _ if eq_ci(opt, "lt") => &mut f.lt,
                _ if eq_ci(opt, "ch") => &mut f.ch,
                _ if eq_ci(opt, "incr") => &mut f.incr,
                _ => break,
            };
            *flag = true;
            at += 1;
        }
    }
    let elements = args.len() - at;
    if !elements.is_multiple_of(2) || elements == 0 {
        return Err(CmdError::Syntax);
    }
    let pairs = elements / 2;
    if f.nx && f.xx {
        return Err(CmdError::ZaddXxAndNx);
    }
    if (f.nx && (f.gt || f.lt)) || (f.gt && f.lt) {
        return Err(CmdError::ZaddGtLtNx);
    }
    if f.incr && pairs > 1 {
        return Err(CmdError::ZaddIncrPairs);
    }
    let mut scores = Vec::with_capacity(pairs.min(1024));
    for i in 0..pairs {
        scores.push(parse_score(args.get(at + 2 * i))?);
    }
    let lim = limits(e);
    let id = match e.lookup_write(ctx, key) {
        Some(id) => {
            zset_at(e, ctx.db, id)?;
            change_zset(e, ctx.db, id, |z| z.maybe_convert(pairs, lim))?;
            Some(id)
        }
        None if f.xx => {
            if f.incr {
                r.null();
            } else {
                r.int(0);
            }
            return Ok(Done);
        }
        None => None,
    };
    let mut fresh = None;
    if id.is_none() {
        let longest = (0..pairs).map(|i| args.get(at + 2 * i + 1).len()).max();
        fresh = Some(ZSetValue::create(pairs, longest.unwrap_or(0), lim));
    }
    let apply = |z: &mut ZSetValue| -> Result<(usize, usize, Option<f64>), CmdError> {
        let (mut added, mut updated, mut last) = (0, 0, None);
        for (i, &score) in scores.iter().enumerate() {
            let member = args.get(at + 2 * i + 1);
            let (done, value) = add_one(z, member, score, &f, lim)?;
            match done {
                AddOutcome::Added => added += 1,
                AddOutcome::Updated => updated += 1,
                AddOutcome::Same | AddOutcome::Nop => {}
            }
            last = (done != AddOutcome::Nop).then_some(value);
        }
        Ok((added, updated, last))
    };
    let (added, updated, last) = match (id, fresh.as_mut()) {
        (Some(id), _) => change_zset(e, ctx.db, id, apply)??,
        (None, Some(z)) => apply(z)?,
        (None, None) => unreachable_none(),
    };
    if let Some(z) = fresh {
        if !z.is_empty() {
            e.add_collection(ctx, key, Collection::ZSet(z));
        }
    }
    if f.incr {
        match last {
            Some(s) => r.double(s),
            None => r.null(),
        }
    } else {
        r.int((if f.ch { added + updated } else { added }) as i64);
    }
    if added + updated > 0 {
        let event = if f.incr { events::ZINCR } else { events::ZADD };
        ctx.changed(key, event, (added + updated) as u64);
    }
    Ok(Done)
}

/// Never reached: a missing key always has a fresh set. Kept total without a panic.
fn unreachable_none() -> (usize, usize, Option<f64>) {
    (0, 0, None)
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum AddOutcome {
    Added,
    Updated,
    Same,
    Nop,
}

/// `zsetAdd` for one element: what happened and the resulting score.
fn add_one(
    z: &mut ZSetValue,
    member: &[u8],
    score: f64,
    f: &ZaddFlags,
    lim: ZLimits,
) -> Result<(AddOutcome, f64), CmdError> {
    match z.score(member) {
        Some(cur) => {
            if f.nx {
                return Ok((AddOutcome::Nop, cur));
            }
            let new = if f.incr { cur + score } else { score };
            if new.is_nan() {
                return Err(CmdError::ScoreNan);
            }
            if (f.lt && new >= cur) || (f.gt && new <= cur) {
                return Ok((AddOutcome::Nop, cur));
            }
            if new != cur {
                z.update(member, new);
                Ok((AddOutcome::Updated, new))
            } else {
                Ok((AddOutcome::Same, new))
            }
        }
        None if f.xx => Ok((AddOutcome::Nop, score)),
        None => {
            z.insert(member, score, lim);
            Ok((AddOutcome::Added, score))
        }
    }
}

// ---- simple reads -----------------------------------------------------------

/// `ZSCORE key member`: the score or nil.
pub(super) fn zscore(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    let score = match e.lookup_read(ctx, args.get(1)) {
        Some(id) => zset_at(e, ctx.db, id)?.score(args.get(2)),
        None => None,
    };
    match score {
        Some(s) => r.double(s),
        None => r.null(),
    }
    Ok(Done)
}

/// `ZMSCORE key member [member ...]`: a score or nil per member.
pub(super) fn zmscore(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    let id = e.lookup_read(ctx, args.get(1));
    let z = match id {
        Some(id) => Some(zset_at(e, ctx.db, id)?),
        None => None,
    };
    r.array(args.len() - 2);
    for member in args.tail(2) {
        match z.and_then(|z| z.score(member)) {
            Some(s) => r.double(s),
            None => r.null(),
        }
    }
    Ok(Done)
}

/// `ZCARD key`: the number of members, 0 when missing.
pub(super) fn zcard(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    let len = match e.lookup_read(ctx, args.get(1)) {
        Some(id) => zset_at(e, ctx.db, id)?.len(),
        None => 0,
    };
    r.int(len as i64);
    Ok(Done)
}

/// Ranks `lo..hi` of the members inside a score range.
fn score_ranks(z: &ZSetValue, range: &ScoreRange) -> (usize, usize) {
    let lo = z.count_score_while(|s| range.below(s));
    let hi = z.count_score_while(|s| range.not_above(s));
    (lo, hi.max(lo))
}

/// Ranks `lo..hi` of the members inside a lex range.
fn lex_ranks(z: &ZSetValue, range: &LexRange) -> (usize, usize) {
    let lo = z.count_while(|m, _| range.below(m));
    let hi = z.count_while(|m, _| range.not_above(m));
    (lo, hi.max(lo))
}

/// `ZCOUNT key min max`: members with a score in the range.
pub(super) fn zcount(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    let range = ScoreRange::parse(args.get(2), args.get(3))?;
    let n = match e.lookup_read(ctx, args.get(1)) {
        Some(id) => {
            let (lo, hi) = score_ranks(zset_at(e, ctx.db, id)?, &range);
            hi - lo
        }
        None => 0,
    };
    r.int(n as i64);
    Ok(Done)
}

/// `ZLEXCOUNT key min max`: members in the lex range.
pub(super) fn zlexcount(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    let range = LexRange::parse(args.get(2), args.get(3))?;
    let n = match e.lookup_read(ctx, args.get(1)) {
        Some(id) => {
            let (lo, hi) = lex_ranks(zset_at(e, ctx.db, id)?, &range);
            hi - lo
        }
        None => 0,
    };
    r.int(n as i64);
    Ok(Done)
}

/// `ZRANK key member [WITHSCORE]`.
pub(super) fn zrank(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    rank_generic(e, ctx, args, r, false)
}

/// `ZREVRANK key member [WITHSCORE]`.
pub(super) fn zrevrank(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    rank_generic(e, ctx, args, r, true)
}

/// `zrankGenericCommand` (7.2, with WITHSCORE).
fn rank_generic(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
    rev: bool,
) -> CmdResult {
    if args.len() > 4 {
        return Err(CmdError::WrongArity(if rev { "zrevrank" } else { "zrank" }));
    }
    let withscore = args.len() == 4;
    if withscore && !eq_ci(args.get(3), "withscore") {
        return Err(CmdError::Syntax);
    }
    let found = match e.lookup_read(ctx, args.get(1)) {
        Some(id) => {
            let z = zset_at(e, ctx.db, id)?;
            z.rank(args.get(2))
                .map(|(k, s)| (if rev { z.len() - 1 - k } else { k }, s))
        }
        None => None,
    };
    match (found, withscore) {
        (None, true) => r.null_array(),
        (None, false) => r.null(),
        (Some((k, s)), true) => {
            r.array(2);
            r.int(k as i64);
            r.double(s);
        }
        (Some((k, _)), false) => r.int(k as i64),
    }
    Ok(Done)
}

// ---- ZRANGE and friends -----------------------------------------------------

#[derive(Clone, Copy, PartialEq, Eq)]
enum RangeType {
    Auto,
    Rank,
    Score,
    Lex,
}

/// What a ZRANGE variant chose: `count` members from `start` in reply order
/// (ascending ranks, or descending from the top when `rev`) of the set in entry
/// `id`. The reply streams them from the set; nothing is copied.
struct Selection {
    withscores: bool,
    id: Option<EntryId>,
    start: usize,
    count: usize,
    rev: bool,
}

impl Selection {
    /// The chosen members of `z`, the set in entry `id`.
    fn iter<'a>(&self, z: &'a ZSetValue) -> impl Iterator<Item = (&'a [u8], f64)> + 'a {
        z.iter_from(self.start, self.rev).take(self.count)
    }
}

/// `zrangeGenericCommand`: `src` is where the key is (1, or 2 for ZRANGESTORE),
/// `kind`/`rev` preset by the legacy commands. Returns what to answer, as ranks.
fn zrange_select(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    src: usize,
    mut kind: RangeType,
    mut rev: Option<bool>,
    store: bool,
) -> Result<Selection, CmdError> {
    let mut withscores = false;
    let (mut offset, mut limit) = (0i64, -1i64);
    let mut j = src + 3;
    while j < args.len() {
        let left = args.len() - j - 1;
        let opt = args.get(j);
        if !store && eq_ci(opt, "withscores") {
            withscores = true;
        } else if eq_ci(opt, "limit") && left >= 2 {
            offset = int_arg(args.get(j + 1))?;
            limit = int_arg(args.get(j + 2))?;
            j += 2;
        } else if rev.is_none() && eq_ci(opt, "rev") {
            rev = Some(true);
        } else if kind == RangeType::Auto && eq_ci(opt, "bylex") {
            kind = RangeType::Lex;
        } else if kind == RangeType::Auto && eq_ci(opt, "byscore") {
            kind = RangeType::Score;
        } else {
            return Err(CmdError::Syntax);
        }
        j += 1;
    }
    let rev = rev.unwrap_or(false);
    if kind == RangeType::Auto {
        kind = RangeType::Rank;
    }
    if limit != -1 && kind == RangeType::Rank {
        return Err(CmdError::LimitNeedsBy);
    }
    if withscores && kind == RangeType::Lex {
        return Err(CmdError::WithscoresBylex);
    }
    let (mut min_at, mut max_at) = (src + 1, src + 2);
    if rev && kind != RangeType::Rank {
        std::mem::swap(&mut min_at, &mut max_at);
    }
    enum Parsed {
        Rank(i64, i64),
        Score(ScoreRange),
        Lex(LexRange),
    }
    let parsed = match kind {
        RangeType::Score => Parsed::Score(ScoreRange::parse(args.get(min_at), args.get(max_at))?),
        RangeType::Lex => Parsed::Lex(LexRange::parse(args.get(min_at), args.get(max_at))?),
        _ => Parsed::Rank(int_arg(args.get(min_at))?, int_arg(args.get(max_at))?),
    };
    let mut sel = Selection {
        withscores,
        id: None,
        start: 0,
        count: 0,
        rev,
    };
    let key = args.get(src);
    let id = if store {
        e.lookup_write(ctx, key)
    } else {
        e.lookup_read(ctx, key)
    };
    let Some(id) = id else {
        return Ok(sel);
    };
    let z = zset_at(e, ctx.db, id)?;
    let len = z.len();
    let (lo, hi) = match &parsed {
        Parsed::Rank(start, stop) => {
            let n = i64::try_from(len).unwrap_or(i64::MAX);
            match clamp_range(*start, *stop, n) {
                // Both within 0..len.
                Some((a, b)) if rev => ((n - 1 - b) as usize, (n - a) as usize),
                Some((a, b)) => (a as usize, b as usize + 1),
                None => (0, 0),
            }
        }
        Parsed::Score(range) => score_ranks(z, range),
        Parsed::Lex(range) => lex_ranks(z, range),
    };
    let (skip, take) = if kind == RangeType::Rank {
        (0, usize::MAX)
    } else if offset < 0 {
        (0, 0)
    } else {
        let take = usize::try_from(limit).unwrap_or(usize::MAX);
        (usize::try_from(offset).unwrap_or(usize::MAX), take)
    };
    sel.count = (hi - lo).saturating_sub(skip).min(take);
    if sel.count > 0 {
        sel.id = Some(id);
        sel.start = if rev { len - hi + skip } else { lo + skip };
    }
    Ok(sel)
}

fn zrange_reply(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
    kind: RangeType,
    rev: Option<bool>,
) -> CmdResult {
    let sel = zrange_select(e, ctx, args, 1, kind, rev, false)?;
    let Some(id) = sel.id else {
        r.array(0);
        return Ok(Done);
    };
    let z = zset_at(e, ctx.db, id)?;
    let nested = resp3(r);
    match (sel.withscores, nested) {
        (true, true) => {
            r.array(sel.count);
            for (m, s) in sel.iter(z) {
                r.array(2);
                r.bulk(m);
                r.double(s);
            }
        }
        (true, false) => {
            r.array(sel.count * 2);
            for (m, s) in sel.iter(z) {
                r.bulk(m);
                r.double(s);
            }
        }
        (false, _) => {
            r.array(sel.count);
            for (m, _) in sel.iter(z) {
                r.bulk(m);
            }
        }
    }
    Ok(Done)
}

/// `ZRANGE key start stop [BYSCORE|BYLEX] [REV] [LIMIT offset count] [WITHSCORES]`.
pub(super) fn zrange(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    zrange_reply(e, ctx, args, r, RangeType::Auto, None)
}

/// `ZREVRANGE key start stop [WITHSCORES]`.
pub(super) fn zrevrange(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    zrange_reply(e, ctx, args, r, RangeType::Rank, Some(true))
}

/// `ZRANGEBYSCORE key min max [WITHSCORES] [LIMIT offset count]`.
pub(super) fn zrangebyscore(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    zrange_reply(e, ctx, args, r, RangeType::Score, Some(false))
}

/// `ZREVRANGEBYSCORE key max min [WITHSCORES] [LIMIT offset count]`.
pub(super) fn zrevrangebyscore(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    zrange_reply(e, ctx, args, r, RangeType::Score, Some(true))
}

/// `ZRANGEBYLEX key min max [LIMIT offset count]`.
pub(super) fn zrangebylex(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    zrange_reply(e, ctx, args, r, RangeType::Lex, Some(false))
}

/// `ZREVRANGEBYLEX key max min [LIMIT offset count]`.
pub(super) fn zrevrangebylex(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    zrange_reply(e, ctx, args, r, RangeType::Lex, Some(true))
}

/// `ZRANGESTORE dst src min max [BYSCORE|BYLEX] [REV] [LIMIT offset count]`: the
/// size of the stored result; an empty result deletes `dst`.
pub(super) fn zrangestore(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    let sel = zrange_select(e, ctx, args, 2, RangeType::Auto, None, true)?;
    let mut out: Vec<(Vec<u8>, f64)> = match sel.id {
        Some(id) => sel
            .iter(zset_at(e, ctx.db, id)?)
            .map(|(m, s)| (m.to_vec(), s))
            .collect(),
        None => Vec::new(),
    };
    // REV selects in descending order; the stored set is built ascending.
    out.sort_by(super::redis_order);
    store_result(e, ctx, args.get(1), &out, events::ZRANGESTORE, r);
    Ok(Done)
}

/// Store `out` (in order) at `dst`, replacing whatever was there, or delete `dst`
/// when it is empty; reply with the size (the STORE commands' ending).
pub(super) fn store_result(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    dst: &[u8],
    out: &[(Vec<u8>, f64)],
    event: Event,
    r: &mut Reply<'_>,
) {
    let old = e.lookup_write(ctx, dst);
    if out.is_empty() {
        r.int(0);
        if let Some(id) = old {
            e.delete(ctx.db, id);
            ctx.changed(dst, crate::keys::events::DEL, 1);
        }
        return;
    }
    if let Some(id) = old {
        e.delete(ctx.db, id);
    }
    let value = ZSetValue::from_sorted(out, limits(e));
    e.add_collection(ctx, dst, Collection::ZSet(value));
    r.int(out.len() as i64);
    ctx.changed(dst, event, 1);
}

// ---- removal ----------------------------------------------------------------

/// `ZREM key member [member ...]`: how many were removed.
pub(super) fn zrem(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    let key = args.get(1);
    let Some(id) = e.lookup_write(ctx, key) else {
        r.int(0);
        return Ok(Done);
    };
    zset_at(e, ctx.db, id)?;
    let deleted = change_zset(e, ctx.db, id, |z| {
        let mut n = 0;
        for m in args.tail(2) {
            if z.remove(m) {
                n += 1;
                if z.is_empty() {
                    break;
                }
            }
        }
        n
    })?;
    r.int(deleted as i64);
    if deleted > 0 {
        ctx.changed(key, events::ZREM, deleted as u64);
        removed(e, ctx, key, id);
    }
    Ok(Done)
}

/// `ZREMRANGEBYRANK key start stop`.
pub(super) fn zremrangebyrank(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    zremrange_generic(e, ctx, args, r, RangeType::Rank)
}

/// `ZREMRANGEBYSCORE key min max`.
pub(super) fn zremrangebyscore(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    zremrange_generic(e, ctx, args, r, RangeType::Score)
}

/// `ZREMRANGEBYLEX key min max`.
pub(super) fn zremrangebylex(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    zremrange_generic(e, ctx, args, r, RangeType::Lex)
}

/// `zremrangeGenericCommand`: the range is parsed before the key is looked up.
fn zremrange_generic(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
    kind: RangeType,
) -> CmdResult {
    let (a, b) = (args.get(2), args.get(3));
    enum Parsed {
        Rank(i64, i64),
        Score(ScoreRange),
        Lex(LexRange),
    }
    let (parsed, event) = match kind {
        RangeType::Score => (
            Parsed::Score(ScoreRange::parse(a, b)?),
            events::ZREMRANGEBYSCORE,
        ),
        RangeType::Lex => (Parsed::Lex(LexRange::parse(a, b)?), events::ZREMRANGEBYLEX),
        _ => (
            Parsed::Rank(int_arg(a)?, int_arg(b)?),
            events::ZREMRANGEBYRANK,
        ),
    };
    let key = args.get(1);
    let Some(id) = e.lookup_write(ctx, key) else {
        r.int(0);
        return Ok(Done);
    };
    let z = zset_at(e, ctx.db, id)?;
    let (lo, hi) = match &parsed {
        Parsed::Rank(start, stop) => {
            let n = i64::try_from(z.len()).unwrap_or(i64::MAX);
            match clamp_range(*start, *stop, n) {
                Some((a, b)) => (a as usize, b as usize + 1),
                None => (0, 0),
            }
        }
        Parsed::Score(range) => score_ranks(z, range),
        Parsed::Lex(range) => lex_ranks(z, range),
    };
    let deleted = hi - lo;
    if deleted > 0 {
        change_zset(e, ctx.db, id, |z| z.remove_ranks(lo, hi))?;
        ctx.changed(key, event, deleted as u64);
        removed(e, ctx, key, id);
    }
    r.int(deleted as i64);
    Ok(Done)
}

// ---- random and scan --------------------------------------------------------

/// `ZRANDMEMBER key [count [WITHSCORES]]`.
pub(super) fn zrandmember(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    if args.len() > 4 {
        return Err(CmdError::Syntax);
    }
    if args.len() == 2 {
        let Some(id) = e.lookup_read(ctx, args.get(1)) else {
            r.null();
            return Ok(Done);
        };
        let len = zset_at(e, ctx.db, id)?.len();
        let pick = (e.next_random() % len.max(1) as u64) as usize;
        match zset_at(e, ctx.db, id)?.iter_from(pick, false).next() {
            Some((m, _)) => r.bulk(m),
            None => r.null(),
        }
        return Ok(Done);
    }
    let l = match int_arg(args.get(2))? {
        i64::MIN => return Err(CmdError::OutsideLongRange),
        n => n,
    };
    let withscores = args.len() == 4;
    if withscores && !eq_ci(args.get(3), "withscores") {
        return Err(CmdError::Syntax);
    }
    if withscores && l < -(i64::MAX / 2) {
        return Err(CmdError::ValueOutOfRange);
    }
    let Some(id) = e.lookup_read(ctx, args.get(1)) else {
        r.array(0);
        return Ok(Done);
    };
    let len = zset_at(e, ctx.db, id)?.len();
    if l < 0 && l.unsigned_abs() > ZRANDMEMBER_REPEATS_MAX {
        return Err(CmdError::ValueOutOfRange);
    }
    let count = usize::try_from(l.unsigned_abs()).unwrap_or(usize::MAX);
    let ranks: Vec<usize> = if l < 0 {
        let mut v = Vec::with_capacity(count.min(RANDOM_PICKS_INLINE * 1024));
        for _ in 0..count {
            v.push((e.next_random() % len as u64) as usize);
        }
        v
    } else if count >= len {
        (0..len).collect()
    } else {
        // Floyd's sampling: `count` distinct ranks, then shuffled.
        let mut chosen = std::collections::HashSet::with_capacity(count);
        let mut v = Vec::with_capacity(count);
        for j in len - count..len {
            let t = (e.next_random() % (j as u64 + 1)) as usize;
            let pick = if chosen.insert(t) { t } else { j };
            if pick == j {
                chosen.insert(j);
            }
            v.push(pick);
        }
        for i in (1..v.len()).rev() {
            let k = (e.next_random() % (i as u64 + 1)) as usize;
            v.swap(i, k);
        }
        v
    };
    let z = zset_at(e, ctx.db, id)?;
    let picked: Vec<(&[u8], f64)> = ranks
        .iter()
        .filter_map(|&k| z.iter_from(k, false).next())
        .collect();
    if withscores {
        reply_pairs(r, picked.into_iter(), resp3(r));
    } else {
        r.array(picked.len());
        for (m, _) in picked {
            r.bulk(m);
        }
    }
    Ok(Done)
}

/// `ZSCAN key cursor [MATCH pattern] [COUNT count]`: a listpack answers whole
/// with cursor 0 (as Redis); a skiplist's cursor counts the member slots not yet
/// visited, so members present for the whole scan are all returned.
pub(super) fn zscan(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    let cursor = parse_cursor(args.get(2)).ok_or(CmdError::InvalidCursor)?;
    // Redis's order (zscanCommand, then scanGenericCommand): the cursor, then the
    // key (a missing key answers an empty scan, another type WRONGTYPE), and only
    // then the options, so `ZSCAN missing 0 COUNT x` is an empty scan, not an error.
    let Some(id) = e.lookup_read(ctx, args.get(1)) else {
        r.array(2);
        r.bulk(b"0");
        r.array(0);
        return Ok(Done);
    };
    let z = zset_at(e, ctx.db, id)?;
    let ScanArgs { count, pattern, .. } = parse_scan_args(args, 3, ScanOf::Members)?;
    let mut items: Vec<(&[u8], f64)> = Vec::new();
    let next = z.scan(cursor, count, |m, s| {
        if pattern.is_none_or(|p| crate::glob_match(p, m)) {
            items.push((m, s));
        }
    });
    r.array(2);
    r.bulk(itoa::Buffer::new().format(next).as_bytes());
    r.array(items.len() * 2);
    let mut text = Vec::new();
    for (m, s) in items {
        r.bulk(m);
        text.clear();
        ruvio_resp::format_double_g17(s, &mut text);
        r.bulk(&text);
    }
    Ok(Done)
}
