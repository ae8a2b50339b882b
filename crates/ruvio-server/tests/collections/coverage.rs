//! Coverage accounting of differential_collections.rs: a histogram of Redis's reply kinds
//! per command, and the check that a full run met every reply the generator is meant to
//! reach (a success, the arity error, WRONGTYPE, and the error cases listed here), so that
//! a change to the generator cannot quietly stop reaching a path.

use super::compare::name_of;
use super::generator::Family;
use crate::common::*;
use std::collections::BTreeMap;

/// Command name (with the subcommand for OBJECT and CONFIG) → reply kind → count.
pub(crate) type Histogram = BTreeMap<String, BTreeMap<String, usize>>;

pub(crate) fn histogram_key(command: &Cmd) -> String {
    let name = name_of(command);
    match (name.as_str(), command.get(1)) {
        ("OBJECT" | "CONFIG", Some(sub)) => {
            format!(
                "{name} {}",
                String::from_utf8_lossy(sub).to_ascii_uppercase()
            )
        }
        _ => name,
    }
}

/// Replies the full run must have met on Redis (substrings of the histogram's kinds),
/// besides what [`check_coverage`] asks of every command: a success, the arity error, and
/// WRONGTYPE for the commands that take a key of a type.
const REQUIRED_REPLIES: &[(&str, &[&str])] = &[
    ("LPOP", &["nil", "empty array", "must be positive"]),
    ("RPOP", &["nil", "empty array", "must be positive"]),
    ("LINDEX", &["nil", "not an integer"]),
    ("LRANGE", &["empty array", "not an integer"]),
    (
        "LSET",
        &["index out of range", "no such key", "not an integer"],
    ),
    ("LINSERT", &["syntax error"]),
    ("LREM", &["not an integer"]),
    ("LTRIM", &["not an integer"]),
    (
        "LPOS",
        &[
            "nil",
            "empty array",
            "RANK can't be zero",
            "COUNT can't be negative",
            "MAXLEN can't be negative",
            "not an integer",
            "syntax error",
        ],
    ),
    ("LMOVE", &["nil", "syntax error"]),
    ("RPOPLPUSH", &["nil"]),
    (
        "LMPOP",
        &[
            "nil",
            "numkeys should be greater than 0",
            "count should be greater than 0",
            "syntax error",
        ],
    ),
    (
        "BLPOP",
        &["nil", "timeout is negative", "timeout is not a float"],
    ),
    ("BRPOP", &["nil", "timeout is negative"]),
    ("BLMOVE", &["nil", "syntax error"]),
    ("BRPOPLPUSH", &["nil"]),
    (
        "BLMPOP",
        &["nil", "numkeys should be greater than 0", "syntax error"],
    ),
    ("HGET", &["nil"]),
    (
        "HINCRBY",
        &[
            "hash value is not an integer",
            "would overflow",
            "not an integer",
        ],
    ),
    (
        "HINCRBYFLOAT",
        &[
            "not a valid float",
            "NaN or Infinity",
            "hash value is not a",
        ],
    ),
    (
        "HRANDFIELD",
        &[
            "nil",
            "empty array",
            "syntax error",
            "value is out of range",
        ],
    ),
    (
        "HSCAN",
        &["invalid cursor", "syntax error", "not an integer"],
    ),
    ("OBJECT ENCODING", &["nil"]),
    ("RENAME", &["no such key"]),
];

/// Generic commands the generator sends: (histogram name, whether it must have met
/// WRONGTYPE, whether it is generated with a wrong number of arguments).
const GENERIC_COVERAGE: &[(&str, bool, bool)] = &[
    ("TYPE", false, true),
    ("OBJECT ENCODING", false, true),
    ("DEL", false, true),
    ("EXISTS", false, true),
    ("RENAME", false, true),
    ("RENAMENX", false, true),
    ("COPY", false, true),
    ("MGET", false, true),
    ("SET", false, false),
    ("GET", true, false),
    ("APPEND", true, false),
    ("INCR", true, false),
    ("STRLEN", true, false),
    ("GETRANGE", true, false),
    ("SETRANGE", true, false),
];

/// Panics unless the run met, on Redis, every reply the generator is meant to reach.
pub(crate) fn check_coverage(label: &str, histogram: &Histogram, families: &[Family]) {
    let mut expectations: Vec<(&str, bool, bool)> = GENERIC_COVERAGE.to_vec();
    for family in families {
        expectations.extend(family.commands().iter().map(|name| (*name, true, true)));
    }
    let mut missing = Vec::new();
    let empty = BTreeMap::new();
    for (name, wrongtype, arity) in &expectations {
        let kinds = histogram.get(*name).unwrap_or(&empty);
        let met = |needle: &str| kinds.keys().any(|kind| kind.contains(needle));
        if !kinds.keys().any(|kind| !kind.starts_with("error")) {
            missing.push(format!("{name}: a success"));
        }
        if *wrongtype && !met("WRONGTYPE") {
            missing.push(format!("{name}: WRONGTYPE"));
        }
        // OBJECT ENCODING's arity error names 'object|encoding'.
        let command = name.split(' ').next().expect("name").to_ascii_lowercase();
        if *arity && !met(&format!("wrong number of arguments for '{command}")) {
            missing.push(format!("{name}: the arity error"));
        }
        let required = REQUIRED_REPLIES
            .iter()
            .filter(|(n, _)| n == name)
            .flat_map(|(_, needles)| needles.iter());
        for needle in required {
            if !met(needle) {
                missing.push(format!("{name}: {needle}"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "{label}: the generator no longer reaches these replies (RUVIO_DIFF_TRACE=histogram \
         prints what it reaches):\n  {}",
        missing.join("\n  ")
    );
}

pub(crate) fn print_histogram(label: &str, histogram: &Histogram) {
    eprintln!("{label}: Redis's replies by command");
    for (name, kinds) in histogram {
        let kinds: Vec<String> = kinds.iter().map(|(k, n)| format!("{n} {k}")).collect();
        eprintln!("  {name:<16} {}", kinds.join(" | "));
    }
}
