//! The fill leases of one shard (FILLGET and FILLSET, `crate::fill`): who may fill
//! which missing key, and until when.
//!
//! Why apart from the commands, on the engine's floor: [`crate::Engine`] owns the
//! table (one per shard, swept every loop iteration), and the engine stands below
//! every command family. Leases are not data: nothing here touches the keyspace.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use ahash::AHashMap;

/// One key's lease.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Lease {
    pub(crate) token: u128,
    /// Unix ms from which the lease is over.
    expires_at_ms: u64,
}

/// When a lease ends, with what it takes to find it.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Due {
    at_ms: u64,
    token: u128,
    db: usize,
    key: Box<[u8]>,
}

/// The fill leases of one shard: one per key at most, by database and key, and
/// their ends in a heap (an entry of a lease that ended earlier, by FILLSET or a
/// newer grant, is skipped when it comes up: its token no longer matches).
#[derive(Debug, Default)]
pub(crate) struct Leases {
    by_db: Vec<AHashMap<Box<[u8]>, Lease>>,
    due: BinaryHeap<Reverse<Due>>,
    granted: u64,
}

impl Leases {
    /// The live lease of `key`, if any.
    pub(crate) fn live(&self, db: usize, key: &[u8], now_ms: u64) -> Option<Lease> {
        self.by_db
            .get(db)?
            .get(key)
            .copied()
            .filter(|l| now_ms < l.expires_at_ms)
    }

    /// Grant a lease on `key` until `expires_at_ms` (replacing an expired one);
    /// returns its token.
    pub(crate) fn grant(&mut self, db: usize, key: &[u8], expires_at_ms: u64, random: u64) -> u128 {
        self.granted += 1;
        let token = (u128::from(self.granted) << 64) | u128::from(random);
        if self.by_db.len() <= db {
            self.by_db.resize_with(db + 1, AHashMap::default);
        }
        let lease = Lease {
            token,
            expires_at_ms,
        };
        self.by_db[db].insert(key.into(), lease);
        self.due.push(Reverse(Due {
            at_ms: expires_at_ms,
            token,
            db,
            key: key.into(),
        }));
        token
    }

    /// End the lease of `key`, whatever its state; true when it was live and
    /// held `token`.
    pub(crate) fn take(&mut self, db: usize, key: &[u8], token: u128, now_ms: u64) -> bool {
        let held = self.live(db, key, now_ms).is_some_and(|l| l.token == token);
        if held {
            self.by_db[db].remove(key);
        }
        held
    }

    /// Remove the leases over at `now_ms`, calling `ended(db, key)` for each.
    pub(crate) fn expire(&mut self, now_ms: u64, mut ended: impl FnMut(usize, &[u8])) {
        while self.due.peek().is_some_and(|d| d.0.at_ms <= now_ms) {
            let Some(Reverse(due)) = self.due.pop() else {
                break;
            };
            let map = &mut self.by_db[due.db];
            if map.get(&due.key).is_some_and(|l| l.token == due.token) {
                map.remove(&due.key);
                ended(due.db, &due.key);
            }
        }
    }

    /// Leases held (live or expired but not yet removed).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.by_db.iter().map(|m| m.len()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lease_is_live_until_its_time_then_reported_once() {
        let mut l = Leases::default();
        let t1 = l.grant(3, b"k", 100, 7);
        assert_eq!(l.live(3, b"k", 99).map(|x| x.token), Some(t1));
        assert_eq!(l.live(3, b"k", 100), None, "over at its time");
        assert_eq!(l.live(0, b"k", 50), None, "per database");
        let mut ended = Vec::new();
        l.expire(99, |db, k| ended.push((db, k.to_vec())));
        assert!(ended.is_empty());
        l.expire(100, |db, k| ended.push((db, k.to_vec())));
        assert_eq!(ended, [(3, b"k".to_vec())]);
        l.expire(1_000, |_, _| panic!("reported twice"));
        assert_eq!(l.len(), 0);
    }

    #[test]
    fn tokens_are_unique_and_only_the_live_one_is_taken() {
        let mut l = Leases::default();
        let t1 = l.grant(0, b"k", 100, 7);
        // Same random bits (worst case): the counter still tells them apart.
        let t2 = l.grant(0, b"k", 200, 7);
        assert_ne!(t1, t2);
        assert!(!l.take(0, b"k", t1, 10), "replaced token");
        assert!(l.take(0, b"k", t2, 10));
        assert!(!l.take(0, b"k", t2, 10), "used token");
        let t3 = l.grant(0, b"k", 300, 9);
        assert!(!l.take(0, b"k", t3, 300), "expired token");
        // Only the last lease (expired, not taken) is reported; the heap entries
        // of the replaced and the used one are skipped.
        let mut ended = Vec::new();
        l.expire(u64::MAX, |db, k| ended.push((db, k.to_vec())));
        assert_eq!(ended, [(0, b"k".to_vec())]);
        assert_eq!(l.len(), 0);
    }
}
