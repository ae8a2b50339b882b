//! Differential test of the stream family: seeded random sequences of XADD, XLEN,
//! XRANGE, XREVRANGE, XDEL, XTRIM, XSETID and XREAD (without BLOCK) go to a real
//! `redis-server` 7.0 and to Ruvio (forward mode, 1 and 2 shards); every reply must
//! be identical byte for byte.
//!
//! # Time-based IDs
//!
//! `*` takes the clock, which two servers never share. Every stream starts with an
//! entry whose ID is far in the future (`5000000000000-0`, year 2128), so `*`
//! afterwards is "the last ID's next sequence" on both servers: deterministic.
//! A stream deleted by DEL is re-created at once with such an entry.
//!
//! # Key space
//!
//! Three stream keys spread over both shards (when there are 2), so a multi-key
//! XREAD runs across shards, and one string key for the WRONGTYPE replies.
//!
//! # Sequences
//!
//! Seeds 2 and 4 send pipelines of up to 20 commands in one write, 1 and 3 one step
//! at a time; 2 and 3 use RESP3. XADD uses explicit IDs (a few milliseconds ahead,
//! or behind for the "equal or smaller" error), `ms-*` and `*`, with NOMKSTREAM
//! and MAXLEN/MINID `=`/`~` (LIMIT) now and then, and bad arguments sometimes.
//! Streams grow to a few hundred entries so approximate trims drop whole nodes.
//! Each sequence ends with XRANGE and XLEN of every key. Where Redis 7.0 and
//! 7.4+ part, Ruvio answers as the newer one and the generator steers clear:
//! XREAD never gets `+` and XSETID never goes below an ID XDEL or MAXDELETEDID
//! may have named (tests/streams_newer.rs covers both).
//!
//! Reproduce a failure with `RUVIO_DIFF_SEED=<seed> RUVIO_DIFF_COMMANDS=<n>`;
//! `RUVIO_DIFF_TRACE=1` prints every command with Redis's reply.

mod common;

use common::*;
use rand::rngs::StdRng;
use rand::seq::IndexedRandom;
use rand::{Rng, SeedableRng};
use std::collections::HashMap;

const COMMANDS_PER_SEED: usize = 2000;
const SEEDS: &[u64] = &[1, 2, 3, 4];
const PIPELINE_MAX: usize = 20;
const STREAM_KEYS: usize = 3;
/// The first entry's milliseconds: far ahead of any clock.
const FUTURE_MS: u64 = 5_000_000_000_000;

struct Generator {
    rng: StdRng,
    streams: Vec<String>,
    string: String,
    /// The milliseconds the next explicit IDs are drawn around.
    ms: u64,
    /// Per stream key, at least its max-deleted-entry-id: the greatest ID any
    /// XDEL or MAXDELETEDID named since the key was made. XSETID below it is
    /// where Redis 7.0 (OK) and 7.4+ (an error, which Ruvio follows) part, so
    /// the generator leaves it to tests/streams_newer.rs.
    deleted_bound: HashMap<String, (u64, u64)>,
}

/// An ID argument as XDEL and XSETID read it (`ms` or `ms-seq`), `None` for
/// the ones they refuse.
fn parse_strict_id(arg: &str) -> Option<(u64, u64)> {
    match arg.split_once('-') {
        Some((ms, seq)) => Some((ms.parse().ok()?, seq.parse().ok()?)),
        None => Some((arg.parse().ok()?, 0)),
    }
}

impl Generator {
    fn new(seed: u64, shards: usize) -> Generator {
        let shards = shards.max(2);
        Generator {
            rng: StdRng::seed_from_u64(seed),
            streams: (0..STREAM_KEYS)
                .map(|i| key_on_shard(&format!("stream{i}"), i % shards, shards))
                .collect(),
            string: key_on_shard("str", 0, shards),
            ms: FUTURE_MS,
            deleted_bound: HashMap::new(),
        }
    }

    /// Raise `key`'s deleted-ID bound to `id` (when it reads as an ID).
    fn note_deleted(&mut self, key: &str, id: &str) {
        if let Some(id) = parse_strict_id(id) {
            let bound = self.deleted_bound.entry(key.to_string()).or_default();
            *bound = (*bound).max(id);
        }
    }

    fn stream(&mut self) -> String {
        self.streams.choose(&mut self.rng).expect("keys").clone()
    }

    /// A stream key mostly, the string key or a missing key sometimes.
    fn key(&mut self) -> String {
        match self.rng.random_range(0..100) {
            0..3 => self.string.clone(),
            3..6 => "missing".into(),
            _ => self.stream(),
        }
    }

    fn initial(&mut self) -> Vec<Cmd> {
        let mut out = vec![cmd(&["SET", &self.string, "not a stream"])];
        for key in self.streams.clone() {
            out.push(cmd(&["XADD", &key, &format!("{FUTURE_MS}-0"), "f", "v"]));
        }
        out
    }

    /// An ID around the ones in use: mostly valid, sometimes `-`/`+`, `(`-prefixed,
    /// `ms` alone or malformed.
    fn id(&mut self) -> String {
        let ms = self.ms - self.rng.random_range(0..=self.ms - FUTURE_MS + 2).min(40);
        match self.rng.random_range(0..40) {
            0 => "bad-id".into(),
            1 => "-".into(),
            2 => "+".into(),
            3 => format!("{ms}"),
            4 => "18446744073709551615-18446744073709551615".into(),
            5 => "0-0".into(),
            _ => format!("{ms}-{}", self.rng.random_range(0..4)),
        }
    }

    fn fields(&mut self) -> Vec<String> {
        let n = match self.rng.random_range(0..30) {
            0 => 0,
            1 => 3, // odd count: arity error
            _ => 2 * self.rng.random_range(1..=3),
        };
        (0..n)
            .map(|i| match i % 2 {
                0 => ["name", "event", "jobId", "x"]
                    .choose(&mut self.rng)
                    .expect("f")
                    .to_string(),
                _ => format!("{}", self.rng.random_range(0..1000)),
            })
            .collect()
    }

    fn trim_options(&mut self) -> Vec<String> {
        let mut out = Vec::new();
        match self.rng.random_range(0..3) {
            0 => {
                out.push("MAXLEN".into());
            }
            1 => {
                out.push("MINID".into());
            }
            _ => return out,
        }
        let approx = self.rng.random_range(0..3);
        match approx {
            0 => out.push("~".into()),
            1 => out.push("=".into()),
            _ => {}
        }
        if out[0] == "MAXLEN" {
            let n = match self.rng.random_range(0..20) {
                0 => -1,
                1 => 0,
                _ => self.rng.random_range(0..400),
            };
            out.push(n.to_string());
        } else {
            let back = self.rng.random_range(0..20);
            out.push(format!("{}-0", self.ms.saturating_sub(back)));
        }
        if self.rng.random_range(0..6) == 0 {
            out.push("LIMIT".into());
            out.push(self.rng.random_range(-1..300).to_string());
        }
        out
    }

    fn xadd(&mut self) -> Vec<String> {
        let key = self.key();
        // A missing key only with NOMKSTREAM: a new stream's `*` would be the clock.
        let nomkstream = key == "missing" || self.rng.random_range(0..10) == 0;
        let mut words = vec!["XADD".to_string(), key];
        if nomkstream {
            words.push("NOMKSTREAM".into());
        }
        if self.rng.random_range(0..6) == 0 {
            words.extend(self.trim_options());
        }
        let id = match self.rng.random_range(0..10) {
            0..4 => "*".to_string(),
            4..6 => {
                self.ms += self.rng.random_range(0..2);
                format!("{}-*", self.ms)
            }
            6 => self.id(),
            _ => {
                self.ms += self.rng.random_range(0..2);
                format!("{}-{}", self.ms, self.rng.random_range(0..3))
            }
        };
        words.push(id);
        words.extend(self.fields());
        words
    }

    fn range(&mut self, name: &str) -> Vec<String> {
        let mut words = vec![name.to_string(), self.key()];
        for _ in 0..2 {
            let id = self.id();
            words.push(match self.rng.random_range(0..6) {
                0 => format!("({id}"),
                _ => id,
            });
        }
        if self.rng.random_range(0..3) == 0 {
            words.push("COUNT".into());
            words.push(self.rng.random_range(-1..20).to_string());
        }
        words
    }

    fn xread(&mut self) -> Vec<String> {
        let mut words = vec!["XREAD".to_string()];
        if self.rng.random_range(0..2) == 0 {
            words.push("COUNT".into());
            words.push(self.rng.random_range(-1..10).to_string());
        }
        words.push("STREAMS".into());
        let n = self.rng.random_range(1..=3);
        let keys: Vec<String> = (0..n).map(|_| self.key()).collect();
        // `+` is the last entry since 7.4 (7.0: an invalid ID); tested in
        // tests/streams_newer.rs.
        let ids: Vec<String> = (0..n)
            .map(|_| match self.rng.random_range(0..4) {
                0 => "$".into(),
                _ => Some(self.id()).filter(|id| id != "+").unwrap_or("$".into()),
            })
            .collect();
        words.extend(keys);
        words.extend(ids);
        if self.rng.random_range(0..30) == 0 {
            words.pop(); // unbalanced
        }
        words
    }

    fn next(&mut self) -> Vec<Cmd> {
        let words: Vec<String> = match self.rng.random_range(0..100) {
            0..40 => self.xadd(),
            40..48 => self.range("XRANGE"),
            48..54 => {
                let mut w = self.range("XREVRANGE");
                w.swap(2, 3);
                w
            }
            54..60 => {
                let key = self.key();
                let mut w = vec!["XDEL".to_string(), key.clone()];
                let n = self.rng.random_range(1..=3);
                for _ in 0..n {
                    let id = self.id();
                    self.note_deleted(&key, &id);
                    w.push(id);
                }
                w
            }
            60..66 => {
                let mut w = vec!["XTRIM".to_string(), self.key()];
                w.extend(self.trim_options());
                w
            }
            66..76 => self.xread(),
            76..82 => vec!["XLEN".into(), self.key()],
            82..84 => {
                let key = self.stream();
                self.deleted_bound.remove(&key);
                return vec![
                    cmd(&["DEL", &key]),
                    cmd(&["XADD", &key, &format!("{}-0", self.ms + 1), "f", "v"]),
                ];
            }
            84..87 => {
                let (key, id) = (self.key(), self.id());
                let bound = self.deleted_bound.get(&key).copied().unwrap_or_default();
                if parse_strict_id(&id).is_some_and(|id| id < bound) {
                    return vec![cmd(&["XLEN", &key])];
                }
                let mut w = vec!["XSETID".to_string(), key.clone(), id];
                if self.rng.random_range(0..3) == 0 {
                    w.push("ENTRIESADDED".into());
                    w.push(self.rng.random_range(-1..500).to_string());
                }
                if self.rng.random_range(0..3) == 0 {
                    let max_deleted = self.id();
                    self.note_deleted(&key, &max_deleted);
                    w.push("MAXDELETEDID".into());
                    w.push(max_deleted);
                }
                w
            }
            87..91 => vec!["TYPE".into(), self.key()],
            91..94 => vec!["OBJECT".into(), "ENCODING".into(), self.key()],
            94..96 => vec!["EXISTS".into(), self.key()],
            _ => {
                let (from, to) = (
                    self.stream(),
                    format!("copy{}", self.rng.random_range(0..2)),
                );
                return vec![
                    cmd(&["DEL", &to]),
                    cmd(&["COPY", &from, &to]),
                    cmd(&["XRANGE", &to, "-", "+"]),
                ];
            }
        };
        let refs: Vec<&str> = words.iter().map(String::as_str).collect();
        vec![cmd(&refs)]
    }

    fn state_dump(&self) -> Vec<Cmd> {
        let mut out = vec![cmd(&["DBSIZE"])];
        for key in &self.streams {
            out.push(cmd(&["XLEN", key]));
            out.push(cmd(&["XRANGE", key, "-", "+"]));
        }
        out
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
        run.batch(&initial, 0, identical);
        let mut index = 0;
        while index < settings.commands {
            let size = batch_size(&mut generator.rng, run.pipelined, PIPELINE_MAX);
            let mut batch: Vec<Cmd> = Vec::new();
            while batch.len() < size {
                batch.extend(generator.next());
            }
            run.batch(&batch, index, identical);
            index += batch.len();
        }
        run.batch(&generator.state_dump(), index, identical);
    });
    eprintln!("{label}: {total} replies equal");
}

#[test]
fn differential_streams_forward_1_shard() {
    run_differential("differential_streams_forward_1_shard", 1);
}

#[test]
fn differential_streams_forward_2_shards() {
    run_differential("differential_streams_forward_2_shards", 2);
}

// ---- node boundaries and approximate trims ---------------------------------

/// `(stream-node-max-entries, stream-node-max-bytes)` pairs the trim test runs
/// under: Redis's defaults, small nodes closed by count, nodes closed by bytes
/// only (entries 0: no limit), both small, and a byte limit of 0 (no limit).
const NODE_SIZES: &[(&str, &str)] = &[
    ("100", "4096"),
    ("10", "4096"),
    ("0", "300"),
    ("7", "200"),
    ("25", "0"),
    ("0", "0"),
];
/// Steps of one node-size run: enough XADDs for dozens of nodes.
const TRIM_STEPS: usize = 600;

/// One step of the trim sequence on stream `key`: mostly XADD (values of many
/// sizes, integers among them, so both node limits are hit), with `MAXLEN ~`,
/// `MINID ~` and LIMIT now and then; XTRIM in every form; XDEL (deleted entries
/// still count towards a node's fill); XLEN after each.
fn trim_step(rng: &mut StdRng, key: &str, next_ms: &mut u64) -> Vec<Cmd> {
    let threshold_ms = *next_ms - rng.random_range(0..(*next_ms).min(300));
    let trim: Vec<String> = match rng.random_range(0..6) {
        0 => vec![
            "MAXLEN".into(),
            "~".into(),
            rng.random_range(0..400).to_string(),
        ],
        1 => vec!["MINID".into(), "~".into(), format!("{threshold_ms}-0")],
        2 => vec![
            "MAXLEN".into(),
            "~".into(),
            rng.random_range(0..400).to_string(),
            "LIMIT".into(),
            rng.random_range(0..120).to_string(),
        ],
        3 => vec![
            "MINID".into(),
            "~".into(),
            format!("{threshold_ms}"),
            "LIMIT".into(),
            rng.random_range(0..120).to_string(),
        ],
        4 => vec!["MAXLEN".into(), rng.random_range(0..400).to_string()],
        _ => vec!["MINID".into(), "=".into(), format!("{threshold_ms}-0")],
    };
    let mut words: Vec<String> = match rng.random_range(0..100) {
        0..75 => {
            *next_ms += 1;
            let mut w = vec!["XADD".to_string(), key.to_string()];
            if rng.random_range(0..8) == 0 {
                w.extend(trim);
            }
            w.push(format!("{next_ms}-{}", rng.random_range(0..3)));
            let pairs = rng.random_range(1..=3);
            for i in 0..pairs {
                w.push(["name", "event", "payload"][(i + rng.random_range(0..2)) % 3].into());
                w.push(match rng.random_range(0..3) {
                    0 => rng.random_range(-100_000..100_000i64).to_string(),
                    _ => "x".repeat(rng.random_range(1..90)),
                });
            }
            w
        }
        75..88 => {
            let mut w = vec!["XTRIM".to_string(), key.to_string()];
            w.extend(trim);
            w
        }
        _ => {
            let ms = *next_ms - rng.random_range(0..(*next_ms).min(50));
            vec![
                "XDEL".into(),
                key.into(),
                format!("{ms}-{}", rng.random_range(0..3)),
            ]
        }
    };
    let last = std::mem::take(&mut words);
    let refs: Vec<&str> = last.iter().map(String::as_str).collect();
    vec![cmd(&refs), cmd(&["XLEN", key])]
}

/// Approximate trims drop whole nodes only, so what is left depends on where
/// nodes close: under each `stream-node-max-entries` / `stream-node-max-bytes`
/// pair (set by CONFIG SET on both servers), the same XADD/XTRIM/XDEL calls leave
/// the same XLEN, the same trim counts and the same node count (XINFO STREAM's
/// `radix-tree-keys`) as redis-server 7.0.
#[test]
fn approximate_trims_follow_node_limits() {
    let label = "approximate_trims_follow_node_limits";
    let Some(servers) = DiffServers::forward(label, 2) else {
        return;
    };
    let key = key_on_shard("trimmed", 1, 2);
    let mut reference = servers.reference.raw();
    let mut target = servers.target.raw();
    for (seed, (entries, bytes)) in NODE_SIZES.iter().enumerate() {
        let mut rng = StdRng::seed_from_u64(seed as u64);
        let mut next_ms = 1000u64;
        let mut history: Vec<String> = Vec::new();
        for conn in [&mut reference, &mut target] {
            for (name, value) in [
                ("stream-node-max-entries", entries),
                ("stream-node-max-bytes", bytes),
            ] {
                assert_eq!(conn.cmd(&["CONFIG", "SET", name, value]), b"+OK\r\n");
                let got = conn.cmd(&["CONFIG", "GET", name]);
                assert_eq!(
                    got,
                    format!("*2\r\n{}{}", bulk(name), bulk(value)).into_bytes()
                );
            }
            conn.cmd(&["DEL", &key]);
        }
        for _ in 0..TRIM_STEPS {
            let mut step = trim_step(&mut rng, &key, &mut next_ms);
            if rng.random_range(0..20) == 0 {
                step.push(cmd(&["XINFO", "STREAM", &key]));
            }
            for command in step {
                let want = reference.cmd(&command);
                let got = target.cmd(&command);
                history.push(show_cmd(&command));
                assert_eq!(
                    show(&got),
                    show(&want),
                    "{label}: nodes of {entries} entries / {bytes} bytes: {} \
                     differs; last commands: {:#?}",
                    show_cmd(&command),
                    &history[history.len().saturating_sub(12)..]
                );
            }
        }
    }
}

/// CONFIG SET of the node limits refuses what Redis refuses, and a memory
/// unit is read as Redis reads it.
#[test]
fn node_limit_configs_parse_as_redis() {
    let label = "node_limit_configs_parse_as_redis";
    let Some(servers) = DiffServers::forward(label, 1) else {
        return;
    };
    let corpus = [
        "CONFIG|SET|stream-node-max-bytes|4kb",
        "CONFIG|GET|stream-node-max-bytes",
        "CONFIG|SET|stream-node-max-bytes|-1",
        "CONFIG|SET|stream-node-max-entries|-1",
        "CONFIG|SET|stream-node-max-entries|abc",
        "CONFIG|SET|stream-node-max-entries|55",
        "CONFIG|GET|stream-node-max-entries",
    ];
    run_corpus(&corpus, (&servers.reference, &servers.target), false, label);
}

// ---- claims of deleted entries ----------------------------------------------

/// XCLAIM and XAUTOCLAIM over pending entries whose stream entries are gone (XDEL
/// and trims): Redis 7.0's XAUTOCLAIM returns their IDs as a third element and
/// drops them from the PEL; XCLAIM skips them and drops them too. Both
/// protocols.
#[test]
fn claims_of_deleted_entries() {
    let label = "claims_of_deleted_entries";
    let Some(servers) = DiffServers::forward(label, 2) else {
        return;
    };
    let k = key_on_shard("claimed", 1, 2);
    let corpus: Vec<String> = [
        "DEL|{k}",
        "XADD|{k}|1-0|f|1",
        "XADD|{k}|2-0|f|2",
        "XADD|{k}|3-0|f|3",
        "XADD|{k}|4-0|f|4",
        "XADD|{k}|5-0|f|5",
        "XADD|{k}|6-0|f|6",
        "XGROUP|CREATE|{k}|g|0",
        "XREADGROUP|GROUP|g|alice|STREAMS|{k}|>",
        "XDEL|{k}|2-0|4-0",
        "XTRIM|{k}|MINID|2",
        "XPENDING|{k}|g",
        "XAUTOCLAIM|{k}|g|bob|0|0-0|COUNT|2",
        "XPENDING|{k}|g",
        "XAUTOCLAIM|{k}|g|bob|0|0-0|COUNT|2|JUSTID",
        "XPENDING|{k}|g",
        "XCLAIM|{k}|g|carol|0|5-0|6-0",
        "XDEL|{k}|5-0",
        "XCLAIM|{k}|g|carol|0|5-0|6-0|3-0",
        "XPENDING|{k}|g",
        "XCLAIM|{k}|g|dave|0|6-0|5-0|JUSTID",
        "XPENDING|{k}|g",
        "XINFO|GROUPS|{k}",
        "XTRIM|{k}|MAXLEN|0",
        "XAUTOCLAIM|{k}|g|erin|0|0",
        "XPENDING|{k}|g",
        "XLEN|{k}",
    ]
    .iter()
    .map(|line| line.replace("{k}", &k))
    .collect();
    for resp3 in [false, true] {
        run_corpus(&corpus, (&servers.reference, &servers.target), resp3, label);
    }
}

// ---- blocked readers woken by a transaction ----------------------------------

/// Time a blocked client gets to park before the next step.
const LET_IT_PARK: std::time::Duration = std::time::Duration::from_millis(150);
/// Time between two readers blocking, so they block in the order sent.
const READER_GAP: std::time::Duration = std::time::Duration::from_millis(30);

/// XREAD and XREADGROUP clients blocked on a stream, then one MULTI/EXEC that
/// adds several entries (and one that adds and deletes): every blocked client
/// gets what Redis gives it (Redis serves them after EXEC, so a reader sees the
/// transaction's entries together, up to its COUNT; group readers in the order
/// they blocked, the first with COUNT 1 taking one entry, the next the rest). Real clients on
/// redis-server and on Ruvio (2 shards, the writer on the stream's shard or
/// the other), both protocols.
#[test]
fn blocked_readers_see_a_whole_transaction() {
    let label = "blocked_readers_see_a_whole_transaction";
    let Some(servers) = DiffServers::forward(label, 2) else {
        return;
    };
    for (round, resp3) in [(0, false), (1, true), (2, false)] {
        let key = key_on_shard(&format!("woken{round}"), round % 2, 2);
        let readers: Vec<Vec<String>> = vec![
            vec![
                "XREAD".into(),
                "BLOCK".into(),
                "0".into(),
                "STREAMS".into(),
                key.clone(),
                "$".into(),
            ],
            vec![
                "XREAD".into(),
                "COUNT".into(),
                "2".into(),
                "BLOCK".into(),
                "0".into(),
                "STREAMS".into(),
                key.clone(),
                "$".into(),
            ],
            vec![
                "XREAD".into(),
                "BLOCK".into(),
                "0".into(),
                "STREAMS".into(),
                key.clone(),
                "1-0".into(),
            ],
            vec![
                "XREADGROUP".into(),
                "GROUP".into(),
                "g".into(),
                "c2".into(),
                "COUNT".into(),
                "1".into(),
                "BLOCK".into(),
                "0".into(),
                "STREAMS".into(),
                key.clone(),
                ">".into(),
            ],
            vec![
                "XREADGROUP".into(),
                "GROUP".into(),
                "g".into(),
                "c1".into(),
                "BLOCK".into(),
                "0".into(),
                "STREAMS".into(),
                key.clone(),
                ">".into(),
            ],
        ];
        let transaction: Vec<Vec<String>> = match round {
            2 => vec![
                vec!["MULTI".into()],
                vec![
                    "XADD".into(),
                    key.clone(),
                    "10-0".into(),
                    "a".into(),
                    "1".into(),
                ],
                vec![
                    "XADD".into(),
                    key.clone(),
                    "11-0".into(),
                    "b".into(),
                    "2".into(),
                ],
                vec!["XDEL".into(), key.clone(), "10-0".into()],
                vec![
                    "XADD".into(),
                    key.clone(),
                    "12-0".into(),
                    "c".into(),
                    "3".into(),
                ],
                vec!["EXEC".into()],
            ],
            _ => vec![
                vec!["MULTI".into()],
                vec![
                    "XADD".into(),
                    key.clone(),
                    "10-0".into(),
                    "a".into(),
                    "1".into(),
                ],
                vec![
                    "XADD".into(),
                    key.clone(),
                    "11-0".into(),
                    "b".into(),
                    "2".into(),
                ],
                vec![
                    "XADD".into(),
                    key.clone(),
                    "12-0".into(),
                    "c".into(),
                    "3".into(),
                ],
                vec!["EXEC".into()],
            ],
        };
        let run = |server: &Server| -> Vec<Vec<u8>> {
            let mut setup = server.raw();
            setup.cmd(&["DEL", &key]);
            setup.cmd(&["XADD", &key, "1-0", "old", "x"]);
            setup.cmd(&["XGROUP", "CREATE", &key, "g", "$"]);
            let mut waiting = Vec::new();
            for reader in &readers {
                let mut conn = server.raw();
                if resp3 {
                    conn.cmd(&["HELLO", "3"]);
                }
                conn.send(&encode(reader));
                waiting.push(conn);
                // Redis serves blocked clients in the order they blocked.
                std::thread::sleep(READER_GAP);
            }
            std::thread::sleep(LET_IT_PARK);
            // Round 1's writer lives on the shard that does not own the key.
            let mut writer = match (round, server.kind) {
                (1, Target::Ruvio) => conn_on_shard(server, 1 - round % 2),
                _ => server.raw(),
            };
            let mut replies: Vec<Vec<u8>> = transaction.iter().map(|c| writer.cmd(c)).collect();
            replies.extend(waiting.iter_mut().map(RawConn::read_reply));
            replies.push(setup.cmd(&["XPENDING", &key, "g"]));
            replies
        };
        let want = run(&servers.reference);
        let got = run(&servers.target);
        let names = transaction.iter().chain(&readers).map(|c| c.join(" "));
        for ((name, w), g) in names.chain(["XPENDING".to_string()]).zip(&want).zip(&got) {
            assert_eq!(show(g), show(w), "{label}, round {round}: {name}");
        }
    }
}
