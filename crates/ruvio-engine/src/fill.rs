//! FILLGET and FILLSET: reading a cache key without a stampede (Ruvio's own
//! commands; no other server has them).
//!
//! Why: when a popular cached value expires, every client that reads it misses at
//! once and every one of them recomputes it (the "thundering herd"). With FILLGET
//! the server picks one of them to compute the value and makes the others wait
//! for it, in one round trip each:
//!
//! ```text
//! FILLGET key [LEASE ms] [WAIT ms]
//! FILLSET key token value [EX seconds | PX milliseconds]
//! ```
//!
//! - The key holds a string: its value, exactly as GET (the same lookup and reply
//!   code, nothing else on that path: FILLGET is as fast as GET), WRONGTYPE for
//!   other types.
//! - The key is missing and nobody fills it: this caller receives a *fill lease*,
//!   `{token: <32 hex digits>, lease: <ms>}` (a RESP3 map; under RESP2 the flat
//!   array `["token", <token>, "lease", <ms>]`), and is expected to compute the
//!   value and store it with FILLSET before `LEASE` ms (default
//!   [`LEASE_MS_DEFAULT`]) have passed.
//! - The key is missing and a lease is out: the caller blocks (the contracts'
//!   [`Outcome::Block`], as BLPOP) for up to `WAIT` ms (default: the `LEASE` of
//!   this call, so a waiter outlives one lease). It is answered when the key is
//!   written — by FILLSET, or by any other command (SET ...) — with the value, or,
//!   when the lease expires first, the oldest waiter receives the next lease and
//!   the others keep waiting. `WAIT 0`, a wait that runs out, a call where
//!   blocking is not allowed (MULTI, scripts) and CLIENT UNBLOCK all get the same
//!   "no value yet, someone else is filling it" reply: a null array (RESP2
//!   `*-1`, RESP3 `_`; `None` in redis-py). FILLGET never answers a plain null
//!   bulk, so the three reply kinds (bulk value, lease, null) cannot be confused.
//! - FILLSET stores the value (and the expiry) only with the live token of the
//!   key's current lease, and ends the lease; a token that is unknown, expired or
//!   already used gets [`CmdError::FillTokenStale`] and stores nothing. So does
//!   the live token while the key holds a value another command stored after the
//!   grant (a fill must not overwrite newer data): the lease ends there too. (The
//!   engine does not watch every write for leases: a key written and deleted
//!   again before the FILLSET leaves the lease live.)
//!
//! Leases are not data: granting one writes nothing, is not logged and does not
//! count as a change. FILLSET is a write: it notifies `set` and is logged as
//! `SET key value [PXAT at]` (absolute expiry, so replay does not depend on when
//! it runs).
//!
//! Leases live per key on the shard that owns the key (`crate::leases::Leases`, one table
//! per engine) and are not tied to a connection: a lease holder that disconnects
//! (or crashes while computing) is not noticed, its lease simply expires and the
//! oldest waiter receives the next one. This is deliberate: a client library may
//! well send FILLSET on another pooled connection than the FILLGET, so the
//! connection is not the lease holder's identity; the token is.
//!
//! Tokens are 128 bits: a per-shard grant counter (unique per key on its shard,
//! so a used or expired token never matches again) and 64 random bits (so tokens
//! of different shards, or of the same shard before a restart, differ too, and a
//! token cannot be guessed from another).
//!
//! Lease expiry wakes waiters: the server calls [`Engine::expire_fill_leases`]
//! every loop iteration (a heap peek when nothing is due) and runs the clients
//! blocked on each key it reports again.

use ruvio_resp::{Args, Reply};

use crate::args::{eq_ci, int_arg};
use crate::command::{
    command,
    flags::*,
    Block, CmdResult, EngineCommand, ExecCtx, KeyPositions, KeySpec,
    Outcome::{self, Done},
};
use crate::error::CmdError;
use crate::strings::{encode_arg, events, expire_at_ms, string_of, ExpireUnit};
use crate::Engine;

/// Lease length when FILLGET names none: long enough for a typical cache fill (a
/// database query, a remote call), short enough that a crashed filler holds its
/// waiters up for seconds, not minutes.
pub const LEASE_MS_DEFAULT: u64 = 10_000;
/// Longest LEASE and WAIT: a lease is a promise to compute a value soon; an hour
/// bounds how long a forgotten lease keeps memory and makes readers wait.
pub const LEASE_MS_MAX: u64 = 3_600_000;
/// Hex digits of a token (128 bits).
const TOKEN_HEX_DIGITS: usize = 32;

/// The fill family's command table.
#[rustfmt::skip]
pub const COMMANDS: &[EngineCommand] = &[
    command!("fillget", -2, READONLY | BLOCKING | FAST, KeySpec::ONE, ["read", "string", "fast", "blocking"],
        "string", "0.1.0",
        "Ruvio: get the value of a key; when it is missing, the first caller gets a lease to fill it and the others wait for the value. FILLGET key [LEASE ms] [WAIT ms]",
        "O(1)", fillget),
    command!("fillset", -4, WRITE | DENYOOM, KeySpec::ONE, ["write", "string", "slow"], "string", "0.1.0",
        "Ruvio: store the value of a key under the fill lease FILLGET gave, waking its waiters. FILLSET key token value [EX seconds | PX milliseconds]",
        "O(1), plus O(N) to wake N waiting clients", fillset),
];

impl Engine {
    /// End the fill leases whose time has passed at `now_ms`, calling `ended(db,
    /// key)` for each: clients blocked on that key must run their FILLGET again
    /// (the oldest receives the next lease). Cheap when nothing is due (one heap
    /// peek), so the server calls it every loop iteration.
    pub fn expire_fill_leases(&mut self, now_ms: u64, ended: impl FnMut(usize, &[u8])) {
        self.fills.expire(now_ms, ended);
    }
}

/// Parsed FILLGET options.
struct FillGetOptions {
    lease_ms: u64,
    wait_ms: u64,
}

/// `[LEASE ms] [WAIT ms]` from argument 2 on; a repeated option's last value wins.
fn parse_fillget(args: Args<'_>) -> Result<FillGetOptions, CmdError> {
    let (mut lease_ms, mut wait_ms) = (LEASE_MS_DEFAULT, None);
    let mut i = 2;
    while i < args.len() {
        if i + 1 >= args.len() {
            return Err(CmdError::Syntax);
        }
        let (option, value) = (args.get(i), args.get(i + 1));
        if eq_ci(option, "LEASE") {
            lease_ms = ms_in(value, 1, CmdError::FillLeaseRange)?;
        } else if eq_ci(option, "WAIT") {
            wait_ms = Some(ms_in(value, 0, CmdError::FillWaitRange)?);
        } else {
            return Err(CmdError::Syntax);
        }
        i += 2;
    }
    Ok(FillGetOptions {
        lease_ms,
        wait_ms: wait_ms.unwrap_or(lease_ms),
    })
}

/// A millisecond count in `min..=LEASE_MS_MAX`.
fn ms_in(arg: &[u8], min: u64, out_of_range: CmdError) -> Result<u64, CmdError> {
    u64::try_from(int_arg(arg)?)
        .ok()
        .filter(|ms| (min..=LEASE_MS_MAX).contains(ms))
        .ok_or(out_of_range)
}

/// A token as FILLGET wrote it: exactly 32 hex digits.
fn parse_token(arg: &[u8]) -> Option<u128> {
    if arg.len() != TOKEN_HEX_DIGITS || !arg.iter().all(u8::is_ascii_hexdigit) {
        return None;
    }
    u128::from_str_radix(std::str::from_utf8(arg).ok()?, 16).ok()
}

/// The lease reply: `{token, lease}` (RESP3 map, RESP2 flat array).
fn reply_lease(reply: &mut Reply<'_>, token: u128, lease_ms: u64) {
    let text = format!("{token:032x}");
    reply.map(2);
    reply.bulk(b"token");
    reply.bulk(text.as_bytes());
    reply.bulk(b"lease");
    reply.int(lease_ms as i64);
}

/// `FILLGET key [LEASE ms] [WAIT ms]`: the value; or a fill lease; or wait for
/// whoever holds it.
fn fillget(e: &mut Engine, ctx: &mut ExecCtx, args: Args<'_>, r: &mut Reply<'_>) -> CmdResult {
    let options = parse_fillget(args)?;
    let key = args.get(1);
    // GET's path: one lookup, the value's reply.
    if let Some(id) = e.lookup_read(ctx, key) {
        string_of(e.db(ctx.db).entry(id))?.reply(r);
        return Ok(Done);
    }
    let now = ctx.now_ms;
    if e.fills.live(ctx.db, key, now).is_none() {
        let random = e.next_random();
        let token = e
            .fills
            .grant(ctx.db, key, now.saturating_add(options.lease_ms), random);
        reply_lease(r, token, options.lease_ms);
        return Ok(Done);
    }
    if ctx.may_block && options.wait_ms > 0 {
        return Ok(Outcome::Block(Block {
            keys: KeyPositions::from_slice(&[1]),
            deadline_ms: Some(now.saturating_add(options.wait_ms)),
            rewrite: Vec::new(),
        }));
    }
    r.null_array();
    Ok(Done)
}

/// `[EX seconds | PX milliseconds]` after FILLSET's value: the absolute expiry.
fn parse_fillset_expiry(args: Args<'_>, now_ms: u64) -> Result<Option<u64>, CmdError> {
    match args.len() {
        4 => Ok(None),
        6 => {
            let unit = match args.get(4) {
                o if eq_ci(o, "EX") => ExpireUnit::Seconds,
                o if eq_ci(o, "PX") => ExpireUnit::Millis,
                _ => return Err(CmdError::Syntax),
            };
            expire_at_ms(unit, args.get(5), now_ms, "fillset").map(Some)
        }
        _ => Err(CmdError::Syntax),
    }
}

/// `FILLSET key token value [EX seconds | PX milliseconds]`: store the value under
/// the key's live lease and end the lease; logged as `SET key value [PXAT at]`.
fn fillset(e: &mut Engine, ctx: &mut ExecCtx, args: Args<'_>, r: &mut Reply<'_>) -> CmdResult {
    let (key, value) = (args.get(1), args.get(3));
    let expire_at = parse_fillset_expiry(args, ctx.now_ms)?;
    let new_value = encode_arg(value)?;
    let token = parse_token(args.get(2)).ok_or(CmdError::FillTokenStale)?;
    if !e.fills.take(ctx.db, key, token, ctx.now_ms) {
        return Err(CmdError::FillTokenStale);
    }
    if e.lookup_write(ctx, key).is_some() {
        // Another command stored the key after the lease was granted: that ended
        // the lease (its waiters got that value), and a fill must not replace it.
        return Err(CmdError::FillTokenStale);
    }
    let id = e.set_key(ctx, key, None, new_value, false);
    ctx.changed(key, events::SET, 1);
    match expire_at {
        Some(at) => {
            e.db_mut(ctx.db).set_expire(id, Some(at));
            let at = itoa::Buffer::new().format(at).to_owned();
            ctx.log_as(&[b"SET", key, value, b"PXAT", at.as_bytes()]);
        }
        None => ctx.log_as(&[b"SET", key, value]),
    }
    r.ok();
    Ok(Done)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_round_trip_through_their_text() {
        let token = (5u128 << 64) | 0xdead_beef;
        assert_eq!(parse_token(format!("{token:032x}").as_bytes()), Some(token));
        assert_eq!(parse_token(format!("{token:032X}").as_bytes()), Some(token));
        assert_eq!(parse_token(b"+0000000000000000000000000000005"), None);
        assert_eq!(parse_token(b"5"), None);
        assert_eq!(parse_token(&[b'g'; 32]), None);
        assert_eq!(parse_token(&[0xff; 32]), None);
    }
}
