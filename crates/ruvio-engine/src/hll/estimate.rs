//! The cardinality estimate from a register histogram: Redis 7's estimator, Otmar
//! Ertl's "improved raw estimator" ("New cardinality estimation algorithms for
//! HyperLogLog sketches", arXiv:1702.01284), with Redis's order of floating-point
//! operations so that PFCOUNT answers the same integer Redis does for the same
//! registers. Ertl's σ and τ terms replace the linear-counting switch and the bias
//! tables of the older estimators: no thresholds, one formula for every range.

use super::{Histogram, Q, REGISTERS};

/// `α∞ = 1 / (2 ln 2)` (Redis's `HLL_ALPHA_INF`).
const ALPHA_INF: f64 = 0.721_347_520_444_481_7;

/// Iterations σ and τ may take. Their series converge long before (σ: once
/// `x^(2^k)` underflows, about 64 steps near `x = 1`; τ: once the square roots
/// reach 1, about 60): the bound only guards the loop.
const SERIES_STEPS_MAX: usize = 4096;

/// Ertl's σ(x) for `0 <= x <= 1`: `x + Σ x^(2^k) 2^(k-1)`, infinite at 1.
fn sigma(mut x: f64) -> f64 {
    if x == 1.0 {
        return f64::INFINITY;
    }
    let (mut y, mut z) = (1.0, x);
    for _ in 0..SERIES_STEPS_MAX {
        x *= x;
        let before = z;
        z += x * y;
        y += y;
        if before == z {
            break;
        }
    }
    z
}

/// Ertl's τ(x) for `0 <= x <= 1`: `(1 - x - Σ (1 - x^(2^-k))² 2^-k) / 3`.
fn tau(mut x: f64) -> f64 {
    if x == 0.0 || x == 1.0 {
        return 0.0;
    }
    let (mut y, mut z) = (1.0, 1.0 - x);
    for _ in 0..SERIES_STEPS_MAX {
        x = x.sqrt();
        let before = z;
        y *= 0.5;
        z -= (1.0 - x) * (1.0 - x) * y;
        if before == z {
            break;
        }
    }
    z / 3.0
}

/// The estimated cardinality of registers whose values are counted in
/// `histogram` (Redis's `hllCount` after the histogram is built).
pub(crate) fn cardinality(histogram: &Histogram) -> u64 {
    let m = REGISTERS as f64;
    let mut z = m * tau((m - histogram[Q + 1] as f64) / m);
    for j in (1..=Q).rev() {
        z += histogram[j] as f64;
        z *= 0.5;
    }
    z += m * sigma(histogram[0] as f64 / m);
    // Redis rounds half away from zero (llroundl), as f64::round does.
    (ALPHA_INF * m * m / z).round() as u64
}
