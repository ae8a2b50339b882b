//! Exact decimal <-> 80-bit conversion in fixed-width integers for the values
//! INCRBYFLOAT meets in practice; [`super::soft`]'s big integers cover the rest.
//!
//! Both directions must equal glibc's `strtold` (correctly rounded, ties to even)
//! and `printf("%.17Lf")` (exact digits, ties to even) bit for bit, so neither may
//! approximate: each computes the one exact integer the answer is rounded from.
//! That stays within 192 bits when the input has at most 38 significant digits and
//! a decimal exponent within +-27 (5^27 still fits a u64), and when the printed
//! integer part is below 2^128. Every text INCRBYFLOAT itself stores for a value
//! below 10^38 meets both: a value with a fraction is below 2^63, so its text has
//! at most 19 + 17 digits.

use super::{FloatText, LongDouble};

/// Significant decimal digits a u128 holds whatever they are (10^38 < 2^127).
const DIGITS_MAX: u32 = 38;
/// Largest decimal exponent handled here: 5^27 < 2^63 is one u64 factor/divisor.
const EXP10_MAX: i32 = 27;
/// Fraction digits `%.17Lf` prints.
const FRACTION_DIGITS: u32 = 17;
/// 10^17, the scale of the printed fraction.
const FRACTION_SCALE: u64 = 10u64.pow(FRACTION_DIGITS);
/// Exponent bias of the x87 format, and the weight of the explicit integer bit.
const BIAS: i32 = 16383;
const MANTISSA_BITS: i32 = 64;

const fn pow5_table() -> [u64; EXP10_MAX as usize + 1] {
    let mut t = [1u64; EXP10_MAX as usize + 1];
    let mut i = 1;
    while i < t.len() {
        t[i] = t[i - 1] * 5;
        i += 1;
    }
    t
}
/// 5^k for k in 0..=27: 10^k is 5^k * 2^k, and the 2^k only moves the exponent.
const POW5: [u64; EXP10_MAX as usize + 1] = pow5_table();
const _: () = assert!(POW5[EXP10_MAX as usize] < 1 << 63);
// Any DIGITS_MAX digits fit a u128, so their product with a u64 power of 5 fits the
// 192 bits `mul_u128_u64` returns.
const _: () = assert!(10u128.checked_pow(DIGITS_MAX).is_some());

/// A plain decimal (`[+-]digits[.digits][e[+-]digits]`) when it is in the range
/// above; `None` means "not decided here" (hex, inf, nan, junk, long or extreme
/// numbers), never "invalid".
pub(super) fn parse(s: &[u8]) -> Option<LongDouble> {
    let (negative, body) = match s.first()? {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    let mut significand = Significand::default();
    let mut exp10: i32 = 0;
    let mut seen_digit = false;
    let mut i = 0;
    while i < body.len() && body[i].is_ascii_digit() {
        significand.push(body[i] - b'0')?;
        seen_digit = true;
        i += 1;
    }
    if i < body.len() && body[i] == b'.' {
        i += 1;
        while i < body.len() && body[i].is_ascii_digit() {
            significand.push(body[i] - b'0')?;
            seen_digit = true;
            exp10 -= 1;
            i += 1;
        }
    }
    if !seen_digit {
        return None;
    }
    if i < body.len() {
        if body[i] | 0x20 != b'e' {
            return None;
        }
        exp10 += parse_small_exponent(&body[i + 1..])?;
    }
    let Some(n) = significand.value() else {
        return Some(LongDouble::zero(negative));
    };
    if exp10 >= 0 {
        let k = exp10 as usize;
        let p = mul_u128_u64(n, *POW5.get(k)?);
        Some(round(negative, p, exp10, false))
    } else {
        let k = (-exp10) as usize;
        let d = *POW5.get(k)?;
        // Scale so the quotient has at least 66 bits: 64 for the mantissa, one to
        // round on and one more so the remainder only ever acts as the sticky bit.
        let (n_bits, d_bits) = (
            128 - n.leading_zeros() as i32,
            64 - d.leading_zeros() as i32,
        );
        let shift = (66 + d_bits - n_bits).max(0);
        let (q, rem) = div_u192_u64(shl_u128(n, shift as u32), d);
        Some(round(negative, q, exp10 - shift, rem != 0))
    }
}

/// The significant digits read so far as an integer: u64 arithmetic for the first
/// 19 (most texts; a u128 multiply per digit costs several times more), u128 after.
#[derive(Default)]
struct Significand {
    small: u64,
    wide: u128,
    digits: u32,
}

/// Digits any u64 holds.
const SMALL_DIGITS_MAX: u32 = 19;
const _: () = assert!(10u128.pow(SMALL_DIGITS_MAX) <= u64::MAX as u128);

impl Significand {
    /// Appends a digit; `None` past [`DIGITS_MAX`] significant digits.
    fn push(&mut self, d: u8) -> Option<()> {
        if self.digits == 0 && d == 0 {
            return Some(()); // leading zeros are not significant
        }
        self.digits += 1;
        if self.digits <= SMALL_DIGITS_MAX {
            self.small = self.small * 10 + d as u64;
        } else if self.digits <= DIGITS_MAX {
            let prefix = if self.digits == SMALL_DIGITS_MAX + 1 {
                self.small as u128
            } else {
                self.wide
            };
            self.wide = prefix * 10 + d as u128;
        } else {
            return None;
        }
        Some(())
    }

    /// The integer, `None` for zero.
    fn value(&self) -> Option<u128> {
        match self.digits {
            0 => None,
            1..=SMALL_DIGITS_MAX => Some(self.small as u128),
            _ => Some(self.wide),
        }
    }
}

/// The digits after `e`: at most 4 of them (|exp| < 10000) keep the sum in i32
/// range; longer exponents go to the exact parser.
fn parse_small_exponent(s: &[u8]) -> Option<i32> {
    let (negative, digits) = match s.first()? {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    if digits.is_empty() || digits.len() > 4 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let e = digits.iter().fold(0i32, |e, &d| e * 10 + (d - b'0') as i32);
    Some(if negative { -e } else { e })
}

/// Three little-endian u64 limbs.
type U192 = [u64; 3];

fn mul_u128_u64(a: u128, b: u64) -> U192 {
    let lo = (a as u64 as u128) * b as u128;
    let hi = (a >> 64) * b as u128 + (lo >> 64);
    [lo as u64, hi as u64, (hi >> 64) as u64]
}

fn shl_u128(a: u128, shift: u32) -> U192 {
    debug_assert!(128 - a.leading_zeros() + shift <= 192);
    let wide = [a as u64, (a >> 64) as u64, 0];
    let (limbs, bits) = ((shift / 64) as usize, shift % 64);
    let mut out = [0u64; 3];
    for (i, limb) in out.iter_mut().enumerate().skip(limbs) {
        let src = i - limbs;
        *limb = wide[src] << bits;
        if bits != 0 && src > 0 {
            *limb |= wide[src - 1] >> (64 - bits);
        }
    }
    out
}

/// Quotient and remainder of a 192-bit number by a u64 (schoolbook, limb by limb:
/// each step divides a remainder below `d` joined to the next limb, which fits u128).
fn div_u192_u64(n: U192, d: u64) -> (U192, u64) {
    let mut q = [0u64; 3];
    // The top limb is usually below `d` (the numerator has at most 130 bits unless
    // it is already wide): its quotient digit is 0, and one of three divisions goes.
    let (mut rem, top) = if n[2] < d { (n[2], 1) } else { (0, 2) };
    for i in (0..=top).rev() {
        (q[i], rem) = div_rem_narrow(((rem as u128) << 64) | n[i] as u128, d);
    }
    (q, rem)
}

/// `n / d` and `n % d` when the quotient fits a u64 (`n >> 64 < d`): one `div`
/// instruction, where u128 `/` and `%` call the general `__udivti3` twice (a tenth
/// of INCRBYFLOAT's time before this).
#[cfg(target_arch = "x86_64")]
fn div_rem_narrow(n: u128, d: u64) -> (u64, u64) {
    let (lo, hi) = (n as u64, (n >> 64) as u64);
    assert!(hi < d, "quotient of {n} / {d} exceeds 64 bits");
    let (q, r): (u64, u64);
    // SAFETY: `div` divides rdx:rax by `d`; it faults only for a zero divisor or a
    // quotient above 64 bits, and `hi < d` (asserted) rules out both.
    unsafe {
        core::arch::asm!(
            "div {d}",
            d = in(reg) d,
            inout("rax") lo => q,
            inout("rdx") hi => r,
            options(pure, nomem, nostack),
        );
    }
    (q, r)
}

#[cfg(not(target_arch = "x86_64"))]
fn div_rem_narrow(n: u128, d: u64) -> (u64, u64) {
    assert!(((n >> 64) as u64) < d);
    ((n / d as u128) as u64, (n % d as u128) as u64)
}

/// Round `v * 2^exp2` (plus a non-zero tail below `v` when `sticky`) to the 64-bit
/// mantissa, ties to even. The range checks above keep it far from over- and
/// underflow (|value| within 1e-66 .. 1e66).
fn round(negative: bool, v: U192, exp2: i32, sticky: bool) -> LongDouble {
    let bit_len = if v[2] != 0 {
        192 - v[2].leading_zeros()
    } else if v[1] != 0 {
        128 - v[1].leading_zeros()
    } else {
        64 - v[0].leading_zeros()
    } as i32;
    debug_assert!(bit_len > 0);
    let shift = bit_len - MANTISSA_BITS;
    let bit = |i: i32| (v[(i / 64) as usize] >> (i % 64)) & 1 == 1;
    let (mut mantissa, mut exp) = if shift <= 0 {
        debug_assert!(!sticky);
        (v[0] << (-shift), exp2 + shift)
    } else {
        let (limb, offset) = ((shift / 64) as usize, shift % 64);
        let mut m = v[limb] >> offset;
        if offset != 0 && limb + 1 < 3 {
            m |= v[limb + 1] << (64 - offset);
        }
        let half = bit(shift - 1);
        let below_half = sticky
            || (0..(shift - 1) / 64).any(|l| v[l as usize] != 0)
            || v[((shift - 1) / 64) as usize] & ((1u64 << ((shift - 1) % 64)) - 1) != 0;
        let up = half && (below_half || m & 1 == 1);
        (m.wrapping_add(up as u64), exp2 + shift)
    };
    if mantissa == 0 {
        // The round-up carried out of the top bit: 0x1_0000..0 is 2^63 one exponent up.
        mantissa = 1 << 63;
        exp += 1;
    }
    let biased = exp + MANTISSA_BITS - 1 + BIAS;
    debug_assert!((1..0x7fff).contains(&biased));
    LongDouble::from_parts(negative, biased as u16, mantissa)
}

/// Redis' `ld2string(.., LD_STR_HUMAN)` of a finite value: `%.17Lf`, trailing
/// fraction zeros and dot removed, `-0` as `0`. `None` when the integer part may
/// reach 2^128 (the exact formatter takes those).
pub(super) fn format_human(v: LongDouble, out: &mut FloatText) -> Option<()> {
    let (negative, biased, mantissa) = v.parts();
    debug_assert!(biased != 0x7fff);
    if mantissa == 0 {
        out.push(b"0");
        return Some(());
    }
    // Subnormals (biased 0) share the smallest normal's exponent.
    let exp = (biased as i32).max(1) - BIAS - (MANTISSA_BITS - 1);
    let mut itoa = itoa::Buffer::new();
    if exp >= 0 {
        if exp > 64 {
            return None;
        }
        if negative {
            out.push(b"-");
        }
        out.push(itoa.format((mantissa as u128) << exp).as_bytes());
        return Some(());
    }
    // The value in units of 10^-17, rounded to nearest with ties to even, as glibc
    // rounds the last printed digit: mantissa * 10^17 < 2^121, so it fits a u128.
    let scaled = mantissa as u128 * FRACTION_SCALE as u128;
    let shift = (-exp) as u32;
    let units = if shift >= 128 {
        0 // below 2^-7 of a unit: not even the half bit is set
    } else {
        let q = scaled >> shift;
        let half = (scaled >> (shift - 1)) & 1 == 1;
        let below_half = scaled & ((1u128 << (shift - 1)) - 1) != 0;
        q + (half && (below_half || q & 1 == 1)) as u128
    };
    if units == 0 {
        out.push(b"0"); // Redis turns "-0" into "0"
        return Some(());
    }
    if negative {
        out.push(b"-");
    }
    // The value is below 2^63 (a 64-bit mantissa times 2^-1 at most), so its
    // integer part fits a u64.
    let (int, mut fraction) = div_rem_narrow(units, FRACTION_SCALE);
    out.push(itoa.format(int).as_bytes());
    if fraction != 0 {
        let mut width = FRACTION_DIGITS as usize;
        while fraction % 10 == 0 {
            fraction /= 10;
            width -= 1;
        }
        let digits = itoa.format(fraction);
        out.push(b".");
        for _ in digits.len()..width {
            out.push(b"0");
        }
        out.push(digits.as_bytes());
    }
    Some(())
}
