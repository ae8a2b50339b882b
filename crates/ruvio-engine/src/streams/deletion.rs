//! XDELEX and XACKDEL (Redis 8.2): deleting entries with a say over the
//! consumer groups' references to them.
//!
//! Why: XDEL leaves a deleted entry in every PEL that holds it (a later
//! XCLAIM or XAUTOCLAIM finds it gone), and a queue with one group wants to
//! acknowledge and delete in one step. Both commands take a reference policy:
//!
//! - `KEEPREF` (default): delete the entry, leave the PELs as they are;
//! - `DELREF`: delete it and drop it from every group's PEL;
//! - `ACKED`: delete it only when no group needs it any more: none has it
//!   pending and every group has had it delivered (its last ID is at or past
//!   it); otherwise keep it and answer 2.
//!
//! XADD and XTRIM take KEEPREF / DELREF for the entries they trim (see
//! `commands`). Each ID gets its own code in the reply, in the order given:
//! XDELEX `1` deleted, `-1` no such entry, `2` kept (ACKED); XACKDEL `1`
//! acknowledged and deleted (or already gone), `2` acknowledged but kept, `-1`
//! not pending in the group. A missing key (or group, for XACKDEL) answers -1
//! for every ID.

use ruvio_resp::{Args, Reply};

use super::id::{strict_id, StreamId};
use super::{change_stream, events, stream_at, StreamValue};
use crate::command::{CmdResult, ExecCtx, Outcome::Done};
use crate::error::CmdError;
use crate::Engine;

const NUMIDS_NOT_POSITIVE: &str = "ERR Number of IDs must be a positive integer";
const NUMIDS_MISMATCH: &str = "ERR The `numids` parameter must match the number of arguments";
const IDS_REQUIRED: &str = "ERR IDS option is required";

/// What deleting an entry does to the consumer groups' references to it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) enum RefPolicy {
    /// Leave every PEL as it is.
    #[default]
    KeepRef,
    /// Drop the entry from every PEL.
    DelRef,
    /// Delete only what no group needs.
    Acked,
}

/// The codes of the replies, one per ID.
const NO_SUCH_ID: i64 = -1;
const DELETED: i64 = 1;
const STILL_REFERENCED: i64 = 2;

/// `[KEEPREF|DELREF|ACKED] IDS numids id [id ...]` from argument `from`: the
/// policy and where the IDs are and how many (`streamParseAckDelArgsOrReply`:
/// one policy at most, and options may follow the IDs).
fn parse_policy_and_ids(
    args: Args<'_>,
    from: usize,
) -> Result<(RefPolicy, usize, usize), CmdError> {
    let (mut policy, mut ids) = (None, None);
    let mut i = from;
    while i < args.len() {
        let opt = args.get(i).to_ascii_uppercase();
        let named = match opt.as_slice() {
            b"KEEPREF" => Some(RefPolicy::KeepRef),
            b"DELREF" => Some(RefPolicy::DelRef),
            b"ACKED" => Some(RefPolicy::Acked),
            _ => None,
        };
        if let (Some(named), None) = (named, policy) {
            policy = Some(named);
            i += 1;
        } else if opt == b"IDS" && i + 1 < args.len() {
            let n = crate::args::parse_i64(args.get(i + 1))
                .filter(|&n| n >= 1)
                .ok_or(CmdError::Stream(NUMIDS_NOT_POSITIVE))?;
            let room = args.len() - i - 2;
            if n as u64 > room as u64 {
                return Err(CmdError::Stream(NUMIDS_MISMATCH));
            }
            ids = Some((i + 2, n as usize));
            i += 2 + n as usize;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    let (at, count) = ids.ok_or(CmdError::Stream(IDS_REQUIRED))?;
    Ok((policy.unwrap_or_default(), at, count))
}

/// The IDs, every one checked before anything changes.
fn parse_ids(args: Args<'_>, at: usize, count: usize) -> Result<Vec<StreamId>, CmdError> {
    (at..at + count).map(|i| strict_id(args.get(i))).collect()
}

fn reply_codes(r: &mut Reply<'_>, codes: &[i64]) {
    r.array(codes.len());
    codes.iter().for_each(|&c| r.int(c));
}

/// Delete entry `id` from `s` under `policy` (the part XDELEX and XACKDEL
/// share): `Some(true)` deleted, `Some(false)` no such entry, `None` kept
/// because a group still needs it.
fn delete_under(s: &mut StreamValue, id: StreamId, policy: RefPolicy) -> Option<bool> {
    match policy {
        RefPolicy::Acked if s.groups().is_referenced(id) => return None,
        RefPolicy::DelRef => {
            s.groups_mut().drop_refs(id);
        }
        _ => {}
    }
    Some(s.delete(id))
}

/// `XDELEX key [KEEPREF|DELREF|ACKED] IDS numids id [id ...]`.
pub(super) fn xdelex(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    let key = args.get(1);
    let found = e.lookup_write(ctx, key);
    if let Some(at) = found {
        stream_at(e, ctx.db, at)?;
    }
    let (policy, ids_at, count) = parse_policy_and_ids(args, 2)?;
    let Some(at) = found else {
        reply_codes(r, &vec![NO_SUCH_ID; count]);
        return Ok(Done);
    };
    let ids = parse_ids(args, ids_at, count)?;
    let (codes, deleted, refs_dropped) = change_stream(e, ctx.db, at, |s| {
        let pending_before = pending_total(s);
        let codes: Vec<i64> = ids
            .iter()
            .map(|&id| match delete_under(s, id, policy) {
                Some(true) => DELETED,
                Some(false) => NO_SUCH_ID,
                None => STILL_REFERENCED,
            })
            .collect();
        let deleted = codes.iter().filter(|&&c| c == DELETED).count() as u64;
        (codes, deleted, pending_before - pending_total(s))
    })?;
    reply_codes(r, &codes);
    if deleted > 0 {
        ctx.changed(key, events::XDEL, deleted + refs_dropped as u64);
    } else if refs_dropped > 0 {
        // Only PEL references went: a change, but no `xdel` event.
        ctx.changed_silently(key, refs_dropped as u64);
    }
    Ok(Done)
}

/// `XACKDEL key group [KEEPREF|DELREF|ACKED] IDS numids id [id ...]`:
/// acknowledge each ID in `group`, then delete it under the policy.
pub(super) fn xackdel(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    let (key, group) = (args.get(1), args.get(2));
    let found = e.lookup_write(ctx, key);
    let has_group = match found {
        Some(at) => stream_at(e, ctx.db, at)?.groups().get(group).is_some(),
        None => false,
    };
    let (policy, ids_at, count) = parse_policy_and_ids(args, 3)?;
    let (Some(at), true) = (found, has_group) else {
        reply_codes(r, &vec![NO_SUCH_ID; count]);
        return Ok(Done);
    };
    let ids = parse_ids(args, ids_at, count)?;
    let (codes, acked, deleted) = change_stream(e, ctx.db, at, |s| {
        let (mut acked, mut deleted) = (0u64, 0u64);
        let codes: Vec<i64> = ids
            .iter()
            .map(|&id| {
                if !s.groups_mut().ack(group, id) {
                    return NO_SUCH_ID;
                }
                acked += 1;
                match delete_under(s, id, policy) {
                    None => STILL_REFERENCED,
                    Some(gone) => {
                        deleted += u64::from(gone);
                        DELETED
                    }
                }
            })
            .collect();
        (codes, acked, deleted)
    })?;
    reply_codes(r, &codes);
    if deleted > 0 {
        ctx.changed(key, events::XDEL, deleted + acked);
    } else if acked > 0 {
        // Acknowledgements alone raise no event, as XACK.
        ctx.changed_silently(key, acked);
    }
    Ok(Done)
}

/// Pending entries over every group (to count what DELREF dropped).
fn pending_total(s: &StreamValue) -> usize {
    s.groups().iter().map(|(_, g)| g.pel.len()).sum()
}
