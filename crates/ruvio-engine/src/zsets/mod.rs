//! Sorted-set commands (Redis's t_zset.c): the command table; the handlers are in
//! `commands` (reads and writes), `algebra` (ZUNION/ZINTER/ZDIFF and their STORE
//! and CARD forms) and share the cores here.
//!
//! The value (`listpack`, `skiplist`) is in [`crate::values::zset`], below the
//! keyspace; here:
//! - [`score`]: score and range parsing as Redis does it.

pub(crate) mod score;

mod algebra;
mod commands;
mod pop;

#[cfg(test)]
mod tests;

pub use crate::values::zset::{ZLimits, ZSetValue};

use ruvio_resp::{Protocol, Reply};

use crate::command::{command, flags::*, EngineCommand, KeyShape, KeySpec};
use crate::error::CmdError;
use crate::keyspace::EntryId;
use crate::Engine;

/// The sorted-set family's keyspace events (Redis's names).
pub(crate) mod events {
    use crate::command::{Event, EventClass::ZSet};
    pub const ZADD: Event = Event::new(ZSet, "zadd");
    pub const ZINCR: Event = Event::new(ZSet, "zincr");
    pub const ZREM: Event = Event::new(ZSet, "zrem");
    pub const ZREMRANGEBYRANK: Event = Event::new(ZSet, "zremrangebyrank");
    pub const ZREMRANGEBYSCORE: Event = Event::new(ZSet, "zremrangebyscore");
    pub const ZREMRANGEBYLEX: Event = Event::new(ZSet, "zremrangebylex");
    pub const ZPOPMIN: Event = Event::new(ZSet, "zpopmin");
    pub const ZPOPMAX: Event = Event::new(ZSet, "zpopmax");
    pub const ZUNIONSTORE: Event = Event::new(ZSet, "zunionstore");
    pub const ZINTERSTORE: Event = Event::new(ZSet, "zinterstore");
    pub const ZDIFFSTORE: Event = Event::new(ZSet, "zdiffstore");
    pub const ZRANGESTORE: Event = Event::new(ZSet, "zrangestore");
}

/// ZUNIONSTORE, ZINTERSTORE, ZDIFFSTORE: the destination, then numkeys sources.
const STORE_KEYS: KeySpec = KeySpec(&[
    KeyShape::Range {
        first: 1,
        last: 1,
        step: 1,
    },
    KeyShape::NumKeys { at: 2 },
]);

const RANGE_COMPLEXITY: &str = "O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements returned.";
const BY_COMPLEXITY: &str = "O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements being returned. If M is constant (e.g. always asking for the first 10 elements with LIMIT), you can consider it O(log(N)).";
const REMRANGE_COMPLEXITY: &str = "O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements removed by the operation.";
const POP_COMPLEXITY: &str = "O(log(N)*M) with N being the number of elements in the sorted set, and M being the number of elements popped.";
const MPOP_COMPLEXITY: &str = "O(K) + O(M*log(N)) where K is the number of provided keys, N being the number of elements in the sorted set, and M being the number of elements popped.";
const UNION_COMPLEXITY: &str = "O(N)+O(M*log(M)) with N being the sum of the sizes of the input sorted sets, and M being the number of elements in the resulting sorted set.";
const UNIONSTORE_COMPLEXITY: &str = "O(N)+O(M log(M)) with N being the sum of the sizes of the input sorted sets, and M being the number of elements in the resulting sorted set.";
const INTER_COMPLEXITY: &str = "O(N*K)+O(M*log(M)) worst case with N being the smallest input sorted set, K being the number of input sorted sets and M being the number of elements in the resulting sorted set.";
const DIFF_COMPLEXITY: &str = "O(L + (N-K)log(N)) worst case where L is the total number of elements in all the sets, N is the size of the first set, and K is the size of the result set.";
const BZPOP_COMPLEXITY: &str = "O(log(N)) with N being the number of elements in the sorted set.";

/// The sorted-set family's command table (Redis 7's arity, flags, keys, ACL
/// categories and docs; ZRANK/ZREVRANK take 7.2's optional WITHSCORE).
#[rustfmt::skip]
pub const COMMANDS: &[EngineCommand] = &[
    command!("zadd", -4, WRITE | DENYOOM | FAST, KeySpec::ONE, ["write", "sortedset", "fast"], "sorted-set", "1.2.0",
        "Add one or more members to a sorted set, or update its score if it already exists",
        "O(log(N)) for each item added, where N is the number of elements in the sorted set.", commands::zadd),
    command!("zincrby", 4, WRITE | DENYOOM | FAST, KeySpec::ONE, ["write", "sortedset", "fast"], "sorted-set", "1.2.0",
        "Increment the score of a member in a sorted set",
        "O(log(N)) where N is the number of elements in the sorted set.", commands::zincrby),
    command!("zscore", 3, READONLY | FAST, KeySpec::ONE, ["read", "sortedset", "fast"], "sorted-set", "1.2.0",
        "Get the score associated with the given member in a sorted set", "O(1)", commands::zscore),
    command!("zmscore", -3, READONLY | FAST, KeySpec::ONE, ["read", "sortedset", "fast"], "sorted-set", "6.2.0",
        "Get the score associated with the given members in a sorted set",
        "O(N) where N is the number of members being requested.", commands::zmscore),
    command!("zcard", 2, READONLY | FAST, KeySpec::ONE, ["read", "sortedset", "fast"], "sorted-set", "1.2.0",
        "Get the number of members in a sorted set", "O(1)", commands::zcard),
    command!("zcount", 4, READONLY | FAST, KeySpec::ONE, ["read", "sortedset", "fast"], "sorted-set", "2.0.0",
        "Count the members in a sorted set with scores within the given values",
        "O(log(N)) with N being the number of elements in the sorted set.", commands::zcount),
    command!("zlexcount", 4, READONLY | FAST, KeySpec::ONE, ["read", "sortedset", "fast"], "sorted-set", "2.8.9",
        "Count the number of members in a sorted set between a given lexicographical range",
        "O(log(N)) with N being the number of elements in the sorted set.", commands::zlexcount),
    command!("zrange", -4, READONLY, KeySpec::ONE, ["read", "sortedset", "slow"], "sorted-set", "1.2.0",
        "Return a range of members in a sorted set", RANGE_COMPLEXITY, commands::zrange),
    command!("zrangestore", -5, WRITE | DENYOOM, KeySpec::FIRST_TWO, ["write", "sortedset", "slow"], "sorted-set", "6.2.0",
        "Store a range of members from sorted set into another key",
        "O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements stored into the destination key.",
        commands::zrangestore),
    command!("zrangebyscore", -4, READONLY, KeySpec::ONE, ["read", "sortedset", "slow"], "sorted-set", "1.0.5",
        "Return a range of members in a sorted set, by score", BY_COMPLEXITY, commands::zrangebyscore),
    command!("zrevrangebyscore", -4, READONLY, KeySpec::ONE, ["read", "sortedset", "slow"], "sorted-set", "2.2.0",
        "Return a range of members in a sorted set, by score, with scores ordered from high to low", BY_COMPLEXITY,
        commands::zrevrangebyscore),
    command!("zrangebylex", -4, READONLY, KeySpec::ONE, ["read", "sortedset", "slow"], "sorted-set", "2.8.9",
        "Return a range of members in a sorted set, by lexicographical range", BY_COMPLEXITY, commands::zrangebylex),
    command!("zrevrangebylex", -4, READONLY, KeySpec::ONE, ["read", "sortedset", "slow"], "sorted-set", "2.8.9",
        "Return a range of members in a sorted set, by lexicographical range, ordered from higher to lower strings.",
        BY_COMPLEXITY, commands::zrevrangebylex),
    command!("zrevrange", -4, READONLY, KeySpec::ONE, ["read", "sortedset", "slow"], "sorted-set", "1.2.0",
        "Return a range of members in a sorted set, by index, with scores ordered from high to low", RANGE_COMPLEXITY,
        commands::zrevrange),
    command!("zrank", -3, READONLY | FAST, KeySpec::ONE, ["read", "sortedset", "fast"], "sorted-set", "2.0.0",
        "Determine the index of a member in a sorted set", "O(log(N))", commands::zrank),
    command!("zrevrank", -3, READONLY | FAST, KeySpec::ONE, ["read", "sortedset", "fast"], "sorted-set", "2.0.0",
        "Determine the index of a member in a sorted set, with scores ordered from high to low", "O(log(N))",
        commands::zrevrank),
    command!("zrem", -3, WRITE | FAST, KeySpec::ONE, ["write", "sortedset", "fast"], "sorted-set", "1.2.0",
        "Remove one or more members from a sorted set",
        "O(M*log(N)) with N being the number of elements in the sorted set and M the number of elements to be removed.",
        commands::zrem),
    command!("zremrangebyrank", 4, WRITE, KeySpec::ONE, ["write", "sortedset", "slow"], "sorted-set", "2.0.0",
        "Remove all members in a sorted set within the given indexes", REMRANGE_COMPLEXITY, commands::zremrangebyrank),
    command!("zremrangebyscore", 4, WRITE, KeySpec::ONE, ["write", "sortedset", "slow"], "sorted-set", "1.2.0",
        "Remove all members in a sorted set within the given scores", REMRANGE_COMPLEXITY, commands::zremrangebyscore),
    command!("zremrangebylex", 4, WRITE, KeySpec::ONE, ["write", "sortedset", "slow"], "sorted-set", "2.8.9",
        "Remove all members in a sorted set between the given lexicographical range", REMRANGE_COMPLEXITY,
        commands::zremrangebylex),
    command!("zpopmin", -2, WRITE | FAST, KeySpec::ONE, ["write", "sortedset", "fast"], "sorted-set", "5.0.0",
        "Remove and return members with the lowest scores in a sorted set", POP_COMPLEXITY, pop::zpopmin),
    command!("zpopmax", -2, WRITE | FAST, KeySpec::ONE, ["write", "sortedset", "fast"], "sorted-set", "5.0.0",
        "Remove and return members with the highest scores in a sorted set", POP_COMPLEXITY, pop::zpopmax),
    command!("zmpop", -4, WRITE, KeySpec::NUMKEYS_AT_1, ["write", "sortedset", "slow"], "sorted-set", "7.0.0",
        "Remove and return members with scores in a sorted set", MPOP_COMPLEXITY, pop::zmpop),
    command!("bzpopmin", -3, WRITE | NOSCRIPT | BLOCKING | FAST, KeySpec::ALL_BUT_LAST,
        ["write", "sortedset", "fast", "blocking"], "sorted-set", "5.0.0",
        "Remove and return the member with the lowest score from one or more sorted sets, or block until one is available",
        BZPOP_COMPLEXITY, pop::bzpopmin),
    command!("bzpopmax", -3, WRITE | NOSCRIPT | BLOCKING | FAST, KeySpec::ALL_BUT_LAST,
        ["write", "sortedset", "fast", "blocking"], "sorted-set", "5.0.0",
        "Remove and return the member with the highest score from one or more sorted sets, or block until one is available",
        BZPOP_COMPLEXITY, pop::bzpopmax),
    command!("bzmpop", -5, WRITE | BLOCKING, KeySpec::NUMKEYS_AT_2, ["write", "sortedset", "slow", "blocking"],
        "sorted-set", "7.0.0",
        "Remove and return members with scores in a sorted set or block until one is available", MPOP_COMPLEXITY,
        pop::bzmpop),
    command!("zunion", -3, READONLY, KeySpec::NUMKEYS_AT_1, ["read", "sortedset", "slow"], "sorted-set", "6.2.0",
        "Add multiple sorted sets", UNION_COMPLEXITY, algebra::zunion),
    command!("zinter", -3, READONLY, KeySpec::NUMKEYS_AT_1, ["read", "sortedset", "slow"], "sorted-set", "6.2.0",
        "Intersect multiple sorted sets", INTER_COMPLEXITY, algebra::zinter),
    command!("zdiff", -3, READONLY, KeySpec::NUMKEYS_AT_1, ["read", "sortedset", "slow"], "sorted-set", "6.2.0",
        "Subtract multiple sorted sets", DIFF_COMPLEXITY, algebra::zdiff),
    command!("zunionstore", -4, WRITE | DENYOOM, STORE_KEYS, ["write", "sortedset", "slow"], "sorted-set", "2.0.0",
        "Add multiple sorted sets and store the resulting sorted set in a new key", UNIONSTORE_COMPLEXITY,
        algebra::zunionstore),
    command!("zinterstore", -4, WRITE | DENYOOM, STORE_KEYS, ["write", "sortedset", "slow"], "sorted-set", "2.0.0",
        "Intersect multiple sorted sets and store the resulting sorted set in a new key", INTER_COMPLEXITY,
        algebra::zinterstore),
    command!("zdiffstore", -4, WRITE | DENYOOM, STORE_KEYS, ["write", "sortedset", "slow"], "sorted-set", "6.2.0",
        "Subtract multiple sorted sets and store the resulting sorted set in a new key", DIFF_COMPLEXITY,
        algebra::zdiffstore),
    command!("zintercard", -3, READONLY, KeySpec::NUMKEYS_AT_1, ["read", "sortedset", "slow"], "sorted-set", "7.0.0",
        "Intersect multiple sorted sets and return the cardinality of the result",
        "O(N*K) worst case with N being the smallest input sorted set, K being the number of input sorted sets.",
        algebra::zintercard),
    command!("zrandmember", -2, READONLY, KeySpec::ONE, ["read", "sortedset", "slow"], "sorted-set", "6.2.0",
        "Get one or multiple random elements from a sorted set", "O(N) where N is the number of elements returned",
        commands::zrandmember),
    command!("zscan", -3, READONLY, KeySpec::ONE, ["read", "sortedset", "slow"], "sorted-set", "2.8.0",
        "Incrementally iterate sorted sets elements and associated scores",
        "O(1) for every call. O(N) for a complete iteration, including enough command calls for the cursor to return back to 0. N is the number of elements inside the collection..",
        commands::zscan),
];

// ---- helpers ----------------------------------------------------------------

/// The encoding thresholds now.
pub(crate) fn limits(engine: &Engine) -> ZLimits {
    let c = engine.config();
    ZLimits {
        entries: c.zset_max_listpack_entries,
        value: c.zset_max_listpack_value,
    }
}

/// The sorted set in entry `id` of `db`, or WRONGTYPE.
pub(crate) fn zset_at(engine: &Engine, db: usize, id: EntryId) -> Result<&ZSetValue, CmdError> {
    engine
        .db(db)
        .entry(id)
        .value()
        .as_zset()
        .ok_or(CmdError::WrongType)
}

/// Change the sorted set in entry `id` of `db` (heap accounting kept), or
/// WRONGTYPE.
pub(crate) fn change_zset<R>(
    engine: &mut Engine,
    db: usize,
    id: EntryId,
    change: impl FnOnce(&mut ZSetValue) -> R,
) -> Result<R, CmdError> {
    engine
        .modify_value(db, id, |v| v.into_zset().map(change))
        .ok_or(CmdError::WrongType)
}

/// Reply with (member, score) pairs: `[[m, s], ...]` when `nested` (RESP3 for
/// most commands, always for ZMPOP), else flat `[m, s, ...]`.
fn reply_pairs<'a>(
    r: &mut Reply<'_>,
    pairs: impl ExactSizeIterator<Item = (&'a [u8], f64)>,
    nested: bool,
) {
    if nested {
        r.array(pairs.len());
        for (m, s) in pairs {
            r.array(2);
            r.bulk(m);
            r.double(s);
        }
    } else {
        r.array(pairs.len() * 2);
        for (m, s) in pairs {
            r.bulk(m);
            r.double(s);
        }
    }
}

/// True when pairs are nested arrays in this protocol.
fn resp3(r: &Reply<'_>) -> bool {
    r.proto == Protocol::Resp3
}

/// Redis's order of (member, score) pairs: by score, then by member bytes (scores
/// are never NaN).
pub(crate) fn redis_order(a: &(Vec<u8>, f64), b: &(Vec<u8>, f64)) -> std::cmp::Ordering {
    a.1.partial_cmp(&b.1)
        .unwrap_or(std::cmp::Ordering::Equal)
        .then_with(|| a.0.cmp(&b.0))
}
