//! Delivery of invalidations: what is owed goes out once per loop iteration (BCAST
//! prefixes' keys batched first), to a client of this shard as a RESP3 push, to its
//! REDIRECT target (a push, or a message on `__redis__:invalidate`), or over the
//! mesh to the client's shard, where one relayed for an owner waits for that
//! owner's channel ([`Relays`], three shards or more). Apart from the table
//! (`mod.rs`) because it writes connections' output and the mesh's outbox.

use super::{Directory, Owed, Tracking, Who, INVALIDATE_CHANNEL};
use crate::config::output_limits::OutputLimits;
use crate::mesh::forward::{Invalidation, Outbox};
use crate::net::conn::{tracking_command, tracking_flags, ClientState, Conn};
use crate::net::slab::Slab;
use ruvio_resp::Protocol;
use std::io::Write;
use std::sync::atomic::Ordering::Relaxed;

/// A third shard's side of relayed invalidations (three shards or more,
/// [`After`]): how many messages this shard took from each other shard, and
/// per origin the invalidations it sent that wait (one waits for its owner's
/// channel to reach its position, the rest of its origin's behind it, so an
/// origin's key order holds).
#[derive(Debug, Default)]
pub(super) struct Relays {
    /// Per shard: messages taken from its channel (handled, or taken as a
    /// waiting script's answer).
    taken: Vec<u64>,
    /// Per origin: its invalidations not delivered yet, in the order sent.
    waiting: Vec<std::collections::VecDeque<Invalidation>>,
    /// Invalidations in `waiting`.
    waiting_len: usize,
}

impl Relays {
    fn taken_from(&self, shard: usize) -> u64 {
        self.taken.get(shard).copied().unwrap_or(0)
    }

    /// Its owner's channel has reached its position (or it waits on none).
    fn ready(&self, inv: &Invalidation) -> bool {
        inv.after.is_none_or(|a| self.taken_from(a.owner) >= a.sent)
    }

    /// `inv` came from `from`: back if it may go now, else it waits.
    fn arrived(&mut self, from: usize, inv: Invalidation) -> Option<Invalidation> {
        let queue_empty = self.waiting.get(from).is_none_or(|q| q.is_empty());
        if queue_empty && self.ready(&inv) {
            return Some(inv);
        }
        if self.waiting.len() <= from {
            self.waiting.resize_with(from + 1, Default::default);
        }
        self.waiting[from].push_back(inv);
        self.waiting_len += 1;
        None
    }

    /// One more message was taken from `from`: what may go now, each
    /// origin's in order up to the first that still waits.
    fn took(&mut self, from: usize) -> Vec<Invalidation> {
        if self.taken.len() <= from {
            self.taken.resize(from + 1, 0);
        }
        self.taken[from] += 1;
        let mut ready = Vec::new();
        if self.waiting_len == 0 {
            return ready;
        }
        for origin in 0..self.waiting.len() {
            while let Some(inv) = self.waiting[origin].front() {
                if !self.ready(inv) {
                    break;
                }
                ready.extend(self.waiting[origin].pop_front());
            }
        }
        self.waiting_len -= ready.len();
        ready
    }
}

/// What delivering an invalidation touches beside this shard's table.
pub struct Deliver<'a> {
    pub outbox: &'a mut Outbox,
    pub directory: &'a Directory,
    /// Connections whose output changed.
    pub dirty: &'a mut Vec<Who>,
    pub limits: &'a OutputLimits,
    pub now_ms: u64,
}

impl Tracking {
    /// The invalidations owed to client `client_id` of `shard`, taken out in order.
    pub fn take_owed_to(&mut self, shard: usize, client_id: u64) -> Vec<Invalidation> {
        if self.owed.is_empty() {
            return Vec::new();
        }
        self.owed
            .take_for(shard, client_id)
            .into_iter()
            .map(|o| o.invalidation)
            .collect()
    }

    /// After a command of `client` (connected here, out of the slab while it
    /// ran): what this shard owes it goes into `sink` right after the command's
    /// reply, or on to its redirection target.
    pub fn after_command(
        &mut self,
        to: &mut Deliver<'_>,
        conns: &mut Slab<Conn>,
        client: &mut ClientState,
        sink: &mut Vec<u8>,
    ) {
        for invalidation in self.take_owed_to(self.me, client.id) {
            if let Some(passed) = to_tracking_client(to.directory, client, sink, invalidation) {
                self.pass_on(to, conns, passed);
            }
        }
    }

    /// Deliver what is owed (once per loop iteration): BCAST prefixes' keys
    /// first become messages, then each message goes to its client here or to
    /// the client's shard.
    pub fn deliver_owed(&mut self, to: &mut Deliver<'_>, conns: &mut Slab<Conn>) {
        if self.bcast_written {
            self.bcast_written = false;
            self.owe_broadcasts();
        }
        if self.owed.is_empty() {
            return;
        }
        for owed in self.owed.take_all() {
            match owed.shard == self.me {
                true => self.deliver(to, conns, owed.invalidation),
                false => to.outbox.invalidate(owed.shard, owed.invalidation),
            }
        }
    }

    /// One message per prefix and subscriber with the keys written under the
    /// prefix (a NOLOOP subscriber's own writes left out).
    fn owe_broadcasts(&mut self) {
        for prefix in self.prefixes.values_mut() {
            if prefix.written.is_empty() {
                continue;
            }
            let written = std::mem::take(&mut prefix.written);
            for s in &prefix.subscribers {
                let keys: Vec<Vec<u8>> = written
                    .iter()
                    .filter(|(_, &writer)| !(s.noloop && writer == s.client_id))
                    .map(|(key, _)| key.clone())
                    .collect();
                if keys.is_empty() {
                    continue;
                }
                self.owed.push(Owed {
                    shard: s.shard,
                    invalidation: Invalidation {
                        client_id: s.client_id,
                        keys: Some(keys),
                        from_table: false,
                        redirected: None,
                        after: None,
                    },
                });
            }
        }
    }

    /// Deliver one invalidation for a client of this shard (from here or from
    /// another shard).
    pub fn deliver(&mut self, to: &mut Deliver<'_>, conns: &mut Slab<Conn>, inv: Invalidation) {
        let Some(&who) = self.conns.get(&inv.client_id) else {
            return;
        };
        let Some(conn) = conns.get_mut(who.0, who.1) else {
            return;
        };
        if conn.client.killed {
            return;
        }
        let before = conn.replies.pending_bytes();
        let passed = match inv.redirected {
            Some(payload) => {
                to_target(&conn.client, conn.replies.sink(), &payload);
                None
            }
            None => to_tracking_client(to.directory, &mut conn.client, conn.replies.sink(), inv),
        };
        if conn.replies.pending_bytes() != before {
            to.dirty.push(who);
            crate::net::outlimit::enforce(to.limits, to.now_ms, to.dirty, conn, who);
        }
        if let Some(passed) = passed {
            self.pass_on(to, conns, passed);
        }
    }

    /// Hand an invalidation to a redirection target: here or on its shard.
    pub(super) fn pass_on(&mut self, to: &mut Deliver<'_>, conns: &mut Slab<Conn>, passed: Passed) {
        if passed.shard == self.me {
            self.deliver(to, conns, passed.invalidation);
        } else {
            to.outbox.invalidate(passed.shard, passed.invalidation);
        }
    }

    /// Three shards or more: an invalidation from shard `from` for a client
    /// of this shard. One relayed for an owner ([`After`]) waits until this
    /// shard took the owner's messages up to its position (the reply of the
    /// read it invalidates among them); anything from `from` waits while
    /// something of `from`'s waits, so an origin's key order holds.
    pub fn relayed(
        &mut self,
        to: &mut Deliver<'_>,
        conns: &mut Slab<Conn>,
        from: usize,
        inv: Invalidation,
    ) {
        if let Some(inv) = self.relays.arrived(from, inv) {
            self.deliver(to, conns, inv);
        }
    }

    /// Three shards or more: this shard took one more message from shard
    /// `from` (it handled it, or a waiting script took it as its answer);
    /// what waited for it goes out.
    pub fn taken_from(&mut self, to: &mut Deliver<'_>, conns: &mut Slab<Conn>, from: usize) {
        for inv in self.relays.took(from) {
            self.deliver(to, conns, inv);
        }
    }

    /// Publish this shard's figures for INFO.
    pub fn publish(&self, directory: &Directory) {
        let g = &directory.gauges[self.me];
        g[0].store(self.clients.len() as u64, Relaxed);
        g[1].store(self.keys.len() as u64, Relaxed);
        g[2].store(self.items as u64, Relaxed);
        g[3].store(self.prefixes.len() as u64, Relaxed);
    }
}

/// An invalidation for a redirection target on `shard`.
pub(super) struct Passed {
    shard: usize,
    invalidation: Invalidation,
}

/// Write an invalidation for tracking client `client` into its output `sink`,
/// or return it for the client's redirection target (Redis' sendTrackingMessage).
pub(super) fn to_tracking_client(
    directory: &Directory,
    client: &mut ClientState,
    sink: &mut Vec<u8>,
    inv: Invalidation,
) -> Option<Passed> {
    let mode = client.tracking;
    if !mode.on() || (inv.from_table && mode.flags & tracking_flags::BCAST != 0) {
        return None;
    }
    let resp3 = client.proto == Protocol::Resp3;
    let payload = payload(inv.keys.as_deref(), resp3);
    if mode.redirect == 0 {
        if resp3 {
            push_invalidate(sink, &payload);
        }
        return None;
    }
    match directory.shard_of(mode.redirect) {
        Some(shard) => Some(Passed {
            shard,
            invalidation: Invalidation {
                client_id: mode.redirect,
                keys: None,
                from_table: false,
                redirected: Some(payload),
                after: None,
            },
        }),
        None => {
            client.tracking.flags |= tracking_flags::BROKEN_REDIR;
            if resp3 {
                let _ = write!(
                    sink,
                    ">2\r\n$21\r\ntracking-redir-broken\r\n:{}\r\n",
                    mode.redirect
                );
            }
            None
        }
    }
}

/// Write a redirected invalidation for target `client`: a push in RESP3, a
/// message on [`INVALIDATE_CHANNEL`] to a RESP2 client in Pub/Sub mode, nothing
/// otherwise.
fn to_target(client: &ClientState, sink: &mut Vec<u8>, payload: &[u8]) {
    if client.proto == Protocol::Resp3 {
        push_invalidate(sink, payload);
    } else if client.subs.active() {
        sink.extend_from_slice(b"*3\r\n$7\r\nmessage\r\n$20\r\n");
        sink.extend_from_slice(INVALIDATE_CHANNEL);
        sink.extend_from_slice(b"\r\n");
        sink.extend_from_slice(payload);
    }
}

/// `>2 invalidate <payload>`.
fn push_invalidate(sink: &mut Vec<u8>, payload: &[u8]) {
    sink.extend_from_slice(b">2\r\n$10\r\ninvalidate\r\n");
    sink.extend_from_slice(payload);
}

/// The message's last element: the keys as an array, or the null of the
/// tracking client's protocol (every key).
fn payload(keys: Option<&[Vec<u8>]>, resp3: bool) -> Vec<u8> {
    let mut out = Vec::new();
    match keys {
        None if resp3 => out.extend_from_slice(b"_\r\n"),
        None => out.extend_from_slice(b"$-1\r\n"),
        Some(keys) => {
            let _ = write!(out, "*{}\r\n", keys.len());
            for k in keys {
                let _ = write!(out, "${}\r\n", k.len());
                out.extend_from_slice(k);
                out.extend_from_slice(b"\r\n");
            }
        }
    }
    out
}

/// The invalidations owed to a forwarded command's client that go right after
/// its reply (`out`): a RESP3 client without redirection tracking now, as the
/// command's bits say, and a command forwarded whole (a split command's parts
/// are merged: theirs go through the client's shard, after the merged reply).
pub fn after_forwarded(
    tracking: &mut Tracking,
    from: usize,
    client_id: u64,
    bits: u8,
    resp3: bool,
    out: &mut Vec<u8>,
) {
    use tracking_command::{REDIRECTED, TRACKING, WHOLE};
    let direct = bits & (TRACKING | WHOLE) == TRACKING | WHOLE && bits & REDIRECTED == 0;
    if !direct || !resp3 || !tracking.owes() {
        return;
    }
    for inv in tracking.take_owed_to(from, client_id) {
        push_invalidate(out, &payload(inv.keys.as_deref(), true));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mesh::forward::After;

    #[test]
    fn bcast_batches_a_prefix_keys_and_leaves_out_a_noloop_writer() {
        let mut t = Tracking::new(0, usize::MAX);
        t.subscribe(0, 7, false, Some(&[b"user:".to_vec()]));
        t.subscribe(1, 8, true, Some(&[Vec::new()]));
        assert!(t.active());
        t.written(8, true, b"user:2");
        t.written(9, false, b"user:1");
        t.written(9, false, b"other");
        t.owe_broadcasts();
        let to_7 = t.take_owed_to(0, 7);
        assert_eq!(to_7.len(), 1);
        assert_eq!(
            to_7[0].keys,
            Some(vec![b"user:1".to_vec(), b"user:2".to_vec()])
        );
        let to_8: Vec<_> = t.take_owed_to(1, 8).into_iter().map(|i| i.keys).collect();
        // Its prefix "" matches every key; its own write is left out.
        let other_and_user_1 = vec![b"other".to_vec(), b"user:1".to_vec()];
        assert_eq!(to_8, [Some(other_and_user_1)]);
        t.subscribe(1, 8, false, None);
        t.subscribe(0, 7, false, None);
        assert!(!t.active());
    }

    /// What a coordinated write owes a client whose commands are held
    /// writers of it goes after the reply of the command that caused it,
    /// before the reply of its command that ran after the cause, or after its
    /// last; a client that wrote nothing in it is not held.
    /// A third shard holds an invalidation relayed for an owner until it
    /// took the owner's messages up to its position, and everything its
    /// origin sent behind it; another origin's go at once.
    #[test]
    fn a_relayed_invalidation_waits_for_its_owner_channel() {
        let inv = |key: &[u8], after: Option<After>| Invalidation {
            client_id: 7,
            keys: Some(vec![key.to_vec()]),
            from_table: true,
            after,
            ..Default::default()
        };
        let mut relays = Relays::default();
        let (origin, owner, other) = (0, 1, 3);
        let waits = Some(After { owner, sent: 2 });
        assert_eq!(relays.arrived(origin, inv(b"a", waits)), None);
        assert_eq!(relays.arrived(origin, inv(b"b", None)), None);
        let elsewhere = inv(b"c", None);
        assert_eq!(relays.arrived(other, elsewhere.clone()), Some(elsewhere));
        assert_eq!(relays.took(owner), []);
        assert_eq!(relays.took(origin), []);
        let keys = |v: Vec<Invalidation>| v.into_iter().map(|i| i.keys).collect::<Vec<_>>();
        let a_then_b = vec![Some(vec![b"a".to_vec()]), Some(vec![b"b".to_vec()])];
        assert_eq!(keys(relays.took(owner)), a_then_b);
        assert_eq!(relays.waiting_len, 0);
        // Past its position already: at once.
        let past = inv(b"d", Some(After { owner, sent: 1 }));
        assert_eq!(relays.arrived(origin, past.clone()), Some(past));
    }

    #[test]
    fn payload_is_resp() {
        assert_eq!(payload(None, true), b"_\r\n");
        assert_eq!(payload(None, false), b"$-1\r\n");
        assert_eq!(
            payload(Some(&[b"ab".to_vec()]), true),
            b"*1\r\n$2\r\nab\r\n"
        );
    }
}
