//! Scores and ranges as Redis parses them.
//!
//! Why libc's `strtod`: Redis reads every score with it (`string2d` for ZADD and
//! friends, bare `strtod` for range bounds), so hex floats (`0x1p3`), `infinity`,
//! leading blanks in bounds and the empty bound (which reads as 0) all behave
//! exactly as there; a Rust parser would differ at these edges.

use smallvec::SmallVec;

use crate::error::CmdError;

/// Arguments up to this many bytes are NUL-terminated on the stack.
const SCORE_INLINE_BYTES: usize = 64;

extern "C" {
    fn strtod(s: *const std::ffi::c_char, end: *mut *mut std::ffi::c_char) -> f64;
}

/// `strtod` over `arg`: the value and how many bytes it read.
fn c_strtod(arg: &[u8]) -> (f64, usize) {
    let mut buf: SmallVec<[u8; SCORE_INLINE_BYTES]> = SmallVec::from_slice(arg);
    buf.push(0);
    let mut end: *mut std::ffi::c_char = std::ptr::null_mut();
    // SAFETY: `buf` is NUL-terminated and outlives the call; strtod writes `end`
    // with a pointer into it.
    let value = unsafe { strtod(buf.as_ptr().cast(), &mut end) };
    let used = (end as usize).saturating_sub(buf.as_ptr() as usize);
    (value, used)
}

/// Redis's `string2d` (ZADD, ZINCRBY, WEIGHTS): the whole argument a double, no
/// leading blank, no overflow to infinity or underflow to zero, not NaN.
pub fn parse_score(arg: &[u8]) -> Result<f64, CmdError> {
    if arg.is_empty() || arg[0].is_ascii_whitespace() || arg[0] == 0x0b {
        return Err(CmdError::NotFloat);
    }
    let (value, used) = c_strtod(arg);
    if used != arg.len() || value.is_nan() {
        return Err(CmdError::NotFloat);
    }
    // ERANGE: an infinity the text did not spell, or a zero from nonzero digits.
    let spelled_inf = arg.iter().any(|b| b.eq_ignore_ascii_case(&b'i'));
    if value.is_infinite() && !spelled_inf {
        return Err(CmdError::NotFloat);
    }
    if value == 0.0 && mantissa_nonzero(arg) {
        return Err(CmdError::NotFloat);
    }
    Ok(value)
}

/// True when the digits before any exponent are not all zero (decimal), or the
/// hex digits between `0x` and `p` (hex).
fn mantissa_nonzero(arg: &[u8]) -> bool {
    let hex_at = arg
        .windows(2)
        .position(|w| w[0] == b'0' && w[1].eq_ignore_ascii_case(&b'x'));
    match hex_at {
        Some(at) => arg[at + 2..]
            .iter()
            .take_while(|b| !b.eq_ignore_ascii_case(&b'p'))
            .any(|&b| b.is_ascii_hexdigit() && b != b'0'),
        None => arg
            .iter()
            .take_while(|b| !b.eq_ignore_ascii_case(&b'e'))
            .any(|&b| (b'1'..=b'9').contains(&b)),
    }
}

/// One bound of a score range.
#[derive(Clone, Copy, Debug)]
pub struct ScoreBound {
    /// The value.
    pub value: f64,
    /// `(`: the bound itself is outside.
    pub exclusive: bool,
}

/// `zslParseRange`'s bound: optional `(`, then `strtod` up to the end (which may
/// be an embedded NUL), not NaN.
fn parse_bound(arg: &[u8]) -> Option<ScoreBound> {
    let (exclusive, text) = match arg.first() {
        Some(b'(') => (true, &arg[1..]),
        _ => (false, arg),
    };
    let (value, used) = c_strtod(text);
    let rest_ok = text.get(used).is_none_or(|&b| b == 0);
    (rest_ok && !value.is_nan()).then_some(ScoreBound { value, exclusive })
}

/// A score range `min max` (ZRANGEBYSCORE, ZCOUNT ...).
#[derive(Clone, Copy, Debug)]
pub struct ScoreRange {
    /// Lower bound.
    pub min: ScoreBound,
    /// Upper bound.
    pub max: ScoreBound,
}

impl ScoreRange {
    /// Parse `min max`; Redis's one error for either.
    pub fn parse(min: &[u8], max: &[u8]) -> Result<ScoreRange, CmdError> {
        match (parse_bound(min), parse_bound(max)) {
            (Some(min), Some(max)) => Ok(ScoreRange { min, max }),
            _ => Err(CmdError::MinMaxNotFloat),
        }
    }

    /// True when `score` is below the range (members before its start).
    pub fn below(&self, score: f64) -> bool {
        if self.min.exclusive {
            score <= self.min.value
        } else {
            score < self.min.value
        }
    }

    /// True when `score` is not above the range (members before its end).
    pub fn not_above(&self, score: f64) -> bool {
        if self.max.exclusive {
            score < self.max.value
        } else {
            score <= self.max.value
        }
    }
}

/// One bound of a lex range.
#[derive(Clone, Debug)]
pub enum LexBound {
    /// `-`: below everything.
    NegInf,
    /// `+`: above everything.
    PosInf,
    /// `[x` (inclusive) or `(x` (exclusive).
    Value(Vec<u8>, bool),
}

/// A lex range `min max` (ZRANGEBYLEX, ZLEXCOUNT ...).
#[derive(Clone, Debug)]
pub struct LexRange {
    /// Lower bound.
    pub min: LexBound,
    /// Upper bound.
    pub max: LexBound,
}

fn parse_lex_bound(arg: &[u8]) -> Option<LexBound> {
    match arg.first() {
        Some(b'+') if arg.len() == 1 => Some(LexBound::PosInf),
        Some(b'-') if arg.len() == 1 => Some(LexBound::NegInf),
        Some(b'(') => Some(LexBound::Value(arg[1..].to_vec(), true)),
        Some(b'[') => Some(LexBound::Value(arg[1..].to_vec(), false)),
        _ => None,
    }
}

impl LexRange {
    /// Parse `min max` (`zslParseLexRange`).
    pub fn parse(min: &[u8], max: &[u8]) -> Result<LexRange, CmdError> {
        match (parse_lex_bound(min), parse_lex_bound(max)) {
            (Some(min), Some(max)) => Ok(LexRange { min, max }),
            _ => Err(CmdError::MinMaxNotLex),
        }
    }

    /// True when `member` is below the range.
    pub fn below(&self, member: &[u8]) -> bool {
        match &self.min {
            LexBound::NegInf => false,
            LexBound::PosInf => true,
            LexBound::Value(v, true) => member <= &v[..],
            LexBound::Value(v, false) => member < &v[..],
        }
    }

    /// True when `member` is not above the range.
    pub fn not_above(&self, member: &[u8]) -> bool {
        match &self.max {
            LexBound::NegInf => false,
            LexBound::PosInf => true,
            LexBound::Value(v, true) => member < &v[..],
            LexBound::Value(v, false) => member <= &v[..],
        }
    }
}
