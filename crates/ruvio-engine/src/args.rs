//! Argument parsing with Redis' exact acceptance rules.

use crate::error::CmdError;

/// Redis' `string2ll` (one implementation, in the protocol crate): exactly the
/// strings that are the canonical decimal form of an i64, which is why such values
/// can be stored as integers losslessly.
pub use ruvio_resp::string2ll as parse_i64;

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
