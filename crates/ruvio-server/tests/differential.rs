//! Differential test: the same seeded random command sequences go to a real
//! `redis-server` and to Ruvio (forward mode, 1 and 2 shards), and the raw RESP reply
//! bytes must be identical, command by command.
//!
//! The key space is small (a few plain keys spread over the shards, two groups of
//! hash-tagged keys, two databases) so that commands collide on the same keys all the
//! time. Half of the sequences are sent one command at a time, half as pipelines of up
//! to 40 commands in one write. At the end of every sequence the whole state (TYPE, GET,
//! PTTL, OBJECT ENCODING of every key in both databases, DBSIZE) is compared too.
//!
//! Expiry times never depend on when a command runs: relative TTLs are
//! `bucket * 100000 + command index` seconds, so a later EXPIRE ... GT/LT in the same
//! bucket always asks for a later deadline, by at least one second per command in
//! between; absolute times (EXPIREAT, EXAT, PXAT) lie far beyond every relative one.
//! Nothing expires during a run unless it is set in the past or with a TTL <= 0.
//!
//! # Intended differences (the whole allowlist)
//!
//! 1. TTL, PTTL, EXPIRETIME and PEXPIRETIME of a key with a deadline: the two servers
//!    are asked a moment apart, so positive values may differ by up to 2 s (2000 ms).
//!    -2 and -1 must be equal.
//! 2. OBJECT ENCODING of a non-string value (lists, sets, hashes, only generated when the
//!    server has such types): Ruvio chooses its own compact encodings. Both must still
//!    answer with an encoding name (a bulk string other than int/embstr/raw).
//!
//! # Not generated
//!
//! Nothing multi-key is held back with 2 shards: forward mode splits and merges
//! MGET/MSET/DEL/UNLINK/EXISTS/TOUCH, and runs RENAME, RENAMENX, COPY, LCS and MSETNX on
//! keys borrowed from their owners (docs/cross-shard.md).
//!
//! Reproduce a failure with `RUVIO_DIFF_SEED=<seed> RUVIO_DIFF_COMMANDS=<n>`; the failure
//! message shows the seed, the command index and the preceding commands.
//! `RUVIO_DIFF_TRACE=1` prints every command with Redis's reply.

mod common;

use common::*;
use rand::rngs::StdRng;
use rand::seq::IndexedRandom;
use rand::{Rng, SeedableRng};
use std::time::{SystemTime, UNIX_EPOCH};

/// Commands per sequence unless `RUVIO_DIFF_COMMANDS` says otherwise.
const COMMANDS_PER_SEED: usize = 2500;
/// Seeds per configuration unless `RUVIO_DIFF_SEED` picks one.
const SEEDS: &[u64] = &[1, 2, 3, 4];
/// Largest pipeline sent in one write.
const PIPELINE_MAX: usize = 40;

/// Random commands over a small key space.
struct Generator {
    rng: StdRng,
    /// Index of the next command: keeps relative expiry times strictly increasing.
    index: u64,
    /// Unix time (s) at the start of the run, the base of absolute expiry times.
    base_unix_s: u64,
    /// Keys spread over the shards.
    plain: Vec<String>,
    /// Groups of keys sharing a hash tag (each group on one shard).
    tagged: Vec<Vec<String>>,
    /// Commands that create non-string values, those the target supports.
    other_types: Vec<&'static str>,
}

const VALUES: &[&str] = &[
    "0",
    "1",
    "-1",
    "7",
    "42",
    "-5",
    "123",
    "10000",
    "007",
    " 1",
    "1 ",
    "+1",
    "0x10",
    "3.0",
    "10.5",
    "-0.25",
    "1e3",
    "5.0e3",
    "abc",
    "",
    "hello world",
    "9223372036854775807",
    "-9223372036854775808",
    "9223372036854775808",
    "18446744073709551615",
    "01234567890123456789",
    "12345678901234567890",
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", // 44 bytes: the embstr limit
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", // 45 bytes: raw
    "ohmytext",
    "mynewtext",
    "binary\0\r\nbytes",
];
const INCRBY_AMOUNTS: &[&str] = &[
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
    " 1",
];
const FLOAT_AMOUNTS: &[&str] = &[
    "1",
    "-1",
    "1.5",
    "-0.25",
    "0.1",
    "0.2",
    "-7.125",
    "3.0",
    "1e2",
    "5.0e3",
    "0",
    "-0",
    "10.50",
    "abc",
    "inf",
    "+inf",
    "-inf",
    "nan",
    "1.7976931348623157e308",
    "",
    " 1",
    "0x10",
];
const RANGE_INDEXES: &[&str] = &[
    "0",
    "1",
    "2",
    "3",
    "5",
    "10",
    "100",
    "-1",
    "-2",
    "-5",
    "-100",
    "9223372036854775807",
    "-9223372036854775808",
    "x",
];
const SETRANGE_OFFSETS: &[&str] = &["0", "1", "3", "5", "10", "20", "-1", "536870912", "x"];
const SETRANGE_VALUES: &[&str] = &["", "ab", "xyz", "1", "Z"];
const EXPIRE_FLAGS: &[&str] = &["NX", "XX", "GT", "LT"];

impl Generator {
    fn new(seed: u64, shards: usize, base_unix_s: u64) -> Generator {
        let plain: Vec<String> = (0..6).map(|i| format!("k{i}")).collect();
        let mut tagged = Vec::new();
        for shard in 0..2 {
            let tag = hash_tag_on_shard(shard, 2);
            tagged.push((0..3).map(|i| format!("{{{tag}}}{i}")).collect());
        }
        if shards == 2 {
            let used: std::collections::BTreeSet<usize> =
                plain.iter().map(|k| shard_of_key(k, 2)).collect();
            assert_eq!(used.len(), 2, "plain keys must cover both shards");
        }
        Generator {
            rng: StdRng::seed_from_u64(seed),
            index: 0,
            base_unix_s,
            plain,
            tagged,
            other_types: Vec::new(),
        }
    }

    fn pick<'a>(&mut self, items: &'a [&'a str]) -> &'a str {
        items.choose(&mut self.rng).expect("non-empty")
    }

    fn chance(&mut self, p: f64) -> bool {
        self.rng.random_bool(p)
    }

    fn all_keys(&self) -> Vec<String> {
        let mut keys = self.plain.clone();
        keys.extend(self.tagged.iter().flatten().cloned());
        keys
    }

    fn key(&mut self) -> String {
        let keys = self.all_keys();
        keys.choose(&mut self.rng).expect("keys").clone()
    }

    /// Two keys for a multi-key command (forward mode borrows them across shards).
    fn key_pair(&mut self) -> (String, String) {
        (self.key(), self.key())
    }

    fn keys(&mut self, max: usize) -> Vec<String> {
        let n = self.rng.random_range(1..=max);
        (0..n).map(|_| self.key()).collect()
    }

    fn value(&mut self) -> String {
        if self.chance(0.15) {
            let len = self.rng.random_range(0..60);
            (0..len)
                .map(|_| self.rng.random_range(b'a'..=b'z') as char)
                .collect()
        } else {
            self.pick(VALUES).to_string()
        }
    }

    /// A relative expiry in seconds: positive and time-independent, or an edge case.
    fn ttl_s(&mut self) -> String {
        match self.rng.random_range(0..20) {
            0 => "0".into(),
            1 => "-1".into(),
            2 => "abc".into(),
            3 => "9223372036854775807".into(),
            _ => (self.rng.random_range(1..=3u64) * 100_000 + self.index).to_string(),
        }
    }

    fn ttl_ms(&mut self) -> String {
        match self.rng.random_range(0..20) {
            0 => "0".into(),
            1 => "-100".into(),
            2 => "1.5".into(),
            3 => "9223372036854775807".into(),
            _ => ((self.rng.random_range(1..=3u64) * 100_000 + self.index) * 1000).to_string(),
        }
    }

    /// An absolute unix time in seconds, far beyond any relative deadline, or in the past.
    fn at_s(&mut self) -> String {
        match self.rng.random_range(0..10) {
            0 => "1".into(),
            1 => "0".into(),
            2 => "-1".into(),
            _ => (self.base_unix_s + self.rng.random_range(1..=3u64) * 10_000_000 + self.index)
                .to_string(),
        }
    }

    fn at_ms(&mut self) -> String {
        match self.rng.random_range(0..10) {
            0 => "1".into(),
            1 => "1000".into(),
            _ => ((self.base_unix_s + self.rng.random_range(1..=3u64) * 10_000_000 + self.index)
                * 1000)
                .to_string(),
        }
    }

    /// SET's or GETEX's expiry option, sometimes malformed.
    fn expiry_option(&mut self, out: &mut Vec<String>, allow_persist: bool) {
        match self.rng.random_range(0..8) {
            0 => out.extend(["EX".into(), self.ttl_s()]),
            1 => out.extend(["PX".into(), self.ttl_ms()]),
            2 => out.extend(["EXAT".into(), self.at_s()]),
            3 => out.extend(["PXAT".into(), self.at_ms()]),
            4 if allow_persist => out.push("PERSIST".into()),
            4 => out.push("KEEPTTL".into()),
            5 => out.push("EX".into()),
            6 => out.extend(["ex".into(), self.ttl_s()]),
            _ => {}
        }
    }

    fn next(&mut self) -> Cmd {
        self.index += 1;
        let words: Vec<String> = match self.rng.random_range(0..100) {
            0..=9 => {
                let mut words = vec!["SET".into(), self.key(), self.value()];
                for _ in 0..self.rng.random_range(0..=3) {
                    match self.rng.random_range(0..6) {
                        0 => words.push("NX".into()),
                        1 => words.push("XX".into()),
                        2 => words.push("GET".into()),
                        3 => words.push("KEEPTTL".into()),
                        4 if self.chance(0.2) => words.push("BOGUS".into()),
                        _ => self.expiry_option(&mut words, false),
                    }
                }
                words
            }
            10..=17 => vec!["GET".into(), self.key()],
            18..=20 => {
                let mut words = vec!["MSET".into()];
                for key in self.keys(4) {
                    words.push(key);
                    words.push(self.value());
                }
                words
            }
            21..=23 => {
                let mut words = vec!["MGET".into()];
                words.extend(self.keys(5));
                words
            }
            24..=26 => {
                let name = self.pick(&["DEL", "UNLINK", "EXISTS", "TOUCH"]).to_string();
                let mut words = vec![name];
                words.extend(self.keys(4));
                words
            }
            27..=28 => vec!["APPEND".into(), self.key(), self.value()],
            29..=31 => vec![self.pick(&["INCR", "DECR"]).into(), self.key()],
            32..=34 => {
                let name = self.pick(&["INCRBY", "DECRBY"]).to_string();
                vec![name, self.key(), self.pick(INCRBY_AMOUNTS).into()]
            }
            35..=37 => vec![
                "INCRBYFLOAT".into(),
                self.key(),
                self.pick(FLOAT_AMOUNTS).into(),
            ],
            38..=39 => {
                let name = self.pick(&["GETRANGE", "SUBSTR"]).to_string();
                vec![
                    name,
                    self.key(),
                    self.pick(RANGE_INDEXES).into(),
                    self.pick(RANGE_INDEXES).into(),
                ]
            }
            40..=41 => vec![
                "SETRANGE".into(),
                self.key(),
                self.pick(SETRANGE_OFFSETS).into(),
                self.pick(SETRANGE_VALUES).into(),
            ],
            42 => vec!["STRLEN".into(), self.key()],
            43 => vec!["GETSET".into(), self.key(), self.value()],
            44 => vec!["GETDEL".into(), self.key()],
            45..=46 => {
                let mut words = vec!["GETEX".into(), self.key()];
                self.expiry_option(&mut words, true);
                words
            }
            47 => vec!["SETNX".into(), self.key(), self.value()],
            48 => {
                let (a, b) = self.key_pair();
                vec!["MSETNX".into(), a, self.value(), b, self.value()]
            }
            49 => vec!["SETEX".into(), self.key(), self.ttl_s(), self.value()],
            50 => vec!["PSETEX".into(), self.key(), self.ttl_ms(), self.value()],
            51..=55 => {
                let (name, when) = match self.rng.random_range(0..4) {
                    0 => ("EXPIRE", self.ttl_s()),
                    1 => ("PEXPIRE", self.ttl_ms()),
                    2 => ("EXPIREAT", self.at_s()),
                    _ => ("PEXPIREAT", self.at_ms()),
                };
                let mut words = vec![name.to_string(), self.key(), when];
                for _ in 0..self.rng.random_range(0..=2) {
                    words.push(self.pick(EXPIRE_FLAGS).into());
                }
                words
            }
            56..=59 => {
                let name = self
                    .pick(&["TTL", "PTTL", "EXPIRETIME", "PEXPIRETIME"])
                    .to_string();
                vec![name, self.key()]
            }
            60..=61 => vec!["PERSIST".into(), self.key()],
            62..=63 => vec!["TYPE".into(), self.key()],
            64..=65 => {
                let (a, b) = self.key_pair();
                vec![self.pick(&["RENAME", "RENAMENX"]).into(), a, b]
            }
            66..=67 => {
                let (a, b) = self.key_pair();
                let mut words = vec!["COPY".into(), a, b];
                if self.chance(0.3) {
                    words.extend(["DB".into(), self.pick(&["0", "1", "16", "x"]).into()]);
                }
                if self.chance(0.4) {
                    words.push("REPLACE".into());
                }
                words
            }
            68..=69 => {
                let (a, b) = self.key_pair();
                let mut words = vec!["LCS".into(), a, b];
                match self.rng.random_range(0..6) {
                    0 => words.push("LEN".into()),
                    1 => words.push("IDX".into()),
                    2 => words.extend([
                        "IDX".into(),
                        "MINMATCHLEN".into(),
                        self.pick(&["0", "2", "4"]).into(),
                    ]),
                    3 => words.extend(["IDX".into(), "WITHMATCHLEN".into()]),
                    4 => words.extend(["LEN".into(), "IDX".into()]),
                    _ => {}
                }
                words
            }
            70..=72 => vec!["OBJECT".into(), "ENCODING".into(), self.key()],
            73 if self.chance(0.3) => vec!["SELECT".into(), self.pick(&["0", "1"]).into()],
            74..=75 => {
                let wrong: &[&[&str]] = &[
                    &["GET"],
                    &["GET", "a", "b"],
                    &["SET", "k"],
                    &["MSET", "a"],
                    &["MSET", "a", "1", "b"],
                    &["MGET"],
                    &["EXPIRE", "k"],
                    &["LCS", "k"],
                    &["INCRBY", "k"],
                    &["GETEX"],
                    &["COPY", "k"],
                    &["OBJECT"],
                    &["TTL"],
                    &["EXISTS"],
                    &["DEL"],
                    &["RENAME", "k"],
                    &["SETRANGE", "k", "0"],
                    &["APPEND", "k"],
                    &["GETDEL", "a", "b"],
                ];
                wrong
                    .choose(&mut self.rng)
                    .expect("cases")
                    .iter()
                    .map(|s| s.to_string())
                    .collect()
            }
            76..=77 => {
                let key = self.key();
                let bad: Vec<Vec<&str>> = vec![
                    vec!["SET", &key, "v", "EX", "10", "PX", "10"],
                    vec!["SET", &key, "v", "NX", "XX"],
                    vec!["SET", &key, "v", "KEEPTTL", "EX", "10"],
                    vec!["EXPIRE", &key, "100", "FOO"],
                    vec!["EXPIRE", &key, "100", "GT", "LT"],
                    vec!["COPY", &key, &key],
                    vec!["GETEX", &key, "EX"],
                    vec!["GETEX", &key, "PERSIST", "EX", "10"],
                    vec!["LCS", &key, &key, "FOO"],
                    vec!["OBJECT", "FOO", &key],
                    vec!["NOSUCHCOMMAND", &key],
                    vec!["SELECT", "16"],
                ];
                bad.choose(&mut self.rng)
                    .expect("cases")
                    .iter()
                    .map(|s| s.to_string())
                    .collect()
            }
            78 if !self.other_types.is_empty() => {
                let name = *self.other_types.choose(&mut self.rng).expect("types");
                let key = self.key();
                match name {
                    "HSET" => vec![name.into(), key, "field".into(), self.value()],
                    _ => vec![name.into(), key, self.value()],
                }
            }
            81 => vec!["DBSIZE".into()],
            _ => vec!["GET".into(), self.key()],
        };
        words.into_iter().map(String::into_bytes).collect()
    }

    /// Commands that read back every key of both databases.
    fn state_dump(&self) -> Vec<Cmd> {
        let mut out = Vec::new();
        for db in ["0", "1"] {
            out.push(cmd(&["SELECT", db]));
            out.push(cmd(&["DBSIZE"]));
            for key in self.all_keys() {
                out.push(cmd(&["TYPE", &key]));
                out.push(cmd(&["GET", &key]));
                out.push(cmd(&["PTTL", &key]));
                out.push(cmd(&["OBJECT", "ENCODING", &key]));
            }
        }
        out
    }
}

/// Whether two replies to `command` count as equal (see the allowlist above).
fn equivalent(command: &Cmd, a: &[u8], b: &[u8]) -> bool {
    if a == b {
        return true;
    }
    let name = String::from_utf8_lossy(&command[0]).to_ascii_uppercase();
    let int = |reply: &[u8]| -> Option<i64> {
        let text = std::str::from_utf8(reply.strip_prefix(b":")?.strip_suffix(b"\r\n")?).ok()?;
        text.parse().ok()
    };
    let tolerance = match name.as_str() {
        "TTL" | "EXPIRETIME" => Some(2),
        "PTTL" | "PEXPIRETIME" => Some(2000),
        _ => None,
    };
    if let (Some(tolerance), Some(x), Some(y)) = (tolerance, int(a), int(b)) {
        return x > 0 && y > 0 && (x - y).abs() <= tolerance;
    }
    if name == "OBJECT" {
        let encoding = |reply: &[u8]| match decode(reply) {
            Value::Bulk(name) => Some(name),
            _ => None,
        };
        let string_encodings: [&[u8]; 3] = [b"int", b"embstr", b"raw"];
        if let (Some(x), Some(y)) = (encoding(a), encoding(b)) {
            return !string_encodings.contains(&x.as_slice())
                && !string_encodings.contains(&y.as_slice());
        }
    }
    false
}

/// Commands the target answers with "unknown command" are not generated.
fn supported_other_types(conn: &mut RawConn) -> Vec<&'static str> {
    let probes: [(&'static str, &[&str]); 3] = [
        ("RPUSH", &["RPUSH", "__probe", "x"]),
        ("SADD", &["SADD", "__probe", "x"]),
        ("HSET", &["HSET", "__probe", "f", "x"]),
    ];
    let mut supported = Vec::new();
    for (name, probe) in probes {
        let reply = conn.cmd(probe);
        if !reply.starts_with(b"-ERR unknown command") {
            supported.push(name);
        }
        conn.cmd(&["DEL", "__probe"]);
    }
    supported
}

fn run_differential(label: &str, shards: usize) {
    let Some(servers) = DiffServers::forward(label, shards) else {
        return;
    };
    let settings = DiffSettings::from_env(SEEDS, COMMANDS_PER_SEED);
    let commands = settings.commands;
    let base_unix_s = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock")
        .as_secs();
    let total = servers.each_seed(label, &settings, false, |run| {
        let mut generator = Generator::new(run.seed, shards, base_unix_s);
        generator.other_types = supported_other_types(&mut run.target);
        if generator.other_types.is_empty() && run.seed == 1 {
            eprintln!("{label}: the target has no list/set/hash commands yet; WRONGTYPE cases are not generated");
        }
        let mut index = 0;
        while index < commands {
            let n = batch_size(&mut generator.rng, run.pipelined, PIPELINE_MAX).min(commands - index);
            let batch: Vec<Cmd> = (0..n).map(|_| generator.next()).collect();
            run.batch(&batch, index, equivalent);
            index += n;
        }
        let dump = generator.state_dump();
        run.batch(&dump, index, equivalent);
    });
    eprintln!("{label}: {total} replies identical");
}

#[test]
fn differential_forward_1_shard() {
    run_differential("differential_forward_1_shard", 1);
}

#[test]
fn differential_forward_2_shards() {
    run_differential("differential_forward_2_shards", 2);
}

/// The allowlist itself: what it forgives and what it does not.
#[test]
fn allowlist_is_narrow() {
    let ttl = cmd(&["TTL", "k"]);
    assert!(equivalent(&ttl, b":100\r\n", b":99\r\n"));
    assert!(!equivalent(&ttl, b":100\r\n", b":90\r\n"));
    assert!(!equivalent(&ttl, b":-1\r\n", b":-2\r\n"));
    assert!(!equivalent(&ttl, b":-1\r\n", b":1\r\n"));
    let pttl = cmd(&["pttl", "k"]);
    assert!(equivalent(&pttl, b":100000\r\n", b":99000\r\n"));
    assert!(!equivalent(&pttl, b":100000\r\n", b":97000\r\n"));
    let encoding = cmd(&["OBJECT", "ENCODING", "k"]);
    assert!(equivalent(
        &encoding,
        b"$9\r\nquicklist\r\n",
        b"$8\r\nlistpack\r\n"
    ));
    assert!(!equivalent(
        &encoding,
        b"$3\r\nint\r\n",
        b"$6\r\nembstr\r\n"
    ));
    assert!(!equivalent(
        &encoding,
        b"$9\r\nquicklist\r\n",
        b"$3\r\nraw\r\n"
    ));
    assert!(!equivalent(
        &cmd(&["GET", "k"]),
        b"$1\r\na\r\n",
        b"$1\r\nb\r\n"
    ));
}
