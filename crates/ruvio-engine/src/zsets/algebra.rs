//! ZUNION, ZINTER, ZDIFF, their STORE forms and ZINTERCARD: one core,
//! `zunionInterDiffGenericCommand`'s order of checks (numkeys, key types, then
//! options) and arithmetic (weights applied per source, NaN read as 0, sources
//! visited smallest first as Redis sorts them, so float sums round the same).
//!
//! Sources are sorted sets or plain sets (members at score 1, as Redis reads them).
//! Inputs are copied out of the keyspace before the result is built: the
//! destination may be one of the sources, and the copy is what a cross-shard
//! gather will send anyway.

use std::collections::HashMap;

use ruvio_resp::{Args, Reply};

use super::commands::store_result;
use super::{events, redis_order, reply_pairs, resp3, zset_at};
use crate::args::eq_ci;
use crate::command::{CmdResult, Event, ExecCtx, Outcome::Done};
use crate::error::CmdError;
use crate::keyspace::EntryId;
use crate::Engine;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Op {
    Union,
    Inter,
    Diff,
}

#[derive(Clone, Copy)]
enum Aggregate {
    Sum,
    Min,
    Max,
}

/// `zunionInterAggregate`: a NaN sum (`inf + -inf`) is 0.
fn aggregate(target: &mut f64, value: f64, how: Aggregate) {
    match how {
        Aggregate::Sum => {
            *target += value;
            if target.is_nan() {
                *target = 0.0;
            }
        }
        Aggregate::Min => *target = target.min(value),
        Aggregate::Max => *target = target.max(value),
    }
}

/// What the caller does with the result.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Output {
    Reply,
    Store(&'static str),
    Card,
}

/// A source's members with their scores: a sorted set's own, or a plain set's
/// (any encoding) each at score 1, as Redis' `zuiInitIterator` reads a set.
/// Anything else is WRONGTYPE.
fn source_members(e: &Engine, db: usize, id: EntryId) -> Result<Vec<(Vec<u8>, f64)>, CmdError> {
    let value = e.db(db).entry(id).value();
    if let Some(set) = value.as_set() {
        let mut digits = itoa::Buffer::new();
        return Ok(set
            .iter()
            .map(|m| (m.bytes(&mut digits).to_vec(), 1.0))
            .collect());
    }
    Ok(zset_at(e, db, id)?
        .iter()
        .map(|(m, s)| (m.to_vec(), s))
        .collect())
}

fn generic(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
    op: Op,
    out: Output,
    name: &'static str,
) -> CmdResult {
    let numkeys_at = if matches!(out, Output::Store(_)) {
        2
    } else {
        1
    };
    let setnum = crate::args::int_arg(args.get(numkeys_at))?;
    if setnum < 1 {
        return Err(CmdError::AtLeastOneKey(name));
    }
    let first = numkeys_at + 1;
    let setnum = usize::try_from(setnum).unwrap_or(usize::MAX);
    if setnum > args.len() - first {
        return Err(CmdError::Syntax);
    }
    let store = matches!(out, Output::Store(_));
    let mut sources: Vec<Vec<(Vec<u8>, f64)>> = Vec::with_capacity(setnum);
    for at in first..first + setnum {
        let key = args.get(at);
        let id = if store {
            e.lookup_write(ctx, key)
        } else {
            e.lookup_read(ctx, key)
        };
        sources.push(match id {
            Some(id) => source_members(e, ctx.db, id)?,
            None => Vec::new(),
        });
    }
    let mut weights = vec![1.0f64; setnum];
    let mut how = Aggregate::Sum;
    let mut withscores = false;
    let mut limit = 0usize;
    let mut j = first + setnum;
    while j < args.len() {
        let remaining = args.len() - j;
        let opt = args.get(j);
        let algebra = op != Op::Diff && out != Output::Card;
        if algebra && remaining > setnum && eq_ci(opt, "weights") {
            for (i, w) in weights.iter_mut().enumerate() {
                *w = super::score::parse_score(args.get(j + 1 + i))
                    .map_err(|_| CmdError::WeightNotFloat)?;
            }
            j += setnum;
        } else if algebra && remaining >= 2 && eq_ci(opt, "aggregate") {
            j += 1;
            how = match args.get(j) {
                a if eq_ci(a, "sum") => Aggregate::Sum,
                a if eq_ci(a, "min") => Aggregate::Min,
                a if eq_ci(a, "max") => Aggregate::Max,
                _ => return Err(CmdError::Syntax),
            };
        } else if out == Output::Reply && eq_ci(opt, "withscores") {
            withscores = true;
        } else if out == Output::Card && remaining >= 2 && eq_ci(opt, "limit") {
            j += 1;
            limit = crate::args::parse_i64(args.get(j))
                .and_then(|n| usize::try_from(n).ok())
                .ok_or(CmdError::LimitNegative)?;
        } else {
            return Err(CmdError::Syntax);
        }
        j += 1;
    }
    // Redis visits the sources smallest first (a stable sort by size); ZDIFF keeps
    // the first source first.
    let mut order: Vec<usize> = (0..setnum).collect();
    if op != Op::Diff {
        order.sort_by_key(|&i| sources[i].len());
    }
    let mut result: Vec<(Vec<u8>, f64)> = match op {
        Op::Union => {
            let mut acc: HashMap<Vec<u8>, f64> = HashMap::new();
            for &i in &order {
                for (m, s) in &sources[i] {
                    let mut v = weights[i] * s;
                    if v.is_nan() {
                        v = 0.0;
                    }
                    match acc.get_mut(m) {
                        Some(t) => aggregate(t, v, how),
                        None => {
                            acc.insert(m.clone(), v);
                        }
                    }
                }
            }
            acc.into_iter().collect()
        }
        Op::Inter => {
            let others: Vec<HashMap<&[u8], f64>> = order[1..]
                .iter()
                .map(|&i| sources[i].iter().map(|(m, s)| (&m[..], *s)).collect())
                .collect();
            let base = order[0];
            let mut found = Vec::new();
            'member: for (m, s) in &sources[base] {
                let mut score = weights[base] * s;
                if score.is_nan() {
                    score = 0.0;
                }
                for (k, other) in others.iter().enumerate() {
                    let Some(&v) = other.get(&m[..]) else {
                        continue 'member;
                    };
                    aggregate(&mut score, v * weights[order[k + 1]], how);
                }
                found.push((m.clone(), score));
                if out == Output::Card && limit != 0 && found.len() >= limit {
                    break;
                }
            }
            found
        }
        Op::Diff => {
            let others: Vec<HashMap<&[u8], ()>> = sources[1..]
                .iter()
                .map(|s| s.iter().map(|(m, _)| (&m[..], ())).collect())
                .collect();
            sources[0]
                .iter()
                .filter(|(m, _)| !others.iter().any(|o| o.contains_key(&m[..])))
                .cloned()
                .collect()
        }
    };
    match out {
        Output::Card => r.int(result.len() as i64),
        Output::Store(_) => {
            result.sort_by(redis_order);
            let event: Event = match op {
                Op::Union => events::ZUNIONSTORE,
                Op::Inter => events::ZINTERSTORE,
                Op::Diff => events::ZDIFFSTORE,
            };
            store_result(e, ctx, args.get(1), &result, event, r);
        }
        Output::Reply => {
            result.sort_by(redis_order);
            if withscores {
                let nested = resp3(r);
                reply_pairs(r, result.iter().map(|(m, s)| (&m[..], *s)), nested);
            } else {
                r.array(result.len());
                for (m, _) in &result {
                    r.bulk(m);
                }
            }
        }
    }
    Ok(Done)
}

/// `ZUNION numkeys key [key ...] [WEIGHTS w ...] [AGGREGATE SUM|MIN|MAX] [WITHSCORES]`.
pub(super) fn zunion(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    generic(e, ctx, args, r, Op::Union, Output::Reply, "zunion")
}

/// `ZINTER numkeys key [key ...] [WEIGHTS w ...] [AGGREGATE SUM|MIN|MAX] [WITHSCORES]`.
pub(super) fn zinter(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    generic(e, ctx, args, r, Op::Inter, Output::Reply, "zinter")
}

/// `ZDIFF numkeys key [key ...] [WITHSCORES]`.
pub(super) fn zdiff(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    generic(e, ctx, args, r, Op::Diff, Output::Reply, "zdiff")
}

/// `ZUNIONSTORE dst numkeys key [key ...] [WEIGHTS w ...] [AGGREGATE ...]`.
pub(super) fn zunionstore(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    generic(
        e,
        ctx,
        args,
        r,
        Op::Union,
        Output::Store("zunionstore"),
        "zunionstore",
    )
}

/// `ZINTERSTORE dst numkeys key [key ...] [WEIGHTS w ...] [AGGREGATE ...]`.
pub(super) fn zinterstore(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    generic(
        e,
        ctx,
        args,
        r,
        Op::Inter,
        Output::Store("zinterstore"),
        "zinterstore",
    )
}

/// `ZDIFFSTORE dst numkeys key [key ...]`.
pub(super) fn zdiffstore(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    generic(
        e,
        ctx,
        args,
        r,
        Op::Diff,
        Output::Store("zdiffstore"),
        "zdiffstore",
    )
}

/// `ZINTERCARD numkeys key [key ...] [LIMIT limit]`.
pub(super) fn zintercard(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    generic(e, ctx, args, r, Op::Inter, Output::Card, "zintercard")
}
