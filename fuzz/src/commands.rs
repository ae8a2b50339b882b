//! Requests built from the server's command table: every command and subcommand
//! the registry holds (so commands added later are fuzzed without editing this),
//! with arguments drawn from keys spread over both shards, numbers, keywords and
//! raw bytes.

use arbitrary::Arbitrary;
use ruvio_server::cmd::registry::registry;
use std::sync::OnceLock;

/// Commands the harness cannot run, each for a reason outside the dispatcher: they
/// leave the process or stall its thread, touch files, or answer other than
/// one reply per request by design. A name not in the table is simply never seen.
const NOT_FUZZED: &[(&str, &str)] = &[
    ("shutdown", "exits the process"),
    ("pfselftest", "half a second of fixed work, no input"),
    (
        "debug",
        "DEBUG SLEEP stalls the thread; other subcommands reload or crash by design",
    ),
    (
        "migrate",
        "connects to the host it names and blocks its thread up to its timeout",
    ),
    ("save", "writes files"),
    ("bgsave", "writes files"),
    ("bgrewriteaof", "writes files"),
    ("config|rewrite", "writes files"),
    ("client|reply", "OFF and SKIP withhold replies by design"),
    ("monitor", "streams every later command"),
    (
        "psync",
        "makes the connection a replica's: an RDB and the stream, no reply per request",
    ),
    (
        "sync",
        "makes the connection a replica's: an RDB and the stream, no reply per request",
    ),
    (
        "wait",
        "waits for replicas' acknowledgements, which the harness has no replica to send",
    ),
    (
        "waitaof",
        "waits for replicas' acknowledgements, which the harness has no replica to send",
    ),
    ("subscribe", "one reply per channel"),
    ("psubscribe", "one reply per pattern"),
    ("ssubscribe", "one reply per channel"),
    ("unsubscribe", "one reply per channel"),
    ("punsubscribe", "one reply per pattern"),
    ("sunsubscribe", "one reply per channel"),
    ("eval", "a script may loop until its time limit"),
    ("evalsha", "a script may loop until its time limit"),
    ("eval_ro", "a script may loop until its time limit"),
    ("evalsha_ro", "a script may loop until its time limit"),
    ("fcall", "a function may loop until its time limit"),
    ("fcall_ro", "a function may loop until its time limit"),
];

/// Keys: short and long, hash-tagged pairs in one slot, spread over both shards.
const KEYS: &[&str] = &[
    "a",
    "b",
    "c",
    "d",
    "k1",
    "k2",
    "k3",
    "k4",
    "{t}1",
    "{t}2",
    "{u}1",
    "{u}2",
    "long-key-0123456789-0123456789-0123456789",
];

/// Words the commands' syntax uses (options, ranges, config parameters).
const WORDS: &[&str] = &[
    "0",
    "1",
    "-1",
    "2",
    "3",
    "10",
    "100",
    "-100",
    "0.5",
    "1e3",
    "inf",
    "+inf",
    "-inf",
    "nan",
    "(1",
    "[a",
    "(a",
    "-",
    "+",
    "*",
    "?",
    "a*",
    "EX",
    "PX",
    "EXAT",
    "PXAT",
    "NX",
    "XX",
    "GT",
    "LT",
    "CH",
    "INCR",
    "KEEPTTL",
    "GET",
    "PERSIST",
    "WITHSCORES",
    "WITHSCORE",
    "LIMIT",
    "COUNT",
    "MATCH",
    "TYPE",
    "BEFORE",
    "AFTER",
    "LEFT",
    "RIGHT",
    "BYSCORE",
    "BYLEX",
    "REV",
    "WEIGHTS",
    "AGGREGATE",
    "SUM",
    "MIN",
    "MAX",
    "IDX",
    "LEN",
    "MINMATCHLEN",
    "WITHMATCHLEN",
    "BY",
    "ASC",
    "DESC",
    "ALPHA",
    "STORE",
    "STORE",
    "BIT",
    "BYTE",
    "AND",
    "OR",
    "XOR",
    "NOT",
    "OVERFLOW",
    "WRAP",
    "SAT",
    "FAIL",
    "u8",
    "i16",
    "u63",
    "i64",
    "#1",
    "SET",
    "INCRBY",
    "WITHVALUES",
    "FIELDS",
    "RANK",
    "MAXLEN",
    "REPLACE",
    "DB",
    "ABSTTL",
    "IDLETIME",
    "FREQ",
    "COPY",
    "STOREDIST",
    "WITHCOORD",
    "WITHDIST",
    "WITHHASH",
    "FROMMEMBER",
    "FROMLONLAT",
    "BYRADIUS",
    "BYBOX",
    "m",
    "km",
    "ANY",
    "ID",
    "SKIPME",
    "no",
    "yes",
    "ON",
    "OFF",
    "ALL",
    "WRITE",
    "TIMEOUT",
    "ERROR",
    "list-max-listpack-size",
    "hash-max-listpack-entries",
    "set-max-intset-entries",
    "zset-max-listpack-entries",
    "maxmemory",
    "maxmemory-policy",
    "allkeys-lru",
    "hll-sparse-max-bytes",
    "timeout",
];

/// One argument, as the fuzzer chooses it.
#[derive(Arbitrary, Debug)]
pub enum Arg {
    Key(u8),
    Word(u8),
    Small(i8),
    Int(i64),
    Float(f32),
    Bytes(Vec<u8>),
}

impl Arg {
    pub fn bytes(&self) -> Vec<u8> {
        match self {
            Arg::Key(k) => KEYS[usize::from(*k) % KEYS.len()].as_bytes().to_vec(),
            Arg::Word(w) => WORDS[usize::from(*w) % WORDS.len()].as_bytes().to_vec(),
            Arg::Small(n) => n.to_string().into_bytes(),
            Arg::Int(n) => n.to_string().into_bytes(),
            Arg::Float(f) => f.to_string().into_bytes(),
            Arg::Bytes(b) => b.clone(),
        }
    }
}

/// One request: a command of the table (an index past the table's end takes the
/// first argument as the name, for unknown commands) and its arguments.
#[derive(Arbitrary, Debug)]
pub struct Request {
    pub command: u16,
    pub args: Vec<Arg>,
}

impl Request {
    /// The request's arguments, name first.
    pub fn argv(&self) -> Vec<Vec<u8>> {
        let names = names();
        let mut argv: Vec<Vec<u8>> = match names.get(usize::from(self.command) % (names.len() + 1))
        {
            Some(name) => name.split('|').map(|w| w.as_bytes().to_vec()).collect(),
            None => Vec::new(),
        };
        argv.extend(self.args.iter().map(Arg::bytes));
        if argv.is_empty() {
            argv.push(b"ping".to_vec());
        }
        argv
    }
}

/// Every command and subcommand name in the table (`config|get`), less [`NOT_FUZZED`].
pub fn names() -> &'static [String] {
    static NAMES: OnceLock<Vec<String>> = OnceLock::new();
    NAMES.get_or_init(|| {
        let fuzzed = |name: &str| !NOT_FUZZED.iter().any(|(n, _)| n.eq_ignore_ascii_case(name));
        let mut names = Vec::new();
        for command in &registry().commands {
            names.push(command.meta.name.to_ascii_lowercase());
            for sub in &command.subcommands {
                names.push(sub.meta.name.to_ascii_lowercase());
            }
        }
        names.retain(|n| fuzzed(n) && fuzzed(n.split('|').next().unwrap_or(n)));
        names
    })
}

/// A request as text, for reading a finding (`RUVIO_FUZZ_SHOW=1`).
pub fn show(argv: &[Vec<u8>]) -> String {
    argv.iter()
        .map(|a| format!("{:?}", String::from_utf8_lossy(a)))
        .collect::<Vec<_>>()
        .join(" ")
}
