//! EXEC of a transaction whose keys all belong to one other shard (forward mode):
//! the whole queue goes to that owner as one message and runs there, in one loop
//! iteration, like a forwarded command.
//!
//! Why: borrowing the keys ([`crate::mesh::lending`]) costs a mesh round trip per EXEC
//! and locks the keys meanwhile, so pipelined transactions on a connection of the
//! other shard ran one per round trip, and every other transaction on the same keys
//! waited for the loan: 10x slower than Redis (records/transactions-2026-12-01.json).
//! Sent to the owner, a transaction is one more message in the stream of forwarded
//! commands: the connection goes on (its later commands queue behind the held
//! reply, as for any forwarded command), the owner runs the queue with nothing in
//! between, logs it as one group and answers the whole array.
//!
//! Only without WATCH (the watch check needs the client's touched epochs, which its
//! own shard keeps) and while the client's shard coordinates no cross-shard command
//! (see [`is_claimed`]); otherwise such an EXEC borrows, as before.
//!
//! A key of the transaction may be out on loan when it arrives (another client's
//! cross-shard command holds it). The transaction then waits on the owner, and so
//! does everything later from the same shard ([`Deferred`]): its later forwarded
//! commands and cancels, so no command a client sent after its EXEC runs before it.
//! A lend request for a waiting transaction's keys waits too. When keys come home
//! ([`crate::shard::lending::take_back`](crate::shard::lending::take_back)) the waiting queue runs up to
//! the first transaction whose keys are still lent.
//!
//! This file is the transaction's message and the owner's queue of what waits;
//! running it on the owner, and running what waited once the keys are home, is
//! the owner's execution (`shard/messages.rs`: `transaction_arrived`,
//! `run_deferred`).

use crate::mesh::forward::{Control, Outbox, RequestBatch, Tag};
use crate::mesh::lending::{DbKey, Lending};
use crate::net::conn::{ClientState, Merge, ReplyQueue};
use crate::transactions::multi::Commands;
use crate::transactions::watch::Watches;
use std::collections::VecDeque;

/// A transaction sent to the shard that owns every key it names.
#[derive(Debug)]
pub struct OwnerTx {
    pub from: usize,
    pub tag: Tag,
    pub commands: Commands,
    /// Every key the commands name, `(db, key)`.
    pub keys: Vec<DbKey>,
}

/// What waits on an owner behind a transaction whose keys are lent, in arrival order.
#[derive(Debug)]
pub enum Deferred {
    Transaction(Box<OwnerTx>),
    /// A part of a transaction run in place ([`crate::mesh::in_place`]).
    Part(Box<crate::mesh::in_place::Part>),
    Requests(RequestBatch),
    Control(Control),
}

/// The coordinator's side: hold the EXEC's reply slot and send the queue to
/// `owner` (the parts it touches: the WATCH table, the outbox, this shard's id).
pub fn send(
    (watches, outbox, me): (&mut Watches, &mut Outbox, usize),
    client: &mut ClientState,
    replies: &mut ReplyQueue,
    who: (u32, u32),
    owner: usize,
    commands: Commands,
    keys: Vec<DbKey>,
) {
    let seq = replies.hold(Merge::Single, 1);
    let tag = Tag::for_command(client, who, seq, 0);
    watches.clear_touched(client.id);
    client.watch_epoch += 1;
    let tx = OwnerTx {
        from: me,
        tag,
        commands,
        keys,
    };
    outbox.transaction(owner, tx);
}

/// True when something from shard `from` waits behind a transaction here: its
/// later requests must wait too.
pub fn is_waiting(lending: &Lending, from: usize) -> bool {
    lending.deferred.get(from).is_some_and(|q| !q.is_empty())
}

/// Queue `item` from shard `from` behind its waiting transaction.
pub fn defer(lending: &mut Lending, from: usize, item: Deferred) {
    let queues = &mut lending.deferred;
    if queues.len() <= from {
        queues.resize_with(from + 1, VecDeque::new);
    }
    queues[from].push_back(item);
}

/// True when `key` is named by a transaction from shard `from` waiting here: a
/// lend request of that shard for it waits until the transaction ran (a client's
/// cross-shard command sent after its EXEC runs after it). The sender coordinated
/// nothing when it sent the transaction ([`send`] is used only then), so no key
/// lent to it can be what the transaction waits for: the wait cannot close a cycle.
pub fn is_claimed(lending: &Lending, from: usize, db: usize, key: &[u8]) -> bool {
    lending.deferred.get(from).is_some_and(|q| {
        q.iter().any(|item| {
            matches!(item, Deferred::Transaction(tx)
                if tx.keys.iter().any(|(d, k)| *d == db && k == key))
        })
    })
}

#[cfg(test)]
mod tests {
    use crate::shard::inproc::{pipeline, TwoShards};

    // "b" and "c" live on shard 0, "a" and "d" on shard 1; client c is on shard c.

    /// A transaction on the other shard's keys answers as one array, and the
    /// client's next command, on the same key, sees it.
    #[test]
    fn transaction_runs_on_its_keys_owner() {
        let mut server = TwoShards::new();
        server.receive(
            1,
            &pipeline(&[
                &["MULTI"],
                &["SET", "b", "1"],
                &["INCR", "c"],
                &["GET", "b"],
                &["EXEC"],
                &["GET", "c"],
            ]),
        );
        assert_eq!(
            server.view(1).replies,
            b"+OK\r\n+QUEUED\r\n+QUEUED\r\n+QUEUED\r\n*3\r\n+OK\r\n:1\r\n$1\r\n1\r\n$1\r\n1\r\n"
        );
    }

    /// A transaction whose key is out on loan when it comes waits for it, and the
    /// commands its client sent after it wait behind it: a forwarded GET, and a
    /// cross-shard RENAME of a key of the transaction that is not lent itself.
    #[test]
    fn transaction_waits_for_a_lent_key_and_keeps_its_clients_order() {
        let mut server = TwoShards::new();
        server.send(0, &["SET", "b", "0"]);
        // Client 0's RENAME borrows "b" (its own shard's) and waits for shard 1.
        server.receive_unsettled(0, &pipeline(&[&["RENAME", "b", "a"]]));
        server.receive_unsettled(
            1,
            &pipeline(&[
                &["MULTI"],
                &["SET", "b", "1"],
                &["SET", "c", "2"],
                &["EXEC"],
                &["GET", "b"],
                &["RENAME", "c", "d"],
            ]),
        );
        server.deliver_from(1);
        assert!(server.view(1).holding);
        server.settle();
        assert_eq!(server.view(0).replies, b"+OK\r\n+OK\r\n");
        assert_eq!(
            server.view(1).replies,
            b"+OK\r\n+QUEUED\r\n+QUEUED\r\n*2\r\n+OK\r\n+OK\r\n$1\r\n1\r\n+OK\r\n"
        );
        server.send(1, &["MGET", "a", "b", "c", "d"]);
        assert!(server
            .view(1)
            .replies
            .ends_with(b"*4\r\n$1\r\n0\r\n$1\r\n1\r\n$-1\r\n$1\r\n2\r\n"));
    }
}
