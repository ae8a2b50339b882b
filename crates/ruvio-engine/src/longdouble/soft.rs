//! Software x87 extended precision with big integers: exact at any size, slow
//! (microseconds per INCRBYFLOAT, docs/long-double.md).
//!
//! Values are `mantissa * 2^exp` with a 64-bit mantissa; every result is rounded to
//! nearest-even and parsing and printing are exact, so it gives what glibc's
//! `strtold`, the x87 add and `printf("%.17Lf")` give. It serves three ways:
//! - parsing and printing where [`super::fast`]'s fixed-width integers do not
//!   reach (hex floats, inf, more than 38 digits, huge and tiny values);
//! - the add on targets without an x87;
//! - the oracle the tests compare the hardware path with.

use std::cmp::Ordering;

use super::LONG_DOUBLE_CHARS_MAX;

/// Smallest binary exponent of the mantissa's last bit (subnormals: 2^-16445).
const EXP_MIN: i64 = -16445;
/// Largest binary exponent of the mantissa's last bit (max finite ~1.19e4932).
const EXP_MAX: i64 = 16320;
/// Decimal exponent bounds past which a non-zero value surely over/underflows.
const DECIMAL_EXP_OVERFLOW: i64 = 4940;
const DECIMAL_EXP_UNDERFLOW: i64 = -4970;
/// Binary exponent bound of hex floats past which the value surely over/underflows.
const HEX_EXP_MAX: i64 = 20_000;
/// Fraction digits printed by `%.17Lf`.
const FRACTION_DIGITS: u32 = 17;

/// An x87 extended-precision value.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Emulated {
    negative: bool,
    class: Class,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Class {
    Zero,
    /// `mantissa * 2^exp`, mantissa normalised (top bit set) unless subnormal.
    Finite {
        mantissa: u64,
        exp: i64,
    },
    Infinite,
    NaN,
}

/// Unsigned big integer, little-endian 32-bit limbs, no trailing zero limbs.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Big(Vec<u32>);

impl Big {
    fn from_u128(mut n: u128) -> Big {
        let mut limbs = Vec::new();
        while n != 0 {
            limbs.push(n as u32);
            n >>= 32;
        }
        Big(limbs)
    }

    fn is_zero(&self) -> bool {
        self.0.is_empty()
    }

    fn trim(&mut self) {
        while self.0.last() == Some(&0) {
            self.0.pop();
        }
    }

    fn bit_len(&self) -> u64 {
        match self.0.last() {
            None => 0,
            Some(&top) => (self.0.len() as u64 - 1) * 32 + (32 - top.leading_zeros() as u64),
        }
    }

    fn bit(&self, i: u64) -> bool {
        let limb = (i / 32) as usize;
        limb < self.0.len() && (self.0[limb] >> (i % 32)) & 1 == 1
    }

    /// True when any bit below position `i` is set.
    fn any_below(&self, i: u64) -> bool {
        let full = ((i / 32) as usize).min(self.0.len());
        if self.0[..full].iter().any(|&l| l != 0) {
            return true;
        }
        let rem = i % 32;
        full < self.0.len() && rem > 0 && self.0[full] & ((1u32 << rem) - 1) != 0
    }

    fn mul_small(&mut self, m: u32) {
        let mut carry = 0u64;
        for limb in &mut self.0 {
            let v = *limb as u64 * m as u64 + carry;
            *limb = v as u32;
            carry = v >> 32;
        }
        if carry != 0 {
            self.0.push(carry as u32);
        }
    }

    fn add_small(&mut self, a: u32) {
        let mut carry = a as u64;
        for limb in &mut self.0 {
            if carry == 0 {
                return;
            }
            let v = *limb as u64 + carry;
            *limb = v as u32;
            carry = v >> 32;
        }
        if carry != 0 {
            self.0.push(carry as u32);
        }
    }

    fn shl(&self, bits: u64) -> Big {
        if self.is_zero() {
            return Big(Vec::new());
        }
        let (limbs, rem) = ((bits / 32) as usize, bits % 32);
        let mut out = vec![0u32; limbs];
        let mut carry = 0u32;
        for &l in &self.0 {
            if rem == 0 {
                out.push(l);
            } else {
                out.push((l << rem) | carry);
                carry = l >> (32 - rem);
            }
        }
        if carry != 0 {
            out.push(carry);
        }
        Big(out)
    }

    /// `self >> bits` as u128 (the caller knows it fits).
    fn shr_u128(&self, bits: u64) -> u128 {
        let mut out = 0u128;
        for i in 0..128u64 {
            if self.bit(bits + i) {
                out |= 1 << i;
            }
        }
        out
    }

    fn cmp_big(&self, other: &Big) -> Ordering {
        self.0
            .len()
            .cmp(&other.0.len())
            .then_with(|| self.0.iter().rev().cmp(other.0.iter().rev()))
    }

    fn sub_assign(&mut self, other: &Big) {
        debug_assert!(self.cmp_big(other) != Ordering::Less);
        let mut borrow = 0i64;
        for i in 0..self.0.len() {
            let v = self.0[i] as i64 - other.0.get(i).copied().unwrap_or(0) as i64 - borrow;
            borrow = (v < 0) as i64;
            self.0[i] = v.rem_euclid(1 << 32) as u32;
        }
        self.trim();
    }

    #[cfg(any(test, feature = "bench-internals", not(target_arch = "x86_64")))]
    fn add(&self, other: &Big) -> Big {
        let mut out = Vec::with_capacity(self.0.len().max(other.0.len()) + 1);
        let mut carry = 0u64;
        for i in 0..self.0.len().max(other.0.len()) {
            let v = self.0.get(i).copied().unwrap_or(0) as u64
                + other.0.get(i).copied().unwrap_or(0) as u64
                + carry;
            out.push(v as u32);
            carry = v >> 32;
        }
        if carry != 0 {
            out.push(carry as u32);
        }
        Big(out)
    }

    fn pow5(k: u64) -> Big {
        let mut p = Big::from_u128(1);
        let mut left = k;
        while left > 0 {
            let step = left.min(13); // 5^13 < 2^32
            p.mul_small(5u32.pow(step as u32));
            left -= step;
        }
        p
    }

    /// Remainder after dividing in place by `d`.
    fn div_small(&mut self, d: u32) -> u32 {
        let mut rem = 0u64;
        for limb in self.0.iter_mut().rev() {
            let v = (rem << 32) | *limb as u64;
            *limb = (v / d as u64) as u32;
            rem = v % d as u64;
        }
        self.trim();
        rem as u32
    }

    fn to_decimal(&self) -> String {
        let mut n = self.clone();
        let mut groups = Vec::new();
        while !n.is_zero() {
            groups.push(n.div_small(1_000_000_000));
        }
        let mut out = groups
            .pop()
            .map(|g| g.to_string())
            .unwrap_or_else(|| "0".to_string());
        for g in groups.iter().rev() {
            out.push_str(&format!("{g:09}"));
        }
        out
    }
}

/// Round `n * 2^exp` (plus a non-zero tail below it when `sticky`) to a long double.
fn round(negative: bool, n: &Big, exp: i64, sticky: bool) -> Emulated {
    let len = n.bit_len() as i64;
    if len == 0 {
        return Emulated {
            negative,
            class: Class::Zero,
        };
    }
    let target = (exp + len - 64).max(EXP_MIN);
    let shift = target - exp;
    let (mut mantissa, round_up) = if shift <= 0 {
        (n.shr_u128(0) << (-shift) as u32, false)
    } else {
        let shift = shift as u64;
        let half = n.bit(shift - 1);
        let rest = sticky || n.any_below(shift - 1);
        let m = n.shr_u128(shift);
        (m, half && (rest || m & 1 == 1))
    };
    let mut exp = target;
    if round_up {
        mantissa += 1;
        if mantissa >> 64 != 0 {
            mantissa >>= 1;
            exp += 1;
        }
    }
    if exp > EXP_MAX {
        return Emulated {
            negative,
            class: Class::Infinite,
        };
    }
    if mantissa == 0 {
        return Emulated {
            negative,
            class: Class::Zero,
        };
    }
    Emulated {
        negative,
        class: Class::Finite {
            mantissa: mantissa as u64,
            exp,
        },
    }
}

impl Emulated {
    /// The exact value of an integer (every i64 fits the 64-bit mantissa).
    #[cfg(test)]
    pub fn from_i64(n: i64) -> Emulated {
        round(n < 0, &Big::from_u128(n.unsigned_abs() as u128), 0, false)
    }

    /// Redis' `string2ld`: the whole text must be a `strtold` number, no leading
    /// space, not NaN, and not a finite text that over- or underflows.
    pub fn parse(s: &[u8]) -> Option<Emulated> {
        if s.is_empty()
            || s.len() >= LONG_DOUBLE_CHARS_MAX
            || s[0].is_ascii_whitespace()
            || s[0] == 0x0b
        {
            return None;
        }
        let (negative, body) = match s[0] {
            b'-' => (true, &s[1..]),
            b'+' => (false, &s[1..]),
            _ => (false, s),
        };
        if body.eq_ignore_ascii_case(b"inf") || body.eq_ignore_ascii_case(b"infinity") {
            return Some(Emulated {
                negative,
                class: Class::Infinite,
            });
        }
        let value = if body.len() > 2 && body[0] == b'0' && (body[1] | 0x20) == b'x' {
            parse_hex(negative, &body[2..])?
        } else {
            parse_decimal(negative, body)?
        };
        Some(value)
    }

    /// `self + other` with x87 rounding.
    #[cfg(any(test, feature = "bench-internals", not(target_arch = "x86_64")))]
    pub fn add(self, other: Emulated) -> Emulated {
        use Class::*;
        match (self.class, other.class) {
            (NaN, _) | (_, NaN) => Emulated {
                negative: false,
                class: NaN,
            },
            (Infinite, Infinite) if self.negative != other.negative => Emulated {
                negative: false,
                class: NaN,
            },
            (Infinite, _) => self,
            (_, Infinite) => other,
            (Zero, Zero) => Emulated {
                negative: self.negative && other.negative,
                class: Zero,
            },
            (Zero, _) => other,
            (_, Zero) => self,
            (
                Finite {
                    mantissa: ma,
                    exp: ea,
                },
                Finite {
                    mantissa: mb,
                    exp: eb,
                },
            ) => add_finite((self.negative, ma, ea), (other.negative, mb, eb)),
        }
    }

    /// The value of the x87 bit pattern `v` (the FPU's quiet NaN for any NaN).
    pub fn from_bits(v: super::LongDouble) -> Emulated {
        let (negative, biased, mantissa) = v.parts();
        let class = match (biased, mantissa) {
            (0x7fff, m) if m << 1 == 0 => Class::Infinite,
            (0x7fff, _) => Class::NaN,
            (_, 0) => Class::Zero,
            // Subnormals have the smallest normal's exponent and no integer bit.
            (b, m) => Class::Finite {
                mantissa: m,
                exp: (b as i64).max(1) - 16383 - 63,
            },
        };
        Emulated { negative, class }
    }

    /// The x87 bit pattern of this value (`0xC000..` for NaN, as the FPU makes it).
    pub fn to_bits(self) -> super::LongDouble {
        use super::LongDouble as Ld;
        match self.class {
            Class::Zero => Ld::zero(self.negative),
            Class::Infinite => Ld::from_parts(self.negative, 0x7fff, 1 << 63),
            Class::NaN => Ld::from_parts(true, 0x7fff, 0xc000_0000_0000_0000),
            Class::Finite { mantissa, exp } => {
                let biased = if mantissa >> 63 == 1 {
                    exp + 16383 + 63
                } else {
                    0
                };
                Ld::from_parts(self.negative, biased as u16, mantissa)
            }
        }
    }

    /// False for infinities and NaN.
    pub fn is_finite(&self) -> bool {
        matches!(self.class, Class::Zero | Class::Finite { .. })
    }

    /// The nearest `f64` (for blocking timeouts, where Redis multiplies by 1000
    /// and rounds up to whole milliseconds: a double's 53 bits give the same
    /// milliseconds for any timeout a client can mean).
    pub fn to_f64(self) -> f64 {
        let magnitude = match self.class {
            Class::Zero => 0.0,
            Class::NaN => return f64::NAN,
            Class::Infinite => f64::INFINITY,
            Class::Finite { mantissa, exp } => {
                // Scale in two steps so neither factor over- or underflows early.
                let half = (exp / 2) as i32;
                mantissa as f64 * 2f64.powi(half) * 2f64.powi(exp as i32 - half)
            }
        };
        if self.negative {
            -magnitude
        } else {
            magnitude
        }
    }

    /// Redis' `ld2string(.., LD_STR_HUMAN)`: `%.17Lf` with trailing zeros (and a
    /// trailing dot) removed, and `-0` written as `0`.
    pub fn to_human_string(self) -> String {
        let (mantissa, exp) = match self.class {
            Class::Zero => (0, 0),
            Class::Finite { mantissa, exp } => (mantissa, exp),
            Class::Infinite => {
                return if self.negative {
                    "-inf".into()
                } else {
                    "inf".into()
                }
            }
            Class::NaN => return "nan".into(),
        };
        let mut scaled = Big::pow5(FRACTION_DIGITS as u64);
        let m = Big::from_u128(mantissa as u128);
        scaled = mul_big(&scaled, &m);
        let exp2 = exp + FRACTION_DIGITS as i64;
        let units = if exp2 >= 0 {
            scaled.shl(exp2 as u64)
        } else {
            let shift = (-exp2) as u64;
            if scaled.bit_len() + 1 < shift {
                Big(Vec::new())
            } else {
                let half = scaled.bit(shift - 1);
                let rest = scaled.any_below(shift - 1);
                let mut q = shr_big(&scaled, shift);
                if half && (rest || q.bit(0)) {
                    q.add_small(1);
                }
                q
            }
        };
        let digits = units.to_decimal();
        let digits = format!("{digits:0>width$}", width = FRACTION_DIGITS as usize + 1);
        let (int_part, frac_part) = digits.split_at(digits.len() - FRACTION_DIGITS as usize);
        let frac_part = frac_part.trim_end_matches('0');
        let mut out = String::with_capacity(digits.len() + 2);
        if self.negative {
            out.push('-');
        }
        out.push_str(int_part);
        if !frac_part.is_empty() {
            out.push('.');
            out.push_str(frac_part);
        }
        if out == "-0" {
            out = "0".into();
        }
        out
    }
}

fn mul_big(a: &Big, b: &Big) -> Big {
    let mut out = vec![0u32; a.0.len() + b.0.len()];
    for (i, &x) in a.0.iter().enumerate() {
        let mut carry = 0u64;
        for (j, &y) in b.0.iter().enumerate() {
            let v = out[i + j] as u64 + x as u64 * y as u64 + carry;
            out[i + j] = v as u32;
            carry = v >> 32;
        }
        let mut k = i + b.0.len();
        while carry != 0 {
            let v = out[k] as u64 + carry;
            out[k] = v as u32;
            carry = v >> 32;
            k += 1;
        }
    }
    let mut big = Big(out);
    big.trim();
    big
}

fn shr_big(a: &Big, bits: u64) -> Big {
    let len = a.bit_len();
    if bits >= len {
        return Big(Vec::new());
    }
    let mut out = Big(vec![0u32; ((len - bits) as usize).div_ceil(32)]);
    for i in 0..(len - bits) {
        if a.bit(bits + i) {
            out.0[(i / 32) as usize] |= 1 << (i % 32);
        }
    }
    out.trim();
    out
}

/// Sum of two non-zero finite values, rounded once.
#[cfg(any(test, feature = "bench-internals", not(target_arch = "x86_64")))]
fn add_finite(a: (bool, u64, i64), b: (bool, u64, i64)) -> Emulated {
    // Keep `a` the one with the larger exponent.
    let (a, b) = if a.2 >= b.2 { (a, b) } else { (b, a) };
    // Far below the larger operand the smaller one only matters as a rounding tail:
    // clamp it to a single bit well under the 64-bit mantissa and its guard bits.
    const TAIL_BITS: i64 = 140;
    let (b_mantissa, b_exp) = if a.2 - b.2 > TAIL_BITS {
        (1u64, a.2 - TAIL_BITS)
    } else {
        (b.1, b.2)
    };
    let shift = (a.2 - b_exp) as u64;
    let big_a = Big::from_u128(a.1 as u128).shl(shift);
    let big_b = Big::from_u128(b_mantissa as u128);
    if a.0 == b.0 {
        return round(a.0, &big_a.add(&big_b), b_exp, false);
    }
    match big_a.cmp_big(&big_b) {
        Ordering::Equal => Emulated {
            negative: false,
            class: Class::Zero,
        },
        Ordering::Greater => {
            let mut d = big_a;
            d.sub_assign(&big_b);
            round(a.0, &d, b_exp, false)
        }
        Ordering::Less => {
            let mut d = big_b;
            d.sub_assign(&big_a);
            round(b.0, &d, b_exp, false)
        }
    }
}

/// Digits with an optional fraction and exponent (`strtold` decimal syntax).
fn parse_decimal(negative: bool, s: &[u8]) -> Option<Emulated> {
    let mut digits = Big(Vec::new());
    let mut significant = false;
    let mut digit_count = 0i64;
    let mut exp10 = 0i64;
    let mut seen_digit = false;
    let mut i = 0;
    let mut in_fraction = false;
    while i < s.len() {
        match s[i] {
            b'0'..=b'9' => {
                seen_digit = true;
                let d = (s[i] - b'0') as u32;
                if d != 0 || significant {
                    significant = true;
                    digits.mul_small(10);
                    digits.add_small(d);
                    digit_count += 1;
                }
                if in_fraction {
                    exp10 -= 1;
                }
            }
            b'.' if !in_fraction => in_fraction = true,
            _ => break,
        }
        i += 1;
    }
    if !seen_digit {
        return None;
    }
    if i < s.len() {
        if s[i] | 0x20 != b'e' {
            return None;
        }
        exp10 = exp10.checked_add(parse_exponent(&s[i + 1..])?)?;
    }
    if digits.is_zero() {
        return Some(Emulated {
            negative,
            class: Class::Zero,
        });
    }
    let magnitude = digit_count + exp10;
    if !(DECIMAL_EXP_UNDERFLOW..=DECIMAL_EXP_OVERFLOW).contains(&magnitude) {
        return None; // ERANGE: strtold's HUGE_VALL or zero, which Redis refuses.
    }
    let value = if exp10 >= 0 {
        let n = mul_big(&digits, &Big::pow5(exp10 as u64));
        round(negative, &n, exp10, false)
    } else {
        let k = (-exp10) as u64;
        let d = Big::pow5(k);
        let s_bits = (d.bit_len() + 66).saturating_sub(digits.bit_len());
        let (q, rem_nonzero) = divide(&digits.shl(s_bits), &d);
        round(negative, &q, -(s_bits as i64) - k as i64, rem_nonzero)
    };
    value
        .is_finite()
        .then_some(value)
        .filter(|v| v.class != Class::Zero)
}

/// `[+-]digits` after the `e`/`p` of a number; saturates far beyond any valid range.
fn parse_exponent(s: &[u8]) -> Option<i64> {
    let (negative, digits) = match s.first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut e: i64 = 0;
    for &d in digits {
        e = (e * 10 + (d - b'0') as i64).min(1 << 40);
    }
    Some(if negative { -e } else { e })
}

/// Long division returning (quotient, remainder != 0); the quotient is small.
fn divide(n: &Big, d: &Big) -> (Big, bool) {
    let mut rem = n.clone();
    let mut q = Big(Vec::new());
    if rem.cmp_big(d) == Ordering::Less {
        return (q, !rem.is_zero());
    }
    let top = rem.bit_len() - d.bit_len();
    let mut q_bits = vec![0u32; (top as usize + 1).div_ceil(32)];
    for i in (0..=top).rev() {
        let shifted = d.shl(i);
        if rem.cmp_big(&shifted) != Ordering::Less {
            rem.sub_assign(&shifted);
            q_bits[(i / 32) as usize] |= 1 << (i % 32);
        }
    }
    q.0 = q_bits;
    q.trim();
    (q, !rem.is_zero())
}

/// Hex float body after `0x`: hex digits, optional fraction, optional `p` exponent.
fn parse_hex(negative: bool, s: &[u8]) -> Option<Emulated> {
    let mut n = Big(Vec::new());
    let mut exp2 = 0i64;
    let mut seen_digit = false;
    let mut in_fraction = false;
    let mut i = 0;
    while i < s.len() {
        let c = s[i];
        if let Some(d) = (c as char).to_digit(16) {
            seen_digit = true;
            if n.bit_len() < 256 {
                n.mul_small(16);
                n.add_small(d);
                if in_fraction {
                    exp2 -= 4;
                }
            } else if !in_fraction {
                exp2 += 4; // digits beyond 256 bits only scale (tail ignored)
            }
        } else if c == b'.' && !in_fraction {
            in_fraction = true;
        } else {
            break;
        }
        i += 1;
    }
    if !seen_digit {
        return None;
    }
    if i < s.len() {
        if s[i] | 0x20 != b'p' {
            return None;
        }
        exp2 = exp2.checked_add(parse_exponent(&s[i + 1..])?)?;
    }
    if n.is_zero() {
        return Some(Emulated {
            negative,
            class: Class::Zero,
        });
    }
    if !(-HEX_EXP_MAX..=HEX_EXP_MAX).contains(&exp2) {
        return None;
    }
    let value = round(negative, &n, exp2, false);
    value
        .is_finite()
        .then_some(value)
        .filter(|v| v.class != Class::Zero)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn incr(a: &str, b: &str) -> String {
        let a = Emulated::parse(a.as_bytes()).unwrap();
        let b = Emulated::parse(b.as_bytes()).unwrap();
        a.add(b).to_human_string()
    }

    #[test]
    fn prints_what_redis_prints() {
        assert_eq!(incr("10.50", "0.1"), "10.6");
        assert_eq!(incr("0.1", "0.2"), "0.3");
        assert_eq!(incr("5.0e3", "2.0e2"), "5200");
        assert_eq!(incr("10.6", "-5"), "5.6");
        assert_eq!(incr("0", "3.0e3"), "3000");
        assert_eq!(incr("1", "-1"), "0");
        assert_eq!(incr("-1.5", "0"), "-1.5");
        assert_eq!(incr("0x10", "0x1p-1"), "16.5");
        assert_eq!(incr("1e-30", "0"), "0");
        assert_eq!(incr("-1e-30", "0"), "0");
        // x87 artefacts Redis shows too (checked against glibc's strtold/printf).
        assert_eq!(
            incr("123456789", "0.000000001"),
            "123456789.00000000099680619"
        );
        assert_eq!(incr("7", "0.3333333333333333333333"), "7.33333333333333333");
        assert_eq!(incr("3.14159", "-2.5"), "0.64159");
        assert_eq!(incr("2.5e-5", "1.25e-6"), "0.00002625");
        assert_eq!(incr("9223372036854775807", "1"), "9223372036854775808");
        assert_eq!(
            Emulated::from_i64(i64::MIN).to_human_string(),
            "-9223372036854775808"
        );
    }

    #[test]
    fn rejects_what_strtold_and_redis_reject() {
        for bad in [
            "",
            " 1",
            "1 ",
            "abc",
            "1e",
            "1e+",
            ".",
            "nan",
            "NaN",
            "1e5000",
            "-1e5000",
            "1e-5000",
            "0x",
            "--1",
            "0x1p",
            "1..2",
            "1e-4951",
            "1.19e4932",
            "0x1p16384",
        ] {
            assert!(Emulated::parse(bad.as_bytes()).is_none(), "{bad}");
        }
        for good in [
            "1.",
            ".5",
            "+3",
            "-0",
            "1E3",
            "inf",
            "-Infinity",
            "0x1.8p1",
            "1e-4940",
            "3.6e-4951",
            "0e99999",
            "0x.8",
        ] {
            assert!(Emulated::parse(good.as_bytes()).is_some(), "{good}");
        }
        let inf = Emulated::parse(b"inf").unwrap();
        assert!(!inf.add(Emulated::from_i64(1)).is_finite());
    }

    #[test]
    fn large_values_show_x87_rounding() {
        // 2^64 + 1 does not fit a 64-bit mantissa: it rounds to even.
        let big = Emulated::parse(b"18446744073709551617").unwrap();
        assert_eq!(big.to_human_string(), "18446744073709551616");
        assert_eq!(incr("1e20", "1"), "100000000000000000000");
    }
}
