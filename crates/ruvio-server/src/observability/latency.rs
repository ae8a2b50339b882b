//! The latency monitor (Redis's latency.c): for each event (`command`,
//! `fast-command`, `expire-cycle` ...), the worst latency of each of the last
//! [`SERIES_SAMPLES`] seconds in which it reached `latency-monitor-threshold`,
//! and its all-time maximum; LATENCY LATEST, HISTORY, RESET, GRAPH and DOCTOR read
//! it.
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

    /// LATENCY DOCTOR's report at `now_s` (`enabled`: the threshold is set).
    pub fn doctor(&self, enabled: bool, now_s: u64) -> String {
        if !enabled {
            // Redis's words exactly: a tool may look for them.
            return "I'm sorry, Dave, I can't do that. Latency monitoring is disabled in this \
                    Redis instance. You may use \"CONFIG SET latency-monitor-threshold \
                    <milliseconds>.\" in order to enable it. If we weren't in a deep space \
                    mission I'd suggest to take a look at https://redis.io/topics/latency-monitor.\n"
                .to_string();
        }
        if self.events.is_empty() {
            return "Dave, no latency spike was observed during the lifetime of this Redis \
                    instance, not in the slightest bit. I honestly think you ought to sleep \
                    tonight.\n"
                .to_string();
        }
        let mut out = "Dave, I have observed latency spikes in this Ruvio instance. You don't \
                       mind talking about it, do you Dave?\n\n"
            .to_string();
        for (n, (event, series)) in self.events.iter().enumerate() {
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
        }
        out.push_str(
            "\nWhile there are latency events logged, I'm not able to suggest any easy fix. \
             docs/observability.md says what each event measures in Ruvio.\n",
        );
        out
    }
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
