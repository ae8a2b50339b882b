//! Argument parsing with Redis' exact acceptance rules.

use crate::error::CmdError;
use ruvio_resp::Args;

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

/// Redis' default SCAN/SSCAN/HSCAN/ZSCAN COUNT.
pub const SCAN_COUNT_DEFAULT: usize = 10;

/// The options `scanGenericCommand` reads after the cursor.
#[derive(Debug, Default)]
pub struct ScanArgs<'a> {
    /// COUNT (at least 1).
    pub count: usize,
    /// MATCH, unless it is `*` (which matches everything).
    pub pattern: Option<&'a [u8]>,
    /// TYPE (SCAN only).
    pub type_name: Option<&'a [u8]>,
    /// NOVALUES (HSCAN only).
    pub novalues: bool,
}

/// Which scan is parsing: SCAN also takes TYPE, HSCAN also NOVALUES.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScanOf {
    /// SCAN.
    Keys,
    /// HSCAN.
    Hash,
    /// SSCAN, ZSCAN.
    Members,
}

/// Redis' `scanGenericCommand` option loop over `args[from..]`: COUNT below 1, an
/// option without its value or one this scan does not take is a syntax error.
pub fn parse_scan_args(args: Args<'_>, from: usize, of: ScanOf) -> Result<ScanArgs<'_>, CmdError> {
    let mut o = ScanArgs {
        count: SCAN_COUNT_DEFAULT,
        ..ScanArgs::default()
    };
    let mut i = from;
    while i < args.len() {
        let (opt, value) = (args.get(i), (i + 1 < args.len()).then(|| args.get(i + 1)));
        match value {
            Some(n) if eq_ci(opt, "COUNT") => {
                let count = int_arg(n)?;
                if count < 1 {
                    return Err(CmdError::Syntax);
                }
                o.count = usize::try_from(count).unwrap_or(usize::MAX);
            }
            Some(p) if eq_ci(opt, "MATCH") => o.pattern = (p != b"*").then_some(p),
            Some(t) if of == ScanOf::Keys && eq_ci(opt, "TYPE") => o.type_name = Some(t),
            _ if of == ScanOf::Hash && eq_ci(opt, "NOVALUES") => {
                o.novalues = true;
                i += 1;
                continue;
            }
            _ => return Err(CmdError::Syntax),
        }
        i += 2;
    }
    Ok(o)
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
