//! EXEC of a transaction whose commands each touch one shard's keys, the queue as
//! a whole spanning several shards (forward mode): each shard runs its part of the
//! queue *in place*, on its own keyspace, instead of lending every key to the
//! client's shard ([`crate::mesh::lending`]).
//!
//! Why: borrowing moves every key out of its owner and back (four index operations
//! and two mesh messages per owner), which made an EXEC of ten SETs over two shards
//! run at 0.42x one Redis (records/transactions-2026-12-01-5.json). The parts share
//! no data (each command names the keys of one shard only), so running each
//! shard's subsequence of the queue in order gives the serial result; what is left
//! to arrange is that no client sees one part done and another not.
//!
//! How: strict two-phase locking in shard order, the writes applied at lock time.
//! The coordinator (the client's shard) visits the parts in ascending shard order.
//! Every part but the last runs at once on its shard and keeps its keys *held*
//! ([`crate::mesh::lending::Lending::held`]): any command touching them waits,
//! parked exactly as on a lent key, until the coordinator releases them
//! ([`Release`]). The last part runs and frees its keys at once; the coordinator
//! then releases the others and answers the whole array, merged in queue order. A
//! part whose keys are lent or held when it arrives waits on that shard (behind
//! everything its coordinator sent before it, [`crate::mesh::owner_tx::Deferred`])
//! and runs when they are free. Ascending order makes the waits acyclic, as for
//! borrowing: a transaction holds keys only of shards below the one it waits at.
//! A part may also run on keys held only by earlier transactions of its own
//! coordinator over the same shards (lock passing along a chain, bounded while
//! others wait: [`crate::mesh::lending::HeldKeys`]), so contended transactions
//! of one coordinator pass the keys on without a round trip each.
//!
//! Restricted to what it reproduces exactly (see `shard::multi::plan`): no WATCH,
//! keyspace commands only (no scripts, SELECT, server or every-shard commands),
//! each command on one shard's keys, the script lock free, and no records kept
//! (no log, no replication feed): the log and the replication stream see a
//! borrowed transaction as one group on the coordinator, which parts run on
//! their owners do not reproduce yet. Anything else borrows, as before.
//!
//! This file is the mesh's part: the messages and the tables the coordinator and
//! the owners keep; running the parts is the shard's (`shard/in_place.rs`).

use crate::mesh::lending::DbKey;
use crate::net::caller::Caller;
use crate::net::queued::Commands;
use std::sync::Arc;

/// One shard's part of a transaction run in place.
#[derive(Debug)]
pub struct Part {
    /// The coordinating shard, and its transaction.
    pub from: usize,
    pub ticket: u64,
    pub caller: Caller,
    /// The part's commands, in queue order.
    pub commands: Commands,
    /// Every key they name, `(db, key)`, sorted and without duplicates.
    pub keys: Vec<DbKey>,
    /// Keep the keys held after running, until [`Release`] (every part but the last).
    pub hold: bool,
    /// The shards of the transaction's parts, ascending: a part may run on keys
    /// held only by earlier transactions of its coordinator over the same shards
    /// (its chain, [`crate::mesh::lending::HeldKeys`]).
    pub shards: Arc<[usize]>,
}

/// A part ran: its commands' replies, one after the other, and where each ends.
#[derive(Debug)]
pub struct PartRan {
    pub ticket: u64,
    pub replies: Vec<u8>,
    pub ends: Vec<usize>,
}

/// Coordinator `from`'s transaction `ticket` is over: free the keys its part holds.
#[derive(Debug)]
pub struct Release {
    pub from: usize,
    pub ticket: u64,
}

/// A part as the coordinator plans it.
#[derive(Debug)]
pub struct PlannedPart {
    pub shard: usize,
    /// Taken when the part is sent.
    pub commands: Option<Commands>,
    pub keys: Vec<DbKey>,
    /// The queue positions of its commands.
    pub positions: Vec<usize>,
    /// Filled when it ran.
    pub replies: Vec<u8>,
    pub ends: Vec<usize>,
}

/// A transaction this shard coordinates in place.
#[derive(Debug)]
pub struct InPlaceOp {
    /// The client's connection `(index, gen)` and the EXEC's held reply slot.
    pub conn: (u32, u32),
    pub seq: u64,
    pub caller: Caller,
    /// How many commands the queue has.
    pub len: usize,
    /// The parts in ascending shard order, and their shards (every part carries
    /// them, see [`Part::shards`]).
    pub parts: Vec<PlannedPart>,
    pub shards: Arc<[usize]>,
    /// The part that runs next (or runs now).
    pub next: usize,
}

impl InPlaceOp {
    /// The EXEC's reply: every command's reply, in queue order.
    pub fn reply(&self) -> Vec<u8> {
        let mut at: Vec<(usize, &[u8])> = Vec::with_capacity(self.len);
        for part in &self.parts {
            let mut start = 0usize;
            for (position, &end) in part.positions.iter().zip(&part.ends) {
                at.push((*position, &part.replies[start..end]));
                start = end;
            }
        }
        at.sort_unstable_by_key(|(position, _)| *position);
        let bytes: usize = at.iter().map(|(_, r)| r.len()).sum();
        let mut out = Vec::with_capacity(bytes + 16);
        ruvio_resp::Reply::new(&mut out, self.caller.proto).array(self.len);
        for (_, reply) in at {
            out.extend_from_slice(reply);
        }
        out
    }
}
