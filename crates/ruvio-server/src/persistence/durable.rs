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

use crate::mesh::forward::Tag;
use crate::mesh::lending::{self, Answer};
use crate::net::conn::{Conn, Merge, ReplyQueue};
use crate::net::slab::Slab;
use crate::shard::blocking::Waiter;
use crate::shard::ShardCore;

/// Replies waiting for their log group.
#[derive(Debug, Default)]
pub struct Gated {
    /// `(group, connection index, generation, gate seq)`, groups ascending.
    local: Vec<(u64, u32, u32, u64)>,
    /// `(group, origin shard, tag, reply)` of forwarded writes.
    remote: Vec<(u64, usize, Tag, Vec<u8>)>,
    /// `(group, waiter, reply)` of blocked commands served by a later write.
    served: Vec<(u64, Waiter, Vec<u8>)>,
    /// `(group, script's shard, ticket, reply)` of commands run for another shard's
    /// script or transaction ([`reply_ran_now`]).
    ran_now: Vec<(u64, usize, u64, Vec<u8>)>,
    /// Replies of commands on borrowed keys this shard coordinated.
    borrowed: Vec<HeldBorrowed>,
    /// `(group, coordinator, ticket)`: acknowledgements to send once the group
    /// holding the records of keys given back is durable, groups ascending.
    acks: Vec<(u64, usize, u64)>,
}

/// The reply of a command on borrowed keys, waiting for its writes' groups.
#[derive(Debug)]
struct HeldBorrowed {
    ticket: u64,
    /// This shard's group holding its records, if it logged any.
    group: Option<u64>,
    /// Owners that have not acknowledged yet.
    owners_left: usize,
    /// Its reply, and those of the transactions that rode on its keys.
    answers: Vec<Answer>,
}

/// Under `always`, before a command on borrowed keys runs: how much this shard's
/// log holds now (whatever grows past it is the command's); `None` otherwise.
pub fn borrowed_mark(core: &ShardCore) -> Option<usize> {
    core.wal
        .as_ref()
        .filter(|w| w.gates_replies())
        .map(|w| w.filling_bytes())
}

/// A command on borrowed keys ran and sent its keys home, `owners` of them asked
/// to acknowledge their records: answer now, or (under `always`, with a `mark`)
/// once this shard's group and every acknowledgement are in. `answers` are its
/// reply and those of the transactions that rode on its keys, in order.
pub fn answer_borrowed(
    core: &mut ShardCore,
    conns: &mut Slab<Conn>,
    ticket: u64,
    mark: Option<usize>,
    owners: usize,
    answers: Vec<Answer>,
) {
    let group = mark.and_then(|before| {
        core.wal
            .as_ref()
            .filter(|w| w.filling_bytes() > before)
            .map(|w| w.open_group())
    });
    if group.is_none() && owners == 0 {
        for answer in answers {
            lending::deliver(core, conns, answer);
        }
        return;
    }
    core.gated.borrowed.push(HeldBorrowed {
        ticket,
        group,
        owners_left: owners,
        answers,
    });
}

/// An owner's side: keys of coordinator `from`'s command `ticket` came home with
/// their records, logged past `mark`: acknowledge once they are durable (now when
/// they need no wait: nothing logged, or the log does not gate replies).
pub fn acknowledge_given_back(core: &mut ShardCore, from: usize, ticket: u64, mark: usize) {
    match logged_group(core, mark) {
        Some(group) => core.gated.acks.push((group, from, ticket)),
        None => core.outbox.durable(from, ticket),
    }
}

/// The coordinator's side: an owner has the records of command `ticket` on disk.
pub fn acknowledged(core: &mut ShardCore, conns: &mut Slab<Conn>, ticket: u64) {
    if let Some(held) = core.gated.borrowed.iter_mut().find(|h| h.ticket == ticket) {
        held.owners_left = held.owners_left.saturating_sub(1);
    }
    release_borrowed(core, conns);
}

/// Answer the held borrowed commands whose every group is durable.
fn release_borrowed(core: &mut ShardCore, conns: &mut Slab<Conn>) {
    if core.gated.borrowed.is_empty() {
        return;
    }
    let durable = core.wal.as_ref().map_or(u64::MAX, |w| w.durable_group());
    let (ready, waiting): (Vec<_>, Vec<_>) = std::mem::take(&mut core.gated.borrowed)
        .into_iter()
        .partition(|h| h.owners_left == 0 && h.group.is_none_or(|g| g <= durable));
    core.gated.borrowed = waiting;
    for answer in ready.into_iter().flat_map(|held| held.answers) {
        lending::deliver(core, conns, answer);
    }
}

/// A blocked command just served (BLPOP woken by a push): under `always`, when
/// it logged a record (the pop), its reply is kept until that record's group is
/// durable; otherwise it is handed back to be delivered now.
pub fn hold_served(
    core: &mut ShardCore,
    waiter: Waiter,
    reply: Vec<u8>,
    filling_before: usize,
) -> Option<(Waiter, Vec<u8>)> {
    match logged_group(core, filling_before) {
        Some(group) => {
            core.gated.served.push((group, waiter, reply));
            None
        }
        None => Some((waiter, reply)),
    }
}

/// Before a write runs on a local connection under `always`: the gate its reply
/// will queue behind (the connection's current one when it is still the last
/// held slot and belongs to the open group), or `None` without `always`.
pub fn open_gate(core: &ShardCore, replies: &mut ReplyQueue) -> Option<Gate> {
    let wal = core.wal.as_ref().filter(|w| w.gates_replies())?;
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
pub fn open_parts_gate(
    core: &ShardCore,
    replies: &mut ReplyQueue,
    cmd: &crate::cmd::registry::Command,
) -> Option<Gate> {
    if !cmd.meta.has(ruvio_engine::command::flags::WRITE) {
        return None;
    }
    open_gate(core, replies)
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
pub fn close_gate(core: &mut ShardCore, replies: &mut ReplyQueue, who: (u32, u32), gate: Gate) {
    let logged = core
        .wal
        .as_ref()
        .is_some_and(|w| w.filling_bytes() > gate.filling_before);
    if gate.reused {
        return;
    }
    if logged {
        replies.last_gate = Some((gate.seq, gate.group));
        core.gated.local.push((gate.group, who.0, who.1, gate.seq));
    } else {
        replies.fill(gate.seq, 0, Vec::new());
    }
}

/// A forwarded write's reply: sent now, or once its group is durable when it logged.
pub fn reply_forwarded(
    core: &mut ShardCore,
    to: usize,
    tag: Tag,
    reply: &[u8],
    filling_before: usize,
) {
    match logged_group(core, filling_before) {
        Some(group) => core.gated.remote.push((group, to, tag, reply.to_vec())),
        None => core.outbox.reply(to, tag, reply),
    }
}

/// The reply to another shard's `RunNow` (a script's or a locked transaction's
/// FLUSHALL ...): sent now, or once its group is durable when it logged.
pub fn reply_ran_now(
    core: &mut ShardCore,
    to: usize,
    ticket: u64,
    reply: Vec<u8>,
    filling_before: usize,
) {
    match logged_group(core, filling_before) {
        Some(group) => core.gated.ran_now.push((group, to, ticket, reply)),
        None => core.outbox.ran_now(to, ticket, reply),
    }
}

/// Under `always`, the open group when the log grew past `filling_before` (what
/// ran since logged something): the group the reply waits for.
fn logged_group(core: &ShardCore, filling_before: usize) -> Option<u64> {
    core.wal
        .as_ref()
        .filter(|w| w.gates_replies() && w.filling_bytes() > filling_before)
        .map(|w| w.open_group())
}

/// Release every reply whose group is durable now.
pub fn release(core: &mut ShardCore, conns: &mut Slab<Conn>) {
    let Some(durable) = core.wal.as_ref().map(|w| w.durable_group()) else {
        return;
    };
    let ready = core.gated.local.partition_point(|g| g.0 <= durable);
    for (_, index, gen, seq) in core.gated.local.drain(..ready) {
        if let Some(conn) = conns.get_mut(index, gen) {
            conn.replies.fill(seq, 0, Vec::new());
            core.dirty.push((index, gen));
        }
    }
    let ready = core.gated.remote.partition_point(|g| g.0 <= durable);
    for (_, to, tag, reply) in core.gated.remote.drain(..ready) {
        core.outbox.reply(to, tag, &reply);
    }
    let ready = core.gated.served.partition_point(|g| g.0 <= durable);
    let served: Vec<_> = core.gated.served.drain(..ready).collect();
    for (_, waiter, reply) in served {
        crate::shard::exec::deliver(core, conns, waiter, reply);
    }
    let ready = core.gated.ran_now.partition_point(|g| g.0 <= durable);
    for (_, to, ticket, reply) in core.gated.ran_now.drain(..ready) {
        core.outbox.ran_now(to, ticket, reply);
    }
    let ready = core.gated.acks.partition_point(|g| g.0 <= durable);
    for (_, coordinator, ticket) in core.gated.acks.drain(..ready) {
        core.outbox.durable(coordinator, ticket);
    }
    release_borrowed(core, conns);
}
