//! List commands (Redis's t_list.c): the command table and the generic cores the
//! commands share.
//!
//! The value (`listpack`, `quicklist`) and Redis's size rules are in
//! [`crate::values::list`], below the keyspace; here:
//! - `commands`: the non-blocking commands; `blocking`: BLPOP, BRPOP, BLMOVE,
//!   BRPOPLPUSH, BLMPOP, which return [`Outcome::Block`] when there is nothing to
//!   pop and are run again by the server when a key they wait on is written.
//!
//! As in t_list.c, variants share one core: every push is [`push_generic`], LPOP
//! and RPOP are [`pop_generic`], LMOVE/RPOPLPUSH/BLMOVE/BRPOPLPUSH are
//! [`lmove_generic`], LMPOP/BLMPOP/BLPOP/BRPOP pop through [`pop_from_first`].

mod blocking;

pub(crate) use blocking::parse_timeout;
mod commands;

pub use crate::values::list::{clamp_range, End, ListValue, Popped};

use ruvio_resp::{Args, Reply};

use crate::command::{
    command, flags::*, CmdResult, EngineCommand, ExecCtx, KeySpec, Outcome::Done,
};
use crate::error::CmdError;
use crate::keyspace::{Collection, EntryId};
use crate::values::list::ListShape;
use crate::Engine;

/// The list family's keyspace events (Redis's names).
pub(crate) mod events {
    use crate::command::{Event, EventClass::List};
    pub const LPUSH: Event = Event::new(List, "lpush");
    pub const RPUSH: Event = Event::new(List, "rpush");
    pub const LPOP: Event = Event::new(List, "lpop");
    pub const RPOP: Event = Event::new(List, "rpop");
    pub const LINSERT: Event = Event::new(List, "linsert");
    pub const LSET: Event = Event::new(List, "lset");
    pub const LREM: Event = Event::new(List, "lrem");
    pub const LTRIM: Event = Event::new(List, "ltrim");
}

const PUSH_COMPLEXITY: &str = "O(1) for each element added, so O(N) to add N elements when the command is called with multiple arguments.";
const MPOP_COMPLEXITY: &str =
    "O(N+M) where N is the number of provided keys and M is the number of elements returned.";

/// The list family's command table (Redis 7's arity, flags, keys, ACL categories
/// and docs).
#[rustfmt::skip]
pub const COMMANDS: &[EngineCommand] = &[
    command!("lpush", -3, WRITE | DENYOOM | FAST, KeySpec::ONE, ["write", "list", "fast"], "list", "1.0.0",
        "Prepend one or multiple elements to a list", PUSH_COMPLEXITY, commands::lpush),
    command!("rpush", -3, WRITE | DENYOOM | FAST, KeySpec::ONE, ["write", "list", "fast"], "list", "1.0.0",
        "Append one or multiple elements to a list", PUSH_COMPLEXITY, commands::rpush),
    command!("lpushx", -3, WRITE | DENYOOM | FAST, KeySpec::ONE, ["write", "list", "fast"], "list", "2.2.0",
        "Prepend an element to a list, only if the list exists", PUSH_COMPLEXITY, commands::lpushx),
    command!("rpushx", -3, WRITE | DENYOOM | FAST, KeySpec::ONE, ["write", "list", "fast"], "list", "2.2.0",
        "Append an element to a list, only if the list exists", PUSH_COMPLEXITY, commands::rpushx),
    command!("lpop", -2, WRITE | FAST, KeySpec::ONE, ["write", "list", "fast"], "list", "1.0.0",
        "Remove and get the first elements in a list", "O(N) where N is the number of elements returned",
        commands::lpop),
    command!("rpop", -2, WRITE | FAST, KeySpec::ONE, ["write", "list", "fast"], "list", "1.0.0",
        "Remove and get the last elements in a list", "O(N) where N is the number of elements returned",
        commands::rpop),
    command!("llen", 2, READONLY | FAST, KeySpec::ONE, ["read", "list", "fast"], "list", "1.0.0",
        "Get the length of a list", "O(1)", commands::llen),
    command!("lrange", 4, READONLY, KeySpec::ONE, ["read", "list", "slow"], "list", "1.0.0",
        "Get a range of elements from a list",
        "O(S+N) where S is the distance of start offset from HEAD for small lists, from nearest end (HEAD or TAIL) for large lists; and N is the number of elements in the specified range.",
        commands::lrange),
    command!("lindex", 3, READONLY, KeySpec::ONE, ["read", "list", "slow"], "list", "1.0.0",
        "Get an element from a list by its index",
        "O(N) where N is the number of elements to traverse to get to the element at index. This makes asking for the first or the last element of the list O(1).",
        commands::lindex),
    command!("lset", 4, WRITE | DENYOOM, KeySpec::ONE, ["write", "list", "slow"], "list", "1.0.0",
        "Set the value of an element in a list by its index",
        "O(N) where N is the length of the list. Setting either the first or the last element of the list is O(1).",
        commands::lset),
    command!("linsert", 5, WRITE | DENYOOM, KeySpec::ONE, ["write", "list", "slow"], "list", "2.2.0",
        "Insert an element before or after another element in a list",
        "O(N) where N is the number of elements to traverse before seeing the value pivot. This means that inserting somewhere on the left end on the list (head) can be considered O(1) and inserting somewhere on the right end (tail) is O(N).",
        commands::linsert),
    command!("lrem", 4, WRITE, KeySpec::ONE, ["write", "list", "slow"], "list", "1.0.0",
        "Remove elements from a list", "O(N+M) where N is the length of the list and M is the number of elements removed.",
        commands::lrem),
    command!("ltrim", 4, WRITE, KeySpec::ONE, ["write", "list", "slow"], "list", "1.0.0",
        "Trim a list to the specified range", "O(N) where N is the number of elements to be removed by the operation.",
        commands::ltrim),
    command!("lpos", -3, READONLY, KeySpec::ONE, ["read", "list", "slow"], "list", "6.0.6",
        "Return the index of matching elements on a list",
        "O(N) where N is the number of elements in the list, for the average case. When searching for elements near the head or the tail of the list, or when the MAXLEN option is provided, the command may run in constant time.",
        commands::lpos),
    command!("lmove", 5, WRITE | DENYOOM, KeySpec::FIRST_TWO, ["write", "list", "slow"], "list", "6.2.0",
        "Pop an element from a list, push it to another list and return it", "O(1)", commands::lmove),
    command!("rpoplpush", 3, WRITE | DENYOOM, KeySpec::FIRST_TWO, ["write", "list", "slow"], "list", "1.2.0",
        "Remove the last element in a list, prepend it to another list and return it", "O(1)",
        commands::rpoplpush),
    command!("lmpop", -4, WRITE, KeySpec::NUMKEYS_AT_1, ["write", "list", "slow"], "list", "7.0.0",
        "Pop elements from a list", MPOP_COMPLEXITY, commands::lmpop),
    command!("blpop", -3, WRITE | NOSCRIPT | BLOCKING, KeySpec::ALL_BUT_LAST, ["write", "list", "slow", "blocking"],
        "list", "2.0.0", "Remove and get the first element in a list, or block until one is available",
        "O(N) where N is the number of provided keys.", blocking::blpop),
    command!("brpop", -3, WRITE | NOSCRIPT | BLOCKING, KeySpec::ALL_BUT_LAST, ["write", "list", "slow", "blocking"],
        "list", "2.0.0", "Remove and get the last element in a list, or block until one is available",
        "O(N) where N is the number of provided keys.", blocking::brpop),
    command!("blmove", 6, WRITE | DENYOOM | NOSCRIPT | BLOCKING, KeySpec::FIRST_TWO,
        ["write", "list", "slow", "blocking"], "list", "6.2.0",
        "Pop an element from a list, push it to another list and return it; or block until one is available",
        "O(1)", blocking::blmove),
    command!("brpoplpush", 4, WRITE | DENYOOM | NOSCRIPT | BLOCKING, KeySpec::FIRST_TWO,
        ["write", "list", "slow", "blocking"], "list", "2.2.0",
        "Pop an element from a list, push it to another list and return it; or block until one is available",
        "O(1)", blocking::brpoplpush),
    command!("blmpop", -5, WRITE | BLOCKING, KeySpec::NUMKEYS_AT_2, ["write", "list", "slow", "blocking"], "list",
        "7.0.0", "Pop elements from a list, or block until one is available", MPOP_COMPLEXITY, blocking::blmpop),
];

// ---- helpers ----------------------------------------------------------------

/// `list-max-listpack-size` and `list-compress-depth` now.
fn fill(engine: &Engine) -> ListShape {
    engine.config().list_shape()
}

/// The list in entry `id` of `db`, or WRONGTYPE.
fn list_at(engine: &Engine, db: usize, id: EntryId) -> Result<&ListValue, CmdError> {
    engine
        .db(db)
        .entry(id)
        .value()
        .as_list()
        .ok_or(CmdError::WrongType)
}

/// Change the list in entry `id` of `db` (heap accounting kept), or WRONGTYPE.
fn change_list<R>(
    engine: &mut Engine,
    db: usize,
    id: EntryId,
    change: impl FnOnce(&mut ListValue) -> R,
) -> Result<R, CmdError> {
    engine
        .modify_value(db, id, |v| v.into_list().map(change))
        .ok_or(CmdError::WrongType)
}

/// `LEFT` or `RIGHT` (`getListPositionFromObjectOrReply`).
fn parse_end(arg: &[u8]) -> Result<End, CmdError> {
    if arg.eq_ignore_ascii_case(b"left") {
        Ok(End::Head)
    } else if arg.eq_ignore_ascii_case(b"right") {
        Ok(End::Tail)
    } else {
        Err(CmdError::Syntax)
    }
}

fn push_event(end: End) -> crate::command::Event {
    match end {
        End::Head => events::LPUSH,
        End::Tail => events::RPUSH,
    }
}

fn pop_event(end: End) -> crate::command::Event {
    match end {
        End::Head => events::LPOP,
        End::Tail => events::RPOP,
    }
}

/// The command a blocking or multi-key pop is logged as.
fn pop_command(end: End) -> &'static [u8] {
    match end {
        End::Head => b"LPOP",
        End::Tail => b"RPOP",
    }
}

/// `getRangeLongFromObjectOrReply(-LONG_MAX, LONG_MAX)` without a message.
fn long_arg(arg: &[u8]) -> Result<i64, CmdError> {
    match crate::args::int_arg(arg)? {
        i64::MIN => Err(CmdError::OutsideLongRange),
        n => Ok(n),
    }
}

/// A count that must be `>= 0`, else `err` (also when not an integer).
fn non_negative_arg(arg: &[u8], err: CmdError) -> Result<usize, CmdError> {
    crate::args::parse_i64(arg)
        .and_then(|n| usize::try_from(n).ok())
        .ok_or(err)
}

/// Reply with the elements `[start, stop]` (Redis's range rules), tail first when
/// `reverse` (`addListRangeReply`).
fn reply_range(reply: &mut Reply<'_>, list: &ListValue, start: i64, stop: i64, reverse: bool) {
    let len = i64::try_from(list.len()).unwrap_or(i64::MAX);
    let Some((start, stop)) = clamp_range(start, stop, len) else {
        reply.array(0);
        return;
    };
    // Both are within 0..len here.
    let (start, stop) = (start as usize, stop as usize);
    let n = stop - start + 1;
    reply.array(n);
    if reverse {
        list.iter_rev_from(stop).take(n).for_each(|e| reply.bulk(e));
    } else {
        list.iter_from(start).take(n).for_each(|e| reply.bulk(e));
    }
}

/// Redis's `listElementsRemoved` after popping `count` elements of the list at
/// `key` (the shrink check already ran inside the list): the pop event, and the
/// key deleted with a `del` event when the list is empty.
fn elements_removed(
    engine: &mut Engine,
    ctx: &mut ExecCtx,
    key: &[u8],
    id: EntryId,
    end: End,
    count: usize,
) {
    ctx.changed(key, pop_event(end), count as u64);
    if engine.delete_if_empty(ctx.db, id) {
        ctx.changed(key, crate::keys::events::DEL, 0);
    }
}

// ---- generic cores ----------------------------------------------------------

/// `pushGenericCommand`: LPUSH, RPUSH, and with `only_existing` LPUSHX, RPUSHX.
/// One conversion check for all elements, then each is pushed in order.
fn push_generic(
    engine: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    reply: &mut Reply<'_>,
    end: End,
    only_existing: bool,
) -> CmdResult {
    let key = args.get(1);
    let elems = args.tail(2);
    let fill = fill(engine);
    crate::fault::point(args.get(0), "before-write");
    let len = match engine.lookup_write(ctx, key) {
        Some(id) => change_list(engine, ctx.db, id, |l| {
            l.push_many(end, elems, fill);
            crate::fault::point(args.get(0), "mid-write");
            l.len()
        })?,
        None if only_existing => {
            reply.int(0);
            return Ok(Done);
        }
        None => {
            let mut list = ListValue::new();
            list.push_many(end, elems, fill);
            let len = list.len();
            engine.add_collection(ctx, key, Collection::List(list));
            len
        }
    };
    reply.int(len as i64);
    ctx.changed(key, push_event(end), elems.len() as u64);
    Ok(Done)
}

/// `popGenericCommand`: LPOP and RPOP, with an optional count.
fn pop_generic(
    engine: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    reply: &mut Reply<'_>,
    end: End,
) -> CmdResult {
    if args.len() > 3 {
        let name = match end {
            End::Head => "lpop",
            End::Tail => "rpop",
        };
        return Err(CmdError::WrongArity(name));
    }
    let count = match args.len() {
        3 => Some(non_negative_arg(args.get(2), CmdError::NotPositive)?),
        _ => None,
    };
    let key = args.get(1);
    let Some(id) = engine.lookup_write(ctx, key) else {
        match count {
            Some(_) => reply.null_array(),
            None => reply.null(),
        }
        return Ok(Done);
    };
    let list = list_at(engine, ctx.db, id)?;
    let fill = fill(engine);
    match count {
        Some(0) => reply.array(0),
        None => {
            let Some(popped) = change_list(engine, ctx.db, id, |l| l.pop(end, fill))? else {
                // Keys never hold empty lists; answer as for a missing key.
                reply.null();
                return Ok(Done);
            };
            reply.bulk(&popped);
            elements_removed(engine, ctx, key, id, end, 1);
        }
        Some(n) => {
            let taken = n.min(list.len());
            reply_end_range(reply, list, end, taken);
            change_list(engine, ctx.db, id, |l| l.drop_end(end, taken, fill))?;
            elements_removed(engine, ctx, key, id, end, taken);
        }
    }
    Ok(Done)
}

/// Reply with the `n` elements at `end`, in pop order.
fn reply_end_range(reply: &mut Reply<'_>, list: &ListValue, end: End, n: usize) {
    let n = i64::try_from(n).unwrap_or(i64::MAX);
    match end {
        End::Head => reply_range(reply, list, 0, n - 1, false),
        End::Tail => reply_range(reply, list, -n, -1, true),
    }
}

/// `lmoveGenericCommand`: pop at `from` of the source, push at `to` of the
/// destination (created if missing), reply with the element. Types are checked
/// before anything moves.
fn lmove_generic(
    engine: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    reply: &mut Reply<'_>,
    from: End,
    to: End,
) -> CmdResult {
    let (src, dst) = (args.get(1), args.get(2));
    let Some(src_id) = engine.lookup_write(ctx, src) else {
        reply.null();
        return Ok(Done);
    };
    let source = list_at(engine, ctx.db, src_id)?;
    if source.is_empty() {
        reply.null();
        return Ok(Done);
    }
    let source_encoding = source.encoding();
    let dst_id = engine.lookup_write(ctx, dst);
    if let Some(id) = dst_id {
        list_at(engine, ctx.db, id)?;
    }
    let fill = fill(engine);
    let moved = if dst_id == Some(src_id) {
        change_list(engine, ctx.db, src_id, |l| l.move_within(from, to, fill))?
    } else {
        let popped = change_list(engine, ctx.db, src_id, |l| l.pop(from, fill))?;
        if let Some(elem) = &popped {
            match dst_id {
                Some(id) => change_list(engine, ctx.db, id, |l| {
                    l.push_moved(to, elem, source_encoding, fill)
                })?,
                None => {
                    let mut list = ListValue::new();
                    list.push_moved(to, elem, source_encoding, fill);
                    engine.add_collection(ctx, dst, Collection::List(list));
                }
            }
        }
        popped
    };
    let Some(elem) = moved else {
        reply.null();
        return Ok(Done);
    };
    ctx.changed(dst, push_event(to), 0);
    reply.bulk(&elem);
    elements_removed(engine, ctx, src, src_id, from, 1);
    Ok(Done)
}

/// The parsed tail of LMPOP/BLMPOP: where the keys are, the end, the count.
struct MpopArgs {
    keys: std::ops::Range<usize>,
    end: End,
    count: usize,
}

/// Parse `numkeys key [key ...] LEFT|RIGHT [COUNT count]` with numkeys at
/// `numkeys_at` (`lmpopGenericCommand`).
fn parse_mpop(args: Args<'_>, numkeys_at: usize) -> Result<MpopArgs, CmdError> {
    let numkeys = crate::args::parse_i64(args.get(numkeys_at))
        .filter(|&n| n > 0)
        .ok_or(CmdError::NumkeysNotPositive)?;
    let first = numkeys_at + 1;
    let where_at = usize::try_from(numkeys)
        .ok()
        .and_then(|n| first.checked_add(n))
        .filter(|&at| at < args.len())
        .ok_or(CmdError::Syntax)?;
    let end = parse_end(args.get(where_at))?;
    let mut count = None;
    let mut j = where_at + 1;
    while j < args.len() {
        let more = j + 1 < args.len();
        if count.is_none() && more && args.get(j).eq_ignore_ascii_case(b"count") {
            j += 1;
            let n = crate::args::parse_i64(args.get(j))
                .filter(|&n| n > 0)
                .ok_or(CmdError::CountNotPositive)?;
            count = Some(usize::try_from(n).unwrap_or(usize::MAX));
        } else {
            return Err(CmdError::Syntax);
        }
        j += 1;
    }
    Ok(MpopArgs {
        keys: first..where_at,
        end,
        count: count.unwrap_or(1),
    })
}

/// How many elements a multi-key pop takes and how it answers.
#[derive(Clone, Copy)]
enum PopReply {
    /// BLPOP/BRPOP: `[key, element]`, logged as `LPOP key`.
    One,
    /// LMPOP/BLMPOP: `[key, [elements]]`, logged as `LPOP key count`.
    Range(usize),
}

/// Pop from the first of the keys at `keys` that holds a non-empty list
/// (`blockingPopGenericCommand` / `mpopGenericCommand`); a key of another type
/// fails the command. True when something was popped (and answered).
fn pop_from_first(
    engine: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    keys: std::ops::Range<usize>,
    end: End,
    how: PopReply,
    reply: &mut Reply<'_>,
) -> Result<bool, CmdError> {
    for at in keys {
        let key = args.get(at);
        let Some(id) = engine.lookup_write(ctx, key) else {
            continue;
        };
        let list = list_at(engine, ctx.db, id)?;
        if list.is_empty() {
            continue;
        }
        let fill = fill(engine);
        match how {
            PopReply::One => {
                let popped = change_list(engine, ctx.db, id, |l| l.pop(end, fill))?;
                let Some(elem) = popped else { continue };
                reply.array(2);
                reply.bulk(key);
                reply.bulk(&elem);
                elements_removed(engine, ctx, key, id, end, 1);
                ctx.log_as(&[pop_command(end), key]);
            }
            PopReply::Range(count) => {
                let taken = count.min(list.len());
                reply.array(2);
                reply.bulk(key);
                reply_end_range(reply, list, end, taken);
                change_list(engine, ctx.db, id, |l| l.drop_end(end, taken, fill))?;
                elements_removed(engine, ctx, key, id, end, taken);
                let mut digits = itoa::Buffer::new();
                ctx.log_as(&[pop_command(end), key, digits.format(taken).as_bytes()]);
            }
        }
        return Ok(true);
    }
    Ok(false)
}
