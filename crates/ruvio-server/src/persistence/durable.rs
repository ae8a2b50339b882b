//! `--durability always`: a write's reply, and every later reply of its
//! connection, is released only once the log group holding the write is on disk.
//!
//! No reply bytes are copied aside for this: the connection's reply queue already
//! releases replies in request order behind held slots (forwarded commands use
//! them), so a logged write is preceded by a **gate**, a held slot with no bytes of
//! its own. The write's reply and everything after it queue behind the gate; when
//! the shard's fdatasync of that group completes, [`release`] fills the gate and the
//! queue sends them. A pipeline of writes in one loop iteration shares one gate (they
//! share one group). A write forwarded from another shard is answered only after its
//! group is durable (its reply waits here, then goes out in a reply batch); the
//! origin's queue keeps the order. A blocked command served by a later write
//! (BLPOP woken by a push) logs its pop, and its reply waits for that group too.
//! Reads never wait for the log: a read on a connection with no pending write is
//! answered at once.
//!
//! A command on keys borrowed across shards (`lending.rs`) changes keys whose
//! records their owners log when the keys come home, in the owners' own groups.
//! Its coordinator keeps the reply aside (the client's later replies queue behind
//! its held slot) until its own group, if it
//! logged anything, is durable and every owner that got records acknowledged that
//! the group holding them is ([`answer_borrowed`], [`acknowledged`]): the owner
//! notes `(group, coordinator, ticket)` and sends the acknowledgement from
//! [`release`]. Without `always` none of this runs: the keys go home as before and
//! the reply goes out at once.
//!
//! A write whose parts run on several shards (MSET or DEL split by owner, FLUSHALL
//! on every shard) merges its parts into one held slot; the forwarded parts come
//! back once durable, and the part run here gets a gate before that slot
//! ([`open_parts_gate`]), so the merged reply waits for this shard's group too.
//!
//! A command of every shard that a script or a transaction under the script lock
//! runs on the other shards at once (FLUSHALL, FLUSHDB: `ShardMsg::RunNow`) is
//! answered by each of them once the group holding its record is durable
//! ([`reply_ran_now`]): the script waits on its thread meanwhile, so its reply, and
//! the transaction's, come after every shard's part is on disk.
//!
//! The held replies are the log's; where each goes once its group is durable (a
//! connection, another shard, a woken blocked client, a borrowed command's
//! answer) is the shard's, behind [`Release`], which the shard implements
//! (`shard/release.rs`): this subsystem names nothing above it. The gate itself,
//! on the request path, takes the log and the reply queue only.

use crate::net::conn::{Conn, Merge, ReplyQueue};
use crate::net::slab::Slab;
use crate::persistence::wal::Wal;

/// Replies waiting for their log group. `T`: a forwarded command's tag, `W`: a
/// blocked command's waiter, `A`: a borrowed command's answer ([`Release`]'s
/// types, which the shard names).
#[derive(Debug)]
pub struct Gated<T, W, A> {
    /// `(group, connection index, generation, gate seq)`, groups ascending.
    local: Vec<(u64, u32, u32, u64)>,
    /// `(group, origin shard, tag, reply)` of forwarded writes.
    remote: Vec<(u64, usize, T, Vec<u8>)>,
    /// `(group, waiter, reply)` of blocked commands served by a later write.
    served: Vec<(u64, W, Vec<u8>)>,
    /// `(group, script's shard, ticket, reply)` of commands run for another shard's
    /// script or transaction ([`reply_ran_now`]).
    ran_now: Vec<(u64, usize, u64, Vec<u8>)>,
    /// Replies of commands on borrowed keys this shard coordinated.
    borrowed: Vec<HeldBorrowed<A>>,
    /// `(group, coordinator, ticket)`: acknowledgements to send once the group
    /// holding the records of keys given back is durable, groups ascending.
    acks: Vec<(u64, usize, u64)>,
}

impl<T, W, A> Default for Gated<T, W, A> {
    fn default() -> Self {
        Gated {
            local: Vec::new(),
            remote: Vec::new(),
            served: Vec::new(),
            ran_now: Vec::new(),
            borrowed: Vec::new(),
            acks: Vec::new(),
        }
    }
}

/// The reply of a command on borrowed keys, waiting for its writes' groups.
#[derive(Debug)]
struct HeldBorrowed<A> {
    ticket: u64,
    /// This shard's group holding its records, if it logged any.
    group: Option<u64>,
    /// Owners that have not acknowledged yet.
    owners_left: usize,
    /// Its reply, and those of the transactions that rode on its keys.
    answers: Vec<A>,
}

/// The held replies of a [`Release`] implementor.
pub type GatedOf<R> = Gated<<R as Release>::Tag, <R as Release>::Waiter, <R as Release>::Answer>;

/// Where a held reply goes, now or once its group is durable: the shard
/// implements it (`shard/release.rs`); generic, not dyn.
pub trait Release {
    /// A forwarded command's tag (the mesh's).
    type Tag;
    /// A blocked command's waiter (the shard's).
    type Waiter;
    /// A command on borrowed keys' answer (the mesh's lending).
    type Answer;
    /// The shard's log, if it keeps one.
    fn log(&self) -> Option<&Wal>;
    /// The shard's held replies.
    fn gated(&mut self) -> &mut Gated<Self::Tag, Self::Waiter, Self::Answer>;
    /// Connection `who`'s replies changed: flush them.
    fn mark_dirty(&mut self, who: (u32, u32));
    /// Send a forwarded write's reply back to shard `to`.
    fn reply(&mut self, to: usize, tag: Self::Tag, reply: &[u8]);
    /// Send the reply to shard `to`'s `RunNow`.
    fn ran_now(&mut self, to: usize, ticket: u64, reply: Vec<u8>);
    /// Tell coordinator `to` that the records of its command `ticket` are durable.
    fn acknowledge(&mut self, to: usize, ticket: u64);
    /// Deliver a served blocked command's reply.
    fn deliver(&mut self, conns: &mut Slab<Conn>, waiter: Self::Waiter, reply: Vec<u8>);
    /// Deliver a borrowed command's answer.
    fn answer(&mut self, conns: &mut Slab<Conn>, answer: Self::Answer);
}

/// Under `always`, before a command on borrowed keys runs: how much this shard's
/// log holds now (whatever grows past it is the command's); `None` otherwise.
pub fn borrowed_mark(wal: Option<&Wal>) -> Option<usize> {
    wal.filter(|w| w.gates_replies()).map(|w| w.filling_bytes())
}

/// A command on borrowed keys ran and sent its keys home, `owners` of them asked
/// to acknowledge their records: answer now, or (under `always`, with a `mark`)
/// once this shard's group and every acknowledgement are in. `answers` are its
/// reply and those of the transactions that rode on its keys, in order.
pub fn answer_borrowed<R: Release>(
    core: &mut R,
    conns: &mut Slab<Conn>,
    ticket: u64,
    mark: Option<usize>,
    owners: usize,
    answers: Vec<R::Answer>,
) {
    let group = mark.and_then(|before| {
        core.log()
            .filter(|w| w.filling_bytes() > before)
            .map(|w| w.open_group())
    });
    if group.is_none() && owners == 0 {
        for answer in answers {
            core.answer(conns, answer);
        }
        return;
    }
    core.gated().borrowed.push(HeldBorrowed {
        ticket,
        group,
        owners_left: owners,
        answers,
    });
}

/// An owner's side: keys of coordinator `from`'s command `ticket` came home with
/// their records, logged past `mark`: acknowledge once they are durable (now when
/// they need no wait: nothing logged, or the log does not gate replies).
pub fn acknowledge_given_back<R: Release>(core: &mut R, from: usize, ticket: u64, mark: usize) {
    match logged_group(core.log(), mark) {
        Some(group) => core.gated().acks.push((group, from, ticket)),
        None => core.acknowledge(from, ticket),
    }
}

/// The coordinator's side: an owner has the records of command `ticket` on disk.
pub fn acknowledged<R: Release>(core: &mut R, conns: &mut Slab<Conn>, ticket: u64) {
    let borrowed = &mut core.gated().borrowed;
    if let Some(held) = borrowed.iter_mut().find(|h| h.ticket == ticket) {
        held.owners_left = held.owners_left.saturating_sub(1);
    }
    release_borrowed(core, conns);
}

/// Answer the held borrowed commands whose every group is durable.
fn release_borrowed<R: Release>(core: &mut R, conns: &mut Slab<Conn>) {
    if core.gated().borrowed.is_empty() {
        return;
    }
    let durable = core.log().map_or(u64::MAX, |w| w.durable_group());
    let (ready, waiting): (Vec<_>, Vec<_>) = std::mem::take(&mut core.gated().borrowed)
        .into_iter()
        .partition(|h| h.owners_left == 0 && h.group.is_none_or(|g| g <= durable));
    core.gated().borrowed = waiting;
    for answer in ready.into_iter().flat_map(|held| held.answers) {
        core.answer(conns, answer);
    }
}

/// A blocked command just served (BLPOP woken by a push): under `always`, when
/// it logged a record (the pop), its reply is kept until that record's group is
/// durable; otherwise it is handed back to be delivered now.
pub fn hold_served<R: Release>(
    core: &mut R,
    waiter: R::Waiter,
    reply: Vec<u8>,
    filling_before: usize,
) -> Option<(R::Waiter, Vec<u8>)> {
    match logged_group(core.log(), filling_before) {
        Some(group) => {
            core.gated().served.push((group, waiter, reply));
            None
        }
        None => Some((waiter, reply)),
    }
}

/// Before a write runs on a local connection under `always`: the gate its reply
/// will queue behind (the connection's current one when it is still the last
/// held slot and belongs to the open group), or `None` without `always`.
pub fn open_gate(wal: Option<&Wal>, replies: &mut ReplyQueue) -> Option<Gate> {
    let wal = wal.filter(|w| w.gates_replies())?;
    let group = wal.open_group();
    let reuse = replies
        .last_gate
        .filter(|&(seq, g)| g == group && replies.next_seq() == seq + 1);
    let seq = match reuse {
        Some((seq, _)) => seq,
        None => replies.hold(Merge::Single, 1),
    };
    Some(Gate {
        seq,
        group,
        reused: reuse.is_some(),
        filling_before: wal.filling_bytes(),
    })
}

/// Under `always`, before a write whose parts run on several shards (MSET, DEL,
/// FLUSHALL ... split or sent to every shard) queues its merged reply: a gate for
/// the part that runs here, so the reply also waits for this shard's group (the
/// other shards answer their parts once theirs are durable, [`reply_forwarded`]).
/// `writes`: the command is flagged `write`.
pub fn open_parts_gate(wal: Option<&Wal>, replies: &mut ReplyQueue, writes: bool) -> Option<Gate> {
    if !writes {
        return None;
    }
    open_gate(wal, replies)
}

/// A gate opened by [`open_gate`].
#[derive(Clone, Copy, Debug)]
pub struct Gate {
    seq: u64,
    group: u64,
    reused: bool,
    filling_before: usize,
}

/// After the write ran: if it logged something, its gate waits for the group;
/// a new gate whose command logged nothing opens at once.
pub fn close_gate<T, W, A>(
    gated: &mut Gated<T, W, A>,
    wal: Option<&Wal>,
    replies: &mut ReplyQueue,
    who: (u32, u32),
    gate: Gate,
) {
    let logged = wal.is_some_and(|w| w.filling_bytes() > gate.filling_before);
    if gate.reused {
        return;
    }
    if logged {
        replies.last_gate = Some((gate.seq, gate.group));
        gated.local.push((gate.group, who.0, who.1, gate.seq));
    } else {
        replies.fill(gate.seq, 0, Vec::new());
    }
}

/// A forwarded write's reply: sent now, or once its group is durable when it logged.
#[inline(always)]
pub fn reply_forwarded<R: Release>(
    core: &mut R,
    to: usize,
    tag: R::Tag,
    reply: &[u8],
    filling_before: usize,
) {
    match logged_group(core.log(), filling_before) {
        Some(group) => core.gated().remote.push((group, to, tag, reply.to_vec())),
        None => core.reply(to, tag, reply),
    }
}

/// The reply to another shard's `RunNow` (a script's or a locked transaction's
/// FLUSHALL ...): sent now, or once its group is durable when it logged.
pub fn reply_ran_now<R: Release>(
    core: &mut R,
    to: usize,
    ticket: u64,
    reply: Vec<u8>,
    filling_before: usize,
) {
    match logged_group(core.log(), filling_before) {
        Some(group) => core.gated().ran_now.push((group, to, ticket, reply)),
        None => core.ran_now(to, ticket, reply),
    }
}

/// Under `always`, the open group when the log grew past `filling_before` (what
/// ran since logged something): the group the reply waits for.
fn logged_group(wal: Option<&Wal>, filling_before: usize) -> Option<u64> {
    wal.filter(|w| w.gates_replies() && w.filling_bytes() > filling_before)
        .map(|w| w.open_group())
}

/// Hand each entry of one of `core`'s held lists (`list`) whose group
/// (`group_of`) is durable to `each`, in order; the others stay, followed by any
/// queued meanwhile. The list is taken out and put back: no copy, no allocation.
fn release_ready<R: Release, E>(
    core: &mut R,
    durable: u64,
    list: fn(&mut GatedOf<R>) -> &mut Vec<E>,
    group_of: fn(&E) -> u64,
    mut each: impl FnMut(&mut R, E),
) {
    let mut held = std::mem::take(list(core.gated()));
    let ready = held.partition_point(|e| group_of(e) <= durable);
    for entry in held.drain(..ready) {
        each(core, entry);
    }
    let meanwhile = list(core.gated());
    held.append(meanwhile);
    *meanwhile = held;
}

/// Release every reply whose group is durable now.
pub fn release<R: Release>(core: &mut R, conns: &mut Slab<Conn>) {
    let Some(durable) = core.log().map(|w| w.durable_group()) else {
        return;
    };
    release_ready(
        core,
        durable,
        |g| &mut g.local,
        |e| e.0,
        |core, e| {
            let (_, index, gen, seq) = e;
            if let Some(conn) = conns.get_mut(index, gen) {
                conn.replies.fill(seq, 0, Vec::new());
                core.mark_dirty((index, gen));
            }
        },
    );
    release_ready(
        core,
        durable,
        |g| &mut g.remote,
        |e| e.0,
        |core, e| {
            let (_, to, tag, reply) = e;
            core.reply(to, tag, &reply);
        },
    );
    release_ready(
        core,
        durable,
        |g| &mut g.served,
        |e| e.0,
        |core, e| {
            let (_, waiter, reply) = e;
            core.deliver(conns, waiter, reply);
        },
    );
    release_ready(
        core,
        durable,
        |g| &mut g.ran_now,
        |e| e.0,
        |core, e| {
            let (_, to, ticket, reply) = e;
            core.ran_now(to, ticket, reply);
        },
    );
    release_ready(
        core,
        durable,
        |g| &mut g.acks,
        |e| e.0,
        |core, e| {
            let (_, coordinator, ticket) = e;
            core.acknowledge(coordinator, ticket);
        },
    );
    release_borrowed(core, conns);
}
