//! The keys of this shard held by transactions run in place
//! ([`crate::mesh::in_place`]), with how many transactions hold each.
//!
//! Why a count and not a set: a key held by a transaction may be held by later
//! ones of the *same chain* too (lock passing). A chain is one coordinator's
//! transactions over the same shards: the mesh channel from a coordinator to a
//! shard is FIFO, a shard runs a coordinator's parts in arrival order, and the
//! coordinator sends each transaction's next part when the previous shard
//! answered (FIFO too), so two transactions of a chain meet on every shard in the
//! same order, the order they started in. The later one may then run its part on
//! keys the earlier one holds without waiting for its release (a mesh round trip
//! per transaction when many contend on a few keys: 13k transactions/s against
//! Redis's 153k, records/transactions-2026-12-05-2.json). The key stays held, and
//! invisible to everyone else, until the last of its holders released it. Why
//! that keeps isolation and cannot deadlock: docs/cross-shard.md, "Lock passing".
//!
//! Transactions of the same coordinator over *different* shards do not pass: one
//! going through a shard the other skips could be overtaken on a later shard it
//! shares with the other, and the two would meet in opposite orders on two shards.

use super::DbKey;
use ahash::AHashMap;
use std::sync::Arc;

/// How many transactions may join a hold (run on keys their chain holds) while
/// anyone else waits for one of its keys: the waiter then waits for at most this
/// many more transactions, each a few microseconds of work, plus the round trip
/// that releases the last of them. 32 is two pipelines of 16 EXECs (the depth
/// scripts/transactions_bench.py sends): long enough that a chain passes tens of
/// transactions per round trip, short enough that a waiter's wait stays near one
/// round trip. Without anyone waiting a chain joins without limit.
pub const JOINS_WHILE_OTHERS_WAIT_MAX: u32 = 32;

/// Whose a held key is: the chain holding it, how many of its transactions hold
/// it now, and how many joined since the hold began.
#[derive(Debug)]
struct Holders {
    coordinator: usize,
    shards: Arc<[usize]>,
    count: u32,
    joined: u32,
}

/// What a part of a transaction finds on one of its keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// Held by nobody.
    Free,
    /// Held by its own chain, which `joined` transactions joined so far.
    Chain { joined: u32 },
    /// Held by another coordinator, or by a transaction over other shards.
    Taken,
}

/// The held keys of this shard.
#[derive(Debug, Default)]
pub struct HeldKeys {
    keys: AHashMap<DbKey, Holders>,
}

impl HeldKeys {
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// How many keys are held (each once, whatever its holders).
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn contains(&self, key: &DbKey) -> bool {
        self.keys.contains_key(key)
    }

    /// Every held key.
    pub fn iter(&self) -> impl Iterator<Item = &DbKey> + '_ {
        self.keys.keys()
    }

    /// What a part of coordinator `coordinator`'s transaction over `shards`
    /// finds on `key`.
    pub fn access(&self, key: &DbKey, coordinator: usize, shards: &[usize]) -> Access {
        match self.keys.get(key) {
            None => Access::Free,
            Some(h) if h.coordinator == coordinator && *h.shards == *shards => {
                Access::Chain { joined: h.joined }
            }
            Some(_) => Access::Taken,
        }
    }

    /// True when a command on `key` must wait: it is held, and not by the
    /// chain `running` whose part runs now (its commands run on its own holds).
    pub fn stops(&self, key: &DbKey, running: Option<&(usize, Arc<[usize]>)>) -> bool {
        match (self.keys.get(key), running) {
            (None, _) => false,
            (Some(h), Some((coordinator, shards))) => {
                h.coordinator != *coordinator || *h.shards != **shards
            }
            (Some(_), None) => true,
        }
    }

    /// A part ran on `keys` and holds them: each gets one more holder. True when
    /// some key was held already (the part joined its chain's hold). The caller
    /// checked [`HeldKeys::access`]: no key is [`Access::Taken`].
    pub fn hold(&mut self, keys: &[DbKey], coordinator: usize, shards: &Arc<[usize]>) -> bool {
        let mut joined = false;
        for key in keys {
            let holders = self.keys.entry(key.clone()).or_insert_with(|| Holders {
                coordinator,
                shards: Arc::clone(shards),
                count: 0,
                joined: 0,
            });
            debug_assert!(holders.coordinator == coordinator && holders.shards == *shards);
            if holders.count > 0 {
                holders.joined += 1;
                joined = true;
            }
            holders.count += 1;
        }
        joined
    }

    /// A transaction released `keys`: each loses a holder. The keys no one holds
    /// any more are returned, for whoever waits on them.
    pub fn release(&mut self, keys: Vec<DbKey>) -> Vec<DbKey> {
        let mut free = Vec::new();
        for key in keys {
            let Some(holders) = self.keys.get_mut(&key) else {
                continue;
            };
            holders.count -= 1;
            if holders.count == 0 {
                self.keys.remove(&key);
                free.push(key);
            }
        }
        free
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(name: &str) -> DbKey {
        (0, name.as_bytes().to_vec())
    }

    fn shards(list: &[usize]) -> Arc<[usize]> {
        list.into()
    }

    #[test]
    fn a_key_is_free_when_its_last_holder_released_it() {
        let mut held = HeldKeys::default();
        let chain = shards(&[0, 1]);
        assert!(!held.hold(&[key("a"), key("b")], 1, &chain));
        assert_eq!(
            held.access(&key("a"), 1, &chain),
            Access::Chain { joined: 0 }
        );
        // The second transaction names "a" only: it joins that key's hold.
        assert!(held.hold(&[key("a")], 1, &chain));
        assert_eq!(
            held.access(&key("a"), 1, &chain),
            Access::Chain { joined: 1 }
        );
        assert!(held.stops(&key("a"), None));
        assert!(!held.stops(&key("a"), Some(&(1, chain.clone()))));
        assert!(held.stops(&key("a"), Some(&(0, chain.clone()))));
        assert!(!held.stops(&key("c"), None));
        assert_eq!(held.release(vec![key("a"), key("b")]), vec![key("b")]);
        assert!(held.contains(&key("a")));
        assert_eq!(held.len(), 1);
        assert_eq!(held.release(vec![key("a")]), vec![key("a")]);
        assert!(held.is_empty());
        assert_eq!(held.access(&key("a"), 1, &chain), Access::Free);
    }

    #[test]
    fn only_the_same_coordinator_over_the_same_shards_passes() {
        let mut held = HeldKeys::default();
        held.hold(&[key("a")], 1, &shards(&[0, 1]));
        assert_eq!(held.access(&key("a"), 2, &shards(&[0, 1])), Access::Taken);
        assert_eq!(
            held.access(&key("a"), 1, &shards(&[0, 1, 2])),
            Access::Taken
        );
        // Equal shard lists from different transactions are one chain.
        assert_eq!(
            held.access(&key("a"), 1, &shards(&[0, 1])),
            Access::Chain { joined: 0 }
        );
    }

    #[test]
    fn a_new_hold_counts_its_joins_from_zero() {
        let mut held = HeldKeys::default();
        let chain = shards(&[0, 1]);
        for _ in 0..3 {
            held.hold(&[key("a")], 0, &chain);
        }
        assert_eq!(
            held.access(&key("a"), 0, &chain),
            Access::Chain { joined: 2 }
        );
        for _ in 0..3 {
            held.release(vec![key("a")]);
        }
        assert!(!held.hold(&[key("a")], 0, &chain));
        assert_eq!(
            held.access(&key("a"), 0, &chain),
            Access::Chain { joined: 0 }
        );
        // Releasing a key nobody holds (a second release) changes nothing.
        held.release(vec![key("a")]);
        assert!(held.release(vec![key("a")]).is_empty());
    }
}
