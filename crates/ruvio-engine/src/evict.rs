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

use crate::clock::{
    clock_of, lfu_decayed, lfu_minutes, new_clock, EvictionPolicy, CLOCK_MASK, LFU_INIT_VAL,
};
use crate::engine::Engine;
use crate::keyspace::TtlScan;

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
