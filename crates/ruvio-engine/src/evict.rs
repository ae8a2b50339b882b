//! Eviction under `maxmemory`: which key goes, by `maxmemory-policy`, and the
//! access clock each policy keeps in an entry's 24 clock bits.
//!
//! The server decides *when* (it knows the process's allocated bytes, see
//! `ruvio-server`'s `alloc.rs`); the engine decides *which*, as Redis' evict.c does:
//! `maxmemory-samples` keys are sampled (only keys with a TTL for the volatile
//! policies), each is scored (idle time for LRU, inverse frequency for LFU, nearness
//! of the deadline for volatile-ttl), and the best go into a pool of
//! [`POOL_SIZE`] candidates kept across calls; the best candidate that still exists
//! is deleted. The random policies delete a sampled key straight away.
//!
//! The clock bits hold, as in Redis:
//! - LRU policies (and noeviction): the last access in seconds (24 bits, wrapping).
//! - LFU policies: the last decrement time in minutes (16 bits) and a logarithmic
//!   access counter (8 bits, new keys start at [`LFU_INIT_VAL`]), incremented with
//!   probability `1 / ((counter - LFU_INIT_VAL) * lfu-log-factor + 1)` and decayed by
//!   one per `lfu-decay-time` minutes without access.

use crate::engine::{clock_of, Engine};
use crate::keyspace::{TtlScan, CLOCK_MASK};

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

    fn is_random(self) -> bool {
        matches!(
            self,
            EvictionPolicy::AllKeysRandom | EvictionPolicy::VolatileRandom
        )
    }
}

/// A new key's LFU counter (Redis' `LFU_INIT_VAL`): new keys are not the first to go.
pub const LFU_INIT_VAL: u32 = 5;
/// Candidates kept between evictions (Redis' `EVPOOL_SIZE`).
pub const POOL_SIZE: usize = 16;
/// Sampling rounds per eviction before giving up (a volatile policy on a database
/// without TTLs finds nothing).
const SAMPLE_ROUNDS_MAX: usize = 8;
/// Slots of the entry slab a volatile sample may walk to find a key with a TTL.
const TTL_WALK_WORDS: usize = 64;

/// A candidate for eviction: higher `score` goes first.
#[derive(Debug)]
struct Candidate {
    score: u64,
    db: usize,
    key: Box<[u8]>,
}

/// The eviction pool (Redis' `EvictionPoolLRU`): the best candidates seen so far,
/// ascending by score.
#[derive(Debug, Default)]
pub(crate) struct Pool {
    candidates: Vec<Candidate>,
}

impl Pool {
    fn offer(&mut self, candidate: Candidate) {
        if self
            .candidates
            .iter()
            .any(|c| c.db == candidate.db && c.key == candidate.key)
        {
            return;
        }
        let full = self.candidates.len() >= POOL_SIZE;
        if full && self.candidates[0].score >= candidate.score {
            return;
        }
        if full {
            self.candidates.remove(0);
        }
        let at = self
            .candidates
            .partition_point(|c| c.score < candidate.score);
        self.candidates.insert(at, candidate);
    }

    fn take_best(&mut self) -> Option<Candidate> {
        self.candidates.pop()
    }
}

/// Minutes, 16 bits (the LFU decrement time).
fn lfu_minutes(now_ms: u64) -> u32 {
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

/// The LFU counter after one access (Redis' `LFULogIncr`); `coin` is uniform in [0, 1).
fn lfu_incremented(counter: u32, log_factor: u32, coin: f64) -> u32 {
    if counter >= 255 {
        return 255;
    }
    let base = counter.saturating_sub(LFU_INIT_VAL) as f64;
    let p = 1.0 / (base * log_factor as f64 + 1.0);
    if coin < p {
        counter + 1
    } else {
        counter
    }
}

impl Engine {
    /// The clock bits for a new key at `now_ms`.
    pub(crate) fn new_clock(&self, now_ms: u64) -> u32 {
        new_clock(self.config().maxmemory_policy, now_ms)
    }

    /// The clock bits of an entry accessed at `now_ms` whose bits were `old`.
    pub(crate) fn touched_clock(&mut self, old: u32, now_ms: u64) -> u32 {
        let config = self.config();
        if !config.maxmemory_policy.is_lfu() {
            return clock_of(now_ms);
        }
        let (decay, factor) = (config.lfu_decay_time, config.lfu_log_factor);
        let counter = lfu_decayed(old, now_ms, decay);
        let coin = (self.next_random() >> 11) as f64 / (1u64 << 53) as f64;
        let counter = lfu_incremented(counter, factor, coin);
        (lfu_minutes(now_ms) << 8) | counter
    }

    /// Bytes the keyspace holds that new keys reuse before allocating (free entry
    /// slots, big values still being freed): the server subtracts them from the
    /// allocated total so that eviction does not chase memory it cannot give back.
    pub fn reusable_bytes(&self) -> usize {
        let free_slots: usize = self.dbs_iter().map(|db| db.free_slot_bytes()).sum();
        free_slots + self.lazy_pending_bytes()
    }

    /// Evict one key by the policy (`maxmemory-policy`) at `now_ms`. Returns the key's
    /// database and name, or `None` when the policy has nothing to evict
    /// (noeviction, or a volatile policy with no key with a TTL).
    pub fn evict_one(&mut self, now_ms: u64) -> Option<(usize, Vec<u8>)> {
        let policy = self.config().maxmemory_policy;
        if policy == EvictionPolicy::NoEviction {
            return None;
        }
        for _ in 0..SAMPLE_ROUNDS_MAX {
            if policy.is_random() {
                if let Some((db, id)) = self.sample(policy.volatile_only()) {
                    let key = self.db(db).entry(id).key().to_vec();
                    self.evict_entry(db, id);
                    return Some((db, key));
                }
                continue;
            }
            let samples = self.config().maxmemory_samples.max(1);
            for _ in 0..samples {
                if let Some((db, id)) = self.sample(policy.volatile_only()) {
                    let score = self.eviction_score(policy, db, id, now_ms);
                    let key = self.db(db).entry(id).key().into();
                    self.evict_pool.offer(Candidate { score, db, key });
                }
            }
            while let Some(best) = self.evict_pool.take_best() {
                if let Some(id) = self.db(best.db).find(&best.key) {
                    self.evict_entry(best.db, id);
                    return Some((best.db, best.key.into_vec()));
                }
            }
        }
        None
    }

    /// How much entry `id` of `db` deserves to go under `policy` (higher first).
    fn eviction_score(&self, policy: EvictionPolicy, db: usize, id: u32, now_ms: u64) -> u64 {
        let entry = self.db(db).entry(id);
        match policy {
            EvictionPolicy::VolatileTtl => u64::MAX - entry.expire_at().unwrap_or(u64::MAX),
            p if p.is_lfu() => {
                let decay = self.config().lfu_decay_time;
                255 - lfu_decayed(entry.clock(), now_ms, decay) as u64
            }
            _ => {
                let (now, then) = (clock_of(now_ms), entry.clock());
                let idle = if now >= then {
                    now - then
                } else {
                    now + (CLOCK_MASK - then)
                };
                idle as u64
            }
        }
    }

    /// A random key (with a TTL when `volatile`) of a random non-empty database.
    fn sample(&mut self, volatile: bool) -> Option<(usize, u32)> {
        let dbs: Vec<usize> = (0..self.db_count())
            .filter(|&db| !self.db(db).is_empty())
            .collect();
        if dbs.is_empty() {
            return None;
        }
        let db = dbs[(self.next_random() % dbs.len() as u64) as usize];
        let mut state = self.next_random() | 1;
        let mut random = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        if !volatile {
            return self.db(db).random(random).map(|id| (db, id));
        }
        let high = self.db(db).slot_count().max(1) as u64;
        let mut from = (random() % high) as u32;
        let mut budget = TTL_WALK_WORDS;
        let mut wrapped = false;
        loop {
            match self.db(db).next_with_ttl(from, &mut budget) {
                TtlScan::Found(id) => return Some((db, id)),
                TtlScan::End if !wrapped => {
                    wrapped = true;
                    from = 0;
                }
                _ => return None,
            }
        }
    }

    /// Delete entry `id` of `db` as an eviction (big values are freed lazily).
    fn evict_entry(&mut self, db: usize, id: u32) {
        self.delete(db, id);
        self.stats.evicted_keys += 1;
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
    fn lfu_counter_grows_logarithmically_and_decays() {
        assert_eq!(lfu_incremented(LFU_INIT_VAL, 10, 0.99), LFU_INIT_VAL + 1);
        assert_eq!(lfu_incremented(255, 10, 0.0), 255);
        // At counter 15 with factor 10 an access counts with probability 1/101.
        assert_eq!(lfu_incremented(15, 10, 0.5), 15);
        assert_eq!(lfu_incremented(15, 10, 0.005), 16);
        let now = 100 * 60_000;
        let clock = (lfu_minutes(now) << 8) | 20;
        assert_eq!(lfu_decayed(clock, now + 3 * 60_000, 1), 17);
        assert_eq!(lfu_decayed(clock, now + 3 * 60_000, 0), 20);
        assert_eq!(lfu_decayed(clock, now + 300 * 60_000, 1), 0);
    }

    #[test]
    fn pool_keeps_the_best() {
        let mut pool = Pool::default();
        for score in [5u64, 1, 9, 3] {
            pool.offer(Candidate {
                score,
                db: 0,
                key: score.to_string().into_bytes().into(),
            });
        }
        pool.offer(Candidate {
            score: 9,
            db: 0,
            key: b"9".as_slice().into(),
        });
        assert_eq!(pool.take_best().map(|c| c.score), Some(9));
        assert_eq!(pool.take_best().map(|c| c.score), Some(5));
        assert_eq!(pool.candidates.len(), 2);
    }
}
