//! The generic keyspace family (Redis' db.c, expire.c and the keyspace part of
//! object.c): the command table first, then DEL/EXISTS/TYPE/TOUCH and the commands
//! that move keys around (RENAME, COPY, MOVE). Expiry commands are in [`expire`],
//! whole-database commands in [`scan`], introspection in [`object`].
//!
//! OBJECT and MEMORY are container rows without a handler; their subcommands are
//! in [`object::OBJECT_SUBCOMMANDS`] and [`object::MEMORY_SUBCOMMANDS`], resolved
//! (and routed by their own key position) before they run. The containers keep key
//! position 2 for COMMAND INFO, as Ruvio has always answered.

mod dump;
mod expire;
pub(crate) mod object;
mod scan;

use ruvio_resp::{Args, Reply};

use crate::args::{eq_ci, i32_arg};
use crate::command::{
    command, flags::*, CmdResult, EngineCommand, ExecCtx, KeySpec, MergeRule, Outcome::Done,
};
use crate::engine::Lookup;
use crate::error::CmdError;
use crate::Engine;

/// The generic family's keyspace events.
pub(crate) mod events {
    use crate::command::{Event, EventClass::Generic};
    pub const DEL: Event = Event::new(Generic, "del");
    pub const EXPIRE: Event = Event::new(Generic, "expire");
    pub const PERSIST: Event = Event::new(Generic, "persist");
    pub const RENAME_FROM: Event = Event::new(Generic, "rename_from");
    pub const RENAME_TO: Event = Event::new(Generic, "rename_to");
    pub const COPY_TO: Event = Event::new(Generic, "copy_to");
    pub const MOVE_FROM: Event = Event::new(Generic, "move_from");
    pub const MOVE_TO: Event = Event::new(Generic, "move_to");
    pub const RESTORE: Event = Event::new(Generic, "restore");
}

/// The generic family's command table.
#[rustfmt::skip]
pub const COMMANDS: &[EngineCommand] = &[
    command!("del", -2, WRITE | SPLITTABLE, KeySpec::ALL, ["keyspace", "write", "slow"], "generic", "1.0.0",
        "Delete a key",
        "O(N) where N is the number of keys that will be removed. When a key to remove holds a value other than a string, the individual complexity for this key is O(M) where M is the number of elements in the list, set, sorted set or hash. Removing a single key that holds a string value is O(1).",
        del, merge = MergeRule::SumInts),
    command!("unlink", -2, WRITE | FAST | SPLITTABLE, KeySpec::ALL, ["keyspace", "write", "fast"], "generic",
        "4.0.0", "Delete a key asynchronously in another thread. Otherwise it is just as DEL, but non blocking.",
        "O(1) for each key removed regardless of its size. Then the command does O(N) work in a different thread in order to reclaim memory, where N is the number of allocations the deleted objects where composed of.",
        del, merge = MergeRule::SumInts),
    command!("exists", -2, READONLY | FAST | SPLITTABLE, KeySpec::ALL, ["keyspace", "read", "fast"], "generic",
        "1.0.0", "Determine if a key exists", "O(N) where N is the number of keys to check.", exists,
        merge = MergeRule::SumInts),
    command!("type", 2, READONLY | FAST, KeySpec::ONE, ["keyspace", "read", "fast"], "generic", "1.0.0",
        "Determine the type stored at key", "O(1)", type_of),
    command!("touch", -2, READONLY | FAST | SPLITTABLE, KeySpec::ALL, ["keyspace", "read", "fast"], "generic",
        "3.2.1", "Alters the last access time of a key(s). Returns the number of existing keys specified.",
        "O(N) where N is the number of keys that will be touched.", touch,
        merge = MergeRule::SumInts),
    command!("ttl", 2, READONLY | FAST, KeySpec::ONE, ["keyspace", "read", "fast"], "generic", "1.0.0",
        "Get the time to live for a key in seconds", "O(1)", expire::ttl),
    command!("pttl", 2, READONLY | FAST, KeySpec::ONE, ["keyspace", "read", "fast"], "generic", "2.6.0",
        "Get the time to live for a key in milliseconds", "O(1)", expire::pttl),
    command!("expiretime", 2, READONLY | FAST, KeySpec::ONE, ["keyspace", "read", "fast"], "generic", "7.0.0",
        "Get the expiration Unix timestamp for a key", "O(1)", expire::expiretime),
    command!("pexpiretime", 2, READONLY | FAST, KeySpec::ONE, ["keyspace", "read", "fast"], "generic", "7.0.0",
        "Get the expiration Unix timestamp for a key in milliseconds", "O(1)", expire::pexpiretime),
    command!("expire", -3, WRITE | FAST, KeySpec::ONE, ["keyspace", "write", "fast"], "generic", "1.0.0",
        "Set a key's time to live in seconds", "O(1)", expire::expire),
    command!("pexpire", -3, WRITE | FAST, KeySpec::ONE, ["keyspace", "write", "fast"], "generic", "2.6.0",
        "Set a key's time to live in milliseconds", "O(1)", expire::pexpire),
    command!("expireat", -3, WRITE | FAST, KeySpec::ONE, ["keyspace", "write", "fast"], "generic", "1.2.0",
        "Set the expiration for a key as a UNIX timestamp", "O(1)", expire::expireat),
    command!("pexpireat", -3, WRITE | FAST, KeySpec::ONE, ["keyspace", "write", "fast"], "generic", "2.6.0",
        "Set the expiration for a key as a UNIX timestamp specified in milliseconds", "O(1)", expire::pexpireat),
    command!("persist", 2, WRITE | FAST, KeySpec::ONE, ["keyspace", "write", "fast"], "generic", "2.2.0",
        "Remove the expiration from a key", "O(1)", expire::persist),
    command!("rename", 3, WRITE, KeySpec::FIRST_TWO, ["keyspace", "write", "slow"], "generic", "1.0.0",
        "Rename a key", "O(1)", rename),
    command!("renamenx", 3, WRITE | FAST, KeySpec::FIRST_TWO, ["keyspace", "write", "fast"], "generic", "1.0.0",
        "Rename a key, only if the new key does not exist", "O(1)", renamenx),
    command!("copy", -3, WRITE | DENYOOM | DB_OPTION, KeySpec::FIRST_TWO, ["keyspace", "write", "slow"], "generic", "6.2.0",
        "Copy a key", "O(N) worst case for collections, where N is the number of nested items. O(1) for string values.",
        copy),
    command!("move", 3, WRITE | FAST, KeySpec::ONE, ["keyspace", "write", "fast"], "generic", "1.0.0",
        "Move a key to another database", "O(1)", move_key),
    command!("keys", 2, READONLY | ALL_SHARDS, KeySpec::NONE, ["keyspace", "read", "slow", "dangerous"], "generic",
        "1.0.0", "Find all keys matching the given pattern",
        "O(N) with N being the number of keys in the database, under the assumption that the key names in the database and the given pattern have limited length.",
        scan::keys, merge = MergeRule::ConcatArrays),
    command!("scan", -2, READONLY | ALL_SHARDS, KeySpec::NONE, ["keyspace", "read", "slow"], "generic", "2.8.0",
        "Incrementally iterate the keys space",
        "O(1) for every call. O(N) for a complete iteration, including enough command calls for the cursor to return back to 0. N is the number of elements inside the collection.",
        scan::scan, merge = MergeRule::Scan),
    command!("randomkey", 1, READONLY | ALL_SHARDS, KeySpec::NONE, ["keyspace", "read", "slow"], "generic", "1.0.0",
        "Return a random key from the keyspace", "O(1)", scan::randomkey,
        merge = MergeRule::FirstNonNull),
    command!("dbsize", 1, READONLY | FAST | ALL_SHARDS, KeySpec::NONE, ["keyspace", "read", "fast"], "server",
        "1.0.0", "Return the number of keys in the selected database", "O(1)", scan::dbsize,
        merge = MergeRule::SumInts),
    command!("flushdb", -1, WRITE | ALL_SHARDS, KeySpec::NONE, ["keyspace", "write", "slow", "dangerous"], "server",
        "1.0.0", "Remove all keys from the current database",
        "O(N) where N is the number of keys in the selected database", scan::flushdb,
        merge = MergeRule::AllOk),
    command!("flushall", -1, WRITE | ALL_SHARDS, KeySpec::NONE, ["keyspace", "write", "slow", "dangerous"],
        "server", "1.0.0", "Remove all keys from all databases",
        "O(N) where N is the total number of keys in all databases", scan::flushall,
        merge = MergeRule::AllOk),
    command!("swapdb", 3, WRITE | FAST | ALL_SHARDS, KeySpec::NONE, ["keyspace", "write", "fast", "dangerous"],
        "server", "4.0.0", "Swaps two Redis databases",
        "O(N) where N is the count of clients watching or blocking on keys from both databases.", scan::swapdb,
        merge = MergeRule::AllOk),
    command!("object", -2, 0, KeySpec::NONE, ["slow"], "generic", "2.2.3",
        "A container for object introspection commands", "Depends on subcommand.",
        subcommands = object::OBJECT_SUBCOMMANDS),
    command!("memory", -2, 0, KeySpec::NONE, ["slow"], "server", "4.0.0",
        "A container for memory diagnostics commands", "Depends on subcommand.",
        subcommands = object::MEMORY_SUBCOMMANDS),
    command!("dump", 2, READONLY, KeySpec::ONE, ["keyspace", "read", "slow"], "generic", "2.6.0",
        "Return a serialized version of the value stored at the specified key.",
        "O(1) to access the key and additional O(N*M) to serialize it, where N is the number of Redis objects composing the value and M their average size. For small string values the time complexity is thus O(1)+O(1*M) where M is small, so simply O(1).",
        dump::dump),
    command!("restore", -4, WRITE | DENYOOM, KeySpec::ONE, ["keyspace", "write", "slow", "dangerous"], "generic",
        "2.6.0", "Create a key using the provided serialized value, previously obtained using DUMP.",
        "O(1) to create the new key and additional O(N*M) to reconstruct the serialized value, where N is the number of Redis objects composing the value and M their average size. For small string values the time complexity is thus O(1)+O(1*M) where M is small, so simply O(1). However for sorted set values the complexity is O(N*M*log(N)) because inserting values into sorted sets is O(log(N)).",
        dump::restore),
    command!("restore-asking", -4, WRITE | DENYOOM | ASKING, KeySpec::ONE, ["keyspace", "write", "slow", "dangerous"], "server",
        "3.0.0", "An internal command for migrating keys in a cluster",
        "O(1) to create the new key and additional O(N*M) to reconstruct the serialized value, where N is the number of Redis objects composing the value and M their average size. For small string values the time complexity is thus O(1)+O(1*M) where M is small, so simply O(1). However for sorted set values the complexity is O(N*M*log(N)) because inserting values into sorted sets is O(log(N)).",
        dump::restore),
];

/// `DEL key [key ...]` and `UNLINK key [key ...]`: the number of keys removed.
fn del(engine: &mut Engine, ctx: &mut ExecCtx, args: Args<'_>, reply: &mut Reply<'_>) -> CmdResult {
    let mut deleted = 0;
    for key in args.iter().skip(1) {
        let Some(id) = engine.db(ctx.db).find(key) else {
            continue;
        };
        if engine.is_expired(ctx.db, id, ctx.now_ms) {
            engine.expire_now(ctx.db, id);
        } else {
            engine.delete(ctx.db, id);
            ctx.changed(key, events::DEL, 1);
            deleted += 1;
        }
    }
    reply.int(deleted);
    Ok(Done)
}

/// `EXISTS key [key ...]`: how many of the keys exist (repeats count again).
fn exists(
    engine: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> CmdResult {
    let count = args
        .iter()
        .skip(1)
        .filter(|key| {
            engine
                .lookup(ctx, ctx.db, key, Lookup::READ_NOTOUCH)
                .is_some()
        })
        .count();
    reply.int(count as i64);
    Ok(Done)
}

/// `TOUCH key [key ...]`: update the access time; how many exist.
fn touch(
    engine: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> CmdResult {
    // TOUCH touches even for CLIENT NO-TOUCH clients, as in Redis.
    let no_touch = std::mem::replace(&mut ctx.no_touch, false);
    let touched = args
        .iter()
        .skip(1)
        .filter(|key| engine.lookup(ctx, ctx.db, key, Lookup::READ).is_some())
        .count();
    ctx.no_touch = no_touch;
    reply.int(touched as i64);
    Ok(Done)
}

/// `TYPE key`: `string`, ... or `none`.
fn type_of(
    engine: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> CmdResult {
    match engine.lookup(ctx, ctx.db, args.get(1), Lookup::READ_NOTOUCH) {
        Some(id) => reply.simple(engine.db(ctx.db).entry(id).value().value_type().name()),
        None => reply.simple("none"),
    }
    Ok(Done)
}

/// `RENAME key newkey`
fn rename(
    engine: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> CmdResult {
    rename_generic(engine, ctx, args, false)?;
    reply.ok();
    Ok(Done)
}

/// `RENAMENX key newkey`: 1 when renamed, 0 when `newkey` exists.
fn renamenx(
    engine: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> CmdResult {
    let renamed = rename_generic(engine, ctx, args, true)?;
    reply.int(renamed as i64);
    Ok(Done)
}

/// Redis' `renameGenericCommand`: the value, TTL and access time move to `newkey`.
fn rename_generic(
    engine: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    nx: bool,
) -> Result<bool, CmdError> {
    let (from, to) = (args.get(1), args.get(2));
    let id = engine.lookup_write(ctx, from).ok_or(CmdError::NoSuchKey)?;
    if from == to {
        return Ok(!nx);
    }
    if let Some(target) = engine.lookup_write(ctx, to) {
        if nx {
            return Ok(false);
        }
        engine.delete(ctx.db, target);
    }
    // Redis adds the new name afresh (dbAdd): a `new` event even over a deleted key.
    engine.log_new(ctx, ctx.db, to);
    engine.db_mut(ctx.db).rename(id, to);
    ctx.changed(from, events::RENAME_FROM, 1);
    ctx.changed(to, events::RENAME_TO, 0);
    Ok(true)
}

/// `COPY source destination [DB destination-db] [REPLACE]`: 1 when copied.
fn copy(
    engine: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> CmdResult {
    let copied = copy_body(engine, ctx, args)?;
    reply.int(copied as i64);
    Ok(Done)
}

fn copy_body(engine: &mut Engine, ctx: &mut ExecCtx, args: Args<'_>) -> Result<bool, CmdError> {
    let (mut replace, mut dst_db) = (false, ctx.db);
    let mut j = 3;
    while j < args.len() {
        if eq_ci(args.get(j), "REPLACE") {
            replace = true;
        } else if eq_ci(args.get(j), "DB") && j + 1 < args.len() {
            dst_db = db_index(engine, args.get(j + 1))?;
            j += 1;
        } else {
            return Err(CmdError::Syntax);
        }
        j += 1;
    }
    let (src, dst) = (args.get(1), args.get(2));
    if dst_db == ctx.db && src == dst {
        return Err(CmdError::SameObject);
    }
    let Some(id) = engine.lookup_read(ctx, src) else {
        return Ok(false);
    };
    if let Some(existing) = engine.lookup(ctx, dst_db, dst, Lookup::WRITE) {
        if !replace {
            return Ok(false);
        }
        engine.delete(dst_db, existing);
    }
    let clock = engine.new_clock(ctx.now_ms);
    let copy = engine.db(ctx.db).entry(id).duplicate(dst, clock);
    engine.log_new(ctx, dst_db, dst);
    engine.db_mut(dst_db).insert(copy);
    ctx.changed_in(dst_db, dst, events::COPY_TO, 1);
    Ok(true)
}

/// `MOVE key db`: 1 when moved, 0 when missing here or present there.
fn move_key(
    engine: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> CmdResult {
    let moved = move_body(engine, ctx, args)?;
    reply.int(moved as i64);
    Ok(Done)
}

fn move_body(engine: &mut Engine, ctx: &mut ExecCtx, args: Args<'_>) -> Result<bool, CmdError> {
    let key = args.get(1);
    let dst_db = db_index(engine, args.get(2))?;
    if dst_db == ctx.db {
        return Err(CmdError::SameObject);
    }
    let Some(id) = engine.lookup_write(ctx, key) else {
        return Ok(false);
    };
    if engine.lookup(ctx, dst_db, key, Lookup::WRITE).is_some() {
        return Ok(false);
    }
    engine.log_new(ctx, dst_db, key);
    engine.move_entry(ctx.db, id, dst_db);
    ctx.changed(key, events::MOVE_FROM, 1);
    ctx.changed_in(dst_db, key, events::MOVE_TO, 0);
    Ok(true)
}

/// A DB index argument of MOVE/COPY: not an int -> `value is not an integer or out
/// of range`; outside the databases -> `DB index is out of range`.
fn db_index(engine: &Engine, arg: &[u8]) -> Result<usize, CmdError> {
    let id = i32_arg(arg, CmdError::NotInteger)?;
    usize::try_from(id)
        .ok()
        .filter(|&i| i < engine.db_count())
        .ok_or(CmdError::DbIndexOutOfRange)
}
