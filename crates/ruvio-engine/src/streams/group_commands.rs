//! XGROUP (CREATE, SETID, DESTROY, CREATECONSUMER, DELCONSUMER, HELP), XACK,
//! XPENDING, XCLAIM and XAUTOCLAIM: Redis 7.0's `xgroupCommand`, `xackCommand`,
//! `xpendingCommand`, `xclaimCommand` and `xautoclaimCommand`, each checking its
//! arguments in Redis's order so the first error is Redis's.
//!
//! Log records: XGROUP and XACK are logged as given (Redis propagates them
//! verbatim); XCLAIM and XAUTOCLAIM are logged as one idempotent
//! `XCLAIM key group consumer 0 id TIME ms RETRYCOUNT n FORCE JUSTID LASTID id`
//! per entry they changed (`streamPropagateXCLAIM`), and a LASTID that only
//! moved the group as `XGROUP SETID ... ENTRIESREAD n`.

use std::sync::Arc;

use ruvio_resp::{Args, Reply};

use super::groups::{ClaimArgs, Claimed, Group, Groups, Nack, ENTRIES_READ_UNKNOWN};
use super::id::{interval_id, parse_id, strict_id, StreamId};
use super::{change_stream, errors, events, reply_entry, stream_at, StreamValue};
use crate::command::{reply_help, CmdResult, Event, ExecCtx, Outcome::Done};
use crate::error::CmdError;
use crate::keyspace::{Collection, EntryId};
use crate::Engine;

/// An error line quoting client bytes as Redis's `%s` does: each quoted part
/// stops at its first NUL byte.
pub(super) fn error_with(parts: &[&[u8]]) -> CmdError {
    let mut line = Vec::new();
    for (i, part) in parts.iter().enumerate() {
        let part = match i % 2 {
            1 => part.split(|&b| b == 0).next().unwrap_or_default(),
            _ => part,
        };
        line.extend_from_slice(part);
    }
    CmdError::quoted("", &line, "")
}

/// `-NOGROUP No such key '<key>' or consumer group '<group>'` (XPENDING, XCLAIM,
/// XAUTOCLAIM).
fn no_key_or_group(key: &[u8], group: &[u8]) -> CmdError {
    error_with(&[
        b"NOGROUP No such key '",
        key,
        b"' or consumer group '",
        group,
        b"'",
    ])
}

/// The stream at `key` and its group `group`, or `-NOGROUP No such key ...`.
fn stream_with_group(
    e: &mut Engine,
    ctx: &ExecCtx,
    key: &[u8],
    group: &[u8],
) -> Result<EntryId, CmdError> {
    let found = e.lookup_read(ctx, key);
    let at = match found {
        Some(at) => at,
        None => return Err(no_key_or_group(key, group)),
    };
    let s = stream_at(e, ctx.db, at)?;
    match s.groups().get(group) {
        Some(_) => Ok(at),
        None => Err(no_key_or_group(key, group)),
    }
}

/// The group `name` of a stream known to hold it.
fn group_of<'a>(s: &'a StreamValue, name: &[u8]) -> &'a Group {
    s.groups().get(name).expect("group checked by the caller")
}

const XGROUP_HELP: &[&str] = &[
    "CREATE <key> <groupname> <id|$> [option]",
    "    Create a new consumer group. Options are:",
    "    * MKSTREAM",
    "      Create the empty stream if it does not exist.",
    "    * ENTRIESREAD entries_read",
    "      Set the group's entries_read counter (internal use).",
    "CREATECONSUMER <key> <groupname> <consumer>",
    "    Create a new consumer in the specified group.",
    "DELCONSUMER <key> <groupname> <consumer>",
    "    Remove the specified consumer.",
    "DESTROY <key> <groupname>",
    "    Remove the specified group.",
    "SETID <key> <groupname> <id|$> [ENTRIESREAD entries_read]",
    "    Set the current group ID and entries_read counter.",
];

/// `XGROUP HELP`.
pub(super) fn xgroup_help(
    _e: &mut Engine,
    _ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    reply_help(r, args.get(0), XGROUP_HELP);
    Ok(Done)
}

/// `unknown subcommand or wrong number of arguments for '<sub>'. Try XGROUP HELP.`
fn subcommand_syntax(args: Args<'_>) -> CmdError {
    let sub = args.get(1);
    let sub = &sub[..sub.len().min(128)];
    error_with(&[
        b"ERR unknown subcommand or wrong number of arguments for '",
        sub,
        b"'. Try XGROUP HELP.",
    ])
}

/// What XGROUP's shared prelude found (`xgroupCommand` before its dispatch).
struct XgroupTarget {
    /// The stream's entry, `None` only with MKSTREAM.
    at: Option<EntryId>,
    mkstream: bool,
    entries_read: i64,
}

/// Options (CREATE's MKSTREAM, CREATE's and SETID's ENTRIESREAD), then the key
/// (it must exist unless MKSTREAM), then the group for the subcommands that need
/// one.
fn xgroup_prelude(
    e: &mut Engine,
    ctx: &ExecCtx,
    args: Args<'_>,
    create: bool,
    needs_group: bool,
) -> Result<XgroupTarget, CmdError> {
    let (mut mkstream, mut entries_read) = (false, ENTRIES_READ_UNKNOWN);
    let sub = args.get(1);
    if create || sub.eq_ignore_ascii_case(b"setid") {
        let mut i = 5;
        while i < args.len() {
            let opt = args.get(i);
            if create && opt.eq_ignore_ascii_case(b"mkstream") {
                mkstream = true;
                i += 1;
            } else if opt.eq_ignore_ascii_case(b"entriesread") && i + 1 < args.len() {
                entries_read = crate::args::int_arg(args.get(i + 1))?;
                if entries_read < ENTRIES_READ_UNKNOWN {
                    return Err(CmdError::Stream(errors::ENTRIES_READ_NEGATIVE));
                }
                i += 2;
            } else {
                return Err(subcommand_syntax(args));
            }
        }
    }
    let key = args.get(2);
    let at = e.lookup_write(ctx, key);
    if let Some(at) = at {
        stream_at(e, ctx.db, at)?;
    }
    if !mkstream {
        let Some(at) = at else {
            return Err(CmdError::Stream(errors::XGROUP_NO_KEY));
        };
        let group = args.get(3);
        if needs_group && stream_at(e, ctx.db, at)?.groups().get(group).is_none() {
            return Err(error_with(&[
                b"NOGROUP No such consumer group '",
                group,
                b"' for key name '",
                key,
                b"'",
            ]));
        }
    }
    Ok(XgroupTarget {
        at,
        mkstream,
        entries_read,
    })
}

/// `XGROUP CREATE key group id|$ [MKSTREAM] [ENTRIESREAD n]`.
pub(super) fn xgroup_create(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    let t = xgroup_prelude(e, ctx, args, true, false)?;
    if args.len() > 8 {
        return Err(subcommand_syntax(args));
    }
    let (key, group) = (args.get(2), args.get(3));
    let id = match args.get(4) {
        b"$" => match t.at {
            Some(at) => stream_at(e, ctx.db, at)?.last_id(),
            None => StreamId::MIN,
        },
        arg => strict_id(arg)?,
    };
    let created = match t.at {
        Some(at) => change_stream(e, ctx.db, at, |s| {
            s.groups_mut().create(group, id, t.entries_read)
        })?,
        None => {
            debug_assert!(t.mkstream);
            let mut s = StreamValue::new();
            s.groups_mut().create(group, id, t.entries_read);
            e.add_collection(ctx, key, Collection::Stream(s));
            true
        }
    };
    if !created {
        return Err(CmdError::Stream(errors::BUSYGROUP));
    }
    r.ok();
    ctx.changed(key, events::XGROUP_CREATE, 1);
    Ok(Done)
}

/// `XGROUP SETID key group id|$ [ENTRIESREAD n]`.
pub(super) fn xgroup_setid(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    let t = xgroup_prelude(e, ctx, args, false, true)?;
    if args.len() != 5 && args.len() != 7 {
        return Err(subcommand_syntax(args));
    }
    let at = t.at.expect("SETID needs the key");
    let (key, group) = (args.get(2), args.get(3));
    let id = match args.get(4) {
        b"$" => stream_at(e, ctx.db, at)?.last_id(),
        arg => parse_id(arg, 0, false, false)?.id,
    };
    change_stream(e, ctx.db, at, |s| {
        s.groups_mut().set_last(group, id, t.entries_read)
    })?;
    r.ok();
    ctx.changed(key, events::XGROUP_SETID, 1);
    Ok(Done)
}

/// `XGROUP DESTROY key group`: 1 or 0. Clients blocked in XREADGROUP on the
/// group are woken (the key is changed) and answer `-NOGROUP`.
pub(super) fn xgroup_destroy(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    let t = xgroup_prelude(e, ctx, args, false, false)?;
    let at = t.at.expect("DESTROY needs the key");
    let (key, group) = (args.get(2), args.get(3));
    let destroyed = change_stream(e, ctx.db, at, |s| s.groups_mut().destroy(group))?;
    r.int(i64::from(destroyed));
    if destroyed {
        ctx.changed(key, events::XGROUP_DESTROY, 1);
    }
    Ok(Done)
}

/// `XGROUP CREATECONSUMER key group consumer`: 1 when created, 0 when it existed.
pub(super) fn xgroup_createconsumer(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    let now = ctx.now_ms as i64;
    let event = events::XGROUP_CREATECONSUMER;
    change_consumer(e, ctx, args, r, event, |groups, group, consumer| {
        groups.create_consumer(group, consumer, now).then_some(1)
    })
}

/// `XGROUP DELCONSUMER key group consumer`: the number of entries it had pending.
pub(super) fn xgroup_delconsumer(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    let event = events::XGROUP_DELCONSUMER;
    change_consumer(e, ctx, args, r, event, |groups, group, consumer| {
        groups
            .delete_consumer(group, consumer)
            .map(|pending| pending as i64)
    })
}

/// CREATECONSUMER and DELCONSUMER: `change` acts on the consumer named by the
/// last argument in the group (the key and the group must exist) and gives the
/// count to reply with, or `None` when nothing changed (the reply is then 0 and
/// no event fires).
fn change_consumer(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
    event: Event,
    change: impl FnOnce(&mut Groups, &[u8], &[u8]) -> Option<i64>,
) -> CmdResult {
    let t = xgroup_prelude(e, ctx, args, false, true)?;
    let at = t.at.expect("a consumer subcommand needs the key");
    let (key, group, consumer) = (args.get(2), args.get(3), args.get(4));
    let changed = change_stream(e, ctx.db, at, |s| change(s.groups_mut(), group, consumer))?;
    r.int(changed.unwrap_or(0));
    if changed.is_some() {
        ctx.changed(key, event, 1);
    }
    Ok(Done)
}

/// `XACK key group id [id ...]`: a missing key or group acknowledges nothing
/// (before the IDs are read, as Redis 7.0); then every ID is checked before any
/// is acknowledged.
pub(super) fn xack(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    let (key, group) = (args.get(1), args.get(2));
    let found = e.lookup_read(ctx, key);
    let has_group = match found {
        Some(at) => stream_at(e, ctx.db, at)?.groups().get(group).is_some(),
        None => false,
    };
    let (Some(at), true) = (found, has_group) else {
        r.int(0);
        return Ok(Done);
    };
    let ids = (3..args.len())
        .map(|i| strict_id(args.get(i)))
        .collect::<Result<Vec<_>, _>>()?;
    let acked = change_stream(e, ctx.db, at, |s| {
        ids.iter()
            .filter(|&&id| s.groups_mut().ack(group, id))
            .count()
    })?;
    r.int(acked as i64);
    // Redis counts each acknowledgement as a change, with no keyspace event.
    ctx.effects.dirty += acked as u64;
    Ok(Done)
}

/// `XPENDING key group [[IDLE min-idle] start end count [consumer]]`.
pub(super) fn xpending(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    let argc = args.len();
    if argc != 3 && !(6..=9).contains(&argc) {
        return Err(CmdError::Syntax);
    }
    let mut range = None;
    if argc >= 6 {
        let mut from = 3;
        let mut min_idle = 0;
        if args.get(3).eq_ignore_ascii_case(b"idle") {
            min_idle = crate::args::int_arg(args.get(4))?;
            if argc < 8 {
                return Err(CmdError::Syntax);
            }
            from += 2;
        }
        let count = crate::args::int_arg(args.get(from + 2))?.max(0) as usize;
        let (start, start_ex) = interval_id(args.get(from), 0)?;
        let start = match start_ex {
            true => start
                .next()
                .ok_or(CmdError::Stream(errors::START_INVALID))?,
            false => start,
        };
        let (end, end_ex) = interval_id(args.get(from + 1), u64::MAX)?;
        let end = match end_ex {
            true => end.prev().ok_or(CmdError::Stream(errors::END_INVALID))?,
            false => end,
        };
        let consumer = (from + 3 < argc).then(|| args.get(from + 3));
        range = Some((min_idle, start, end, count, consumer));
    }
    let (key, group_name) = (args.get(1), args.get(2));
    let at = stream_with_group(e, ctx, key, group_name)?;
    let s = stream_at(e, ctx.db, at)?;
    let group = group_of(s, group_name);
    let Some((min_idle, start, end, count, consumer)) = range else {
        reply_pending_summary(r, group);
        return Ok(Done);
    };
    let now = ctx.now_ms as i64;
    let idle_enough = |n: &Nack| min_idle == 0 || now - n.delivery_ms >= min_idle;
    let rows: Vec<(StreamId, &Nack)> = match consumer {
        Some(name) => match group.consumer(name) {
            None => Vec::new(),
            Some(c) => c
                .pel
                .range(start..)
                .take_while(|id| **id <= end)
                .map(|id| (*id, &group.pel[id]))
                .filter(|(_, n)| idle_enough(n))
                .take(count)
                .collect(),
        },
        None => group
            .pel
            .range(start..)
            .take_while(|(id, _)| **id <= end)
            .filter(|(_, n)| idle_enough(n))
            .take(count)
            .map(|(id, n)| (*id, n))
            .collect(),
    };
    r.array(rows.len());
    for (id, nack) in rows {
        r.array(4);
        r.bulk(&id.format());
        r.bulk(&nack.consumer);
        r.int((now - nack.delivery_ms).max(0));
        r.int(nack.delivery_count as i64);
    }
    Ok(Done)
}

/// XPENDING's summary: count, first and last IDs, and each consumer with
/// entries pending.
fn reply_pending_summary(r: &mut Reply<'_>, group: &Group) {
    r.array(4);
    r.int(group.pel.len() as i64);
    let (Some((first, _)), Some((last, _))) =
        (group.pel.first_key_value(), group.pel.last_key_value())
    else {
        r.null();
        r.null();
        r.null_array();
        return;
    };
    r.bulk(&first.format());
    r.bulk(&last.format());
    let busy: Vec<(&Arc<[u8]>, usize)> = group
        .consumers
        .iter()
        .filter(|(_, c)| !c.pel.is_empty())
        .map(|(name, c)| (name, c.pel.len()))
        .collect();
    r.array(busy.len());
    for (name, n) in busy {
        r.array(2);
        r.bulk(name);
        r.bulk_int(n as i64);
    }
}

/// True when the log records are kept (formatting them is work otherwise).
fn logging(ctx: &ExecCtx) -> bool {
    ctx.effects.record.as_ref().is_some_and(|r| r.track_log)
}

/// The record Redis propagates for a claimed (or dropped) pending entry
/// (`streamPropagateXCLAIM`).
pub(super) fn log_xclaim(
    ctx: &mut ExecCtx,
    key: &[u8],
    group: &[u8],
    id: StreamId,
    nack: &Nack,
    group_last: StreamId,
) {
    if !logging(ctx) {
        return;
    }
    let time = itoa::Buffer::new().format(nack.delivery_ms).to_owned();
    let count = itoa::Buffer::new().format(nack.delivery_count).to_owned();
    let (id, last) = (id.format(), group_last.format());
    ctx.log_as(&[
        b"XCLAIM",
        key,
        group,
        &nack.consumer,
        b"0",
        &id,
        b"TIME",
        time.as_bytes(),
        b"RETRYCOUNT",
        count.as_bytes(),
        b"FORCE",
        b"JUSTID",
        b"LASTID",
        &last,
    ]);
}

/// The record for a group whose last ID moved (`streamPropagateGroupID`).
pub(super) fn log_group_setid(ctx: &mut ExecCtx, key: &[u8], group_name: &[u8], group: &Group) {
    let read = itoa::Buffer::new().format(group.entries_read).to_owned();
    ctx.log_as(&[
        b"XGROUP",
        b"SETID",
        key,
        group_name,
        &group.last_id.format(),
        b"ENTRIESREAD",
        read.as_bytes(),
    ]);
}

/// Drop the pending entry `id` whose stream entry is gone, logging it as the
/// XCLAIM that drops it on a replica.
fn drop_deleted_pending(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    at: EntryId,
    key: &[u8],
    group: &[u8],
    id: StreamId,
) -> Result<(), CmdError> {
    let s = stream_at(e, ctx.db, at)?;
    let g = group_of(s, group);
    let (nack, last) = (g.pel[&id].clone(), g.last_id);
    log_xclaim(ctx, key, group, id, &nack, last);
    change_stream(e, ctx.db, at, |s| s.groups_mut().ack(group, id))?;
    ctx.effects.dirty += 1;
    Ok(())
}

/// Claim one entry and log it; true when claimed.
fn claim_and_log(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    at: EntryId,
    args: Args<'_>,
    id: StreamId,
    claim: &ClaimArgs,
) -> Result<bool, CmdError> {
    let (key, group, consumer) = (args.get(1), args.get(2), args.get(3));
    let now = ctx.now_ms as i64;
    let claimed = change_stream(e, ctx.db, at, |s| {
        s.groups_mut().claim(group, consumer, id, claim, now)
    })?;
    let Claimed::Yes { created } = claimed else {
        return Ok(false);
    };
    if created {
        ctx.changed(key, events::XGROUP_CREATECONSUMER, 1);
    }
    let s = stream_at(e, ctx.db, at)?;
    let g = group_of(s, group);
    let (nack, last) = (g.pel[&id].clone(), g.last_id);
    log_xclaim(ctx, key, group, id, &nack, last);
    ctx.effects.dirty += 1;
    Ok(true)
}

/// Reply with a claimed entry: its ID (JUSTID) or the entry.
fn reply_claimed(r: &mut Reply<'_>, s: &StreamValue, id: StreamId, justid: bool) {
    if justid {
        r.bulk(&id.format());
        return;
    }
    match s.range(id, id).next() {
        Some(entry) => reply_entry(r, &entry),
        None => r.null(),
    }
}

/// XCLAIM's options after the IDs.
struct XclaimOptions {
    claim: ClaimArgs,
    last_id: StreamId,
}

fn parse_xclaim_options(args: Args<'_>, from: usize, now: i64) -> Result<XclaimOptions, CmdError> {
    let mut claim = ClaimArgs {
        min_idle: 0,
        delivery_ms: -1,
        retry: None,
        force: false,
        justid: false,
    };
    let mut last_id = StreamId::MIN;
    let int_or =
        |arg: &[u8], text: &'static str| crate::args::parse_i64(arg).ok_or(CmdError::Stream(text));
    let mut j = from;
    while j < args.len() {
        let more = j + 1 < args.len();
        let opt = args.get(j);
        if opt.eq_ignore_ascii_case(b"force") {
            claim.force = true;
        } else if opt.eq_ignore_ascii_case(b"justid") {
            claim.justid = true;
        } else if opt.eq_ignore_ascii_case(b"idle") && more {
            j += 1;
            claim.delivery_ms = now - int_or(args.get(j), errors::XCLAIM_IDLE)?;
        } else if opt.eq_ignore_ascii_case(b"time") && more {
            j += 1;
            claim.delivery_ms = int_or(args.get(j), errors::XCLAIM_TIME)?;
        } else if opt.eq_ignore_ascii_case(b"retrycount") && more {
            j += 1;
            let n = int_or(args.get(j), errors::XCLAIM_RETRYCOUNT)?;
            // A negative count means "not given", as Redis's -1 sentinel does.
            claim.retry = u64::try_from(n).ok();
        } else if opt.eq_ignore_ascii_case(b"lastid") && more {
            j += 1;
            last_id = strict_id(args.get(j))?;
        } else {
            let opt = opt.split(|&b| b == 0).next().unwrap_or_default();
            return Err(CmdError::quoted(
                "ERR Unrecognized XCLAIM option '",
                opt,
                "'",
            ));
        }
        j += 1;
    }
    // A bogus time (negative, or in the future) becomes now, as Redis does.
    if claim.delivery_ms < 0 || claim.delivery_ms > now {
        claim.delivery_ms = now;
    }
    Ok(XclaimOptions { claim, last_id })
}

/// `XCLAIM key group consumer min-idle-time id [id ...] [IDLE ms] [TIME ms]
/// [RETRYCOUNT n] [FORCE] [JUSTID] [LASTID id]`.
pub(super) fn xclaim(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    let (key, group) = (args.get(1), args.get(2));
    let at = stream_with_group(e, ctx, key, group)?;
    let min_idle = crate::args::parse_i64(args.get(4))
        .ok_or(CmdError::Stream(errors::XCLAIM_MIN_IDLE))?
        .max(0);
    let ids_end = (5..args.len())
        .find(|&j| strict_id(args.get(j)).is_err())
        .unwrap_or(args.len());
    let now = ctx.now_ms as i64;
    let mut opts = parse_xclaim_options(args, ids_end, now)?;
    opts.claim.min_idle = min_idle;
    let mut propagate_last_id = change_stream(e, ctx.db, at, |s| {
        s.groups_mut().raise_last_id(group, opts.last_id)
    })?;
    let ids: Vec<StreamId> = (5..ids_end)
        .filter_map(|j| strict_id(args.get(j)).ok())
        .collect();
    let mut claimed = Vec::new();
    for id in ids {
        let s = stream_at(e, ctx.db, at)?;
        let pending = group_of(s, group).pel.contains_key(&id);
        if !s.contains(id) {
            if pending {
                drop_deleted_pending(e, ctx, at, key, group, id)?;
                propagate_last_id = false;
            }
            continue;
        }
        if claim_and_log(e, ctx, at, args, id, &opts.claim)? {
            claimed.push(id);
            propagate_last_id = false;
        }
    }
    let s = stream_at(e, ctx.db, at)?;
    if propagate_last_id {
        log_group_setid(ctx, key, group, group_of(s, group));
        ctx.effects.dirty += 1;
    }
    // Nothing else is logged: the records above replace the command.
    ctx.effects.rewritten = true;
    r.array(claimed.len());
    for id in claimed {
        reply_claimed(r, s, id, opts.claim.justid);
    }
    Ok(Done)
}

/// XAUTOCLAIM's COUNT bound (`LONG_MAX / max(sizeof(streamID), attempts factor)`).
const XAUTOCLAIM_COUNT_MAX: i64 = i64::MAX / 16;
/// Entries XAUTOCLAIM may examine per entry it may claim.
const XAUTOCLAIM_ATTEMPTS_FACTOR: i64 = 10;

/// `XAUTOCLAIM key group consumer min-idle-time start [COUNT count] [JUSTID]`:
/// `[next cursor, claimed, deleted IDs]` (Redis 7's three-part reply).
pub(super) fn xautoclaim(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    let min_idle = crate::args::parse_i64(args.get(4))
        .ok_or(CmdError::Stream(errors::XAUTOCLAIM_MIN_IDLE))?
        .max(0);
    let (start, start_ex) = interval_id(args.get(5), 0)?;
    let start = match start_ex {
        true => start
            .next()
            .ok_or(CmdError::Stream(errors::START_INVALID))?,
        false => start,
    };
    let (mut count, mut justid) = (100i64, false);
    let mut j = 6;
    while j < args.len() {
        let opt = args.get(j);
        if opt.eq_ignore_ascii_case(b"count") && j + 1 < args.len() {
            count = crate::args::parse_i64(args.get(j + 1))
                .filter(|n| (1..=XAUTOCLAIM_COUNT_MAX).contains(n))
                .ok_or(CmdError::Stream(errors::XAUTOCLAIM_COUNT))?;
            j += 1;
        } else if opt.eq_ignore_ascii_case(b"justid") {
            justid = true;
        } else {
            return Err(CmdError::Syntax);
        }
        j += 1;
    }
    let (key, group) = (args.get(1), args.get(2));
    let at = stream_with_group(e, ctx, key, group)?;
    let now = ctx.now_ms as i64;
    let claim = ClaimArgs {
        min_idle,
        delivery_ms: now,
        retry: None,
        force: false,
        justid,
    };
    let mut attempts = count.saturating_mul(XAUTOCLAIM_ATTEMPTS_FACTOR);
    let (mut claimed, mut deleted) = (Vec::new(), Vec::new());
    let mut cursor = Some(start);
    while attempts > 0 && count > 0 {
        let Some(from) = cursor else { break };
        let s = stream_at(e, ctx.db, at)?;
        let Some(id) = group_of(s, group)
            .pel
            .range(from..)
            .next()
            .map(|(id, _)| *id)
        else {
            cursor = None;
            break;
        };
        attempts -= 1;
        cursor = id.next();
        if !s.contains(id) {
            drop_deleted_pending(e, ctx, at, key, group, id)?;
            deleted.push(id);
            count -= 1;
            continue;
        }
        if claim_and_log(e, ctx, at, args, id, &claim)? {
            claimed.push(id);
            count -= 1;
        }
    }
    ctx.effects.rewritten = true;
    let s = stream_at(e, ctx.db, at)?;
    let next = cursor
        .and_then(|from| group_of(s, group).pel.range(from..).next())
        .map_or(StreamId::MIN, |(id, _)| *id);
    r.array(3);
    r.bulk(&next.format());
    r.array(claimed.len());
    for id in claimed {
        reply_claimed(r, s, id, justid);
    }
    r.array(deleted.len());
    for id in deleted {
        r.bulk(&id.format());
    }
    Ok(Done)
}
