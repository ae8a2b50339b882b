//! Differential test of the list and hash families: seeded random sequences of every
//! list and hash command (and the generic and string commands that meet those types) go
//! to a real `redis-server` 7.0 and to Ruvio (forward mode, 1 and 2 shards); the raw RESP
//! replies must be identical, command by command, except where Redis itself does not
//! promise an order (the rules below).
//!
//! # Key space
//!
//! Two groups of keys, each sharing a hash tag (so each group lives on one shard, and the
//! two groups on different shards when there are 2): per group three list keys, two hash
//! keys and one string key. A command gets a key of its own type most of the time, so
//! that lists and hashes grow past the encoding thresholds, and another key of the group
//! otherwise, which brings WRONGTYPE and missing-key replies. Multi-key commands
//! (LMOVE, RPOPLPUSH, LMPOP, RENAME, RENAMENX, COPY, DEL, EXISTS, MGET and the
//! blocking BLPOP, BRPOP, BLMOVE, BRPOPLPUSH, BLMPOP) take keys of any group: forward
//! mode runs them across shards by borrowing the keys (docs/cross-shard.md).
//!
//! # Sequences
//!
//! Seeds 2 and 4 send pipelines of up to 40 commands in one write, 1 and 3 one step at a
//! time. Seeds 2 and 3 switch the connection to RESP3 (`HELLO 3`) first, so maps
//! (HGETALL), nested arrays (HRANDFIELD WITHVALUES, LMPOP) and RESP3 nulls are compared
//! too. Each sequence starts from empty databases with randomly chosen encoding
//! thresholds (`list-max-listpack-size` in -5..=5, small `hash-max-listpack-entries` and
//! `hash-max-listpack-value`, or the defaults) and changes them again now and then, so
//! that lists and hashes cross their thresholds in both directions. At the end every
//! command is sent once with a wrong number of arguments, and the whole state is
//! compared: DBSIZE, and TYPE, LRANGE 0 -1, HGETALL, OBJECT ENCODING and GET of every key.
//!
//! Blocking commands get a timeout of 0.01 s (or an invalid one): on a key with data they
//! answer at once; on an empty key they answer a nil array after the timeout. The
//! reference Redis runs with `hz 100` so that such a timeout fires within about 20 ms
//! (its default hz of 10 rounds it up to 100 ms).
//!
//! # Comparison rules (the whole allowlist)
//!
//! 1. OBJECT ENCODING of a list: Redis 7.0 always answers `quicklist`; Ruvio follows
//!    Redis 7.2 (`listpack` for small lists, `quicklist` for large ones), so when Redis
//!    says `quicklist`, `listpack` is accepted too. Hash encodings (`listpack` /
//!    `hashtable`, same thresholds in 7.0 and 7.2) and string encodings must be equal.
//!    `list_encoding_transitions` checks the 7.2 list rules exactly instead.
//! 2. HKEYS, HVALS, HGETALL: a listpack hash keeps insertion order, so the replies must
//!    be equal; a hashtable's order is its own (Redis seeds its hash function at random),
//!    so there the elements (HGETALL: the field/value pairs) are compared as multisets.
//!    The generator follows each of these commands with `OBJECT ENCODING key`, whose
//!    reply (compared exactly on its own) says which rule applies.
//! 3. HRANDFIELD: without a count, both must answer a field (or both nil); with a
//!    positive count that returned fewer elements than asked, the reply is the whole hash
//!    and is compared as a set; otherwise (a random subset, or a negative count with
//!    repetitions) only the shape is compared: reply types, lengths, nesting, and for a
//!    positive count that the fields are distinct.
//! 4. HSCAN: cursors and batch sizes are each server's own; every HSCAN is iterated to
//!    cursor 0 on each server and the union of field/value pairs (deduplicated, sorted)
//!    is compared. Errors (bad cursor, bad options, WRONGTYPE) must be equal.
//!
//! # Not generated
//!
//! - `LPOS ... RANK -9223372036854775808`: Redis 7.0.15 negates it with signed overflow
//!   and answers as if it were a valid rank; 7.2 rejects it ("value is out of range").
//! - HRANDFIELD with a huge negative count without WITHVALUES (Redis would build a reply
//!   of that many elements), and any cursor but 0 or an invalid one for HSCAN.
//! - Blocking commands that could block for long (timeout 0 or more than 0.02 s).
//!
//! # Families
//!
//! The test asks the target (COMMAND INFO) which of three families it implements: lists,
//! blocking lists, hashes. A family the target lacks entirely is not generated (and the
//! test says so); a family the target implements only in part fails the test. With no
//! family at all the test is skipped.
//!
//! # Coverage
//!
//! The full run (no `RUVIO_DIFF_SEED` / `RUVIO_DIFF_COMMANDS`) checks, on Redis's replies,
//! that every generated command got at least one success and every error case listed in
//! [`REQUIRED_REPLIES`], so that the generator cannot quietly stop reaching a path.
//!
//! Reproduce a failure with `RUVIO_DIFF_SEED=<seed> RUVIO_DIFF_COMMANDS=<n>`.
//! `RUVIO_DIFF_TRACE=1` prints every command with Redis's reply and, at the end, a
//! histogram of Redis's reply kinds per command; `RUVIO_DIFF_TRACE=histogram` only the
//! histogram.

mod common;

use common::*;
use rand::rngs::StdRng;
use rand::seq::IndexedRandom;
use rand::{Rng, SeedableRng};
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// Commands per sequence unless `RUVIO_DIFF_COMMANDS` says otherwise (as differential.rs).
const COMMANDS_PER_SEED: usize = 2500;
/// Seeds per configuration unless `RUVIO_DIFF_SEED` picks one: odd ones one step at a
/// time, even ones pipelined; 2 and 3 in RESP3, so every mix of the two occurs.
const SEEDS: &[u64] = &[1, 2, 3, 4];
/// Largest pipeline sent in one write.
const PIPELINE_MAX: usize = 40;
/// Commands kept for the failure message.
const HISTORY_MAX: usize = 30;
/// HSCAN calls per iteration before the test gives up: the largest hash here has a few
/// dozen fields, so a scan that has not returned cursor 0 by then never will.
const SCAN_CALLS_MAX: usize = 1000;
/// `hz` of the reference Redis: blocked clients time out in its event loop, which wakes
/// every 1000/hz ms, so hz 100 answers a 0.01 s timeout in about 20 ms instead of 100.
const REDIS_HZ: &str = "100";

/// The three families the generator covers; the target may implement each or not.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Family {
    Lists,
    BlockingLists,
    Hashes,
}

const LIST_COMMANDS: &[&str] = &[
    "LPUSH",
    "RPUSH",
    "LPUSHX",
    "RPUSHX",
    "LPOP",
    "RPOP",
    "LLEN",
    "LRANGE",
    "LINDEX",
    "LSET",
    "LINSERT",
    "LREM",
    "LTRIM",
    "LPOS",
    "LMOVE",
    "RPOPLPUSH",
    "LMPOP",
];
const BLOCKING_LIST_COMMANDS: &[&str] = &["BLPOP", "BRPOP", "BLMOVE", "BRPOPLPUSH", "BLMPOP"];
const HASH_COMMANDS: &[&str] = &[
    "HSET",
    "HSETNX",
    "HGET",
    "HMGET",
    "HMSET",
    "HDEL",
    "HLEN",
    "HSTRLEN",
    "HEXISTS",
    "HKEYS",
    "HVALS",
    "HGETALL",
    "HINCRBY",
    "HINCRBYFLOAT",
    "HRANDFIELD",
    "HSCAN",
];

impl Family {
    const ALL: [Family; 3] = [Family::Lists, Family::BlockingLists, Family::Hashes];

    fn commands(self) -> &'static [&'static str] {
        match self {
            Family::Lists => LIST_COMMANDS,
            Family::BlockingLists => BLOCKING_LIST_COMMANDS,
            Family::Hashes => HASH_COMMANDS,
        }
    }
}

/// The families `conn`'s server implements, by COMMAND INFO (nil for an unknown command).
/// Panics when a family is there only in part: a family lands whole, and a missing command
/// must not quietly shrink what this test covers.
fn supported_families(conn: &mut RawConn) -> Vec<Family> {
    let mut supported = Vec::new();
    for family in Family::ALL {
        let mut request = vec!["COMMAND", "INFO"];
        request.extend(family.commands());
        let reply = conn.cmd(&request);
        let Value::Array(entries) = decode(&reply) else {
            panic!("COMMAND INFO answered {}", show(&reply));
        };
        let missing: Vec<&str> = family
            .commands()
            .iter()
            .zip(&entries)
            .filter(|(_, entry)| **entry == Value::Nil)
            .map(|(name, _)| *name)
            .collect();
        if missing.is_empty() {
            supported.push(family);
        } else if missing.len() < family.commands().len() {
            panic!("the target implements {family:?} only in part: {missing:?} are missing");
        }
    }
    supported
}

/// What a generated step does; each has a weight (how often, relative to the others) and
/// a family (generated only when the target has it; `None`: always).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Push,
    PushX,
    Pop,
    Llen,
    Lrange,
    Lindex,
    Lset,
    Linsert,
    Lrem,
    Ltrim,
    Lpos,
    Lmove,
    Rpoplpush,
    Lmpop,
    BlockingPop,
    Blmove,
    Brpoplpush,
    Blmpop,
    Hset,
    Hsetnx,
    Hmset,
    Hget,
    Hmget,
    Hdel,
    Hlen,
    Hstrlen,
    Hexists,
    HashRead,
    Hincrby,
    Hincrbyfloat,
    Hrandfield,
    Hscan,
    Type,
    ObjectEncoding,
    Del,
    Exists,
    Rename,
    Copy,
    StringCommand,
    Mget,
    ConfigSet,
    WrongArity,
    Dbsize,
}

/// Steps with their weights (relative; they add up to about 600). Blocking commands are
/// rare because some of them meet an empty key and wait out their timeout.
const OPS: &[(Op, u32, Option<Family>)] = &[
    (Op::Push, 80, Some(Family::Lists)),
    (Op::PushX, 12, Some(Family::Lists)),
    (Op::Pop, 40, Some(Family::Lists)),
    (Op::Llen, 8, Some(Family::Lists)),
    (Op::Lrange, 20, Some(Family::Lists)),
    (Op::Lindex, 10, Some(Family::Lists)),
    (Op::Lset, 10, Some(Family::Lists)),
    (Op::Linsert, 10, Some(Family::Lists)),
    (Op::Lrem, 10, Some(Family::Lists)),
    (Op::Ltrim, 8, Some(Family::Lists)),
    (Op::Lpos, 16, Some(Family::Lists)),
    (Op::Lmove, 10, Some(Family::Lists)),
    (Op::Rpoplpush, 6, Some(Family::Lists)),
    (Op::Lmpop, 12, Some(Family::Lists)),
    (Op::BlockingPop, 12, Some(Family::BlockingLists)),
    (Op::Blmove, 6, Some(Family::BlockingLists)),
    (Op::Brpoplpush, 5, Some(Family::BlockingLists)),
    (Op::Blmpop, 8, Some(Family::BlockingLists)),
    (Op::Hset, 40, Some(Family::Hashes)),
    (Op::Hsetnx, 10, Some(Family::Hashes)),
    (Op::Hmset, 10, Some(Family::Hashes)),
    (Op::Hget, 14, Some(Family::Hashes)),
    (Op::Hmget, 10, Some(Family::Hashes)),
    (Op::Hdel, 16, Some(Family::Hashes)),
    (Op::Hlen, 6, Some(Family::Hashes)),
    (Op::Hstrlen, 6, Some(Family::Hashes)),
    (Op::Hexists, 6, Some(Family::Hashes)),
    (Op::HashRead, 18, Some(Family::Hashes)),
    (Op::Hincrby, 12, Some(Family::Hashes)),
    (Op::Hincrbyfloat, 10, Some(Family::Hashes)),
    (Op::Hrandfield, 14, Some(Family::Hashes)),
    (Op::Hscan, 8, Some(Family::Hashes)),
    (Op::Type, 8, None),
    (Op::ObjectEncoding, 16, None),
    (Op::Del, 12, None),
    (Op::Exists, 5, None),
    (Op::Rename, 6, None),
    (Op::Copy, 6, None),
    (Op::StringCommand, 20, None),
    (Op::Mget, 5, None),
    (Op::ConfigSet, 5, None),
    (Op::WrongArity, 12, None),
    (Op::Dbsize, 2, None),
];

/// List elements and hash values: small integers (stored as integers in a listpack),
/// integer edges, strings that only look like numbers, empty and binary strings.
const ELEMENTS: &[&str] = &[
    "a",
    "b",
    "c",
    "x",
    "0",
    "1",
    "-1",
    "42",
    "3.0",
    "",
    "007",
    " 1",
    "9223372036854775807",
    "-9223372036854775808",
    "9223372036854775808",
    "hello world",
    "binary\0\r\nbytes",
];
/// The elements most lists hold many of.
const COMMON_ELEMENTS: &[&str] = &["a", "b", "c", "x", "0", "1"];
/// Lengths of the occasional long element: past `hash-max-listpack-value` (64) and the
/// listpack node sizes of `list-max-listpack-size` -1 (4 KB) and -2 (8 KB).
const LONG_LENGTHS: &[usize] = &[65, 200, 1000, 3000, 5000, 9000];
/// Hash fields: few, so that fields are overwritten and deleted often.
const FIELDS: &[&str] = &[
    "f0", "f1", "f2", "f3", "f4", "f5", "f6", "f7", "f8", "f9", "a", "b", "", "1", "-1", "007",
    "f 1",
];
/// List indexes; [`Generator::index`] adds a malformed one now and then. The extremes
/// matter for LSET too: on a listpack Redis 7.2 truncates the index to an `int`, so
/// `LSET key 9223372036854775807 v` sets the last element there, while Redis 7.0, the
/// oracle here, answers "index out of range".
const INDEXES: &[&str] = &[
    "0",
    "1",
    "2",
    "3",
    "5",
    "10",
    "100",
    "-1",
    "-2",
    "-3",
    "-5",
    "-100",
    "9223372036854775807",
    "-9223372036854775808",
];
/// Counts of LPOP/RPOP/LMPOP: mostly small, so that lists are drained only now and then.
const POP_COUNTS: &[&str] = &[
    "0",
    "1",
    "1",
    "2",
    "2",
    "3",
    "3",
    "10",
    "-1",
    "x",
    "9223372036854775807",
];
/// LREM counts: mostly small, since `0` removes every match.
const LREM_COUNTS: &[&str] = &["0", "1", "1", "2", "-1", "-1", "-2", "5", "-5", "x"];
/// HINCRBY increments; the largest one twice, as overflow needs a large value and then a
/// second large increment.
const INCRBY_AMOUNTS: &[&str] = &[
    "9223372036854775807",
    "1",
    "-1",
    "2",
    "100",
    "-250",
    "0",
    "9223372036854775807",
    "-9223372036854775808",
    "9223372036854775808",
    "abc",
    "1.5",
    "",
];
const FLOAT_AMOUNTS: &[&str] = &[
    "1", "-1", "1.5", "-0.25", "0.1", "3.0", "1e2", "5.0e3", "0", "-0", "10.50", "abc", "inf",
    "-inf", "nan", "1e300", "",
];
/// Timeouts of the blocking commands: short ones (1e-2 checks the float parser), and two
/// errors. Nothing that could block for long.
const TIMEOUTS: &[&str] = &["0.01", "0.01", "0.01", "0.02", "1e-2", "-1", "abc"];
/// Settings of `list-max-listpack-size`: counts 0..=5 and node sizes 4 KB..64 KB.
const LIST_SIZES: &[&str] = &["-5", "-4", "-3", "-2", "-1", "0", "1", "2", "3", "4", "5"];
const HASH_ENTRIES: &[&str] = &["0", "1", "2", "3", "4", "8", "16", "512"];
const HASH_VALUES: &[&str] = &["0", "1", "4", "8", "16", "32", "64"];
/// The defaults of Redis 7.0 (redis.conf and the built-in ones agree).
const DEFAULT_CONFIG: [(&str, &str); 3] = [
    ("list-max-listpack-size", "-2"),
    ("hash-max-listpack-entries", "512"),
    ("hash-max-listpack-value", "64"),
];

/// Keys of one hash tag, so all of them live on one shard.
struct Group {
    lists: Vec<String>,
    hashes: Vec<String>,
    string: String,
}

impl Group {
    fn all(&self) -> Vec<String> {
        let mut keys = self.lists.clone();
        keys.extend(self.hashes.iter().cloned());
        keys.push(self.string.clone());
        keys
    }
}

/// Random list, hash and generic commands over a small key space.
struct Generator {
    rng: StdRng,
    groups: Vec<Group>,
    /// The steps the target supports, with cumulative weights.
    ops: Vec<(Op, u32)>,
    families: Vec<Family>,
}

impl Generator {
    fn new(seed: u64, families: &[Family]) -> Generator {
        let mut groups = Vec::new();
        for shard in 0..2 {
            let tag = (b'a'..=b'z')
                .map(|c| (c as char).to_string())
                .find(|t| shard_of_key(&format!("{{{t}}}"), 2) == shard)
                .expect("a tag for every shard");
            groups.push(Group {
                lists: (0..3).map(|i| format!("{{{tag}}}l{i}")).collect(),
                hashes: (0..2).map(|i| format!("{{{tag}}}h{i}")).collect(),
                string: format!("{{{tag}}}s"),
            });
        }
        let mut ops = Vec::new();
        let mut total = 0;
        for &(op, weight, family) in OPS {
            if family.is_none_or(|f| families.contains(&f)) {
                total += weight;
                ops.push((op, total));
            }
        }
        Generator {
            rng: StdRng::seed_from_u64(seed),
            groups,
            ops,
            families: families.to_vec(),
        }
    }

    fn has(&self, family: Family) -> bool {
        self.families.contains(&family)
    }

    fn pick<'a>(&mut self, items: &'a [&'a str]) -> &'a str {
        items.choose(&mut self.rng).expect("non-empty")
    }

    fn chance(&mut self, p: f64) -> bool {
        self.rng.random_bool(p)
    }

    fn all_keys(&self) -> Vec<String> {
        self.groups.iter().flat_map(Group::all).collect()
    }

    fn group(&mut self) -> usize {
        self.rng.random_range(0..self.groups.len())
    }

    /// A second group for a multi-key command: the same one with 2 shards.
    fn second_group(&mut self, first: usize) -> usize {
        // Multi-key commands may mix groups: forward mode borrows keys across shards.
        if self.chance(0.3) {
            self.group()
        } else {
            first
        }
    }

    /// A key of group `g`: usually one of `own`, sometimes one of the group's other keys
    /// (a hash or string key for a list command: WRONGTYPE, or nothing there). Rarely,
    /// because a write to such a key makes it the wrong type for a long while.
    fn key_in(&mut self, g: usize, own: fn(&Group) -> Vec<String>) -> String {
        let own = own(&self.groups[g]);
        let keys = if self.chance(0.94) {
            own
        } else {
            let all = self.groups[g].all();
            all.into_iter().filter(|k| !own.contains(k)).collect()
        };
        keys.choose(&mut self.rng).expect("keys").clone()
    }

    fn list_key_in(&mut self, g: usize) -> String {
        self.key_in(g, |group| group.lists.clone())
    }

    fn list_key(&mut self) -> String {
        let g = self.group();
        self.list_key_in(g)
    }

    fn hash_key(&mut self) -> String {
        let g = self.group();
        self.key_in(g, |group| group.hashes.clone())
    }

    fn string_key(&mut self) -> String {
        let g = self.group();
        self.key_in(g, |group| vec![group.string.clone()])
    }

    fn any_key(&mut self) -> String {
        let keys = self.all_keys();
        keys.choose(&mut self.rng).expect("keys").clone()
    }

    /// `n` list keys of one group (or of both, with 1 shard).
    fn list_keys(&mut self, n: usize) -> Vec<String> {
        let first = self.group();
        (0..n)
            .map(|_| {
                let g = self.second_group(first);
                self.list_key_in(g)
            })
            .collect()
    }

    /// Source and destination of LMOVE and the like (they may be the same key).
    fn list_pair(&mut self) -> (String, String) {
        let first = self.group();
        let second = self.second_group(first);
        (self.list_key_in(first), self.list_key_in(second))
    }

    /// Source and destination of RENAME/COPY: mostly two keys of one kind, so that the
    /// list and hash keys keep holding lists and hashes; sometimes any two keys.
    fn key_pair(&mut self) -> (String, String) {
        let first = self.group();
        let second = self.second_group(first);
        let kind: fn(&Group) -> Vec<String> = match self.rng.random_range(0..10) {
            0..=3 => |group| group.lists.clone(),
            4..=6 => |group| group.hashes.clone(),
            _ => Group::all,
        };
        let a = kind(&self.groups[first]);
        let b = kind(&self.groups[second]);
        (
            a.choose(&mut self.rng).expect("keys").clone(),
            b.choose(&mut self.rng).expect("keys").clone(),
        )
    }

    fn long_string(&mut self) -> String {
        let len = *LONG_LENGTHS.choose(&mut self.rng).expect("lengths");
        let c = self.rng.random_range(b'a'..=b'e') as char;
        std::iter::repeat_n(c, len).collect()
    }

    fn short_random(&mut self) -> String {
        let len = self.rng.random_range(1..20);
        (0..len)
            .map(|_| self.rng.random_range(b'a'..=b'z') as char)
            .collect()
    }

    /// A list element (also LPOS's, LREM's and LINSERT's needle): mostly one of a few
    /// common ones, so that searches find matches.
    fn element(&mut self) -> String {
        match self.rng.random_range(0..100) {
            0..=4 => self.long_string(),
            5..=14 => self.short_random(),
            15..=44 => self.pick(ELEMENTS).to_string(),
            _ => self.pick(COMMON_ELEMENTS).to_string(),
        }
    }

    fn elements(&mut self, max: usize) -> Vec<String> {
        let n = self.rng.random_range(1..=max);
        (0..n).map(|_| self.element()).collect()
    }

    /// A hash value: rarely long, so that hashes stay listpacks for a while under the
    /// default `hash-max-listpack-value` (long ones come with [`Self::field`] and the
    /// small thresholds of CONFIG SET).
    fn hash_value(&mut self) -> String {
        if self.chance(0.01) {
            self.long_string()
        } else {
            match self.rng.random_range(0..10) {
                0 => self.short_random(),
                _ => self.pick(ELEMENTS).to_string(),
            }
        }
    }

    fn field(&mut self) -> String {
        if self.chance(0.01) {
            self.long_string()
        } else {
            self.pick(FIELDS).to_string()
        }
    }

    fn fields(&mut self, max: usize) -> Vec<String> {
        let n = self.rng.random_range(1..=max);
        (0..n).map(|_| self.field()).collect()
    }

    fn direction(&mut self) -> String {
        match self.rng.random_range(0..32) {
            0 => "UP".into(),
            1 => "left".into(),
            2 => "right".into(),
            n if n % 2 == 0 => "LEFT".into(),
            _ => "RIGHT".into(),
        }
    }

    fn index(&mut self) -> String {
        if self.chance(0.06) {
            self.pick(&["x", "1.5", ""]).into()
        } else {
            self.pick(INDEXES).into()
        }
    }

    fn timeout(&mut self) -> String {
        self.pick(TIMEOUTS).to_string()
    }

    /// The numkeys, keys and direction of LMPOP/BLMPOP, with the malformed forms.
    fn mpop_args(&mut self, words: &mut Vec<String>) {
        let n = self.rng.random_range(1..=3);
        let keys = self.list_keys(n);
        match self.rng.random_range(0..15) {
            0 => words.push(self.pick(&["0", "-1", "abc"]).into()),
            // numkeys larger than the keys given: a word like LEFT becomes a key.
            1 => words.push((n + 1).to_string()),
            // numkeys smaller: a key stands where the direction belongs.
            2 if n > 1 => words.push((n - 1).to_string()),
            _ => words.push(n.to_string()),
        }
        words.extend(keys);
        words.push(self.direction());
        match self.rng.random_range(0..14) {
            0..=5 => words.extend(["COUNT".into(), self.pick(POP_COUNTS).into()]),
            6 => words.push("COUNT".into()),
            7 => words.extend(["COUNT".into(), "1".into(), "COUNT".into(), "2".into()]),
            8 => words.push("EXTRA".into()),
            _ => {}
        }
    }

    fn config_set(&mut self) -> Vec<String> {
        let mut choices = Vec::new();
        if self.has(Family::Lists) {
            choices.push(("list-max-listpack-size", LIST_SIZES));
        }
        if self.has(Family::Hashes) {
            choices.push(("hash-max-listpack-entries", HASH_ENTRIES));
            choices.push(("hash-max-listpack-value", HASH_VALUES));
        }
        if choices.is_empty() {
            return vec!["DBSIZE".into()];
        }
        let (name, values) = *choices.choose(&mut self.rng).expect("choices");
        let value = if self.chance(0.4) {
            DEFAULT_CONFIG
                .iter()
                .find(|(n, _)| *n == name)
                .expect("a default")
                .1
        } else {
            self.pick(values)
        };
        vec!["CONFIG".into(), "SET".into(), name.into(), value.into()]
    }

    /// The first commands of a sequence: random thresholds (half the time the defaults).
    fn initial_config(&mut self) -> Vec<Cmd> {
        let mut out = Vec::new();
        for (name, default) in DEFAULT_CONFIG {
            let family = if name.starts_with("list") {
                Family::Lists
            } else {
                Family::Hashes
            };
            if !self.has(family) {
                continue;
            }
            let value = if self.chance(0.5) {
                default.to_string()
            } else {
                let values = match name {
                    "list-max-listpack-size" => LIST_SIZES,
                    "hash-max-listpack-entries" => HASH_ENTRIES,
                    _ => HASH_VALUES,
                };
                self.pick(values).to_string()
            };
            out.push(cmd(&["CONFIG", "SET", name, &value]));
        }
        out
    }

    /// Commands with too few or too many arguments, for every command generated.
    fn wrong_arity_cases(&self) -> Vec<Cmd> {
        const GENERIC: &[&[&str]] = &[
            &["TYPE"],
            &["OBJECT", "ENCODING"],
            &["RENAME", "k"],
            &["RENAMENX", "k"],
            &["COPY", "k"],
            &["MGET"],
            &["DEL"],
            &["EXISTS"],
        ];
        const LISTS: &[&[&str]] = &[
            &["LPUSH", "k"],
            &["RPUSH", "k"],
            &["LPUSHX", "k"],
            &["RPUSHX"],
            &["LPOP"],
            &["LPOP", "k", "1", "2"],
            &["RPOP", "k", "1", "2"],
            &["LLEN"],
            &["LLEN", "k", "k"],
            &["LRANGE", "k", "0"],
            &["LINDEX", "k"],
            &["LSET", "k", "0"],
            &["LINSERT", "k", "BEFORE", "p"],
            &["LREM", "k", "0"],
            &["LTRIM", "k", "0", "1", "2"],
            &["LPOS", "k"],
            &["LMOVE", "k", "k", "LEFT"],
            &["RPOPLPUSH", "k"],
            &["LMPOP", "1", "k"],
            &["LMPOP", "1"],
        ];
        const BLOCKING_LISTS: &[&[&str]] = &[
            &["BLPOP", "k"],
            &["BRPOP"],
            &["BLMOVE", "k", "k", "LEFT", "LEFT"],
            &["BRPOPLPUSH", "k", "k"],
            &["BLMPOP", "0.01", "1", "k"],
            &["BLMPOP", "0.01"],
        ];
        const HASHES: &[&[&str]] = &[
            &["HSET", "k", "f"],
            &["HSET", "k", "f", "v", "g"],
            &["HSETNX", "k", "f"],
            &["HGET", "k"],
            &["HGET", "k", "f", "g"],
            &["HMGET", "k"],
            &["HMSET", "k", "f"],
            &["HMSET", "k", "f", "v", "g"],
            &["HDEL", "k"],
            &["HLEN"],
            &["HSTRLEN", "k"],
            &["HEXISTS", "k"],
            &["HKEYS"],
            &["HVALS", "k", "x"],
            &["HGETALL"],
            &["HINCRBY", "k", "f"],
            &["HINCRBYFLOAT", "k", "f"],
            &["HRANDFIELD"],
            &["HSCAN", "k"],
        ];
        let mut cases: Vec<Cmd> = GENERIC.iter().map(|c| cmd(c)).collect();
        for (family, family_cases) in [
            (Family::Lists, LISTS),
            (Family::BlockingLists, BLOCKING_LISTS),
            (Family::Hashes, HASHES),
        ] {
            if self.has(family) {
                cases.extend(family_cases.iter().map(|c| cmd(c)));
            }
        }
        cases
    }

    fn pick_op(&mut self) -> Op {
        let total = self.ops.last().expect("ops").1;
        let x = self.rng.random_range(0..total);
        self.ops
            .iter()
            .find(|(_, cumulative)| x < *cumulative)
            .expect("weights")
            .0
    }

    /// The next step: one command, or a hash read followed by its OBJECT ENCODING probe
    /// (comparison rule 2).
    fn next(&mut self) -> Vec<Cmd> {
        let op = self.pick_op();
        let words: Vec<String> = match op {
            Op::Push => {
                let name = self.pick(&["LPUSH", "RPUSH"]).to_string();
                let mut words = vec![name, self.list_key()];
                words.extend(self.elements(6));
                words
            }
            Op::PushX => {
                let name = self.pick(&["LPUSHX", "RPUSHX"]).to_string();
                let mut words = vec![name, self.list_key()];
                words.extend(self.elements(3));
                words
            }
            Op::Pop => {
                let name = self.pick(&["LPOP", "RPOP"]).to_string();
                let mut words = vec![name, self.list_key()];
                if self.chance(0.5) {
                    words.push(self.pick(POP_COUNTS).into());
                }
                words
            }
            Op::Llen => vec!["LLEN".into(), self.list_key()],
            Op::Lrange => {
                let (start, stop) = if self.chance(0.4) {
                    (self.pick(&["0", "1", "-3"]).into(), "-1".into())
                } else {
                    (self.index(), self.index())
                };
                vec!["LRANGE".into(), self.list_key(), start, stop]
            }
            Op::Lindex => vec!["LINDEX".into(), self.list_key(), self.index()],
            Op::Lset => vec!["LSET".into(), self.list_key(), self.index(), self.element()],
            Op::Linsert => vec![
                "LINSERT".into(),
                self.list_key(),
                self.pick(&["BEFORE", "AFTER", "before", "after", "MIDDLE"])
                    .into(),
                self.element(),
                self.element(),
            ],
            Op::Lrem => vec![
                "LREM".into(),
                self.list_key(),
                self.pick(LREM_COUNTS).into(),
                self.element(),
            ],
            Op::Ltrim => {
                // Mostly a prefix or suffix, so that lists shrink without vanishing.
                let (start, stop) = match self.rng.random_range(0..8) {
                    0..=2 => ("0".to_string(), self.rng.random_range(0..30).to_string()),
                    3..=5 => (format!("-{}", self.rng.random_range(1..30)), "-1".into()),
                    _ => (self.index(), self.index()),
                };
                vec!["LTRIM".into(), self.list_key(), start, stop]
            }
            Op::Lpos => {
                let mut words = vec!["LPOS".into(), self.list_key(), self.element()];
                for _ in 0..self.rng.random_range(0..=3) {
                    // Valid options mostly; each error path about once in 30 options.
                    let (option, values, bad): (&str, &[&str], &[&str]) =
                        match self.rng.random_range(0..3) {
                            0 => (
                                "RANK",
                                &["1", "2", "3", "-1", "-2", "9223372036854775807"],
                                &["0", "0", "-9223372036854775807", "9223372036854775808", "x"],
                            ),
                            1 => ("COUNT", &["0", "1", "2", "5"], &["-1", "x"]),
                            _ => ("MAXLEN", &["0", "1", "3", "10"], &["-1", "x"]),
                        };
                    match self.rng.random_range(0..40) {
                        0 => words.push(option.into()),
                        1 => words.extend(["FOO".into(), "1".into()]),
                        2..=5 => words.extend([option.into(), self.pick(bad).into()]),
                        _ => words.extend([option.into(), self.pick(values).into()]),
                    }
                }
                words
            }
            Op::Lmove => {
                let (source, destination) = self.list_pair();
                vec![
                    "LMOVE".into(),
                    source,
                    destination,
                    self.direction(),
                    self.direction(),
                ]
            }
            Op::Rpoplpush => {
                let (source, destination) = self.list_pair();
                vec!["RPOPLPUSH".into(), source, destination]
            }
            Op::Lmpop => {
                let mut words = vec!["LMPOP".into()];
                self.mpop_args(&mut words);
                words
            }
            Op::BlockingPop => {
                let name = self.pick(&["BLPOP", "BRPOP"]).to_string();
                let n = self.rng.random_range(1..=3);
                let mut words = vec![name];
                words.extend(self.list_keys(n));
                words.push(self.timeout());
                words
            }
            Op::Blmove => {
                let (source, destination) = self.list_pair();
                vec![
                    "BLMOVE".into(),
                    source,
                    destination,
                    self.direction(),
                    self.direction(),
                    self.timeout(),
                ]
            }
            Op::Brpoplpush => {
                let (source, destination) = self.list_pair();
                vec!["BRPOPLPUSH".into(), source, destination, self.timeout()]
            }
            Op::Blmpop => {
                let mut words = vec!["BLMPOP".into(), self.timeout()];
                self.mpop_args(&mut words);
                words
            }
            Op::Hset | Op::Hmset => {
                let name = if op == Op::Hset { "HSET" } else { "HMSET" };
                let mut words = vec![name.into(), self.hash_key()];
                for _ in 0..self.rng.random_range(1..=4) {
                    words.push(self.field());
                    words.push(self.hash_value());
                }
                words
            }
            Op::Hsetnx => vec![
                "HSETNX".into(),
                self.hash_key(),
                self.field(),
                self.hash_value(),
            ],
            Op::Hget => vec!["HGET".into(), self.hash_key(), self.field()],
            Op::Hmget => {
                let mut words = vec!["HMGET".into(), self.hash_key()];
                words.extend(self.fields(4));
                words
            }
            Op::Hdel => {
                let mut words = vec!["HDEL".into(), self.hash_key()];
                let max = if self.chance(0.1) { 12 } else { 3 };
                words.extend(self.fields(max));
                words
            }
            Op::Hlen => vec!["HLEN".into(), self.hash_key()],
            Op::Hstrlen => vec!["HSTRLEN".into(), self.hash_key(), self.field()],
            Op::Hexists => vec!["HEXISTS".into(), self.hash_key(), self.field()],
            Op::HashRead => {
                let name = self.pick(&["HKEYS", "HVALS", "HGETALL"]);
                let key = self.hash_key();
                return vec![cmd(&[name, &key]), cmd(&["OBJECT", "ENCODING", &key])];
            }
            Op::Hincrby => vec![
                "HINCRBY".into(),
                self.hash_key(),
                self.field(),
                self.pick(INCRBY_AMOUNTS).into(),
            ],
            Op::Hincrbyfloat => vec![
                "HINCRBYFLOAT".into(),
                self.hash_key(),
                self.field(),
                self.pick(FLOAT_AMOUNTS).into(),
            ],
            Op::Hrandfield => {
                let mut words = vec!["HRANDFIELD".into(), self.hash_key()];
                match self.rng.random_range(0..24) {
                    0..=5 => {}
                    6 => words.extend(["1".into(), "WITHVALUE".into()]),
                    7 => words.extend(["-9223372036854775807".into(), "WITHVALUES".into()]),
                    8 => words.push("-9223372036854775808".into()),
                    _ => {
                        words.push(
                            self.pick(&[
                                "0",
                                "1",
                                "2",
                                "3",
                                "5",
                                "100",
                                "1000",
                                "9223372036854775807",
                                "-1",
                                "-3",
                                "-10",
                                "x",
                            ])
                            .into(),
                        );
                        if self.chance(0.5) {
                            words.push("WITHVALUES".into());
                        }
                    }
                }
                words
            }
            Op::Hscan => {
                let cursor = if self.chance(0.9) { "0" } else { "abc" };
                let mut words = vec!["HSCAN".into(), self.hash_key(), cursor.into()];
                if self.chance(0.4) {
                    words.extend([
                        "MATCH".into(),
                        self.pick(&["f*", "*", "f1?", "a", "[a-f]*", "*1*", "nomatch"])
                            .into(),
                    ]);
                }
                if self.chance(0.4) {
                    words.extend([
                        "COUNT".into(),
                        self.pick(&["1", "2", "10", "100", "0", "-1", "x", "x"])
                            .into(),
                    ]);
                }
                if self.chance(0.05) {
                    words.push("MATCH".into());
                }
                words
            }
            Op::Type => vec!["TYPE".into(), self.any_key()],
            Op::ObjectEncoding => vec!["OBJECT".into(), "ENCODING".into(), self.any_key()],
            Op::Del | Op::Exists => {
                let name = if op == Op::Del { "DEL" } else { "EXISTS" };
                let mut words = vec![name.to_string()];
                for _ in 0..self.rng.random_range(1..=3) {
                    words.push(self.any_key());
                }
                words
            }
            Op::Rename => {
                let (a, b) = self.key_pair();
                vec![self.pick(&["RENAME", "RENAME", "RENAMENX"]).into(), a, b]
            }
            Op::Copy => {
                let (a, b) = self.key_pair();
                let mut words = vec!["COPY".into(), a, b];
                if self.chance(0.5) {
                    words.push("REPLACE".into());
                }
                words
            }
            Op::StringCommand => {
                let key = self.string_key();
                match self.rng.random_range(0..8) {
                    0 | 1 => vec!["SET".into(), key, self.element()],
                    2 => vec!["GET".into(), key],
                    3 => vec!["APPEND".into(), key, self.element()],
                    4 => vec!["INCR".into(), key],
                    5 => vec!["STRLEN".into(), key],
                    6 => vec!["GETRANGE".into(), key, "0".into(), "-1".into()],
                    _ => vec!["SETRANGE".into(), key, "1".into(), "xy".into()],
                }
            }
            Op::Mget => {
                let mut words = vec!["MGET".into()];
                for _ in 0..self.rng.random_range(1..=5) {
                    words.push(self.any_key());
                }
                words
            }
            Op::ConfigSet => self.config_set(),
            Op::WrongArity => {
                let cases = self.wrong_arity_cases();
                return vec![cases.choose(&mut self.rng).expect("cases").clone()];
            }
            Op::Dbsize => vec!["DBSIZE".into()],
        };
        vec![words.into_iter().map(String::into_bytes).collect()]
    }

    /// Commands that read back every key (each hash read followed by its probe), after
    /// every wrong-arity case once, so that each command's arity error is checked in every
    /// sequence whatever the random steps were.
    fn state_dump(&self) -> Vec<Cmd> {
        let mut out = self.wrong_arity_cases();
        out.push(cmd(&["DBSIZE"]));
        for key in self.all_keys() {
            out.push(cmd(&["TYPE", &key]));
            if self.has(Family::Lists) {
                out.push(cmd(&["LRANGE", &key, "0", "-1"]));
            }
            if self.has(Family::Hashes) {
                out.push(cmd(&["HGETALL", &key]));
            }
            out.push(cmd(&["OBJECT", "ENCODING", &key]));
            out.push(cmd(&["GET", &key]));
        }
        out
    }
}

fn name_of(command: &Cmd) -> String {
    String::from_utf8_lossy(&command[0]).to_ascii_uppercase()
}

fn arg_is(command: &Cmd, i: usize, word: &str) -> bool {
    command
        .get(i)
        .is_some_and(|a| a.eq_ignore_ascii_case(word.as_bytes()))
}

/// A value with the contents of its strings erased: what comparison rule 3 compares when
/// the elements themselves are random.
fn shape(value: &Value) -> String {
    match value {
        Value::Bulk(_) => "$".into(),
        Value::Array(items) => {
            let inner: Vec<String> = items.iter().map(shape).collect();
            format!("*[{}]", inner.join(","))
        }
        other => format!("{other:?}"),
    }
}

/// The elements of an aggregate reply, sorted, and its type byte; `pairs`: a flat RESP2
/// array of field/value pairs counts each pair as one element (a RESP3 map always does).
fn unordered(reply: &[u8], pairs: bool) -> Option<(u8, Vec<String>)> {
    let (kind, mut items): (u8, Vec<String>) = match decode(reply) {
        Value::Map(entries) => (
            b'%',
            entries
                .iter()
                .map(|(k, v)| format!("{k:?} {v:?}"))
                .collect(),
        ),
        Value::Array(items) if pairs && !matches!(items.first(), Some(Value::Array(_))) => {
            if items.len() % 2 != 0 {
                return None;
            }
            (
                b'*',
                items.chunks(2).map(|pair| format!("{pair:?}")).collect(),
            )
        }
        Value::Array(items) => (b'*', items.iter().map(|v| format!("{v:?}")).collect()),
        _ => return None,
    };
    items.sort();
    Some((kind, items))
}

/// Comparison rule 3 (HRANDFIELD), for two replies that are not byte-equal.
fn random_fields_equivalent(command: &Cmd, expected: &[u8], got: &[u8]) -> bool {
    let count: Option<i64> = command
        .get(2)
        .and_then(|c| std::str::from_utf8(c).ok()?.parse().ok());
    let with_values = arg_is(command, 3, "WITHVALUES");
    let (e, g) = (decode(expected), decode(got));
    let Some(count) = count else {
        return matches!((e, g), (Value::Bulk(_), Value::Bulk(_)));
    };
    let (Some((_, e_items)), Some((_, g_items))) = (
        unordered(expected, with_values),
        unordered(got, with_values),
    ) else {
        return false;
    };
    if count > 0 && (e_items.len() as i64) < count {
        // The whole hash: the same elements in any order.
        return e_items == g_items;
    }
    let distinct = count < 0 || g_items.windows(2).all(|w| w[0] != w[1]);
    shape(&e) == shape(&g) && distinct
}

/// Whether two replies to `command` count as equal (the module's comparison rules).
/// `probe` is Redis's reply to the command after it (the OBJECT ENCODING that follows a
/// hash read).
fn equivalent(command: &Cmd, expected: &[u8], got: &[u8], probe: Option<&[u8]>) -> bool {
    if expected == got {
        return true;
    }
    if expected.starts_with(b"-") || got.starts_with(b"-") {
        return false;
    }
    match name_of(command).as_str() {
        "OBJECT" if arg_is(command, 1, "ENCODING") => {
            expected == b"$9\r\nquicklist\r\n" && got == b"$8\r\nlistpack\r\n"
        }
        name @ ("HKEYS" | "HVALS" | "HGETALL") => {
            probe == Some(b"$9\r\nhashtable\r\n".as_slice()) && {
                let pairs = name == "HGETALL";
                let (e, g) = (unordered(expected, pairs), unordered(got, pairs));
                e.is_some() && e == g
            }
        }
        "HRANDFIELD" => random_fields_equivalent(command, expected, got),
        _ => false,
    }
}

/// HSCAN iterated to cursor 0 on `conn`, from its first reply: the union of field/value
/// pairs as one RESP array (sorted, deduplicated), or the first reply when it is not a
/// scan reply (an error).
fn scan_union(conn: &mut RawConn, command: &Cmd, first: &[u8]) -> Vec<u8> {
    let mut pairs = BTreeSet::new();
    let mut reply = first.to_vec();
    for _ in 0..SCAN_CALLS_MAX {
        let Value::Array(parts) = decode(&reply) else {
            return first.to_vec();
        };
        let [Value::Bulk(cursor), Value::Array(items)] = parts.as_slice() else {
            return first.to_vec();
        };
        assert!(items.len() % 2 == 0, "HSCAN items: {}", show(&reply));
        for pair in items.chunks(2) {
            let (Value::Bulk(field), Value::Bulk(value)) = (&pair[0], &pair[1]) else {
                panic!("HSCAN items: {}", show(&reply));
            };
            pairs.insert((field.clone(), value.clone()));
        }
        if cursor.as_slice() == b"0" {
            let mut out = Vec::new();
            out.extend_from_slice(format!("*{}\r\n", pairs.len() * 2).as_bytes());
            for (field, value) in &pairs {
                for part in [field, value] {
                    out.extend_from_slice(format!("${}\r\n", part.len()).as_bytes());
                    out.extend_from_slice(part);
                    out.extend_from_slice(b"\r\n");
                }
            }
            return out;
        }
        let mut next = command.clone();
        next[2] = cursor.clone();
        reply = conn.cmd(&next);
    }
    panic!(
        "{} did not reach cursor 0 in {SCAN_CALLS_MAX} calls",
        show_cmd(command)
    );
}

/// The kind of a reply, for the histogram: errors by their text.
fn reply_kind(reply: &[u8]) -> String {
    match reply {
        b"$-1\r\n" | b"*-1\r\n" | b"_\r\n" => "nil".into(),
        b"*0\r\n" => "empty array".into(),
        [b'-', text @ ..] => {
            let text = String::from_utf8_lossy(text);
            let text = text.trim_end();
            let mut cut = text.len().min(60);
            while !text.is_char_boundary(cut) {
                cut -= 1;
            }
            format!("error {}", &text[..cut])
        }
        [b'+', ..] => "status".into(),
        [b':', ..] => "integer".into(),
        [b'$', ..] => "bulk".into(),
        [b'*', ..] => "array".into(),
        [b'%', ..] => "map".into(),
        [b',', ..] => "double".into(),
        _ => "other".into(),
    }
}

/// Command name (with the subcommand for OBJECT and CONFIG) → reply kind → count.
type Histogram = BTreeMap<String, BTreeMap<String, usize>>;

fn histogram_key(command: &Cmd) -> String {
    let name = name_of(command);
    match (name.as_str(), command.get(1)) {
        ("OBJECT" | "CONFIG", Some(sub)) => {
            format!(
                "{name} {}",
                String::from_utf8_lossy(sub).to_ascii_uppercase()
            )
        }
        _ => name,
    }
}

/// Replies the full run must have met on Redis (substrings of the histogram's kinds),
/// besides what [`check_coverage`] asks of every command: a success, the arity error, and
/// WRONGTYPE for the commands that take a key of a type.
const REQUIRED_REPLIES: &[(&str, &[&str])] = &[
    ("LPOP", &["nil", "empty array", "must be positive"]),
    ("RPOP", &["nil", "empty array", "must be positive"]),
    ("LINDEX", &["nil", "not an integer"]),
    ("LRANGE", &["empty array", "not an integer"]),
    (
        "LSET",
        &["index out of range", "no such key", "not an integer"],
    ),
    ("LINSERT", &["syntax error"]),
    ("LREM", &["not an integer"]),
    ("LTRIM", &["not an integer"]),
    (
        "LPOS",
        &[
            "nil",
            "empty array",
            "RANK can't be zero",
            "COUNT can't be negative",
            "MAXLEN can't be negative",
            "not an integer",
            "syntax error",
        ],
    ),
    ("LMOVE", &["nil", "syntax error"]),
    ("RPOPLPUSH", &["nil"]),
    (
        "LMPOP",
        &[
            "nil",
            "numkeys should be greater than 0",
            "count should be greater than 0",
            "syntax error",
        ],
    ),
    (
        "BLPOP",
        &["nil", "timeout is negative", "timeout is not a float"],
    ),
    ("BRPOP", &["nil", "timeout is negative"]),
    ("BLMOVE", &["nil", "syntax error"]),
    ("BRPOPLPUSH", &["nil"]),
    (
        "BLMPOP",
        &["nil", "numkeys should be greater than 0", "syntax error"],
    ),
    ("HGET", &["nil"]),
    (
        "HINCRBY",
        &[
            "hash value is not an integer",
            "would overflow",
            "not an integer",
        ],
    ),
    (
        "HINCRBYFLOAT",
        &[
            "not a valid float",
            "NaN or Infinity",
            "hash value is not a",
        ],
    ),
    (
        "HRANDFIELD",
        &[
            "nil",
            "empty array",
            "syntax error",
            "value is out of range",
        ],
    ),
    (
        "HSCAN",
        &["invalid cursor", "syntax error", "not an integer"],
    ),
    ("OBJECT ENCODING", &["nil"]),
    ("RENAME", &["no such key"]),
];

/// Generic commands the generator sends: (histogram name, whether it must have met
/// WRONGTYPE, whether it is generated with a wrong number of arguments).
const GENERIC_COVERAGE: &[(&str, bool, bool)] = &[
    ("TYPE", false, true),
    ("OBJECT ENCODING", false, true),
    ("DEL", false, true),
    ("EXISTS", false, true),
    ("RENAME", false, true),
    ("RENAMENX", false, true),
    ("COPY", false, true),
    ("MGET", false, true),
    ("SET", false, false),
    ("GET", true, false),
    ("APPEND", true, false),
    ("INCR", true, false),
    ("STRLEN", true, false),
    ("GETRANGE", true, false),
    ("SETRANGE", true, false),
];

/// Panics unless the run met, on Redis, every reply the generator is meant to reach.
fn check_coverage(label: &str, histogram: &Histogram, families: &[Family]) {
    let mut expectations: Vec<(&str, bool, bool)> = GENERIC_COVERAGE.to_vec();
    for family in families {
        expectations.extend(family.commands().iter().map(|name| (*name, true, true)));
    }
    let mut missing = Vec::new();
    let empty = BTreeMap::new();
    for (name, wrongtype, arity) in &expectations {
        let kinds = histogram.get(*name).unwrap_or(&empty);
        let met = |needle: &str| kinds.keys().any(|kind| kind.contains(needle));
        if !kinds.keys().any(|kind| !kind.starts_with("error")) {
            missing.push(format!("{name}: a success"));
        }
        if *wrongtype && !met("WRONGTYPE") {
            missing.push(format!("{name}: WRONGTYPE"));
        }
        // OBJECT ENCODING's arity error names 'object|encoding'.
        let command = name.split(' ').next().expect("name").to_ascii_lowercase();
        if *arity && !met(&format!("wrong number of arguments for '{command}")) {
            missing.push(format!("{name}: the arity error"));
        }
        let required = REQUIRED_REPLIES
            .iter()
            .filter(|(n, _)| n == name)
            .flat_map(|(_, needles)| needles.iter());
        for needle in required {
            if !met(needle) {
                missing.push(format!("{name}: {needle}"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "{label}: the generator no longer reaches these replies (RUVIO_DIFF_TRACE=histogram \
         prints what it reaches):\n  {}",
        missing.join("\n  ")
    );
}

/// One sequence against both servers: the two connections, what a failure message
/// needs, and the histogram the sequences of one configuration share.
struct Run<'a> {
    reference: RawConn,
    target: RawConn,
    history: VecDeque<String>,
    label: &'a str,
    seed: u64,
    /// The sequence's length: a failure in the state dump after it replays with this many.
    commands: usize,
    resp3: bool,
    pipelined: bool,
    compared: usize,
    /// `RUVIO_DIFF_TRACE`: print every command with Redis's reply.
    trace: bool,
    histogram: &'a mut Histogram,
}

impl Run<'_> {
    /// Sends `batch` to both servers in one write each, then compares the replies in order.
    /// An HSCAN may only come last: it is iterated to the end on each server.
    fn batch(&mut self, batch: &[Cmd], start_index: usize) {
        let bytes: Vec<u8> = batch.iter().flat_map(|c| encode(c)).collect();
        self.reference.send(&bytes);
        self.target.send(&bytes);
        let mut expected: Vec<Vec<u8>> = Vec::with_capacity(batch.len());
        let mut got: Vec<Vec<u8>> = Vec::with_capacity(batch.len());
        for _ in batch {
            expected.push(self.reference.read_reply());
            got.push(self.target.read_reply());
        }
        for (i, command) in batch.iter().enumerate() {
            *self
                .histogram
                .entry(histogram_key(command))
                .or_default()
                .entry(reply_kind(&expected[i]))
                .or_default() += 1;
            if name_of(command) == "HSCAN" {
                if i + 1 == batch.len() {
                    expected[i] = scan_union(&mut self.reference, command, &expected[i]);
                    got[i] = scan_union(&mut self.target, command, &got[i]);
                } else {
                    // Only the arity cases of the state dump: they cannot iterate.
                    assert!(
                        expected[i].starts_with(b"-"),
                        "a successful HSCAN must end its batch"
                    );
                }
            }
        }
        for (i, command) in batch.iter().enumerate() {
            if self.trace {
                eprintln!("{} -> {}", show_cmd(command), show(&expected[i]));
            }
            self.history.push_back(show_cmd(command));
            if self.history.len() > HISTORY_MAX {
                self.history.pop_front();
            }
            let probe = expected.get(i + 1).map(Vec::as_slice);
            if !equivalent(command, &expected[i], &got[i], probe) {
                let history: Vec<String> = self.history.iter().cloned().collect();
                panic!(
                    "{label}: replies differ (seed {seed}, {protocol}, {mode}, command #{index}, \
                     batch of {n})\n\
                     command:  {command}\n\
                     redis:    {expected}\n\
                     target:   {got}\n\
                     last commands (oldest first):\n  {history}\n\
                     reproduce: RUVIO_DIFF_SEED={seed} RUVIO_DIFF_COMMANDS={count}",
                    label = self.label,
                    seed = self.seed,
                    protocol = if self.resp3 { "RESP3" } else { "RESP2" },
                    mode = if self.pipelined {
                        "pipelined"
                    } else {
                        "one step at a time"
                    },
                    index = start_index + i,
                    n = batch.len(),
                    command = show_cmd(command),
                    expected = show(&expected[i]),
                    got = show(&got[i]),
                    history = history.join("\n  "),
                    count = (start_index + i + 1).min(self.commands),
                );
            }
            self.compared += 1;
        }
    }
}

fn print_histogram(label: &str, histogram: &Histogram) {
    eprintln!("{label}: Redis's replies by command");
    for (name, kinds) in histogram {
        let kinds: Vec<String> = kinds.iter().map(|(k, n)| format!("{n} {k}")).collect();
        eprintln!("  {name:<16} {}", kinds.join(" | "));
    }
}

fn run_differential(label: &str, shards: usize) {
    if require_redis_server(label).is_none() {
        return;
    }
    let settings = DiffSettings::from_env(SEEDS, COMMANDS_PER_SEED);
    let reference_server = Server::redis();
    let target_server = Server::forward(shards);
    let families = supported_families(&mut target_server.raw());
    if families.is_empty() {
        eprintln!("SKIPPED {label}: the target implements no list or hash commands yet");
        return;
    }
    if families.len() < Family::ALL.len() {
        eprintln!("{label}: the target implements only {families:?}; generating those");
    }
    let mut servers = vec![&reference_server];
    if target() == Target::Redis {
        servers.push(&target_server);
    }
    for server in servers {
        let reply = server.raw().cmd(&["CONFIG", "SET", "hz", REDIS_HZ]);
        assert_eq!(reply, b"+OK\r\n", "CONFIG SET hz: {}", show(&reply));
    }
    let mut histogram = Histogram::new();
    let mut total = 0;
    for seed in settings.seeds.iter().copied() {
        let pipelined = seed % 2 == 0;
        let resp3 = seed % 4 >= 2;
        let mut run = Run {
            reference: reference_server.raw(),
            target: target_server.raw(),
            history: VecDeque::new(),
            label,
            seed,
            commands: settings.commands,
            resp3,
            pipelined,
            compared: 0,
            trace: settings.trace_commands,
            histogram: &mut histogram,
        };
        for conn in [&mut run.reference, &mut run.target] {
            assert_eq!(conn.cmd(&["FLUSHALL"]), b"+OK\r\n");
            if resp3 {
                // The HELLO reply names the server and its version: not compared.
                let hello = conn.cmd(&["HELLO", "3"]);
                assert!(hello.starts_with(b"%"), "HELLO 3: {}", show(&hello));
            }
        }
        let mut generator = Generator::new(seed, &families);
        let initial = generator.initial_config();
        run.batch(&initial, 0);
        let mut index = 0;
        while index < settings.commands {
            let size = if pipelined {
                generator.rng.random_range(1..=PIPELINE_MAX)
            } else {
                1
            };
            let mut batch: Vec<Cmd> = Vec::new();
            while batch.len() < size && index + batch.len() < settings.commands {
                let step = generator.next();
                let scan = step.iter().any(|c| name_of(c) == "HSCAN");
                batch.extend(step);
                if scan {
                    break;
                }
            }
            run.batch(&batch, index);
            index += batch.len();
        }
        let dump = generator.state_dump();
        run.batch(&dump, index);
        total += run.compared;
    }
    if settings.trace_summary {
        print_histogram(label, &histogram);
    }
    if settings.full_run {
        check_coverage(label, &histogram, &families);
    }
    eprintln!("{label}: {total} replies equivalent");
}

#[test]
fn differential_collections_forward_1_shard() {
    run_differential("differential_collections_forward_1_shard", 1);
}

#[test]
fn differential_collections_forward_2_shards() {
    run_differential("differential_collections_forward_2_shards", 2);
}

/// OBJECT ENCODING of lists as Redis 7.2 converts them (src/t_list.c), which Redis 7.0
/// cannot check (it always answers quicklist). A list is a listpack until a write would
/// take it past `list-max-listpack-size`: a count (1..=5; 0 means 1) or, for -1..=-5, a
/// size of 4, 8, 16, 32 or 64 KB (a count limit also converts past 8 KB). The check uses
/// the listpack's bytes plus the raw length of the new elements, and runs before the write
/// (LINSERT converts even when the pivot is missing). It becomes a listpack again after a
/// removal (pops, LREM, LTRIM, LMOVE's source, LSET) only when it is a single quicklist
/// node within half the limit, so that a list at the boundary does not flip on every
/// write. COPY and RENAME keep the encoding, and CONFIG SET acts on the next write only.
///
/// The expected replies were checked against Valkey 9.1 (forked from Redis 7.2, same
/// rules): `RUVIO_TEST_TARGET=redis REDIS_SERVER_BIN=<valkey-server>`. With a real Redis
/// older than 7.2 as the target the test is skipped.
#[test]
fn list_encoding_transitions() {
    let server = Server::forward(1);
    let mut conn = server.raw();
    if !supported_families(&mut conn).contains(&Family::Lists) {
        eprintln!("SKIPPED list_encoding_transitions: the target has no list commands yet");
        return;
    }
    assert_eq!(conn.cmd(&["RPUSH", "probe", "a"]), b":1\r\n");
    if target() == Target::Redis
        && conn.cmd(&["OBJECT", "ENCODING", "probe"]) != b"$8\r\nlistpack\r\n"
    {
        eprintln!(
            "SKIPPED list_encoding_transitions: this redis-server predates 7.2's list \
             encodings (set REDIS_SERVER_BIN to a 7.2+ server)"
        );
        return;
    }
    const LISTPACK: &[u8] = b"$8\r\nlistpack\r\n";
    const QUICKLIST: &[u8] = b"$9\r\nquicklist\r\n";
    let mut check = |args: &[&str], expected: &[u8]| {
        let reply = conn.cmd(args);
        assert_eq!(
            reply,
            expected,
            "{}: expected {}, got {}",
            args.join(" ").chars().take(80).collect::<String>(),
            show(expected),
            show(&reply)
        );
    };
    let encoding = |key: &'static str| -> [&'static str; 3] { ["OBJECT", "ENCODING", key] };
    let bulk = |s: &str| format!("${}\r\n{s}\r\n", s.len()).into_bytes();

    // Count limit 4: the fifth element converts; popping back needs <= 2 elements.
    check(
        &["CONFIG", "SET", "list-max-listpack-size", "4"],
        b"+OK\r\n",
    );
    check(&["RPUSH", "l", "a", "b", "c", "d"], b":4\r\n");
    check(&encoding("l"), LISTPACK);
    check(&["RPUSH", "l", "e"], b":5\r\n");
    check(&encoding("l"), QUICKLIST);
    check(&["RPOP", "l"], b"$1\r\ne\r\n");
    check(&encoding("l"), QUICKLIST);
    check(&["RPOP", "l"], b"$1\r\nd\r\n");
    check(&encoding("l"), QUICKLIST);
    check(&["RPOP", "l"], b"$1\r\nc\r\n");
    check(&encoding("l"), LISTPACK);

    // Only a single-node quicklist converts back: five pushes make nodes [a b c d] [e];
    // after three LPOPs two elements remain, but in two nodes.
    check(&["DEL", "l"], b":1\r\n");
    check(&["RPUSH", "l", "a", "b", "c", "d", "e"], b":5\r\n");
    check(&encoding("l"), QUICKLIST);
    for popped in ["a", "b", "c"] {
        check(&["LPOP", "l"], &bulk(popped));
    }
    check(&encoding("l"), QUICKLIST);
    check(&["LPOP", "l"], b"$1\r\nd\r\n");
    check(&encoding("l"), LISTPACK);

    // LINSERT checks the limit before it looks for the pivot.
    check(&["DEL", "l"], b":1\r\n");
    check(&["RPUSH", "l", "a", "b", "c", "d"], b":4\r\n");
    check(&["LINSERT", "l", "BEFORE", "nosuchpivot", "x"], b":-1\r\n");
    check(&encoding("l"), QUICKLIST);

    // LTRIM and LREM shrink: what is left is one node within half the limit.
    check(&["RPUSH", "t", "a", "b", "c", "d", "e", "f"], b":6\r\n");
    check(&encoding("t"), QUICKLIST);
    check(&["LTRIM", "t", "0", "1"], b"+OK\r\n");
    check(&encoding("t"), LISTPACK);
    check(&["RPUSH", "r", "a", "x", "x", "x", "x"], b":5\r\n");
    check(&encoding("r"), QUICKLIST);
    check(&["LREM", "r", "0", "x"], b":4\r\n");
    check(&encoding("r"), LISTPACK);

    // COPY and RENAME keep the encoding; CONFIG SET changes nothing until the next write.
    check(&["RPUSH", "c", "a", "b", "c"], b":3\r\n");
    check(&["COPY", "c", "c2"], b":1\r\n");
    check(&encoding("c2"), LISTPACK);
    check(
        &["CONFIG", "SET", "list-max-listpack-size", "2"],
        b"+OK\r\n",
    );
    check(&encoding("c"), LISTPACK);
    check(&["RPUSH", "c", "d"], b":4\r\n");
    check(&encoding("c"), QUICKLIST);
    check(&["COPY", "c", "c3"], b":1\r\n");
    check(&encoding("c3"), QUICKLIST);
    check(&["RENAME", "c3", "c4"], b"+OK\r\n");
    check(&encoding("c4"), QUICKLIST);

    // LMOVE: the source shrinks (count limit 2, so back at 1) and the destination grows.
    check(&["RPUSH", "s", "a", "b", "c"], b":3\r\n");
    check(&encoding("s"), QUICKLIST);
    check(&["LMOVE", "s", "d", "RIGHT", "LEFT"], b"$1\r\nc\r\n");
    check(&encoding("s"), QUICKLIST);
    check(&encoding("d"), LISTPACK);
    check(&["LMOVE", "s", "d", "RIGHT", "LEFT"], b"$1\r\nb\r\n");
    check(&encoding("s"), LISTPACK);
    check(&encoding("d"), LISTPACK);
    check(&["LMOVE", "s", "d", "RIGHT", "LEFT"], b"$1\r\na\r\n");
    check(&["EXISTS", "s"], b":0\r\n");
    check(&encoding("d"), QUICKLIST);

    // Count limit 0 means 1, and half of it is 0: such a quicklist never converts back.
    check(
        &["CONFIG", "SET", "list-max-listpack-size", "0"],
        b"+OK\r\n",
    );
    check(&["RPUSH", "z", "a"], b":1\r\n");
    check(&encoding("z"), LISTPACK);
    check(&["RPUSH", "z", "b"], b":2\r\n");
    check(&encoding("z"), QUICKLIST);
    check(&["RPOP", "z"], b"$1\r\nb\r\n");
    check(&encoding("z"), QUICKLIST);

    // A count limit still converts past 8 KB; going back only looks at the count.
    let z3000 = "z".repeat(3000);
    check(
        &["CONFIG", "SET", "list-max-listpack-size", "5"],
        b"+OK\r\n",
    );
    check(&["RPUSH", "big", &z3000, &z3000, &z3000], b":3\r\n");
    check(&encoding("big"), QUICKLIST);
    check(&["RPOP", "big"], &bulk(&z3000));
    check(&encoding("big"), LISTPACK);

    // Size limit 4 KB with 900-byte elements (904 bytes each in a listpack): four fit,
    // the fifth converts; back to a listpack at two (1815 bytes <= 2048), not at three.
    check(
        &["CONFIG", "SET", "list-max-listpack-size", "-1"],
        b"+OK\r\n",
    );
    let elements: Vec<String> = (0..5).map(|i| format!("{i}{}", "x".repeat(899))).collect();
    for (i, element) in elements.iter().enumerate().take(4) {
        check(
            &["RPUSH", "b", element],
            format!(":{}\r\n", i + 1).as_bytes(),
        );
    }
    check(&encoding("b"), LISTPACK);
    check(&["RPUSH", "b", &elements[4]], b":5\r\n");
    check(&encoding("b"), QUICKLIST);
    check(&["RPOP", "b"], &bulk(&elements[4]));
    check(&encoding("b"), QUICKLIST);
    check(&["RPOP", "b"], &bulk(&elements[3]));
    check(&encoding("b"), QUICKLIST);
    check(&["RPOP", "b"], &bulk(&elements[2]));
    check(&encoding("b"), LISTPACK);

    // LSET grows (a 5000-byte element) and shrinks (a one-element list is one node).
    check(&["RPUSH", "e", "a"], b":1\r\n");
    check(&["LSET", "e", "0", &"y".repeat(5000)], b"+OK\r\n");
    check(&encoding("e"), QUICKLIST);
    check(&["LSET", "e", "0", "a"], b"+OK\r\n");
    check(&encoding("e"), LISTPACK);

    // The default -2 (8 KB): one 9000-byte element converts, popping it converts back.
    check(
        &["CONFIG", "SET", "list-max-listpack-size", "-2"],
        b"+OK\r\n",
    );
    check(&["RPUSH", "n", "1", "2", "3"], b":3\r\n");
    check(&encoding("n"), LISTPACK);
    let w9000 = "w".repeat(9000);
    check(&["LPUSH", "n", &w9000], b":4\r\n");
    check(&encoding("n"), QUICKLIST);
    check(&["LPOP", "n"], &bulk(&w9000));
    check(&encoding("n"), LISTPACK);
}

/// The comparison rules themselves: what they forgive and what they do not.
#[test]
fn comparison_rules_are_narrow() {
    let encoding = cmd(&["OBJECT", "ENCODING", "k"]);
    let quicklist = b"$9\r\nquicklist\r\n";
    let listpack = b"$8\r\nlistpack\r\n";
    let hashtable = b"$9\r\nhashtable\r\n";
    assert!(equivalent(&encoding, quicklist, listpack, None));
    assert!(!equivalent(&encoding, listpack, quicklist, None));
    assert!(!equivalent(&encoding, hashtable, listpack, None));
    assert!(!equivalent(&encoding, b"$6\r\nembstr\r\n", listpack, None));

    let hgetall = cmd(&["HGETALL", "h"]);
    let ab = b"*4\r\n$1\r\na\r\n$1\r\n1\r\n$1\r\nb\r\n$1\r\n2\r\n";
    let ba = b"*4\r\n$1\r\nb\r\n$1\r\n2\r\n$1\r\na\r\n$1\r\n1\r\n";
    let swapped = b"*4\r\n$1\r\na\r\n$1\r\n2\r\n$1\r\nb\r\n$1\r\n1\r\n";
    assert!(equivalent(&hgetall, ab, ba, Some(hashtable)));
    assert!(!equivalent(&hgetall, ab, ba, Some(listpack)));
    assert!(!equivalent(&hgetall, ab, swapped, Some(hashtable)));
    let map_ab = b"%2\r\n$1\r\na\r\n$1\r\n1\r\n$1\r\nb\r\n$1\r\n2\r\n";
    let map_ba = b"%2\r\n$1\r\nb\r\n$1\r\n2\r\n$1\r\na\r\n$1\r\n1\r\n";
    assert!(equivalent(&hgetall, map_ab, map_ba, Some(hashtable)));
    assert!(!equivalent(&hgetall, map_ab, ba, Some(hashtable)));
    let hkeys = cmd(&["HKEYS", "h"]);
    assert!(equivalent(
        &hkeys,
        b"*2\r\n$1\r\na\r\n$1\r\nb\r\n",
        b"*2\r\n$1\r\nb\r\n$1\r\na\r\n",
        Some(hashtable)
    ));
    assert!(!equivalent(
        &hkeys,
        b"*2\r\n$1\r\na\r\n$1\r\nb\r\n",
        b"*2\r\n$1\r\na\r\n$1\r\nc\r\n",
        Some(hashtable)
    ));

    // HRANDFIELD: a whole hash as a set, a subset or repetitions by shape only.
    let whole = cmd(&["HRANDFIELD", "h", "100", "WITHVALUES"]);
    assert!(equivalent(&whole, ab, ba, None));
    assert!(!equivalent(&whole, ab, swapped, None));
    let nested_ab = b"*2\r\n*2\r\n$1\r\na\r\n$1\r\n1\r\n*2\r\n$1\r\nb\r\n$1\r\n2\r\n";
    let nested_ba = b"*2\r\n*2\r\n$1\r\nb\r\n$1\r\n2\r\n*2\r\n$1\r\na\r\n$1\r\n1\r\n";
    assert!(equivalent(&whole, nested_ab, nested_ba, None));
    assert!(!equivalent(&whole, nested_ab, ba, None));
    let subset = cmd(&["HRANDFIELD", "h", "1"]);
    assert!(equivalent(
        &subset,
        b"*1\r\n$1\r\na\r\n",
        b"*1\r\n$2\r\nbb\r\n",
        None
    ));
    assert!(!equivalent(
        &subset,
        b"*1\r\n$1\r\na\r\n",
        b"*2\r\n$1\r\na\r\n$1\r\nb\r\n",
        None
    ));
    let two = cmd(&["HRANDFIELD", "h", "2"]);
    assert!(!equivalent(
        &two,
        b"*2\r\n$1\r\na\r\n$1\r\nb\r\n",
        b"*2\r\n$1\r\na\r\n$1\r\na\r\n",
        None
    ));
    let repeated = cmd(&["HRANDFIELD", "h", "-2"]);
    assert!(equivalent(
        &repeated,
        b"*2\r\n$1\r\na\r\n$1\r\nb\r\n",
        b"*2\r\n$1\r\na\r\n$1\r\na\r\n",
        None
    ));
    let single = cmd(&["HRANDFIELD", "h"]);
    assert!(equivalent(&single, b"$1\r\na\r\n", b"$1\r\nb\r\n", None));
    assert!(!equivalent(&single, b"$1\r\na\r\n", b"$-1\r\n", None));
    assert!(!equivalent(
        &single,
        b"-ERR syntax error\r\n",
        b"$1\r\na\r\n",
        None
    ));

    // Everything else must be byte-equal.
    assert!(!equivalent(
        &cmd(&["LRANGE", "l", "0", "-1"]),
        b"*2\r\n$1\r\na\r\n$1\r\nb\r\n",
        b"*2\r\n$1\r\nb\r\n$1\r\na\r\n",
        Some(hashtable)
    ));
}
