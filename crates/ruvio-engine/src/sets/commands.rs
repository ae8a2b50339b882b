//! The set commands: thin handlers over the cores in the parent module and the
//! [`SetValue`] operations, each in Redis's order of checks (which error wins
//! when several apply is part of the behaviour).

use ruvio_resp::{Args, Reply};

use super::{
    change_set, delete_if_empty, events, inter_generic, limits, reply_members, set_at,
    union_diff_command, InterMode, SetOp, SetValue,
};
use crate::args::{eq_ci, int_arg, parse_cursor, parse_scan_args, ScanArgs, ScanOf};
use crate::command::{CmdResult, ExecCtx, Outcome::Done};
use crate::error::CmdError;
use crate::glob::glob_match;
use crate::keyspace::Collection;
use crate::lists::Popped;
use crate::Engine;

/// Members per SREM record when SPOP with a count is logged (Redis batches its
/// propagated SREMs the same way, so one record never grows without bound).
const SPOP_LOG_BATCH_MAX: usize = 1024;

/// Most members SRANDMEMBER with a negative count answers. Redis has no limit
/// and would build a reply of up to 2^63 members; Ruvio refuses beyond this
/// ("value is out of range") so one command cannot exhaust memory.
const SRANDMEMBER_REPEATS_MAX: u64 = 1 << 24;

/// `SADD key member [member ...]`: how many were added.
pub(super) fn sadd(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    let key = args.get(1);
    let members = args.tail(2);
    let limits = limits(e);
    let hint = members.len();
    let added = match e.lookup_write(ctx, key) {
        Some(id) => change_set(e, ctx.db, id, |s| {
            s.maybe_convert(hint, &limits);
            members.iter().filter(|m| s.add(m, &limits)).count()
        })?,
        None => {
            let mut set = SetValue::create(members.get(0), hint, &limits);
            let added = members.iter().filter(|m| set.add(m, &limits)).count();
            e.add_collection(ctx, key, Collection::Set(set));
            added
        }
    };
    if added > 0 {
        ctx.changed(key, events::SADD, added as u64);
    }
    r.int(added as i64);
    Ok(Done)
}

/// `SREM key member [member ...]`: how many were removed; the key goes with its
/// last member.
pub(super) fn srem(
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
    set_at(e, ctx.db, id)?;
    let removed = change_set(e, ctx.db, id, |s| {
        let mut n = 0;
        for m in args.tail(2) {
            if s.remove(m) {
                n += 1;
                if s.is_empty() {
                    break;
                }
            }
        }
        n
    })?;
    if removed > 0 {
        ctx.changed(key, events::SREM, removed);
        delete_if_empty(e, ctx, key, id);
    }
    r.int(removed as i64);
    Ok(Done)
}

/// `SISMEMBER key member`: 1 or 0.
pub(super) fn sismember(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    let found = match e.lookup_read(ctx, args.get(1)) {
        None => false,
        Some(id) => set_at(e, ctx.db, id)?.contains(args.get(2)),
    };
    r.int(found as i64);
    Ok(Done)
}

/// `SMISMEMBER key member [member ...]`: 1 or 0 per member.
pub(super) fn smismember(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    let members = args.tail(2);
    let set = match e.lookup_read(ctx, args.get(1)) {
        None => None,
        Some(id) => Some(set_at(e, ctx.db, id)?),
    };
    r.array(members.len());
    for m in members {
        r.int(set.is_some_and(|s| s.contains(m)) as i64);
    }
    Ok(Done)
}

/// `SMEMBERS key`: every member, as a set reply.
pub(super) fn smembers(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    match e.lookup_read(ctx, args.get(1)) {
        None => r.set(0),
        Some(id) => reply_members(r, set_at(e, ctx.db, id)?),
    }
    Ok(Done)
}

/// `SCARD key`: the number of members, 0 when missing.
pub(super) fn scard(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    let n = match e.lookup_read(ctx, args.get(1)) {
        None => 0,
        Some(id) => set_at(e, ctx.db, id)?.len(),
    };
    r.int(n as i64);
    Ok(Done)
}

/// A uniformly random index below `len` (`len > 0`).
fn random_index(e: &mut Engine, len: usize) -> usize {
    (e.next_random() % len as u64) as usize
}

/// `SPOP key [count]`: one random member (nil when missing), or a set of up to
/// `count`. Logged as `SREM key member...` of what went (in batches), or `DEL
/// key` when it took every member, as Redis propagates it.
pub(super) fn spop(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    if args.len() > 3 {
        return Err(CmdError::Syntax);
    }
    let count = match args.len() {
        3 => match int_arg(args.get(2))? {
            n if n < 0 => return Err(CmdError::NotPositive),
            n => Some(usize::try_from(n).unwrap_or(usize::MAX)),
        },
        _ => None,
    };
    let key = args.get(1);
    let Some(id) = e.lookup_write(ctx, key) else {
        match count {
            Some(_) => r.set(0),
            None => r.null(),
        }
        return Ok(Done);
    };
    let size = set_at(e, ctx.db, id)?.len();
    let Some(count) = count else {
        let at = random_index(e, size);
        let popped = change_set(e, ctx.db, id, |s| s.remove_index(at))?.unwrap_or_default();
        ctx.changed(key, events::SPOP, 1);
        ctx.log_as(&[b"SREM", key, &popped]);
        r.bulk(&popped);
        delete_if_empty(e, ctx, key, id);
        return Ok(Done);
    };
    if count == 0 {
        r.set(0);
        return Ok(Done);
    }
    if count >= size {
        reply_members(r, set_at(e, ctx.db, id)?);
        ctx.changed(key, events::SPOP, size as u64);
        e.delete(ctx.db, id);
        ctx.changed(key, crate::keys::events::DEL, 0);
        ctx.log_as(&[b"DEL", key]);
        return Ok(Done);
    }
    let mut popped: Vec<Popped> = Vec::with_capacity(count);
    for left in (size - count + 1..=size).rev() {
        let at = random_index(e, left);
        if let Some(m) = change_set(e, ctx.db, id, |s| s.remove_index(at))? {
            popped.push(m);
        }
    }
    r.set(popped.len());
    popped.iter().for_each(|m| r.bulk(m));
    ctx.changed(key, events::SPOP, popped.len() as u64);
    for batch in popped.chunks(SPOP_LOG_BATCH_MAX) {
        let mut argv: Vec<&[u8]> = Vec::with_capacity(batch.len() + 2);
        argv.push(b"SREM");
        argv.push(key);
        argv.extend(batch.iter().map(|m| &m[..]));
        ctx.log_as(&argv);
    }
    Ok(Done)
}

/// `SRANDMEMBER key [count]`: one random member (nil when missing); with a
/// count, an array: `count > 0` distinct members (all when the set is smaller),
/// `count < 0` `-count` members that may repeat.
pub(super) fn srandmember(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    if args.len() > 3 {
        return Err(CmdError::Syntax);
    }
    if args.len() == 2 {
        let Some(id) = e.lookup_read(ctx, args.get(1)) else {
            r.null();
            return Ok(Done);
        };
        let size = set_at(e, ctx.db, id)?.len();
        let at = random_index(e, size);
        if let Some(m) = set_at(e, ctx.db, id)?.get(at) {
            m.reply(r);
        }
        return Ok(Done);
    }
    let n = match int_arg(args.get(2))? {
        i64::MIN => return Err(CmdError::OutsideLongRange),
        n => n,
    };
    let (count, unique) = (n.unsigned_abs(), n >= 0);
    let Some(id) = e.lookup_read(ctx, args.get(1)) else {
        r.array(0);
        return Ok(Done);
    };
    let size = set_at(e, ctx.db, id)?.len();
    if count == 0 {
        r.array(0);
        return Ok(Done);
    }
    if !unique || count == 1 {
        if count > SRANDMEMBER_REPEATS_MAX {
            return Err(CmdError::OutsideLongRange);
        }
        let picks: Vec<usize> = (0..count).map(|_| random_index(e, size)).collect();
        let set = set_at(e, ctx.db, id)?;
        r.array(picks.len());
        for at in picks {
            if let Some(m) = set.get(at) {
                m.reply(r);
            }
        }
        return Ok(Done);
    }
    if count >= size as u64 {
        let set = set_at(e, ctx.db, id)?;
        r.array(set.len());
        set.iter().for_each(|m| m.reply(r));
        return Ok(Done);
    }
    // Distinct picks: a partial Fisher-Yates shuffle of the positions.
    let count = count as usize;
    let mut positions: Vec<usize> = (0..size).collect();
    for i in 0..count {
        let j = i + random_index(e, size - i);
        positions.swap(i, j);
    }
    let set = set_at(e, ctx.db, id)?;
    r.array(count);
    for &at in &positions[..count] {
        if let Some(m) = set.get(at) {
            m.reply(r);
        }
    }
    Ok(Done)
}

/// `SMOVE source destination member`: 1 when moved (or already in a source that
/// is the destination), 0 otherwise.
pub(super) fn smove(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    let (src, dst, member) = (args.get(1), args.get(2), args.get(3));
    let src_id = e.lookup_write(ctx, src);
    let dst_id = e.lookup_write(ctx, dst);
    let Some(src_id) = src_id else {
        r.int(0);
        return Ok(Done);
    };
    set_at(e, ctx.db, src_id)?;
    if let Some(id) = dst_id {
        set_at(e, ctx.db, id)?;
    }
    if dst_id == Some(src_id) {
        let here = set_at(e, ctx.db, src_id)?.contains(member);
        r.int(here as i64);
        return Ok(Done);
    }
    if !change_set(e, ctx.db, src_id, |s| s.remove(member))? {
        r.int(0);
        return Ok(Done);
    }
    ctx.changed(src, events::SREM, 1);
    delete_if_empty(e, ctx, src, src_id);
    let limits = limits(e);
    let added = match dst_id {
        Some(id) => change_set(e, ctx.db, id, |s| s.add(member, &limits))?,
        None => {
            let mut set = SetValue::create(member, 1, &limits);
            set.add(member, &limits);
            e.add_collection(ctx, dst, Collection::Set(set));
            true
        }
    };
    if added {
        ctx.changed(dst, events::SADD, 1);
    }
    r.int(1);
    Ok(Done)
}

/// `SINTER key [key ...]`: the members in every set.
pub(super) fn sinter(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    inter_generic(e, ctx, args, 1..args.len(), InterMode::Reply, r)
}

/// `SINTERSTORE destination key [key ...]`: store the intersection; its size.
pub(super) fn sinterstore(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    inter_generic(
        e,
        ctx,
        args,
        2..args.len(),
        InterMode::Store(args.get(1)),
        r,
    )
}

/// `SINTERCARD numkeys key [key ...] [LIMIT limit]`: the intersection's size,
/// counting stops at `limit` (0: no limit).
pub(super) fn sintercard(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    let numkeys = crate::args::parse_i64(args.get(1))
        .filter(|&n| n > 0)
        .ok_or(CmdError::NumkeysNotPositive)?;
    let first = 2usize;
    let end = usize::try_from(numkeys)
        .ok()
        .and_then(|n| first.checked_add(n))
        .filter(|&end| end <= args.len())
        .ok_or(CmdError::NumkeysExceedArgs)?;
    let mut limit = 0usize;
    let mut j = end;
    while j < args.len() {
        if eq_ci(args.get(j), "LIMIT") && j + 1 < args.len() {
            j += 1;
            limit = crate::args::parse_i64(args.get(j))
                .and_then(|n| usize::try_from(n).ok())
                .ok_or(CmdError::LimitNegative)?;
        } else {
            return Err(CmdError::Syntax);
        }
        j += 1;
    }
    inter_generic(e, ctx, args, first..end, InterMode::Card(limit), r)
}

/// `SUNION key [key ...]`: the members of any set.
pub(super) fn sunion(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    union_diff_command(e, ctx, args, r, SetOp::Union, false)
}

/// `SUNIONSTORE destination key [key ...]`: store the union; its size.
pub(super) fn sunionstore(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    union_diff_command(e, ctx, args, r, SetOp::Union, true)
}

/// `SDIFF key [key ...]`: the members of the first set in none of the others.
pub(super) fn sdiff(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    union_diff_command(e, ctx, args, r, SetOp::Diff, false)
}

/// `SDIFFSTORE destination key [key ...]`: store the difference; its size.
pub(super) fn sdiffstore(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    union_diff_command(e, ctx, args, r, SetOp::Diff, true)
}

/// `SSCAN key cursor [MATCH pattern] [COUNT count]`: `[next cursor, members]`.
/// An intset or listpack answers everything at once with cursor 0, as Redis; a
/// hash table is walked from the end down (see the table's module docs), the
/// cursor being how many positions are left to visit.
pub(super) fn sscan(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    let cursor = parse_cursor(args.get(2)).ok_or(CmdError::InvalidCursor)?;
    let Some(id) = e.lookup_read(ctx, args.get(1)) else {
        r.array(2);
        r.bulk(b"0");
        r.array(0);
        return Ok(Done);
    };
    let set = set_at(e, ctx.db, id)?;
    let ScanArgs { count, pattern, .. } = parse_scan_args(args, 3, ScanOf::Members)?;
    let mut digits = itoa::Buffer::new();
    let mut keep =
        |m: &crate::value::StrRef<'_>| pattern.is_none_or(|p| glob_match(p, m.bytes(&mut digits)));
    let (next, found): (usize, Vec<_>) = if set.encoding() == super::SetEncoding::Hashtable {
        let len = set.len();
        let start = match usize::try_from(cursor) {
            Ok(0) | Err(_) => len,
            Ok(c) => c.min(len),
        };
        let stop = start.saturating_sub(count);
        let found = (stop..start)
            .rev()
            .filter_map(|at| set.get(at))
            .filter(&mut keep)
            .collect();
        (stop, found)
    } else {
        (0, set.iter().filter(&mut keep).collect())
    };
    r.array(2);
    r.bulk(itoa::Buffer::new().format(next).as_bytes());
    r.array(found.len());
    found.iter().for_each(|m| m.reply(r));
    Ok(Done)
}
