//! The access clock in an entry's 24 clock bits and the `maxmemory-policy` that
//! says what they hold, as in Redis:
//! - LRU policies (and noeviction): the last access in seconds (24 bits, wrapping).
//! - LFU policies: the last decrement time in minutes (16 bits) and a logarithmic
//!   access counter (8 bits, new keys start at [`LFU_INIT_VAL`]).
//!
//! Why a module of its own, on the floor under everything: the entry keeps the
//! bits, eviction (`evict`, on the engine's floor) ranks keys by them, and the
//! writers of an RDB file (the keyspace's snapshot among them) save them as an
//! idle time or a frequency. Pure functions of a clock and the time, nothing else.

/// Mask of the 24-bit access clock (Redis' `LRU_CLOCK_MAX`).
pub const CLOCK_MASK: u32 = (1 << 24) - 1;

/// `maxmemory-policy`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum EvictionPolicy {
    /// Writes that could grow memory fail with `-OOM` past the limit.
    #[default]
    NoEviction,
    /// The least recently used of all keys.
    AllKeysLru,
    /// The least frequently used of all keys.
    AllKeysLfu,
    /// Any key.
    AllKeysRandom,
    /// The least recently used of the keys with a TTL.
    VolatileLru,
    /// The least frequently used of the keys with a TTL.
    VolatileLfu,
    /// Any key with a TTL.
    VolatileRandom,
    /// The key with the nearest deadline.
    VolatileTtl,
}

/// Every policy with its Redis name.
const POLICIES: &[(EvictionPolicy, &str)] = &[
    (EvictionPolicy::VolatileLru, "volatile-lru"),
    (EvictionPolicy::VolatileLfu, "volatile-lfu"),
    (EvictionPolicy::VolatileRandom, "volatile-random"),
    (EvictionPolicy::VolatileTtl, "volatile-ttl"),
    (EvictionPolicy::AllKeysLru, "allkeys-lru"),
    (EvictionPolicy::AllKeysLfu, "allkeys-lfu"),
    (EvictionPolicy::AllKeysRandom, "allkeys-random"),
    (EvictionPolicy::NoEviction, "noeviction"),
];

impl EvictionPolicy {
    /// The policy named `name` (any case).
    pub fn parse(name: &str) -> Option<EvictionPolicy> {
        POLICIES
            .iter()
            .find(|(_, n)| n.eq_ignore_ascii_case(name))
            .map(|&(p, _)| p)
    }

    /// Redis' name of the policy.
    pub fn name(self) -> &'static str {
        POLICIES
            .iter()
            .find(|&&(p, _)| p == self)
            .map_or("noeviction", |&(_, n)| n)
    }

    /// Redis' list of the names, for CONFIG SET's error.
    pub fn names() -> String {
        let names: Vec<&str> = POLICIES.iter().map(|&(_, n)| n).collect();
        names.join(", ")
    }

    /// The clock bits count accesses (LFU) rather than time them (LRU).
    pub fn is_lfu(self) -> bool {
        matches!(
            self,
            EvictionPolicy::AllKeysLfu | EvictionPolicy::VolatileLfu
        )
    }

    /// Only keys with a TTL may go.
    pub fn volatile_only(self) -> bool {
        matches!(
            self,
            EvictionPolicy::VolatileLru
                | EvictionPolicy::VolatileLfu
                | EvictionPolicy::VolatileRandom
                | EvictionPolicy::VolatileTtl
        )
    }

    pub(crate) fn is_random(self) -> bool {
        matches!(
            self,
            EvictionPolicy::AllKeysRandom | EvictionPolicy::VolatileRandom
        )
    }
}

/// A new key's LFU counter (Redis' `LFU_INIT_VAL`): new keys are not the first to go.
pub const LFU_INIT_VAL: u32 = 5;

/// Redis' LRU clock: seconds, 24 bits.
pub(crate) fn clock_of(now_ms: u64) -> u32 {
    ((now_ms / 1000) as u32) & CLOCK_MASK
}

/// Minutes, 16 bits (the LFU decrement time).
pub(crate) fn lfu_minutes(now_ms: u64) -> u32 {
    ((now_ms / 60_000) & 0xffff) as u32
}

/// A new key's clock bits under `policy`.
pub(crate) fn new_clock(policy: EvictionPolicy, now_ms: u64) -> u32 {
    if policy.is_lfu() {
        (lfu_minutes(now_ms) << 8) | LFU_INIT_VAL
    } else {
        clock_of(now_ms)
    }
}

/// The LFU counter of `clock` after decay at `now_ms` (Redis' `LFUDecrAndReturn`).
pub(crate) fn lfu_decayed(clock: u32, now_ms: u64, decay_minutes: u32) -> u32 {
    let then = (clock >> 8) & 0xffff;
    let counter = clock & 0xff;
    let now = lfu_minutes(now_ms);
    let elapsed = if now >= then {
        now - then
    } else {
        65535 - then + now
    };
    let periods = elapsed.checked_div(decay_minutes).unwrap_or(0);
    counter.saturating_sub(periods)
}

/// Redis' `estimateObjectIdleTime` in seconds, including its 24-bit wrap-around.
pub(crate) fn idle_seconds(now: u32, then: u32) -> u32 {
    if now >= then {
        now - then
    } else {
        now + (CLOCK_MASK - then)
    }
}

/// What saving an entry's clock in an RDB file needs of the configuration: Redis
/// saves a key's idle seconds under an LRU policy and its LFU counter (decayed by
/// `lfu-decay-time`) under an LFU one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ClockRules {
    /// `maxmemory-policy`.
    pub policy: EvictionPolicy,
    /// `lfu-decay-time`, minutes.
    pub lfu_decay_time: u32,
}

impl Default for ClockRules {
    /// The defaults of `maxmemory-policy` and `lfu-decay-time`.
    fn default() -> Self {
        ClockRules {
            policy: EvictionPolicy::NoEviction,
            lfu_decay_time: 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for &(policy, name) in POLICIES {
            assert_eq!(EvictionPolicy::parse(name), Some(policy));
            assert_eq!(policy.name(), name);
        }
        assert_eq!(
            EvictionPolicy::parse("ALLKEYS-LRU"),
            Some(EvictionPolicy::AllKeysLru)
        );
        assert_eq!(EvictionPolicy::parse("lru"), None);
    }

    #[test]
    fn idle_time_wraps_like_redis() {
        assert_eq!(idle_seconds(10, 4), 6);
        assert_eq!(idle_seconds(3, CLOCK_MASK - 2), 5);
    }
}
