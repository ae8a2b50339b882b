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

/// Counters per histogram: HdrHistogram's `distinct_values()` for the bounds above
/// (24 buckets of 128 sub-buckets; a test checks it against the crate).
const COUNTS_LEN: usize = 3072;
/// HdrHistogram's layout for these bounds (`unit_magnitude` 0): half a bucket's
/// sub-buckets, as a power of two, and the mask that maps small values to bucket 0.
const SUB_BUCKET_HALF_COUNT_MAGNITUDE: u32 = 7;
const SUB_BUCKET_HALF_COUNT: u64 = 1 << SUB_BUCKET_HALF_COUNT_MAGNITUDE;
const SUB_BUCKET_MASK: u64 = (SUB_BUCKET_HALF_COUNT << 1) - 1;
/// 64 - `unit_magnitude` - `sub_bucket_count_magnitude` (8).
const LEADING_ZERO_COUNT_BASE: u32 = 56;

/// A command's calls by HdrHistogram counter: what `Histogram::saturating_record`
/// would count, indexed as it indexes, without its checks and bookkeeping per
/// call (a third of latency tracking's cost per command, measured with
/// scripts/instr_ab.py). [`CommandHistograms::get`] turns it into the crate's
/// histogram, equal counter for counter, for percentiles and buckets.
type Counts = [u64; COUNTS_LEN];

/// The counter `ns` (clamped to the bounds) goes to, as HdrHistogram's `index_for`.
#[inline]
fn index_of(ns: u64) -> usize {
    let value = ns.clamp(LOWEST_NS, HIGHEST_NS);
    let bucket = LEADING_ZERO_COUNT_BASE - (value | SUB_BUCKET_MASK).leading_zeros();
    let sub_bucket = value >> bucket;
    (((bucket as u64 + 1) << SUB_BUCKET_HALF_COUNT_MAGNITUDE) + sub_bucket - SUB_BUCKET_HALF_COUNT)
        as usize
}

/// The lowest value of counter `index` (HdrHistogram's `value_for`).
fn value_of(index: usize) -> u64 {
    let index = index as u64;
    let bucket = (index >> SUB_BUCKET_HALF_COUNT_MAGNITUDE) as i64 - 1;
    let sub_bucket = (index & (SUB_BUCKET_HALF_COUNT - 1)) + SUB_BUCKET_HALF_COUNT;
    match bucket {
        -1 => sub_bucket - SUB_BUCKET_HALF_COUNT,
        b => sub_bucket << b,
    }
}

/// One histogram per statistics slot (command or subcommand, see
/// `cmd::registry::Command::stat`), made on its first call.
#[derive(Debug, Default, Clone)]
pub struct CommandHistograms {
    per_stat: Vec<Option<Box<Counts>>>,
}

fn empty() -> Histogram<u64> {
    // The bounds are constants that `new_with_bounds` accepts.
    Histogram::new_with_bounds(LOWEST_NS, HIGHEST_NS, SIGNIFICANT_DIGITS)
        .unwrap_or_else(|e| unreachable!("histogram bounds: {e}"))
}

impl CommandHistograms {
    /// Histograms for `slots` statistics slots, none made yet.
    pub fn new(slots: usize) -> CommandHistograms {
        CommandHistograms {
            per_stat: vec![None; slots],
        }
    }

    /// Count one call of slot `stat` that took `ns`.
    #[inline(always)]
    pub fn record(&mut self, stat: usize, ns: u64) {
        if let Some(slot) = self.per_stat.get_mut(stat) {
            let counts = slot.get_or_insert_with(|| Box::new([0; COUNTS_LEN]));
            counts[index_of(ns)] += 1;
        }
    }

    /// Forget every call (CONFIG RESETSTAT).
    pub fn reset(&mut self) {
        self.per_stat.iter_mut().for_each(|h| *h = None);
    }

    /// Slot `stat` was called.
    pub fn called(&self, stat: usize) -> bool {
        self.per_stat.get(stat).is_some_and(|h| h.is_some())
    }

    /// Slot `stat`'s histogram, if it was called.
    pub fn get(&self, stat: usize) -> Option<Histogram<u64>> {
        let counts = self.per_stat.get(stat)?.as_deref()?;
        let mut h = empty();
        for (index, &count) in counts.iter().enumerate().filter(|(_, &c)| c > 0) {
            h.saturating_record_n(value_of(index), count);
        }
        Some(h)
    }

    /// Add `other`'s calls to these.
    pub fn merge(&mut self, other: &CommandHistograms) {
        if self.per_stat.len() < other.per_stat.len() {
            self.per_stat.resize(other.per_stat.len(), None);
        }
        for (mine, theirs) in self.per_stat.iter_mut().zip(&other.per_stat) {
            if let Some(theirs) = theirs {
                let mine = mine.get_or_insert_with(|| Box::new([0; COUNTS_LEN]));
                for (m, t) in mine.iter_mut().zip(theirs.iter()) {
                    *m += t;
                }
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
    use proptest::prelude::*;

    #[test]
    fn the_counters_are_the_crates() {
        assert_eq!(empty().distinct_values(), COUNTS_LEN);
        assert_eq!(index_of(u64::MAX), index_of(HIGHEST_NS));
        assert!(index_of(HIGHEST_NS) < COUNTS_LEN);
    }

    proptest! {
        /// Calls counted here and turned into the crate's histogram give what
        /// the crate's own recording gives: every counter, every percentile.
        #[test]
        fn counting_matches_the_crate(values in proptest::collection::vec(0u64..2_000_000_000, 1..64)) {
            let mut ours = CommandHistograms::new(1);
            let mut theirs = empty();
            for &ns in &values {
                ours.record(0, ns);
                theirs.saturating_record(ns.clamp(LOWEST_NS, HIGHEST_NS));
            }
            let ours = ours.get(0).unwrap();
            let counts = |h: &Histogram<u64>| -> Vec<(u64, u64)> {
                h.iter_recorded().map(|v| (v.value_iterated_to(), v.count_at_value())).collect()
            };
            prop_assert_eq!(counts(&ours), counts(&theirs));
            for p in [0.0, 50.0, 99.0, 99.9, 100.0] {
                prop_assert_eq!(percentile_usec(&ours, p), percentile_usec(&theirs, p));
            }
            prop_assert_eq!(cumulative_buckets(&ours), cumulative_buckets(&theirs));
        }
    }

    #[test]
    fn buckets_are_cumulative_powers_of_two() {
        let mut h = CommandHistograms::new(2);
        for ns in [500, 900, 1500, 3000, 3000, 70_000] {
            h.record(1, ns);
        }
        assert!(h.get(0).is_none() && !h.called(0) && h.called(1));
        let buckets = cumulative_buckets(&h.get(1).unwrap());
        assert_eq!(buckets.first(), Some(&(1, 2)));
        assert_eq!(buckets.last().map(|b| b.1), Some(6));
        assert!(buckets
            .windows(2)
            .all(|w| w[0].0 < w[1].0 && w[0].1 < w[1].1));
        let mut merged = CommandHistograms::default();
        merged.merge(&h);
        merged.merge(&h);
        assert_eq!(merged.get(1).unwrap().len(), 12);
        let p50 = percentile_usec(&merged.get(1).unwrap(), 50.0);
        assert!((1.4..3.1).contains(&p50), "{p50}");
    }
}
