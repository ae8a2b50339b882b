//! XREAD: entries after given IDs from one or more streams, or block for them.
//!
//! Blocking follows the engine's contract (as BLPOP): with nothing to serve the
//! handler returns [`Outcome::Block`] on all its keys, and the server runs it
//! again when one of them is written. `$` means "after the last entry now", so a
//! blocking XREAD asks the server to park it with each `$` replaced by that
//! stream's last ID (`Block::rewrite`): run again, it serves what came since.
//! `+` (Redis 7.4) is the stream's last entry, served alone.

use ruvio_resp::{Args, Reply};

use super::id::{strict_id, StreamId};
use super::{errors, reply_entries, stream_at, StreamValue};
use crate::command::{Block, CmdResult, ExecCtx, Outcome};
use crate::error::CmdError;
use crate::Engine;

/// The parsed options of XREAD and XREADGROUP.
pub(super) struct ReadArgs {
    pub count: usize,
    pub deadline: Option<Option<u64>>,
    /// Index of the first key.
    pub keys_at: usize,
    pub streams: usize,
    /// XREADGROUP's `GROUP group consumer`: the index of the group's name.
    pub group_at: Option<usize>,
    pub noack: bool,
}

/// XREAD's and XREADGROUP's options (`xreadCommand`'s parsing loop): `group`
/// says which command this is.
pub(super) fn parse_read(args: Args<'_>, now_ms: u64, group: bool) -> Result<ReadArgs, CmdError> {
    let (mut count, mut deadline) = (usize::MAX, None);
    let (mut group_at, mut noack) = (None, false);
    let mut i = 1;
    while i < args.len() {
        let more = args.len() - i - 1;
        let opt = args.get(i);
        if opt.eq_ignore_ascii_case(b"group") && more >= 2 {
            if !group {
                return Err(CmdError::Stream(errors::XREAD_GROUP_OPTION));
            }
            group_at = Some(i + 1);
            i += 2;
        } else if opt.eq_ignore_ascii_case(b"noack") {
            if !group {
                return Err(CmdError::Stream(errors::XREAD_NOACK_OPTION));
            }
            noack = true;
        } else if opt.eq_ignore_ascii_case(b"block") && more > 0 {
            i += 1;
            deadline = Some(block_deadline(args.get(i), now_ms)?);
        } else if opt.eq_ignore_ascii_case(b"count") && more > 0 {
            i += 1;
            let n = crate::args::int_arg(args.get(i))?;
            // COUNT 0 (or less) is no limit for XREAD.
            count = usize::try_from(n)
                .ok()
                .filter(|&n| n > 0)
                .unwrap_or(usize::MAX);
        } else if opt.eq_ignore_ascii_case(b"streams") && more > 0 {
            if !more.is_multiple_of(2) {
                return Err(CmdError::Stream(errors::XREAD_UNBALANCED));
            }
            return Ok(ReadArgs {
                count,
                deadline,
                keys_at: i + 1,
                streams: more / 2,
                group_at,
                noack,
            });
        } else {
            return Err(CmdError::Syntax);
        }
        i += 1;
    }
    Err(CmdError::Syntax)
}

/// `BLOCK ms`: an integer of milliseconds (`getTimeoutFromObjectOrReply` with
/// `UNIT_MILLISECONDS`); 0 waits forever (`None`).
pub(super) fn block_deadline(arg: &[u8], now_ms: u64) -> Result<Option<u64>, CmdError> {
    let ms = crate::args::parse_i64(arg).ok_or(CmdError::TimeoutNotInteger)?;
    match ms {
        ..=-1 => Err(CmdError::TimeoutNegative),
        0 => Ok(None),
        ms => Ok(Some(now_ms.saturating_add(ms as u64))),
    }
}

/// `XREAD [COUNT count] [BLOCK ms] STREAMS key [key ...] id [id ...]`.
pub(super) fn xread(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    let p = parse_read(args, ctx.now_ms, false)?;
    let ids_at = p.keys_at + p.streams;
    let mut after = Vec::with_capacity(p.streams);
    for n in 0..p.streams {
        let found = e.lookup_read(ctx, args.get(p.keys_at + n));
        let last = match found {
            Some(id) => Some(stream_at(e, ctx.db, id)?.last_id()),
            None => None,
        };
        let arg = args.get(ids_at + n);
        after.push(match arg {
            b"$" => last.unwrap_or(StreamId::MIN),
            // Redis 7.4: the last entry. Reading after the ID just below the last
            // live entry serves that entry alone, whatever COUNT says; an empty
            // or missing stream waits as for `0-0`, and a woken client reads `+`
            // afresh (it is not rewritten).
            b"+" => match found {
                Some(id) => stream_at(e, ctx.db, id)?
                    .last_entry_id()
                    .and_then(StreamId::prev)
                    .unwrap_or(StreamId::MIN),
                None => StreamId::MIN,
            },
            b">" => return Err(CmdError::Stream(errors::XREAD_GT)),
            _ => strict_id(arg)?,
        });
    }
    let ready: Vec<usize> = (0..p.streams)
        .filter(|&n| {
            e.lookup_read(ctx, args.get(p.keys_at + n))
                .and_then(|id| e.db(ctx.db).entry(id).value().as_stream())
                .and_then(StreamValue::last_entry_id)
                .is_some_and(|last| last > after[n])
        })
        .collect();
    if ready.is_empty() {
        let Some(deadline_ms) = p.deadline else {
            r.null_array();
            return Ok(Outcome::Done);
        };
        let rewrite = (0..p.streams)
            .filter(|&n| args.get(ids_at + n) == b"$")
            .map(|n| (ids_at + n, after[n].format()))
            .collect();
        return Ok(Outcome::Block(Block {
            keys: (p.keys_at..ids_at).collect(),
            deadline_ms,
            rewrite,
        }));
    }
    match r.proto {
        ruvio_resp::Protocol::Resp3 => r.map(ready.len()),
        ruvio_resp::Protocol::Resp2 => r.array(ready.len()),
    }
    for n in ready {
        let key = args.get(p.keys_at + n);
        let Some(id) = e.lookup_read(ctx, key) else {
            continue;
        };
        let s = stream_at(e, ctx.db, id)?;
        if r.proto == ruvio_resp::Protocol::Resp2 {
            r.array(2);
        }
        r.bulk(key);
        // `after[n]` is below the last ID here, so it has a successor.
        let start = after[n].next().unwrap_or(StreamId::MAX);
        reply_entries(r, || s.range(start, StreamId::MAX).take(p.count));
    }
    Ok(Outcome::Done)
}
