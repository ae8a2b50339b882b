//! A coordinated command's answer delivered to its client, and the commands that
//! wait: a blocking command on borrowed keys (BLMOVE, BLMPOP ...) parked until a
//! key it waits for is written or it times out, the owners' WATCH of its keys,
//! and CLIENT UNBLOCK and a closed connection ending the wait. Apart from
//! `coordinate.rs` because waiting is its own state machine around a borrowing.

use super::coordinate::{advance, row};
use crate::mesh::lending::{CrossOp, Waiting, WatchRequest};
use crate::net::conn::Conn;
use crate::net::slab::Slab;
use crate::shard::blocking::Waiter;
use crate::shard::exec;
use crate::shard::ShardCore;

/// The reply to a command on borrowed keys and the client's slot it fills (kept
/// aside under `always` until its writes are on disk, see [`durable`]).
#[derive(Debug)]
pub struct Answer {
    /// The op that ran it (a command still starting answers at once).
    pub(super) ticket: u64,
    /// Connection `(index, gen)` and its held reply slot.
    pub(super) conn: (u32, u32),
    pub(super) seq: u64,
    pub(super) client_id: u64,
    pub(super) reply: Vec<u8>,
}

impl Answer {
    pub(super) fn of(ticket: u64, op: &CrossOp, reply: Vec<u8>) -> Answer {
        Answer {
            ticket,
            conn: op.conn,
            seq: op.seq,
            client_id: op.caller.client_id,
            reply,
        }
    }
}

/// Fill the client's held slot and let its connection go on.
pub(super) fn answer(
    core: &mut ShardCore,
    conns: &mut Slab<Conn>,
    ticket: u64,
    op: &CrossOp,
    reply: Vec<u8>,
) {
    deliver(core, conns, Answer::of(ticket, op, reply));
}

/// Fill the client's held slot with `answer` and let its connection go on (when
/// its command is still starting, the reply goes back to [`start`] instead); a
/// client whose transaction on borrowed keys this answers goes on too.
pub fn deliver(core: &mut ShardCore, conns: &mut Slab<Conn>, answer: Answer) {
    core.shared.note_blocked(answer.client_id, None);
    if core.lending.starting == Some((answer.ticket, answer.conn)) {
        core.lending.answered_at_once = Some(answer.reply);
        return;
    }
    let (index, gen) = answer.conn;
    if let Some(conn) = conns.get_mut(index, gen) {
        conn.replies.fill(answer.seq, 0, answer.reply);
        if conn
            .client
            .borrowing_tx
            .is_some_and(|(_, last)| last == answer.seq)
        {
            conn.client.borrowing_tx = None;
        }
        core.reply_filled(conn, (index, gen), answer.seq);
    }
}

/// A blocking command found nothing: ask the owners of the keys it waits on to
/// watch them, and try again when one of them is written.
pub(super) fn wait(
    core: &mut ShardCore,
    conns: &mut Slab<Conn>,
    ticket: u64,
    mut op: CrossOp,
    block: ruvio_engine::command::Block,
) {
    if !block.rewrite.is_empty() {
        if op.sent_argv.is_none() {
            op.sent_argv = Some(op.argv.clone());
        }
        op.argv = crate::shard::exec::parked_argv(op.argv.args(), &block.rewrite);
    }
    let args = op.argv.args();
    let mut per_owner: Vec<(usize, Vec<Vec<u8>>)> = Vec::new();
    for &position in &block.keys {
        let key = args.get(position).to_vec();
        let owner = core.topo.key_owner(&key);
        match per_owner.iter_mut().find(|(o, _)| *o == owner) {
            Some((_, keys)) => keys.push(key),
            None => per_owner.push((owner, vec![key])),
        }
    }
    let deadline_ms = match &op.waiting {
        Some(w) => w.deadline_ms,
        None => block.deadline_ms,
    };
    op.waiting = Some(Waiting {
        deadline_ms,
        watchers: per_owner.iter().map(|(o, _)| *o).collect(),
        watching: true,
    });
    op.next = 0;
    let db = op.caller.db;
    core.shared.note_blocked(op.caller.client_id, Some(core.id));
    core.lending.ops.insert(ticket, op);
    for (owner, keys) in per_owner {
        let request = WatchRequest {
            from: core.id,
            ticket,
            db,
            keys,
        };
        if owner == core.id {
            watch(core, conns, request);
        } else {
            core.outbox.watch(owner, request);
        }
    }
}

/// An owner's side: watch keys for a coordinator; a key that already exists wakes
/// it at once (it was written between the try and the watch).
pub fn watch(core: &mut ShardCore, conns: &mut Slab<Conn>, request: WatchRequest) {
    let present = request
        .keys
        .iter()
        .any(|k| core.engine.exists_for_waiter(request.db, k, core.now_ms));
    if present {
        return wake(core, conns, request.from, request.ticket);
    }
    let waiter = Waiter::Watch {
        shard: request.from,
        ticket: request.ticket,
    };
    exec::park_watch(core, waiter, request.db, request.keys);
}

/// An owner's side: the coordinator no longer needs the watch `ticket`.
pub fn unwatch(core: &mut ShardCore, from: usize, ticket: u64) {
    exec::drop_waiter(core, |w| {
        *w == Waiter::Watch {
            shard: from,
            ticket,
        }
    });
}

/// Tell coordinator `shard` that a key of its command `ticket` was written.
pub fn wake(core: &mut ShardCore, conns: &mut Slab<Conn>, shard: usize, ticket: u64) {
    if shard == core.id {
        retry(core, conns, ticket);
    } else {
        core.outbox.wake(shard, ticket);
    }
}

/// The coordinator's side: a watched key was written; drop the other watches and
/// try the command again.
pub fn retry(core: &mut ShardCore, conns: &mut Slab<Conn>, ticket: u64) {
    let Some(op) = core.lending.ops.get_mut(&ticket) else {
        return;
    };
    let Some(waiting) = op.waiting.as_mut().filter(|w| w.watching) else {
        return; // already trying again
    };
    waiting.watching = false;
    let watchers = std::mem::take(&mut waiting.watchers);
    drop_watches(core, ticket, &watchers);
    advance(core, conns, ticket);
}

pub(super) fn drop_watches(core: &mut ShardCore, ticket: u64, watchers: &[usize]) {
    for &owner in watchers {
        if owner == core.id {
            unwatch(core, owner, ticket);
        } else {
            core.outbox.unwatch(owner, core.id, ticket);
        }
    }
}

/// Time out the waiting cross-shard blocking commands whose deadline passed.
pub fn expire(core: &mut ShardCore, conns: &mut Slab<Conn>) {
    let now = core.now_ms;
    let due: Vec<u64> = core
        .lending
        .ops
        .iter()
        .filter(|(_, op)| {
            let deadline = op.waiting.as_ref().and_then(|w| w.deadline_ms);
            op.is_parked() && deadline.is_some_and(|at| at <= now)
        })
        .map(|(&t, _)| t)
        .collect();
    for ticket in due {
        answer_early(core, conns, ticket, false);
    }
}

/// CLIENT UNBLOCK of a client waiting in a cross-shard blocking command here.
pub fn unblock(core: &mut ShardCore, conns: &mut Slab<Conn>, client_id: u64, error: bool) -> bool {
    let found = core
        .lending
        .ops
        .iter()
        .find(|(_, op)| op.caller.client_id == client_id && op.is_parked())
        .map(|(&t, _)| t);
    match found {
        Some(ticket) => {
            // Recorded as Redis 7.0 records a client CLIENT UNBLOCK answers.
            let parked = core.lending.ops.get(&ticket);
            if let Some((cmd, Some(first_ns))) = parked.map(|op| (row(op), op.first_run_ns)) {
                let served = exec::Served {
                    client_id,
                    first_ns,
                    ns: Some(0),
                    reply_bytes: 0,
                };
                exec::observe_served(core, cmd, None, served);
            }
            answer_early(core, conns, ticket, error);
            true
        }
        None => false,
    }
}

/// The client of connection `(index, gen)` went away: stop waiting for it.
pub fn forget(core: &mut ShardCore, index: u32, gen: u32) {
    let gone: Vec<u64> = core
        .lending
        .ops
        .iter()
        .filter(|(_, op)| op.conn == (index, gen) && op.is_parked())
        .map(|(&t, _)| t)
        .collect();
    for ticket in gone {
        if let Some(op) = core.lending.ops.remove(&ticket) {
            let watchers = op.waiting.map(|w| w.watchers).unwrap_or_default();
            drop_watches(core, ticket, &watchers);
            core.shared.note_blocked(op.caller.client_id, None);
        }
    }
}

/// Answer a waiting command without data (timeout, CLIENT UNBLOCK).
pub(super) fn answer_early(core: &mut ShardCore, conns: &mut Slab<Conn>, ticket: u64, error: bool) {
    let Some(op) = core.lending.ops.remove(&ticket) else {
        return;
    };
    let watchers = op
        .waiting
        .as_ref()
        .map(|w| w.watchers.clone())
        .unwrap_or_default();
    drop_watches(core, ticket, &watchers);
    answer(
        core,
        conns,
        ticket,
        &op,
        exec::early_reply(op.caller.proto, error),
    );
}
