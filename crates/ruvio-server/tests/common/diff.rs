//! The differential tests' shared parts: how a run is configured from the
//! environment ([`DiffSettings`]), the runner that sends the same commands to
//! redis-server and Ruvio and compares the replies ([`DiffRun`]), and the one
//! failure report ([`Mismatch`]).

use super::*;

/// How a differential test runs, from the environment, so that a failure can be replayed
/// with the seed and command count its message prints.
pub struct DiffSettings {
    /// `RUVIO_DIFF_SEED`: one seed instead of the test's own list.
    pub seeds: Vec<u64>,
    /// `RUVIO_DIFF_COMMANDS`: commands per sequence instead of the test's default.
    pub commands: usize,
    /// `RUVIO_DIFF_TRACE` set to anything but `histogram`: print every command with
    /// Redis's reply.
    pub trace_commands: bool,
    /// `RUVIO_DIFF_TRACE` set at all: print what the tests that keep one collected about
    /// the replies (differential_collections: a histogram of reply kinds per command).
    pub trace_summary: bool,
    /// Neither the seed nor the command count was overridden: the run is the full,
    /// reproducible one, so checks over the whole run (coverage) apply.
    pub full_run: bool,
}

impl DiffSettings {
    /// Reads the environment; `seeds` and `commands` are the test's defaults.
    pub fn from_env(seeds: &[u64], commands: usize) -> DiffSettings {
        let seed = std::env::var("RUVIO_DIFF_SEED").ok();
        let count = std::env::var("RUVIO_DIFF_COMMANDS").ok();
        let trace = std::env::var("RUVIO_DIFF_TRACE").ok();
        DiffSettings {
            full_run: seed.is_none() && count.is_none(),
            seeds: match seed {
                Some(seed) => vec![seed.parse().expect("RUVIO_DIFF_SEED is a number")],
                None => seeds.to_vec(),
            },
            commands: count
                .map(|n| n.parse().expect("RUVIO_DIFF_COMMANDS is a number"))
                .unwrap_or(commands),
            trace_commands: trace.as_deref().is_some_and(|t| t != "histogram"),
            trace_summary: trace.is_some(),
        }
    }
}

/// Where a differential run stood when a reply differed: everything the failure
/// message shows (one format for every differential test).
pub struct Mismatch<'a> {
    pub label: &'a str,
    pub seed: u64,
    /// `RESP3, pipelined` and the like; empty when the run has one mode.
    pub mode: String,
    pub index: usize,
    pub batch: usize,
    pub command: String,
    pub expected: &'a [u8],
    pub got: &'a [u8],
    pub history: &'a std::collections::VecDeque<String>,
    /// `RUVIO_DIFF_COMMANDS` that reproduces it.
    pub count: usize,
}

impl Mismatch<'_> {
    /// Fail the test with the mismatch, the commands before it, and how to replay it.
    pub fn fail(&self) -> ! {
        let history: Vec<&str> = self.history.iter().map(String::as_str).collect();
        let mode = if self.mode.is_empty() {
            String::new()
        } else {
            format!("{}, ", self.mode)
        };
        panic!(
            "{label}: replies differ (seed {seed}, {mode}command #{index}, batch of {n})\n\
             command:  {command}\n\
             redis:    {expected}\n\
             target:   {got}\n\
             last commands (oldest first):\n  {history}\n\
             reproduce: RUVIO_DIFF_SEED={seed} RUVIO_DIFF_COMMANDS={count}",
            label = self.label,
            seed = self.seed,
            index = self.index,
            n = self.batch,
            command = self.command,
            expected = show(self.expected),
            got = show(self.got),
            history = history.join("\n  "),
            count = self.count,
        );
    }
}

/// `RESP3, pipelined` and the like, for [`Mismatch::mode`].
pub fn diff_mode(resp3: bool, pipelined: bool) -> String {
    let protocol = protocol_name(resp3);
    let how = if pipelined {
        "pipelined"
    } else {
        "one step at a time"
    };
    format!("{protocol}, {how}")
}

/// Commands kept for a failure message.
pub const DIFF_HISTORY_MAX: usize = 30;

/// One differential sequence: a connection to redis-server and one to Ruvio that
/// get the same commands, the last commands sent (for the failure message), and the
/// count of replies compared. The families' tests add their own steps (scan unions,
/// model checks) around [`DiffRun::batch`].
pub struct DiffRun<'a> {
    pub reference: RawConn,
    pub target: RawConn,
    pub history: std::collections::VecDeque<String>,
    pub label: &'a str,
    pub seed: u64,
    pub resp3: bool,
    pub pipelined: bool,
    pub trace: bool,
    pub compared: usize,
    /// The largest command count to name in a failure's replay hint.
    pub commands: usize,
    /// How a command is printed in traces and failures (a test with huge commands
    /// shortens them).
    pub show: fn(&Cmd) -> String,
}

impl<'a> DiffRun<'a> {
    /// Connect to both servers, empty them, and switch both to RESP3 when `resp3`.
    pub fn start(
        label: &'a str,
        seed: u64,
        servers: (&Server, &Server),
        settings: &DiffSettings,
        resp3: bool,
        pipelined: bool,
    ) -> DiffRun<'a> {
        let mut run = DiffRun {
            reference: servers.0.raw(),
            target: servers.1.raw(),
            history: Default::default(),
            label,
            seed,
            resp3,
            pipelined,
            trace: settings.trace_commands,
            compared: 0,
            commands: usize::MAX,
            show: |command| show_cmd(command),
        };
        for conn in [&mut run.reference, &mut run.target] {
            assert_eq!(conn.cmd(&["FLUSHALL"]), b"+OK\r\n");
            if resp3 {
                let hello = conn.cmd(&["HELLO", "3"]);
                assert!(hello.starts_with(b"%"), "HELLO 3: {}", show(&hello));
            }
        }
        run
    }

    /// Note `shown` (a command as printed) in the history, and trace it with Redis's
    /// reply when asked.
    pub fn remember(&mut self, shown: String, reply: &[u8]) {
        if self.trace {
            eprintln!("{shown} -> {}", show(reply));
        }
        self.history.push_back(shown);
        if self.history.len() > DIFF_HISTORY_MAX {
            self.history.pop_front();
        }
    }

    /// Fail the test: command `shown` at `index` (in a batch of `batch`) answered
    /// `got` where Redis answered `expected`.
    pub fn fail(
        &self,
        shown: String,
        index: usize,
        batch: usize,
        expected: &[u8],
        got: &[u8],
    ) -> ! {
        Mismatch {
            label: self.label,
            seed: self.seed,
            mode: diff_mode(self.resp3, self.pipelined),
            index,
            batch,
            command: shown,
            expected,
            got,
            history: &self.history,
            count: (index + 1).min(self.commands),
        }
        .fail()
    }

    /// Send `batch` to both servers in one write each; every reply, Redis's first.
    pub fn send(&mut self, batch: &[Cmd]) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
        let bytes: Vec<u8> = batch.iter().flat_map(|c| encode(c)).collect();
        self.reference.send(&bytes);
        self.target.send(&bytes);
        let expected = batch.iter().map(|_| self.reference.read_reply()).collect();
        let got = batch.iter().map(|_| self.target.read_reply()).collect();
        (expected, got)
    }

    /// Send `batch` (its first command is number `start` of the sequence) and
    /// compare the replies one by one with `equivalent` (the test's allowlist).
    pub fn batch(
        &mut self,
        batch: &[Cmd],
        start: usize,
        equivalent: impl Fn(&Cmd, &[u8], &[u8]) -> bool,
    ) {
        let (expected, got) = self.send(batch);
        self.compare(batch, start, &expected, &got, equivalent);
    }

    /// Compare replies already read (see [`batch`](Self::batch)).
    pub fn compare(
        &mut self,
        batch: &[Cmd],
        start: usize,
        expected: &[Vec<u8>],
        got: &[Vec<u8>],
        equivalent: impl Fn(&Cmd, &[u8], &[u8]) -> bool,
    ) {
        self.compare_probing(batch, start, expected, got, |command, e, g, _| {
            equivalent(command, e, g)
        });
    }

    /// [`compare`](Self::compare) for a test whose allowlist also looks at
    /// Redis's reply to the next command of the batch (a probe the generator puts
    /// after a command whose reply alone cannot be judged, such as OBJECT
    /// ENCODING after SMEMBERS); a batch item is a command or a test's step that
    /// holds one.
    pub fn compare_probing<T: AsRef<Cmd>>(
        &mut self,
        batch: &[T],
        start: usize,
        expected: &[Vec<u8>],
        got: &[Vec<u8>],
        equivalent: impl Fn(&T, &[u8], &[u8], Option<&[u8]>) -> bool,
    ) {
        for (i, item) in batch.iter().enumerate() {
            let shown = (self.show)(item.as_ref());
            self.remember(shown.clone(), &expected[i]);
            let probe = expected.get(i + 1).map(Vec::as_slice);
            if !equivalent(item, &expected[i], &got[i], probe) {
                self.fail(shown, start + i, batch.len(), &expected[i], &got[i]);
            }
            self.compared += 1;
        }
    }
}

/// A differential test's two servers: redis-server, the reference, and the target
/// (Ruvio in forward mode; another redis-server under `RUVIO_TEST_TARGET=redis`).
pub struct DiffServers {
    pub reference: Server,
    pub target: Server,
}

impl DiffServers {
    /// Both servers, the target with `shards` shards; `None` when redis-server is
    /// not installed (the test is then skipped, with a line saying so).
    pub fn forward(label: &str, shards: usize) -> Option<DiffServers> {
        require_redis_server(label)?;
        Some(DiffServers {
            reference: Server::redis(),
            target: Server::forward(shards),
        })
    }

    /// `CONFIG SET hz` on each redis-server of the two (Ruvio's timers do not
    /// follow hz): a test whose replies depend on Redis's background work runs
    /// it at a known pace.
    pub fn set_redis_hz(&self, hz: &str) {
        let mut servers = vec![&self.reference];
        if target() == Target::Redis {
            servers.push(&self.target);
        }
        for server in servers {
            let reply = server.raw().cmd(&["CONFIG", "SET", "hz", hz]);
            assert_eq!(reply, b"+OK\r\n", "CONFIG SET hz: {}", show(&reply));
        }
    }

    /// Runs `sequence` once per seed of `settings`, each time on a fresh
    /// [`DiffRun`] (empty databases): pipelined on even seeds, and in RESP3 on
    /// seeds 2 and 3 modulo 4 when `both_protocols`. Returns how many replies
    /// were compared in all.
    pub fn each_seed<'a>(
        &self,
        label: &'a str,
        settings: &DiffSettings,
        both_protocols: bool,
        mut sequence: impl FnMut(&mut DiffRun<'a>),
    ) -> usize {
        let mut total = 0;
        for seed in settings.seeds.iter().copied() {
            let pipelined = seed % 2 == 0;
            let resp3 = both_protocols && seed % 4 >= 2;
            let servers = (&self.reference, &self.target);
            let mut run = DiffRun::start(label, seed, servers, settings, resp3, pipelined);
            sequence(&mut run);
            total += run.compared;
        }
        total
    }
}

/// How many commands the next batch of a run takes: one when it goes one step
/// at a time, else a pipeline of 1 to `max`.
pub fn batch_size(rng: &mut impl rand::Rng, pipelined: bool, max: usize) -> usize {
    if pipelined {
        rng.random_range(1..=max)
    } else {
        1
    }
}

/// The comparison of a family with no allowlist: replies equal byte for byte.
pub fn identical(_: &Cmd, expected: &[u8], got: &[u8]) -> bool {
    expected == got
}

/// `RESP3` or `RESP2`, for labels.
pub fn protocol_name(resp3: bool) -> &'static str {
    if resp3 {
        "RESP3"
    } else {
        "RESP2"
    }
}

/// Sends each line of `corpus` (a command's words separated by `|`), one at a
/// time, on a new connection to each of `servers` (switched to RESP3 when
/// `resp3`), and fails at the first reply of the target that differs from
/// redis-server's.
pub fn run_corpus(
    corpus: &[impl AsRef<str>],
    servers: (&Server, &Server),
    resp3: bool,
    label: &str,
) {
    let (mut reference, mut target) = (servers.0.raw(), servers.1.raw());
    if resp3 {
        reference.cmd(&["hello", "3"]);
        target.cmd(&["hello", "3"]);
    }
    for line in corpus {
        let line = line.as_ref();
        let words: Vec<&str> = line.split('|').collect();
        let want = reference.cmd(&words);
        let got = target.cmd(&words);
        assert_eq!(
            show(&got),
            show(&want),
            "{label}: {line:?}: Ruvio's reply differs from Redis's"
        );
    }
}

/// Calls of SSCAN, HSCAN or ZSCAN before a test gives up on a cursor: the largest
/// collection the tests make has a few hundred members, so a scan that has not
/// returned cursor 0 by then never will.
pub const SCAN_CALLS_MAX: usize = 1000;

/// A key's SCAN (`SSCAN key cursor ...`, HSCAN, ZSCAN) followed to cursor 0 on
/// `conn` from its first reply `first`: the items of every page, in order; `None`
/// when a reply is not a scan reply (an error).
pub fn scan_items(conn: &mut RawConn, command: &Cmd, first: &[u8]) -> Option<Vec<Value>> {
    let mut items = Vec::new();
    let mut reply = first.to_vec();
    for _ in 0..SCAN_CALLS_MAX {
        let Value::Array(parts) = decode(&reply) else {
            return None;
        };
        let [Value::Bulk(cursor), Value::Array(page)] = parts.as_slice() else {
            return None;
        };
        items.extend_from_slice(page);
        if cursor.as_slice() == b"0" {
            return Some(items);
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

/// Keys of consumer fields Redis 7.2 added to XINFO.
pub const FIELDS_SINCE_7_2: &[&[u8]] = &[b"inactive", b"active-time"];

/// `v` (a decoded XINFO reply) without Redis 7.2's consumer fields (map pairs in
/// RESP3, key-value runs of flat arrays in RESP2): what redis-server 7.0 says
/// for the same state, which Ruvio answers as 7.2.
pub fn without_7_2_fields(v: &Value) -> Value {
    let is_new =
        |k: &Value| matches!(k, Value::Bulk(b) if FIELDS_SINCE_7_2.contains(&b.as_slice()));
    match v {
        Value::Map(pairs) => Value::Map(
            pairs
                .iter()
                .filter(|(k, _)| !is_new(k))
                .map(|(k, val)| (k.clone(), without_7_2_fields(val)))
                .collect(),
        ),
        Value::Array(items) => {
            let mut out = Vec::with_capacity(items.len());
            let mut i = 0;
            while i < items.len() {
                if is_new(&items[i]) && i + 1 < items.len() {
                    i += 2;
                    continue;
                }
                out.push(without_7_2_fields(&items[i]));
                i += 1;
            }
            Value::Array(out)
        }
        other => other.clone(),
    }
}
