//! Set commands (Redis's t_set.c): the command table, the helpers and the generic
//! cores the commands share.
//!
//! The value (`intset`, `listpack`, `hashtable`) and Redis's conversion rules are
//! in [`crate::values::set`], below the keyspace; here:
//! - `commands`: the handlers. As in t_set.c, variants share one core: SINTER,
//!   SINTERSTORE and SINTERCARD are [`inter_generic`]; SUNION, SDIFF and their
//!   STORE forms (and SPOP taking everything) are [`union_diff_generic`].

mod commands;

pub use crate::values::set::{SetEncoding, SetLimits, SetValue};

use ruvio_resp::{Args, Reply};

use crate::command::{
    command, flags::*, CmdResult, EngineCommand, ExecCtx, KeySpec, Outcome::Done,
};
use crate::error::CmdError;
use crate::keyspace::{Collection, EntryId};
use crate::value::StrRef;
use crate::Engine;

/// The set family's keyspace events (Redis's names).
pub(crate) mod events {
    use crate::command::{Event, EventClass::Set};
    pub const SADD: Event = Event::new(Set, "sadd");
    pub const SREM: Event = Event::new(Set, "srem");
    pub const SPOP: Event = Event::new(Set, "spop");
    pub const SINTERSTORE: Event = Event::new(Set, "sinterstore");
    pub const SUNIONSTORE: Event = Event::new(Set, "sunionstore");
    pub const SDIFFSTORE: Event = Event::new(Set, "sdiffstore");
}

const INTER_COMPLEXITY: &str =
    "O(N*M) worst case where N is the cardinality of the smallest set and M is the number of sets.";
const UNION_COMPLEXITY: &str = "O(N) where N is the total number of elements in all given sets.";

/// The set family's command table (Redis 7's arity, flags, keys, ACL categories
/// and docs).
#[rustfmt::skip]
pub const COMMANDS: &[EngineCommand] = &[
    command!("sadd", -3, WRITE | DENYOOM | FAST, KeySpec::ONE, ["write", "set", "fast"], "set", "1.0.0",
        "Add one or more members to a set",
        "O(1) for each element added, so O(N) to add N elements when the command is called with multiple arguments.",
        commands::sadd),
    command!("srem", -3, WRITE | FAST, KeySpec::ONE, ["write", "set", "fast"], "set", "1.0.0",
        "Remove one or more members from a set", "O(N) where N is the number of members to be removed.",
        commands::srem),
    command!("sismember", 3, READONLY | FAST, KeySpec::ONE, ["read", "set", "fast"], "set", "1.0.0",
        "Determine if a given value is a member of a set", "O(1)", commands::sismember),
    command!("smismember", -3, READONLY | FAST, KeySpec::ONE, ["read", "set", "fast"], "set", "6.2.0",
        "Returns the membership associated with the given elements for a set",
        "O(N) where N is the number of elements being checked for membership", commands::smismember),
    command!("smembers", 2, READONLY, KeySpec::ONE, ["read", "set", "slow"], "set", "1.0.0",
        "Get all the members in a set", "O(N) where N is the set cardinality.", commands::smembers),
    command!("scard", 2, READONLY | FAST, KeySpec::ONE, ["read", "set", "fast"], "set", "1.0.0",
        "Get the number of members in a set", "O(1)", commands::scard),
    command!("spop", -2, WRITE | FAST, KeySpec::ONE, ["write", "set", "fast"], "set", "1.0.0",
        "Remove and return one or multiple random members from a set",
        "Without the count argument O(1), otherwise O(N) where N is the value of the passed count.",
        commands::spop),
    command!("srandmember", -2, READONLY, KeySpec::ONE, ["read", "set", "slow"], "set", "1.0.0",
        "Get one or multiple random members from a set",
        "Without the count argument O(1), otherwise O(N) where N is the absolute value of the passed count.",
        commands::srandmember),
    command!("smove", 4, WRITE | FAST, KeySpec::FIRST_TWO, ["write", "set", "fast"], "set", "1.0.0",
        "Move a member from one set to another", "O(1)", commands::smove),
    command!("sinter", -2, READONLY, KeySpec::ALL, ["read", "set", "slow"], "set", "1.0.0",
        "Intersect multiple sets", INTER_COMPLEXITY, commands::sinter),
    command!("sintercard", -3, READONLY, KeySpec::NUMKEYS_AT_1, ["read", "set", "slow"], "set", "7.0.0",
        "Intersect multiple sets and return the cardinality of the result", INTER_COMPLEXITY,
        commands::sintercard),
    command!("sunion", -2, READONLY, KeySpec::ALL, ["read", "set", "slow"], "set", "1.0.0",
        "Add multiple sets", UNION_COMPLEXITY, commands::sunion),
    command!("sdiff", -2, READONLY, KeySpec::ALL, ["read", "set", "slow"], "set", "1.0.0",
        "Subtract multiple sets", UNION_COMPLEXITY, commands::sdiff),
    command!("sinterstore", -3, WRITE | DENYOOM, KeySpec::ALL, ["write", "set", "slow"], "set", "1.0.0",
        "Intersect multiple sets and store the resulting set in a key", INTER_COMPLEXITY,
        commands::sinterstore),
    command!("sunionstore", -3, WRITE | DENYOOM, KeySpec::ALL, ["write", "set", "slow"], "set", "1.0.0",
        "Add multiple sets and store the resulting set in a key", UNION_COMPLEXITY, commands::sunionstore),
    command!("sdiffstore", -3, WRITE | DENYOOM, KeySpec::ALL, ["write", "set", "slow"], "set", "1.0.0",
        "Subtract multiple sets and store the resulting set in a key", UNION_COMPLEXITY, commands::sdiffstore),
    command!("sscan", -3, READONLY, KeySpec::ONE, ["read", "set", "slow"], "set", "2.8.0",
        "Incrementally iterate Set elements",
        "O(1) for every call. O(N) for a complete iteration, including enough command calls for the cursor to return back to 0. N is the number of elements inside the collection..",
        commands::sscan),
];

// ---- helpers ----------------------------------------------------------------

/// The `set-max-*` thresholds now.
fn limits(engine: &Engine) -> SetLimits {
    let c = engine.config();
    SetLimits {
        intset_entries: c.set_max_intset_entries,
        listpack_entries: c.set_max_listpack_entries,
        listpack_value: c.set_max_listpack_value,
    }
}

/// The set in entry `id` of `db`, or WRONGTYPE.
fn set_at(engine: &Engine, db: usize, id: EntryId) -> Result<&SetValue, CmdError> {
    engine
        .db(db)
        .entry(id)
        .value()
        .as_set()
        .ok_or(CmdError::WrongType)
}

/// Change the set in entry `id` of `db` (heap accounting kept), or WRONGTYPE.
fn change_set<R>(
    engine: &mut Engine,
    db: usize,
    id: EntryId,
    change: impl FnOnce(&mut SetValue) -> R,
) -> Result<R, CmdError> {
    engine
        .modify_value(db, id, |v| v.into_set().map(change))
        .ok_or(CmdError::WrongType)
}

/// Delete the set at `key` when it was left empty, with Redis's `del` event.
fn delete_if_empty(engine: &mut Engine, ctx: &mut ExecCtx, key: &[u8], id: EntryId) -> bool {
    let gone = engine.delete_if_empty(ctx.db, id);
    if gone {
        ctx.changed(key, crate::keys::events::DEL, 0);
    }
    gone
}

/// Reply with every member of `set`, as a set (RESP3 `~`).
fn reply_members(reply: &mut Reply<'_>, set: &SetValue) {
    reply.set(set.len());
    set.iter().for_each(|m| m.reply(reply));
}

/// The sets named by `keys` (argument indexes), looked up for reading in order:
/// `None` for a missing key, WRONGTYPE as soon as a key of another type is met
/// (as Redis's lookup loops, which check each key as they go).
fn lookup_sets(
    engine: &mut Engine,
    ctx: &ExecCtx,
    args: Args<'_>,
    keys: std::ops::Range<usize>,
) -> Result<Vec<Option<EntryId>>, CmdError> {
    let mut ids = Vec::with_capacity(keys.len());
    for at in keys {
        let id = engine.lookup_read(ctx, args.get(at));
        if let Some(id) = id {
            set_at(engine, ctx.db, id)?;
        }
        ids.push(id);
    }
    Ok(ids)
}

/// Redis's `setKey` for a STORE result, or `dbDelete` of the destination when
/// the result is empty; replies with the result's size and records the effects.
fn store_result(
    engine: &mut Engine,
    ctx: &mut ExecCtx,
    dst: &[u8],
    result: SetValue,
    event: crate::command::Event,
    reply: &mut Reply<'_>,
) {
    let existing = engine.lookup_write(ctx, dst);
    if let Some(id) = existing {
        engine.delete(ctx.db, id);
    }
    if result.is_empty() {
        reply.int(0);
        if existing.is_some() {
            ctx.changed(dst, crate::keys::events::DEL, 1);
        }
        return;
    }
    reply.int(result.len() as i64);
    engine.add_collection(ctx, dst, Collection::Set(result));
    ctx.changed(dst, event, 1);
}

// ---- generic cores ----------------------------------------------------------

/// What an intersection does with its result.
#[derive(Clone, Copy)]
enum InterMode<'a> {
    /// SINTER: reply with the members.
    Reply,
    /// SINTERCARD: reply with how many, stopping at `limit` (0: no limit).
    Card(usize),
    /// SINTERSTORE: store under this key.
    Store(&'a [u8]),
}

/// `sinterGenericCommand`: SINTER, SINTERCARD, SINTERSTORE over the keys at
/// `keys`. The smallest set is walked (stable sort by size, as Redis's qsort on
/// glibc) and each member tested against the others.
fn inter_generic(
    engine: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    keys: std::ops::Range<usize>,
    mode: InterMode<'_>,
    reply: &mut Reply<'_>,
) -> CmdResult {
    let ids = lookup_sets(engine, ctx, args, keys)?;
    let limits = limits(engine);
    if ids.iter().any(Option::is_none) {
        match mode {
            InterMode::Reply => reply.set(0),
            InterMode::Card(_) => reply.int(0),
            InterMode::Store(dst) => store_result(
                engine,
                ctx,
                dst,
                SetValue::new_listpack(),
                events::SINTERSTORE,
                reply,
            ),
        }
        return Ok(Done);
    }
    let mut ids: Vec<EntryId> = ids.into_iter().flatten().collect();
    let db = engine.db(ctx.db);
    let set_of = |id: EntryId| db.entry(id).value().as_set();
    ids.sort_by_key(|&id| set_of(id).map_or(0, SetValue::len));
    let sets: Vec<(EntryId, &SetValue)> = ids
        .iter()
        .filter_map(|&id| set_of(id).map(|s| (id, s)))
        .collect();
    let (first_id, first) = sets[0];
    let mut digits = itoa::Buffer::new();
    let in_all = |m: &StrRef<'_>, digits: &mut itoa::Buffer| {
        let bytes = m.bytes(digits);
        sets[1..]
            .iter()
            .all(|&(id, s)| id == first_id || s.contains(bytes))
    };
    match mode {
        InterMode::Reply => {
            let found: Vec<StrRef<'_>> = first.iter().filter(|m| in_all(m, &mut digits)).collect();
            reply.set(found.len());
            found.iter().for_each(|m| m.reply(reply));
        }
        InterMode::Card(limit) => {
            let mut n = 0usize;
            for m in first.iter() {
                if in_all(&m, &mut digits) {
                    n += 1;
                    if limit != 0 && n >= limit {
                        break;
                    }
                }
            }
            reply.int(n as i64);
        }
        InterMode::Store(dst) => {
            let mut result = match first.encoding() {
                SetEncoding::Intset => SetValue::new_intset(),
                SetEncoding::Listpack | SetEncoding::Hashtable => SetValue::new_listpack(),
            };
            let mut only_integers = true;
            for m in first.iter() {
                if in_all(&m, &mut digits) {
                    let bytes = m.bytes(&mut digits);
                    only_integers &= crate::values::set::value::int_member(bytes).is_some();
                    result.add(bytes, &limits);
                }
            }
            if only_integers {
                result.maybe_convert_to_intset(&limits);
            }
            store_result(engine, ctx, dst, result, events::SINTERSTORE, reply);
        }
    }
    Ok(Done)
}

/// Which algebra [`union_diff_generic`] computes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum SetOp {
    Union,
    Diff,
}

/// `sunionDiffGenericCommand`: the union or difference of the sets at `keys`,
/// built as Redis builds it (so a STORE result has Redis's encoding): an intset
/// that converts as members arrive, or, when replying and some input is not an
/// intset, a hash table. Returns the result; the caller replies or stores.
fn union_diff_generic(
    engine: &mut Engine,
    ctx: &ExecCtx,
    args: Args<'_>,
    keys: std::ops::Range<usize>,
    op: SetOp,
    storing: bool,
) -> Result<SetValue, CmdError> {
    let ids = lookup_sets(engine, ctx, args, keys)?;
    let limits = limits(engine);
    let db = engine.db(ctx.db);
    let sets: Vec<Option<(EntryId, &SetValue)>> = ids
        .iter()
        .map(|id| id.and_then(|id| db.entry(id).value().as_set().map(|s| (id, s))))
        .collect();
    let all_intsets = sets
        .iter()
        .flatten()
        .all(|(_, s)| s.encoding() == SetEncoding::Intset);
    let mut result = if storing || all_intsets {
        SetValue::new_intset()
    } else {
        SetValue::new_hashtable(0)
    };
    let mut digits = itoa::Buffer::new();
    match op {
        SetOp::Union => {
            for (_, s) in sets.iter().flatten() {
                for m in s.iter() {
                    result.add(m.bytes(&mut digits), &limits);
                }
            }
        }
        SetOp::Diff => {
            let Some(Some((first_id, first))) = sets.first().copied() else {
                return Ok(result);
            };
            let same = sets[1..].iter().flatten().any(|&(id, _)| id == first_id);
            if same {
                return Ok(result);
            }
            // Redis picks the algorithm by estimated work; the choice shows in
            // the STORE result's encoding (algorithm 2 adds the whole first set
            // before removing), so it is made the same way here.
            let present = sets.iter().flatten().count();
            let algo_one_work = present * first.len() / 2;
            let algo_two_work: usize = sets.iter().flatten().map(|(_, s)| s.len()).sum();
            if algo_one_work <= algo_two_work {
                for m in first.iter() {
                    let bytes = m.bytes(&mut digits);
                    if !sets[1..].iter().flatten().any(|(_, s)| s.contains(bytes)) {
                        result.add(bytes, &limits);
                    }
                }
            } else {
                for m in first.iter() {
                    result.add(m.bytes(&mut digits), &limits);
                }
                for (_, s) in sets[1..].iter().flatten() {
                    if result.is_empty() {
                        break;
                    }
                    for m in s.iter() {
                        result.remove(m.bytes(&mut digits));
                    }
                }
            }
        }
    }
    Ok(result)
}

/// SUNION/SDIFF (reply) and SUNIONSTORE/SDIFFSTORE (store at argument 1).
fn union_diff_command(
    engine: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    reply: &mut Reply<'_>,
    op: SetOp,
    store: bool,
) -> CmdResult {
    let first_key = if store { 2 } else { 1 };
    let result = union_diff_generic(engine, ctx, args, first_key..args.len(), op, store)?;
    if store {
        let event = match op {
            SetOp::Union => events::SUNIONSTORE,
            SetOp::Diff => events::SDIFFSTORE,
        };
        store_result(engine, ctx, args.get(1), result, event, reply);
    } else {
        reply_members(reply, &result);
    }
    Ok(Done)
}
