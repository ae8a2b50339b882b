//! Argument parsing with Redis' exact acceptance rules.

use crate::error::CmdError;

/// Longest decimal i64 text plus one (`LONG_STR_SIZE`): longer input is never an integer.
const LONG_STR_BYTES: usize = 21;

/// Redis' `string2ll`: optional `-`, no leading zeros (except `0` itself), no `+`,
/// no spaces, within i64. Exactly the strings that are the canonical decimal form of
/// an i64, which is why such values can be stored as integers losslessly.
pub fn parse_i64(s: &[u8]) -> Option<i64> {
    if s.is_empty() || s.len() >= LONG_STR_BYTES {
        return None;
    }
    if s == b"0" {
        return Some(0);
    }
    let (negative, digits) = match s.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, s),
    };
    match digits.first() {
        Some(b'1'..=b'9') => {}
        _ => return None,
    }
    let mut magnitude: u64 = 0;
    for &b in digits {
        if !b.is_ascii_digit() {
            return None;
        }
        magnitude = magnitude
            .checked_mul(10)?
            .checked_add(u64::from(b - b'0'))?;
    }
    if negative {
        0i64.checked_sub_unsigned(magnitude)
    } else {
        i64::try_from(magnitude).ok()
    }
}

/// An integer argument (`getLongLongFromObjectOrReply`).
pub fn int_arg(s: &[u8]) -> Result<i64, CmdError> {
    parse_i64(s).ok_or(CmdError::NotInteger)
}

/// An `int`-sized argument (`getIntFromObjectOrReply`), with the error to use.
pub fn i32_arg(s: &[u8], err: CmdError) -> Result<i32, CmdError> {
    parse_i64(s).and_then(|n| i32::try_from(n).ok()).ok_or(err)
}

/// Case-insensitive comparison of an argument with an ASCII keyword.
pub fn eq_ci(arg: &[u8], keyword: &str) -> bool {
    arg.eq_ignore_ascii_case(keyword.as_bytes())
}

/// A SCAN cursor as C's `strtoul` reads it in Redis' `parseScanCursorOrReply`: no
/// leading space, optional sign (a `-` wraps around), decimal digits, nothing after,
/// no overflow. The empty string is cursor 0, as in Redis.
pub fn parse_cursor(s: &[u8]) -> Option<u64> {
    let (negative, digits) = match s.split_first() {
        None => return Some(0),
        Some((b'-', rest)) => (true, rest),
        Some((b'+', rest)) => (false, rest),
        Some(_) => (false, s),
    };
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut value: u64 = 0;
    for &b in digits {
        value = value.checked_mul(10)?.checked_add(u64::from(b - b'0'))?;
    }
    Some(if negative {
        value.wrapping_neg()
    } else {
        value
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn string2ll_rules() {
        assert_eq!(parse_i64(b"0"), Some(0));
        assert_eq!(parse_i64(b"-1"), Some(-1));
        assert_eq!(parse_i64(b"9223372036854775807"), Some(i64::MAX));
        assert_eq!(parse_i64(b"-9223372036854775808"), Some(i64::MIN));
        for bad in [
            &b""[..],
            b"-",
            b"-0",
            b"01",
            b"+1",
            b" 1",
            b"1 ",
            b"9223372036854775808",
            b"1.0",
            b"abc",
        ] {
            assert_eq!(parse_i64(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn strtoul_cursor_rules() {
        assert_eq!(parse_cursor(b"0"), Some(0));
        assert_eq!(parse_cursor(b""), Some(0));
        assert_eq!(parse_cursor(b"+5"), Some(5));
        assert_eq!(parse_cursor(b"-1"), Some(u64::MAX));
        assert_eq!(parse_cursor(b"007"), Some(7));
        assert_eq!(parse_cursor(b" 1"), None);
        assert_eq!(parse_cursor(b"1x"), None);
        assert_eq!(parse_cursor(b"-"), None);
        assert_eq!(parse_cursor(b"18446744073709551616"), None);
    }
}
