//! Hash commands (Redis's t_hash.c): the command table and the generic cores the
//! commands share.
//!
//! The value (`listpack`, `listpackex`, `hashtable`) and its conversion rules are
//! in [`crate::values::hash`], below the keyspace; here:
//! - `commands` (HSET .. HSCAN), `random` (HRANDFIELD) and `expire` (the field
//!   expiry commands of Redis 7.4/8.0, HGETDEL, HGETEX, HSETEX): thin handlers in
//!   Redis's order of checks (which error wins is part of the behaviour).
//!
//! Field expiry follows Redis 8: a field past its time is gone for every reader; a
//! command that reads one field (HGET, HMGET, HEXISTS, HSTRLEN, HINCRBY*, HSETNX,
//! HGETDEL, HGETEX, HSETEX's FNX/FXX) deletes it on the way ("lazy"), and deletes
//! the key when that was its last field (HGETDEL, HGETEX and HSETEX only at the end
//! of the command); whole-hash readers (HGETALL, HKEYS, HVALS, HSCAN) skip expired
//! fields; HRANDFIELD first removes them all; HLEN counts them until active expiry
//! (the engine's cycle, through the keyspace's field-TTL bitmap) removes them.
//!
//! The command layer passes Redis's `hash-max-listpack-entries` and
//! `hash-max-listpack-value` (engine settings) as [`HashLimits`] to every write.

mod commands;
mod expire;
mod random;

pub use crate::values::hash::{FieldRef, HashEncoding, HashLimits, HashValue};

use ruvio_resp::Args;

use crate::command::{command, flags::*, EngineCommand, ExecCtx, KeySpec};
use crate::error::CmdError;
use crate::keyspace::{Collection, EntryId};
use crate::Engine;

/// The hash family's keyspace events (Redis's names).
pub(crate) mod events {
    use crate::command::{Event, EventClass::Hash};
    pub const HSET: Event = Event::new(Hash, "hset");
    pub const HDEL: Event = Event::new(Hash, "hdel");
    pub const HINCRBY: Event = Event::new(Hash, "hincrby");
    pub const HINCRBYFLOAT: Event = Event::new(Hash, "hincrbyfloat");
    pub const HEXPIRE: Event = Event::new(Hash, "hexpire");
    pub const HPERSIST: Event = Event::new(Hash, "hpersist");
    pub const HEXPIRED: Event = Event::new(Hash, "hexpired");
}

const FIELDS_COMPLEXITY: &str = "O(N) where N is the number of specified fields";
const WHOLE_COMPLEXITY: &str = "O(N) where N is the size of the hash.";

/// The hash family's command table (Redis 7.0's rows for the commands it has, Redis
/// 8.0's for the field expiry commands, HGETDEL, HGETEX and HSETEX).
#[rustfmt::skip]
pub const COMMANDS: &[EngineCommand] = &[
    command!("hset", -4, WRITE | DENYOOM | FAST, KeySpec::ONE, ["write", "hash", "fast"], "hash", "2.0.0",
        "Set the string value of a hash field",
        "O(1) for each field/value pair added, so O(N) to add N field/value pairs when the command is called with multiple field/value pairs.",
        commands::hset),
    command!("hsetnx", 4, WRITE | DENYOOM | FAST, KeySpec::ONE, ["write", "hash", "fast"], "hash", "2.0.0",
        "Set the value of a hash field, only if the field does not exist", "O(1)", commands::hsetnx),
    command!("hmset", -4, WRITE | DENYOOM | FAST, KeySpec::ONE, ["write", "hash", "fast"], "hash", "2.0.0",
        "Set multiple hash fields to multiple values", "O(N) where N is the number of fields being set.",
        commands::hmset),
    command!("hget", 3, READONLY | FAST, KeySpec::ONE, ["read", "hash", "fast"], "hash", "2.0.0",
        "Get the value of a hash field", "O(1)", commands::hget),
    command!("hmget", -3, READONLY | FAST, KeySpec::ONE, ["read", "hash", "fast"], "hash", "2.0.0",
        "Get the values of all the given hash fields", "O(N) where N is the number of fields being requested.",
        commands::hmget),
    command!("hdel", -3, WRITE | FAST, KeySpec::ONE, ["write", "hash", "fast"], "hash", "2.0.0",
        "Delete one or more hash fields", "O(N) where N is the number of fields to be removed.", commands::hdel),
    command!("hlen", 2, READONLY | FAST, KeySpec::ONE, ["read", "hash", "fast"], "hash", "2.0.0",
        "Get the number of fields in a hash", "O(1)", commands::hlen),
    command!("hstrlen", 3, READONLY | FAST, KeySpec::ONE, ["read", "hash", "fast"], "hash", "3.2.0",
        "Get the length of the value of a hash field", "O(1)", commands::hstrlen),
    command!("hexists", 3, READONLY | FAST, KeySpec::ONE, ["read", "hash", "fast"], "hash", "2.0.0",
        "Determine if a hash field exists", "O(1)", commands::hexists),
    command!("hkeys", 2, READONLY, KeySpec::ONE, ["read", "hash", "slow"], "hash", "2.0.0",
        "Get all the fields in a hash", WHOLE_COMPLEXITY, commands::hkeys),
    command!("hvals", 2, READONLY, KeySpec::ONE, ["read", "hash", "slow"], "hash", "2.0.0",
        "Get all the values in a hash", WHOLE_COMPLEXITY, commands::hvals),
    command!("hgetall", 2, READONLY, KeySpec::ONE, ["read", "hash", "slow"], "hash", "2.0.0",
        "Get all the fields and values in a hash", WHOLE_COMPLEXITY, commands::hgetall),
    command!("hincrby", 4, WRITE | DENYOOM | FAST, KeySpec::ONE, ["write", "hash", "fast"], "hash", "2.0.0",
        "Increment the integer value of a hash field by the given number", "O(1)", commands::hincrby),
    command!("hincrbyfloat", 4, WRITE | DENYOOM | FAST, KeySpec::ONE, ["write", "hash", "fast"], "hash", "2.6.0",
        "Increment the float value of a hash field by the given amount", "O(1)", commands::hincrbyfloat),
    command!("hrandfield", -2, READONLY, KeySpec::ONE, ["read", "hash", "slow"], "hash", "6.2.0",
        "Get one or multiple random fields from a hash", "O(N) where N is the number of fields returned",
        random::hrandfield),
    command!("hscan", -3, READONLY, KeySpec::ONE, ["read", "hash", "slow"], "hash", "2.8.0",
        "Incrementally iterate hash fields and associated values",
        "O(1) for every call. O(N) for a complete iteration, including enough command calls for the cursor to return back to 0. N is the number of elements inside the collection..",
        commands::hscan),
    command!("hexpire", -6, WRITE | DENYOOM | FAST, KeySpec::ONE, ["write", "hash", "fast"], "hash", "7.4.0",
        "Set expiry for hash field using relative time to expire (seconds)", FIELDS_COMPLEXITY, expire::hexpire),
    command!("hpexpire", -6, WRITE | DENYOOM | FAST, KeySpec::ONE, ["write", "hash", "fast"], "hash", "7.4.0",
        "Set expiry for hash field using relative time to expire (milliseconds)", FIELDS_COMPLEXITY,
        expire::hpexpire),
    command!("hexpireat", -6, WRITE | DENYOOM | FAST, KeySpec::ONE, ["write", "hash", "fast"], "hash", "7.4.0",
        "Set expiry for hash field using an absolute Unix timestamp (seconds)", FIELDS_COMPLEXITY,
        expire::hexpireat),
    command!("hpexpireat", -6, WRITE | DENYOOM | FAST, KeySpec::ONE, ["write", "hash", "fast"], "hash", "7.4.0",
        "Set expiry for hash field using an absolute Unix timestamp (milliseconds)", FIELDS_COMPLEXITY,
        expire::hpexpireat),
    command!("httl", -5, READONLY | FAST, KeySpec::ONE, ["read", "hash", "fast"], "hash", "7.4.0",
        "Returns the TTL in seconds of a hash field.", FIELDS_COMPLEXITY, expire::httl),
    command!("hpttl", -5, READONLY | FAST, KeySpec::ONE, ["read", "hash", "fast"], "hash", "7.4.0",
        "Returns the TTL in milliseconds of a hash field.", FIELDS_COMPLEXITY, expire::hpttl),
    command!("hexpiretime", -5, READONLY | FAST, KeySpec::ONE, ["read", "hash", "fast"], "hash", "7.4.0",
        "Returns the expiration time of a hash field as a Unix timestamp, in seconds.", FIELDS_COMPLEXITY,
        expire::hexpiretime),
    command!("hpexpiretime", -5, READONLY | FAST, KeySpec::ONE, ["read", "hash", "fast"], "hash", "7.4.0",
        "Returns the expiration time of a hash field as a Unix timestamp, in msec.", FIELDS_COMPLEXITY,
        expire::hpexpiretime),
    command!("hpersist", -5, WRITE | FAST, KeySpec::ONE, ["write", "hash", "fast"], "hash", "7.4.0",
        "Removes the expiration time for each specified field", FIELDS_COMPLEXITY, expire::hpersist),
    command!("hgetdel", -5, WRITE | FAST, KeySpec::ONE, ["write", "hash", "fast"], "hash", "8.0.0",
        "Returns the value of a field and deletes it from the hash.", FIELDS_COMPLEXITY, expire::hgetdel),
    command!("hgetex", -5, WRITE | FAST, KeySpec::ONE, ["write", "hash", "fast"], "hash", "8.0.0",
        "Get the value of one or more fields of a given hash key, and optionally set their expiration.",
        FIELDS_COMPLEXITY, expire::hgetex),
    command!("hsetex", -6, WRITE | DENYOOM | FAST, KeySpec::ONE, ["write", "hash", "fast"], "hash", "8.0.0",
        "Set the value of one or more fields of a given hash key, and optionally set their expiration.",
        "O(N) where N is the number of fields being set.", expire::hsetex),
];

// ---- helpers ----------------------------------------------------------------

/// `hash-max-listpack-entries` and `hash-max-listpack-value` now.
fn limits(engine: &Engine) -> HashLimits {
    let c = engine.config();
    HashLimits {
        listpack_entries_max: c.hash_max_listpack_entries,
        listpack_value_bytes_max: c.hash_max_listpack_value,
    }
}

/// The hash in entry `id` of `db`, or WRONGTYPE.
fn hash_at(engine: &Engine, db: usize, id: EntryId) -> Result<&HashValue, CmdError> {
    engine
        .db(db)
        .entry(id)
        .value()
        .as_hash()
        .ok_or(CmdError::WrongType)
}

/// Change the hash in entry `id` of `db` (heap accounting and the field-TTL bitmap
/// kept), or WRONGTYPE.
fn change_hash<R>(
    engine: &mut Engine,
    db: usize,
    id: EntryId,
    change: impl FnOnce(&mut HashValue) -> R,
) -> Result<R, CmdError> {
    engine
        .modify_value(db, id, |v| v.into_hash().map(change))
        .ok_or(CmdError::WrongType)
}

/// `lookupKeyRead` + `checkType`: the id of the hash at `key`, `None` when missing.
fn read_hash(engine: &mut Engine, ctx: &ExecCtx, key: &[u8]) -> Result<Option<EntryId>, CmdError> {
    let id = engine.lookup_read(ctx, key);
    if let Some(id) = id {
        hash_at(engine, ctx.db, id)?;
    }
    Ok(id)
}

/// `lookupKeyWrite` + `checkType`.
fn write_hash(engine: &mut Engine, ctx: &ExecCtx, key: &[u8]) -> Result<Option<EntryId>, CmdError> {
    let id = engine.lookup_write(ctx, key);
    if let Some(id) = id {
        hash_at(engine, ctx.db, id)?;
    }
    Ok(id)
}

/// Redis's `hashTypeLookupWriteOrCreate`: the hash at `key`, created empty when
/// missing (the caller makes sure a hash left empty is deleted again).
fn write_or_create(engine: &mut Engine, ctx: &ExecCtx, key: &[u8]) -> Result<EntryId, CmdError> {
    match write_hash(engine, ctx, key)? {
        Some(id) => Ok(id),
        None => Ok(engine.add_collection(ctx, key, Collection::Hash(HashValue::new()))),
    }
}

/// Lazy field expiry (Redis's `hashTypeGetValue` with `HFE_LAZY_EXPIRE`): remove
/// `field` from the hash at `id` when it is stored and past its time. True when it
/// did. Cheap for hashes without due fields: their earliest expiry says so.
fn expire_field(engine: &mut Engine, ctx: &ExecCtx, id: EntryId, field: &[u8]) -> bool {
    let now = ctx.now_ms;
    let due = hash_at(engine, ctx.db, id).is_ok_and(|h| {
        h.next_expire_at().is_some_and(|at| now > at)
            && h.lookup(field).is_some_and(|f| f.is_expired(now))
    });
    if due {
        let _ = change_hash(engine, ctx.db, id, |h| h.remove(field));
        engine.count_expired_fields(1);
    }
    due
}

/// Record a hash command's lazy expiries: the `hexpired` event, and the key's
/// deletion (`del`) when it emptied the hash and `may_delete`. True when the key
/// was deleted.
fn after_lazy_expiry(
    engine: &mut Engine,
    ctx: &mut ExecCtx,
    key: &[u8],
    id: EntryId,
    expired: usize,
    may_delete: bool,
) -> bool {
    if expired == 0 {
        return false;
    }
    ctx.changed(key, events::HEXPIRED, 0);
    may_delete && delete_if_empty(engine, ctx, key, id)
}

/// Delete the key when its hash is empty, with the `del` event. True when deleted.
fn delete_if_empty(engine: &mut Engine, ctx: &mut ExecCtx, key: &[u8], id: EntryId) -> bool {
    let deleted = engine.delete_if_empty(ctx.db, id);
    if deleted {
        ctx.changed(key, crate::keys::events::DEL, 0);
    }
    deleted
}

/// A `getRangeLongFromObjectOrReply(.., 1, LONG_MAX, msg)` count: `err` when not an
/// integer or below 1.
fn positive_count(arg: &[u8], err: CmdError) -> Result<usize, CmdError> {
    crate::args::parse_i64(arg)
        .filter(|&n| n >= 1)
        .map(|n| usize::try_from(n).unwrap_or(usize::MAX))
        .ok_or(err)
}

/// `FIELDS numfields field [field ...]` starting at `at`: the indexes of the fields.
/// `count_err` is the command's wording for a bad `numfields`.
fn fields_block(
    args: Args<'_>,
    at: usize,
    count_err: CmdError,
) -> Result<std::ops::Range<usize>, CmdError> {
    if !crate::args::eq_ci(args.get(at), "FIELDS") {
        return Err(CmdError::FieldsMissing);
    }
    let n = positive_count(args.get(at + 1), count_err)?;
    if n != args.len() - at - 2 {
        return Err(CmdError::NumFieldsMismatch);
    }
    Ok(at + 2..args.len())
}

/// Latest expiry time a hash field command accepts: Redis's `HFE_MAX_ABS_TIME_MSEC`
/// (`EB_EXPIRE_TIME_MAX >> 2`, 2^46 - 1 ms: the year 4199), so times stay far from
/// any overflow and 0 is never a stored time.
pub const FIELD_EXPIRE_AT_MS_MAX: i64 = ((1 << 48) - 1) >> 2;

/// Redis's `parseExpireTime`: an integer time in seconds (`seconds`) or ms, added to
/// `base_ms` (now for relative times, 0 for absolute ones); the absolute ms.
fn parse_expire_time(
    arg: &[u8],
    seconds: bool,
    base_ms: u64,
    cmd: &'static str,
) -> Result<u64, CmdError> {
    let mut val = crate::args::int_arg(arg)?;
    if val < 0 {
        return Err(CmdError::ExpireTimeNegative);
    }
    if seconds {
        if val > FIELD_EXPIRE_AT_MS_MAX / 1000 {
            return Err(CmdError::InvalidExpireTime(cmd));
        }
        val *= 1000;
    }
    let base = i64::try_from(base_ms).unwrap_or(i64::MAX);
    if val > FIELD_EXPIRE_AT_MS_MAX.saturating_sub(base) {
        return Err(CmdError::InvalidExpireTime(cmd));
    }
    Ok((val + base) as u64)
}

/// Redis's `checkAlreadyExpired`: a new expiry time at or before now deletes the
/// field instead of being stored.
fn already_expired(at_ms: u64, ctx: &ExecCtx) -> bool {
    at_ms <= ctx.now_ms
}
