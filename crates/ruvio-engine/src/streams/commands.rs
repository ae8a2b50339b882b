//! XADD, XLEN, XRANGE, XREVRANGE, XDEL, XTRIM, XSETID: each parses all its
//! arguments in Redis's order (so the first error is Redis's), then looks the key
//! up, then changes the stream.

use ruvio_resp::{Args, Reply};

use super::deletion::RefPolicy;
use super::id::{interval_id, parse_id, strict_id, ParsedId, StreamId};
use super::value::{NodeLimits, TrimTo};
use super::{change_stream, errors, events, reply_entries, stream_at, StreamValue};
use crate::command::{CmdResult, ExecCtx, Outcome::Done};
use crate::error::CmdError;
use crate::keyspace::Collection;
use crate::Engine;

/// Nodes' worth of entries an approximate trim without LIMIT may drop (Redis's
/// `100 * stream_node_max_entries`), so one XADD never frees a whole huge stream.
const APPROX_LIMIT_NODES: u64 = 100;
/// The approximate trim's entry budget when `stream-node-max-entries` is 0 (no
/// limit), as Redis falls back to.
const APPROX_LIMIT_UNBOUNDED_NODES: u64 = 10_000;
/// The most an approximate trim without LIMIT may drop, whatever the node size
/// (Redis's cap, which also keeps the product from overflowing).
const APPROX_LIMIT_MAX: u64 = 1_000_000;

/// The default LIMIT of an approximate trim under `stream-node-max-entries`.
fn approx_limit_default(node_entries_max: usize) -> u64 {
    match (node_entries_max as u64).saturating_mul(APPROX_LIMIT_NODES) {
        0 => APPROX_LIMIT_UNBOUNDED_NODES,
        n => n.min(APPROX_LIMIT_MAX),
    }
}

/// Where the next XADD closes a node: the configuration's node limits.
fn node_limits(e: &Engine) -> NodeLimits {
    let config = e.config();
    NodeLimits {
        entries_max: config.stream_node_max_entries,
        bytes_max: config.stream_node_max_bytes,
    }
}

fn stream_err(text: &'static str) -> CmdError {
    CmdError::Stream(text)
}

/// The trimming part of XADD and XTRIM, and XADD's other options
/// (`streamParseAddOrTrimArgsOrReply`).
#[derive(Debug, Default)]
struct AddTrimArgs {
    /// The bound, and the index of its argument.
    trim: Option<(TrimTo, usize)>,
    approx: bool,
    limit: u64,
    nomkstream: bool,
    /// Redis 8.2's KEEPREF (default) / DELREF / ACKED: whether trimmed entries
    /// leave the consumer groups' PELs too, or stay while a group needs them.
    refs: RefPolicy,
    /// XADD: the ID argument's index and what it said (`None` for `*`).
    id_at: usize,
    id: Option<ParsedId>,
}

/// XADD's and XTRIM's KEEPREF / DELREF / ACKED (Redis 8.2).
fn trim_ref_policy(opt: &[u8]) -> Option<RefPolicy> {
    match opt.to_ascii_uppercase().as_slice() {
        b"KEEPREF" => Some(RefPolicy::KeepRef),
        b"DELREF" => Some(RefPolicy::DelRef),
        b"ACKED" => Some(RefPolicy::Acked),
        _ => None,
    }
}

/// Trim `s` as `p` says; with DELREF the dropped entries leave every PEL,
/// with ACKED only entries no group needs are dropped.
fn trim_as_asked(s: &mut StreamValue, to: TrimTo, p: &AddTrimArgs) -> u64 {
    match p.refs {
        RefPolicy::KeepRef => return s.trim(to, p.approx, p.limit),
        RefPolicy::Acked => return s.trim_acked(to, p.approx, p.limit),
        RefPolicy::DelRef => {}
    }
    let mut dropped = Vec::new();
    let n = s.trim_noting(to, p.approx, p.limit, Some(&mut dropped));
    for id in dropped {
        s.groups_mut().drop_refs(id);
    }
    n
}

/// An `=` or `~` after MAXLEN/MINID, when more than the threshold follows.
fn approx_marker(args: Args<'_>, at: usize, more: usize) -> Option<bool> {
    if more < 2 {
        return None;
    }
    match args.get(at) {
        b"~" => Some(true),
        b"=" => Some(false),
        _ => None,
    }
}

fn parse_add_trim(
    args: Args<'_>,
    xadd: bool,
    node_entries_max: usize,
) -> Result<AddTrimArgs, CmdError> {
    let mut p = AddTrimArgs::default();
    let mut limit_given = false;
    let mut i = 2;
    while i < args.len() {
        let more = args.len() - 1 - i;
        let opt = args.get(i);
        if xadd && opt == b"*" {
            break;
        } else if opt.eq_ignore_ascii_case(b"maxlen") && more > 0 {
            let marker = approx_marker(args, i + 1, more);
            p.approx = marker == Some(true);
            i += usize::from(marker.is_some());
            let n = crate::args::int_arg(args.get(i + 1))?;
            let n = u64::try_from(n).map_err(|_| stream_err(errors::MAXLEN_NEGATIVE))?;
            i += 1;
            p.trim = Some((TrimTo::MaxLen(n), i));
        } else if opt.eq_ignore_ascii_case(b"minid") && more > 0 {
            let marker = approx_marker(args, i + 1, more);
            p.approx = marker == Some(true);
            i += usize::from(marker.is_some());
            let id = strict_id(args.get(i + 1))?;
            i += 1;
            p.trim = Some((TrimTo::MinId(id), i));
        } else if opt.eq_ignore_ascii_case(b"limit") && more > 0 {
            let n = crate::args::int_arg(args.get(i + 1))?;
            p.limit = u64::try_from(n).map_err(|_| stream_err(errors::LIMIT_NEGATIVE))?;
            limit_given = true;
            i += 1;
        } else if xadd && opt.eq_ignore_ascii_case(b"nomkstream") {
            p.nomkstream = true;
        } else if let Some(refs) = trim_ref_policy(opt) {
            p.refs = refs;
        } else if xadd {
            p.id = Some(parse_id(opt, 0, true, true)?);
            break;
        } else {
            return Err(CmdError::Syntax);
        }
        i += 1;
    }
    p.id_at = i;
    if limit_given && p.trim.is_none() {
        return Err(stream_err(errors::LIMIT_WITHOUT_STRATEGY));
    }
    if limit_given && !p.approx {
        return Err(stream_err(errors::LIMIT_WITHOUT_APPROX));
    }
    if !limit_given {
        p.limit = match p.approx {
            true => approx_limit_default(node_entries_max),
            false => 0,
        };
    }
    Ok(p)
}

/// The ID XADD gives the new entry after `last` (`streamAppendItem`'s rules):
/// `*` is now (or after `last`), `ms-*` the next sequence in `ms`.
fn new_entry_id(
    last: StreamId,
    asked: Option<ParsedId>,
    now_ms: u64,
) -> Result<StreamId, CmdError> {
    let too_small = stream_err(errors::ID_TOO_SMALL);
    let id = match asked {
        None if now_ms > last.ms => StreamId::new(now_ms, 0),
        None => last.next().ok_or(stream_err(errors::IDS_EXHAUSTED))?,
        Some(ParsedId {
            id,
            seq_given: false,
        }) => match id.ms.cmp(&last.ms) {
            std::cmp::Ordering::Greater => StreamId::new(id.ms, 0),
            std::cmp::Ordering::Equal if last.seq < u64::MAX => StreamId::new(id.ms, last.seq + 1),
            _ => return Err(too_small),
        },
        Some(ParsedId { id, .. }) => id,
    };
    if id <= last {
        return Err(too_small);
    }
    Ok(id)
}

/// The record a trimming XADD or XTRIM is logged as: `~` becomes `=` and the
/// threshold what the trim left (`streamRewriteApproxSpecifier`,
/// `streamRewriteTrimArgument`), so a replica trims exactly as much.
fn rewrite_trim(argv: &mut [Vec<u8>], p: &AddTrimArgs, s: &StreamValue) {
    let Some((to, at)) = p.trim else { return };
    if !p.approx {
        return;
    }
    argv[at - 1] = b"=".to_vec();
    argv[at] = match to {
        TrimTo::MaxLen(_) => itoa::Buffer::new().format(s.len()).as_bytes().to_vec(),
        TrimTo::MinId(_) => s.first_id().unwrap_or(s.last_id()).format(),
    };
}

/// `XADD key [NOMKSTREAM] [KEEPREF|DELREF|ACKED] [MAXLEN|MINID [=|~] threshold [LIMIT
/// count]] *|id field value [field value ...]`.
pub(super) fn xadd(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    let p = parse_add_trim(args, true, e.config().stream_node_max_entries)?;
    let fields_at = p.id_at + 1;
    if fields_at > args.len()
        || args.len() - fields_at < 2
        || !(args.len() - fields_at).is_multiple_of(2)
    {
        return Err(CmdError::WrongArity("xadd"));
    }
    if let Some(ParsedId {
        id: StreamId::MIN,
        seq_given: true,
    }) = p.id
    {
        return Err(stream_err(errors::ID_ZERO));
    }
    let key = args.get(1);
    let found = e.lookup_write(ctx, key);
    let last = match found {
        Some(id) => stream_at(e, ctx.db, id)?.last_id(),
        None if p.nomkstream => {
            r.null();
            return Ok(Done);
        }
        None => StreamId::MIN,
    };
    if last == StreamId::MAX {
        return Err(stream_err(errors::IDS_EXHAUSTED));
    }
    let id = new_entry_id(last, p.id, ctx.now_ms)?;
    let fields: Vec<&[u8]> = (fields_at..args.len()).map(|i| args.get(i)).collect();
    let limits = node_limits(e);
    let trim = |s: &mut StreamValue| {
        s.append(id, &fields, limits);
        p.trim.map_or(0, |(to, _)| trim_as_asked(s, to, &p))
    };
    let (trimmed, log) = match found {
        Some(at) => {
            let trimmed = change_stream(e, ctx.db, at, trim)?;
            let mut argv: Vec<Vec<u8>> = args.iter().map(<[u8]>::to_vec).collect();
            rewrite_trim(&mut argv, &p, stream_at(e, ctx.db, at)?);
            (trimmed, argv)
        }
        None => {
            let mut s = StreamValue::new();
            let trimmed = trim(&mut s);
            let mut argv: Vec<Vec<u8>> = args.iter().map(<[u8]>::to_vec).collect();
            rewrite_trim(&mut argv, &p, &s);
            e.add_collection(ctx, key, Collection::Stream(s));
            (trimmed, argv)
        }
    };
    let formatted = id.format();
    r.bulk(&formatted);
    ctx.changed(key, events::XADD, 1);
    if trimmed > 0 {
        ctx.changed(key, events::XTRIM, 0);
    }
    let id_rewritten = !matches!(
        p.id,
        Some(ParsedId {
            seq_given: true,
            ..
        })
    );
    if id_rewritten || (p.approx && p.trim.is_some()) {
        let mut argv = log;
        argv[p.id_at] = formatted;
        let refs: Vec<&[u8]> = argv.iter().map(Vec::as_slice).collect();
        ctx.log_as(&refs);
    }
    Ok(Done)
}

/// `XLEN key`.
pub(super) fn xlen(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    let len = match e.lookup_read(ctx, args.get(1)) {
        Some(id) => stream_at(e, ctx.db, id)?.len(),
        None => 0,
    };
    r.int(len as i64);
    Ok(Done)
}

/// `XRANGE key start end [COUNT count]`.
pub(super) fn xrange(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    range_generic(e, ctx, args, r, false)
}

/// `XREVRANGE key end start [COUNT count]`.
pub(super) fn xrevrange(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    range_generic(e, ctx, args, r, true)
}

/// `xrangeGenericCommand`.
fn range_generic(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
    rev: bool,
) -> CmdResult {
    let (start_arg, end_arg) = match rev {
        false => (args.get(2), args.get(3)),
        true => (args.get(3), args.get(2)),
    };
    let (start, start_ex) = interval_id(start_arg, 0)?;
    let start = match start_ex {
        true => start.next().ok_or(stream_err(errors::START_INVALID))?,
        false => start,
    };
    let (end, end_ex) = interval_id(end_arg, u64::MAX)?;
    let end = match end_ex {
        true => end.prev().ok_or(stream_err(errors::END_INVALID))?,
        false => end,
    };
    let mut count: Option<usize> = None;
    let mut j = 4;
    while j < args.len() {
        if args.get(j).eq_ignore_ascii_case(b"count") && j + 1 < args.len() {
            let n = crate::args::int_arg(args.get(j + 1))?;
            count = Some(usize::try_from(n).unwrap_or(0));
            j += 2;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    let Some(id) = e.lookup_read(ctx, args.get(1)) else {
        r.array(0);
        return Ok(Done);
    };
    let s = stream_at(e, ctx.db, id)?;
    let take = match count {
        Some(0) => {
            r.null_array();
            return Ok(Done);
        }
        Some(n) => n,
        None => usize::MAX,
    };
    if rev {
        reply_entries(r, || s.range_rev(start, end).take(take));
    } else {
        reply_entries(r, || s.range(start, end).take(take));
    }
    Ok(Done)
}

/// `XDEL key id [id ...]`: the key first (a missing one answers 0 whatever the
/// IDs), then every ID is checked before any is deleted.
pub(super) fn xdel(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    let key = args.get(1);
    let Some(at) = e.lookup_write(ctx, key) else {
        r.int(0);
        return Ok(Done);
    };
    stream_at(e, ctx.db, at)?;
    let ids = (2..args.len())
        .map(|i| strict_id(args.get(i)))
        .collect::<Result<Vec<_>, _>>()?;
    let deleted = change_stream(e, ctx.db, at, |s| {
        ids.iter().filter(|&&id| s.delete(id)).count()
    })?;
    r.int(deleted as i64);
    if deleted > 0 {
        ctx.changed(key, events::XDEL, deleted as u64);
    }
    Ok(Done)
}

/// `XTRIM key MAXLEN|MINID [=|~] threshold [LIMIT count] [KEEPREF|DELREF|ACKED]`.
pub(super) fn xtrim(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    let p = parse_add_trim(args, false, e.config().stream_node_max_entries)?;
    let key = args.get(1);
    let Some(at) = e.lookup_write(ctx, key) else {
        r.int(0);
        return Ok(Done);
    };
    stream_at(e, ctx.db, at)?;
    // Parsing without a strategy failed above: XTRIM's options are all trimming.
    let Some((to, _)) = p.trim else {
        return Err(CmdError::Syntax);
    };
    let trimmed = change_stream(e, ctx.db, at, |s| trim_as_asked(s, to, &p))?;
    r.int(trimmed as i64);
    if trimmed > 0 {
        ctx.changed(key, events::XTRIM, trimmed);
        if p.approx {
            let mut argv: Vec<Vec<u8>> = args.iter().map(<[u8]>::to_vec).collect();
            rewrite_trim(&mut argv, &p, stream_at(e, ctx.db, at)?);
            let refs: Vec<&[u8]> = argv.iter().map(Vec::as_slice).collect();
            ctx.log_as(&refs);
        }
    }
    Ok(Done)
}

/// `XSETID key last-id [ENTRIESADDED n] [MAXDELETEDID id]` (Redis 7.4's checks).
pub(super) fn xsetid(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    let id = strict_id(args.get(2))?;
    let (mut added, mut max_deleted) = (None, None);
    let mut i = 3;
    while i < args.len() {
        let more = i + 1 < args.len();
        let opt = args.get(i);
        if opt.eq_ignore_ascii_case(b"entriesadded") && more {
            let n = crate::args::int_arg(args.get(i + 1))?;
            added = Some(u64::try_from(n).map_err(|_| stream_err(errors::XSETID_ADDED_NEGATIVE))?);
        } else if opt.eq_ignore_ascii_case(b"maxdeletedid") && more {
            let m = strict_id(args.get(i + 1))?;
            if id < m {
                return Err(stream_err(errors::XSETID_BELOW_DELETED));
            }
            max_deleted = Some(m);
        } else {
            return Err(CmdError::Syntax);
        }
        i += 2;
    }
    let key = args.get(1);
    let at = e.lookup_write(ctx, key).ok_or(CmdError::NoSuchKey)?;
    let s = stream_at(e, ctx.db, at)?;
    // Redis 7.4 (7.0 lets it pass): a last ID below a deleted entry's would let
    // XADD bring that ID back.
    if id < s.max_deleted_id() {
        return Err(stream_err(errors::XSETID_BELOW_MAX_DELETED));
    }
    if !s.is_empty() {
        let top = s.last_entry_id().unwrap_or(StreamId::MIN);
        if id < top {
            return Err(stream_err(errors::XSETID_SMALLER));
        }
        if added.is_some_and(|n| s.len() > n) {
            return Err(stream_err(errors::XSETID_ADDED_TOO_SMALL));
        }
    }
    let max_deleted = max_deleted.filter(|&m| m != StreamId::MIN);
    change_stream(e, ctx.db, at, |s| s.set_last_id(id, added, max_deleted))?;
    r.ok();
    ctx.changed(key, events::XSETID, 1);
    Ok(Done)
}
