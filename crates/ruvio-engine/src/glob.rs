//! Glob matching with the exact semantics of Redis 7.0's `stringmatchlen` (KEYS,
//! SCAN MATCH): `*`, `?`, `[...]` classes with ranges (reversed ranges allowed),
//! `[^...]` negation, `\` escapes inside and outside classes, and an unterminated
//! class that matches what it has seen so far.
//!
//! Like Redis (since its CVE-2022-36021 fix) a `*` that failed against every suffix
//! stops the outer `*`s from retrying, so patterns like `a*a*a*a*b` stay polynomial,
//! and recursion is capped.

/// Nesting bound of `*` recursion (Redis: 1000).
const NESTING_MAX: usize = 1000;

/// True when `string` matches `pattern`.
pub fn glob_match(pattern: &[u8], string: &[u8]) -> bool {
    let mut skip_longer = false;
    match_at(pattern, string, &mut skip_longer, 0)
}

/// A pattern looked at once, for patterns matched over and over (an ACL user's
/// key patterns, checked on every command): a pattern that is a literal, or a
/// literal followed by `*`s (`app:*`, by far the common shape), matches by a
/// comparison; any other runs [`glob_match`]. Same answers as `glob_match`,
/// `*`'s quirk included (it does not match the empty string).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GlobMatcher {
    /// No special byte: the string equals the pattern.
    Exact(Vec<u8>),
    /// A literal then only `*`s: the string starts with it and is not empty.
    Prefix(Prefix),
    /// Anything else.
    Glob(Vec<u8>),
}

impl GlobMatcher {
    /// `pattern` looked at once.
    pub fn new(pattern: &[u8]) -> GlobMatcher {
        let special = |c: &u8| matches!(c, b'*' | b'?' | b'[' | b'\\');
        let literal = pattern.iter().position(special).unwrap_or(pattern.len());
        if literal == pattern.len() {
            GlobMatcher::Exact(pattern.to_vec())
        } else if pattern[literal..].iter().all(|&c| c == b'*') {
            GlobMatcher::Prefix(Prefix::new(&pattern[..literal]))
        } else {
            GlobMatcher::Glob(pattern.to_vec())
        }
    }

    /// A prefix pattern of at most 8 bytes as (word, mask): a string of 8
    /// bytes or more matches it exactly when its first 8 bytes, read
    /// little-endian and masked, equal the word. `None` for other patterns.
    pub fn prefix_word(&self) -> Option<(u64, u64)> {
        match self {
            GlobMatcher::Prefix(prefix) if prefix.literal.len() <= 8 => {
                Some((prefix.word, prefix.mask))
            }
            _ => None,
        }
    }

    /// True when `string` matches the pattern.
    #[inline]
    pub fn matches(&self, string: &[u8]) -> bool {
        match self {
            GlobMatcher::Exact(literal) => string == literal.as_slice(),
            GlobMatcher::Prefix(prefix) => !string.is_empty() && prefix.starts(string),
            GlobMatcher::Glob(pattern) => glob_match(pattern, string),
        }
    }
}

/// The literal of a [`GlobMatcher::Prefix`], with its first bytes as a word: a
/// prefix of up to 8 bytes (`app:`, `user:`) is compared with a string of 8
/// bytes or more by one masked word comparison, where a loop over the bytes
/// (or a call to memcmp) costs several times more on every command's key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prefix {
    literal: Vec<u8>,
    /// The literal's bytes, little-endian, when it has at most 8.
    word: u64,
    /// The bits of the literal's bytes in an 8-byte word.
    mask: u64,
}

impl Prefix {
    fn new(literal: &[u8]) -> Prefix {
        let mut bytes = [0u8; 8];
        let len = literal.len().min(8);
        bytes[..len].copy_from_slice(&literal[..len]);
        let mask = match len {
            8 => u64::MAX,
            n => (1u64 << (8 * n)) - 1,
        };
        Prefix {
            literal: literal.to_vec(),
            word: u64::from_le_bytes(bytes),
            mask,
        }
    }

    /// The literal.
    pub fn literal(&self) -> &[u8] {
        &self.literal
    }

    /// True when `string` starts with the literal.
    #[inline]
    fn starts(&self, string: &[u8]) -> bool {
        match string.first_chunk::<8>() {
            Some(head) if self.literal.len() <= 8 => {
                u64::from_le_bytes(*head) & self.mask == self.word
            }
            _ => string.starts_with(&self.literal),
        }
    }
}

/// The pattern byte at `i`, or 0 past the end (C's NUL terminator).
fn at(p: &[u8], i: usize) -> u8 {
    p.get(i).copied().unwrap_or(0)
}

fn match_at(pattern: &[u8], string: &[u8], skip_longer: &mut bool, nesting: usize) -> bool {
    if nesting > NESTING_MAX {
        return false;
    }
    let (mut p, mut s) = (0usize, 0usize);
    while p < pattern.len() && s < string.len() {
        match pattern[p] {
            b'*' => {
                while at(pattern, p + 1) == b'*' && p + 1 < pattern.len() {
                    p += 1;
                }
                if p + 1 == pattern.len() {
                    return true;
                }
                while s < string.len() {
                    if match_at(&pattern[p + 1..], &string[s..], skip_longer, nesting + 1) {
                        return true;
                    }
                    if *skip_longer {
                        return false;
                    }
                    s += 1;
                }
                *skip_longer = true;
                return false;
            }
            b'?' => s += 1,
            b'[' => {
                let (matched, end) = match_class(pattern, p + 1, string[s]);
                if !matched {
                    return false;
                }
                p = end;
                s += 1;
            }
            b'\\' => {
                if pattern.len() - p >= 2 {
                    p += 1;
                }
                if pattern[p] != string[s] {
                    return false;
                }
                s += 1;
            }
            c => {
                if c != string[s] {
                    return false;
                }
                s += 1;
            }
        }
        p += 1;
        if s == string.len() {
            while at(pattern, p) == b'*' && p < pattern.len() {
                p += 1;
            }
            break;
        }
    }
    p >= pattern.len() && s == string.len()
}

/// Match `c` against the class starting at `p` (just after `[`). Returns whether it
/// matched and the index of the class's last pattern byte (its `]`, or the last byte
/// when unterminated), mirroring Redis' pointer walk.
fn match_class(pattern: &[u8], mut p: usize, c: u8) -> (bool, usize) {
    let negate = at(pattern, p) == b'^' && p < pattern.len();
    if negate {
        p += 1;
    }
    let mut matched = false;
    loop {
        let left = pattern.len().saturating_sub(p);
        if at(pattern, p) == b'\\' && left >= 2 {
            p += 1;
            if pattern[p] == c {
                matched = true;
            }
        } else if at(pattern, p) == b']' && left >= 1 {
            break;
        } else if left == 0 {
            // Unterminated: step back so the caller's `p += 1` lands on the end.
            p -= 1;
            break;
        } else if left >= 3 && pattern[p + 1] == b'-' {
            let (mut start, mut end) = (pattern[p], pattern[p + 2]);
            if start > end {
                std::mem::swap(&mut start, &mut end);
            }
            p += 2;
            if c >= start && c <= end {
                matched = true;
            }
        } else if pattern[p] == c {
            matched = true;
        }
        p += 1;
    }
    (matched != negate, p)
}

#[cfg(test)]
mod tests {
    use super::glob_match as m;
    use super::GlobMatcher;
    use proptest::prelude::*;

    proptest! {
        /// A compiled pattern answers as the walk does, on patterns and strings
        /// over a small alphabet that makes prefixes, stars and classes common.
        #[test]
        fn the_matcher_answers_as_glob_match(
            pattern in proptest::collection::vec(prop::sample::select(b"ab:*?[]\\".to_vec()), 0..8),
            // Strings past 8 bytes too: a prefix compares them by the word.
            string in proptest::collection::vec(prop::sample::select(b"ab:*".to_vec()), 0..12),
        ) {
            let matcher = GlobMatcher::new(&pattern);
            prop_assert_eq!(matcher.matches(&string), m(&pattern, &string));
            if let (Some((word, mask)), Some(head)) = (matcher.prefix_word(), string.first_chunk::<8>()) {
                prop_assert_eq!(u64::from_le_bytes(*head) & mask == word, m(&pattern, &string));
            }
        }
    }

    #[test]
    fn the_matcher_takes_the_short_ways() {
        assert!(
            matches!(GlobMatcher::new(b"app:*"), GlobMatcher::Prefix(p) if p.literal() == b"app:")
        );
        assert!(matches!(
            GlobMatcher::new(b"app:**"),
            GlobMatcher::Prefix(_)
        ));
        assert!(matches!(GlobMatcher::new(b"key"), GlobMatcher::Exact(_)));
        assert!(matches!(GlobMatcher::new(b"a*b"), GlobMatcher::Glob(_)));
        assert!(!GlobMatcher::new(b"*").matches(b""));
        assert!(GlobMatcher::new(b"app:*").matches(b"app:"));
        // By the word (8 bytes or more) and byte by byte, prefixes short and long.
        assert!(GlobMatcher::new(b"app:*").matches(b"app:12345"));
        assert!(!GlobMatcher::new(b"app:*").matches(b"apq:12345"));
        assert!(GlobMatcher::new(b"12345678*").matches(b"123456789"));
        assert!(!GlobMatcher::new(b"12345678*").matches(b"1234567"));
        assert!(GlobMatcher::new(b"tenant:42:*").matches(b"tenant:42:k"));
        assert!(!GlobMatcher::new(b"tenant:42:*").matches(b"tenant:43:k"));
        assert!(!GlobMatcher::new(b"tenant:42:*").matches(b"tenant:4"));
    }

    #[test]
    fn redis_stringmatch_cases() {
        // Like stringmatchlen, `*` does not match the empty string (KEYS * special-cases it).
        assert!(!m(b"*", b""));
        assert!(m(b"*", b"anything"));
        assert!(m(b"h?llo", b"hello"));
        assert!(!m(b"h?llo", b"hllo"));
        assert!(m(b"h*llo", b"heeeello"));
        assert!(m(b"h[ae]llo", b"hallo"));
        assert!(!m(b"h[ae]llo", b"hillo"));
        assert!(m(b"h[^e]llo", b"hallo"));
        assert!(!m(b"h[^e]llo", b"hello"));
        assert!(m(b"h[a-b]llo", b"hbllo"));
        assert!(m(b"h[b-a]llo", b"hallo"));
        assert!(m(b"h\\*llo", b"h*llo"));
        assert!(!m(b"h\\*llo", b"hallo"));
        assert!(m(b"[\\]]", b"]"));
        assert!(m(b"key:*", b"key:000000012345"));
        assert!(!m(b"key:*", b"other"));
        assert!(m(b"a*", b"a"));
        assert!(m(b"a**", b"a"));
        assert!(!m(b"a", b""));
        assert!(!m(b"", b"a"));
        assert!(m(b"", b""));
        // Unterminated class: `[a` matches "a".
        assert!(m(b"[a", b"a"));
        assert!(!m(b"[", b"a"));
        assert!(m(b"[^", b"a"));
        // Trailing backslash matches a literal backslash.
        assert!(m(b"a\\", b"a\\"));
    }

    #[test]
    fn pathological_pattern_is_fast() {
        let s = vec![b'a'; 60];
        assert!(!m(b"a*a*a*a*a*a*a*a*a*a*a*b", &s));
    }
}
