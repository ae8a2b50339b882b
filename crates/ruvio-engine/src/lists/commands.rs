//! The non-blocking list commands: thin handlers over the cores in the parent
//! module and the [`ListValue`] operations, each in Redis's order of checks
//! (which error wins when several apply is part of the behaviour).

use ruvio_resp::{Args, Reply};

use super::{
    change_list, events, fill, list_at, lmove_generic, long_arg, non_negative_arg, parse_end,
    parse_mpop, pop_from_first, pop_generic, push_generic, reply_range, End, PopReply,
};
use crate::args::int_arg;
use crate::command::{CmdResult, ExecCtx, Outcome::Done};
use crate::error::CmdError;
use crate::Engine;

/// `LPUSH key element [element ...]`: the new length.
pub(super) fn lpush(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    push_generic(e, ctx, args, r, End::Head, false)
}

/// `RPUSH key element [element ...]`: the new length.
pub(super) fn rpush(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    push_generic(e, ctx, args, r, End::Tail, false)
}

/// `LPUSHX key element [element ...]`: as LPUSH, 0 when the key is missing.
pub(super) fn lpushx(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    push_generic(e, ctx, args, r, End::Head, true)
}

/// `RPUSHX key element [element ...]`: as RPUSH, 0 when the key is missing.
pub(super) fn rpushx(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    push_generic(e, ctx, args, r, End::Tail, true)
}

/// `LPOP key [count]`: the first element (nil when missing), or an array of up to
/// `count` (a null array when missing).
pub(super) fn lpop(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    pop_generic(e, ctx, args, r, End::Head)
}

/// `RPOP key [count]`: as LPOP from the tail.
pub(super) fn rpop(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    pop_generic(e, ctx, args, r, End::Tail)
}

/// `LLEN key`: the length, 0 when missing.
pub(super) fn llen(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    let len = match e.lookup_read(ctx, args.get(1)) {
        None => 0,
        Some(id) => list_at(e, ctx.db, id)?.len(),
    };
    r.int(len as i64);
    Ok(Done)
}

/// `LRANGE key start stop`: the elements in the inclusive range (negative indexes
/// count from the end); indexes are parsed before the key is looked up.
pub(super) fn lrange(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    let start = int_arg(args.get(2))?;
    let stop = int_arg(args.get(3))?;
    match e.lookup_read(ctx, args.get(1)) {
        None => r.array(0),
        Some(id) => reply_range(r, list_at(e, ctx.db, id)?, start, stop, false),
    }
    Ok(Done)
}

/// A signed index into a list of `len` elements, if it names one.
fn normalize_index(index: i64, len: usize) -> Option<usize> {
    let len = i64::try_from(len).ok()?;
    let at = if index < 0 {
        len.checked_add(index)?
    } else {
        index
    };
    (0..len).contains(&at).then_some(at as usize)
}

/// `LINDEX key index`: the element or nil; the key is looked up before the index
/// is parsed.
pub(super) fn lindex(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    let Some(id) = e.lookup_read(ctx, args.get(1)) else {
        r.null();
        return Ok(Done);
    };
    let list = list_at(e, ctx.db, id)?;
    let index = int_arg(args.get(2))?;
    match normalize_index(index, list.len()).and_then(|i| list.get(i)) {
        Some(elem) => r.bulk(elem),
        None => r.null(),
    }
    Ok(Done)
}

/// `LSET key index element`: `ERR no such key` when missing, `ERR index out of
/// range` past the ends. As Redis, the listpack conversion check for the new
/// element runs before the index is checked.
pub(super) fn lset(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    let key = args.get(1);
    let Some(id) = e.lookup_write(ctx, key) else {
        return Err(CmdError::NoSuchKey);
    };
    let len = list_at(e, ctx.db, id)?.len();
    let index = int_arg(args.get(2))?;
    let fill = fill(e);
    // An index outside the list becomes one past any list (`set` then only runs
    // the conversion check).
    let at = normalize_index(index, len).unwrap_or(usize::MAX);
    if !change_list(e, ctx.db, id, |l| l.set(at, args.get(3), fill))? {
        return Err(CmdError::IndexOutOfRange);
    }
    r.ok();
    ctx.changed(key, events::LSET, 1);
    Ok(Done)
}

/// `LINSERT key BEFORE|AFTER pivot element`: the new length, -1 without the pivot,
/// 0 when the key is missing.
pub(super) fn linsert(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    let where_ = args.get(2);
    let after = if where_.eq_ignore_ascii_case(b"after") {
        true
    } else if where_.eq_ignore_ascii_case(b"before") {
        false
    } else {
        return Err(CmdError::Syntax);
    };
    let key = args.get(1);
    let Some(id) = e.lookup_write(ctx, key) else {
        r.int(0);
        return Ok(Done);
    };
    list_at(e, ctx.db, id)?;
    let fill = fill(e);
    match change_list(e, ctx.db, id, |l| {
        l.insert(args.get(3), after, args.get(4), fill)
    })? {
        Some(len) => {
            r.int(len as i64);
            ctx.changed(key, events::LINSERT, 1);
        }
        None => r.int(-1),
    }
    Ok(Done)
}

/// `LREM key count element`: how many were removed (count > 0 from the head,
/// < 0 from the tail, 0 all).
pub(super) fn lrem(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    let count = long_arg(args.get(2))?;
    let key = args.get(1);
    let Some(id) = e.lookup_write(ctx, key) else {
        r.int(0);
        return Ok(Done);
    };
    list_at(e, ctx.db, id)?;
    let fill = fill(e);
    let removed = change_list(e, ctx.db, id, |l| l.remove(args.get(3), count, fill))?;
    if removed > 0 {
        ctx.changed(key, events::LREM, removed as u64);
        if e.delete_if_empty(ctx.db, id) {
            ctx.changed(key, crate::keys::events::DEL, 0);
        }
    }
    r.int(removed as i64);
    Ok(Done)
}

/// `LTRIM key start stop`: keep the inclusive range; OK even when the key is
/// missing; an empty range deletes the key.
pub(super) fn ltrim(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    let start = int_arg(args.get(2))?;
    let stop = int_arg(args.get(3))?;
    let key = args.get(1);
    let Some(id) = e.lookup_write(ctx, key) else {
        r.ok();
        return Ok(Done);
    };
    list_at(e, ctx.db, id)?;
    let fill = fill(e);
    let removed = change_list(e, ctx.db, id, |l| {
        let before = l.len();
        l.trim(start, stop, fill);
        before - l.len()
    })?;
    ctx.changed(key, events::LTRIM, removed as u64);
    if e.delete_if_empty(ctx.db, id) {
        ctx.changed(key, crate::keys::events::DEL, 0);
    }
    r.ok();
    Ok(Done)
}

/// `LPOS key element [RANK rank] [COUNT num-matches] [MAXLEN len]`: the index of
/// the first match (nil if none), or with COUNT an array of up to that many (0:
/// all). A negative RANK searches from the tail.
pub(super) fn lpos(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    let mut rank = 1i64;
    let mut count = None;
    let mut maxlen = 0usize;
    let mut j = 3;
    while j < args.len() {
        let opt = args.get(j);
        let more = j + 1 < args.len();
        if more && opt.eq_ignore_ascii_case(b"rank") {
            j += 1;
            rank = long_arg(args.get(j))?;
            if rank == 0 {
                return Err(CmdError::RankZero);
            }
        } else if more && opt.eq_ignore_ascii_case(b"count") {
            j += 1;
            count = Some(non_negative_arg(args.get(j), CmdError::CountNegative)?);
        } else if more && opt.eq_ignore_ascii_case(b"maxlen") {
            j += 1;
            maxlen = non_negative_arg(args.get(j), CmdError::MaxlenNegative)?;
        } else {
            return Err(CmdError::Syntax);
        }
        j += 1;
    }
    let Some(id) = e.lookup_read(ctx, args.get(1)) else {
        match count {
            Some(_) => r.array(0),
            None => r.null(),
        }
        return Ok(Done);
    };
    let list = list_at(e, ctx.db, id)?;
    let found = list.positions(args.get(2), rank, count.unwrap_or(1), maxlen);
    match count {
        Some(_) => {
            r.array(found.len());
            found.iter().for_each(|&i| r.int(i as i64));
        }
        None => match found.first() {
            Some(&i) => r.int(i as i64),
            None => r.null(),
        },
    }
    Ok(Done)
}

/// `LMOVE source destination LEFT|RIGHT LEFT|RIGHT`: the moved element, nil when
/// the source is missing.
pub(super) fn lmove(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    let from = parse_end(args.get(3))?;
    let to = parse_end(args.get(4))?;
    lmove_generic(e, ctx, args, r, from, to)
}

/// `RPOPLPUSH source destination`: LMOVE RIGHT LEFT.
pub(super) fn rpoplpush(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    lmove_generic(e, ctx, args, r, End::Tail, End::Head)
}

/// `LMPOP numkeys key [key ...] LEFT|RIGHT [COUNT count]`: `[key, [elements]]` from
/// the first non-empty list, a null array when none; logged as `LPOP key n`.
pub(super) fn lmpop(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    let parsed = parse_mpop(args, 1)?;
    let how = PopReply::Range(parsed.count);
    if !pop_from_first(e, ctx, args, parsed.keys, parsed.end, how, r)? {
        r.null_array();
    }
    Ok(Done)
}
