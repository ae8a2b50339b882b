//! The string family (Redis' t_string.c): the encoding helpers first, then the
//! command table, then the handlers. The SET variants share one core in [`set`],
//! the counters live in [`counter`], LCS in [`lcs`], Redis 8.4's DIGEST and DELEX
//! in [`digest`].

mod counter;
pub(crate) mod digest;
mod lcs;
mod set;

pub(crate) use set::{expire_at_ms, ExpireUnit};

use ruvio_resp::{Args, Reply};

use crate::command::{
    command, flags::*, CmdResult, EngineCommand, ExecCtx, KeySpec, MergeRule, Outcome::Done,
};
use crate::error::CmdError;
use crate::keyspace::{Entry, NewValue, STRING_BYTES_MAX};
use crate::value::StrRef;
use crate::Engine;

/// Longest text that may be an integer (`tryObjectEncoding` checks `len <= 20`).
const INT_TEXT_BYTES_MAX: usize = 20;

/// Redis' `tryObjectEncoding` for a value argument: canonical i64 text becomes an
/// integer, anything else stays bytes (embstr/raw is decided by length).
pub(crate) fn encode_arg(bytes: &[u8]) -> Result<NewValue<'_>, CmdError> {
    if bytes.len() > STRING_BYTES_MAX {
        return Err(CmdError::StringTooLong);
    }
    if bytes.len() <= INT_TEXT_BYTES_MAX {
        if let Some(n) = crate::args::parse_i64(bytes) {
            return Ok(NewValue::Int(n));
        }
    }
    Ok(NewValue::Str { bytes, raw: false })
}

/// The string in `entry`, or WRONGTYPE.
pub(crate) fn string_of(entry: &Entry) -> Result<StrRef<'_>, CmdError> {
    entry.value().as_str().ok_or(CmdError::WrongType)
}

/// Redis' `checkStringLength`: `size + append` must stay within `proto-max-bulk-len`.
fn check_string_length(size: u64, append: u64) -> Result<(), CmdError> {
    match size.checked_add(append) {
        Some(total) if total <= STRING_BYTES_MAX as u64 => Ok(()),
        _ => Err(CmdError::StringTooLong),
    }
}

/// The string family's keyspace events.
pub(crate) mod events {
    use crate::command::{Event, EventClass::String};
    pub const SET: Event = Event::new(String, "set");
    pub const APPEND: Event = Event::new(String, "append");
    pub const SETRANGE: Event = Event::new(String, "setrange");
    pub const INCRBY: Event = Event::new(String, "incrby");
    pub const INCRBYFLOAT: Event = Event::new(String, "incrbyfloat");
}

/// The string family's command table.
#[rustfmt::skip]
pub const COMMANDS: &[EngineCommand] = &[
    command!("get", 2, READONLY | FAST, KeySpec::ONE, ["read", "string", "fast"], "string", "1.0.0",
        "Get the value of a key", "O(1)", get),
    command!("set", -3, WRITE | DENYOOM, KeySpec::ONE, ["write", "string", "slow"], "string", "1.0.0",
        "Set the string value of a key", "O(1)", set::set),
    command!("setnx", 3, WRITE | DENYOOM | FAST, KeySpec::ONE, ["write", "string", "fast"], "string", "1.0.0",
        "Set the value of a key, only if the key does not exist", "O(1)", set::setnx),
    command!("setex", 4, WRITE | DENYOOM, KeySpec::ONE, ["write", "string", "slow"], "string", "2.0.0",
        "Set the value and expiration of a key", "O(1)", set::setex),
    command!("psetex", 4, WRITE | DENYOOM, KeySpec::ONE, ["write", "string", "slow"], "string", "2.6.0",
        "Set the value and expiration in milliseconds of a key", "O(1)", set::psetex),
    command!("getset", 3, WRITE | DENYOOM | FAST, KeySpec::ONE, ["write", "string", "fast"], "string", "1.0.0",
        "Set the string value of a key and return its old value", "O(1)", set::getset),
    command!("mset", -3, WRITE | DENYOOM | SPLITTABLE, KeySpec::PAIRS, ["write", "string", "slow"], "string",
        "1.0.1", "Set multiple keys to multiple values", "O(N) where N is the number of keys to set.", set::mset,
        merge = MergeRule::AllOk),
    command!("msetnx", -3, WRITE | DENYOOM, KeySpec::PAIRS, ["write", "string", "slow"], "string", "1.0.1",
        "Set multiple keys to multiple values, only if none of the keys exist",
        "O(N) where N is the number of keys to set.", set::msetnx),
    command!("msetex", -4, WRITE | DENYOOM, MSETEX_KEYS, ["write", "string", "slow"], "string", "8.4.0",
        "Atomically sets multiple string keys with a shared expiration in a single operation. Supports flexible argument parsing where condition and expiration flags can appear in any order.",
        "O(N) where N is the number of keys to set.", set::msetex),
    command!("delex", -2, WRITE | FAST, KeySpec::ONE, ["write", "string", "fast"], "string", "8.4.0",
        "Conditionally removes the specified key based on value or hash digest comparison.",
        "O(1) for IFEQ/IFNE, O(N) for IFDEQ/IFDNE where N is the length of the string value.", digest::delex),
    command!("digest", 2, READONLY | FAST, KeySpec::ONE, ["read", "string", "fast"], "string", "8.4.0",
        "Returns the hash digest of a string value as a hexadecimal string.",
        "O(N) where N is the length of the string value.", digest::digest),
    command!("mget", -2, READONLY | FAST | SPLITTABLE, KeySpec::ALL, ["read", "string", "fast"], "string", "1.0.0",
        "Get the values of all the given keys", "O(N) where N is the number of keys to retrieve.", mget,
        merge = MergeRule::Scatter),
    command!("getdel", 2, WRITE | FAST, KeySpec::ONE, ["write", "string", "fast"], "string", "6.2.0",
        "Get the value of a key and delete the key", "O(1)", getdel),
    command!("getex", -2, WRITE | FAST, KeySpec::ONE, ["write", "string", "fast"], "string", "6.2.0",
        "Get the value of a key and optionally set its expiration", "O(1)", set::getex),
    command!("append", 3, WRITE | DENYOOM | FAST, KeySpec::ONE, ["write", "string", "fast"], "string", "2.0.0",
        "Append a value to a key",
        "O(1). The amortized time complexity is O(1) assuming the appended value is small and the already present value is of any size, since the dynamic string library used by Redis will double the free space available on every reallocation.",
        append),
    command!("strlen", 2, READONLY | FAST, KeySpec::ONE, ["read", "string", "fast"], "string", "2.2.0",
        "Get the length of the value stored in a key", "O(1)", strlen),
    command!("getrange", 4, READONLY, KeySpec::ONE, ["read", "string", "slow"], "string", "2.4.0",
        "Get a substring of the string stored at a key", GETRANGE_COMPLEXITY, getrange),
    command!("substr", 4, READONLY, KeySpec::ONE, ["read", "string", "slow"], "string", "1.0.0",
        "Get a substring of the string stored at a key", GETRANGE_COMPLEXITY, getrange),
    command!("setrange", 4, WRITE | DENYOOM, KeySpec::ONE, ["write", "string", "slow"], "string", "2.2.0",
        "Overwrite part of a string at key starting at the specified offset",
        "O(1), not counting the time taken to copy the new string in place. Usually, this string is very small so the amortized complexity is O(1). Otherwise, complexity is O(M) with M being the length of the value argument.",
        setrange),
    command!("incr", 2, WRITE | DENYOOM | FAST, KeySpec::ONE, ["write", "string", "fast"], "string", "1.0.0",
        "Increment the integer value of a key by one", "O(1)", counter::incr),
    command!("decr", 2, WRITE | DENYOOM | FAST, KeySpec::ONE, ["write", "string", "fast"], "string", "1.0.0",
        "Decrement the integer value of a key by one", "O(1)", counter::decr),
    command!("incrby", 3, WRITE | DENYOOM | FAST, KeySpec::ONE, ["write", "string", "fast"], "string", "1.0.0",
        "Increment the integer value of a key by the given amount", "O(1)", counter::incrby),
    command!("decrby", 3, WRITE | DENYOOM | FAST, KeySpec::ONE, ["write", "string", "fast"], "string", "1.0.0",
        "Decrement the integer value of a key by the given number", "O(1)", counter::decrby),
    command!("incrbyfloat", 3, WRITE | DENYOOM | FAST, KeySpec::ONE, ["write", "string", "fast"], "string",
        "2.6.0", "Increment the float value of a key by the given amount", "O(1)", counter::incrbyfloat),
    command!("lcs", -3, READONLY, KeySpec::FIRST_TWO, ["read", "string", "slow"], "string", "7.0.0",
        "Find longest common substring",
        "O(N*M) where N and M are the lengths of s1 and s2, respectively", lcs::lcs),
];

/// MSETEX's keys: `numkeys` at 1, then that many key/value pairs (Redis' keynum
/// spec with `keystep 2`).
const MSETEX_KEYS: KeySpec = KeySpec(&[crate::command::KeyShape::NumKeyPairs { at: 1 }]);

const GETRANGE_COMPLEXITY: &str = "O(N) where N is the length of the returned string. The complexity is ultimately determined by the returned length, but because creating a substring from an existing string is very cheap, it can be considered O(1) for small strings.";

/// `GET key`: the value, nil when missing, WRONGTYPE for other types.
fn get(engine: &mut Engine, ctx: &mut ExecCtx, args: Args<'_>, reply: &mut Reply<'_>) -> CmdResult {
    get_generic(engine, ctx, args.get(1), reply)?;
    Ok(Done)
}

/// Redis' `getGenericCommand`: reply with the value (or nil); an error is returned
/// before anything is written.
pub(crate) fn get_generic(
    engine: &mut Engine,
    ctx: &ExecCtx,
    key: &[u8],
    reply: &mut Reply<'_>,
) -> Result<(), CmdError> {
    match engine.lookup_read(ctx, key) {
        None => reply.null(),
        Some(id) => string_of(engine.db(ctx.db).entry(id))?.reply(reply),
    }
    Ok(())
}

/// `MGET key [key ...]`: one value or nil per key (nil for other types too).
fn mget(
    engine: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> CmdResult {
    reply.array(args.len() - 1);
    for key in args.iter().skip(1) {
        match engine.lookup_read(ctx, key) {
            Some(id) => match engine.db(ctx.db).entry(id).value().as_str() {
                Some(s) => s.reply(reply),
                None => reply.null(),
            },
            None => reply.null(),
        }
    }
    Ok(Done)
}

/// `GETDEL key`: the value, then the key is deleted.
fn getdel(
    engine: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> CmdResult {
    let key = args.get(1);
    get_generic(engine, ctx, key, reply)?;
    if let Some(id) = engine.db(ctx.db).find(key) {
        engine.delete(ctx.db, id);
        ctx.changed(key, crate::keys::events::DEL, 1);
    }
    Ok(Done)
}

/// `STRLEN key`: length of the string, 0 when missing.
fn strlen(
    engine: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> CmdResult {
    let len = match engine.lookup_read(ctx, args.get(1)) {
        None => 0,
        Some(id) => string_of(engine.db(ctx.db).entry(id))?.len(),
    };
    reply.int(len as i64);
    Ok(Done)
}

/// `GETRANGE key start end` (and `SUBSTR`): the bytes between two inclusive offsets,
/// negative offsets counting from the end.
fn getrange(
    engine: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> CmdResult {
    let start = crate::args::int_arg(args.get(2))?;
    let end = crate::args::int_arg(args.get(3))?;
    let Some(id) = engine.lookup_read(ctx, args.get(1)) else {
        reply.bulk(b"");
        return Ok(Done);
    };
    let mut buf = itoa::Buffer::new();
    let value = string_of(engine.db(ctx.db).entry(id))?;
    reply.bulk(substring(value.bytes(&mut buf), start, end));
    Ok(Done)
}

/// Redis 7.0's GETRANGE index arithmetic.
fn substring(s: &[u8], mut start: i64, mut end: i64) -> &[u8] {
    let len = s.len() as i64;
    if start < 0 && end < 0 && start > end {
        return b"";
    }
    if start < 0 {
        start += len;
    }
    if end < 0 {
        end += len;
    }
    start = start.max(0);
    end = end.max(0).min(len - 1);
    if len == 0 || start > end {
        return b"";
    }
    &s[start as usize..=end as usize]
}

/// `APPEND key value`: append, creating the key when missing; replies the new length.
fn append(
    engine: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> CmdResult {
    let (key, tail) = (args.get(1), args.get(2));
    let len = match engine.lookup_write(ctx, key) {
        None => {
            let value = encode_arg(tail)?;
            engine.set_key(ctx, key, None, value, false);
            tail.len()
        }
        Some(id) => {
            let current_len = string_of(engine.db(ctx.db).entry(id))?.len();
            check_string_length(current_len as u64, tail.len() as u64)?;
            engine.db_mut(ctx.db).modify(id, |e| e.append(tail))
        }
    };
    ctx.changed(key, events::APPEND, 1);
    reply.int(len as i64);
    Ok(Done)
}

/// `SETRANGE key offset value`: overwrite from `offset`, zero-padding; replies the
/// new length.
fn setrange(
    engine: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> CmdResult {
    let (key, patch) = (args.get(1), args.get(3));
    let offset = crate::args::int_arg(args.get(2))?;
    if offset < 0 {
        return Err(CmdError::OffsetOutOfRange);
    }
    let id = match engine.lookup_write(ctx, key) {
        None if patch.is_empty() => {
            reply.int(0);
            return Ok(Done);
        }
        None => {
            check_string_length(offset as u64, patch.len() as u64)?;
            let empty = NewValue::Str {
                bytes: b"",
                raw: true,
            };
            engine.set_key(ctx, key, None, empty, false)
        }
        Some(id) => {
            let current_len = string_of(engine.db(ctx.db).entry(id))?.len();
            if patch.is_empty() {
                reply.int(current_len as i64);
                return Ok(Done);
            }
            check_string_length(offset as u64, patch.len() as u64)?;
            id
        }
    };
    let len = engine
        .db_mut(ctx.db)
        .modify(id, |e| e.set_range(offset as usize, patch));
    ctx.changed(key, events::SETRANGE, 1);
    reply.int(len as i64);
    Ok(Done)
}

#[cfg(test)]
mod tests {
    use super::substring;

    #[test]
    fn getrange_arithmetic_matches_redis() {
        let s = b"This is a string";
        assert_eq!(substring(s, 0, 3), b"This");
        assert_eq!(substring(s, -3, -1), b"ing");
        assert_eq!(substring(s, 0, -1), s);
        assert_eq!(substring(s, 10, 100), b"string");
        assert_eq!(substring(s, -1, -5), b"");
        assert_eq!(substring(s, 5, 3), b"");
        assert_eq!(substring(b"", 0, -1), b"");
        assert_eq!(substring(s, i64::MIN, i64::MAX), s);
    }
}
