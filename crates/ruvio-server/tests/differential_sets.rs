//! Differential test of the set family: seeded random sequences of every set command go
//! to a real `redis-server` 7.0 and to Ruvio (forward mode, 1 and 2 shards); the raw RESP
//! replies must be identical, command by command, except where Redis itself does not
//! promise an order or a choice (the rules below).
//!
//! # Key space
//!
//! Four set keys, one string key and one list key, spread over both shards (when there
//! are 2) with [`key_on_shard`]: the multi-key commands (SMOVE, SINTER, SINTERCARD,
//! SUNION, SDIFF and the STORE forms) then run across shards, which forward mode does by
//! borrowing the keys (docs/cross-shard.md). A command gets a set key most of the time
//! and the string or list key otherwise, which brings WRONGTYPE and missing-key replies.
//! Members mix small integers (so sets stay intsets), integers of every intset width,
//! integer-looking strings Redis does not take as integers (`01`, `-0`, `+1`), short
//! strings and, rarely, 70-byte strings (past `set-max-listpack-value`).
//!
//! # Sequences
//!
//! Seeds 2 and 4 send pipelines of up to 30 commands in one write, 1 and 3 one step at a
//! time; 2 and 3 use RESP3 (`HELLO 3`: sets come as `~`). Each sequence starts from an
//! empty database with a random `set-max-intset-entries` (Redis 7.0 has no
//! `set-max-listpack-*`, so those keep their defaults on Ruvio) and ends by comparing
//! TYPE, sorted SMEMBERS and OBJECT ENCODING of every key.
//!
//! # Comparison rules (the whole allowlist)
//!
//! 1. OBJECT ENCODING: `intset` must match exactly both ways. Where Redis 7.0 says
//!    `hashtable`, Ruvio may say `listpack`: Ruvio follows Redis 7.2, whose small sets of
//!    non-integers are listpacks (7.0 had no listpack sets). sets.rs and the model test
//!    (ruvio-engine sets/tests.rs) check the 7.2 rules exactly instead. The list key's
//!    `quicklist` may be `listpack` likewise (differential_collections.rs, rule 1).
//! 2. SMEMBERS, SINTER, SUNION, SDIFF: Redis does not define the order, so the members
//!    are compared as sorted multisets with the same aggregate type byte. An SMEMBERS
//!    whose key Redis holds as an intset (the generator follows it with OBJECT ENCODING,
//!    compared on its own) must be equal byte for byte: an intset replies in ascending
//!    order in every version.
//! 3. SPOP and SRANDMEMBER pick at random: without a count both must answer a member or
//!    both nil; with a count the replies must have the same type and length, and for
//!    SPOP and a positive SRANDMEMBER count distinct members; a positive SRANDMEMBER
//!    count at least the set's size (the reply is shorter than asked) returns the whole
//!    set, compared as rule 2. Every SPOP is followed by `DEL key`, so the servers hold
//!    the same data again whichever members went.
//! 4. SSCAN: cursors and batches are each server's own; every SSCAN is iterated to
//!    cursor 0 on each server and the sorted, deduplicated union is compared. Errors
//!    must be equal.
//!
//! # Not generated
//!
//! - SRANDMEMBER with a large negative count (Redis builds a reply of that many
//!   members), and SSCAN cursors other than 0 or an invalid one.
//! - SADD with more members than `set-max-intset-entries`: Redis 7.2 (and Ruvio) take
//!   the argument count as a size hint (`setTypeCreate(value, argc - 2)`,
//!   `setTypeMaybeConvert`) and make such a set a listpack or hashtable at once, even
//!   when the distinct integers would fit an intset; Redis 7.0 has no hint and keeps
//!   the intset. Ruvio is right for 7.2; the 7.0 reference cannot judge it.
//!
//! Reproduce a failure with `RUVIO_DIFF_SEED=<seed> RUVIO_DIFF_COMMANDS=<n>`;
//! `RUVIO_DIFF_TRACE=1` prints every command with Redis's reply.

mod common;

use common::*;
use rand::rngs::StdRng;
use rand::seq::IndexedRandom;
use rand::{Rng, SeedableRng};
use std::collections::BTreeSet;

/// Commands per sequence unless `RUVIO_DIFF_COMMANDS` says otherwise: four sequences
/// per configuration stay well under the 30 s budget of a debug build.
const COMMANDS_PER_SEED: usize = 4000;
/// Odd seeds one step at a time, even ones pipelined; 2 and 3 in RESP3.
const SEEDS: &[u64] = &[1, 2, 3, 4];
/// Largest pipeline sent in one write.
const PIPELINE_MAX: usize = 30;
/// Set keys; enough for three-way algebra with a missing key now and then.
const SET_KEYS: usize = 4;

/// `set-max-intset-entries` values: tiny ones so intsets fill up and convert, and the
/// default.
const INTSET_ENTRIES: &[&str] = &["2", "5", "16", "64", "512"];

struct Generator {
    rng: StdRng,
    sets: Vec<String>,
    string: String,
    list: String,
    /// The `set-max-intset-entries` in force: no SADD gets more members (see "Not
    /// generated").
    intset_entries: usize,
}

impl Generator {
    fn new(seed: u64, shards: usize) -> Generator {
        let shards = shards.max(2);
        Generator {
            rng: StdRng::seed_from_u64(seed),
            sets: (0..SET_KEYS)
                .map(|i| key_on_shard(&format!("set{i}"), i % shards, shards))
                .collect(),
            string: key_on_shard("str", 0, shards),
            list: key_on_shard("list", 1, shards),
            intset_entries: 512,
        }
    }

    fn all_keys(&self) -> Vec<String> {
        let mut keys = self.sets.clone();
        keys.push(self.string.clone());
        keys.push(self.list.clone());
        keys
    }

    /// A set key mostly, the string or list key sometimes.
    fn key(&mut self) -> String {
        if self.rng.random_bool(0.08) {
            if self.rng.random_bool(0.5) {
                self.string.clone()
            } else {
                self.list.clone()
            }
        } else {
            self.sets.choose(&mut self.rng).expect("keys").clone()
        }
    }

    fn member(&mut self) -> String {
        match self.rng.random_range(0..100) {
            0..50 => self.rng.random_range(-5i64..25).to_string(),
            50..58 => [i64::MIN, i64::MAX, 40_000, -3_000_000_000, 70_000, -32_769]
                .choose(&mut self.rng)
                .expect("ints")
                .to_string(),
            58..63 => ["01", "-0", "+1", "1.5", ""]
                .choose(&mut self.rng)
                .expect("odd")
                .to_string(),
            63..65 => "x".repeat(70),
            _ => ["a", "b", "c", "d", "e", "f", "g", "hello"]
                .choose(&mut self.rng)
                .expect("words")
                .to_string(),
        }
    }

    fn members(&mut self, max: usize) -> Vec<String> {
        let n = self.rng.random_range(1..=max);
        (0..n).map(|_| self.member()).collect()
    }

    fn keys(&mut self, max: usize) -> Vec<String> {
        let n = self.rng.random_range(1..=max);
        (0..n).map(|_| self.key()).collect()
    }

    /// The threshold, and the string and list keys that WRONGTYPE needs.
    fn initial(&mut self) -> Vec<Cmd> {
        let entries = *INTSET_ENTRIES.choose(&mut self.rng).expect("values");
        self.intset_entries = entries.parse().expect("a number");
        let mut out = vec![cmd(&["CONFIG", "SET", "set-max-intset-entries", entries])];
        out.extend(self.other_types());
        out
    }

    /// (Re)create the string and list keys: SPOP's DEL and the STORE commands
    /// replace or remove them now and then.
    fn other_types(&self) -> Vec<Cmd> {
        vec![
            cmd(&["SET", &self.string, "v"]),
            cmd(&["DEL", &self.list]),
            cmd(&["RPUSH", &self.list, "a", "1"]),
        ]
    }

    /// The next step: one command, or a command with the follow-up its comparison rule
    /// needs (OBJECT ENCODING after SMEMBERS, DEL after SPOP).
    fn next(&mut self) -> Vec<Cmd> {
        let mut words: Vec<String>;
        let mut follow: Vec<Cmd> = Vec::new();
        let w = |s: &str| s.to_string();
        match self.rng.random_range(0..100) {
            0..25 => {
                let big = self.rng.random_bool(0.05);
                let key = self.key();
                let n_max = if big { 200 } else { 6 };
                let n = self.rng.random_range(1..=n_max.min(self.intset_entries));
                words = vec![w("SADD"), key.clone()];
                // The first set key gets integers only, so that it stays an intset
                // until it passes set-max-intset-entries (or meets another key's
                // members through SMOVE and the STORE commands).
                if key == self.sets[0] {
                    words.extend((0..n).map(|_| self.rng.random_range(-50i64..50).to_string()));
                } else {
                    words.extend((0..n).map(|_| self.member()));
                }
            }
            25..33 => {
                words = vec![w("SREM"), self.key()];
                words.extend(self.members(4));
            }
            33..37 => words = vec![w("SISMEMBER"), self.key(), self.member()],
            37..40 => {
                words = vec![w("SMISMEMBER"), self.key()];
                words.extend(self.members(4));
            }
            40..47 => {
                let key = self.key();
                words = vec![w("SMEMBERS"), key.clone()];
                follow.push(cmd(&["OBJECT", "ENCODING", &key]));
            }
            47..50 => words = vec![w("SCARD"), self.key()],
            50..53 => {
                let key = self.key();
                words = vec![w("SPOP"), key.clone()];
                match self.rng.random_range(0..4) {
                    0 => {}
                    1 => words.push(w("-1")),
                    _ => words.push(self.rng.random_range(0..8).to_string()),
                }
                follow.push(cmd(&["DEL", &key]));
            }
            53..58 => {
                words = vec![w("SRANDMEMBER"), self.key()];
                match self.rng.random_range(0..5) {
                    0 => {}
                    1 => words.push(self.rng.random_range(-8..0).to_string()),
                    2 => words.push(w("x")),
                    _ => words.push(self.rng.random_range(0..300).to_string()),
                }
            }
            58..64 => words = vec![w("SMOVE"), self.key(), self.key(), self.member()],
            64..68 => {
                words = vec![w("SINTER")];
                words.extend(self.keys(3));
            }
            68..73 => {
                let keys = self.keys(3);
                let numkeys = match self.rng.random_range(0..10) {
                    0 => w("0"),
                    1 => (keys.len() + 1).to_string(),
                    2 => w("x"),
                    _ => keys.len().to_string(),
                };
                words = vec![w("SINTERCARD"), numkeys];
                words.extend(keys);
                match self.rng.random_range(0..8) {
                    0 => words.push(w("LIMIT")),
                    1 => words.extend([w("LIMIT"), w("-1")]),
                    2 => words.push(w("BOGUS")),
                    3..5 => words.extend([w("LIMIT"), self.rng.random_range(0..4).to_string()]),
                    _ => {}
                }
            }
            73..77 => {
                words = vec![w("SUNION")];
                words.extend(self.keys(3));
            }
            77..81 => {
                words = vec![w("SDIFF")];
                words.extend(self.keys(3));
            }
            81..94 => {
                let name = ["SINTERSTORE", "SUNIONSTORE", "SDIFFSTORE"]
                    .choose(&mut self.rng)
                    .expect("stores");
                words = vec![w(name), self.key()];
                words.extend(self.keys(3));
            }
            94..98 => {
                words = vec![w("SSCAN"), self.key()];
                words.push(if self.rng.random_bool(0.05) {
                    w("x")
                } else {
                    w("0")
                });
                if self.rng.random_bool(0.3) {
                    words.extend([w("MATCH"), w("*1*")]);
                }
                if self.rng.random_bool(0.3) {
                    words.extend([w("COUNT"), self.rng.random_range(1..5).to_string()]);
                }
                if self.rng.random_bool(0.05) {
                    words.push(w("COUNT"));
                }
            }
            98 => return self.other_types(),
            _ => {
                // Arity errors.
                let name = [
                    "SADD",
                    "SREM",
                    "SISMEMBER",
                    "SMISMEMBER",
                    "SMEMBERS",
                    "SCARD",
                    "SPOP",
                    "SRANDMEMBER",
                    "SMOVE",
                    "SINTER",
                    "SINTERCARD",
                    "SUNION",
                    "SDIFF",
                    "SINTERSTORE",
                    "SUNIONSTORE",
                    "SDIFFSTORE",
                    "SSCAN",
                ]
                .choose(&mut self.rng)
                .expect("names");
                words = vec![w(name)];
            }
        }
        let refs: Vec<&str> = words.iter().map(String::as_str).collect();
        let mut step = vec![cmd(&refs)];
        step.extend(follow);
        step
    }

    /// The final comparison: TYPE, SMEMBERS (with its encoding probe) and OBJECT
    /// ENCODING of every key.
    fn state_dump(&self) -> Vec<Cmd> {
        let mut out = vec![cmd(&["DBSIZE"])];
        for key in self.all_keys() {
            out.push(cmd(&["TYPE", &key]));
            if !key.starts_with("str") && !key.starts_with("list") {
                out.push(cmd(&["SMEMBERS", &key]));
            }
            out.push(cmd(&["OBJECT", "ENCODING", &key]));
        }
        out
    }
}

fn name_of(command: &Cmd) -> String {
    String::from_utf8_lossy(&command[0]).to_ascii_uppercase()
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

/// Rule 3 for replies that are not byte-equal.
fn random_equivalent(command: &Cmd, expected: &[u8], got: &[u8]) -> bool {
    let count: Option<i64> = command
        .get(2)
        .and_then(|c| std::str::from_utf8(c).ok()?.parse().ok());
    let Some(count) = count else {
        return matches!(
            (decode(expected), decode(got)),
            (Value::Bulk(_), Value::Bulk(_))
        );
    };
    let (Some((ek, e)), Some((gk, g))) = (unordered(expected), unordered(got)) else {
        return false;
    };
    let srandmember = name_of(command) == "SRANDMEMBER";
    if srandmember && count > 0 && (e.len() as i64) < count {
        return (ek, &e) == (gk, &g);
    }
    let distinct = (srandmember && count < 0) || g.windows(2).all(|w| w[0] != w[1]);
    ek == gk && e.len() == g.len() && distinct
}

/// Whether two replies to `command` count as equal (the module's rules). `probe` is
/// Redis's reply to the next command (the OBJECT ENCODING after an SMEMBERS).
fn equivalent(command: &Cmd, expected: &[u8], got: &[u8], probe: Option<&[u8]>) -> bool {
    if expected == got {
        return true;
    }
    if expected.starts_with(b"-") || got.starts_with(b"-") {
        return false;
    }
    match name_of(command).as_str() {
        "OBJECT" => {
            got == b"$8\r\nlistpack\r\n"
                && (expected == b"$9\r\nhashtable\r\n" || expected == b"$9\r\nquicklist\r\n")
        }
        "SMEMBERS" if probe == Some(b"$6\r\nintset\r\n".as_slice()) => false,
        "SMEMBERS" | "SINTER" | "SUNION" | "SDIFF" => {
            let e = unordered(expected);
            e.is_some() && e == unordered(got)
        }
        "SPOP" | "SRANDMEMBER" => random_equivalent(command, expected, got),
        _ => false,
    }
}

/// SSCAN iterated to cursor 0 on `conn` from its first reply: the sorted union as one
/// RESP array, or the first reply when it is not a scan reply (an error).
fn scan_union(conn: &mut RawConn, command: &Cmd, first: &[u8]) -> Vec<u8> {
    let Some(items) = scan_items(conn, command, first) else {
        return first.to_vec();
    };
    let mut members = BTreeSet::new();
    for item in &items {
        let Value::Bulk(m) = item else {
            panic!("SSCAN items: {items:?}");
        };
        members.insert(m.clone());
    }
    encode(&members.into_iter().collect::<Vec<_>>())
}

/// Send `batch` to both servers in one write each and compare the replies; an
/// SSCAN may only come last (it is iterated to the end on each server).
fn compare_batch(run: &mut DiffRun<'_>, batch: &[Cmd], start: usize) {
    let (mut expected, mut got) = run.send(batch);
    if let Some(last) = batch.last() {
        let i = batch.len() - 1;
        if name_of(last) == "SSCAN" {
            expected[i] = scan_union(&mut run.reference, last, &expected[i]);
            got[i] = scan_union(&mut run.target, last, &got[i]);
        }
    }
    run.compare_probing(batch, start, &expected, &got, equivalent);
}

fn run_differential(label: &str, shards: usize) {
    let Some(servers) = DiffServers::forward(label, shards) else {
        return;
    };
    let settings = DiffSettings::from_env(SEEDS, COMMANDS_PER_SEED);
    let total = servers.each_seed(label, &settings, true, |run| {
        let mut generator = Generator::new(run.seed, shards);
        let initial = generator.initial();
        compare_batch(run, &initial, 0);
        let mut index = 0;
        while index < settings.commands {
            let size = batch_size(&mut generator.rng, run.pipelined, PIPELINE_MAX);
            let mut batch: Vec<Cmd> = Vec::new();
            while batch.len() < size && index + batch.len() < settings.commands {
                let step = generator.next();
                let scan = name_of(&step[0]) == "SSCAN";
                batch.extend(step);
                if scan {
                    break;
                }
            }
            compare_batch(run, &batch, index);
            index += batch.len();
        }
        compare_batch(run, &generator.state_dump(), index);
    });
    eprintln!("{label}: {total} replies equivalent");
}

#[test]
fn differential_sets_forward_1_shard() {
    run_differential("differential_sets_forward_1_shard", 1);
}

#[test]
fn differential_sets_forward_2_shards() {
    run_differential("differential_sets_forward_2_shards", 2);
}

/// The comparison rules themselves: what they forgive and what they do not.
#[test]
fn comparison_rules_are_narrow() {
    let encoding = cmd(&["OBJECT", "ENCODING", "k"]);
    let hashtable = b"$9\r\nhashtable\r\n";
    let listpack = b"$8\r\nlistpack\r\n";
    let intset = b"$6\r\nintset\r\n";
    assert!(equivalent(&encoding, hashtable, listpack, None));
    assert!(!equivalent(&encoding, listpack, hashtable, None));
    assert!(!equivalent(&encoding, intset, listpack, None));
    assert!(!equivalent(&encoding, hashtable, intset, None));
    assert!(equivalent(
        &encoding,
        b"$9\r\nquicklist\r\n",
        listpack,
        None
    ));

    let smembers = cmd(&["SMEMBERS", "s"]);
    let ab = b"*2\r\n$1\r\na\r\n$1\r\nb\r\n";
    let ba = b"*2\r\n$1\r\nb\r\n$1\r\na\r\n";
    let set_ba = b"~2\r\n$1\r\nb\r\n$1\r\na\r\n";
    assert!(equivalent(&smembers, ab, ba, Some(hashtable)));
    assert!(!equivalent(&smembers, ab, ba, Some(intset)));
    assert!(!equivalent(&smembers, ab, set_ba, Some(hashtable)));
    assert!(!equivalent(
        &smembers,
        ab,
        b"*2\r\n$1\r\na\r\n$1\r\na\r\n",
        Some(hashtable)
    ));
    assert!(equivalent(&cmd(&["SUNION", "a", "b"]), ab, ba, None));
    assert!(!equivalent(
        &cmd(&["SCARD", "s"]),
        b":1\r\n",
        b":2\r\n",
        None
    ));

    let spop = cmd(&["SPOP", "s", "2"]);
    assert!(equivalent(&spop, ab, b"*2\r\n$1\r\nc\r\n$1\r\nd\r\n", None));
    assert!(!equivalent(
        &spop,
        ab,
        b"*2\r\n$1\r\nc\r\n$1\r\nc\r\n",
        None
    ));
    assert!(!equivalent(&spop, ab, b"*1\r\n$1\r\nc\r\n", None));
    let single = cmd(&["SPOP", "s"]);
    assert!(equivalent(&single, b"$1\r\na\r\n", b"$1\r\nb\r\n", None));
    assert!(!equivalent(&single, b"$1\r\na\r\n", b"$-1\r\n", None));
    let whole = cmd(&["SRANDMEMBER", "s", "5"]);
    assert!(equivalent(&whole, ab, ba, None));
    assert!(!equivalent(
        &whole,
        ab,
        b"*2\r\n$1\r\na\r\n$1\r\nc\r\n",
        None
    ));
    let repeated = cmd(&["SRANDMEMBER", "s", "-2"]);
    assert!(equivalent(
        &repeated,
        ab,
        b"*2\r\n$1\r\na\r\n$1\r\na\r\n",
        None
    ));
}
