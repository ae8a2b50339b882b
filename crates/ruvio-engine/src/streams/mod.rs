//! Stream commands (Redis's t_stream.c); the value they change is
//! [`crate::values::stream`], below the keyspace.
//!
//! Why now and why this shape: BullMQ's queue events (and most job queues built on
//! Redis) append to a stream with `XADD ... MAXLEN ~ n`, and listeners follow it
//! with `XREAD BLOCK`.
//!
//! - [`id`]: Redis's rules for reading entry IDs from arguments.
//! - `commands`: XADD, XLEN, XRANGE, XREVRANGE, XDEL, XTRIM, XSETID;
//!   `read`: XREAD, which blocks through [`Outcome::Block`] like BLPOP and is run
//!   again by the server when a key it waits on is written.
//!
//! - `group_commands`: XGROUP, XACK, XPENDING, XCLAIM, XAUTOCLAIM;
//!   `readgroup`: XREADGROUP (blocking as XREAD); `info`: XINFO.
//! - `deletion`: Redis 8.2's XDELEX and XACKDEL, and the KEEPREF / DELREF /
//!   ACKED policies over the groups' references to deleted entries.
//!
//! [`Outcome::Block`]: crate::command::Outcome::Block

pub(crate) use crate::values::stream::{groups, value};
pub(crate) mod id;

mod commands;
mod deletion;
mod group_commands;
mod info;
mod read;
mod readgroup;

pub use crate::values::stream::StreamValue;

use ruvio_resp::Reply;

use crate::command::{command, flags::*, EngineCommand, KeyShape, KeySpec};
use crate::error::CmdError;
use crate::keyspace::EntryId;
use crate::Engine;
use smallvec::SmallVec;
use value::EntryRef;

/// The stream family's keyspace events (Redis's names).
pub(crate) mod events {
    use crate::command::{Event, EventClass::Stream};
    pub const XADD: Event = Event::new(Stream, "xadd");
    pub const XTRIM: Event = Event::new(Stream, "xtrim");
    pub const XDEL: Event = Event::new(Stream, "xdel");
    pub const XSETID: Event = Event::new(Stream, "xsetid");
    pub const XGROUP_CREATE: Event = Event::new(Stream, "xgroup-create");
    pub const XGROUP_SETID: Event = Event::new(Stream, "xgroup-setid");
    pub const XGROUP_DESTROY: Event = Event::new(Stream, "xgroup-destroy");
    pub const XGROUP_CREATECONSUMER: Event = Event::new(Stream, "xgroup-createconsumer");
    pub const XGROUP_DELCONSUMER: Event = Event::new(Stream, "xgroup-delconsumer");
}

/// The stream family's error texts (Redis 7's).
pub(crate) mod errors {
    pub const INVALID_ID: &str = "ERR Invalid stream ID specified as stream command argument";
    pub const ID_ZERO: &str = "ERR The ID specified in XADD must be greater than 0-0";
    pub const ID_TOO_SMALL: &str =
        "ERR The ID specified in XADD is equal or smaller than the target stream top item";
    pub const IDS_EXHAUSTED: &str =
        "ERR The stream has exhausted the last possible ID, unable to add more items";
    pub const MAXLEN_NEGATIVE: &str = "ERR The MAXLEN argument must be >= 0.";
    pub const LIMIT_NEGATIVE: &str = "ERR The LIMIT argument must be >= 0.";
    pub const LIMIT_WITHOUT_STRATEGY: &str =
        "ERR syntax error, LIMIT cannot be used without specifying a trimming strategy";
    pub const LIMIT_WITHOUT_APPROX: &str =
        "ERR syntax error, LIMIT cannot be used without the special ~ option";
    pub const START_INVALID: &str = "ERR invalid start ID for the interval";
    pub const END_INVALID: &str = "ERR invalid end ID for the interval";
    /// Redis 7.0's text (7.2 names the command as `'xread'`).
    pub const XREAD_UNBALANCED: &str =
        "ERR Unbalanced XREAD list of streams: for each stream key an ID or '$' must be specified.";
    pub const XSETID_SMALLER: &str =
        "ERR The ID specified in XSETID is smaller than the target stream top item";
    pub const XSETID_BELOW_DELETED: &str =
        "ERR The ID specified in XSETID is smaller than the provided max_deleted_entry_id";
    pub const XSETID_ADDED_NEGATIVE: &str = "ERR entries_added must be positive";
    pub const XSETID_ADDED_TOO_SMALL: &str =
        "ERR The entries_added specified in XSETID is smaller than the target stream length";
    pub const ENTRIES_READ_NEGATIVE: &str = "ERR value for ENTRIESREAD must be positive or -1";
    pub const XGROUP_NO_KEY: &str = "ERR The XGROUP subcommand requires the key to exist. \
        Note that for CREATE you may want to use the MKSTREAM option to create an empty stream \
        automatically.";
    pub const BUSYGROUP: &str = "BUSYGROUP Consumer Group name already exists";
    pub const XCLAIM_MIN_IDLE: &str = "ERR Invalid min-idle-time argument for XCLAIM";
    pub const XCLAIM_IDLE: &str = "ERR Invalid IDLE option argument for XCLAIM";
    pub const XCLAIM_TIME: &str = "ERR Invalid TIME option argument for XCLAIM";
    pub const XCLAIM_RETRYCOUNT: &str = "ERR Invalid RETRYCOUNT option argument for XCLAIM";
    pub const XAUTOCLAIM_MIN_IDLE: &str = "ERR Invalid min-idle-time argument for XAUTOCLAIM";
    pub const XAUTOCLAIM_COUNT: &str = "ERR COUNT must be > 0";
    pub const XREAD_GROUP_OPTION: &str =
        "ERR The GROUP option is only supported by XREADGROUP. You called XREAD instead.";
    pub const XREAD_NOACK_OPTION: &str =
        "ERR The NOACK option is only supported by XREADGROUP. You called XREAD instead.";
    pub const XREADGROUP_NO_GROUP: &str = "ERR Missing GROUP option for XREADGROUP";
    pub const XREADGROUP_DOLLAR: &str = "ERR The $ ID is meaningless in the context of \
        XREADGROUP: you want to read the history of this consumer by specifying a proper ID, or \
        use the > ID to get new messages. The $ ID would just return an empty result set.";
    /// Redis 7.4's, which reads `+` in XREAD as the last entry.
    pub const XREADGROUP_PLUS: &str = "ERR The + ID is meaningless in the context of \
        XREADGROUP: you want to read the history of this consumer by specifying a proper ID, or \
        use the > ID to get new messages. The + ID would just return an empty result set.";
    /// Redis 7.4's: XSETID never goes below an entry ID that was deleted.
    pub const XSETID_BELOW_MAX_DELETED: &str =
        "ERR The ID specified in XSETID is smaller than current max_deleted_entry_id";
    pub const BLOCKED_NOGROUP: &str =
        "NOGROUP the consumer group this client was blocked on no longer exists";
    pub const BLOCKED_KEY_GONE: &str = "UNBLOCKED the stream key no longer exists";
    pub const XREAD_GT: &str = "ERR The > ID can be specified only when calling XREADGROUP \
        using the GROUP <group> <consumer> option.";
}

/// XREAD's keys: the first half of what follows `STREAMS`.
const XREAD_KEYS: KeySpec = KeySpec(&[KeyShape::KeywordHalf {
    keyword: "STREAMS",
    from: 1,
}]);

/// XREADGROUP's keys: the first half of what follows `STREAMS` (searched from
/// after `GROUP group consumer`, as Redis's key spec).
const XREADGROUP_KEYS: KeySpec = KeySpec(&[KeyShape::KeywordHalf {
    keyword: "STREAMS",
    from: 4,
}]);

/// The stream family's command table (Redis 7's arity, flags, keys, ACL categories
/// and docs).
#[rustfmt::skip]
pub const COMMANDS: &[EngineCommand] = &[
    command!("xadd", -5, WRITE | DENYOOM | FAST, KeySpec::ONE, ["write", "stream", "fast"], "stream", "5.0.0",
        "Appends a new entry to a stream",
        "O(1) when adding a new entry, O(N) when trimming where N being the number of entries evicted.",
        commands::xadd),
    command!("xlen", 2, READONLY | FAST, KeySpec::ONE, ["read", "stream", "fast"], "stream", "5.0.0",
        "Return the number of entries in a stream", "O(1)", commands::xlen),
    command!("xrange", -4, READONLY, KeySpec::ONE, ["read", "stream", "slow"], "stream", "5.0.0",
        "Return a range of elements in a stream, with IDs matching the specified IDs interval",
        "O(N) with N being the number of elements being returned. If N is constant (e.g. always asking for the first 10 elements with COUNT), you can consider it O(1).",
        commands::xrange),
    command!("xrevrange", -4, READONLY, KeySpec::ONE, ["read", "stream", "slow"], "stream", "5.0.0",
        "Return a range of elements in a stream, with IDs matching the specified IDs interval, in reverse order (from greater to smaller IDs) compared to XRANGE",
        "O(N) with N being the number of elements returned. If N is constant (e.g. always asking for the first 10 elements with COUNT), you can consider it O(1).",
        commands::xrevrange),
    command!("xdel", -3, WRITE | FAST, KeySpec::ONE, ["write", "stream", "fast"], "stream", "5.0.0",
        "Removes the specified entries from the stream. Returns the number of items actually deleted, that may be different from the number of IDs passed in case certain IDs do not exist.",
        "O(1) for each single item to delete in the stream, regardless of the stream size.",
        commands::xdel),
    command!("xtrim", -4, WRITE, KeySpec::ONE, ["write", "stream", "slow"], "stream", "5.0.0",
        "Trims the stream to (approximately if '~' is passed) a certain size",
        "O(N), with N being the number of evicted entries. Constant times are very small however, since entries are organized in macro nodes containing multiple entries that can be released with a single deallocation.",
        commands::xtrim),
    command!("xsetid", -3, WRITE | DENYOOM | FAST, KeySpec::ONE, ["write", "stream", "fast"], "stream", "5.0.0",
        "An internal command for replicating stream values", "O(1)", commands::xsetid),
    command!("xread", -4, READONLY | BLOCKING, XREAD_KEYS, ["read", "stream", "slow", "blocking"], "stream",
        "5.0.0", "Return never seen elements in multiple streams, with IDs greater than the ones reported by the caller for each stream. Can block.",
        "For each stream mentioned: O(N) with N being the number of elements being returned, it means that XREAD-ing with a fixed COUNT is O(1). Note that when the BLOCK option is used, XADD will pay O(M) time in order to serve the M clients blocked on the stream getting new data.", read::xread),
    command!("xreadgroup", -7, WRITE | BLOCKING, XREADGROUP_KEYS, ["write", "stream", "slow", "blocking"],
        "stream", "5.0.0", "Return new entries from a stream using a consumer group, or access the history of the pending entries for a given consumer. Can block.",
        "For each stream mentioned: O(M) with M being the number of elements returned. If M is constant (e.g. always asking for the first 10 elements with COUNT), you can consider it O(1). On the other side when XREADGROUP blocks, XADD will pay the O(N) time in order to serve the N clients blocked on the stream getting new data.",
        readgroup::xreadgroup),
    command!("xgroup", -2, 0, KeySpec::NONE, ["slow"], "stream", "5.0.0",
        "A container for consumer groups commands", "Depends on subcommand.",
        subcommands = XGROUP_SUBCOMMANDS),
    command!("xack", -4, WRITE | FAST, KeySpec::ONE, ["write", "stream", "fast"], "stream", "5.0.0",
        "Marks a pending message as correctly processed, effectively removing it from the pending entries list of the consumer group. Return value of the command is the number of messages successfully acknowledged, that is, the IDs we were actually able to resolve in the PEL.",
        "O(1) for each message ID processed.", group_commands::xack),
    command!("xpending", -3, READONLY, KeySpec::ONE, ["read", "stream", "slow"], "stream", "5.0.0",
        "Return information and entries from a stream consumer group pending entries list, that are messages fetched but never acknowledged.",
        "O(N) with N being the number of elements returned, so asking for a small fixed number of entries per call is O(1). O(M), where M is the total number of entries scanned when used with the IDLE filter. When the command returns just the summary and the list of consumers is small, it runs in O(1) time; otherwise, an additional O(N) time for iterating every consumer.",
        group_commands::xpending),
    command!("xclaim", -6, WRITE | FAST, KeySpec::ONE, ["write", "stream", "fast"], "stream", "5.0.0",
        "Changes (or acquires) ownership of a message in a consumer group, as if the message was delivered to the specified consumer.",
        "O(log N) with N being the number of messages in the PEL of the consumer group.", group_commands::xclaim),
    command!("xautoclaim", -6, WRITE | FAST, KeySpec::ONE, ["write", "stream", "fast"], "stream", "6.2.0",
        "Changes (or acquires) ownership of messages in a consumer group, as if the messages were delivered to the specified consumer.",
        "O(1) if COUNT is small.", group_commands::xautoclaim),
    command!("xdelex", -5, WRITE | FAST, KeySpec::ONE, ["write", "stream", "fast"], "stream", "8.2.0",
        "Deletes one or multiple entries from the stream.",
        "O(1) for each single item to delete in the stream, regardless of the stream size.",
        deletion::xdelex),
    command!("xackdel", -6, WRITE | FAST, KeySpec::ONE, ["write", "stream", "fast"], "stream", "8.2.0",
        "Acknowledges and deletes one or multiple messages for a stream consumer group.",
        "O(1) for each message ID processed.", deletion::xackdel),
    command!("xinfo", -2, 0, KeySpec::NONE, ["slow"], "stream", "5.0.0",
        "A container for stream introspection commands", "Depends on subcommand.",
        subcommands = XINFO_SUBCOMMANDS),
];

/// XGROUP's subcommands (the key follows the subcommand name).
#[rustfmt::skip]
const XGROUP_SUBCOMMANDS: &[EngineCommand] = &[
    command!("xgroup|create", -5, WRITE | DENYOOM, KeySpec::SECOND, ["write", "stream", "slow"], "stream", "5.0.0",
        "Create a consumer group.", "O(1)", group_commands::xgroup_create),
    command!("xgroup|createconsumer", 5, WRITE | DENYOOM, KeySpec::SECOND, ["write", "stream", "slow"], "stream",
        "6.2.0", "Create a consumer in a consumer group.", "O(1)", group_commands::xgroup_createconsumer),
    command!("xgroup|delconsumer", 5, WRITE, KeySpec::SECOND, ["write", "stream", "slow"], "stream", "5.0.0",
        "Delete a consumer from a consumer group.", "O(1)", group_commands::xgroup_delconsumer),
    command!("xgroup|destroy", 4, WRITE, KeySpec::SECOND, ["write", "stream", "slow"], "stream", "5.0.0",
        "Destroy a consumer group.",
        "O(N) where N is the number of entries in the group's pending entries list (PEL).",
        group_commands::xgroup_destroy),
    command!("xgroup|setid", -5, WRITE, KeySpec::SECOND, ["write", "stream", "slow"], "stream", "5.0.0",
        "Set a consumer group to an arbitrary last delivered ID value.", "O(1)", group_commands::xgroup_setid),
    command!("xgroup|help", 2, LOADING | STALE, KeySpec::NONE, ["stream", "slow"], "stream", "5.0.0",
        "Show helpful text about the different subcommands", "O(1)", group_commands::xgroup_help),
];

/// XINFO's subcommands.
#[rustfmt::skip]
const XINFO_SUBCOMMANDS: &[EngineCommand] = &[
    command!("xinfo|consumers", 4, READONLY, KeySpec::SECOND, ["read", "stream", "slow"], "stream", "5.0.0",
        "List the consumers in a consumer group", "O(1)", info::xinfo_consumers),
    command!("xinfo|groups", 3, READONLY, KeySpec::SECOND, ["read", "stream", "slow"], "stream", "5.0.0",
        "List the consumer groups of a stream", "O(1)", info::xinfo_groups),
    command!("xinfo|stream", -3, READONLY, KeySpec::SECOND, ["read", "stream", "slow"], "stream", "5.0.0",
        "Get information about a stream", "O(1)", info::xinfo_stream),
    command!("xinfo|help", 2, LOADING | STALE, KeySpec::NONE, ["stream", "slow"], "stream", "5.0.0",
        "Show helpful text about the different subcommands", "O(1)", info::xinfo_help),
];

// ---- helpers ----------------------------------------------------------------

/// The stream in entry `id` of `db`, or WRONGTYPE.
fn stream_at(engine: &Engine, db: usize, id: EntryId) -> Result<&StreamValue, CmdError> {
    engine
        .db(db)
        .entry(id)
        .value()
        .as_stream()
        .ok_or(CmdError::WrongType)
}

/// Change the stream in entry `id` of `db` (heap accounting kept), or WRONGTYPE.
fn change_stream<R>(
    engine: &mut Engine,
    db: usize,
    id: EntryId,
    change: impl FnOnce(&mut StreamValue) -> R,
) -> Result<R, CmdError> {
    engine
        .modify_value(db, id, |v| v.into_stream().map(change))
        .ok_or(CmdError::WrongType)
}

/// One entry as Redis replies with it: `[id, [field, value, ...]]`.
fn reply_entry(reply: &mut Reply<'_>, entry: &EntryRef<'_>) {
    reply.array(2);
    reply.bulk(&entry.id.format_inline());
    reply.array(entry.pairs() * 2);
    entry.fields().for_each(|f| reply.bulk(f));
}

/// Entries, written after their count.
fn reply_entries<'a, I>(reply: &mut Reply<'_>, entries: impl Fn() -> I)
where
    I: Iterator<Item = EntryRef<'a>>,
{
    // One walk: the entries (a few words each) are kept for the array's length.
    let found: SmallVec<[EntryRef<'a>; 16]> = entries().collect();
    reply.array(found.len());
    found.iter().for_each(|e| reply_entry(reply, e));
}
