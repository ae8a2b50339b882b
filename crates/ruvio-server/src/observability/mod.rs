//! Observability: what an operator reads about the running server.
//!
//! - Command timing and sizes, for SLOWLOG, COMMANDLOG, LATENCY and INFO
//!   latencystats (this module, [`commandlog`], [`histograms`], [`latency`]);
//! - MONITOR's feed ([`monitor`]: the line format and the per-thread buffer of
//!   lines; the shard hands them to connections in `shard::monitor`);
//! - the Prometheus endpoint and the live page: [`metrics`] (the numbers a scrape
//!   reports and their text exposition), [`http`] (the endpoint's HTTP/1.1,
//!   without sockets) and [`page`] (the HTML of `GET /`). The shard layer serves
//!   them on shard 0's own ring and fills [`metrics::Snapshot`] from the gauges
//!   every shard publishes (`shard/metrics.rs`), so this floor names no shard.
//!
//! Command timing: how long each command took and what it carried.
//!
//! Two parts, as the rest of the server splits state:
//!
//! - [`Timing`], one per shard (in `ShardCore`): the settings as this shard
//!   applies them, the per-command histograms it records into (plain data, no
//!   lock), and [`Timing::finish`], which the shard calls once a command ran.
//! - [`Observatory`], one per process (in `Shared`): the shards' command logs
//!   (one lock per shard, taken only to log a slow or large command and to read),
//!   the ids that make the logs one server-wide log, the latency monitor (one
//!   lock, taken only for a sample above `latency-monitor-threshold`), the
//!   histograms the shards published when asked, and the client directory
//!   (address and name by client id: a forwarded command is logged by the shard
//!   that ran it, which does not hold the client's connection).
//!
//! Where the clock is read: around a command's execution on the shard that runs
//! it, counted once (each place calls `shard::exec::observe`):
//! `shard::dispatch::run_command` for what runs where the client is (its own keys,
//! server commands, a split or gathered command as a whole, EXEC's queue in turn),
//! `shard::messages::run_requests` for a command forwarded whole to its keys'
//! owner, `mesh::lending` for a command run on borrowed keys (the origin then
//! records nothing: [`Timing::hand_off`]), `mesh::owner_tx` and
//! `shard::exec_run::run_borrowed` for EXEC's commands run elsewhere.
//! A command whose answer other shards complete (a gathered INFO, LATENCY
//! HISTOGRAM, CLIENT LIST or CLIENT UNBLOCK of a command parked elsewhere; a
//! split MGET, MSET, DEL; a command of every shard) is recorded once that answer
//! is complete ([`Timing::await_reply`], [`Awaited`]): its time is its run on the
//! client's shard plus each part's run as the shard that ran it measured it (the
//! mesh's wait is not in it), its reply size the whole merged reply.
//! A blocking command that parks is recorded in two parts, as Redis 7.0's
//! `call()` and `updateStatsOnUnblock` do ([`Timing::park`],
//! [`Timing::finish_unblocked`]): an operator's slow log then shows the command
//! when it answered, with the time it ran, not the time it waited.
//! docs/observability.md has the table and the gaps.
//!
//! The clock: [`quanta::Clock::raw`], the TSC as quanta calibrated it. Measured on
//! this host (a 2-vCPU VM, clocksource tsc; 20 M reads in a loop, 3 runs of
//! `examples/clock_cost.rs`, the noisiest run left out): 13-15 ns a read, 27-40 ns
//! for the two reads of a command with the conversion to nanoseconds, against
//! 29-33 ns a read and 70-95 ns a pair for `std::time::Instant` (clock_gettime
//! through the vDSO). At about 1.5 µs of server CPU per GET,
//! Instant's pair alone would be most of the 2 % that tracking may cost.
//! With tracking, SLOWLOG, the latency monitor and the size logs all off the
//! request path pays one predictable branch ([`Timing::active`]) beside INFO
//! commandstats' one-in-64 timing sample, which it had before.

pub mod commandlog;
pub mod histograms;
pub mod http;
pub mod latency;
pub mod metrics;
pub mod monitor;
pub mod page;

use ahash::AHashMap;
use commandlog::{Client, Entry, LogKind, ShardLogs, LOG_KINDS};
use histograms::CommandHistograms;
use latency::Monitor;
use ruvio_resp::{Args, OwnedArgs};
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Mutex, MutexGuard};

/// Lock a mutex whose holder cannot leave it half-changed (every critical section
/// here is a push, a clone or a clear): a poisoned one is used as it is.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A connected client's address (`addr:port`) and name.
type Known = (Box<str>, Box<[u8]>);

/// What every shard reads and writes of observability (see the module docs).
#[derive(Debug)]
pub struct Observatory {
    logs: Vec<Mutex<ShardLogs>>,
    next_id: [AtomicU64; LOG_KINDS],
    monitor: Mutex<Monitor>,
    published: Vec<Mutex<CommandHistograms>>,
    /// Address and name of every connected client, by id.
    clients: Mutex<AHashMap<u64, Known>>,
}

impl Observatory {
    pub fn new(shards: usize) -> Observatory {
        Observatory {
            logs: (0..shards).map(|_| Mutex::default()).collect(),
            next_id: Default::default(),
            monitor: Mutex::default(),
            published: (0..shards).map(|_| Mutex::default()).collect(),
            clients: Mutex::default(),
        }
    }

    /// A client connected from `peer` (`addr:port`).
    pub fn client_connected(&self, id: u64, peer: &str) {
        lock(&self.clients).insert(id, (peer.into(), Box::default()));
    }

    /// Client `id` took the name `name` (CLIENT SETNAME, HELLO SETNAME).
    pub fn client_named(&self, id: u64, name: &[u8]) {
        if let Some(client) = lock(&self.clients).get_mut(&id) {
            client.1 = name.into();
        }
    }

    /// Client `id` disconnected.
    pub fn client_gone(&self, id: u64) {
        lock(&self.clients).remove(&id);
    }

    /// Add an entry for `args` to shard `shard`'s log `kind`.
    fn log(&self, shard: usize, kind: LogKind, len_max: usize, at: Logged<'_>) {
        let id = self.next_id[kind as usize].fetch_add(1, Relaxed);
        let (peer, name) = match at.client {
            Who::Here(c) => (c.peer.into(), c.name.into()),
            Who::Id(id) => lock(&self.clients).get(&id).cloned().unwrap_or_default(),
        };
        let entry = Entry {
            id,
            unix_s: at.unix_s,
            amount: at.amount,
            argv: commandlog::kept_argv(at.args),
            peer,
            name,
        };
        if let Some(log) = self.logs.get(shard) {
            lock(log).push(kind, entry, len_max);
        }
    }

    /// The logs of shards `shards` (those that exist).
    fn shard_logs(&self, shards: Range<usize>) -> &[Mutex<ShardLogs>] {
        self.logs.get(shards).unwrap_or_default()
    }

    /// The newest `count` entries of log `kind` of shards `shards` together.
    pub fn newest(&self, shards: Range<usize>, kind: LogKind, count: usize) -> Vec<Entry> {
        let guards: Vec<_> = self.shard_logs(shards).iter().map(lock).collect();
        commandlog::newest(guards.iter().map(|g| &**g), kind, count)
    }

    /// Entries of log `kind` of shards `shards` together.
    pub fn len(&self, shards: Range<usize>, kind: LogKind) -> usize {
        self.shard_logs(shards)
            .iter()
            .map(|l| lock(l).len(kind))
            .sum()
    }

    /// Empty log `kind` of shards `shards`.
    pub fn reset(&self, shards: Range<usize>, kind: LogKind) {
        self.shard_logs(shards)
            .iter()
            .for_each(|l| lock(l).reset(kind));
    }

    /// The latency monitor.
    pub fn monitor(&self) -> MutexGuard<'_, Monitor> {
        lock(&self.monitor)
    }

    /// Shard `shard`'s histograms as of now, for the others to read.
    pub fn publish_histograms(&self, shard: usize, histograms: &CommandHistograms) {
        if let Some(published) = self.published.get(shard) {
            lock(published).clone_from(histograms);
        }
    }

    /// The published histograms of shards `shards`, merged.
    pub fn merged_histograms(&self, shards: Range<usize>) -> CommandHistograms {
        let mut merged = CommandHistograms::default();
        for published in self.published.get(shards).unwrap_or_default() {
            merged.merge(&lock(published));
        }
        merged
    }

    /// Forget shard `shard`'s published histograms (CONFIG RESETSTAT).
    pub fn reset_histograms(&self, shard: usize) {
        if let Some(published) = self.published.get(shard) {
            lock(published).reset();
        }
    }
}

/// Who ran a command: the connection at hand, or a client of another shard.
#[derive(Clone, Copy, Debug)]
pub enum Who<'a> {
    Here(Client<'a>),
    Id(u64),
}

/// An entry to log.
struct Logged<'a> {
    amount: u64,
    unix_s: u64,
    args: Args<'a>,
    client: Who<'a>,
}

/// The settings observability acts on, with Redis's (and Valkey's) defaults.
#[derive(Clone, Debug)]
pub struct Settings {
    /// `slowlog-log-slower-than`, µs (negative: off).
    pub slow_us: i64,
    /// `slowlog-max-len`.
    pub slow_len_max: usize,
    /// `commandlog-request-larger-than`, bytes (negative: off).
    pub request_bytes: i64,
    /// `commandlog-large-request-max-len`.
    pub request_len_max: usize,
    /// `commandlog-reply-larger-than`, bytes (negative: off).
    pub reply_bytes: i64,
    /// `commandlog-large-reply-max-len`.
    pub reply_len_max: usize,
    /// `latency-monitor-threshold`, ms (0: off).
    pub monitor_ms: u64,
    /// `latency-tracking`: per-command histograms.
    pub tracking: bool,
    /// `latency-tracking-info-percentiles`.
    pub percentiles: Vec<f64>,
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            slow_us: 10_000,
            slow_len_max: 128,
            request_bytes: 1 << 20,
            request_len_max: 128,
            reply_bytes: 1 << 20,
            reply_len_max: 128,
            monitor_ms: 0,
            tracking: true,
            percentiles: vec![50.0, 99.0, 99.9],
        }
    }
}

impl Settings {
    /// The length a read of log `kind` shows at most (the server-wide log is the
    /// newest this many of the shards' entries).
    pub fn len_max(&self, kind: LogKind) -> usize {
        match kind {
            LogKind::Slow => self.slow_len_max,
            LogKind::LargeRequest => self.request_len_max,
            LogKind::LargeReply => self.reply_len_max,
        }
    }
}

/// A point on the command clock.
#[derive(Clone, Copy, Debug)]
pub struct Started(u64);

/// One shard's part (see the module docs).
#[derive(Debug)]
pub struct Timing {
    settings: Settings,
    clock: quanta::Clock,
    /// Nanoseconds per clock tick in 32.32 fixed point, from quanta's own
    /// calibration: a command's ticks become ns by one multiply and a shift,
    /// where `Clock::delta_as_nanos` matches on the clock kind and shifts a
    /// 128-bit product by a variable amount (about 10 instructions more per
    /// command, measured with scripts/instr_ab.py).
    ns_per_tick_q32: u64,
    /// Something needs the command clock.
    timed: bool,
    /// Something needs a command's sizes.
    sized: bool,
    /// The thresholds in the clock's unit, so a command's end compares without
    /// dividing: a slow log entry from this many ns (`u64::MAX`: off) ...
    slow_from_ns: u64,
    /// ... and a latency monitor sample from this many (`u64::MAX`: off).
    monitor_from_ns: u64,
    histograms: CommandHistograms,
    /// The command running was forwarded whole: its owner records it.
    handed_off: bool,
    /// The command running parked instead of answering: it is recorded when
    /// served ([`Timing::finish_unblocked`]).
    parked: Option<Parked>,
    /// The command running answers in this held reply slot once other shards
    /// answered (a gathered or split command): it is recorded then.
    awaiting: Option<u64>,
}

/// A command that parked instead of answering (see [`Timing::park`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Parked {
    /// A blocking command parked as this ticket of the shard's blocked clients:
    /// its first run's time is kept with it until it is served.
    Blocked(u64),
    /// WAIT: answered by the replicas' acknowledgements or its timeout, which
    /// Redis 7.0 never records.
    Waiting,
}

/// A command that ran, as [`Timing::finish`] needs it.
#[derive(Clone, Copy, Debug)]
pub struct Ran<'a> {
    pub shard: usize,
    /// Its statistics slot (`cmd::registry::Command::stat`).
    pub stat: usize,
    /// Flagged FAST: the latency monitor's `fast-command` event, else `command`.
    pub fast: bool,
    /// Not flagged SKIP_SLOWLOG (EXEC): it may enter the command logs.
    pub loggable: bool,
    pub args: Args<'a>,
    pub reply_bytes: usize,
    pub client: Who<'a>,
    pub now_ms: u64,
}

/// A command recorded once its answer is complete ([`Timing::await_reply`]):
/// kept with its held reply slot until the last part or answer arrives, then
/// recorded as [`Timing::finish`] records any command.
#[derive(Debug, Default)]
pub struct Awaited {
    /// Its statistics slot.
    pub stat: usize,
    pub fast: bool,
    pub loggable: bool,
    /// Its arguments, for the logs.
    pub args: OwnedArgs,
    /// Its execution so far in ns, when timed: its run on the client's shard,
    /// then each part's or answer's run as the shard that ran it measured it.
    pub ns: Option<u64>,
    /// INFO commandstats' µs when it is not timed (one call in 64 is sampled).
    pub sampled_usec: u64,
    /// Its whole reply's bytes, once complete.
    pub reply_bytes: usize,
}

impl Awaited {
    /// A part of it (or its answer's rendering) ran for `ns`.
    pub fn add_ns(&mut self, ns: u64) {
        if let Some(total) = self.ns.as_mut() {
            *total += ns;
        }
    }
}

impl Timing {
    /// A shard's part with `slots` statistics slots and the default settings.
    pub fn new(slots: usize) -> Timing {
        let clock = quanta::Clock::new();
        let mut timing = Timing {
            settings: Settings::default(),
            ns_per_tick_q32: ns_per_tick_q32(&clock),
            clock,
            timed: false,
            sized: false,
            slow_from_ns: u64::MAX,
            monitor_from_ns: u64::MAX,
            histograms: CommandHistograms::new(slots),
            handed_off: false,
            parked: None,
            awaiting: None,
        };
        timing.change(|_| {});
        timing
    }

    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// Change the settings (CONFIG SET, the config file).
    pub fn change(&mut self, f: impl FnOnce(&mut Settings)) {
        f(&mut self.settings);
        let s = &self.settings;
        self.timed = s.tracking || s.slow_us >= 0 || s.monitor_ms > 0;
        self.sized = s.request_bytes >= 0 || s.reply_bytes >= 0;
        // `us >= slow_us` with us = ns / 1000 is `ns >= slow_us * 1000`; the
        // same for the monitor's milliseconds.
        self.slow_from_ns = u64::try_from(s.slow_us).map_or(u64::MAX, |us| us.saturating_mul(1000));
        self.monitor_from_ns = match s.monitor_ms {
            0 => u64::MAX,
            ms => ms.saturating_mul(1_000_000),
        };
    }

    /// Whether a command's end has anything to record: the one branch the request
    /// path pays when everything is off.
    #[inline]
    pub fn active(&self) -> bool {
        self.timed || self.sized
    }

    /// The clock now, when something needs it.
    #[inline]
    pub fn start(&self) -> Option<Started> {
        self.timed.then(|| Started(self.clock.raw()))
    }

    /// The clock now, when the latency monitor is on (for events other than
    /// commands: [`Timing::sample`]).
    #[inline]
    pub fn monitor_start(&self) -> Option<Started> {
        (self.settings.monitor_ms > 0).then(|| Started(self.clock.raw()))
    }

    /// Nanoseconds since `started`.
    #[inline]
    pub fn elapsed_ns(&self, started: Started) -> u64 {
        let ticks = self.clock.raw().saturating_sub(started.0);
        ((u128::from(ticks) * u128::from(self.ns_per_tick_q32)) >> 32) as u64
    }

    /// The command running went whole to another shard, which records it.
    pub fn hand_off(&mut self) {
        self.handed_off = self.active();
    }

    /// Whether the command that just ran was handed off (and forget it).
    pub fn take_handed_off(&mut self) -> bool {
        std::mem::take(&mut self.handed_off)
    }

    /// The command running parked (a blocking command with nothing to serve yet,
    /// WAIT): Redis 7.0's `call()` leaves its slow log entry and histogram to the
    /// moment it is served.
    pub fn park(&mut self, parked: Parked) {
        if self.active() {
            self.parked = Some(parked);
        }
    }

    /// Whether the command that just ran parked, and how (and forget it).
    pub fn take_parked(&mut self) -> Option<Parked> {
        self.parked.take()
    }

    /// The command running answers in held reply slot `seq` once other shards
    /// answered (a gathered or split command): Redis records a command after
    /// its reply, so it is recorded then ([`Awaited`]), not when it ran here.
    pub fn await_reply(&mut self, seq: u64) {
        self.awaiting = Some(seq);
    }

    /// The held reply slot the command that just ran answers in, when it
    /// awaits other shards (and forget it).
    #[inline]
    pub fn take_awaiting(&mut self) -> Option<u64> {
        self.awaiting.take()
    }

    /// The latency monitor's sample of a command that ran for `ns`: `command`, or
    /// `fast-command` for one flagged FAST (Redis samples every call, a blocking
    /// command's first run too).
    #[inline]
    pub fn sample_command(&self, observatory: &Observatory, fast: bool, ns: u64, now_ms: u64) {
        if ns >= self.monitor_from_ns {
            let ms = ns / 1_000_000;
            let event = if fast { "fast-command" } else { "command" };
            observatory.monitor().add(event, now_ms / 1000, ms);
        }
    }

    /// Record command `ran`, which took `ns` (when timed): its histogram, the
    /// latency monitor's sample, its command log entries. Inlined into its two
    /// callers (`shard::observe`): its call and the size logs' cost a command
    /// some 25 instructions more than their work.
    #[inline(always)]
    pub fn finish(&mut self, observatory: &Observatory, ns: Option<u64>, ran: Ran<'_>) {
        if let Some(ns) = ns {
            self.sample_command(observatory, ran.fast, ns, ran.now_ms);
            self.record(observatory, ns, &ran);
        }
        self.log_sizes(observatory, &ran);
    }

    /// Record blocked command `ran`, served now (Redis 7.0's
    /// `updateStatsOnUnblock`): its first run took `first_ns` and the run that
    /// served it `ns`. Its time is their sum (the execution, not the wait) in its
    /// histogram and the slow log; the serving run alone is the latency monitor's
    /// `command-unblocking` sample; its sizes enter the size logs.
    pub fn finish_unblocked(
        &mut self,
        observatory: &Observatory,
        first_ns: u64,
        ns: Option<u64>,
        ran: Ran<'_>,
    ) {
        if let Some(ns) = ns {
            let ms = ns / 1_000_000;
            if self.settings.monitor_ms > 0 && ms >= self.settings.monitor_ms {
                observatory
                    .monitor()
                    .add("command-unblocking", ran.now_ms / 1000, ms);
            }
            self.record(observatory, first_ns + ns, &ran);
        }
        self.log_sizes(observatory, &ran);
    }

    /// A command's histogram and slow log entry for its time `ns` (inlined
    /// into each caller: the call's own cost was a fifth of this).
    #[inline(always)]
    fn record(&mut self, observatory: &Observatory, ns: u64, ran: &Ran<'_>) {
        let s = &self.settings;
        if s.tracking {
            self.histograms.record(ran.stat, ns);
        }
        if ran.loggable && ns >= self.slow_from_ns {
            let logged = Logged {
                amount: ns / 1000,
                unix_s: ran.now_ms / 1000,
                args: ran.args,
                client: ran.client,
            };
            observatory.log(ran.shard, LogKind::Slow, s.slow_len_max, logged);
        }
    }

    /// A command's entries in the large-request and large-reply logs.
    #[inline(always)]
    fn log_sizes(&self, observatory: &Observatory, ran: &Ran<'_>) {
        if !ran.loggable || !self.sized {
            return;
        }
        let s = &self.settings;
        let logged = |amount| Logged {
            amount,
            unix_s: ran.now_ms / 1000,
            args: ran.args,
            client: ran.client,
        };
        if s.request_bytes >= 0 && may_reach(ran.args, s.request_bytes as u64) {
            let bytes = request_bytes(ran.args);
            if bytes as i64 >= s.request_bytes {
                let len_max = s.request_len_max;
                observatory.log(ran.shard, LogKind::LargeRequest, len_max, logged(bytes));
            }
        }
        if s.reply_bytes >= 0 && ran.reply_bytes as i64 >= s.reply_bytes {
            let (len_max, bytes) = (s.reply_len_max, ran.reply_bytes as u64);
            observatory.log(ran.shard, LogKind::LargeReply, len_max, logged(bytes));
        }
    }

    /// Sample `event` (an event other than a command's: `expire-cycle` ...) that
    /// began at `started` ([`Timing::monitor_start`]), if it reached the latency
    /// monitor's threshold.
    pub fn sample(
        &self,
        observatory: &Observatory,
        event: &str,
        started: Option<Started>,
        now_ms: u64,
    ) {
        let Some(started) = started else {
            return;
        };
        self.sample_ns(observatory, event, self.elapsed_ns(started), now_ms);
    }

    /// Sample `event`, which took `ns` (measured by its owner: a log write's
    /// completion less its submission), if it reached the latency monitor's
    /// threshold.
    pub fn sample_ns(&self, observatory: &Observatory, event: &str, ns: u64, now_ms: u64) {
        let ms = ns / 1_000_000;
        if self.settings.monitor_ms > 0 && ms >= self.settings.monitor_ms {
            observatory.monitor().add(event, now_ms / 1000, ms);
        }
    }

    /// This shard's histograms.
    pub fn histograms(&self) -> &CommandHistograms {
        &self.histograms
    }

    /// Forget the histograms' calls (CONFIG RESETSTAT).
    pub fn reset_histograms(&mut self) {
        self.histograms.reset();
    }
}

/// The bytes of `args` as a RESP request (`*N`, then `$len` and the bytes of
/// each): what Valkey counts as a command's request size.
/// `clock`'s nanoseconds per tick in 32.32 fixed point ([`Timing::elapsed_ns`]):
/// quanta's conversion of 2^32 ticks. Exact to below a nanosecond per second.
fn ns_per_tick_q32(clock: &quanta::Clock) -> u64 {
    clock.delta_as_nanos(0, 1 << 32)
}

/// The bytes of the RESP request that carried `args` (the large-request log's
/// measure, on by default, so counted for every command): the decimal digits of
/// a length by comparisons, which for the short lengths of most arguments is
/// a third of what `ilog10` costs (scripts/instr_ab.py).
/// Whether `args` encoded may take `threshold` bytes: their contents plus the
/// most framing any argument can take (`$`, 20 digits, two CRLFs), a bound found
/// without counting digits. Nearly every command is far below the large-request
/// threshold, so [`request_bytes`] runs only for the few that may reach it.
fn may_reach(args: Args<'_>, threshold: u64) -> bool {
    const FRAMING_MAX: u64 = 1 + 20 + 2 + 2;
    let bound = args.byte_len() as u64 + (args.len() as u64 + 1) * FRAMING_MAX;
    bound >= threshold
}

fn request_bytes(args: Args<'_>) -> u64 {
    let digits = |mut n: usize| {
        let mut digits = 1;
        while n >= 10 {
            n /= 10;
            digits += 1;
        }
        digits
    };
    let head = 3 + digits(args.len());
    head + args
        .iter()
        .map(|a| 1 + digits(a.len()) + 2 + a.len() as u64 + 2)
        .sum::<u64>()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_bytes_count_the_resp_framing() {
        let owned = ruvio_resp::OwnedArgs::from_iter([b"SET".as_slice(), b"k", &[b'v'; 10]]);
        // *3\r\n $3\r\nSET\r\n $1\r\nk\r\n $10\r\nvvvvvvvvvv\r\n
        assert_eq!(request_bytes(owned.args()), 4 + 9 + 7 + 17);
    }

    #[test]
    fn request_bytes_equal_the_encoded_request_for_any_length() {
        for len in [0usize, 1, 9, 10, 99, 100, 999, 1000, 12_345, 1 << 20] {
            let args = ruvio_resp::OwnedArgs::from_iter([b"SET".as_slice(), &vec![b'x'; len]]);
            let encoded = format!("*2\r\n$3\r\nSET\r\n${len}\r\n").len() + len + 2;
            assert_eq!(request_bytes(args.args()), encoded as u64, "length {len}");
        }
    }

    #[test]
    fn the_bound_never_skips_a_request_that_reaches_the_threshold() {
        for len in [0usize, 1, 9, 10, 99, 100, 999, 1000, 12_345, 1 << 20] {
            let args =
                ruvio_resp::OwnedArgs::from_iter([b"SET".as_slice(), b"k", &vec![b'x'; len]]);
            let exact = request_bytes(args.args());
            assert!(may_reach(args.args(), exact), "length {len}");
            assert!(!may_reach(args.args(), exact + 100), "length {len}");
        }
    }

    #[test]
    fn ticks_become_the_nanoseconds_quanta_converts_them_to() {
        let t = Timing::new(1);
        for ticks in [0u64, 1, 1_000, 3_000_000, 1 << 32, 5_000_000_000_000] {
            let quanta_ns = t.clock.delta_as_nanos(0, ticks);
            let ours = ((u128::from(ticks) * u128::from(t.ns_per_tick_q32)) >> 32) as u64;
            // Within a nanosecond per second of quanta's own conversion.
            assert!(
                ours.abs_diff(quanta_ns) <= 1 + quanta_ns / 1_000_000_000,
                "{ticks}: {ours} vs {quanta_ns}"
            );
        }
    }

    #[test]
    fn everything_off_is_inactive() {
        let mut t = Timing::new(1);
        assert!(t.active() && t.start().is_some());
        t.change(|s| {
            s.tracking = false;
            s.slow_us = -1;
            s.request_bytes = -1;
            s.reply_bytes = -1;
        });
        assert!(!t.active() && t.start().is_none());
    }
}
