//! Placeholder until the engine's glob matcher is public (used by CONFIG GET and COMMAND LIST).

/// Match `text` against a Redis glob `pattern` (`*`, `?`, `[...]`, `\` escapes).
pub fn matches(pattern: &[u8], text: &[u8]) -> bool {
    match (pattern.first(), text.first()) {
        (None, None) => true,
        (Some(b'*'), _) => matches(&pattern[1..], text) || (!text.is_empty() && matches(pattern, &text[1..])),
        (Some(b'?'), Some(_)) => matches(&pattern[1..], &text[1..]),
        (Some(p), Some(t)) if p == t => matches(&pattern[1..], &text[1..]),
        _ => false,
    }
}
