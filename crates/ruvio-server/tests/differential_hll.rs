//! Differential test of the HyperLogLog family: seeded random sequences of PFADD,
//! PFCOUNT, PFMERGE and PFDEBUG go to a real `redis-server` 7.0 and to Ruvio (forward
//! mode, 1 and 2 shards); every reply must be identical byte for byte, GET of every
//! HLL included: Ruvio's values are Redis's own strings.
//!
//! # Key space
//!
//! Four HLL keys spread over both shards (when there are 2) with [`key_on_shard`], so
//! multi-key PFCOUNT and PFMERGE run across shards (forward mode borrows the keys,
//! docs/cross-shard.md), one string key and one list key for the WRONGTYPE replies.
//!
//! # Sequences
//!
//! Seeds 2 and 4 send pipelines of up to 20 commands in one write, 1 and 3 one step
//! at a time; 2 and 3 use RESP3. Steps:
//! - PFADD of a few elements from a pool of 200,000, and now and then of 2,000 to
//!   16,000 new ones, so the keys pass from sparse to dense within a sequence; the
//!   first key is never deleted or replaced and ends near 100,000 elements;
//! - PFCOUNT of one key (the cached cardinality and its stale bit show in the GETs
//!   that follow) and of several, PFMERGE of mixed representations, PFDEBUG
//!   ENCODING/DECODE/TODENSE (GETREG now and then), GET, STRLEN, OBJECT ENCODING, DEL;
//! - a Redis-made value stored on both: GET of one key on Redis, SET of those bytes
//!   under another key on both servers;
//! - corrupt values: a bad magic or encoding byte (SETRANGE), a ZERO opcode appended
//!   (too many registers; a dense value the wrong length), a sparse value covering
//!   16383 registers with a stale or a valid cache, a bare "HYLL";
//! - `CONFIG SET hll-sparse-max-bytes` to 100, 500, 3000 or 6000, so promotion
//!   happens at different sizes.
//!
//! Each sequence ends with GET and PFCOUNT of every key. PFSELFTEST runs once.
//!
//! # Not generated
//!
//! A VAL opcode after the last register. Redis 7.2.10 refuses such a value
//! everywhere (as Ruvio does); 7.0, the reference here, still merges it in PFMERGE,
//! multi-key PFCOUNT and the promotion to dense. The unit tests (ruvio-engine
//! hll/tests.rs) check the 7.2 rule.
//!
//! Reproduce a failure with `RUVIO_DIFF_SEED=<seed> RUVIO_DIFF_COMMANDS=<n>`;
//! `RUVIO_DIFF_TRACE=1` prints every command with Redis's reply.

mod common;

use common::*;
use rand::rngs::StdRng;
use rand::seq::IndexedRandom;
use rand::{Rng, SeedableRng};

/// Commands per sequence unless `RUVIO_DIFF_COMMANDS` says otherwise.
const COMMANDS_PER_SEED: usize = 1500;
const SEEDS: &[u64] = &[1, 2, 3, 4];
const PIPELINE_MAX: usize = 20;
const HLL_KEYS: usize = 4;
/// Distinct small elements: PFADD of a few keeps hitting registers already set.
const POOL: u32 = 200_000;
/// Share of PFADDs that add many new elements, and how many.
const BIG_PFADD_SHARE: f64 = 0.03;
const BIG_PFADD_ELEMENTS: std::ops::RangeInclusive<u64> = 2000..=16000;
/// `hll-sparse-max-bytes` values.
const SPARSE_MAX: &[&str] = &["100", "500", "3000", "3000", "6000"];
/// Arguments a history line shows of a long command.
const SHOWN_ARGS_MAX: usize = 8;

struct Generator {
    rng: StdRng,
    hlls: Vec<String>,
    string: String,
    list: String,
    /// Elements of the big PFADDs so far (each one new).
    fresh: u64,
}

/// One step: commands for both servers, or a copy of a Redis-made value.
enum Step {
    Commands(Vec<Cmd>),
    /// GET `from` on Redis, then SET `to` with those bytes on both.
    Copy {
        from: String,
        to: String,
    },
}

impl Generator {
    fn new(seed: u64, shards: usize) -> Generator {
        let shards = shards.max(2);
        Generator {
            rng: StdRng::seed_from_u64(seed),
            hlls: (0..HLL_KEYS)
                .map(|i| key_on_shard(&format!("hll{i}"), i % shards, shards))
                .collect(),
            string: key_on_shard("str", 0, shards),
            list: key_on_shard("list", 1, shards),
            fresh: 0,
        }
    }

    fn hll(&mut self) -> String {
        self.hlls.choose(&mut self.rng).expect("keys").clone()
    }

    /// An HLL key mostly, the string or list key sometimes.
    fn key(&mut self) -> String {
        match self.rng.random_range(0..100) {
            0..3 => self.string.clone(),
            3..5 => self.list.clone(),
            _ => self.hll(),
        }
    }

    fn keys(&mut self, max: usize) -> Vec<String> {
        let n = self.rng.random_range(1..=max);
        (0..n).map(|_| self.key()).collect()
    }

    fn element(&mut self) -> Vec<u8> {
        match self.rng.random_range(0..50) {
            0 => Vec::new(),
            1 => (0..self.rng.random_range(1..40))
                .map(|_| self.rng.random())
                .collect(),
            _ => format!("el:{}", self.rng.random_range(0..POOL)).into_bytes(),
        }
    }

    fn initial(&mut self) -> Vec<Cmd> {
        vec![
            cmd(&["CONFIG", "SET", "hll-sparse-max-bytes", "3000"]),
            cmd(&["SET", &self.string, "not an hll"]),
            cmd(&["DEL", &self.list]),
            cmd(&["RPUSH", &self.list, "a"]),
        ]
    }

    fn pfadd(&mut self, key: String) -> Cmd {
        if self.rng.random_bool(BIG_PFADD_SHARE) {
            // Half of them into the first key, which is never deleted: it grows
            // to about 100,000 elements.
            let key = match self.rng.random_bool(0.5) {
                true => self.hlls[0].clone(),
                false => key,
            };
            let mut command = vec![b"PFADD".to_vec(), key.into_bytes()];
            let n = self.rng.random_range(BIG_PFADD_ELEMENTS);
            command.extend((0..n).map(|i| format!("big:{}", self.fresh + i).into_bytes()));
            self.fresh += n;
            return command;
        }
        let mut command = vec![b"PFADD".to_vec(), key.into_bytes()];
        let n = self.rng.random_range(0..=8);
        command.extend((0..n).map(|_| self.element()));
        command
    }

    /// An HLL key other than the first (which only grows).
    fn replaceable(&mut self) -> String {
        let i = self.rng.random_range(1..HLL_KEYS);
        self.hlls[i].clone()
    }

    /// A corrupt (or not-an-HLL) value under an HLL key, the commands that meet it,
    /// and its removal (so the keys hold valid HLLs most of the time).
    fn corrupt(&mut self) -> Vec<Cmd> {
        let key = self.replaceable();
        let other = self.hll();
        let header = |cache: &[u8]| {
            let mut v = b"HYLL\x01\0\0\0\0\0\0\0\0\0\0".to_vec();
            v.extend_from_slice(cache);
            v
        };
        let short = |cache: u8| {
            let mut v = header(&[cache]);
            v.extend_from_slice(b"\x7f\xfe");
            v
        };
        let set = |value: Vec<u8>| vec![b"SET".to_vec(), key.clone().into_bytes(), value];
        let mut out = vec![match self.rng.random_range(0..7) {
            0 => cmd(&["SETRANGE", &key, "4", "\x02"]),
            1 => cmd(&["SETRANGE", &key, "1", "X"]),
            2 => cmd(&["APPEND", &key, "\0"]),
            3 => set(short(0x80)),
            4 => set(short(0x00)),
            5 => set(b"HYLL".to_vec()),
            _ => set(header(&[0x80])),
        }];
        let element = self.element();
        out.extend([
            cmd(&["PFCOUNT", &key]),
            cmd(&["PFCOUNT", &other, &key]),
            vec![b"PFADD".to_vec(), key.clone().into_bytes(), element],
            cmd(&["GET", &key]),
            cmd(&["PFMERGE", &other, &key]),
            cmd(&["PFDEBUG", "TODENSE", &key]),
            cmd(&["OBJECT", "ENCODING", &key]),
            cmd(&["DEL", &key]),
        ]);
        out
    }

    fn next(&mut self) -> Step {
        let w = |s: &str| s.to_string();
        let words: Vec<String> = match self.rng.random_range(0..100) {
            0..30 => {
                let key = self.key();
                return Step::Commands(vec![self.pfadd(key)]);
            }
            30..44 => vec![w("PFCOUNT"), self.key()],
            44..52 => {
                let mut words = vec![w("PFCOUNT")];
                words.extend(self.keys(4));
                words
            }
            52..60 => {
                let mut words = vec![w("PFMERGE"), self.key()];
                let n = self.rng.random_range(0..=3);
                words.extend(self.keys(3).into_iter().take(n));
                words
            }
            60..70 => vec![w("GET"), self.hll()],
            70..73 => {
                let (from, to) = (self.hll(), self.replaceable());
                return Step::Copy { from, to };
            }
            73..75 => return Step::Commands(self.corrupt()),
            75..81 => {
                let sub = [
                    "ENCODING", "DECODE", "TODENSE", "ENCODING", "DECODE", "GETREG", "NOPE",
                ]
                .choose(&mut self.rng)
                .expect("subs");
                vec![w("PFDEBUG"), w(sub), self.key()]
            }
            81..83 => {
                let value = SPARSE_MAX.choose(&mut self.rng).expect("sizes");
                vec![w("CONFIG"), w("SET"), w("hll-sparse-max-bytes"), w(value)]
            }
            83..86 => vec![w("DEL"), self.replaceable()],
            86..89 => vec![w("STRLEN"), self.hll()],
            89..92 => vec![w("OBJECT"), w("ENCODING"), self.hll()],
            92..96 => vec![w("PFCOUNT"), self.hll(), "missing".into()],
            _ => {
                let name = ["PFADD", "PFCOUNT", "PFMERGE", "PFDEBUG", "PFSELFTEST"]
                    .choose(&mut self.rng)
                    .expect("names");
                // Arity errors (PFSELFTEST with an argument).
                vec![
                    w(name),
                    w("PFDEBUG").repeat(usize::from(*name == "PFSELFTEST")),
                ]
                .into_iter()
                .filter(|s| !s.is_empty() || *name == "PFDEBUG")
                .collect()
            }
        };
        let refs: Vec<&str> = words.iter().map(String::as_str).collect();
        Step::Commands(vec![cmd(&refs)])
    }

    fn state_dump(&self) -> Vec<Cmd> {
        let mut out = vec![cmd(&["DBSIZE"])];
        for key in &self.hlls {
            out.push(cmd(&["GET", key]));
            out.push(cmd(&["PFCOUNT", key]));
            out.push(cmd(&["GET", key]));
        }
        let mut all = vec!["PFCOUNT"];
        all.extend(self.hlls.iter().map(String::as_str));
        out.push(cmd(&all));
        out
    }
}

/// A command for the history, long ones cut to their first arguments.
fn short_cmd(command: &Cmd) -> String {
    if command.len() <= SHOWN_ARGS_MAX {
        return show_cmd(command);
    }
    format!(
        "{} ...({} arguments)",
        show_cmd(&command[..SHOWN_ARGS_MAX]),
        command.len()
    )
}

/// A Redis-made value under `to` on both servers: GET on Redis (compared with
/// Ruvio's GET), SET of Redis's bytes on both.
fn copy_value(run: &mut DiffRun<'_>, from: &str, to: &str, start: usize) {
    run.batch(&[cmd(&["GET", from])], start, identical);
    let reply = run.reference.cmd(&["GET", from]);
    let Value::Bulk(bytes) = decode(&reply) else {
        return; // missing or not a string: nothing to copy
    };
    let set = vec![b"SET".to_vec(), to.as_bytes().to_vec(), bytes];
    run.batch(
        &[set, cmd(&["PFCOUNT", to]), cmd(&["GET", to])],
        start + 1,
        identical,
    );
}

fn run_differential(label: &str, shards: usize) {
    let Some(servers) = DiffServers::forward(label, shards) else {
        return;
    };
    let settings = DiffSettings::from_env(SEEDS, COMMANDS_PER_SEED);
    let total = servers.each_seed(label, &settings, true, |run| {
        run.show = short_cmd;
        let mut generator = Generator::new(run.seed, shards);
        let initial = generator.initial();
        run.batch(&initial, 0, identical);
        if run.seed == 1 {
            run.batch(&[cmd(&["PFSELFTEST"])], 0, identical);
        }
        let mut index = 0;
        while index < settings.commands {
            let size = batch_size(&mut generator.rng, run.pipelined, PIPELINE_MAX);
            let mut batch: Vec<Cmd> = Vec::new();
            while batch.len() < size && index + batch.len() < settings.commands {
                match generator.next() {
                    Step::Commands(commands) => batch.extend(commands),
                    Step::Copy { from, to } => {
                        run.batch(&batch, index, identical);
                        index += batch.len();
                        batch.clear();
                        copy_value(run, &from, &to, index);
                        index += 4;
                        break;
                    }
                }
            }
            run.batch(&batch, index, identical);
            index += batch.len();
        }
        run.batch(&generator.state_dump(), index, identical);
    });
    eprintln!("{label}: {total} replies equal");
}

#[test]
fn differential_hll_forward_1_shard() {
    run_differential("differential_hll_forward_1_shard", 1);
}

#[test]
fn differential_hll_forward_2_shards() {
    run_differential("differential_hll_forward_2_shards", 2);
}
