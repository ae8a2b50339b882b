//! Whole-database commands: KEYS, SCAN, RANDOMKEY, DBSIZE, FLUSHDB, FLUSHALL, SWAPDB.
//!
//! SCAN's cursor is a slab slot id (< 2^32, so below the 2^40 the server reserves
//! for its shard bits): entries never move, so a key present for the whole
//! iteration is returned exactly once, whatever inserts, deletes and index splits
//! happen between calls.

use ruvio_resp::{Args, Reply};

use crate::args::{eq_ci, i32_arg, parse_cursor, parse_scan_args, ScanArgs, ScanOf};
use crate::command::{CmdResult, ExecCtx, Outcome::Done};
use crate::error::CmdError;
use crate::glob::glob_match;
use crate::keyspace::EntryId;
use crate::Engine;

/// SCAN visits at most this many slots per key of COUNT, so a sparse slab (many
/// deleted keys) cannot make one call long.
const SCAN_SLOTS_PER_COUNT: usize = 10;

/// `KEYS pattern`: every live key matching the glob pattern.
pub(crate) fn keys(
    engine: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> CmdResult {
    let pattern = args.get(1);
    let all = pattern == b"*";
    let db = engine.db(ctx.db);
    let matching: Vec<&[u8]> = db
        .iter()
        .filter(|(_, e)| all || glob_match(pattern, e.key()))
        .filter(|(_, e)| e.expire_at().is_none_or(|at| ctx.now_ms <= at))
        .map(|(_, e)| e.key())
        .collect();
    reply.array(matching.len());
    for key in matching {
        reply.bulk(key);
    }
    Ok(Done)
}

/// `SCAN cursor [MATCH pattern] [COUNT count] [TYPE type]`
pub(crate) fn scan(
    engine: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> CmdResult {
    let cursor = parse_cursor(args.get(1)).ok_or(CmdError::InvalidCursor)?;
    let options = parse_scan_args(args, 2, ScanOf::Keys)?;
    let (next, ids) = walk(engine, ctx.db, cursor, options.count);
    let keys = filter(engine, ctx, &ids, &options);
    reply.array(2);
    reply.bulk_int(next as i64);
    reply.array(keys.len());
    for key in keys {
        reply.bulk(&key);
    }
    Ok(Done)
}

/// Visit slots from `cursor` until `count` live entries or the slot budget; returns
/// the next cursor (0 at the end) and the live ids seen.
fn walk(engine: &Engine, db: usize, cursor: u64, count: usize) -> (u64, Vec<EntryId>) {
    let db = engine.db(db);
    let high = db.slots_high() as u64;
    let mut ids = Vec::with_capacity(count.min(1024));
    let mut slot = cursor;
    let mut budget = count.saturating_mul(SCAN_SLOTS_PER_COUNT);
    while slot < high && ids.len() < count && budget > 0 {
        if db.slot(slot as u32).is_some() {
            ids.push(slot as u32);
        }
        slot += 1;
        budget -= 1;
    }
    (if slot >= high { 0 } else { slot }, ids)
}

/// Apply MATCH, drop (and delete) expired keys, apply TYPE, in Redis' order.
fn filter(engine: &mut Engine, ctx: &ExecCtx, ids: &[EntryId], o: &ScanArgs<'_>) -> Vec<Vec<u8>> {
    let mut keys = Vec::with_capacity(ids.len());
    for &id in ids {
        let entry = engine.db(ctx.db).entry(id);
        if o.pattern.is_some_and(|p| !glob_match(p, entry.key())) {
            continue;
        }
        if engine.is_expired(ctx.db, id, ctx.now_ms) {
            engine.expire_now(ctx.db, id);
            continue;
        }
        let entry = engine.db(ctx.db).entry(id);
        if o.type_name
            .is_some_and(|t| !t.eq_ignore_ascii_case(entry.value().value_type().name().as_bytes()))
        {
            continue;
        }
        keys.push(entry.key().to_vec());
    }
    keys
}

/// `RANDOMKEY`: a random live key, nil when the database is empty.
pub(crate) fn randomkey(
    engine: &mut Engine,
    ctx: &mut ExecCtx,
    _args: Args<'_>,
    reply: &mut Reply<'_>,
) -> CmdResult {
    loop {
        let mut state = engine.next_random() | 1;
        let picked = engine.db(ctx.db).random(|| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        });
        match picked {
            None => reply.null(),
            Some(id) if engine.is_expired(ctx.db, id, ctx.now_ms) => {
                engine.expire_now(ctx.db, id);
                continue;
            }
            Some(id) => reply.bulk(engine.db(ctx.db).entry(id).key()),
        }
        return Ok(Done);
    }
}

/// `DBSIZE`
pub(crate) fn dbsize(
    engine: &mut Engine,
    ctx: &mut ExecCtx,
    _args: Args<'_>,
    reply: &mut Reply<'_>,
) -> CmdResult {
    reply.int(engine.db(ctx.db).len() as i64);
    Ok(Done)
}

/// Redis' `getFlushCommandFlags`: `Some(lazy)`, or `None` for a syntax error;
/// without a flag, `lazyfree-lazy-user-flush` decides.
fn flush_mode(engine: &Engine, args: Args<'_>) -> Option<bool> {
    match args.len() {
        1 => Some(engine.config().lazyfree_lazy_user_flush),
        2 if eq_ci(args.get(1), "SYNC") => Some(false),
        2 if eq_ci(args.get(1), "ASYNC") => Some(true),
        _ => None,
    }
}

/// `FLUSHDB [ASYNC | SYNC]`: ASYNC frees the entries in slices during active expiry.
pub(crate) fn flushdb(
    engine: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> CmdResult {
    let lazy = flush_mode(engine, args).ok_or(CmdError::Syntax)?;
    let removed = engine.db(ctx.db).len() as u64;
    engine.every_shard_writes += 1;
    ctx.effects.dirty += removed;
    engine.flush_db(ctx.db, lazy);
    if removed == 0 {
        // Logged and replicated even so, as Redis's forceCommandPropagation: in
        // forward mode every shard runs it and replicas take it once, when every
        // shard has (`replication::primary`'s barriers in ruvio-server).
        let argv: Vec<&[u8]> = args.iter().collect();
        ctx.log_as(&argv);
    }
    reply.ok();
    Ok(Done)
}

/// `FLUSHALL [ASYNC | SYNC]`
pub(crate) fn flushall(
    engine: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> CmdResult {
    let lazy = flush_mode(engine, args).ok_or(CmdError::Syntax)?;
    engine.every_shard_writes += 1;
    for db in 0..engine.db_count() {
        ctx.effects.dirty += engine.db(db).len() as u64;
        engine.flush_db(db, lazy);
    }
    // Redis counts one more change so that even an empty FLUSHALL is logged.
    ctx.effects.dirty += 1;
    reply.ok();
    Ok(Done)
}

/// `SWAPDB index1 index2`
pub(crate) fn swapdb(
    engine: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> CmdResult {
    let a = i32_arg(args.get(1), CmdError::InvalidFirstDbIndex)?;
    let b = i32_arg(args.get(2), CmdError::InvalidSecondDbIndex)?;
    let in_range = |i: i32| usize::try_from(i).ok().filter(|&i| i < engine.db_count());
    let (a, b) = in_range(a)
        .zip(in_range(b))
        .ok_or(CmdError::DbIndexOutOfRange)?;
    engine.swap_dbs(a, b);
    engine.every_shard_writes += 1;
    ctx.effects.dirty += 1;
    reply.ok();
    Ok(Done)
}
