//! Differential test of SORT and SORT_RO: seeded random sequences go to a real
//! `redis-server` 7.0 and to Ruvio (forward mode, 1 and 2 shards); the raw RESP
//! replies must be identical, command by command, except where Redis itself does not
//! define the order (the rules below).
//!
//! # Key space
//!
//! Sorted keys: two lists, two sets and two sorted sets, one of each on each shard
//! (with [`key_on_shard`]), plus a string and a hash (WRONGTYPE) and a missing key.
//! Their elements come from a small vocabulary: numbers (integers, `1.5`, `-0`,
//! `1e1`, which ties with `10`) for the numeric keys, words and numbers for the
//! others (a numeric SORT of those fails with Redis's error). Per element `e` there
//! are weight keys, spread over both shards by their names: `n_e` (a number, ties
//! allowed), `w_e` (a string unique to `e`) and the hash `h_e` with fields `n`
//! (number), `a` (unique string) and, for some elements only, `g`. STORE goes to
//! `dst` keys on both shards, or onto a sorted key. So BY, GET and STORE read and
//! write keys of both shards, which forward mode does by borrowing them all
//! (docs/cross-shard.md, "SORT with BY and GET patterns").
//!
//! Every SORT takes random options: BY (none, a constant, `n_*`, `w_*`, `h_*->n`,
//! `h_*->a`, `h_*->g`, `nokey_*`), LIMIT (offsets and counts around the sizes,
//! negative and huge ones), up to three GETs (`#`, `n_*`, `h_*->a`, `h_*->g`,
//! `nokey_*`, a constant), ASC/DESC, ALPHA, STORE (followed by `LRANGE dst`), and
//! now and then a syntax error, a non-integer LIMIT or SORT_RO with STORE.
//!
//! # Sequences
//!
//! Seeds 2 and 4 send pipelines of up to 30 commands in one write, 1 and 3 one step
//! at a time; 2 and 3 use RESP3 (`HELLO 3`: nil is `_`). Each sequence starts from an
//! empty database and ends by comparing TYPE, the contents and OBJECT ENCODING of
//! every sorted and destination key.
//!
//! # Comparison rules (the whole allowlist)
//!
//! 1. SORT of a set BY a constant without STORE: Redis returns the set's own order,
//!    which it does not define. The rows (an element and its GET values) are compared
//!    as sorted multisets; with a LIMIT, which rows make the cut is as undefined, so
//!    only the number of rows is compared.
//! 2. OBJECT ENCODING: where Redis 7.0 says `quicklist` (lists) or `hashtable` (sets),
//!    Ruvio may say `listpack`: Ruvio follows Redis 7.2, whose small lists and sets
//!    are listpacks. A sorted set is a `skiplist` on both after SORT read it (Redis
//!    converts it for good).
//! 3. Final SMEMBERS: sorted multisets (the order of a set is undefined).
//!
//! # Not generated (Redis does not define the result)
//!
//! - ALPHA BY a pattern that can tie distinct elements (`n_*`, `h_*->n`, `h_*->g`,
//!   `nokey_*`: equal or missing weights) over a set or sorted set, or with a LIMIT:
//!   ties keep the loading order under glibc's stable `qsort`, but a set's loading
//!   order is undefined, and BY with LIMIT uses Redis's partial quicksort, which is
//!   not stable. Over a list without LIMIT, ties keep the list's order in both, and
//!   that is generated. `w_*` and `h_*->a` are unique per element, so they never tie
//!   (STORE puts GET values, which have no weights, only into `dst` keys, never sorted).
//! - Elements with NUL bytes or outside ASCII: ALPHA without STORE collates with
//!   `strcoll`, whose order depends on the server's locale (Ruvio: the C locale; the
//!   engine tests check NUL handling).
//!
//! Reproduce a failure with `RUVIO_DIFF_SEED=<seed> RUVIO_DIFF_COMMANDS=<n>`;
//! `RUVIO_DIFF_TRACE=1` prints every command with Redis's reply.

mod common;

use common::*;
use rand::rngs::StdRng;
use rand::seq::IndexedRandom;
use rand::{Rng, SeedableRng};

/// Commands per sequence unless `RUVIO_DIFF_COMMANDS` says otherwise.
const COMMANDS_PER_SEED: usize = 3000;
/// Odd seeds one step at a time, even ones pipelined; 2 and 3 in RESP3.
const SEEDS: &[u64] = &[1, 2, 3, 4];
/// Largest pipeline sent in one write.
const PIPELINE_MAX: usize = 30;

/// Elements of the numeric keys.
const NUMBERS: &[&str] = &[
    "-3", "-2", "-1", "0", "1", "2", "3", "4", "5", "7", "10", "11", "12", "1.5", "-0", "1e1",
    "2.50",
];
/// Extra elements of the other keys.
const WORDS: &[&str] = &["a", "b", "c", "d", "hello", "B", "ab", "zz"];
/// BY patterns (`None`: no BY).
const BY: &[Option<&str>] = &[
    None,
    None,
    Some("nosort"),
    Some("n_*"),
    Some("w_*"),
    Some("h_*->n"),
    Some("h_*->a"),
    Some("h_*->g"),
    Some("nokey_*"),
];
/// BY patterns under which distinct elements can tie with ALPHA.
const TYING_BY: &[&str] = &["n_*", "h_*->n", "h_*->g", "nokey_*"];
/// GET patterns.
const GETS: &[&str] = &["#", "n_*", "w_*", "h_*->a", "h_*->g", "nokey_*", "constant"];

struct Generator {
    rng: StdRng,
    /// `[list, set, zset]` keys per shard; index 0 holds numbers only.
    lists: Vec<String>,
    sets: Vec<String>,
    zsets: Vec<String>,
    dsts: Vec<String>,
    string: String,
    hash: String,
}

impl Generator {
    fn new(seed: u64, shards: usize) -> Generator {
        let shards = shards.max(2);
        let on = |prefix: &str| -> Vec<String> {
            (0..2)
                .map(|i| key_on_shard(prefix, i % shards, shards))
                .collect()
        };
        Generator {
            rng: StdRng::seed_from_u64(seed),
            lists: on("list"),
            sets: on("set"),
            zsets: on("zset"),
            dsts: on("dst"),
            string: key_on_shard("str", 1, shards),
            hash: key_on_shard("hash", 0, shards),
        }
    }

    fn sorted_keys(&self) -> Vec<String> {
        let mut keys = self.lists.clone();
        keys.extend(self.sets.iter().cloned());
        keys.extend(self.zsets.iter().cloned());
        keys
    }

    fn pick<T: Clone>(&mut self, from: &[T]) -> T {
        from.choose(&mut self.rng).expect("choices").clone()
    }

    /// An element for key slot `numeric` (index 0 of each kind: numbers only).
    fn element(&mut self, numeric: bool) -> String {
        if numeric || self.rng.random_bool(0.5) {
            self.pick(NUMBERS).to_string()
        } else {
            self.pick(WORDS).to_string()
        }
    }

    fn elements(&mut self, numeric: bool, max: usize) -> Vec<String> {
        let n = self.rng.random_range(1..=max);
        (0..n).map(|_| self.element(numeric)).collect()
    }

    /// A number as a weight: integers, decimals, now and then text.
    fn number(&mut self) -> String {
        match self.rng.random_range(0..10) {
            0..6 => self.rng.random_range(-5i64..6).to_string(),
            6..9 => format!("{:.2}", self.rng.random_range(-5.0f64..5.0)),
            _ => self.pick(&["1e2", " 4", "-0", "abc", ""]).to_string(),
        }
    }

    /// A string weight unique to `elem`.
    fn unique(&mut self, elem: &str) -> String {
        let c = self.rng.random_range(b'a'..=b'z') as char;
        format!("{c}{elem}")
    }

    /// The weight keys of element `e`.
    fn weights_of(&mut self, e: &str) -> Vec<Cmd> {
        let (n, w, hn, ha) = (self.number(), self.unique(e), self.number(), self.unique(e));
        let mut hset = vec![format!("h_{e}"), "n".into(), hn, "a".into(), ha];
        if self.rng.random_bool(0.5) {
            hset.extend(["g".to_string(), self.number()]);
        }
        let mut hset_cmd = vec!["HSET".to_string()];
        hset_cmd.extend(hset);
        vec![
            cmd(&["SET", &format!("n_{e}"), &n]),
            cmd(&["SET", &format!("w_{e}"), &w]),
            cmd(&["DEL", &format!("h_{e}")]),
            strings_cmd(&hset_cmd),
        ]
    }

    fn initial(&mut self) -> Vec<Cmd> {
        let mut out = vec![
            cmd(&["SET", &self.string, "v"]),
            cmd(&["HSET", &self.hash, "f", "v"]),
        ];
        let every: Vec<&str> = NUMBERS.iter().chain(WORDS).copied().collect();
        for e in every {
            out.extend(self.weights_of(e));
        }
        out
    }

    /// A sorted key (sometimes the string, hash or a missing key) and whether it is
    /// a set.
    fn source(&mut self) -> String {
        match self.rng.random_range(0..100) {
            0..3 => self.string.clone(),
            3..5 => self.hash.clone(),
            5..7 => "missing".into(),
            _ => {
                let keys = self.sorted_keys();
                self.pick(&keys)
            }
        }
    }

    fn limit(&mut self) -> (String, String) {
        let offset = match self.rng.random_range(0..10) {
            0 => self
                .pick(&["-9223372036854775808", "9223372036854775807", "-3"])
                .to_string(),
            _ => self.rng.random_range(0i64..12).to_string(),
        };
        let count = match self.rng.random_range(0..10) {
            0 => self
                .pick(&["9223372036854775807", "-9223372036854775808", "-1"])
                .to_string(),
            1 => "0".into(),
            _ => self.rng.random_range(1i64..10).to_string(),
        };
        (offset, count)
    }

    /// A SORT or SORT_RO with random options (and its follow-up).
    fn sort(&mut self) -> Vec<Cmd> {
        let readonly = self.rng.random_bool(0.2);
        let src = self.source();
        let mut words = vec![
            if readonly { "SORT_RO" } else { "SORT" }.to_string(),
            src.clone(),
        ];
        let alpha = self.rng.random_bool(0.4);
        let limited = self.rng.random_bool(0.35);
        let is_list = src.starts_with("list");
        let mut by = self.pick(BY);
        if let Some(pattern) = by {
            if alpha && TYING_BY.contains(&pattern) && (!is_list || limited) {
                by = Some(self.pick(&["w_*", "h_*->a", "nosort"]));
            }
        }
        let mut options: Vec<Vec<String>> = Vec::new();
        if let Some(pattern) = by {
            options.push(vec!["BY".into(), pattern.into()]);
        }
        if limited {
            let (offset, count) = self.limit();
            options.push(vec!["LIMIT".into(), offset, count]);
        }
        for _ in 0..self.rng.random_range(0..=3) {
            if self.rng.random_bool(0.5) {
                options.push(vec!["GET".into(), self.pick(GETS).into()]);
            }
        }
        if self.rng.random_bool(0.4) {
            options.push(vec![self.pick(&["DESC", "ASC", "desc"]).into()]);
        }
        if alpha {
            options.push(vec!["ALPHA".into()]);
        }
        // Only elements go back into a sorted list (GET values there would be
        // elements without weights: ties, see "Not generated").
        let elements_only = options.iter().all(|o| o[0] != "GET" || o[1] == "#");
        let store = (self.rng.random_bool(if readonly { 0.05 } else { 0.3 })).then(|| {
            if elements_only && self.rng.random_bool(0.2) {
                self.pick(&self.lists.clone())
            } else {
                self.pick(&self.dsts.clone())
            }
        });
        if let Some(dst) = &store {
            options.push(vec!["STORE".into(), dst.clone()]);
        }
        // Redis reads the options in any order.
        for i in (1..options.len()).rev() {
            let j = self.rng.random_range(0..=i);
            options.swap(i, j);
        }
        match self.rng.random_range(0..40) {
            0 => options.push(vec!["NOPE".into()]),
            1 => options.push(vec!["LIMIT".into(), "x".into(), "1".into()]),
            2 => options.push(vec!["LIMIT".into(), "1".into()]),
            3 => options.push(vec!["BY".into()]),
            _ => {}
        }
        words.extend(options.into_iter().flatten());
        let mut out = vec![strings_cmd(&words)];
        if let Some(dst) = store {
            out.push(cmd(&["LRANGE", &dst, "0", "-1"]));
        }
        out
    }

    /// Everything but SORT: grow and shrink the sorted keys, change weights.
    fn write(&mut self) -> Vec<Cmd> {
        let slot = self.rng.random_range(0..2);
        let numeric = slot == 0;
        match self.rng.random_range(0..12) {
            0..3 => {
                let key = self.lists[slot].clone();
                let verb = self.pick(&["RPUSH", "LPUSH"]);
                let mut words = vec![verb.to_string(), key];
                words.extend(self.elements(numeric, 6));
                vec![strings_cmd(&words)]
            }
            3..5 => {
                let key = self.sets[slot].clone();
                let mut words = vec!["SADD".to_string(), key];
                words.extend(self.elements(numeric, 6));
                vec![strings_cmd(&words)]
            }
            5..7 => {
                let key = self.zsets[slot].clone();
                let mut words = vec!["ZADD".to_string(), key];
                for e in self.elements(numeric, 5) {
                    words.push(self.rng.random_range(-3i64..4).to_string());
                    words.push(e);
                }
                vec![strings_cmd(&words)]
            }
            7 => {
                let keys = self.sorted_keys();
                vec![cmd(&["DEL", &self.pick(&keys)])]
            }
            8 => {
                let key = self.lists[slot].clone();
                vec![cmd(&["LTRIM", &key, "0", "15"])]
            }
            _ => {
                let e = self.element(false);
                self.weights_of(&e)
            }
        }
    }

    fn next(&mut self) -> Vec<Cmd> {
        if self.rng.random_bool(0.55) {
            self.sort()
        } else {
            self.write()
        }
    }

    /// TYPE, contents and OBJECT ENCODING of every sorted and destination key.
    fn state_dump(&self) -> Vec<Cmd> {
        let mut out = vec![cmd(&["DBSIZE"])];
        let mut keys = self.sorted_keys();
        keys.extend(self.dsts.iter().cloned());
        for key in keys {
            out.push(cmd(&["TYPE", &key]));
            out.push(cmd(&["LRANGE", &key, "0", "-1"]));
            out.push(cmd(&["SMEMBERS", &key]));
            out.push(cmd(&["ZRANGE", &key, "0", "-1", "WITHSCORES"]));
            out.push(cmd(&["OBJECT", "ENCODING", &key]));
        }
        out
    }
}

fn strings_cmd(words: &[String]) -> Cmd {
    words.iter().map(|w| w.as_bytes().to_vec()).collect()
}

fn name_of(command: &Cmd) -> String {
    String::from_utf8_lossy(&command[0]).to_ascii_uppercase()
}

fn word(command: &Cmd, i: usize) -> String {
    String::from_utf8_lossy(&command[i]).to_ascii_uppercase()
}

/// Rule 1 applies: a SORT of a set key BY a constant, without STORE. Returns the
/// number of GETs (the row width) and whether a LIMIT was given.
fn unordered_set_sort(command: &Cmd) -> Option<(usize, bool)> {
    if !name_of(command).starts_with("SORT") || !command[1].starts_with(b"set") {
        return None;
    }
    let (mut gets, mut limited, mut constant_by, mut store) = (0, false, false, false);
    let mut i = 2;
    while i < command.len() {
        match word(command, i).as_str() {
            "BY" if i + 1 < command.len() => {
                constant_by |= !command[i + 1].contains(&b'*');
                i += 1;
            }
            "GET" if i + 1 < command.len() => {
                gets += 1;
                i += 1;
            }
            "STORE" => store = true,
            "LIMIT" => {
                limited = true;
                i += 2;
            }
            _ => {}
        }
        i += 1;
    }
    (constant_by && !store).then_some((gets.max(1), limited))
}

/// The rows of an array reply, `width` items each, sorted.
fn rows(reply: &[u8], width: usize) -> Option<Vec<String>> {
    let Value::Array(items) = decode(reply) else {
        return None;
    };
    let mut rows: Vec<String> = items.chunks(width).map(|row| format!("{row:?}")).collect();
    rows.sort();
    Some(rows)
}

/// The elements of an aggregate reply, sorted, with its type byte.
fn unordered(reply: &[u8]) -> Option<(u8, Vec<String>)> {
    let mut items: Vec<String> = match decode(reply) {
        Value::Array(items) | Value::Set(items) => items.iter().map(|v| format!("{v:?}")).collect(),
        _ => return None,
    };
    items.sort();
    Some((reply[0], items))
}

/// Whether two replies to `command` count as equal (the module's rules).
fn equivalent(command: &Cmd, expected: &[u8], got: &[u8]) -> bool {
    if expected == got {
        return true;
    }
    if expected.starts_with(b"-") || got.starts_with(b"-") {
        return false;
    }
    if let Some((width, limited)) = unordered_set_sort(command) {
        let (e, g) = (rows(expected, width), rows(got, width));
        return match limited {
            true => e.map(|r| r.len()) == g.map(|r| r.len()),
            false => e.is_some() && e == g,
        };
    }
    match name_of(command).as_str() {
        "OBJECT" => {
            got == b"$8\r\nlistpack\r\n"
                && (expected == b"$9\r\nhashtable\r\n" || expected == b"$9\r\nquicklist\r\n")
        }
        "SMEMBERS" => {
            let e = unordered(expected);
            e.is_some() && e == unordered(got)
        }
        _ => false,
    }
}

fn run_differential(label: &str, shards: usize) {
    let Some(servers) = DiffServers::forward(label, shards) else {
        return;
    };
    let settings = DiffSettings::from_env(SEEDS, COMMANDS_PER_SEED);
    let total = servers.each_seed(label, &settings, true, |run| {
        let mut generator = Generator::new(run.seed, shards);
        let initial = generator.initial();
        run.batch(&initial, 0, equivalent);
        let mut index = 0;
        while index < settings.commands {
            let size = batch_size(&mut generator.rng, run.pipelined, PIPELINE_MAX);
            let mut batch: Vec<Cmd> = Vec::new();
            while batch.len() < size && index + batch.len() < settings.commands {
                batch.extend(generator.next());
            }
            run.batch(&batch, index, equivalent);
            index += batch.len();
        }
        run.batch(&generator.state_dump(), index, equivalent);
    });
    eprintln!("{label}: {total} replies equivalent");
}

#[test]
fn differential_sort_forward_1_shard() {
    run_differential("differential_sort_forward_1_shard", 1);
}

#[test]
fn differential_sort_forward_2_shards() {
    run_differential("differential_sort_forward_2_shards", 2);
}

/// Per-shard mode answers as a Redis 7.2 Cluster node: BY patterns and GET refused,
/// STORE into another slot CROSSSLOT, a key of another shard MOVED.
#[test]
fn per_shard_mode_is_redis_cluster() {
    let server = Server::ruvio(PortMode::PerShard, 2);
    let key = "{t}l";
    let owner = shard_of_key(key, 2);
    let mut conn = RawConn::connect(server.shard_port(owner));
    assert_eq!(conn.cmd(&["RPUSH", key, "3", "1", "2"]), b":3\r\n");
    assert_eq!(
        conn.cmd(&["SORT", key]),
        b"*3\r\n$1\r\n1\r\n$1\r\n2\r\n$1\r\n3\r\n"
    );
    assert_eq!(
        conn.cmd(&["SORT", key, "BY", "w_*"]),
        b"-ERR BY option of SORT denied in Cluster mode.\r\n"
    );
    assert_eq!(
        conn.cmd(&["SORT_RO", key, "GET", "#"]),
        b"-ERR GET option of SORT denied in Cluster mode.\r\n"
    );
    assert_eq!(
        conn.cmd(&["SORT", key, "BY", "nosort", "LIMIT", "0", "1"]),
        b"*1\r\n$1\r\n3\r\n"
    );
    assert_eq!(conn.cmd(&["SORT", key, "STORE", "{t}dst"]), b":3\r\n");
    let other = (0..1000)
        .map(|i| format!("dst{i}"))
        .find(|k| key_slot(k.as_bytes()) != key_slot(key.as_bytes()))
        .expect("a key in another slot");
    assert_eq!(
        conn.cmd(&["SORT", key, "STORE", &other]),
        b"-CROSSSLOT Keys in request don't hash to the same slot\r\n"
    );
    let mut elsewhere = RawConn::connect(server.shard_port(1 - owner));
    assert!(elsewhere.cmd(&["SORT", key]).starts_with(b"-MOVED "));
}

/// The comparison rules themselves: what they forgive and what they do not.
#[test]
fn comparison_rules_are_narrow() {
    let ab = b"*2\r\n$1\r\na\r\n$1\r\nb\r\n";
    let ba = b"*2\r\n$1\r\nb\r\n$1\r\na\r\n";
    let set_sort = cmd(&["SORT", "set0", "BY", "nosort"]);
    assert!(equivalent(&set_sort, ab, ba));
    assert!(!equivalent(&set_sort, ab, b"*2\r\n$1\r\na\r\n$1\r\na\r\n"));
    let limited = cmd(&["SORT", "set0", "BY", "nosort", "LIMIT", "0", "2"]);
    assert!(equivalent(&limited, ab, b"*2\r\n$1\r\nc\r\n$1\r\nd\r\n"));
    assert!(!equivalent(&limited, ab, b"*1\r\n$1\r\nc\r\n"));
    // Rows stay whole: an element keeps its GET values.
    let with_get = cmd(&["SORT", "set0", "BY", "k", "GET", "#", "GET", "w_*"]);
    let rows_ab = b"*4\r\n$1\r\na\r\n$2\r\nwa\r\n$1\r\nb\r\n$2\r\nwb\r\n";
    let rows_ba = b"*4\r\n$1\r\nb\r\n$2\r\nwb\r\n$1\r\na\r\n$2\r\nwa\r\n";
    let mixed = b"*4\r\n$1\r\nb\r\n$2\r\nwa\r\n$1\r\na\r\n$2\r\nwb\r\n";
    assert!(equivalent(&with_get, rows_ab, rows_ba));
    assert!(!equivalent(&with_get, rows_ab, mixed));
    // Sorted, stored, or a list: exact.
    assert!(!equivalent(&cmd(&["SORT", "set0"]), ab, ba));
    assert!(!equivalent(
        &cmd(&["SORT", "set0", "BY", "nosort", "STORE", "d"]),
        ab,
        ba
    ));
    assert!(!equivalent(
        &cmd(&["SORT", "list0", "BY", "nosort"]),
        ab,
        ba
    ));
    let encoding = cmd(&["OBJECT", "ENCODING", "k"]);
    assert!(equivalent(
        &encoding,
        b"$9\r\nquicklist\r\n",
        b"$8\r\nlistpack\r\n"
    ));
    assert!(!equivalent(
        &encoding,
        b"$8\r\nskiplist\r\n",
        b"$8\r\nlistpack\r\n"
    ));
}
