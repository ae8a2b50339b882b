//! The `save` setting's value: Redis' rules `"<seconds> <changes> ..."`, parsed
//! and shown as CONFIG GET shows them. What the rules do (shard 0's check, the
//! background save it starts) is `persistence::save_rules`.

/// Redis' default rules.
pub const DEFAULT: &str = "3600 1 300 100 60 10000";

/// One rule: a save when at least `changes` changes happened and the last save is
/// more than `seconds` old.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SaveRule {
    pub seconds: u64,
    pub changes: u64,
}

/// Rules from their text, `"<seconds> <changes> ..."` (`""`: none). Like Redis, an
/// odd count, a non-integer, seconds below 1 or negative changes are refused.
pub fn parse(text: &str) -> Result<Vec<SaveRule>, String> {
    let words: Vec<&str> = text.split_whitespace().collect();
    if words.len() % 2 == 1 {
        return Err("Invalid save parameters".into());
    }
    words
        .chunks(2)
        .map(|pair| {
            let seconds = pair[0].parse::<i64>().ok().filter(|&s| s >= 1);
            let changes = pair[1].parse::<i64>().ok().filter(|&c| c >= 0);
            match (seconds, changes) {
                (Some(seconds), Some(changes)) => Ok(SaveRule {
                    seconds: seconds as u64,
                    changes: changes as u64,
                }),
                _ => Err("Invalid save parameters".into()),
            }
        })
        .collect()
}

/// The rules as CONFIG GET shows them.
pub fn format(rules: &[SaveRule]) -> String {
    rules
        .iter()
        .map(|r| format!("{} {}", r.seconds, r.changes))
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_parse_as_redis_takes_them() {
        let rules = parse(DEFAULT).unwrap();
        assert_eq!(rules.len(), 3);
        assert_eq!(
            rules[1],
            SaveRule {
                seconds: 300,
                changes: 100
            }
        );
        assert_eq!(format(&rules), DEFAULT);
        assert_eq!(parse("").unwrap(), vec![]);
        assert_eq!(format(&parse("  10   0 ").unwrap()), "10 0");
        for bad in ["1", "0 1", "1 -1", "x 1", "1 1.5", "1 2 3"] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }
}
