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
//! ([`lending::take_back`](crate::mesh::lending::take_back)) the waiting queue runs up to
//! the first transaction whose keys are still lent.

use crate::mesh::forward::{Control, RequestBatch, Tag};
use crate::mesh::lending::DbKey;
use crate::net::conn::{ClientState, Conn, Merge, ReplyQueue};
use crate::net::slab::Slab;
use crate::shard::exec::{self, run_engine};
use crate::shard::ShardCore;
use crate::transactions::multi::Commands;
use ruvio_resp::Reply;
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
    Requests(RequestBatch),
    Control(Control),
}

/// The coordinator's side: hold the EXEC's reply slot and send the queue to `owner`.
pub fn send(
    core: &mut ShardCore,
    client: &mut ClientState,
    replies: &mut ReplyQueue,
    who: (u32, u32),
    owner: usize,
    commands: Commands,
    keys: Vec<DbKey>,
) {
    let seq = replies.hold(Merge::Single, 1);
    let tag = crate::shard::dispatch::tag(client, who, seq, 0);
    core.watches.clear_touched(client.id);
    client.watch_epoch += 1;
    let tx = OwnerTx {
        from: core.id,
        tag,
        commands,
        keys,
    };
    core.outbox.transaction(owner, tx);
}

/// The owner's side: run `tx` now, or queue it when one of its keys is lent (or
/// something from its shard waits already).
pub fn arrived(core: &mut ShardCore, conns: &mut Slab<Conn>, tx: OwnerTx) {
    let must_wait =
        is_waiting(core, tx.from) || tx.keys.iter().any(|(db, k)| core.lending.is_lent(*db, k));
    if must_wait {
        defer(core, tx.from, Deferred::Transaction(Box::new(tx)));
    } else {
        run(core, conns, &tx);
    }
}

/// True when something from shard `from` waits behind a transaction here: its
/// later requests must wait too.
pub fn is_waiting(core: &ShardCore, from: usize) -> bool {
    core.lending
        .deferred
        .get(from)
        .is_some_and(|q| !q.is_empty())
}

/// Queue `item` from shard `from` behind its waiting transaction.
pub fn defer(core: &mut ShardCore, from: usize, item: Deferred) {
    let queues = &mut core.lending.deferred;
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
pub fn is_claimed(core: &ShardCore, from: usize, db: usize, key: &[u8]) -> bool {
    core.lending.deferred.get(from).is_some_and(|q| {
        q.iter().any(|item| {
            matches!(item, Deferred::Transaction(tx)
                if tx.keys.iter().any(|(d, k)| *d == db && k == key))
        })
    })
}

/// Keys came home: run what waits, per shard, up to the first transaction whose
/// keys are still lent.
pub fn run_deferred(core: &mut ShardCore, conns: &mut Slab<Conn>) {
    for from in 0..core.lending.deferred.len() {
        loop {
            let blocked = match core.lending.deferred[from].front() {
                None => break,
                Some(Deferred::Transaction(tx)) => {
                    tx.keys.iter().any(|(db, k)| core.lending.is_lent(*db, k))
                }
                Some(_) => false,
            };
            if blocked {
                break;
            }
            match core.lending.deferred[from].pop_front() {
                Some(Deferred::Transaction(tx)) => run(core, conns, &tx),
                Some(Deferred::Requests(batch)) => {
                    crate::shard::messages::run_requests(core, conns, batch)
                }
                Some(Deferred::Control(control)) => crate::shard::messages::control(core, control),
                None => break,
            }
        }
    }
}

/// Run the queue here with nothing in between, log it as one group, answer the
/// array (queued blocking commands do not block, as in any EXEC).
fn run(core: &mut ShardCore, conns: &mut Slab<Conn>, tx: &OwnerTx) {
    let caller = crate::net::caller::Caller {
        may_block: false,
        ..crate::shard::messages::caller_of(&tx.tag, tx.from)
    };
    let filling_before = core.wal.as_ref().map_or(0, |w| w.filling_bytes());
    let mut out = Vec::new();
    Reply::new(&mut out, caller.proto).array(tx.commands.len());
    core.log_begin();
    for (cmd, args) in tx.commands.iter() {
        if crate::mesh::script_lock::is_script(cmd.meta) {
            // It ran on the client's shard without reaching other shards' keys,
            // but may on another branch: it may take the script lock then.
            crate::mesh::script_lock::begin_run(crate::mesh::script_lock::Run {
                may_lock_now: !core.logs(),
                ..Default::default()
            });
        }
        // Each queued command is timed and logged here, as Redis logs EXEC's.
        let (timed, reply_start) = (core.timing.start(), out.len());
        let ran = run_engine(core, cmd, caller, args, &mut out);
        if core.timing.active() {
            let ns = timed.map(|t| core.timing.elapsed_ns(t));
            let who = crate::observability::Who::Id(caller.client_id);
            exec::observe(core, cmd, who, args, (ns, out.len() - reply_start));
        }
        if ran.block.is_some() {
            // Only a script naming an undeclared key that is out on loan gets here
            // (the declared keys were checked): its slot needs an answer.
            Reply::new(&mut out, caller.proto)
                .error("TRYAGAIN a key of this script is in use by a cross-shard command");
        }
        core.stats.commands += 1;
        core.stats.per_command[cmd.stat].calls += 1;
    }
    core.log_end();
    exec::serve_ready(core, conns);
    let limits = &core.cfg.client_output_buffer_limit;
    let mut built = crate::net::outlimit::BuiltOutput::default();
    crate::net::outlimit::cap_forwarded(limits, &mut built, (tx.tag.conn, tx.tag.gen), &mut out);
    crate::persistence::durable::reply_forwarded(core, tx.from, tx.tag, &out, filling_before);
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
