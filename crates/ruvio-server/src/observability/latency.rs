//! The latency monitor (Redis's latency.c): for each event (`command`,
//! `fast-command`, `expire-cycle` ...), the worst latency of each of the last
//! [`SERIES_SAMPLES`] seconds in which it reached `latency-monitor-threshold`,
//! and its all-time maximum; LATENCY LATEST, HISTORY, RESET, GRAPH and DOCTOR read
//! it. DOCTOR writes Redis 7.0's report and advice word for word (`latency.c`'s
//! `createLatencyReport`), so what an operator or a tool knows of Redis's reads
//! the same here.
//!
//! One monitor for the whole process behind one lock: a sample is added only when
//! something took at least the threshold (milliseconds, 0 = off), which is rare by
//! the setting's nature, so the shards never meet at the lock on the request path.
//! Events keep the order they first happened in (Redis lists its dict's order).

/// Samples one event keeps (Redis's LATENCY_TS_LEN): one per second at most.
pub const SERIES_SAMPLES: usize = 160;

/// Columns of LATENCY GRAPH (Redis's LATENCY_GRAPH_COLS).
const GRAPH_COLUMNS: usize = 80;

/// Rows of LATENCY GRAPH's sparkline.
const GRAPH_ROWS: usize = 4;

#[derive(Clone, Copy, Debug, Default)]
struct Sample {
    /// Unix seconds; 0: unused.
    unix_s: u64,
    ms: u64,
}

/// One event's time series.
#[derive(Clone, Debug)]
struct Series {
    next: usize,
    max_ms: u64,
    samples: [Sample; SERIES_SAMPLES],
}

impl Series {
    /// The samples in use, oldest first.
    fn used(&self) -> impl Iterator<Item = Sample> + '_ {
        (0..SERIES_SAMPLES)
            .map(move |j| self.samples[(self.next + j) % SERIES_SAMPLES])
            .filter(|s| s.unix_s != 0)
    }

    fn last(&self) -> Sample {
        self.samples[(self.next + SERIES_SAMPLES - 1) % SERIES_SAMPLES]
    }
}

/// Every event's series.
#[derive(Debug, Default)]
pub struct Monitor {
    events: Vec<(Box<str>, Box<Series>)>,
}

/// LATENCY LATEST's row of one event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Latest {
    pub event: Box<str>,
    pub unix_s: u64,
    pub ms: u64,
    pub max_ms: u64,
}

impl Monitor {
    /// Event `event` took `ms` at `unix_s` (Redis's `latencyAddSample`): a second
    /// keeps its worst sample.
    pub fn add(&mut self, event: &str, unix_s: u64, ms: u64) {
        let at = match self.events.iter().position(|(e, _)| &**e == event) {
            Some(at) => at,
            None => {
                let series = Series {
                    next: 0,
                    max_ms: 0,
                    samples: [Sample::default(); SERIES_SAMPLES],
                };
                self.events.push((event.into(), Box::new(series)));
                self.events.len() - 1
            }
        };
        let series = &mut self.events[at].1;
        series.max_ms = series.max_ms.max(ms);
        let prev = (series.next + SERIES_SAMPLES - 1) % SERIES_SAMPLES;
        if series.samples[prev].unix_s == unix_s {
            series.samples[prev].ms = series.samples[prev].ms.max(ms);
            return;
        }
        series.samples[series.next] = Sample { unix_s, ms };
        series.next = (series.next + 1) % SERIES_SAMPLES;
    }

    /// LATENCY LATEST: each event's last sample and maximum.
    pub fn latest(&self) -> Vec<Latest> {
        self.events
            .iter()
            .map(|(event, series)| {
                let last = series.last();
                Latest {
                    event: event.clone(),
                    unix_s: last.unix_s,
                    ms: last.ms,
                    max_ms: series.max_ms,
                }
            })
            .collect()
    }

    fn series(&self, event: &[u8]) -> Option<&Series> {
        self.events
            .iter()
            .find(|(e, _)| e.as_bytes() == event)
            .map(|(_, s)| &**s)
    }

    /// LATENCY HISTORY: `(unix seconds, ms)` oldest first; empty for an unknown
    /// event.
    pub fn history(&self, event: &[u8]) -> Vec<(u64, u64)> {
        self.series(event)
            .map(|s| s.used().map(|x| (x.unix_s, x.ms)).collect())
            .unwrap_or_default()
    }

    /// LATENCY RESET: forget the named events (every event with none); the number
    /// of events forgotten.
    pub fn reset(&mut self, events: &[&[u8]]) -> usize {
        if events.is_empty() {
            return std::mem::take(&mut self.events).len();
        }
        let before = self.events.len();
        self.events.retain(|(e, _)| !events.contains(&e.as_bytes()));
        before - self.events.len()
    }

    /// LATENCY GRAPH's text for `event` at `now_s`, or `None` when it has no
    /// samples (Redis's `latencyCommandGenSparkeline`).
    pub fn graph(&self, event: &[u8], now_s: u64) -> Option<String> {
        let series = self.series(event)?;
        let samples: Vec<(u64, String)> = series
            .used()
            .map(|s| (s.ms, age_label(now_s.saturating_sub(s.unix_s))))
            .collect();
        let low = samples.iter().map(|s| s.0).min().unwrap_or(0);
        let high = samples.iter().map(|s| s.0).max().unwrap_or(0);
        let mut out = format!(
            "{} - high {high} ms, low {low} ms (all time high {} ms)\n",
            String::from_utf8_lossy(event),
            series.max_ms
        );
        out.push_str(&"-".repeat(GRAPH_COLUMNS));
        out.push('\n');
        for (n, chunk) in samples.chunks(GRAPH_COLUMNS).enumerate() {
            if n != 0 {
                out.push('\n');
            }
            sparkline(&mut out, chunk, low, high);
        }
        Some(out)
    }

    /// LATENCY DOCTOR's report at `now_s` (Redis 7.0's `createLatencyReport`):
    /// each event's spikes, then the advice its events call for, in Redis's
    /// words (a tool or a person may compare them with a Redis's report).
    pub fn doctor(&self, input: DoctorInput, now_s: u64) -> String {
        if self.events.is_empty() && input.threshold_ms == 0 {
            return "I'm sorry, Dave, I can't do that. Latency monitoring is disabled in this \
                    Redis instance. You may use \"CONFIG SET latency-monitor-threshold \
                    <milliseconds>.\" in order to enable it. If we weren't in a deep space \
                    mission I'd suggest to take a look at https://redis.io/topics/latency-monitor.\n"
                .to_string();
        }
        let mut out = String::new();
        let mut advised = Advised::default();
        for (n, (event, series)) in self.events.iter().enumerate() {
            if n == 0 {
                out.push_str(
                    "Dave, I have observed latency spikes in this Redis instance. You don't \
                     mind talking about it, do you Dave?\n\n",
                );
            }
            let used: Vec<Sample> = series.used().collect();
            let count = used.len().max(1) as u64;
            let avg = used.iter().map(|s| s.ms).sum::<u64>() / count;
            let mad = used.iter().map(|s| s.ms.abs_diff(avg)).sum::<u64>() / count;
            let oldest = used.iter().map(|s| s.unix_s).min().unwrap_or(now_s);
            let period = now_s.saturating_sub(oldest).max(1);
            out.push_str(&format!(
                "{}. {event}: {} latency spikes (average {avg}ms, mean deviation {mad}ms, \
                 period {:.2} sec). Worst all time event {}ms.\n",
                n + 1,
                used.len(),
                period as f64 / count as f64,
                series.max_ms
            ));
            advised.event(event, &input);
        }
        if input.anon_huge_pages {
            advised.add(&[Advice::DisableThp]);
        }
        if self.events.is_empty() && advised.count == 0 {
            out.push_str(
                "Dave, no latency spike was observed during the lifetime of this Redis \
                 instance, not in the slightest bit. I honestly think you ought to sit down \
                 calmly, take a stress pill, and think things over.\n",
            );
        } else if advised.count == 0 {
            out.push_str(
                "\nWhile there are latency events logged, I'm not able to suggest any easy \
                 fix. Please use the Redis community to get some help, providing this report \
                 in your help request.\n",
            );
        } else {
            advised.write(&mut out, &input);
        }
        out
    }
}

/// What LATENCY DOCTOR's advice depends on besides the events (Redis reads the
/// same settings).
#[derive(Clone, Copy, Debug, Default)]
pub struct DoctorInput {
    /// `latency-monitor-threshold`, ms.
    pub threshold_ms: u64,
    /// `slowlog-log-slower-than`, µs (negative: off).
    pub slow_us: i64,
    /// `hz`.
    pub hz: u32,
    /// The log is fsynced on every write (`--durability always`, Redis's
    /// `appendfsync always`).
    pub fsync_always: bool,
    /// The process has anonymous huge pages (`AnonHugePages` in
    /// `/proc/self/smaps_rollup`, as Redis reads it).
    pub anon_huge_pages: bool,
}

/// LATENCY DOCTOR's advices, in the order Redis writes them (its fork advice is
/// left out: Ruvio does not fork).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Advice {
    SlowlogEnable,
    SlowlogTune,
    SlowlogInspect,
    Scheduler,
    LocalDisk,
    Ssd,
    DataWriteback,
    DiskContention,
    NoAppendfsync,
    RelaxFsyncPolicy,
    WriteLoadInfo,
    Hz,
    LargeObjects,
    MassEviction,
    DisableThp,
}

/// The advices an event history calls for.
#[derive(Debug, Default)]
struct Advised {
    /// Bit `Advice as u32` set: advised.
    set: u32,
    /// Advices counted, each time an event calls for one (Redis's `advices`: a
    /// report with events but none says it has no easy fix).
    count: usize,
}

impl Advised {
    fn add(&mut self, advices: &[Advice]) {
        for &a in advices {
            self.set |= 1 << a as u32;
        }
        self.count += advices.len();
    }

    fn has(&self, advice: Advice) -> bool {
        self.set & (1 << advice as u32) != 0
    }

    /// What event `event` calls for (Redis compares the names ignoring case).
    fn event(&mut self, event: &str, input: &DoctorInput) {
        use Advice::*;
        let is = |name: &str| event.eq_ignore_ascii_case(name);
        if is("command") {
            if input.slow_us < 0 {
                self.add(&[SlowlogEnable]);
            } else if (input.slow_us / 1000) as u64 > input.threshold_ms {
                self.add(&[SlowlogTune]);
            }
            self.add(&[SlowlogInspect, LargeObjects]);
        }
        if is("fast-command") {
            self.add(&[Scheduler]);
        }
        if is("aof-write-pending-fsync") {
            self.add(&[LocalDisk, DiskContention, Ssd, DataWriteback]);
        }
        if is("aof-write-active-child") {
            self.add(&[NoAppendfsync, DataWriteback, Ssd]);
        }
        if is("aof-write-alone") {
            self.add(&[LocalDisk, DataWriteback, Ssd]);
        }
        if is("aof-fsync-always") {
            self.add(&[RelaxFsyncPolicy]);
        }
        if is("aof-fstat") || is("rdb-unlink-temp-file") {
            self.add(&[DiskContention, LocalDisk]);
        }
        if is("aof-rewrite-diff-write") || is("aof-rename") {
            self.add(&[WriteLoadInfo, DataWriteback, Ssd, LocalDisk]);
        }
        if is("expire-cycle") {
            self.add(&[Hz, LargeObjects]);
        }
        if is("eviction-del") {
            self.add(&[LargeObjects]);
        }
        if is("eviction-cycle") {
            self.add(&[MassEviction]);
        }
    }

    /// The advice paragraph. As Redis, two advices are written only where they
    /// apply now (the fsync policy under `always`, `hz` below 100), though they
    /// counted towards having advice.
    fn write(&self, out: &mut String, input: &DoctorInput) {
        out.push_str("\nI have a few advices for you:\n\n");
        let threshold_us = input.threshold_ms.saturating_mul(1000);
        if self.has(Advice::SlowlogEnable) {
            let [before, after] = ADVICE_SLOWLOG_ENABLE;
            out.push_str(&format!("{before}{threshold_us}{after}"));
        }
        if self.has(Advice::SlowlogTune) {
            let [before, after] = ADVICE_SLOWLOG_TUNE;
            out.push_str(&format!("{before}{threshold_us}{after}"));
        }
        let texts = (Advice::SlowlogInspect as u32..).zip(ADVICE_TEXTS);
        for (bit, text) in texts {
            let applies = match bit {
                b if b == Advice::RelaxFsyncPolicy as u32 => input.fsync_always,
                b if b == Advice::Hz as u32 => input.hz < 100,
                _ => true,
            };
            if self.set & (1 << bit) != 0 && applies {
                out.push_str(text);
            }
        }
    }
}

/// The slow log advice when it is off, around the threshold in µs.
const ADVICE_SLOWLOG_ENABLE: [&str; 2] = ["- There are latency issues with potentially slow commands you are using. Try to enable the Slow Log Redis feature using the command 'CONFIG SET slowlog-log-slower-than ", "'. If the Slow log is disabled Redis is not able to log slow commands execution for you.\n"];
/// The slow log advice when it logs less than the monitor, around the threshold in µs.
const ADVICE_SLOWLOG_TUNE: [&str; 2] = ["- Your current Slow Log configuration only logs events that are slower than your configured latency monitor threshold. Please use 'CONFIG SET slowlog-log-slower-than ", "'.\n"];

/// The other advices' texts, in [`Advice`]'s order from `SlowlogInspect`.
const ADVICE_TEXTS: [&str; 13] = [
    // SlowlogInspect
    "- Check your Slow Log to understand what are the commands you are running which are too slow to execute. Please check https://redis.io/commands/slowlog for more information.\n",
    // Scheduler
    "- The system is slow to execute Redis code paths not containing system calls. This usually means the system does not provide Redis CPU time to run for long periods. You should try to:\n  1) Lower the system load.\n  2) Use a computer / VM just for Redis if you are running other software in the same system.\n  3) Check if you have a \"noisy neighbour\" problem.\n  4) Check with 'redis-cli --intrinsic-latency 100' what is the intrinsic latency in your system.\n  5) Check if the problem is allocator-related by recompiling Redis with MALLOC=libc, if you are using Jemalloc. However this may create fragmentation problems.\n",
    // LocalDisk
    "- It is strongly advised to use local disks for persistence, especially if you are using AOF. Remote disks provided by platform-as-a-service providers are known to be slow.\n",
    // Ssd
    "- SSD disks are able to reduce fsync latency, and total time needed for snapshotting and AOF log rewriting (resulting in smaller memory usage). With extremely high write load SSD disks can be a good option. However Redis should perform reasonably with high load using normal disks. Use this advice as a last resort.\n",
    // DataWriteback
    "- Mounting ext3/4 filesystems with data=writeback can provide a performance boost compared to data=ordered, however this mode of operation provides less guarantees, and sometimes it can happen that after a hard crash the AOF file will have a half-written command at the end and will require to be repaired before Redis restarts.\n",
    // DiskContention
    "- Try to lower the disk contention. This is often caused by other disk intensive processes running in the same computer (including other Redis instances).\n",
    // NoAppendfsync
    "- Assuming from the point of view of data safety this is viable in your environment, you could try to enable the 'no-appendfsync-on-rewrite' option, so that fsync will not be performed while there is a child rewriting the AOF file or producing an RDB file (the moment where there is high disk contention).\n",
    // RelaxFsyncPolicy
    "- Your fsync policy is set to 'always'. It is very hard to get good performances with such a setup, if possible try to relax the fsync policy to 'onesec'.\n",
    // WriteLoadInfo
    "- Latency during the AOF atomic rename operation or when the final difference is flushed to the AOF file at the end of the rewrite, sometimes is caused by very high write load, causing the AOF buffer to get very large. If possible try to send less commands to accomplish the same work, or use Lua scripts to group multiple operations into a single EVALSHA call.\n",
    // Hz
    "- In order to make the Redis keys expiring process more incremental, try to set the 'hz' configuration parameter to 100 using 'CONFIG SET hz 100'.\n",
    // LargeObjects
    "- Deleting, expiring or evicting (because of maxmemory policy) large objects is a blocking operation. If you have very large objects that are often deleted, expired, or evicted, try to fragment those objects into multiple smaller objects.\n",
    // MassEviction
    "- Sudden changes to the 'maxmemory' setting via 'CONFIG SET', or allocation of large objects via sets or sorted sets intersections, STORE option of SORT, Redis Cluster large keys migrations (RESTORE command), may create sudden memory pressure forcing the server to block trying to evict keys. \n",
    // DisableThp
    "- I detected a non zero amount of anonymous huge pages used by your process. This creates very serious latency events in different conditions, especially when Redis is persisting on disk. To disable THP support use the command 'echo never > /sys/kernel/mm/transparent_hugepage/enabled', make sure to also add it into /etc/rc.local so that the command will be executed again after a reboot. Note that even if you have already disabled THP, you still need to restart the Redis process to get rid of the huge pages already created.\n",
];

// One text for each advice from `SlowlogInspect` to the last.
const _: () = assert!(
    ADVICE_TEXTS.len() == Advice::DisableThp as usize - Advice::SlowlogInspect as usize + 1
);

/// Whether this process has anonymous huge pages (Redis's
/// `THPGetAnonHugePagesSize() > 0`, which reads `/proc/self/smaps`; the rollup
/// sums the same field in one read). False where the file cannot be read.
pub fn anon_huge_pages() -> bool {
    let Ok(text) = std::fs::read_to_string("/proc/self/smaps_rollup") else {
        return false;
    };
    text.lines()
        .filter_map(|line| line.strip_prefix("AnonHugePages:"))
        .filter_map(|rest| rest.split_whitespace().next()?.parse::<u64>().ok())
        .any(|kb| kb > 0)
}

/// How long ago a sample was, as Redis labels it: seconds, minutes, hours, days.
fn age_label(elapsed_s: u64) -> String {
    match elapsed_s {
        0..60 => format!("{elapsed_s}s"),
        60..3600 => format!("{}m", elapsed_s / 60),
        3600..86400 => format!("{}h", elapsed_s / 3600),
        _ => format!("{}d", elapsed_s / 86400),
    }
}

/// Redis's sparkline (sparkline.c, filled): [`GRAPH_ROWS`] rows of `_o#|` from
/// the samples' values between `low` and `high`, then each sample's label
/// written downwards under it after one empty row.
fn sparkline(out: &mut String, samples: &[(u64, String)], low: u64, high: u64) {
    const FILL: [char; 3] = ['_', 'o', '#'];
    let steps = (FILL.len() * GRAPH_ROWS) as f64;
    let range = match high - low {
        0 => 1.0,
        r => r as f64,
    };
    for row in 0..GRAPH_ROWS {
        let line: String = samples
            .iter()
            .map(|(value, _)| {
                let relative = (value - low) as f64;
                let step = (((relative * steps) as i64 as f64) / range) as i64;
                let step = step.clamp(0, steps as i64 - 1);
                let index = step - ((GRAPH_ROWS - row - 1) * FILL.len()) as i64;
                match index {
                    i if (0..FILL.len() as i64).contains(&i) => FILL[i as usize],
                    i if i >= FILL.len() as i64 => '|',
                    _ => ' ',
                }
            })
            .collect();
        out.push_str(&line);
        out.push('\n');
    }
    // One empty row, then the labels' characters row by row.
    out.push_str(&" ".repeat(samples.len()));
    out.push('\n');
    let longest = samples.iter().map(|(_, l)| l.len()).max().unwrap_or(0);
    for at in 0..longest {
        let line: String = samples
            .iter()
            .map(|(_, label)| label.as_bytes().get(at).map_or(' ', |&b| b as char))
            .collect();
        out.push_str(&line);
        out.push('\n');
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_keeps_its_worst_sample() {
        let mut m = Monitor::default();
        m.add("command", 100, 5);
        m.add("command", 100, 3);
        m.add("command", 100, 9);
        m.add("command", 101, 2);
        assert_eq!(m.history(b"command"), [(100, 9), (101, 2)]);
        let latest = &m.latest()[0];
        assert_eq!((latest.unix_s, latest.ms, latest.max_ms), (101, 2, 9));
        assert!(m.history(b"nothing").is_empty());
    }

    #[test]
    fn the_series_keeps_its_last_samples() {
        let mut m = Monitor::default();
        for s in 1..=(SERIES_SAMPLES as u64 + 5) {
            m.add("e", s, s);
        }
        let history = m.history(b"e");
        assert_eq!(history.len(), SERIES_SAMPLES);
        assert_eq!(history[0], (6, 6));
    }

    #[test]
    fn reset_counts_the_events_it_forgot() {
        let mut m = Monitor::default();
        m.add("a", 1, 1);
        m.add("b", 1, 1);
        assert_eq!(m.reset(&[b"a", b"zzz"]), 1);
        assert_eq!(m.reset(&[]), 1);
        assert!(m.latest().is_empty());
    }

    /// As Redis, advice that does not apply now still counts as advice: the
    /// fsync policy's when the log is not `always`, `hz`'s at 100 or more.
    #[test]
    fn the_doctor_advises_as_redis() {
        let mut m = Monitor::default();
        let input = DoctorInput {
            threshold_ms: 5,
            slow_us: 10_000,
            hz: 100,
            ..DoctorInput::default()
        };
        assert!(m.doctor(input, 10).starts_with("Dave, no latency spike"));
        m.add("aof-fsync-always", 10, 7);
        let report = m.doctor(input, 10);
        assert!(
            report.ends_with("Worst all time event 7ms.\n\nI have a few advices for you:\n\n"),
            "{report}"
        );
        let always = DoctorInput {
            fsync_always: true,
            ..input
        };
        assert!(m
            .doctor(always, 10)
            .ends_with("relax the fsync policy to 'onesec'.\n"));
        m.add("command", 11, 20);
        let report = m.doctor(input, 12);
        assert!(
            report.contains("'CONFIG SET slowlog-log-slower-than 5000'"),
            "{report}"
        );
        assert!(report.contains(
            "2. command: 1 latency spikes (average 20ms, mean deviation 0ms, period 1.00 sec)"
        ));
        m.add("snapshot-slice", 12, 9);
        m.reset(&[b"aof-fsync-always", b"command"]);
        let report = m.doctor(input, 12);
        assert!(
            report.ends_with("providing this report in your help request.\n"),
            "{report}"
        );
        m.reset(&[]);
        let off = DoctorInput {
            threshold_ms: 0,
            ..input
        };
        assert!(m.doctor(off, 12).starts_with("I'm sorry, Dave"));
    }

    #[test]
    fn the_graph_draws_low_to_high_with_age_labels() {
        let mut m = Monitor::default();
        m.add("command", 1000, 10);
        m.add("command", 1001, 40);
        let graph = m.graph(b"command", 1001).unwrap();
        let expected = format!(
            "command - high 40 ms, low 10 ms (all time high 40 ms)\n{}\n \
             #\n |\n |\n_|\n  \n10\nss\n",
            "-".repeat(80)
        );
        assert_eq!(graph, expected);
        assert!(m.graph(b"other", 0).is_none());
    }
}
