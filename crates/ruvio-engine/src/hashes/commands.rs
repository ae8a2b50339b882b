//! The classic hash commands (HSET .. HSCAN): thin handlers over [`HashValue`] in
//! Redis's order of checks, with Redis 8's lazy field expiry where a command reads
//! one field.

use ruvio_resp::{Args, Reply};

use super::{
    after_lazy_expiry, change_hash, delete_if_empty, events, expire_field, hash_at, limits,
    read_hash, write_hash, write_or_create, HashValue,
};
use crate::args::{int_arg, parse_cursor, parse_scan_args, ScanOf};
use crate::command::{CmdResult, ExecCtx, Outcome::Done};
use crate::error::CmdError;
use crate::glob::glob_match;
use crate::keyspace::EntryId;
use crate::longdouble::{incr_by_float, LongDouble};
use crate::Engine;

/// `HSET key field value [field value ...]`: the number of fields created.
pub(super) fn hset(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    hset_generic(e, ctx, args, r, "hset")
}

/// `HMSET key field value [field value ...]`: OK.
pub(super) fn hmset(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    hset_generic(e, ctx, args, r, "hmset")
}

/// `hsetCommand`, serving HSET and HMSET: one conversion check for all pairs
/// (`hashTypeTryConversion`), then each pair in order.
fn hset_generic(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
    name: &'static str,
) -> CmdResult {
    if args.len() % 2 == 1 {
        return Err(CmdError::WrongArity(name));
    }
    let key = args.get(1);
    let pairs = args.tail(2);
    let limits = limits(e);
    let id = write_or_create(e, ctx, key)?;
    let created = change_hash(e, ctx.db, id, |h| {
        h.convert_for_args(pairs.iter(), limits);
        (0..pairs.len())
            .step_by(2)
            .filter(|&i| h.set(pairs.get(i), pairs.get(i + 1), limits))
            .count()
    })?;
    if name == "hset" {
        r.int(created as i64);
    } else {
        r.ok();
    }
    ctx.changed(key, events::HSET, (pairs.len() / 2) as u64);
    Ok(Done)
}

/// `HSETNX key field value`: 1 if set, 0 if the field exists. An expired field is
/// deleted first (and with it the key, when it was the last field).
pub(super) fn hsetnx(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    let (key, field, value) = (args.get(1), args.get(2), args.get(3));
    let mut id = write_or_create(e, ctx, key)?;
    let expired = expire_field(e, ctx, id, field);
    if after_lazy_expiry(e, ctx, key, id, usize::from(expired), true) {
        // The field was the last one: Redis creates a new hash.
        id = write_or_create(e, ctx, key)?;
    }
    if hash_at(e, ctx.db, id)?.lookup(field).is_some() {
        r.int(0);
        return Ok(Done);
    }
    let limits = limits(e);
    change_hash(e, ctx.db, id, |h| {
        h.convert_for_args([field, value], limits);
        h.set(field, value, limits);
    })?;
    r.int(1);
    ctx.changed(key, events::HSET, 1);
    Ok(Done)
}

/// The value of `field` in the hash at `id` after lazy expiry, or `None`; counts an
/// expiry in `expired`.
fn live_value<'e>(
    e: &'e mut Engine,
    ctx: &ExecCtx,
    id: EntryId,
    field: &[u8],
    expired: &mut usize,
) -> Option<&'e [u8]> {
    if expire_field(e, ctx, id, field) {
        *expired += 1;
        return None;
    }
    hash_at(e, ctx.db, id).ok()?.get(field, ctx.now_ms)
}

/// `HGET key field`: the value, or nil.
pub(super) fn hget(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    let (key, field) = (args.get(1), args.get(2));
    let Some(id) = read_hash(e, ctx, key)? else {
        r.null();
        return Ok(Done);
    };
    let mut expired = 0;
    match live_value(e, ctx, id, field, &mut expired) {
        Some(v) => r.bulk(v),
        None => r.null(),
    }
    after_lazy_expiry(e, ctx, key, id, expired, true);
    Ok(Done)
}

/// `HMGET key field [field ...]`: an array of values or nils (a missing key is an
/// empty hash).
pub(super) fn hmget(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    let key = args.get(1);
    let id = read_hash(e, ctx, key)?;
    r.array(args.len() - 2);
    let Some(id) = id else {
        (2..args.len()).for_each(|_| r.null());
        return Ok(Done);
    };
    let mut expired = 0;
    let mut deleted = false;
    for field in args.tail(2) {
        if deleted {
            r.null();
            continue;
        }
        let before = expired;
        match live_value(e, ctx, id, field, &mut expired) {
            Some(v) => r.bulk(v),
            None => r.null(),
        }
        if expired > before && hash_at(e, ctx.db, id).is_ok_and(HashValue::is_empty) {
            deleted = true;
        }
    }
    after_lazy_expiry(e, ctx, key, id, expired, true);
    Ok(Done)
}

/// `HDEL key field [field ...]`: the number of fields removed (expired ones count).
pub(super) fn hdel(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    let key = args.get(1);
    let Some(id) = write_hash(e, ctx, key)? else {
        r.int(0);
        return Ok(Done);
    };
    let deleted = change_hash(e, ctx.db, id, |h| {
        let mut deleted = 0;
        for field in args.tail(2) {
            if h.remove(field) {
                deleted += 1;
                if h.is_empty() {
                    break;
                }
            }
        }
        deleted
    })?;
    if deleted > 0 {
        ctx.changed(key, events::HDEL, deleted as u64);
        delete_if_empty(e, ctx, key, id);
    }
    r.int(deleted as i64);
    Ok(Done)
}

/// `HLEN key`: the number of fields (expired ones not yet removed included, as Redis).
pub(super) fn hlen(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    let len = match read_hash(e, ctx, args.get(1))? {
        Some(id) => hash_at(e, ctx.db, id)?.len(),
        None => 0,
    };
    r.int(len as i64);
    Ok(Done)
}

/// `HSTRLEN key field`: the length of the value, 0 when missing.
pub(super) fn hstrlen(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    let (key, field) = (args.get(1), args.get(2));
    let Some(id) = read_hash(e, ctx, key)? else {
        r.int(0);
        return Ok(Done);
    };
    let mut expired = 0;
    let len = live_value(e, ctx, id, field, &mut expired).map_or(0, <[u8]>::len);
    r.int(len as i64);
    after_lazy_expiry(e, ctx, key, id, expired, true);
    Ok(Done)
}

/// `HEXISTS key field`: 1 or 0.
pub(super) fn hexists(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    let (key, field) = (args.get(1), args.get(2));
    let Some(id) = read_hash(e, ctx, key)? else {
        r.int(0);
        return Ok(Done);
    };
    let mut expired = 0;
    let exists = live_value(e, ctx, id, field, &mut expired).is_some();
    r.int(i64::from(exists));
    after_lazy_expiry(e, ctx, key, id, expired, true);
    Ok(Done)
}

/// What `genericHgetallCommand` replies with.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Whole {
    Keys,
    Values,
    Both,
}

/// `HKEYS key`: the live fields.
pub(super) fn hkeys(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    whole_generic(e, ctx, args, r, Whole::Keys)
}

/// `HVALS key`: the live values.
pub(super) fn hvals(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    whole_generic(e, ctx, args, r, Whole::Values)
}

/// `HGETALL key`: a map of the live fields (a flat array in RESP2).
pub(super) fn hgetall(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    whole_generic(e, ctx, args, r, Whole::Both)
}

/// `genericHgetallCommand`: expired fields are skipped, not deleted.
fn whole_generic(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
    what: Whole,
) -> CmdResult {
    let header = |r: &mut Reply<'_>, n: usize| match what {
        Whole::Both => r.map(n),
        Whole::Keys | Whole::Values => r.array(n),
    };
    let Some(id) = read_hash(e, ctx, args.get(1))? else {
        header(r, 0);
        return Ok(Done);
    };
    let h = hash_at(e, ctx.db, id)?;
    header(r, h.live_len(ctx.now_ms));
    for (field, value) in h.iter(ctx.now_ms) {
        if what != Whole::Values {
            r.bulk(field);
        }
        if what != Whole::Keys {
            r.bulk(value);
        }
    }
    Ok(Done)
}

/// The current value of `field` for HINCRBY/HINCRBYFLOAT: lazy expiry first (a hash
/// emptied by it is replaced by a new one, as Redis does); returns the hash's id and
/// the stored value, if any.
fn counter_field(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    key: &[u8],
    field: &[u8],
) -> Result<(EntryId, Option<Vec<u8>>), CmdError> {
    let mut id = write_or_create(e, ctx, key)?;
    let expired = expire_field(e, ctx, id, field);
    if after_lazy_expiry(e, ctx, key, id, usize::from(expired), true) {
        id = write_or_create(e, ctx, key)?;
    }
    let current = hash_at(e, ctx.db, id)?
        .get(field, ctx.now_ms)
        .map(<[u8]>::to_vec);
    Ok((id, current))
}

/// Drop a hash `counter_field` created when the command then fails.
fn undo_create(e: &mut Engine, ctx: &ExecCtx, id: EntryId) {
    e.delete_if_empty(ctx.db, id);
}

/// `HINCRBY key field increment`: the new value; the field keeps its expiry.
pub(super) fn hincrby(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    let (key, field) = (args.get(1), args.get(2));
    let incr = int_arg(args.get(3))?;
    let (id, current) = counter_field(e, ctx, key, field)?;
    let result = (|| {
        let old = match current {
            Some(v) => crate::args::parse_i64(&v).ok_or(CmdError::HashValueNotInteger)?,
            None => 0,
        };
        old.checked_add(incr).ok_or(CmdError::IncrOverflow)
    })();
    let new = match result {
        Ok(n) => n,
        Err(err) => {
            undo_create(e, ctx, id);
            return Err(err);
        }
    };
    let limits = limits(e);
    let mut digits = itoa::Buffer::new();
    let text = digits.format(new).as_bytes();
    change_hash(e, ctx.db, id, |h| h.set_keep_ttl(field, text, limits))?;
    r.int(new);
    ctx.changed(key, events::HINCRBY, 1);
    Ok(Done)
}

/// `HINCRBYFLOAT key field increment`: the new value as a bulk string (long double
/// arithmetic and formatting, as Redis); the field keeps its expiry. Logged as
/// `HSETEX key KEEPTTL FIELDS 1 field result` (Redis 8), so replay cannot drift.
pub(super) fn hincrbyfloat(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    let (key, field) = (args.get(1), args.get(2));
    let incr = LongDouble::parse(args.get(3)).ok_or(CmdError::NotFloat)?;
    if !incr.is_finite() {
        return Err(CmdError::IncrementNanOrInfinity);
    }
    let (id, current) = counter_field(e, ctx, key, field)?;
    let result = (|| {
        let old = match current {
            Some(v) => LongDouble::parse(&v).ok_or(CmdError::HashValueNotFloat)?,
            None => LongDouble::ZERO,
        };
        incr_by_float(old, incr)
    })();
    let text = match result {
        Ok(t) => t,
        Err(err) => {
            undo_create(e, ctx, id);
            return Err(err);
        }
    };
    let limits = limits(e);
    change_hash(e, ctx.db, id, |h| {
        h.set_keep_ttl(field, text.as_bytes(), limits)
    })?;
    r.bulk(text.as_bytes());
    ctx.changed(key, events::HINCRBYFLOAT, 1);
    ctx.log_as(&[
        b"HSETEX",
        key,
        b"KEEPTTL",
        b"FIELDS",
        b"1",
        field,
        text.as_bytes(),
    ]);
    Ok(Done)
}

/// `HSCAN key cursor [MATCH pattern] [COUNT count] [NOVALUES]`: `[next cursor,
/// [field, value, ...]]`. A packed hash answers everything at once with cursor 0
/// (as Redis); a table's cursor is its own (see the `table` module): every field
/// present for the whole scan is returned at least once. Expired fields are
/// skipped.
pub(super) fn hscan(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    let cursor = parse_cursor(args.get(2)).ok_or(CmdError::InvalidCursor)?;
    let Some(id) = read_hash(e, ctx, args.get(1))? else {
        r.array(2);
        r.bulk(b"0");
        r.array(0);
        return Ok(Done);
    };
    let o = parse_scan_args(args, 3, ScanOf::Hash)?;
    let h = hash_at(e, ctx.db, id)?;
    let mut found: Vec<(&[u8], &[u8])> = Vec::new();
    let next = h.scan(cursor, o.count, ctx.now_ms, |field, value| {
        if o.pattern.is_none_or(|p| glob_match(p, field)) {
            found.push((field, value));
        }
    });
    r.array(2);
    // Redis prints the unsigned cursor through a signed formatter.
    r.bulk_int(next as i64);
    r.array(if o.novalues {
        found.len()
    } else {
        2 * found.len()
    });
    for (field, value) in found {
        r.bulk(field);
        if !o.novalues {
            r.bulk(value);
        }
    }
    Ok(Done)
}
