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
//! Each sequence ends with XRANGE and XLEN of every key.
//!
//! Reproduce a failure with `RUVIO_DIFF_SEED=<seed> RUVIO_DIFF_COMMANDS=<n>`;
//! `RUVIO_DIFF_TRACE=1` prints every command with Redis's reply.

mod common;

use common::*;
use rand::rngs::StdRng;
use rand::seq::IndexedRandom;
use rand::{Rng, SeedableRng};

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
        let ids: Vec<String> = (0..n)
            .map(|_| match self.rng.random_range(0..4) {
                0 => "$".into(),
                _ => self.id(),
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
                let mut w = vec!["XDEL".to_string(), self.key()];
                let n = self.rng.random_range(1..=3);
                w.extend((0..n).map(|_| self.id()));
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
                return vec![
                    cmd(&["DEL", &key]),
                    cmd(&["XADD", &key, &format!("{}-0", self.ms + 1), "f", "v"]),
                ];
            }
            84..87 => {
                let mut w = vec!["XSETID".to_string(), self.key(), self.id()];
                if self.rng.random_range(0..3) == 0 {
                    w.push("ENTRIESADDED".into());
                    w.push(self.rng.random_range(-1..500).to_string());
                }
                if self.rng.random_range(0..3) == 0 {
                    w.push("MAXDELETEDID".into());
                    w.push(self.id());
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
