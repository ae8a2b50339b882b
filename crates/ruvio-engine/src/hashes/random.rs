//! HRANDFIELD, with Redis's four strategies (`hrandfieldWithCountCommand`): which
//! one runs decides the reply's order and cost, so they are kept as Redis has them.
//!
//! - no count: one random field (a bulk string, nil for a missing key);
//! - CASE 1, a negative count (repeats allowed) or a count of 1: that many independent
//!   picks, in pick order;
//! - CASE 2, a count at least the hash's size: the whole hash, in its order;
//! - CASE 2.5, a packed hash: `count` distinct fields sampled in the hash's order;
//! - CASE 3, a table with `count * 3 > size`: all fields, then random ones removed
//!   until `count` remain (Redis swaps the last into the hole, so order changes);
//! - CASE 4, a bigger table: random picks, duplicates skipped, in pick order.
//!
//! As in Redis 8, expired fields are removed before anything is picked (a hash left
//! empty is deleted). With WITHVALUES, RESP3 nests each pair in a 2-array and RESP2
//! flattens them.

use std::collections::HashSet;

use ruvio_resp::{Args, Protocol, Reply};

use super::{after_lazy_expiry, change_hash, hash_at, read_hash, FieldRef, HashValue};
use crate::args::eq_ci;
use crate::command::{CmdResult, ExecCtx, Outcome::Done};
use crate::error::CmdError;
use crate::keyspace::EntryId;
use crate::Engine;

/// How many times bigger than the count a table must be for CASE 4 (random picks)
/// rather than CASE 3 (remove from a copy): Redis's `HRANDFIELD_SUB_STRATEGY_MUL`.
const SUB_STRATEGY_MUL: usize = 3;

/// Most elements one HRANDFIELD reply may hold. Redis streams any count a client
/// asks for (a negative count is bounded only by LONG_MAX), which ends in an
/// out-of-memory kill; Ruvio answers Redis's "value is out of range" instead. At
/// 2^24 the reply is already hundreds of MiB.
pub const RANDFIELD_REPLY_ELEMENTS_MAX: u64 = 1 << 24;

/// Redis's `-LONG_MAX/2 ..= LONG_MAX/2` bound on a count with WITHVALUES.
const WITHVALUES_COUNT_MAX: i64 = i64::MAX / 2;

/// A small xorshift generator seeded from the engine's, so picking does not need
/// the engine mutably while the hash is borrowed from it.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// Uniform in `0..n` (`n > 0`); the modulo bias is below 2^-40 for any hash.
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// `HRANDFIELD key [count [WITHVALUES]]`
pub(super) fn hrandfield(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    if args.len() >= 3 {
        let count = match crate::args::int_arg(args.get(2))? {
            i64::MIN => return Err(CmdError::OutsideLongRange),
            n => n,
        };
        if args.len() > 4 || (args.len() == 4 && !eq_ci(args.get(3), "WITHVALUES")) {
            return Err(CmdError::Syntax);
        }
        let withvalues = args.len() == 4;
        if withvalues && !(-WITHVALUES_COUNT_MAX..=WITHVALUES_COUNT_MAX).contains(&count) {
            return Err(CmdError::ValueOutOfRange);
        }
        return with_count(e, ctx, args.get(1), count, withvalues, r);
    }
    let key = args.get(1);
    let Some(id) = read_hash(e, ctx, key)? else {
        r.null();
        return Ok(Done);
    };
    if !expire_all(e, ctx, key, id)? {
        r.null();
        return Ok(Done);
    }
    let mut rng = Rng(e.next_random() | 1);
    let h = hash_at(e, ctx.db, id)?;
    match h.random_entry(ctx.now_ms, &mut || rng.next()) {
        Some(f) => r.bulk(f.field),
        None => r.null(),
    }
    Ok(Done)
}

/// Redis 8's `hashTypeExpireIfNeeded`: remove every expired field; false when that
/// deleted the key.
fn expire_all(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    key: &[u8],
    id: EntryId,
) -> Result<bool, CmdError> {
    let now = ctx.now_ms;
    let due = hash_at(e, ctx.db, id)?
        .next_expire_at()
        .is_some_and(|at| now > at);
    if !due {
        return Ok(true);
    }
    let removed = change_hash(e, ctx.db, id, |h| h.remove_expired(now, usize::MAX))?;
    e.count_expired_fields(removed);
    Ok(!after_lazy_expiry(e, ctx, key, id, removed, true))
}

/// Write one picked field (and its value, nested in RESP3).
fn reply_pair(r: &mut Reply<'_>, f: FieldRef<'_>, withvalues: bool) {
    if withvalues && r.proto == Protocol::Resp3 {
        r.array(2);
    }
    r.bulk(f.field);
    if withvalues {
        r.bulk(f.value);
    }
}

/// The array header for `n` picks.
fn reply_header(r: &mut Reply<'_>, n: usize, withvalues: bool) {
    if withvalues && r.proto == Protocol::Resp2 {
        r.array(n.saturating_mul(2));
    } else {
        r.array(n);
    }
}

/// `hrandfieldWithCountCommand`.
fn with_count(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    key: &[u8],
    count: i64,
    withvalues: bool,
    r: &mut Reply<'_>,
) -> CmdResult {
    let Some(id) = read_hash(e, ctx, key)? else {
        r.array(0);
        return Ok(Done);
    };
    if !expire_all(e, ctx, key, id)? || count == 0 {
        r.array(0);
        return Ok(Done);
    }
    let unique = count > 0;
    let wanted = count.unsigned_abs();
    let mut rng = Rng(e.next_random() | 1);
    let h = hash_at(e, ctx.db, id)?;
    let size = h.len();
    let table = h.encoding() == super::HashEncoding::Hashtable;

    // CASE 1: repeats allowed (or a single pick).
    if !unique || wanted == 1 {
        if wanted > RANDFIELD_REPLY_ELEMENTS_MAX {
            return Err(CmdError::ValueOutOfRange);
        }
        let n = wanted as usize;
        reply_header(r, n, withvalues);
        if table {
            for _ in 0..n {
                match h.random_entry(ctx.now_ms, &mut || rng.next()) {
                    Some(f) => reply_pair(r, f, withvalues),
                    None => unreachable!("a non-empty hash without a live field"),
                }
            }
        } else {
            let all: Vec<FieldRef<'_>> = h.entries().collect();
            for _ in 0..n {
                reply_pair(r, all[rng.below(all.len())], withvalues);
            }
        }
        return Ok(Done);
    }

    // CASE 2: the whole hash.
    let n = usize::try_from(wanted).unwrap_or(usize::MAX);
    if n >= size {
        reply_header(r, size, withvalues);
        h.entries().for_each(|f| reply_pair(r, f, withvalues));
        return Ok(Done);
    }
    reply_header(r, n, withvalues);

    // CASE 2.5: a packed hash, sampled in order (selection sampling).
    if !table {
        let mut needed = n;
        for (i, f) in h.entries().enumerate() {
            if needed == 0 {
                break;
            }
            if rng.below(size - i) < needed {
                reply_pair(r, f, withvalues);
                needed -= 1;
            }
        }
        return Ok(Done);
    }

    // CASE 3: most of the table: drop random fields from a copy.
    if n * SUB_STRATEGY_MUL > size {
        let mut all: Vec<FieldRef<'_>> = h.entries().collect();
        while all.len() > n {
            let discard = rng.below(all.len());
            all.swap_remove(discard);
        }
        all.into_iter().for_each(|f| reply_pair(r, f, withvalues));
        return Ok(Done);
    }

    // CASE 4: few fields of a big table: random picks, duplicates skipped.
    pick_unique(h, ctx.now_ms, n, &mut rng, |f| reply_pair(r, f, withvalues));
    Ok(Done)
}

/// Random picks until `n` distinct fields have gone to `emit`. The table has more
/// than `3 n` live fields, so this ends quickly.
fn pick_unique<'h>(
    h: &'h HashValue,
    now_ms: u64,
    n: usize,
    rng: &mut Rng,
    mut emit: impl FnMut(FieldRef<'h>),
) {
    let mut seen: HashSet<&[u8]> = HashSet::with_capacity(n);
    while seen.len() < n {
        let Some(f) = h.random_entry(now_ms, &mut || rng.next()) else {
            return;
        };
        if seen.insert(f.field) {
            emit(f);
        }
    }
}
