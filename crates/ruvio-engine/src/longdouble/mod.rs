//! Redis' `long double` (x87 80-bit extended precision), as INCRBYFLOAT and
//! HINCRBYFLOAT use it.
//!
//! Redis parses both operands with `strtold` (`string2ld`), adds them as `long
//! double`s and prints the sum with `"%.17Lf"`, trimming trailing zeros
//! (`ld2string(.., LD_STR_HUMAN)`). Every step must match bit for bit: with f64,
//! `0.1 + 0.2` would print `0.30000000000000004` where Redis prints `0.3`.
//!
//! - [`x87`]: the add itself, on the FPU.
//! - [`fast`]: exact decimal <-> 80-bit conversion in fixed-width integers for the
//!   texts INCRBYFLOAT meets (up to 38 digits, exponents within +-27).
//! - [`soft`]: the exact software emulation with big integers: the fallback for
//!   everything else (hex floats, huge and tiny values) and the tests' oracle.
//! - `libc` (tests and the benchmark only): glibc's `strtold` and `printf` through a small C file,
//!   the alternative measured in docs/long-double.md and the tests' other oracle.

mod fast;
#[cfg(any(test, feature = "bench-internals"))]
mod libc;
mod soft;
#[cfg(test)]
mod tests;
mod x87;

use smallvec::SmallVec;

use crate::error::CmdError;

/// Longest float text Redis accepts (`MAX_LONG_DOUBLE_CHARS`).
pub const LONG_DOUBLE_CHARS_MAX: usize = 5 * 1024;

/// An x87 extended-precision value, laid out as the FPU stores it (`fstp tbyte`):
/// the 64-bit mantissa with its explicit integer bit, then the sign and the 15-bit
/// biased exponent. `repr(C)` pins that order; the 6 padding bytes are unused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct LongDouble {
    mantissa: u64,
    sign_exp: u16,
}

impl LongDouble {
    /// Positive zero.
    pub const ZERO: LongDouble = LongDouble {
        mantissa: 0,
        sign_exp: 0,
    };

    /// Zero with the given sign.
    fn zero(negative: bool) -> LongDouble {
        LongDouble::from_parts(negative, 0, 0)
    }

    fn from_parts(negative: bool, biased_exp: u16, mantissa: u64) -> LongDouble {
        debug_assert!(biased_exp <= 0x7fff);
        LongDouble {
            mantissa,
            sign_exp: (negative as u16) << 15 | biased_exp,
        }
    }

    /// Sign, biased exponent (0x7fff: infinite or NaN), mantissa.
    fn parts(self) -> (bool, u16, u64) {
        (
            self.sign_exp >> 15 == 1,
            self.sign_exp & 0x7fff,
            self.mantissa,
        )
    }

    /// Redis' `string2ld`: the whole text is one `strtold` number, with no leading
    /// space, not NaN, and not a finite text that over- or underflows. "inf" is
    /// accepted (Redis rejects it only once the sum is infinite).
    pub fn parse(s: &[u8]) -> Option<LongDouble> {
        if s.is_empty() || s.len() >= LONG_DOUBLE_CHARS_MAX || is_c_space(s[0]) {
            return None;
        }
        fast::parse(s).or_else(|| soft::Emulated::parse(s).map(soft::Emulated::to_bits))
    }

    /// The exact value of an integer (every i64 fits the 64-bit mantissa), as
    /// `(long double)ll` for an integer-encoded string.
    pub fn from_i64(n: i64) -> LongDouble {
        let magnitude = n.unsigned_abs();
        if magnitude == 0 {
            return LongDouble::ZERO;
        }
        let lz = magnitude.leading_zeros();
        LongDouble::from_parts(n < 0, (16383 + 63 - lz) as u16, magnitude << lz)
    }

    /// False for infinities and NaN.
    pub fn is_finite(self) -> bool {
        self.sign_exp & 0x7fff != 0x7fff
    }

    /// The nearest `f64` (blocking timeouts: milliseconds need far less precision).
    pub fn to_f64(self) -> f64 {
        soft::Emulated::from_bits(self).to_f64()
    }

    /// `self + other` on the x87.
    pub fn add(self, other: LongDouble) -> LongDouble {
        x87::add(self, other)
    }

    /// Redis' `ld2string(.., LD_STR_HUMAN)` of a finite value: `%.17Lf`, trailing
    /// fraction zeros and dot cut, `-0` as `0`.
    pub fn to_human(self) -> FloatText {
        debug_assert!(self.is_finite());
        let mut text = FloatText::default();
        if fast::format_human(self, &mut text).is_none() {
            text = FloatText::default();
            text.push(soft::Emulated::from_bits(self).to_human_string().as_bytes());
        }
        text
    }
}

/// C's `isspace` in the C locale: Redis' `string2ld` rejects a leading one.
fn is_c_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// Bytes of a float as Redis prints it; inline up to the longest text the fast
/// formatter makes (sign, 39 integer digits, dot, 17 fraction digits).
#[derive(Clone, Default, Debug, PartialEq, Eq)]
pub struct FloatText(SmallVec<[u8; 64]>);

impl FloatText {
    fn push(&mut self, bytes: &[u8]) {
        self.0.extend_from_slice(bytes);
    }

    /// The text.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }
}

/// The shared core of INCRBYFLOAT and HINCRBYFLOAT once both operands are parsed:
/// the sum as Redis prints it, or `NanOrInfinity`.
///
/// Parsing stays with each command because Redis orders and words the errors
/// differently: INCRBYFLOAT parses the stored value, then the increment (both
/// "value is not a valid float", and an "inf" increment only fails here);
/// HINCRBYFLOAT parses the increment first, answers "value is NaN or Infinity" for
/// a non-finite one, and "hash value is not a float" for the stored field.
pub fn incr_by_float(current: LongDouble, incr: LongDouble) -> Result<FloatText, CmdError> {
    let sum = current.add(incr);
    if !sum.is_finite() {
        return Err(CmdError::NanOrInfinity);
    }
    Ok(sum.to_human())
}

/// The three INCRBYFLOAT paths side by side, for `examples/longdouble_bench.rs`.
#[cfg(feature = "bench-internals")]
#[doc(hidden)]
pub mod bench {
    use super::*;

    /// The software emulation alone (the path before the hardware one, without its
    /// shortcut for sums below 10).
    pub fn software(a: &[u8], b: &[u8]) -> Option<Vec<u8>> {
        let sum = soft::Emulated::parse(a)?.add(soft::Emulated::parse(b)?);
        sum.is_finite().then(|| sum.to_human_string().into_bytes())
    }

    /// (a): Rust conversions, x87 add.
    pub fn hardware(a: &[u8], b: &[u8]) -> Option<FloatText> {
        incr_by_float(LongDouble::parse(a)?, LongDouble::parse(b)?).ok()
    }

    /// (b): glibc's strtold and printf.
    pub fn libc(a: &[u8], b: &[u8]) -> Option<FloatText> {
        let sum = libc::add(libc::parse(a)?, libc::parse(b)?);
        sum.is_finite().then(|| libc::format_human(sum))
    }
}
