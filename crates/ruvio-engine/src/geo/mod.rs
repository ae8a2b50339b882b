//! Geo commands (Redis's geo.c): a geo set is a sorted set whose scores are
//! 52-bit geohashes, so there is no value of its own here, only the arithmetic,
//! the search and the command table.
//!
//! Why a sorted set, as Redis: GEOADD's set is a ZSET to every other command
//! (TYPE, ZRANGE, ZREM, OBJECT ENCODING, a STORE result read back), and nearby
//! points have nearby scores, so a search is a few score ranges.
//!
//! - [`hash`]: encoding, decoding, neighbours, the search cells, distances and
//!   reply formatting, each step as Redis computes it.
//! - [`search`]: which members a search returns, in Redis's order, visiting only
//!   the parts of the cells that can matter.
//! - `commands`: the handlers, in Redis's order of checks.
//!
//! docs/geo.md says what is Redis's step for step and why the search is faster.

pub(crate) mod hash;
pub(crate) mod search;

mod commands;

use crate::command::{command, flags::*, EngineCommand, KeyShape, KeySpec};

/// The geo family's keyspace events (GEOADD reports ZADD's `zadd`).
pub(crate) mod events {
    use crate::command::{Event, EventClass::ZSet};
    pub const GEORADIUSSTORE: Event = Event::new(ZSet, "georadiusstore");
    pub const GEOSEARCHSTORE: Event = Event::new(ZSet, "geosearchstore");
}

/// GEORADIUS and GEORADIUSBYMEMBER: the source, the keys Redis's key specs name
/// (after the first STORE and the first STOREDIST among the options, which start
/// at `options_at`), and the key really written when the options repeat (the
/// last STORE or STOREDIST wins; see [`KeyShape::AfterLastKeyword`]).
macro_rules! radius_keys {
    ($options_at:expr) => {
        KeySpec(&[
            KeyShape::Range {
                first: 1,
                last: 1,
                step: 1,
            },
            KeyShape::Keyword {
                keyword: "STORE",
                from: $options_at,
            },
            KeyShape::Keyword {
                keyword: "STOREDIST",
                from: $options_at,
            },
            KeyShape::AfterLastKeyword {
                keywords: &["STORE", "STOREDIST"],
                from: $options_at,
            },
        ])
    };
}

/// GEORADIUS's keys: options from argument 6.
const RADIUS_KEYS: KeySpec = radius_keys!(6);
/// GEORADIUSBYMEMBER's keys: options from argument 5.
const BYMEMBER_KEYS: KeySpec = radius_keys!(5);

const RADIUS_COMPLEXITY: &str = "O(N+log(M)) where N is the number of elements inside the bounding box of the circular area delimited by center and radius and M is the number of items inside the index.";
const SEARCH_COMPLEXITY: &str = "O(N+log(M)) where N is the number of elements in the grid-aligned bounding box area around the shape provided as the filter and M is the number of items inside the shape";

/// The geo family's command table (Redis 7's arity, flags, keys, ACL categories
/// and docs).
#[rustfmt::skip]
pub const COMMANDS: &[EngineCommand] = &[
    command!("geoadd", -5, WRITE | DENYOOM, KeySpec::ONE, ["write", "geo", "slow"], "geo", "3.2.0",
        "Add one or more geospatial items in the geospatial index represented using a sorted set",
        "O(log(N)) for each item added, where N is the number of elements in the sorted set.", commands::geoadd),
    command!("geodist", -4, READONLY, KeySpec::ONE, ["read", "geo", "slow"], "geo", "3.2.0",
        "Returns the distance between two members of a geospatial index", "O(log(N))", commands::geodist),
    command!("geohash", -2, READONLY, KeySpec::ONE, ["read", "geo", "slow"], "geo", "3.2.0",
        "Returns members of a geospatial index as standard geohash strings",
        "O(log(N)) for each member requested, where N is the number of elements in the sorted set.",
        commands::geohash),
    command!("geopos", -2, READONLY, KeySpec::ONE, ["read", "geo", "slow"], "geo", "3.2.0",
        "Returns longitude and latitude of members of a geospatial index",
        "O(N) where N is the number of members requested.", commands::geopos),
    command!("georadius", -6, WRITE | DENYOOM, RADIUS_KEYS, ["write", "geo", "slow"], "geo", "3.2.0",
        "Query a sorted set representing a geospatial index to fetch members matching a given maximum distance from a point",
        RADIUS_COMPLEXITY, commands::georadius),
    command!("georadius_ro", -6, READONLY, KeySpec::ONE, ["read", "geo", "slow"], "geo", "3.2.10",
        "A read-only variant for GEORADIUS", RADIUS_COMPLEXITY, commands::georadius_ro),
    command!("georadiusbymember", -5, WRITE | DENYOOM, BYMEMBER_KEYS, ["write", "geo", "slow"], "geo", "3.2.0",
        "Query a sorted set representing a geospatial index to fetch members matching a given maximum distance from a member",
        RADIUS_COMPLEXITY, commands::georadiusbymember),
    command!("georadiusbymember_ro", -5, READONLY, KeySpec::ONE, ["read", "geo", "slow"], "geo", "3.2.10",
        "A read-only variant for GEORADIUSBYMEMBER", RADIUS_COMPLEXITY, commands::georadiusbymember_ro),
    command!("geosearch", -7, READONLY, KeySpec::ONE, ["read", "geo", "slow"], "geo", "6.2.0",
        "Query a sorted set representing a geospatial index to fetch members inside an area of a box or a circle.",
        SEARCH_COMPLEXITY, commands::geosearch),
    command!("geosearchstore", -8, WRITE | DENYOOM, KeySpec::FIRST_TWO, ["write", "geo", "slow"], "geo", "6.2.0",
        "Query a sorted set representing a geospatial index to fetch members inside an area of a box or a circle, and store the result in another key.",
        SEARCH_COMPLEXITY, commands::geosearchstore),
];
