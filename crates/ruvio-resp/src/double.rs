//! Doubles formatted exactly as C's `printf("%.17g")` with glibc, because Redis 7.0
//! replies scores and other doubles that way (`addReplyDouble`) and clients compare
//! the text. Seventeen significant digits round-trip every `f64`, at the cost of
//! texts like `0.10000000000000001`.
//!
//! The digits come from Rust's exact formatter (`{:.16e}`, correctly rounded, ties to
//! even on the exact binary value, as glibc does); only the `%g` layout is done here.
//! Nothing is allocated: the digits go through a small stack buffer.

use std::fmt::Write as _;

/// Significant digits of `%.17g` (the C precision `P`).
const SIGNIFICANT_DIGITS: usize = 17;

/// Longest `%.17g` text of an `f64`: sign, 17 digits, point, `e-308`: 24 bytes.
pub(crate) const G17_BYTES_MAX: usize = 24;

/// Integral doubles below this print as plain integers under `%.17g` (the exponent
/// is below the precision, 17): every one is exact, as all are below 2^63.
const INTEGRAL_FIXED_LIMIT: f64 = 1e17;

/// Room for Rust's `{:.16e}` form: sign, 17 digits, point, `e-324`.
const SCIENTIFIC_BYTES_MAX: usize = 32;

/// A fixed-size text buffer on the stack; writes past its end are dropped and
/// reported as a formatting error.
pub(crate) struct StackText<const N: usize> {
    bytes: [u8; N],
    len: usize,
}

impl<const N: usize> StackText<N> {
    pub(crate) fn new() -> Self {
        StackText {
            bytes: [0; N],
            len: 0,
        }
    }
    pub(crate) fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
    fn push(&mut self, b: u8) {
        if let Some(slot) = self.bytes.get_mut(self.len) {
            *slot = b;
            self.len += 1;
        }
    }
    fn extend(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.push(b);
        }
    }
}

impl<const N: usize> std::fmt::Write for StackText<N> {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        let end = self.len.checked_add(s.len()).filter(|&end| end <= N);
        let end = end.ok_or(std::fmt::Error)?;
        self.bytes[self.len..end].copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}

/// Append `d` formatted as C's `%.17g` (glibc): `3`, `0.10000000000000001`, `1e+20`,
/// `1.4999999999999999e-07`, `-0`, `inf`, `-inf`, `nan` (`-nan` when the sign bit is
/// set, as glibc prints it).
pub fn format_double_g17(d: f64, out: &mut Vec<u8>) {
    out.extend_from_slice(g17(d).as_bytes());
}

/// `%.17g` of `d` into a stack buffer.
pub(crate) fn g17(d: f64) -> StackText<G17_BYTES_MAX> {
    let mut text = StackText::new();
    if d.is_sign_negative() {
        text.push(b'-');
    }
    if d.is_nan() {
        text.extend(b"nan");
    } else if d.is_infinite() {
        text.extend(b"inf");
    } else if d.fract() == 0.0 && d.abs() < INTEGRAL_FIXED_LIMIT {
        // An integral value below 1e17 prints all its digits and nothing else
        // (fixed notation, no point), exactly the integer: skip the digit search.
        // Scores such as 1, 2, 3 are the common case (ZSCORE, ZINCRBY).
        let mut digits = itoa::Buffer::new();
        text.extend(digits.format(d.abs() as u64).as_bytes());
    } else {
        let (digits, exponent) = decimal_digits(d.abs());
        layout_g(&digits, exponent, &mut text);
    }
    text
}

/// The 17 significant digits of a finite, non-negative `d` (correctly rounded) and
/// the decimal exponent of the first one, as `%.16e` would print them.
fn decimal_digits(d: f64) -> ([u8; SIGNIFICANT_DIGITS], i32) {
    let mut scientific = StackText::<SCIENTIFIC_BYTES_MAX>::new();
    // Cannot fail: the longest form is 24 bytes.
    let _ = write!(scientific, "{:.16e}", d);
    let text = scientific.as_bytes();
    let split = text.iter().position(|&b| b == b'e').unwrap_or(text.len());
    let (mantissa, exponent) = text.split_at(split);
    let mut digits = [b'0'; SIGNIFICANT_DIGITS];
    let mantissa_digits = mantissa.iter().filter(|b| b.is_ascii_digit());
    for (slot, &digit) in digits.iter_mut().zip(mantissa_digits) {
        *slot = digit;
    }
    let exponent = std::str::from_utf8(exponent.get(1..).unwrap_or_default())
        .ok()
        .and_then(|e| e.parse().ok())
        .unwrap_or(0);
    (digits, exponent)
}

/// The `%g` rules: with `X` the exponent, fixed notation when `-4 <= X < P`, else
/// exponent notation; trailing zeros and a trailing point removed (no `#` flag).
fn layout_g<const N: usize>(digits: &[u8], exponent: i32, text: &mut StackText<N>) {
    let significant = digits
        .iter()
        .rposition(|&b| b != b'0')
        .map_or(1, |last| last + 1);
    let digits = &digits[..significant];
    let fixed = (-4..SIGNIFICANT_DIGITS as i32).contains(&exponent);
    match usize::try_from(exponent) {
        Ok(whole) if fixed => {
            // `whole + 1` integer digits, all among the 17 significant ones.
            let (int_part, frac) = digits.split_at(digits.len().min(whole + 1));
            text.extend(int_part);
            for _ in int_part.len()..whole + 1 {
                text.push(b'0');
            }
            push_fraction(frac, text);
        }
        Err(_) if fixed => {
            text.push(b'0');
            text.push(b'.');
            for _ in 1..exponent.unsigned_abs() {
                text.push(b'0');
            }
            text.extend(digits);
        }
        _ => {
            let (first, frac) = digits.split_at(1);
            text.extend(first);
            push_fraction(frac, text);
            push_exponent(exponent, text);
        }
    }
}

fn push_fraction<const N: usize>(frac: &[u8], text: &mut StackText<N>) {
    if !frac.is_empty() {
        text.push(b'.');
        text.extend(frac);
    }
}

/// C prints the exponent with a sign and at least two digits: `e+20`, `e-07`.
fn push_exponent<const N: usize>(exponent: i32, text: &mut StackText<N>) {
    text.push(b'e');
    text.push(if exponent < 0 { b'-' } else { b'+' });
    let magnitude = exponent.unsigned_abs();
    if magnitude < 10 {
        text.push(b'0');
    }
    let mut digits = itoa::Buffer::new();
    text.extend(digits.format(magnitude).as_bytes());
}

#[cfg(test)]
mod tests {
    use super::format_double_g17;

    fn g(d: f64) -> String {
        let mut out = Vec::new();
        format_double_g17(d, &mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn layout_cases() {
        assert_eq!(g(0.0), "0");
        assert_eq!(g(-0.0), "-0");
        assert_eq!(g(1.0), "1");
        assert_eq!(g(100.0), "100");
        assert_eq!(g(1e16), "10000000000000000");
        assert_eq!(g(1e17), "1e+17");
        assert_eq!(g(0.0001), "0.0001");
        assert_eq!(g(0.00001), "1.0000000000000001e-05");
        assert_eq!(g(f64::NAN), "nan");
        assert_eq!(g(-f64::NAN), "-nan");
        assert_eq!(g(f64::INFINITY), "inf");
        assert_eq!(g(f64::NEG_INFINITY), "-inf");
        assert_eq!(g(99_999_999_999_999_984.0), "99999999999999984");
        assert_eq!(g(-123.0), "-123");
    }

    /// The integral fast path prints what the general path prints.
    #[test]
    fn integral_fast_path_matches_the_general_one() {
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        for i in 0..20_000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let magnitude = (x % 64) as i32;
            let d = ((x >> 8) as f64 % 2f64.powi(magnitude)).trunc()
                * if i % 2 == 0 { 1.0 } else { -1.0 };
            let general = format!("{:.16e}", d.abs());
            let (mantissa, exp) = general.split_once('e').unwrap();
            let exp: i32 = exp.parse().unwrap();
            let digits: String = mantissa.chars().filter(|c| c.is_ascii_digit()).collect();
            if exp >= 17 {
                continue;
            }
            let int_digits = digits[..(exp + 1) as usize].to_string();
            let sign = if d.is_sign_negative() { "-" } else { "" };
            assert_eq!(g(d), format!("{sign}{int_digits}"), "{d}");
        }
    }
}
