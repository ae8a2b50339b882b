//! The coordinator's protocol of a borrowing (docs/cross-shard.md): ask the
//! owners of a command's keys in shard order, install what they lent, run the
//! command (or an EXEC's queue, and the transactions riding on its loan) on this
//! shard's core, send the keys home and answer the client. The tables it keeps
//! are the mesh's ([`crate::mesh::lending::Lending`], each command a
//! [`CrossOp`]); this is the shard's because it runs commands here and answers
//! its connections.

use super::batch::{
    batch_homes, defer_kept_written, end_batch_if_done, keep_borrowed, keep_in_batch, kept_after,
    kept_homes, may_batch, may_keep, runs_on_kept,
};
use super::home::{links_follow, log_local_changes, record_link_barrier, send_home};
use super::owner::{lend, take_back};
use super::waiting::{wait, Answer};
use crate::cmd::registry::{registry, Command, Handler};
use crate::mesh::lending::{
    after_swaps, hold_writer, noloop_writer, plan_more, report_written, swaps_dbs,
    value_keys_missing, Borrowing, CrossOp, DbKey, Gathering, HeldWriter, LendRequest, Lent,
    Reporting, Rider,
};
use crate::net::caller::Caller;
use crate::net::conn::{ClientState, Conn, ReplyQueue};
use crate::net::slab::Slab;
use crate::persistence::durable;
use crate::shard::exec::{self, run_engine, Ran};
use crate::shard::ShardCore;
use crate::transactions::multi::Transaction;
use ahash::AHashMap;
use ruvio_engine::command::flags::{ALL_SHARDS, DB_OPTION};
use ruvio_engine::command::CommandTree;
use ruvio_resp::OwnedArgs;

/// The row of a coordinated command, found again from its statistics slot.
pub(super) fn row(op: &CrossOp) -> &'static Command {
    registry()
        .row(op.stat)
        .expect("a coordinated command names the statistics slot of its row")
}

/// Where a coordinated command's reply goes.
pub struct ReplyTo {
    /// The connection (slab index, generation).
    pub conn: (u32, u32),
    /// Its held reply slot.
    pub seq: u64,
    /// No earlier reply of the connection is outstanding (see
    /// [`CrossOp::first_in_line`]).
    pub first_in_line: bool,
}

/// Start coordinating `cmd` for the connection of `to`. `groups` are the
/// owners and the argument positions of their keys. When every key is this
/// shard's and free, or kept here by a batch of borrowing commands, the
/// command runs before this returns, and the reply comes back here instead
/// (the connection is out of the slab).
pub fn start(
    core: &mut ShardCore,
    conns: &mut Slab<Conn>,
    to: ReplyTo,
    caller: Caller,
    cmd: &'static Command,
    args: ruvio_resp::Args<'_>,
    groups: Vec<(usize, Vec<usize>)>,
) -> Option<Vec<u8>> {
    let last_key = groups.iter().flat_map(|(_, p)| p.iter().copied()).max();
    let target_db = other_db(core, cmd, args);
    let mut plan: Vec<(usize, Vec<DbKey>)> = groups
        .into_iter()
        .map(|(shard, positions)| {
            let mut keys: Vec<DbKey> = positions
                .iter()
                .map(|&p| {
                    let db = match target_db {
                        Some(db) if Some(p) == last_key => db,
                        _ => caller.db,
                    };
                    (db, args.get(p).to_vec())
                })
                .collect();
            keys.sort();
            keys.dedup();
            (shard, keys)
        })
        .collect();
    plan.sort_by_key(|(shard, _)| *shard);
    let op = CrossOp {
        conn: to.conn,
        seq: to.seq,
        caller,
        argv: OwnedArgs::from_args(args),
        stat: cmd.stat,
        meta: cmd.meta,
        plan,
        next: 0,
        borrowed: Vec::new(),
        waiting: None,
        value_key_tries: cmd.meta.keys.reads_keys_from_value().then_some(0),
        transaction: None,
        riders: Vec::new(),
        wants_lock: crate::mesh::script_lock::is_script(cmd.meta) || swaps_dbs(cmd.meta),
        borrowing: Borrowing::Idle,
        first_run_ns: None,
        sent_argv: None,
        first_in_line: to.first_in_line,
        lent_waited: false,
    };
    begin(core, conns, op)
}

/// Start coordinating the EXEC of `transaction` for the connection of `to`:
/// borrow `keys` (every key its commands name and every watched key),
/// run it here ([`crate::shard::multi::run_borrowed`]), give them back. As [`start`],
/// the reply comes back here when it ran before this returns.
pub fn start_transaction(
    core: &mut ShardCore,
    conns: &mut Slab<Conn>,
    to: ReplyTo,
    caller: Caller,
    transaction: Box<Transaction>,
    keys: Vec<DbKey>,
) -> Option<Vec<u8>> {
    let mut plan: Vec<(usize, Vec<DbKey>)> = Vec::new();
    for (db, key) in keys {
        let owner = core.topo.key_owner(&key);
        match plan.iter_mut().find(|(o, _)| *o == owner) {
            Some((_, owned)) => owned.push((db, key)),
            None => plan.push((owner, vec![(db, key)])),
        }
    }
    plan.sort_by_key(|(shard, _)| *shard);
    let exec = registry().lookup(b"exec").expect("EXEC is in the table");
    let wants_lock = transaction.locked;
    let op = CrossOp {
        conn: to.conn,
        seq: to.seq,
        caller,
        argv: [b"EXEC".as_slice()].into_iter().collect(),
        stat: exec.stat,
        meta: exec.meta,
        plan,
        next: 0,
        borrowed: Vec::new(),
        waiting: None,
        value_key_tries: None,
        transaction: Some(transaction),
        riders: Vec::new(),
        wants_lock,
        borrowing: Borrowing::Idle,
        first_run_ns: None,
        sent_argv: None,
        first_in_line: to.first_in_line,
        lent_waited: false,
    };
    begin(core, conns, op)
}

/// Take a ticket for `op` and its first step ([`advance`]), the reply coming
/// back here when it is answered at once.
fn begin(core: &mut ShardCore, conns: &mut Slab<Conn>, op: CrossOp) -> Option<Vec<u8>> {
    let ticket = core.lending.next_ticket;
    core.lending.next_ticket += 1;
    let conn = op.conn;
    core.lending.ops.insert(ticket, op);
    answered_at_once(core, (ticket, conn), |core| advance(core, conns, ticket))
}

/// Take `step` of op `ticket` while its connection `conn` waits in the caller,
/// out of the slab's reach: a reply given during the step comes back here
/// (`starting`, `answered_at_once`) rather than through the connection.
fn answered_at_once(
    core: &mut ShardCore,
    (ticket, conn): (u64, (u32, u32)),
    step: impl FnOnce(&mut ShardCore),
) -> Option<Vec<u8>> {
    core.lending.starting = Some((ticket, conn));
    step(core);
    core.lending.starting = None;
    core.lending.answered_at_once.take()
}

/// The database a `DB index` option names for the command's last key (COPY ... DB
/// n: the destination lives there), for commands whose row says they take one.
pub fn other_db(core: &ShardCore, cmd: &Command, args: ruvio_resp::Args<'_>) -> Option<usize> {
    if !cmd.meta.has(DB_OPTION) {
        return None;
    }
    let at =
        (1..args.len().saturating_sub(1)).find(|&i| args.get(i).eq_ignore_ascii_case(b"db"))?;
    core.engine.parse_db_index(args.get(at + 1)).ok()
}

/// Ask the next owner, or run the command when every key is here.
pub(super) fn advance(core: &mut ShardCore, conns: &mut Slab<Conn>, ticket: u64) {
    if !may_borrow(core, ticket) {
        if !core.lending.parked_for_lock.contains(&ticket) {
            core.lending.parked_for_lock.push_back(ticket);
        }
        return;
    }
    let Some(op) = core.lending.ops.get(&ticket) else {
        return;
    };
    let Some((owner, keys)) = op.plan.get(op.next) else {
        return finish(core, conns, ticket);
    };
    // Keys a batch of locked commands keeps here are borrowed already (their
    // owner would wait for them to come home, which waits for this command).
    // Those a batch of borrowing commands keeps are, when the command can run
    // on them right away; otherwise it asks their owners, who lend them when
    // the batch sent them home (at the latest at the end of this iteration).
    let on_kept = runs_on_kept(core, op);
    if on_kept && !kept_after(core, op) {
        core.stats.ran_on_kept += 1;
    }
    let keys: Vec<DbKey> = keys
        .iter()
        .filter(|(db, key)| !crate::mesh::script_lock::batch_holds(*db, key))
        .filter(|key| !(on_kept && core.lending.kept.contains(*key)))
        .cloned()
        .collect();
    if keys.is_empty() {
        return lent(core, conns, ticket, Vec::new(), false);
    }
    let request = LendRequest {
        from: core.id,
        ticket,
        keys,
        now: false,
    };
    if *owner == core.id {
        lend(core, conns, request);
    } else {
        core.outbox.lend(*owner, request);
    }
}

/// Whether command `ticket` may borrow now, as the script lock decides (see
/// [`crate::mesh::script_lock`]): a script takes the lock, then waits for a quiet
/// server; any other command counts itself as borrowing, unless another shard's
/// script holds the lock.
fn may_borrow(core: &mut ShardCore, ticket: u64) -> bool {
    let Some(op) = core.lending.ops.get(&ticket) else {
        return true;
    };
    let borrowing = match op.borrowing {
        // Not in a batch: the batch's keys would move between databases under it.
        Borrowing::Idle if op.swaps_dbs() && core.lending.holding_batch() => return false,
        Borrowing::Idle if op.wants_lock => {
            match crate::mesh::script_lock::try_lock(core.script_server(), &core.lending) {
                true if crate::mesh::script_lock::quiet(
                    core.script_server(),
                    &core.lending,
                    op.swaps_dbs(),
                ) =>
                {
                    Borrowing::Locked
                }
                true => Borrowing::Quieting,
                false => return false,
            }
        }
        Borrowing::Idle => match crate::mesh::script_lock::begin_borrowing(core.script_server()) {
            true => Borrowing::Counted,
            false => return false,
        },
        Borrowing::Quieting
            if crate::mesh::script_lock::quiet(
                core.script_server(),
                &core.lending,
                op.swaps_dbs(),
            ) =>
        {
            Borrowing::Locked
        }
        other => other,
    };
    if let Some(op) = core.lending.ops.get_mut(&ticket) {
        op.borrowing = borrowing;
    }
    borrowing != Borrowing::Quieting
}

/// The command no longer borrows: it frees the script lock, or its count.
fn stop_borrowing(core: &ShardCore, op: &mut CrossOp) {
    match std::mem::replace(&mut op.borrowing, Borrowing::Idle) {
        Borrowing::Idle => {}
        Borrowing::Counted => crate::mesh::script_lock::end_borrowing(core.script_server()),
        Borrowing::Quieting | Borrowing::Locked => {
            crate::mesh::script_lock::unlock(core.script_server())
        }
    }
}

/// Go on with the commands parked for the script lock, in order, once they may
/// (each loop iteration: a shard parked behind another's lock is woken when it is
/// freed, a holder waiting for quiet when a command elsewhere stops borrowing).
pub fn resume_parked_for_lock(core: &mut ShardCore, conns: &mut Slab<Conn>) {
    end_batch_if_done(core, conns);
    let parked = std::mem::take(&mut core.lending.parked_for_lock);
    for ticket in parked {
        advance(core, conns, ticket);
    }
}

/// The coordinator's side: an owner lent its keys.
pub fn lent(
    core: &mut ShardCore,
    conns: &mut Slab<Conn>,
    ticket: u64,
    entries: Lent,
    waited: bool,
) {
    let Some(op) = core.lending.ops.get_mut(&ticket) else {
        // Never happens (an op being borrowed for is never dropped), but keys must
        // never stay lent: send them straight back.
        let owner = entries.first().map(|(_, key, _)| core.topo.key_owner(key));
        match owner {
            Some(owner) if owner == core.id => take_back(core, conns, owner, entries, Vec::new()),
            Some(owner) => core.outbox.give_back(owner, entries, Vec::new()),
            None => {}
        }
        return;
    };
    op.borrowed.extend(entries);
    op.lent_waited |= waited;
    op.next += 1;
    advance(core, conns, ticket);
}

/// Every key is here: run the command, send the keys home, answer the client (or,
/// for a blocking command with nothing to serve, have the owners watch its keys).
/// A command that reads keys named in a value first checks it holds them all; if
/// not, it gives everything back and borrows again with them.
fn finish(core: &mut ShardCore, conns: &mut Slab<Conn>, ticket: u64) {
    finish_with(core, conns, ticket, None);
}

/// The transaction [`start_transaction`] was starting has every key and needs its
/// connection, which is out of the slab while its EXEC runs: run it now with
/// `conn` (the EXEC's), as [`finish`] would have; its reply if it is answered now.
pub fn finish_starting_with_conn(
    core: &mut ShardCore,
    conn: crate::shard::multi::ConnAccess<'_>,
) -> Option<Vec<u8>> {
    let ticket = core.lending.finish_with_conn.take()?;
    answered_at_once(core, (ticket, conn.who), |core| {
        finish_with(core, conn.conns, ticket, Some((conn.client, conn.replies)));
    })
}

/// [`finish`], with the client's connection when the caller holds it.
fn finish_with(
    core: &mut ShardCore,
    conns: &mut Slab<Conn>,
    ticket: u64,
    mut given: Option<(&mut ClientState, &mut ReplyQueue)>,
) {
    let Some(mut op) = core.lending.ops.remove(&ticket) else {
        return;
    };
    let with_conn = op.transaction.as_ref().is_some_and(|t| t.with_conn);
    if with_conn && given.is_none() && core.lending.starting == Some((ticket, op.conn)) {
        // Its connection is out of the slab, running the EXEC: that goes on here.
        core.lending.ops.insert(ticket, op);
        core.lending.finish_with_conn = Some(ticket);
        return;
    }
    let borrowed = std::mem::take(&mut op.borrowed);
    let mut homes: Vec<(usize, Vec<u8>, usize)> = Vec::with_capacity(borrowed.len());
    let locked = op.borrowing == Borrowing::Locked;
    let script = locked || crate::mesh::script_lock::is_script(op.meta);
    let cmd = row(&op);
    for (entry_db, key, entry) in borrowed {
        let owner = core.topo.key_owner(&key);
        if let Some(entry) = entry {
            core.engine.adopt(entry_db, entry);
            if script && owner != core.id {
                crate::mesh::script_lock::note_held(entry_db);
            }
        }
        homes.push((entry_db, key, owner));
    }
    if let Some(missing) = value_keys_missing(&core.engine, core.now_ms, &op, &homes) {
        send_home(core, conns, homes, &[], None, false);
        plan_more(&core.topo, &mut op, missing);
        core.lending.ops.insert(ticket, op);
        return advance(core, conns, ticket);
    }
    let caller = Caller {
        borrowing: true,
        ..op.caller
    };
    let mark = durable::borrowed_mark(core.wal.as_ref());
    let mut out = Vec::new();
    // While some client tracks, the command's writes invalidate in the order
    // written (see `report_written`), keys its batch already held included.
    let gathering = core.shared.tracking.anyone_tracks();
    let owed_since = core.invalidations_owed();
    // A transaction's SWAPDBs move the borrowed keys between databases here.
    let mut swaps = Vec::new();
    let mut ran = match &op.transaction {
        Some(transaction) => {
            if locked {
                let here = homes.iter().map(|(d, k, _)| (*d, k.clone())).collect();
                crate::mesh::script_lock::begin_transaction(here);
            }
            let (index, gen) = op.conn;
            let mut taken = match with_conn && given.is_none() {
                true => conns.take(index, gen),
                false => None,
            };
            let access = match (given.as_mut(), taken.as_deref_mut()) {
                (Some((client, replies)), _) => Some((&mut **client, &mut **replies)),
                (None, Some(conn)) => Some((&mut conn.client, &mut conn.replies)),
                (None, None) => None,
            };
            let access = access.map(|(client, replies)| crate::shard::multi::ConnAccess {
                client,
                replies,
                conns: &mut *conns,
                who: op.conn,
            });
            let mut ran =
                crate::shard::multi::run_borrowed(core, transaction, caller, &mut out, access);
            if let Some(conn) = taken {
                conns.restore(index, conn);
            }
            if locked {
                ran.loans
                    .extend(crate::mesh::script_lock::end_transaction());
            }
            // Its SELECTs move the connection (which waits for it); one starting
            // now is out of the slab and moves itself (`multi`).
            if let (Some(db), Some(conn)) = (ran.selected, conns.get_mut(index, gen)) {
                conn.client.db = db;
            }
            swaps = std::mem::take(&mut ran.swaps);
            Ran {
                modified: ran.modified,
                loans: ran.loans,
                ..Ran::default()
            }
        }
        None if swaps_dbs(op.meta) => {
            crate::shard::multi::every_shard_now(core, cmd, caller, op.argv.args(), &mut out);
            Ran::default()
        }
        None => {
            if locked {
                script_may_borrow_now(op.plan.len() <= 1);
            }
            // Lent to the hook that answers the other clients while a script is busy.
            let _lent = script.then(|| {
                crate::shard::busy_routes::keep_for_script(core.node_routes());
                crate::net::lent::lend(conns)
            });
            // Timed here, where it runs (its origin handed it off).
            let timed = core.command_timing().start();
            let ran = run_engine(core, cmd, caller, op.argv.args(), &mut out);
            if core.command_timing().active() && !ran.start_over {
                let ns = timed.map(|t| core.command_timing().elapsed_ns(t));
                let client_id = op.caller.client_id;
                match (ran.block.is_some(), op.first_run_ns) {
                    // Parks: recorded when answered, as on one shard.
                    (true, None) if op.waiting.is_none() => {
                        exec::observe_parked(core, cmd, None, ns);
                        op.first_run_ns = Some(ns.unwrap_or(0));
                    }
                    (true, _) => {}
                    (false, Some(first_ns)) => {
                        let args = op.sent_argv.as_ref().unwrap_or(&op.argv).args();
                        let served = exec::Served {
                            client_id,
                            first_ns,
                            ns,
                            reply_bytes: out.len(),
                        };
                        exec::observe_served(core, cmd, Some(args), served);
                    }
                    (false, None) => {
                        let who = crate::observability::Who::Id(client_id);
                        exec::observe(core, cmd, who, op.argv.args(), (ns, out.len()));
                    }
                }
            }
            ran
        }
    };
    // The queue's SWAPDBs moved the keys borrowed before it: each goes home named
    // by the database it is in now, as its owner renamed it too (those borrowed
    // while it ran were renamed as it went: `multi::swapped_in_queue`).
    for (key_db, _, _) in homes.iter_mut() {
        *key_db = after_swaps(&swaps, *key_db);
    }
    for (key_db, key) in std::mem::take(&mut ran.loans) {
        let owner = core.topo.key_owner(&key);
        homes.push((key_db, key, owner));
    }
    let mut modified = std::mem::take(&mut ran.modified);
    let op_places = 0..modified.len() as u32;
    let riders = run_riders(core, std::mem::take(&mut op.riders), &mut modified);
    // A command answered at once is out of the slab (its dispatcher keeps its
    // writer's slot when the gather waits for owners).
    let at_once = core.lending.starting == Some((ticket, op.conn));
    let mut held_at_once = false;
    let gather = match gathering {
        false => None,
        true => {
            let op_conns = (!at_once).then_some(&mut *conns);
            let op_held = hold_writer(op_conns, (op.conn, op.seq), &op.caller, op_places);
            held_at_once = at_once && op_held.is_some();
            let mut held: Vec<HeldWriter> = op_held.into_iter().collect();
            for (rider, _, places) in &riders {
                let (at, caller) = ((rider.conn, rider.seq), &rider.caller);
                held.extend(hold_writer(Some(&mut *conns), at, caller, places.clone()));
            }
            Some(Gathering {
                ticket,
                since: owed_since,
                held,
                conns: &mut *conns,
            })
        }
    };
    let keeping = !locked && ran.block.is_none() && may_keep(core, &op, gathering, &homes);
    // A command that keeps its keys tells their owners of its writes to them
    // when the batch sends them home, once per key (`defer_kept_written`).
    let waits = match keeping {
        true => {
            let now = defer_kept_written(core, &modified, &homes);
            report_written(core, &now, noloop_writer(&op.caller), gather)
        }
        false => report_written(core, &modified, noloop_writer(&op.caller), gather),
    };
    if waits && held_at_once {
        core.lending.keep_at_once = true;
    }
    // A key written outside the borrowed ones that another shard owns (COPY ... DB
    // n) goes to its owner too.
    for (key_db, key) in &modified {
        let owner = core.topo.key_owner(key);
        let known = homes.iter().any(|(d, k, _)| d == key_db && k == key)
            || crate::mesh::script_lock::batch_holds(*key_db, key)
            || core.lending.kept.contains(&(*key_db, key.clone()));
        if owner != core.id && !known {
            homes.push((*key_db, key.clone(), owner));
        }
    }
    if links_follow(core) {
        // A Ruvio replica's shard links: the records follow each owner's
        // stream where it stood (its records before the loan are in its
        // history: they left it before its keys did).
        let mut owners: Vec<usize> = homes.iter().map(|(_, _, owner)| *owner).collect();
        owners.sort_unstable();
        owners.dedup();
        for owner in owners {
            record_link_barrier(core, owner);
        }
    }
    let for_feed = log_local_changes(core, &modified, &homes);
    let acks = mark.map(|_| ticket);
    // A locked command continues its shard's batch, or ends it (see `BATCH_MAX`);
    // one that swapped databases never joins one (see `may_borrow`).
    let batching = locked && may_batch(core) && !op.swaps_dbs();
    let homes = match (batching, locked) {
        (true, _) => keep_in_batch(core, homes),
        (false, true) => {
            homes.extend(batch_homes(core));
            homes
        }
        (false, false) if keeping => keep_borrowed(core, homes),
        // Any other borrowing command ends the batch of borrowing commands
        // (a full one, or one whose keys must now travel with records).
        (false, false) => {
            homes.extend(kept_homes(core));
            homes
        }
    };
    let owners = send_home(core, conns, homes, &modified, acks, for_feed);
    if batching {
        // The lock stays with this shard for the next locked command.
        op.borrowing = Borrowing::Idle;
        core.lending.batched += 1;
    } else {
        stop_borrowing(core, &mut op);
        if locked {
            core.lending.batched = 0;
        }
    }
    if ran.locked_now {
        crate::mesh::script_lock::unlock(core.script_server());
    }
    match ran.block {
        Some(block) => wait(core, conns, ticket, op, block),
        None => {
            let mut answers = vec![Answer::of(ticket, &op, out)];
            answers.extend(riders.into_iter().map(|(rider, reply, _)| Answer {
                ticket,
                conn: rider.conn,
                seq: rider.seq,
                client_id: rider.caller.client_id,
                reply,
            }));
            durable::answer_borrowed(core, conns, ticket, mark, owners, answers);
        }
    }
}

/// The script about to run holds the script lock in a quiet server: it may borrow
/// undeclared keys of other shards while it runs (`probation`: its declared keys
/// are on one shard, see [`crate::mesh::script_lock::must_lock`]).
fn script_may_borrow_now(probation: bool) {
    crate::mesh::script_lock::begin_run(crate::mesh::script_lock::Run {
        holds_lock: true,
        probation,
        ..Default::default()
    });
}

/// A script that ran for a client of this shard, or for another shard, without a
/// log, took the script lock while it ran and borrowed `loans` (never this
/// shard's keys): send them home; each owner touches the watchers of those it
/// wrote (`modified`).
pub fn send_loans_home(
    core: &mut ShardCore,
    loans: Vec<DbKey>,
    modified: &[DbKey],
    noloop_writer: Option<u64>,
) {
    report_written(core, modified, noloop_writer, None);
    let mut returns: AHashMap<usize, Lent> = AHashMap::new();
    for (db, key) in loans {
        let entry = core.engine.lend(db, &key, 0);
        let owner = core.topo.key_owner(&key);
        returns.entry(owner).or_default().push((db, key, entry));
    }
    for (owner, entries) in returns {
        core.outbox.give_back(owner, entries, Vec::new());
    }
}

/// Run the transactions riding on an op's keys, in the order they joined; what
/// they wrote joins `modified`. Returns each with its reply and the places of
/// its writes in `modified`.
fn run_riders(
    core: &mut ShardCore,
    riders: Vec<Rider>,
    modified: &mut Vec<DbKey>,
) -> Vec<(Rider, Vec<u8>, std::ops::Range<u32>)> {
    riders
        .into_iter()
        .map(|rider| {
            let caller = Caller {
                borrowing: true,
                ..rider.caller
            };
            let mut out = Vec::new();
            let written =
                crate::shard::multi::run_borrowed(core, &rider.transaction, caller, &mut out, None)
                    .modified;
            let start = modified.len() as u32;
            modified.extend(written);
            (rider, out, start..modified.len() as u32)
        })
        .collect()
}

/// A transaction without WATCH on `keys` rides on the op of an EXEC coordinated
/// here that will hold them all, if one is still borrowing: it runs right after
/// that transaction, on the same loan, so transactions pipelined on the same keys
/// (by one connection or several) take one round trip together instead of one
/// each. A client whose previous transaction is still borrowing (`after`) rides
/// on that one only, so its transactions run in its order. Returns the op's
/// ticket, or the transaction when there is no such op.
#[allow(clippy::too_many_arguments)]
pub fn join_transaction(
    core: &mut ShardCore,
    after: Option<u64>,
    conn: (u32, u32),
    seq: u64,
    caller: Caller,
    transaction: Box<Transaction>,
    keys: &[DbKey],
) -> Result<u64, Box<Transaction>> {
    let Some((&ticket, op)) = core.lending.ops.iter_mut().find(|(ticket, op)| {
        after.is_none_or(|t| t == **ticket) && op.takes_riders() && op.will_hold(keys)
    }) else {
        return Err(transaction);
    };
    op.riders.push(Rider {
        conn,
        seq,
        caller,
        transaction,
    });
    Ok(ticket)
}

/// A command whose keys are the ones it names: a keyspace command, not a
/// script, not every shard's, not SORT's BY/GET patterns, not another
/// database's. A client's command sent while its transaction is in flight
/// (borrowed here, or in place: `shard::in_place::must_wait`) runs at once
/// only when it is one of these, on none of the transaction's keys.
pub fn touches_only_named_keys(cmd: &Command) -> bool {
    matches!(cmd.handler, Some(Handler::Engine(_)))
        && !cmd.meta.has(ALL_SHARDS)
        && !cmd.meta.has(DB_OPTION)
        && !cmd.meta.keys.reads_keys_from_value()
        && cmd.meta.group != "scripting"
}

/// A client whose transaction runs on borrowed keys goes on meanwhile; a command
/// it sends then waits for that transaction when it may touch its keys (a key in
/// common, a command that is not a keyspace command or reads every shard), unless
/// it is an EXEC that can ride on the same loan ([`join_transaction`]). Commands
/// on other keys run at once, as any command of a pipeline on other keys does in
/// forward mode.
pub fn must_wait_for_transaction(
    core: &ShardCore,
    client: &ClientState,
    args: ruvio_resp::Args<'_>,
) -> bool {
    let Some((ticket, _)) = client.borrowing_tx else {
        return false;
    };
    let Some(op) = core.lending.ops.get(&ticket) else {
        return false;
    };
    let Some(cmd) = registry()
        .lookup(args.get(0))
        .and_then(|c| c.resolve(args).ok())
    else {
        // Unknown or refused: answered at once, touching nothing.
        return false;
    };
    if let Some(queued) = &client.multi {
        return cmd.meta.name == "exec"
            && !crate::shard::multi::borrowed_keys(core, client, queued)
                .is_some_and(|keys| op.takes_riders() && op.will_hold(&keys));
    }
    if cmd.meta.name == "multi" {
        return false;
    }
    !touches_only_named_keys(cmd)
        || cmd
            .meta
            .keys
            .keys(args)
            .any(|key| op.will_hold(&[(client.db, key.to_vec())]))
}
