//! The generator of differential_collections.rs: the three command families and which of
//! them a server implements, the steps with their weights, the tables of arguments
//! (elements, fields, indexes, counts, thresholds), and [`Generator`], which turns a seed
//! into commands over two hash-tagged key groups. Kept apart from the comparison rules
//! and the coverage accounting so that each can be read, and changed, on its own; the
//! parent module doc says what is generated and why.

use crate::common::*;
use rand::rngs::StdRng;
use rand::seq::IndexedRandom;
use rand::{Rng, SeedableRng};

/// The three families the generator covers; the target may implement each or not.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Family {
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
    pub(crate) const ALL: [Family; 3] = [Family::Lists, Family::BlockingLists, Family::Hashes];

    pub(super) fn commands(self) -> &'static [&'static str] {
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
pub(crate) fn supported_families(conn: &mut RawConn) -> Vec<Family> {
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
pub(super) enum Op {
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
pub(crate) struct Generator {
    pub(crate) rng: StdRng,
    groups: Vec<Group>,
    /// The steps the target supports, with cumulative weights.
    ops: Vec<(Op, u32)>,
    families: Vec<Family>,
}

impl Generator {
    pub(crate) fn new(seed: u64, families: &[Family]) -> Generator {
        let mut groups = Vec::new();
        for shard in 0..2 {
            let tag = hash_tag_on_shard(shard, 2);
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
    pub(crate) fn initial_config(&mut self) -> Vec<Cmd> {
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
    pub(crate) fn next(&mut self) -> Vec<Cmd> {
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
    pub(crate) fn state_dump(&self) -> Vec<Cmd> {
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
