//! Differential test of stream consumer groups: seeded random sequences of
//! XGROUP (CREATE, SETID, DESTROY, CREATECONSUMER, DELCONSUMER), XREADGROUP
//! (`>` and history, COUNT, NOACK, BLOCK 1, several streams), XACK, XPENDING (summary and
//! extended, IDLE, consumer), XCLAIM (IDLE, TIME, RETRYCOUNT, FORCE, JUSTID,
//! LASTID), XAUTOCLAIM (COUNT, JUSTID), XINFO STREAM [FULL [COUNT n]], GROUPS and
//! CONSUMERS, mixed with XADD, XDEL, XTRIM, XSETID and COPY, go to a real `redis-server`
//! 7.0 and to Ruvio (forward mode, 1 and 2 shards). Replies must be equal byte for
//! byte, but for what the clock decides.
//!
//! # The clock
//!
//! Entry IDs are explicit and far in the future (`5000000000000-n`), so `*` is
//! never used. Delivery times, idle times and seen times differ between two
//! servers: in the replies of XPENDING and XINFO (and only there) integers that
//! are Unix times in ms, the `idle` and `seen-time` values and the idle column
//! of XPENDING's rows are zeroed before comparing. Every min-idle-time is 0 or
//! an hour, so what is claimed never depends on the clock.
//!
//! # Redis 7.2's consumer fields
//!
//! Ruvio answers XINFO CONSUMERS with 7.2's `inactive` and XINFO STREAM FULL's
//! consumers with 7.2's `active-time`, which 7.0 lacks: they are taken out of
//! Ruvio's reply before comparing (tests/streams_newer.rs checks them).
//!
//! # DUMP
//!
//! Streams that never get a group (`plain*`) are DUMPed now and then: the payload
//! must equal Redis 7.0's byte for byte (Ruvio's nodes and their listpacks are
//! Redis's). Streams with groups carry delivery times, so their DUMP is checked
//! by restoring it on the other server (tests/dump_restore.rs).
//!
//! # HELP
//!
//! XGROUP HELP and XINFO HELP end with the shared `reply_help` line, Redis 7.2's
//! `Print this help.` (7.0 says `Prints`): that word is the one allowed
//! difference.
//!
//! Reproduce a failure with `RUVIO_DIFF_SEED=<seed> RUVIO_DIFF_COMMANDS=<n>`;
//! `RUVIO_DIFF_TRACE=1` prints every command with Redis's reply.

mod common;

use common::*;
use rand::rngs::StdRng;
use rand::seq::IndexedRandom;
use rand::{Rng, SeedableRng};

const COMMANDS_PER_SEED: usize = 1500;
const SEEDS: &[u64] = &[1, 2, 3, 4];
const PIPELINE_MAX: usize = 20;
/// The first entry's milliseconds: far ahead of any clock.
const FUTURE_MS: u64 = 5_000_000_000_000;
/// An idle time no entry reaches during a test.
const HOUR_MS: &str = "3600000";
/// Integers at least this big in a time-bearing reply are Unix times.
const UNIX_MS_FLOOR: i64 = 1_000_000_000_000;

struct Generator {
    rng: StdRng,
    /// Streams that get groups.
    streams: Vec<String>,
    /// Streams that never get a group (their DUMP is compared).
    plain: Vec<String>,
    string: String,
    /// The sequence of the last explicit ID.
    seq: u64,
}

impl Generator {
    fn new(seed: u64, shards: usize) -> Generator {
        let shards = shards.max(2);
        Generator {
            rng: StdRng::seed_from_u64(seed),
            streams: (0..2)
                .map(|i| key_on_shard(&format!("gstream{i}"), i % shards, shards))
                .collect(),
            plain: (0..2)
                .map(|i| key_on_shard(&format!("plain{i}"), i % shards, shards))
                .collect(),
            string: key_on_shard("str", 0, shards),
            seq: 0,
        }
    }

    fn pick(&mut self, from: &[&str]) -> String {
        from.choose(&mut self.rng).expect("choices").to_string()
    }

    fn stream(&mut self) -> String {
        self.streams.choose(&mut self.rng).expect("keys").clone()
    }

    /// A group stream mostly; the string, a missing key sometimes.
    fn key(&mut self) -> String {
        match self.rng.random_range(0..100) {
            0..3 => self.string.clone(),
            3..6 => "missing".into(),
            _ => self.stream(),
        }
    }

    fn group(&mut self) -> String {
        self.pick(&["g1", "g1", "g2", "nogroup"])
    }

    fn consumer(&mut self) -> String {
        self.pick(&["alice", "bob", "carol", "alice"])
    }

    fn initial(&mut self) -> Vec<Cmd> {
        let mut out = vec![cmd(&["SET", &self.string, "not a stream"])];
        for key in self.streams.clone().iter().chain(self.plain.clone().iter()) {
            let id = self.next_id();
            out.push(cmd(&["XADD", key, &id, "f", "v"]));
        }
        for key in self.streams.clone() {
            out.push(cmd(&["XGROUP", "CREATE", &key, "g1", "0"]));
        }
        out
    }

    fn next_id(&mut self) -> String {
        self.seq += 1;
        format!("{FUTURE_MS}-{}", self.seq)
    }

    /// An ID near the ones in use (mostly existing ones), sometimes special.
    fn id(&mut self) -> String {
        match self.rng.random_range(0..30) {
            0 => "bad-id".into(),
            1 => "0".into(),
            2 => "0-0".into(),
            3 => format!("{FUTURE_MS}"),
            _ => {
                let back = self.rng.random_range(0..=self.seq.min(30));
                format!("{FUTURE_MS}-{}", self.seq - back)
            }
        }
    }

    fn ids(&mut self) -> Vec<String> {
        let n = self.rng.random_range(1..=4);
        (0..n).map(|_| self.id()).collect()
    }

    fn xadd(&mut self, key: String) -> Vec<String> {
        let mut w = vec!["XADD".to_string(), key];
        if self.rng.random_range(0..12) == 0 {
            w.extend(["MAXLEN".into(), "~".into(), "40".into()]);
        }
        w.push(self.next_id());
        let fields = self.rng.random_range(1..=3);
        for i in 0..fields {
            w.push(self.pick(&["name", "event", "jobId", "x"]));
            w.push(match i {
                0 => self.rng.random_range(0..500).to_string(),
                _ => self.pick(&["completed", "failed", "progress", ""]),
            });
        }
        w
    }

    fn xgroup(&mut self) -> Vec<String> {
        let key = self.key();
        let group = self.group();
        match self.rng.random_range(0..10) {
            0..3 => {
                let start = match self.rng.random_range(0..4) {
                    0 => "$".to_string(),
                    1 => "0".to_string(),
                    _ => self.id(),
                };
                let mut w = vec!["XGROUP".into(), "CREATE".into(), key, group, start];
                if self.rng.random_range(0..4) == 0 {
                    w.push("MKSTREAM".into());
                }
                if self.rng.random_range(0..4) == 0 {
                    w.push("ENTRIESREAD".into());
                    w.push(self.rng.random_range(-2..20).to_string());
                }
                w
            }
            3..5 => {
                let to = match self.rng.random_range(0..4) {
                    0 => "$".to_string(),
                    _ => self.id(),
                };
                let mut w = vec!["XGROUP".into(), "SETID".into(), key, group, to];
                if self.rng.random_range(0..3) == 0 {
                    w.push("ENTRIESREAD".into());
                    w.push(self.rng.random_range(-1..20).to_string());
                }
                w
            }
            5 => vec!["XGROUP".into(), "DESTROY".into(), key, group],
            6..8 => {
                let c = self.consumer();
                vec!["XGROUP".into(), "CREATECONSUMER".into(), key, group, c]
            }
            8 => {
                let c = self.consumer();
                vec!["XGROUP".into(), "DELCONSUMER".into(), key, group, c]
            }
            _ => vec!["XGROUP".into(), self.pick(&["HELP", "FOO", "create"])],
        }
    }

    fn xreadgroup(&mut self) -> Vec<String> {
        let group = match self.rng.random_range(0..10) {
            0 => "nogroup".to_string(),
            _ => "g1".to_string(),
        };
        let mut w = vec!["XREADGROUP".into(), "GROUP".into(), group, self.consumer()];
        if self.rng.random_range(0..2) == 0 {
            w.push("COUNT".into());
            w.push(self.rng.random_range(-1..6).to_string());
        }
        if self.rng.random_range(0..5) == 0 {
            w.push("NOACK".into());
        }
        if self.rng.random_range(0..8) == 0 {
            // Served at once, or a null array after 1 ms on both servers.
            w.push("BLOCK".into());
            w.push("1".into());
        }
        w.push("STREAMS".into());
        let n = self.rng.random_range(1..=2);
        let keys: Vec<String> = (0..n).map(|_| self.stream()).collect();
        let ids: Vec<String> = (0..n)
            .map(|_| match self.rng.random_range(0..10) {
                0..6 => ">".into(),
                6 => "$".into(),
                _ => self.id(),
            })
            .collect();
        w.extend(keys);
        w.extend(ids);
        w
    }

    fn xpending(&mut self) -> Vec<String> {
        let mut w = vec!["XPENDING".into(), self.key(), self.group()];
        if self.rng.random_range(0..3) == 0 {
            return w;
        }
        if self.rng.random_range(0..3) == 0 {
            w.push("IDLE".into());
            w.push(self.pick(&["0", HOUR_MS, "x"]));
        }
        let start = self.pick(&["-", "(0-0"]);
        w.push(match self.rng.random_range(0..3) {
            0 => self.id(),
            _ => start,
        });
        w.push(self.pick(&["+", "+", "bad"]));
        w.push(self.rng.random_range(-1..8).to_string());
        if self.rng.random_range(0..3) == 0 {
            w.push(self.consumer());
        }
        w
    }

    fn xclaim(&mut self) -> Vec<String> {
        let mut w = vec![
            "XCLAIM".into(),
            self.key(),
            self.group(),
            self.consumer(),
            self.pick(&["0", "0", HOUR_MS, "-5", "x"]),
        ];
        w.extend(self.ids());
        for _ in 0..self.rng.random_range(0..3) {
            match self.rng.random_range(0..7) {
                0 => w.extend(["IDLE".into(), self.pick(&["0", "1000", "x"])]),
                1 => w.extend(["TIME".into(), "1000000000000".into()]),
                2 => w.extend(["RETRYCOUNT".into(), self.pick(&["0", "7", "-1"])]),
                3 => w.push("FORCE".into()),
                4 => w.push("JUSTID".into()),
                5 => {
                    let id = self.id();
                    w.extend(["LASTID".into(), id]);
                }
                _ => w.push("BOGUS".into()),
            }
        }
        w
    }

    fn xautoclaim(&mut self) -> Vec<String> {
        let mut w = vec![
            "XAUTOCLAIM".into(),
            self.key(),
            self.group(),
            self.consumer(),
            self.pick(&["0", "0", HOUR_MS, "x"]),
        ];
        w.push(match self.rng.random_range(0..3) {
            0 => self.id(),
            _ => self.pick(&["0-0", "-", "(0-0"]),
        });
        if self.rng.random_range(0..2) == 0 {
            w.push("COUNT".into());
            w.push(self.pick(&["1", "2", "3", "0"]));
        }
        if self.rng.random_range(0..3) == 0 {
            w.push("JUSTID".into());
        }
        w
    }

    fn xinfo(&mut self) -> Vec<String> {
        let key = self.key();
        match self.rng.random_range(0..7) {
            0 => vec!["XINFO".into(), "STREAM".into(), key],
            1 => {
                let mut w = vec!["XINFO".into(), "STREAM".into(), key, "FULL".into()];
                if self.rng.random_range(0..2) == 0 {
                    w.push("COUNT".into());
                    w.push(self.pick(&["0", "2", "-1"]));
                }
                w
            }
            2 | 3 => vec!["XINFO".into(), "GROUPS".into(), key],
            4 | 5 => {
                let group = self.group();
                vec!["XINFO".into(), "CONSUMERS".into(), key, group]
            }
            _ => vec!["XINFO".into(), "STREAM".into(), key, "FOO".into()],
        }
    }

    fn next(&mut self) -> Vec<Cmd> {
        let words: Vec<String> = match self.rng.random_range(0..100) {
            0..20 => {
                let key = self.stream();
                self.xadd(key)
            }
            20..26 => {
                let key = self.plain.choose(&mut self.rng).expect("plain").clone();
                self.xadd(key)
            }
            26..36 => self.xgroup(),
            36..52 => self.xreadgroup(),
            52..58 => {
                let mut w = vec!["XACK".into(), self.key(), self.group()];
                w.extend(self.ids());
                w
            }
            58..65 => self.xpending(),
            65..71 => self.xclaim(),
            71..76 => self.xautoclaim(),
            76..86 => self.xinfo(),
            86..90 => {
                let key = match self.rng.random_range(0..2) {
                    0 => self.stream(),
                    _ => self.plain.choose(&mut self.rng).expect("plain").clone(),
                };
                let mut w = vec!["XDEL".into(), key];
                w.extend(self.ids());
                w
            }
            90..92 => {
                let key = match self.rng.random_range(0..2) {
                    0 => self.stream(),
                    _ => self.plain.choose(&mut self.rng).expect("plain").clone(),
                };
                let n = self.rng.random_range(0..30).to_string();
                vec!["XTRIM".into(), key, "MAXLEN".into(), n]
            }
            92..95 => {
                let key = self.plain.choose(&mut self.rng).expect("plain").clone();
                vec!["DUMP".into(), key]
            }
            95 => {
                // Moves entries-added and max-deleted-id, which lag reads.
                let mut w = vec!["XSETID".into(), self.stream(), self.next_id()];
                if self.rng.random_range(0..2) == 0 {
                    w.push("ENTRIESADDED".into());
                    w.push(self.rng.random_range(0..400).to_string());
                }
                if self.rng.random_range(0..2) == 0 {
                    w.push("MAXDELETEDID".into());
                    w.push(self.id());
                }
                w
            }
            _ => {
                let (from, to) = (self.stream(), "copy".to_string());
                return vec![
                    cmd(&["DEL", &to]),
                    cmd(&["COPY", &from, &to]),
                    cmd(&["XINFO", "GROUPS", &to]),
                    cmd(&["XPENDING", &to, "g1"]),
                ];
            }
        };
        let refs: Vec<&str> = words.iter().map(String::as_str).collect();
        vec![cmd(&refs)]
    }

    fn state_dump(&self) -> Vec<Cmd> {
        let mut out = vec![cmd(&["DBSIZE"])];
        for key in &self.streams {
            out.push(cmd(&["XINFO", "STREAM", key, "FULL", "COUNT", "0"]));
            out.push(cmd(&["XINFO", "GROUPS", key]));
        }
        for key in &self.plain {
            out.push(cmd(&["DUMP", key]));
        }
        out
    }
}

/// Zero what the clock decides in a decoded reply: Unix times, and the values
/// of `idle` / `seen-time` keys and of XPENDING rows' idle column.
fn clockless(v: &Value) -> Value {
    match v {
        Value::Int(n) if *n >= UNIX_MS_FLOOR => Value::Int(0),
        Value::Map(pairs) => Value::Map(
            pairs
                .iter()
                .map(|(k, val)| match k {
                    Value::Bulk(b) if b == b"idle" || b == b"seen-time" => {
                        (k.clone(), Value::Int(0))
                    }
                    _ => (clockless(k), clockless(val)),
                })
                .collect(),
        ),
        Value::Array(items) => {
            let mut out: Vec<Value> = items.iter().map(clockless).collect();
            for i in 0..out.len().saturating_sub(1) {
                if matches!(&items[i], Value::Bulk(b) if b == b"idle" || b == b"seen-time") {
                    out[i + 1] = Value::Int(0);
                }
            }
            // XPENDING's extended rows: id, consumer, idle, deliveries.
            if let [Value::Bulk(id), Value::Bulk(_), Value::Int(_), Value::Int(_)] = &items[..] {
                if id.contains(&b'-') {
                    out[2] = Value::Int(0);
                }
            }
            Value::Array(out)
        }
        other => other.clone(),
    }
}

fn equal(command: &Cmd, expected: &[u8], got: &[u8]) -> bool {
    if expected == got {
        return true;
    }
    // HELP ends with the project's shared `reply_help` line, 7.2's wording.
    if command.len() == 2 && command[1].eq_ignore_ascii_case(b"help") {
        let expected =
            String::from_utf8_lossy(expected).replace("Prints this help.", "Print this help.");
        return expected.as_bytes() == got;
    }
    let name = command[0].to_ascii_uppercase();
    if name != b"XPENDING" && name != b"XINFO" {
        return false;
    }
    clockless(&decode(expected)) == clockless(&without_7_2_fields(&decode(got)))
}

fn run_differential(label: &str, shards: usize) {
    let Some(servers) = DiffServers::forward(label, shards) else {
        return;
    };
    let settings = DiffSettings::from_env(SEEDS, COMMANDS_PER_SEED);
    let total = servers.each_seed(label, &settings, true, |run| {
        let mut generator = Generator::new(run.seed, shards);
        let initial = generator.initial();
        run.batch(&initial, 0, equal);
        let mut index = 0;
        while index < settings.commands {
            let size = batch_size(&mut generator.rng, run.pipelined, PIPELINE_MAX);
            let mut batch: Vec<Cmd> = Vec::new();
            while batch.len() < size {
                batch.extend(generator.next());
            }
            run.batch(&batch, index, equal);
            index += batch.len();
        }
        run.batch(&generator.state_dump(), index, equal);
    });
    eprintln!("{label}: {total} replies equal");
}

#[test]
fn differential_stream_groups_forward_1_shard() {
    run_differential("differential_stream_groups_forward_1_shard", 1);
}

#[test]
fn differential_stream_groups_forward_2_shards() {
    run_differential("differential_stream_groups_forward_2_shards", 2);
}
