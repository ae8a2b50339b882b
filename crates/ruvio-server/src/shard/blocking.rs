//! Clients blocked on keys (BLPOP, BLMOVE, BLMPOP ...), kept by the shard that owns
//! the keys.
//!
//! A handler that finds nothing to serve returns [`Outcome::Block`]; the shard parks
//! the client here, once per key, in arrival order. After every command whose
//! effects name a key someone waits on, the shard runs the waiting commands again,
//! oldest first (Redis' fairness, and Redis 7's re-execution of the blocked
//! command): a waiter that can now be served gets its reply and leaves; one that
//! would block again keeps its place. Deadlines are checked every loop iteration;
//! a timed-out client gets a null array. CLIENT UNBLOCK answers it early (null
//! array or `-UNBLOCKED`). When the client goes away its entry is dropped, on this
//! shard directly or, for a client of another shard, by a cancel message.
//!
//! The waiter is either a connection of this shard (its held reply slot is filled)
//! or a connection of another shard (forward mode: the reply travels back with the
//! request's tag). Either way the client's connection stops executing its later
//! commands until the answer arrives, as in Redis.
//!
//! [`Outcome::Block`]: ruvio_engine::command::Outcome::Block

use crate::mesh::forward::Tag;
use ahash::AHashMap;
use ruvio_resp::{OwnedArgs, Protocol};
use std::collections::{BTreeSet, VecDeque};

/// Who gets the reply of a blocked command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Waiter {
    /// A connection of this shard: fill part `part` of held slot `seq` of
    /// connection `(index, gen)`.
    Local {
        index: u32,
        gen: u32,
        seq: u64,
        part: u16,
    },
    /// A connection of another shard: reply to `shard` with `tag`.
    Remote { shard: usize, tag: Tag },
    /// A cross-shard blocking command coordinated by `shard` (see
    /// [`crate::mesh::lending`]): when a key is written, tell the coordinator to try its
    /// command again; nothing runs here.
    Watch { shard: usize, ticket: u64 },
}

/// One parked command.
#[derive(Debug)]
pub struct Blocked {
    pub waiter: Waiter,
    pub client_id: u64,
    pub db: usize,
    pub proto: Protocol,
    pub no_touch: bool,
    /// The command, to run again.
    pub argv: OwnedArgs,
    /// The keys it waits on.
    pub keys: Vec<Vec<u8>>,
    pub deadline_ms: Option<u64>,
    /// How long its first run took, in ns (0 when not timed), when the command
    /// is recorded once served: Redis 7.0 counts that run again in the time it
    /// logs then. `None` for what is recorded elsewhere (a split command's part
    /// waiting for a lent key: its origin records the command).
    pub first_run_ns: Option<u64>,
    /// The command as the client sent it, when the one kept to run again differs
    /// (XREAD's `$` replaced): the slow log shows the client's.
    pub sent_argv: Option<OwnedArgs>,
}

/// Parked commands, by arrival ticket.
#[derive(Debug, Default)]
pub struct Blocking {
    parked: AHashMap<u64, Blocked>,
    /// `(db, key)` -> tickets in arrival order.
    by_key: AHashMap<(usize, Vec<u8>), VecDeque<u64>>,
    /// `(deadline, ticket)`, earliest first.
    deadlines: BTreeSet<(u64, u64)>,
    /// Keys written since the waiters were last served, each once.
    ready: Vec<(usize, Vec<u8>)>,
    next_ticket: u64,
    /// The generation of the node's slot map the waiters were last checked
    /// against (`parked::redirect_blocked`).
    routes_seen: u64,
}

impl Blocking {
    /// Number of parked commands (INFO `blocked_clients`).
    pub fn len(&self) -> usize {
        self.parked.len()
    }

    /// Parked watches for other shards' blocking commands (not clients of this shard).
    pub fn watches(&self) -> usize {
        self.parked
            .values()
            .filter(|b| matches!(b.waiter, Waiter::Watch { .. }))
            .count()
    }

    /// True when nobody waits (then commands need not record the keys they touch).
    pub fn is_empty(&self) -> bool {
        self.parked.is_empty()
    }

    /// Park `blocked`; returns its ticket.
    pub fn park(&mut self, blocked: Blocked) -> u64 {
        let ticket = self.next_ticket;
        self.next_ticket += 1;
        for key in &blocked.keys {
            let queue = self.by_key.entry((blocked.db, key.clone())).or_default();
            // BLPOP k k 0 waits on k once.
            if queue.back() != Some(&ticket) {
                queue.push_back(ticket);
            }
        }
        if let Some(at) = blocked.deadline_ms {
            self.deadlines.insert((at, ticket));
        }
        self.parked.insert(ticket, blocked);
        ticket
    }

    /// The first run of parked command `ticket` took `ns` (known once it
    /// returned, after it parked).
    pub fn note_first_run(&mut self, ticket: u64, ns: u64) {
        if let Some(parked) = self.parked.get_mut(&ticket) {
            parked.first_run_ns = Some(ns);
        }
    }

    /// Take ticket `ticket` out (served, timed out, unblocked or gone).
    pub fn remove(&mut self, ticket: u64) -> Option<Blocked> {
        let blocked = self.parked.remove(&ticket)?;
        for key in &blocked.keys {
            let slot = (blocked.db, key.clone());
            if let Some(queue) = self.by_key.get_mut(&slot) {
                queue.retain(|&t| t != ticket);
                if queue.is_empty() {
                    self.by_key.remove(&slot);
                }
            }
        }
        if let Some(at) = blocked.deadline_ms {
            self.deadlines.remove(&(at, ticket));
        }
        Some(blocked)
    }

    /// Note that `key` of `db` was written; waiters on it are served by the next
    /// [`take_ready`](Self::take_ready).
    pub fn signal(&mut self, db: usize, key: &[u8]) {
        // No client blocked (the usual case): no key copied to ask.
        if !self.by_key.is_empty()
            && self.by_key.contains_key(&(db, key.to_vec()))
            && !self.ready.iter().any(|(d, k)| *d == db && k == key)
        {
            self.ready.push((db, key.to_vec()));
        }
    }

    /// Every key of `db` with waiters may have become ready (SWAPDB brought
    /// another database's keys in): each is looked at again, as Redis'
    /// scanDatabaseForReadyKeys.
    pub fn signal_db(&mut self, db: usize) {
        let keys: Vec<Vec<u8>> = self
            .by_key
            .keys()
            .filter(|(d, _)| *d == db)
            .map(|(_, key)| key.clone())
            .collect();
        for key in keys {
            self.signal(db, &key);
        }
    }

    /// Some written key has waiters to look at.
    #[inline]
    pub fn has_ready(&self) -> bool {
        !self.ready.is_empty()
    }

    /// The next written key with waiters, if any.
    pub fn take_ready(&mut self) -> Option<(usize, Vec<u8>)> {
        (!self.ready.is_empty()).then(|| self.ready.remove(0))
    }

    /// The tickets waiting on `key` of `db`, oldest first.
    pub fn waiting_on(&self, db: usize, key: &[u8]) -> Vec<u64> {
        if self.by_key.is_empty() {
            return Vec::new();
        }
        self.by_key
            .get(&(db, key.to_vec()))
            .map(|q| q.iter().copied().collect())
            .unwrap_or_default()
    }

    /// True when some command is parked on `key` (of its database).
    pub fn is_waited(&self, key: &(usize, Vec<u8>)) -> bool {
        !self.by_key.is_empty() && self.by_key.get(key).is_some_and(|q| !q.is_empty())
    }

    /// The parked command of `ticket`.
    pub fn get(&self, ticket: u64) -> Option<&Blocked> {
        self.parked.get(&ticket)
    }

    /// The earliest deadline, if any command has one.
    pub fn next_deadline(&self) -> Option<u64> {
        self.deadlines.first().map(|&(at, _)| at)
    }

    /// Tickets whose deadline is before `now_ms` (Redis times out when `now > deadline`... at the ms).
    pub fn timed_out(&self, now_ms: u64) -> Vec<u64> {
        self.deadlines
            .iter()
            .take_while(|&&(at, _)| at <= now_ms)
            .map(|&(_, ticket)| ticket)
            .collect()
    }

    /// Wait on the keys `block` names from now on (a command run again that still
    /// cannot be served), keeping its place in the queues when the keys are the
    /// same. The earlier deadline stands: a command run again computes its
    /// deadline from now, but Redis counts a timeout from when the client blocked
    /// (and FILLGET's waiters must keep their order for the next lease).
    pub fn rearm(&mut self, ticket: u64, keys: Vec<Vec<u8>>, deadline_ms: Option<u64>) {
        let Some(parked) = self.parked.get(&ticket) else {
            return;
        };
        let deadline_ms = match (parked.deadline_ms, deadline_ms) {
            (Some(old), Some(new)) => Some(old.min(new)),
            (old, new) => old.or(new),
        };
        if parked.keys == keys && parked.deadline_ms == deadline_ms {
            return;
        }
        let mut parked = self.remove(ticket).expect("parked above");
        parked.keys = keys;
        parked.deadline_ms = deadline_ms;
        let db = parked.db;
        for key in &parked.keys {
            self.by_key
                .entry((db, key.clone()))
                .or_default()
                .push_back(ticket);
        }
        if let Some(at) = parked.deadline_ms {
            self.deadlines.insert((at, ticket));
        }
        self.parked.insert(ticket, parked);
    }

    /// Whether the node's slot map moved to `generation` since the last
    /// call (and the waiters are to be checked against it).
    pub fn routes_changed(&mut self, generation: u64) -> bool {
        std::mem::replace(&mut self.routes_seen, generation) != generation
    }

    /// Every parked command, by ticket (in no order).
    pub fn parked(&self) -> impl Iterator<Item = (u64, &Blocked)> {
        self.parked.iter().map(|(&ticket, b)| (ticket, b))
    }

    /// The ticket of the first parked command matching `waiter`.
    pub fn find(&self, matches: impl Fn(&Blocked) -> bool) -> Option<u64> {
        self.parked
            .iter()
            .find(|(_, b)| matches(b))
            .map(|(&ticket, _)| ticket)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blocked(keys: &[&str], deadline_ms: Option<u64>, index: u32) -> Blocked {
        Blocked {
            waiter: Waiter::Local {
                index,
                gen: 0,
                seq: 0,
                part: 0,
            },
            client_id: index as u64,
            db: 0,
            proto: Protocol::Resp2,
            no_touch: false,
            argv: OwnedArgs::from_iter([&b"blpop"[..]]),
            keys: keys.iter().map(|k| k.as_bytes().to_vec()).collect(),
            deadline_ms,
            first_run_ns: None,
            sent_argv: None,
        }
    }

    #[test]
    fn waiters_are_kept_in_arrival_order_per_key() {
        let mut b = Blocking::default();
        let first = b.park(blocked(&["a", "b"], None, 1));
        let second = b.park(blocked(&["b"], Some(50), 2));
        let third = b.park(blocked(&["a", "a"], Some(10), 3));
        assert_eq!(b.waiting_on(0, b"a"), vec![first, third]);
        assert_eq!(b.waiting_on(0, b"b"), vec![first, second]);
        assert_eq!(b.next_deadline(), Some(10));
        assert_eq!(b.timed_out(49), vec![third]);
        b.remove(first);
        assert_eq!(b.waiting_on(0, b"a"), vec![third]);
        b.signal(0, b"a");
        b.signal(0, b"a");
        b.signal(0, b"zzz");
        assert_eq!(b.take_ready(), Some((0, b"a".to_vec())));
        assert_eq!(b.take_ready(), None);
        b.remove(second);
        b.remove(third);
        assert!(b.is_empty());
        assert!(b.by_key.is_empty() && b.deadlines.is_empty());
    }

    /// A command run again that still blocks keeps its place and its first
    /// deadline (FILLGET's waiters take the next lease in arrival order).
    #[test]
    fn rearming_keeps_the_place_and_the_first_deadline() {
        let mut b = Blocking::default();
        let first = b.park(blocked(&["k"], Some(100), 1));
        let second = b.park(blocked(&["k"], Some(150), 2));
        let k = || vec![b"k".to_vec()];
        b.rearm(first, k(), Some(500));
        assert_eq!(b.waiting_on(0, b"k"), vec![first, second]);
        assert_eq!(b.next_deadline(), Some(100));
        // Waiting for a lent key (no deadline of its own) keeps the deadline too.
        b.rearm(second, k(), None);
        assert_eq!(b.get(second).unwrap().deadline_ms, Some(150));
        // A first wait without deadline takes the one the command computes now.
        let third = b.park(blocked(&["k"], None, 3));
        b.rearm(third, k(), Some(900));
        assert_eq!(b.timed_out(900), vec![first, second, third]);
    }
}
