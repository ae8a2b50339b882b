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
