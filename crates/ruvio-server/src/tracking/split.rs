//! Invalidations of a write over several shards, gathered where the write's
//! reply is made and sent in the write's key order: a split write's parts at its
//! origin ([`Tracking::split_answered`]), a coordinated write of borrowed keys at
//! its coordinator ([`Tracking::gather_answered`]), with the tracking writers whose
//! reply slots it keeps (`mesh::lending::HeldWriter`). Apart from the table
//! (`mod.rs`) because it is the cross-shard ordering, not what a shard remembers.

use super::delivery::{to_tracking_client, Deliver};
use super::{Owed, Tracking, Who};
use crate::mesh::forward::{After, Invalidation, Outbox, PartOwed};
use crate::mesh::lending::HeldWriter;
use crate::net::conn::Conn;
use crate::net::slab::Slab;

/// A coordinated write's invalidations (see [`Tracking::gather_started`]).
#[derive(Debug)]
pub(super) struct Gather {
    /// Owners not answered yet.
    owners_left: usize,
    /// (the key's place among the written keys, the client's shard, the message).
    items: Vec<(u32, usize, Invalidation)>,
    /// Its tracking writers whose reply slots it keeps, in the order their
    /// commands ran.
    held: Vec<HeldWriter>,
}

/// A split write's invalidations, gathered at its origin (see
/// [`Tracking::split_started`]).
#[derive(Debug)]
pub(super) struct Split {
    /// Parts not answered yet.
    parts_left: usize,
    /// The part of each of the command's keys, in the command's order.
    order: Vec<u16>,
    /// (part, index of the key in its part, the client's shard, the message).
    items: Vec<(u16, u16, usize, Invalidation)>,
}

impl Tracking {
    /// The invalidations of keys one key at a time owed since `since` (by a
    /// part of a split write whose keys are `part_keys`) to clients of shard
    /// `origin` (the command's) or of this shard, taken out with each key's
    /// index in the part. The reader's shard must never get an invalidation
    /// before the reply of the read that remembered it, which came on this
    /// shard's channel to it; sent on through `origin`, that holds when the
    /// reader's shard is `origin` itself (this shard's channel to it carries
    /// the part's reply behind the read's) or this shard (its read was
    /// answered here before). A client of a third shard (three shards or
    /// more) gets its message through `origin` too, tagged with where this
    /// shard's channel to its shard stands ([`After`]): its shard holds it
    /// until it has taken that many messages from here (docs/tracking.md).
    pub fn take_part_owed(
        &mut self,
        since: usize,
        origin: usize,
        part_keys: &[&[u8]],
        outbox: &Outbox,
    ) -> Vec<(u16, usize, Invalidation)> {
        let me = self.me;
        // Something may have delivered meanwhile: then nothing is past `since`.
        let since = since.min(self.owed.len());
        let index = |inv: &Invalidation| match inv.keys.as_deref() {
            Some([key]) => part_keys.iter().position(|k| *k == key.as_slice()),
            _ => None,
        };
        let mut taken = Vec::new();
        let mut kept = Vec::new();
        for mut o in self.owed.drain_from(since) {
            let Some(i) = index(&o.invalidation) else {
                kept.push(o);
                continue;
            };
            // This shard the origin: its own channels carry them either way.
            // Else a third shard's waits there for this shard's channel.
            if origin != me && o.shard != origin && o.shard != me {
                let sent = crate::mesh::forward::position_for(outbox, o.shard);
                o.invalidation.after = Some(After { owner: me, sent });
            }
            taken.push((i as u16, o.shard, o.invalidation));
        }
        self.owed.extend(kept);
        taken
    }

    /// This shard, the origin of a write split into `parts` parts (reply slot
    /// `seq` of connection `who`; `order`: each key's part, in the command's
    /// order), gathers the invalidations its parts owe until every part
    /// answered ([`split_answered`](Self::split_answered)).
    pub fn split_started(&mut self, who: Who, seq: u64, parts: usize, order: Vec<u16>) {
        let split = Split {
            parts_left: parts,
            order,
            items: Vec::new(),
        };
        self.splits.insert((who.0, who.1, seq), split);
    }

    /// This shard coordinated command `ticket`, which wrote borrowed keys of
    /// `owners` other shards (each answers with what it owes: a
    /// [`gather_answered`](Self::gather_answered)) and owes `mine` itself, each
    /// with its key's place among the written keys; `held`: its writers whose
    /// reply slots wait for it.
    pub fn gather_started(
        &mut self,
        to: &mut Deliver<'_>,
        conns: &mut Slab<Conn>,
        ticket: u64,
        owners: usize,
        (mine, held): (Vec<(u32, usize, Invalidation)>, Vec<HeldWriter>),
    ) {
        let gather = Gather {
            owners_left: owners,
            items: mine,
            held,
        };
        if owners == 0 {
            // Its own keys only: in order now, delivered with the rest.
            return self.gathered(to, conns, gather, false);
        }
        self.gathers.insert(ticket, gather);
    }

    /// An owner answered coordinated command `ticket` with what it owes; once
    /// every one did, the command's invalidations go out in write order: to
    /// clients of this shard at once (the writer's after its reply, which
    /// went when the command ran), to others one message each on this
    /// shard's channel.
    pub fn gather_answered(
        &mut self,
        to: &mut Deliver<'_>,
        conns: &mut Slab<Conn>,
        ticket: u64,
        owed: Vec<(u32, usize, Invalidation)>,
    ) {
        let Some(gather) = self.gathers.get_mut(&ticket) else {
            return;
        };
        gather.items.extend(owed);
        gather.owners_left -= 1;
        if gather.owners_left > 0 {
            return;
        }
        let gather = self.gathers.remove(&ticket).expect("present");
        self.gathered(to, conns, gather, true);
    }

    /// Send a gather's items in the order of their places: a held writer's
    /// own into its reply slot (right after its reply, or before it when
    /// another command's write caused it before the writer's ran), then the
    /// slot goes; the others now when `now`, else into the owed list
    /// (delivered once per loop iteration: the write was answered at once, a
    /// writer not held takes its own after its reply from there).
    fn gathered(
        &mut self,
        to: &mut Deliver<'_>,
        conns: &mut Slab<Conn>,
        gather: Gather,
        now: bool,
    ) {
        let Gather {
            mut items, held, ..
        } = gather;
        items.sort_by_key(|&(at, ..)| at);
        // Per held writer: the bytes before its reply and after it.
        let mut around: Vec<(Vec<u8>, Vec<u8>)> = vec![Default::default(); held.len()];
        for (at, shard, invalidation) in items {
            let writer = match shard == self.me {
                true => self.held_writer(&held, at, invalidation.client_id),
                false => None,
            };
            // A writer answered at once is out of the slab while its
            // command ends (then nothing waits: it takes its own after its
            // reply from the owed list).
            let held_conn = match writer {
                Some((w, after)) => {
                    let conn = conns.get_mut(held[w].who.0, held[w].who.1);
                    conn.map(|conn| (conn, w, after))
                }
                None => None,
            };
            match held_conn {
                Some((conn, w, after)) => {
                    let (before_bytes, after_bytes) = &mut around[w];
                    let sink = if after { after_bytes } else { before_bytes };
                    let passed =
                        to_tracking_client(to.directory, &mut conn.client, sink, invalidation);
                    if let Some(passed) = passed {
                        self.pass_on(to, conns, passed);
                    }
                }
                None if !now => self.owed.push(Owed {
                    shard,
                    invalidation,
                }),
                None if shard == self.me => self.deliver(to, conns, invalidation),
                None => to.outbox.invalidate(shard, invalidation),
            }
        }
        for (w, (before, after)) in held.iter().zip(around) {
            let Some(conn) = conns.get_mut(w.who.0, w.who.1) else {
                continue;
            };
            if !before.is_empty() {
                conn.replies.put_before(w.seq, &before);
            }
            if !after.is_empty() {
                conn.replies.put_after(w.seq, &after);
            }
            conn.replies.let_go(w.seq);
            to.dirty.push(w.who);
            crate::net::outlimit::enforce(to.limits, to.now_ms, to.dirty, conn, w.who);
        }
    }

    /// The held writer whose slot takes an invalidation for client
    /// `client_id` of this shard caused at place `at`, and whether it goes
    /// after its reply: the writer whose write caused it, else the client's
    /// first held command that ran after that write (before its reply: Redis
    /// sent it before that command ran), else its last (after it).
    fn held_writer(&self, held: &[HeldWriter], at: u32, client_id: u64) -> Option<(usize, bool)> {
        let here = self.conns.get(&client_id)?;
        let theirs = held
            .iter()
            .enumerate()
            .filter(|(_, w)| w.client_id == client_id && w.who == *here);
        let mut last = None;
        for (i, w) in theirs {
            if w.places.contains(&at) {
                return Some((i, true));
            }
            if w.places.start > at {
                return Some((i, false));
            }
            last = Some(i);
        }
        last.map(|i| (i, true))
    }

    /// Some split write is gathering here.
    pub fn splitting(&self) -> bool {
        !self.splits.is_empty()
    }

    /// Invalidations part `part` of a split write owes (`items`: index of the
    /// key in the part, the client's shard, the message). Without its split
    /// gathering here (nobody tracked when it started) they go out as any.
    pub fn split_owed(
        &mut self,
        who: Who,
        seq: u64,
        part: u16,
        items: impl Iterator<Item = (u16, usize, Invalidation)>,
    ) {
        match self.splits.get_mut(&(who.0, who.1, seq)) {
            Some(split) => split
                .items
                .extend(items.map(|(i, shard, inv)| (part, i, shard, inv))),
            None => self.owed.extend(items.map(|(_, shard, invalidation)| Owed {
                shard,
                invalidation,
            })),
        }
    }

    /// [`split_owed`](Self::split_owed) for what came from another shard.
    pub fn split_owed_from(&mut self, owed: Vec<PartOwed>) {
        for o in owed {
            let item = (o.index, o.shard, o.invalidation);
            let who = (o.tag.conn, o.tag.gen);
            self.split_owed(who, o.tag.seq, o.tag.part, std::iter::once(item));
        }
    }

    /// The split write's part stays out (a key of it was lent: it runs
    /// later): what it gathered goes out in the usual way, and so do the rest.
    pub fn split_abandoned(&mut self, who: Who, seq: u64) {
        if let Some(split) = self.splits.remove(&(who.0, who.1, seq)) {
            self.owed
                .extend(split.items.into_iter().map(|(_, _, shard, inv)| Owed {
                    shard,
                    invalidation: inv,
                }));
        }
    }

    /// The part of a split write that ran here, its origin, answered: other
    /// parts are still out (each part is another shard's).
    pub fn split_answered_here(&mut self, who: Who, seq: u64) {
        if let Some(split) = self.splits.get_mut(&(who.0, who.1, seq)) {
            assert!(split.parts_left > 1, "a split's other parts are out");
            split.parts_left -= 1;
        }
    }

    /// A part of a split write answered (before its reply is filled in): once
    /// every part did, its invalidations go out in the command's key order, as
    /// Redis sends them key by key while it writes: to the writer itself right
    /// after the command's reply (before the replies behind it), to another
    /// client of this shard at once, to a client of another shard as one
    /// message each, in that order, on this shard's channel.
    pub fn split_answered(
        &mut self,
        to: &mut Deliver<'_>,
        conns: &mut Slab<Conn>,
        who: Who,
        seq: u64,
    ) {
        let key = (who.0, who.1, seq);
        let Some(split) = self.splits.get_mut(&key) else {
            return;
        };
        split.parts_left -= 1;
        if split.parts_left > 0 {
            return;
        }
        let Split {
            order, mut items, ..
        } = self.splits.remove(&key).expect("present");
        // Where the `index`-th key of `part` stood in the command.
        let position = |part: u16, index: u16| {
            let mut seen = 0;
            for (at, &p) in order.iter().enumerate() {
                if p == part {
                    if seen == index {
                        return at;
                    }
                    seen += 1;
                }
            }
            order.len()
        };
        items.sort_by_cached_key(|&(part, index, ..)| position(part, index));
        let mut own = Vec::new();
        for (_, _, shard, inv) in items {
            if shard != self.me {
                to.outbox.invalidate(shard, inv);
                continue;
            }
            if self.conns.get(&inv.client_id) != Some(&who) {
                self.deliver(to, conns, inv);
                continue;
            }
            let Some(conn) = conns.get_mut(who.0, who.1) else {
                continue;
            };
            if let Some(passed) = to_tracking_client(to.directory, &mut conn.client, &mut own, inv)
            {
                self.pass_on(to, conns, passed);
            }
        }
        if own.is_empty() {
            return;
        }
        if let Some(conn) = conns.get_mut(who.0, who.1) {
            conn.replies.put_after(seq, &own);
            to.dirty.push(who);
            crate::net::outlimit::enforce(to.limits, to.now_ms, to.dirty, conn, who);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A part of a split write takes what it owes, with each key's index in
    /// the part: a third shard's tagged with where this shard's channel to
    /// it will stand once what is queued for it is sent. The origin puts the
    /// parts' keys back in the command's order.
    #[test]
    fn split_parts_owe_their_origin_in_key_order() {
        let mut owner = Tracking::new(1, usize::MAX);
        for (shard, id) in [(0, 7), (1, 8), (2, 9)] {
            owner.remember(shard, id, [b"b".as_slice(), b"d".as_slice()].into_iter());
        }
        let since = owner.owed_len();
        owner.written(5, false, b"d");
        owner.written(5, false, b"b");
        let part_keys: [&[u8]; 2] = [b"b", b"d"];
        // One message queued for shard 2 (a read's reply batch, say).
        let mut outbox = Outbox::new(1, 3);
        outbox.invalidate(2, Invalidation::default());
        let taken = owner.take_part_owed(since, 0, &part_keys, &outbox);
        let shown: Vec<(u16, usize, Option<After>)> =
            taken.iter().map(|t| (t.0, t.1, t.2.after)).collect();
        let after = Some(After { owner: 1, sent: 1 });
        let expected = [(1, 0, None), (1, 1, None), (1, 2, after)];
        let expected_b = [(0, 0, None), (0, 1, None), (0, 2, after)];
        assert_eq!(shown, [expected, expected_b].concat());
        assert!(!owner.owes());

        // The origin (shard 0): MSET a b c d, a and c its own (part 0), b and
        // d shard 1's (part 1).
        let mut origin = Tracking::new(0, usize::MAX);
        origin.split_started((3, 1), 0, 2, vec![0, 1, 0, 1]);
        assert!(origin.splitting());
        let inv = |key: &[u8]| Invalidation {
            client_id: 7,
            keys: Some(vec![key.to_vec()]),
            from_table: true,
            redirected: None,
            after: None,
        };
        let mine = [(1, 1, inv(b"c")), (0, 1, inv(b"a"))];
        origin.split_owed((3, 1), 0, 0, mine.into_iter());
        origin.split_answered_here((3, 1), 0);
        let theirs = [(1, 1, inv(b"d")), (0, 1, inv(b"b"))];
        origin.split_owed((3, 1), 0, 1, theirs.into_iter());
        let split = &origin.splits[&(3, 1, 0)];
        assert_eq!(split.parts_left, 1);
        assert_eq!(split.items.len(), 4);
        // Without its split gathering here, what a part owes goes out as any.
        origin.split_abandoned((3, 1), 0);
        assert!(!origin.splitting());
        assert_eq!(origin.take_owed_to(1, 7).len(), 4);
    }

    #[test]
    fn a_held_writer_takes_its_own_around_its_reply() {
        let mut t = Tracking::new(0, usize::MAX);
        t.conns.insert(7, (1, 1));
        t.conns.insert(8, (2, 1));
        let writer = |who, seq, client_id, places| HeldWriter {
            who,
            seq,
            client_id,
            places,
        };
        // Client 7's EXEC wrote places 0..2, client 8's rode on it (2..4),
        // then client 7's next EXEC (4..6).
        let held = [
            writer((1, 1), 10, 7, 0..2),
            writer((2, 1), 3, 8, 2..4),
            writer((1, 1), 11, 7, 4..6),
        ];
        assert_eq!(t.held_writer(&held, 1, 7), Some((0, true)));
        assert_eq!(t.held_writer(&held, 3, 7), Some((2, false)));
        assert_eq!(t.held_writer(&held, 5, 7), Some((2, true)));
        assert_eq!(t.held_writer(&held, 0, 8), Some((1, false)));
        assert_eq!(t.held_writer(&held, 5, 8), Some((1, true)));
        assert_eq!(t.held_writer(&held, 0, 9), None);
        // A client id now on another connection is not the writer's.
        t.conns.insert(8, (5, 2));
        assert_eq!(t.held_writer(&held, 2, 8), None);
    }
}
