//! XREADGROUP: read a stream as a consumer of a group (Redis 7.0's
//! `xreadCommand` with GROUP).
//!
//! `>` serves entries after the group's last-delivered ID and makes them
//! pending for the consumer (unless NOACK); any other ID serves the consumer's
//! own pending entries after it (its history), counting one more delivery each.
//! With nothing new on every stream and BLOCK, the handler returns
//! [`Outcome::Block`] like XREAD; run again when a key is written, it serves
//! what came. Redis 7.0 answers a blocked client whose group was destroyed with
//! `-NOGROUP the consumer group this client was blocked on no longer exists`,
//! and one whose key was deleted with `-UNBLOCKED the stream key no longer
//! exists`, which differ from what a fresh call says: so the parked command's
//! `>` IDs are rewritten to a marker ([`blocked_marker`], `>` and a per-process
//! random nonce no client can guess), and a run that finds the marker knows it
//! was blocked.
//!
//! Log records, as Redis 7.0 propagates them: each entry made pending is an
//! `XCLAIM ... FORCE JUSTID LASTID id`; a NOACK read that moved the group is an
//! `XGROUP SETID ... ENTRIESREAD n`, and the consumer it created an
//! `XGROUP CREATECONSUMER` (no XCLAIM creates it on the replica). History reads
//! log nothing. The command itself is never logged.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::OnceLock;

use ruvio_resp::{Args, Protocol, Reply};

use super::group_commands::{error_with, log_group_setid, log_xclaim};
use super::groups::ENTRIES_READ_UNKNOWN;
use super::id::{strict_id, StreamId};
use super::read::parse_read;
use super::{change_stream, errors, events, reply_entry, stream_at, StreamValue};
use crate::command::{Block, CmdResult, ExecCtx, Outcome};
use crate::error::CmdError;
use crate::keyspace::EntryId;
use crate::Engine;

/// What one stream's ID argument asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Want {
    /// `>` (or the parked command's marker for it): entries never delivered
    /// to the group.
    New,
    /// The consumer's pending entries after this ID.
    History(StreamId),
}

/// The ID argument a parked XREADGROUP has instead of `>`: `>` and 16 hex
/// digits drawn once per process (std's randomly keyed hasher is the source).
fn blocked_marker() -> &'static [u8] {
    static MARKER: OnceLock<Vec<u8>> = OnceLock::new();
    MARKER.get_or_init(|| {
        let nonce = RandomState::new().build_hasher().finish();
        format!(">{nonce:016x}").into_bytes()
    })
}

/// The entries-read counter after the group reads entry `id`
/// (`streamReplyWithRange`'s group update).
fn entries_read_after(s: &StreamValue, read: i64, id: StreamId) -> i64 {
    if read != ENTRIES_READ_UNKNOWN && !s.has_tombstones_from(id) {
        read + 1
    } else if s.entries_added() > 0 {
        s.entries_read_at(id)
    } else {
        read
    }
}

/// `XREADGROUP GROUP group consumer [COUNT count] [BLOCK ms] [NOACK] STREAMS key
/// [key ...] id [id ...]`.
pub(super) fn xreadgroup(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    let p = parse_read(args, ctx.now_ms, true)?;
    let Some(group_at) = p.group_at else {
        return Err(CmdError::Stream(errors::XREADGROUP_NO_GROUP));
    };
    let (group, consumer) = (args.get(group_at), args.get(group_at + 1));
    let ids_at = p.keys_at + p.streams;
    let mut wants = Vec::with_capacity(p.streams);
    let mut entries = Vec::with_capacity(p.streams);
    for n in 0..p.streams {
        let key = args.get(p.keys_at + n);
        let was_blocked = args.get(ids_at + n) == blocked_marker();
        let no_group = || {
            error_with(&[
                b"NOGROUP No such key '",
                key,
                b"' or consumer group '",
                group,
                b"' in XREADGROUP with GROUP option",
            ])
        };
        let gone = CmdError::Stream(errors::BLOCKED_KEY_GONE);
        let at = match e.lookup_read(ctx, key) {
            Some(at) => at,
            None if was_blocked => return Err(gone),
            None => return Err(no_group()),
        };
        let s = match e.db(ctx.db).entry(at).value().as_stream() {
            Some(s) => s,
            None if was_blocked => return Err(gone),
            None => return Err(CmdError::WrongType),
        };
        if s.groups().get(group).is_none() {
            return Err(match was_blocked {
                true => CmdError::Stream(errors::BLOCKED_NOGROUP),
                false => no_group(),
            });
        }
        entries.push(at);
        wants.push(match args.get(ids_at + n) {
            b"$" => return Err(CmdError::Stream(errors::XREADGROUP_DOLLAR)),
            b"+" => return Err(CmdError::Stream(errors::XREADGROUP_PLUS)),
            b">" => Want::New,
            _ if was_blocked => Want::New,
            // Redis marks `>` as the greatest ID, so that ID given literally is `>`.
            arg => match strict_id(arg)? {
                StreamId::MAX => Want::New,
                id => Want::History(id),
            },
        });
    }
    // Redis counts each served stream as a change and logs only the records
    // below, never the command.
    ctx.effects.rewritten = true;
    // Each stream is checked when its turn comes (the same stream named twice
    // sees what the first read delivered), into a buffer: the reply's length is
    // known at the end, as Redis's deferred length.
    let mut body = Vec::new();
    let mut served = 0;
    for n in 0..p.streams {
        let (key, at) = (args.get(p.keys_at + n), entries[n]);
        let s = stream_at(e, ctx.db, at)?;
        let after = match wants[n] {
            Want::History(id) => id,
            Want::New => {
                let last = s.groups().get(group).map_or(StreamId::MIN, |g| g.last_id);
                match s.last_entry_id() {
                    Some(top) if top > last => last,
                    _ => continue,
                }
            }
        };
        served += 1;
        let now = ctx.now_ms as i64;
        let created = change_stream(e, ctx.db, at, |s| {
            s.groups_mut().ensure_consumer(group, consumer, now)
        })?;
        if created {
            ctx.changed(key, events::XGROUP_CREATECONSUMER, 1);
            if p.noack {
                ctx.log_as(&[b"XGROUP", b"CREATECONSUMER", key, group, consumer]);
            }
        }
        let mut out = Reply::new(&mut body, r.proto);
        if r.proto == Protocol::Resp2 {
            out.array(2);
        }
        out.bulk(key);
        // `streamIncrID` of the greatest ID wraps to 0-0.
        let start = after.next().unwrap_or(StreamId::MIN);
        let read = Read {
            key,
            group,
            consumer,
            count: p.count,
            noack: p.noack,
        };
        match wants[n] {
            Want::History(_) => serve_history(e, ctx, at, &read, start, &mut out)?,
            Want::New => serve_new(e, ctx, at, &read, start, &mut out)?,
        }
        ctx.effects.dirty += 1;
    }
    if served == 0 {
        let Some(deadline_ms) = p.deadline else {
            r.null_array();
            return Ok(Outcome::Done);
        };
        let rewrite = (0..p.streams)
            .filter(|&n| args.get(ids_at + n) == b">")
            .map(|n| (ids_at + n, blocked_marker().to_vec()))
            .collect();
        return Ok(Outcome::Block(Block {
            keys: (p.keys_at..ids_at).collect(),
            deadline_ms,
            rewrite,
        }));
    }
    match r.proto {
        Protocol::Resp3 => r.map(served),
        Protocol::Resp2 => r.array(served),
    }
    r.out.extend_from_slice(&body);
    Ok(Outcome::Done)
}

/// One stream's read, as asked.
struct Read<'a> {
    key: &'a [u8],
    group: &'a [u8],
    consumer: &'a [u8],
    count: usize,
    noack: bool,
}

/// Entries after `start - 1` never delivered to the group: delivered now, made
/// pending unless NOACK, the group's last ID and entries-read moved.
fn serve_new(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    at: EntryId,
    read: &Read<'_>,
    start: StreamId,
    r: &mut Reply<'_>,
) -> Result<(), CmdError> {
    let s = stream_at(e, ctx.db, at)?;
    let ids: Vec<StreamId> = s
        .range(start, StreamId::MAX)
        .take(read.count)
        .map(|entry| entry.id)
        .collect();
    r.array(ids.len());
    s.range(start, StreamId::MAX)
        .take(read.count)
        .for_each(|entry| reply_entry(r, &entry));
    let now = ctx.now_ms as i64;
    // One change for the whole read; the pending entries made are logged after.
    let delivered = change_stream(e, ctx.db, at, |s| {
        let mut delivered = Vec::new();
        for &id in &ids {
            let g = s.groups().get(read.group).expect("group checked");
            let (last, entries_read) = (g.last_id, g.entries_read);
            if id > last {
                let entries_read = entries_read_after(s, entries_read, id);
                s.groups_mut().set_last(read.group, id, entries_read);
            }
            if !read.noack {
                s.groups_mut().deliver(read.group, read.consumer, id, now);
                let g = s.groups().get(read.group).expect("group checked");
                delivered.push((id, g.pel[&id].clone(), g.last_id));
            }
        }
        delivered
    })?;
    for (id, nack, last) in &delivered {
        log_xclaim(ctx, read.key, read.group, *id, nack, *last);
    }
    if read.noack && !ids.is_empty() {
        let s = stream_at(e, ctx.db, at)?;
        let g = s.groups().get(read.group).expect("group checked");
        log_group_setid(ctx, read.key, read.group, g);
    }
    Ok(())
}

/// The consumer's pending entries from `start`: each served again (one more
/// delivery, now); an entry deleted from the stream is `[id, nil]`.
fn serve_history(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    at: EntryId,
    read: &Read<'_>,
    start: StreamId,
    r: &mut Reply<'_>,
) -> Result<(), CmdError> {
    let s = stream_at(e, ctx.db, at)?;
    let g = s.groups().get(read.group).expect("group checked");
    let ids: Vec<StreamId> = g
        .consumer(read.consumer)
        .map(|c| c.pel.range(start..).take(read.count).copied().collect())
        .unwrap_or_default();
    r.array(ids.len());
    let mut live = Vec::with_capacity(ids.len());
    for &id in &ids {
        match s.range(id, id).next() {
            Some(entry) => {
                reply_entry(r, &entry);
                live.push(id);
            }
            None => {
                r.array(2);
                r.bulk(&id.format());
                r.null_array();
            }
        }
    }
    let now = ctx.now_ms as i64;
    change_stream(e, ctx.db, at, |s| {
        for id in live {
            s.groups_mut().redeliver(read.group, id, now);
        }
    })?;
    Ok(())
}
