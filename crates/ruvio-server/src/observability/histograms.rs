//! Per-command latency histograms (Redis 7's `latency_histogram` of each command):
//! INFO latencystats' percentiles and LATENCY HISTOGRAM's cumulative buckets.
//!
//! Each shard records into its own histograms, plain data that only it touches;
//! they are copied out for the others to read only when someone asks (INFO's or
//! LATENCY HISTOGRAM's gather, see [`super::Observatory::publish_histograms`]),
//! never on the request path, and merged on read. Redis's HdrHistogram settings:
//! 1 ns to 1 s, two significant digits (about 3 000 counters, 24 KiB, made on a
//! command's first call).

use hdrhistogram::Histogram;

/// The lowest value a histogram tells apart, ns (Redis's LATENCY_HISTOGRAM_MIN_VALUE).
const LOWEST_NS: u64 = 1;
/// The highest, ns; longer commands count as this (LATENCY_HISTOGRAM_MAX_VALUE).
const HIGHEST_NS: u64 = 1_000_000_000;
/// Significant digits (LATENCY_HISTOGRAM_PRECISION).
const SIGNIFICANT_DIGITS: u8 = 2;
/// LATENCY HISTOGRAM's first bucket, ns, doubling from there (Redis's
/// `hdr_iter_log_init(&iter, histogram, 1024, 2)`).
const FIRST_BUCKET_NS: u64 = 1024;

/// One histogram per statistics slot (command or subcommand, see
/// `cmd::registry::Command::stat`), made on its first call.
#[derive(Debug, Default, Clone)]
pub struct CommandHistograms {
    per_stat: Vec<Option<Box<Histogram<u64>>>>,
}

fn empty() -> Box<Histogram<u64>> {
    // The bounds are constants that `new_with_bounds` accepts.
    Box::new(
        Histogram::new_with_bounds(LOWEST_NS, HIGHEST_NS, SIGNIFICANT_DIGITS)
            .unwrap_or_else(|e| unreachable!("histogram bounds: {e}")),
    )
}

impl CommandHistograms {
    /// Histograms for `slots` statistics slots, none made yet.
    pub fn new(slots: usize) -> CommandHistograms {
        CommandHistograms {
            per_stat: vec![None; slots],
        }
    }

    /// Count one call of slot `stat` that took `ns`.
    pub fn record(&mut self, stat: usize, ns: u64) {
        if let Some(slot) = self.per_stat.get_mut(stat) {
            slot.get_or_insert_with(empty)
                .saturating_record(ns.clamp(LOWEST_NS, HIGHEST_NS));
        }
    }

    /// Forget every call (CONFIG RESETSTAT).
    pub fn reset(&mut self) {
        self.per_stat.iter_mut().for_each(|h| *h = None);
    }

    /// Slot `stat`'s histogram, if it was called.
    pub fn get(&self, stat: usize) -> Option<&Histogram<u64>> {
        self.per_stat.get(stat).and_then(|h| h.as_deref())
    }

    /// Add `other`'s calls to these.
    pub fn merge(&mut self, other: &CommandHistograms) {
        if self.per_stat.len() < other.per_stat.len() {
            self.per_stat.resize(other.per_stat.len(), None);
        }
        for (mine, theirs) in self.per_stat.iter_mut().zip(&other.per_stat) {
            if let Some(theirs) = theirs {
                // Same bounds on both sides, so adding cannot fail.
                let _ = mine.get_or_insert_with(empty).add(&**theirs);
            }
        }
    }
}

/// The value at percentile `p` (0-100) in microseconds, as Redis's
/// `hdr_value_at_percentile(h, p) / 1000.0`.
pub fn percentile_usec(h: &Histogram<u64>, p: f64) -> f64 {
    h.value_at_quantile(p / 100.0) as f64 / 1000.0
}

/// LATENCY HISTOGRAM's buckets: `(microseconds, calls at or below)` for each
/// power-of-two bucket from 1024 ns where the count grew (Redis's
/// `fillCommandCDF`).
pub fn cumulative_buckets(h: &Histogram<u64>) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    let mut cumulative = 0;
    let mut previous = 0;
    for step in h.iter_log(FIRST_BUCKET_NS, 2.0) {
        cumulative += step.count_since_last_iteration();
        if cumulative > previous {
            out.push((step.value_iterated_to() / 1000, cumulative));
        }
        previous = cumulative;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_cumulative_powers_of_two() {
        let mut h = CommandHistograms::new(2);
        for ns in [500, 900, 1500, 3000, 3000, 70_000] {
            h.record(1, ns);
        }
        assert!(h.get(0).is_none());
        let buckets = cumulative_buckets(h.get(1).unwrap());
        assert_eq!(buckets.first(), Some(&(1, 2)));
        assert_eq!(buckets.last().map(|b| b.1), Some(6));
        assert!(buckets
            .windows(2)
            .all(|w| w[0].0 < w[1].0 && w[0].1 < w[1].1));
        let mut merged = CommandHistograms::default();
        merged.merge(&h);
        merged.merge(&h);
        assert_eq!(merged.get(1).unwrap().len(), 12);
        let p50 = percentile_usec(merged.get(1).unwrap(), 50.0);
        assert!((1.4..3.1).contains(&p50), "{p50}");
    }
}
