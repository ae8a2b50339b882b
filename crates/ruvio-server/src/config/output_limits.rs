//! The `client-output-buffer-limit` setting's value: a hard limit, a soft limit
//! and its seconds for each client class, parsed and rendered as Redis does.
//! Closing the clients that pass them is `net::outlimit`.

/// One class's limits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClassLimit {
    pub hard: u64,
    pub soft: u64,
    pub soft_seconds: u64,
}

/// The limits of every class, Redis' defaults unless configured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OutputLimits {
    pub normal: ClassLimit,
    pub replica: ClassLimit,
    pub pubsub: ClassLimit,
}

impl Default for OutputLimits {
    fn default() -> OutputLimits {
        OutputLimits {
            normal: ClassLimit::default(),
            replica: ClassLimit {
                hard: 256 << 20,
                soft: 64 << 20,
                soft_seconds: 60,
            },
            pubsub: ClassLimit {
                hard: 32 << 20,
                soft: 8 << 20,
                soft_seconds: 60,
            },
        }
    }
}

/// Why a value was refused, in Redis' words.
pub const WRONG_ARGUMENT_COUNT: &str = "Wrong number of arguments in buffer limit configuration.";
pub const INVALID_CLASS: &str = "Invalid client class specified in buffer limit configuration.";
pub const INVALID_LIMIT: &str =
    "Error in hard, soft or soft_seconds setting in buffer limit configuration.";

impl OutputLimits {
    /// These limits with `value` applied: groups of `<class> <hard> <soft>
    /// <seconds>`; the classes not named keep their limits.
    pub fn updated(&self, value: &str) -> Result<OutputLimits, &'static str> {
        let words: Vec<&str> = value.split_whitespace().collect();
        if !words.len().is_multiple_of(4) {
            return Err(WRONG_ARGUMENT_COUNT);
        }
        let mut limits = *self;
        for group in words.chunks(4) {
            let class = match group[0].to_ascii_lowercase().as_str() {
                "normal" => &mut limits.normal,
                "slave" | "replica" => &mut limits.replica,
                "pubsub" => &mut limits.pubsub,
                _ => return Err(INVALID_CLASS),
            };
            let size = |v: &str| crate::config::parse_memory(v).map(|n| n as u64);
            let seconds = group[3].parse::<u64>().ok();
            match (size(group[1]), size(group[2]), seconds) {
                (Some(hard), Some(soft), Some(soft_seconds)) => {
                    *class = ClassLimit {
                        hard,
                        soft,
                        soft_seconds,
                    }
                }
                _ => return Err(INVALID_LIMIT),
            }
        }
        Ok(limits)
    }

    /// CONFIG GET's form: every class, in bytes, the replica class named `slave`.
    pub fn render(&self) -> String {
        [
            ("normal", self.normal),
            ("slave", self.replica),
            ("pubsub", self.pubsub),
        ]
        .iter()
        .map(|(name, l)| format!("{name} {} {} {}", l.hard, l.soft, l.soft_seconds))
        .collect::<Vec<_>>()
        .join(" ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_render_as_redis() {
        let defaults = OutputLimits::default();
        assert_eq!(
            defaults.render(),
            "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60"
        );
        let set = defaults.updated("normal 1mb 2kb 3").unwrap();
        assert_eq!(
            set.render(),
            "normal 1048576 2048 3 slave 268435456 67108864 60 pubsub 33554432 8388608 60"
        );
        let set = set.updated("replica 1gb 2 3 PUBSUB 1 1 1").unwrap();
        assert_eq!(
            set.render(),
            "normal 1048576 2048 3 slave 1073741824 2 3 pubsub 1 1 1"
        );
        assert_eq!(set.updated("").unwrap(), set);
        assert_eq!(set.updated("normal 1 2"), Err(WRONG_ARGUMENT_COUNT));
        assert_eq!(set.updated("master 1 2 3"), Err(INVALID_CLASS));
        assert_eq!(set.updated("normal x 2 3"), Err(INVALID_LIMIT));
        assert_eq!(set.updated("normal 1 2 -3"), Err(INVALID_LIMIT));
    }
}
