//! Multi-key commands whose keys live on several shards (forward mode): RENAME,
//! COPY, MSETNX, LCS, LMOVE, RPOPLPUSH, LMPOP ... run with Redis' exact semantics
//! by *borrowing* the keys.
//!
//! The shard the client is connected to coordinates: it asks each owner, one shard
//! at a time in shard order, to lend it the command's keys. An owner takes the
//! entries out of its keyspace (value, expiry and access clock move as they are,
//! no copy) and marks the keys lent; until they come back, any command touching a
//! lent key waits on the owner, parked exactly like a blocked client, and runs
//! when they return. With every key borrowed, the coordinator puts the entries into
//! its own keyspace, runs the ordinary handler once, takes the keys out again and
//! returns them (or their absence) to their owners, which wake whoever waited.
//!
//! Why this shape: one mechanism gives every multi-key command its single-Redis
//! semantics without a per-command cross-shard protocol; the keys are locked for
//! the command's duration, so no client can observe a half-done RENAME (it waits a
//! moment instead); asking owners in a fixed order means two coordinators can never
//! hold keys the other waits for (ordered locking, as Dragonfly's VLL). What a
//! concurrent client can observe is written in docs/cross-shard.md.
//!
//! Files: here, the mesh's part: the messages between shards ([`LendRequest`],
//! [`WatchRequest`], [`Lent`]), a shard's tables of lending ([`Lending`]: its keys
//! out on loan, the requests waiting for them, the commands it coordinates, each
//! a [`CrossOp`]) with the questions the mesh and the script lock ask of them;
//! what a command wrote, told to the owners ([`written`], over the [`Reporting`]
//! parts the shard implements), the keys a value names ([`value_keys`]), the
//! log records and database numbers of keys going home ([`home`]), and the keys
//! held by transactions run in place, counted per holder ([`held`]). The protocol
//! that drives it (ask the owners in order, install, run the command on the core,
//! send the keys home, answer the client, the owner's side, what waits, batches)
//! is the shard's: `shard/lending/`, because it runs commands on the core and
//! answers its connections. A coordinated command names its row by the row's
//! statistics slot (as a queued one does, `net::queued`): the table is above
//! the mesh.

use crate::net::caller::Caller;
use crate::transactions::multi::Transaction;
use ahash::{AHashMap, AHashSet};
use ruvio_engine::{CommandMeta, Entry};
use ruvio_resp::OwnedArgs;
use std::collections::VecDeque;

mod held;
mod home;
mod value_keys;
mod written;
pub use held::{Access, HeldKeys, JOINS_WHILE_OTHERS_WAIT_MAX};
pub use home::{
    after_swaps, state_record, swapped, swaps_dbs, KeyRecords, FOR_THE_FEED, FOR_THE_LINKS,
};
pub use value_keys::{plan_more, value_keys_missing};
pub use written::{
    hold_writer, keep_answered_at_once, noloop_writer, report_written, Gathering, HeldWriter,
    Reporting,
};

/// A key in its database.
pub type DbKey = (usize, Vec<u8>);

/// A coordinator asks an owner for keys, each `(db, key)`.
#[derive(Debug)]
pub struct LendRequest {
    /// The coordinating shard.
    pub from: usize,
    pub ticket: u64,
    pub keys: Vec<DbKey>,
    /// A script holding the script lock waits for these keys on its thread (see
    /// [`crate::mesh::script_lock`]): it goes before transactions queued for its shard.
    pub now: bool,
}

/// A coordinator asks an owner to watch keys of `db` for its blocking command.
#[derive(Debug)]
pub struct WatchRequest {
    pub from: usize,
    pub ticket: u64,
    pub db: usize,
    pub keys: Vec<Vec<u8>>,
}

/// Entries travelling between shards: `(db, key, entry)`; `None` is "no such key".
pub type Lent = Vec<(usize, Vec<u8>, Option<Entry>)>;

/// One cross-shard command this shard coordinates.
#[derive(Debug)]
pub struct CrossOp {
    /// Connection `(index, gen)` and its held reply slot.
    pub conn: (u32, u32),
    pub seq: u64,
    pub caller: Caller,
    pub argv: OwnedArgs,
    /// Its row, by the row's statistics slot (the shard finds it again), and
    /// the row's meta, which the mesh reads.
    pub stat: usize,
    pub meta: &'static CommandMeta,
    /// Owners and their `(db, key)`s, in shard order.
    pub plan: Vec<(usize, Vec<DbKey>)>,
    /// Next owner to ask.
    pub next: usize,
    /// What the owners lent so far.
    pub borrowed: Lent,
    /// A blocking command with nothing to serve: its deadline, and the owners
    /// watching its keys for it (it is tried again when one of them writes a key).
    pub waiting: Option<Waiting>,
    /// A command that reads keys named in a value (SORT ... BY/GET patterns): how
    /// many times the keys were borrowed again because the value named keys that
    /// were not borrowed yet.
    pub value_key_tries: Option<u32>,
    /// EXEC of a transaction: `cmd` is EXEC's row and this is what runs.
    pub transaction: Option<Box<Transaction>>,
    /// Transactions that run on these keys after it, before they go home (see
    /// `shard::lending::join_transaction`).
    pub riders: Vec<Rider>,
    /// A script: it takes the script lock before it borrows (see
    /// [`crate::mesh::script_lock`]).
    pub wants_lock: bool,
    /// Where it stands with borrowing and the script lock.
    pub borrowing: Borrowing,
    /// A blocking command whose first try found nothing to serve and was
    /// recorded: that try's time, ns (0 when not timed). It is recorded again
    /// when answered, as a command parked on one shard (`shard::exec::Served`).
    pub first_run_ns: Option<u64>,
    /// The command as the client sent it, when the one tried again differs
    /// (XREAD's `$` replaced): the slow log shows the client's.
    pub sent_argv: Option<OwnedArgs>,
    /// No earlier reply of its connection was outstanding when it started, so
    /// it may run on keys a batch of borrowing commands keeps here
    /// ([`Lending::kept`]): an earlier command of the same connection still
    /// waiting on such a key at its owner would otherwise run after it.
    pub first_in_line: bool,
    /// An owner lent a key some command is parked on there (a blocked client):
    /// the keys go home after this command, not at the batch's end, so the
    /// client is served between commands, as one Redis serves blocked clients
    /// after each command.
    pub lent_waited: bool,
}

/// A command's borrowing, as the script lock sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Borrowing {
    /// Not borrowing (not started, parked, or between a blocking command's tries).
    Idle,
    /// Borrowing, counted in the shard's borrowing commands.
    Counted,
    /// Holding the script lock, waiting for the server to be quiet.
    Quieting,
    /// Holding the script lock in a quiet server: its script may borrow now.
    Locked,
}

/// A transaction riding on another one's borrowed keys: its connection, held slot,
/// client context and queue.
#[derive(Debug)]
pub struct Rider {
    pub conn: (u32, u32),
    pub seq: u64,
    pub caller: Caller,
    pub transaction: Box<Transaction>,
}

/// A cross-shard blocking command between tries.
#[derive(Debug)]
pub struct Waiting {
    pub deadline_ms: Option<u64>,
    pub watchers: Vec<usize>,
    /// Parked on the watches (false while a retry is borrowing the keys: then it
    /// must run to the end, or the borrowed keys would never go back).
    pub watching: bool,
}

impl CrossOp {
    /// Parked between tries: it may be timed out, unblocked or dropped now.
    pub fn is_parked(&self) -> bool {
        self.waiting.as_ref().is_some_and(|w| w.watching)
    }

    /// A transaction with a SWAPDB (see [`crate::transactions::multi::Transaction::swaps_dbs`]).
    pub fn swaps_dbs(&self) -> bool {
        swaps_dbs(self.meta) || self.transaction.as_ref().is_some_and(|t| t.swaps_dbs)
    }

    /// An EXEC still borrowing its keys: another transaction may ride on it.
    pub fn takes_riders(&self) -> bool {
        self.transaction.is_some() && self.waiting.is_none() && !self.wants_lock
    }

    /// Every one of `keys` is in its plan (it holds them all when it runs).
    pub fn will_hold(&self, keys: &[DbKey]) -> bool {
        keys.iter()
            .all(|key| self.plan.iter().any(|(_, owned)| owned.contains(key)))
    }
}

/// This shard's lending state.
#[derive(Debug, Default)]
pub struct Lending {
    /// Keys of this shard that are out on loan, in the database they are in now
    /// (a SWAPDB renames them here and on their borrower: [`Lending::swap_dbs`]).
    pub lent: AHashSet<DbKey>,
    /// Requests for keys that are out on loan, oldest first.
    pub waiting: VecDeque<LendRequest>,
    /// Commands this shard coordinates.
    pub ops: AHashMap<u64, CrossOp>,
    pub next_ticket: u64,
    /// The op `shard::lending::start` is starting, and its connection (it is out of the slab
    /// meanwhile), and its reply when every key was this shard's and the command
    /// ran before `start` returned (SORT BY/GET with local keys only).
    pub starting: Option<(u64, (u32, u32))>,
    pub answered_at_once: Option<Vec<u8>>,
    /// A transaction `shard::lending::start_transaction` was starting that needs its connection:
    /// it finishes with it (`shard::lending::finish_starting_with_conn`).
    pub finish_with_conn: Option<u64>,
    /// Keys that were out on loan when a snapshot was taken (SAVE): the snapshot
    /// lacks them, so their state is logged when they come home, changed or not.
    pub missed_by_snapshot: AHashSet<DbKey>,
    /// Per shard: what waits behind a transaction from it whose keys were out on
    /// loan when it came (see [`crate::mesh::owner_tx`]).
    pub deferred: Vec<VecDeque<crate::mesh::owner_tx::Deferred>>,
    /// Commands waiting for the script lock (or, holding it, for a quiet server)
    /// before they borrow, oldest first.
    pub parked_for_lock: VecDeque<u64>,
    /// Commands run in a row under one hold of the script lock so far (a batch,
    /// see `shard/lending/batch.rs`); the lock stays with this shard while it is not 0.
    pub batched: u32,
    /// The command answered at once (`answered_at_once`) has its writer's
    /// reply slot kept for its invalidations ([`keep_answered_at_once`]).
    pub keep_at_once: bool,
    /// Keys of this shard held by transactions run in place: their parts ran
    /// here and other commands on them wait, as on a lent key, until the last of
    /// their coordinators' releases (see [`crate::mesh::in_place`], [`held`]).
    pub held: HeldKeys,
    /// The keys each `(coordinator, ticket)` holds here.
    pub held_for: AHashMap<(usize, u64), Vec<DbKey>>,
    /// Transactions this shard coordinates in place, by ticket.
    pub in_place: AHashMap<u64, crate::mesh::in_place::InPlaceOp>,
    pub next_in_place: u64,
    /// The shard whose waiting queue ([`Lending::deferred`]) goes first next time
    /// keys come free: the one after the last that ran a part from it, so two
    /// coordinators contending on the same keys take turns.
    pub deferred_turn: usize,
    /// The chain (coordinator and shards) whose part runs now: its commands run
    /// on keys it holds itself ([`Lending::is_lent`] is false for them).
    pub running_chain: Option<(usize, std::sync::Arc<[usize]>)>,
    /// Keys of other shards that borrowing commands run here this loop
    /// iteration keep until it ends (still lent on their owners), so the next
    /// commands on them run without a round trip (a batch of borrowing
    /// commands: `shard/lending/batch.rs`, docs/cross-shard.md).
    pub kept: AHashSet<DbKey>,
    /// Borrowing commands that kept their keys in the current batch.
    pub kept_runs: u32,
    /// The kept keys the batch's commands wrote: their owners hear of it when
    /// the keys go home, before they arrive (their watchers are touched).
    pub kept_written: Vec<DbKey>,
}

impl Lending {
    /// True when some key of this shard is out on loan or held in place (then
    /// every command checks its keys against the two sets).
    pub fn any_lent(&self) -> bool {
        !self.lent.is_empty() || !self.held.is_empty()
    }

    /// True when some key of `db` of this shard is out on loan.
    pub fn any_lent_in(&self, db: usize) -> bool {
        self.lent
            .iter()
            .chain(self.held.iter())
            .any(|(d, _)| *d == db)
    }

    /// This shard's keys of `db` out on loan or held in place.
    pub fn lent_in(&self, db: usize) -> Vec<Vec<u8>> {
        let keys = self.lent.iter().chain(self.held.iter());
        let keys = keys.filter(|(d, _)| *d == db);
        keys.map(|(_, key)| key.clone()).collect()
    }

    /// The database of every key of this shard out on loan.
    pub fn lent_dbs(&self) -> impl Iterator<Item = usize> + '_ {
        self.lent.iter().map(|(db, _)| *db)
    }

    /// True when `key` of `db` is out on loan, or held by a transaction run in
    /// place: a command on it waits either way.
    pub fn is_lent(&self, db: usize, key: &[u8]) -> bool {
        // Nothing out on loan is the usual case: no key copied to ask.
        if !self.any_lent() {
            return false;
        }
        let db_key = (db, key.to_vec());
        self.lent.contains(&db_key) || self.held.stops(&db_key, self.running_chain.as_ref())
    }

    /// True while this shard coordinates some cross-shard command.
    pub fn coordinating(&self) -> bool {
        !self.ops.is_empty()
    }

    /// The ticket the next cross-shard op started here gets.
    pub fn next_ticket(&self) -> u64 {
        self.next_ticket
    }

    /// This shard keeps the script lock between the commands of a batch.
    pub fn holding_batch(&self) -> bool {
        self.batched > 0
    }

    /// A command of this shard holds the script lock (waiting for a quiet server,
    /// or borrowing and running): one at a time.
    pub fn lock_in_use(&self) -> bool {
        self.ops
            .values()
            .any(|op| matches!(op.borrowing, Borrowing::Quieting | Borrowing::Locked))
    }
}

impl Lending {
    /// SWAPDB `a` `b` ran here while keys were out on loan: those of either
    /// database are in the other one now. Only the script lock's holder swaps
    /// then (in a quiet server every key out on loan is its own: a SWAPDB of its
    /// transaction, `multi::swapped_in_queue`), and it renames the keys it holds
    /// as they move, so this shard renames them too: each comes home named by the
    /// database it is in.
    pub fn swap_dbs(&mut self, a: usize, b: usize) {
        let rename = |(db, key): DbKey| (swapped(db, (a, b)), key);
        self.lent = self.lent.drain().map(rename).collect();
        self.missed_by_snapshot = self.missed_by_snapshot.drain().map(rename).collect();
    }

    /// Cross-shard blocking commands waiting here (INFO `blocked_clients`).
    pub fn waiting_len(&self) -> usize {
        self.ops.values().filter(|op| op.is_parked()).count()
    }

    /// A snapshot is taken now: the keys out on loan are not in it, so their
    /// state is logged when they come home.
    pub fn snapshot_taken(&mut self) {
        self.missed_by_snapshot.extend(self.lent.iter().cloned());
    }
}
