//! Scripts that touch keys they did not declare, on other shards (forward mode with
//! several shards): what one Redis allows (BullMQ builds job keys from a prefix
//! inside its scripts) and Redis Cluster refuses.
//!
//! A script runs to completion on one shard, synchronously: it cannot wait for
//! another shard's loop the way a borrowing command does (`lending`). So a script
//! that needs such a key borrows it *now*: it sends the owner a lend request and
//! waits on this thread for the answer ([`crate::mesh::forward::lend_now`]). The key comes
//! into this shard's keyspace, is lent (invisible) on its owner, and goes home with
//! the script's other borrowed keys when the script is over. Waiting on a thread is
//! safe only when nothing the owner needs in order to answer can be waiting for
//! this shard, which the **script lock** arranges:
//!
//! - One script at a time, in the whole process, may wait so: the holder of the
//!   lock (an atomic; shard + 1, 0 when free).
//! - Before the holder's script starts, the server is *quiet*: no command of any
//!   shard is borrowing keys (each shard counts its borrowing commands, in
//!   [`crate::stats::ShardGauges::borrowing`]), and no key of the holder's shard is
//!   out on loan. A command that starts borrowing while the lock is held parks
//!   until it is free (it counts itself first, then looks at the lock; the holder
//!   takes the lock first, then looks at the counts: with sequentially consistent
//!   atomics one of the two sees the other). So no other shard ever waits for the
//!   holder, and every owner's loop answers the holder's requests.
//! - Commands that borrow nothing (single-key commands, forwarded or local, and
//!   scripts whose keys are all on one shard) go on everywhere meanwhile.
//!
//! Which scripts take the lock (before they start, as any borrowing command): a
//! script whose declared keys are on several shards (it borrows anyway); a script
//! known to reach keys outside its declared keys' slots (Redis Cluster's rule:
//! every run shows it, wherever its keys live; remembered for the process by body,
//! SHA1 or function name and key count); and every script on its first run on a
//! shard, its *probation*. A script whose probation reached no such key runs
//! without the lock on that shard from then on, where its keys live.
//!
//! A later run without the lock that reaches such a key anyway (the script names it
//! only on some branch) takes the lock there and then if it is free, the server is
//! quiet and no log would replay the borrowed keys' writes on this shard; or, if it
//! wrote nothing yet and runs for a client of this shard, stops (its calls fail from
//! then on, so it changes nothing) and runs again from its start under the lock; or
//! gets Redis Cluster's error for that call. It is known from then on. The costs and
//! the remaining difference are in docs/scripting.md.

use crate::cluster::topology::Topology;
use crate::mesh::forward::Outbox;
use crate::mesh::lending::{DbKey, LendRequest, Lending};
use crate::stats::ShardGauges;
use ahash::AHashSet;
use ruvio_engine::scripting::{Elsewhere, Reach, Reaching, Spreading};
use ruvio_engine::Engine;
use ruvio_resp::{Args, OwnedArgs};
use std::cell::RefCell;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::atomic::{AtomicU64, AtomicUsize};
use std::sync::Mutex;

/// What the script lock reads of the server: the lock itself, every shard's
/// published gauges (keys, loans, borrowing commands), the topology, and which
/// shard asks. The shard builds it from the state every shard shares
/// (`Shared::script_server`).
#[derive(Clone, Copy)]
pub struct Server<'a> {
    pub lock: &'a ScriptLock,
    pub shards: &'a [ShardGauges],
    pub topo: &'a Topology,
    /// The asking shard.
    pub me: usize,
}

/// The process-wide part (in the state every shard shares, `shard::Shared`).
#[derive(Debug, Default)]
pub struct ScriptLock {
    /// 0 when free, else the holding shard + 1.
    holder: AtomicUsize,
    /// Shards with commands parked until the lock is free, a bit each (shard % 64).
    parked: AtomicU64,
    /// Scripts known to reach undeclared keys of other shards ([`identity`]).
    known: Mutex<AHashSet<u64>>,
    /// Bumped when `known` grows: each shard refreshes its copy then.
    known_version: AtomicU64,
}

/// How the script about to run may reach undeclared keys of other shards.
#[derive(Clone, Copy, Debug, Default)]
pub struct Run {
    /// It runs for a client of this shard and may start over under the lock.
    pub may_start_over: bool,
    /// Its command holds the script lock: it may borrow keys now.
    pub holds_lock: bool,
    /// It holds the lock for its probation: its declared keys are on one shard
    /// and this shard has not run it without the lock ([`must_lock`]).
    pub probation: bool,
    /// It may take the lock while it runs, if the lock is free and the server quiet
    /// (it runs for a client of this shard or a forwarded command, not on
    /// borrowed keys, and no log would replay its writes of other shards' keys
    /// here).
    pub may_lock_now: bool,
}

/// What a script left behind ([`end_run`]).
#[derive(Debug, Default)]
pub struct Ended {
    /// Keys it borrowed while it ran, `(db, key)`: in this shard's keyspace until
    /// they are sent home.
    pub loans: Vec<DbKey>,
    /// It reached undeclared keys of other shards (it is remembered: [`remember`]).
    pub reached: bool,
    /// It took the script lock while it ran: free it once the loans are sent.
    pub locked_now: bool,
    /// It ran its probation under the lock and reached no key outside its
    /// declared slots: it may run without the lock here from now on.
    pub confined: bool,
    /// Per database: keys of other shards here for it (borrowed before it ran or
    /// while it ran), which its DBSIZE counts on their owners.
    pub held: Vec<u64>,
    /// The longest wait, in ns, for another shard's keys while it ran (the
    /// latency monitor's `mesh-round-trip`: the shard serves nothing meanwhile).
    pub longest_wait_ns: u64,
}

impl ScriptLock {
    /// The shard holding the lock.
    pub fn holder(&self) -> Option<usize> {
        self.holder.load(SeqCst).checked_sub(1)
    }
}

/// This shard thread's part.
#[derive(Default)]
struct ThisShard {
    /// The keys a batch of borrowing commands keeps here
    /// (`mesh::lending::Lending::kept`, mirrored: [`note_kept`]).
    kept: Vec<DbKey>,
    run: Run,
    /// What the running script leaves behind so far.
    ended: Ended,
    /// A copy of the scripts known to reach undeclared keys of other shards, and
    /// the version it was taken at.
    reaching: AHashSet<u64>,
    known_version: u64,
    /// Scripts this shard ran under the lock that reached none ([`must_lock`]).
    confined: AHashSet<u64>,
    /// Requests the shard's scripts sent to other shards (their tickets).
    requests_sent: u64,
    /// A transaction running under the lock ([`begin_transaction`]): keys of other
    /// shards here for it (borrowed for its queue, or by its earlier scripts), which
    /// its scripts must not ask their owners for again, and how many per database.
    transaction: Option<(Vec<DbKey>, Vec<u64>)>,
    /// Keys of other shards the scripts of a batch borrowed (the lock stays with
    /// this shard between them: `lending`'s batches), sent home when it ends.
    batch: Vec<DbKey>,
    /// Those of `batch` its commands wrote: their owners hear of it once, when
    /// the batch ends, before the keys go home (not once per command). Each with
    /// its NOLOOP writer when one NOLOOP client wrote it and nobody else did
    /// ([`defer_written`]).
    batch_written: Vec<(DbKey, Option<u64>)>,
    /// The shard's outbox while a script that may borrow runs: shipped before its
    /// first lend request, so that nothing the shard queued earlier for an owner
    /// (a key given back, a client's earlier forwarded command) comes after it.
    outbox: Option<crate::mesh::forward::Outbox>,
}

thread_local! {
    static THIS: RefCell<ThisShard> = RefCell::default();
}

impl ThisShard {
    /// The running script is about to wait on other shards' answers: it holds the
    /// script lock, or takes it now (free, a quiet server, allowed by its run);
    /// otherwise it starts over (nothing written yet, allowed) or is refused.
    /// What the shard queued for other shards goes out first.
    fn may_wait_on_others(&mut self, server: Server<'_>, wrote: bool) -> Result<(), Reach> {
        if !self.holds_lock() {
            let run = self.run;
            if run.may_lock_now && lock_now(server) {
                self.run.holds_lock = true;
                self.ended.locked_now = true;
            } else if run.may_start_over && !wrote {
                return Err(Reach::StartOver);
            } else {
                return Err(Reach::Refused);
            }
        }
        if let Some(outbox) = self.outbox.as_mut() {
            crate::mesh::forward::with_mesh(|mesh| mesh.ship(outbox));
        }
        Ok(())
    }

    /// Key `key` of `db` is here already for the running script: it borrowed it, or
    /// its transaction did.
    fn holds(&self, db: usize, key: &[u8]) -> bool {
        let here = |keys: &[DbKey]| has(keys, db, key);
        here(&self.ended.loans)
            || self
                .transaction
                .as_ref()
                .is_some_and(|(keys, _)| here(keys))
            // A batch's keys are the lock holder's: a script without it must not
            // use them (it gets the lock, starts over or is refused instead).
            || (self.holds_lock() && here(&self.batch))
            // So are the keys a batch of borrowing commands keeps here
            // ([`note_kept`]): their owners would wait for them to come home,
            // which waits for this script.
            || (self.holds_lock() && here(&self.kept))
    }

    /// The running script, or transaction, holds the script lock.
    fn holds_lock(&self) -> bool {
        self.run.holds_lock || self.transaction.is_some()
    }

    /// The running script holds keys of other shards (borrowed before it ran, or
    /// while it ran, or by its transaction, or by the scripts before it in this
    /// shard's batch).
    fn holds_any(&self) -> bool {
        !self.ended.loans.is_empty()
            || !self.batch.is_empty()
            || !self.kept.is_empty()
            || self.ended.held.iter().any(|&n| n > 0)
            || self
                .transaction
                .as_ref()
                .is_some_and(|(keys, _)| !keys.is_empty())
    }

    /// Every shard but this one (`me` of `shards`) runs `call` now: their replies,
    /// in shard order.
    fn run_on_every_other(
        &mut self,
        me: usize,
        shards: usize,
        call: Elsewhere<'_>,
    ) -> Vec<Vec<u8>> {
        (0..shards)
            .filter(|&s| s != me)
            .map(|s| self.run_now(me, s, call, OwnedArgs::from_args(call.args)))
            .collect()
    }

    /// Shard `shard` runs the script's call `args` now; its reply (empty if it is
    /// exiting with the process).
    fn run_now(
        &mut self,
        me: usize,
        shard: usize,
        call: Elsewhere<'_>,
        args: OwnedArgs,
    ) -> Vec<u8> {
        let ticket = self.next_ticket();
        let request = crate::mesh::forward::ShardMsg::RunNow {
            from: me,
            ticket,
            db: call.db,
            resp3: call.resp3,
            args,
        };
        let reply = crate::mesh::forward::request_now(shard, request, |msg| match msg {
            crate::mesh::forward::ShardMsg::RanNow { ticket: t, reply } if t == ticket => Ok(reply),
            other => Err(other),
        });
        reply.unwrap_or_default()
    }

    /// A ticket for the running script's next request to another shard.
    fn next_ticket(&mut self) -> u64 {
        self.requests_sent += 1;
        LEND_NOW_TICKETS + self.requests_sent
    }
}

/// Tickets of a script's requests to other shards: apart from the lending module's
/// own.
const LEND_NOW_TICKETS: u64 = 1 << 63;

/// The commands that run a script. SKIP_MONITOR marks only these rows (Redis
/// feeds MONITOR a script before it runs), so on the request path every other
/// command stops at one flag test.
#[inline]
pub fn is_script(meta: &ruvio_engine::CommandMeta) -> bool {
    meta.has(ruvio_engine::command::flags::SKIP_MONITOR)
        && meta.group == "scripting"
        && matches!(
            meta.name,
            "eval" | "eval_ro" | "evalsha" | "evalsha_ro" | "fcall" | "fcall_ro"
        )
}

/// The script about to run reaches undeclared keys as `run` says (until [`end_run`]).
pub fn begin_run(run: Run) {
    THIS.with(|t| {
        let mut t = t.borrow_mut();
        t.run = run;
        // Only what this script reaches counts as its own (a transaction's SCAN or
        // SORT before it may have reached other shards).
        t.ended.reached = false;
        if let Some((_, held)) = &t.transaction {
            t.ended.held = held.clone();
        }
    });
}

/// A transaction starts running its queue under the script lock, on `keys`
/// borrowed for it (with the counts [`note_held`] took): its scripts may borrow
/// more while they run; what one borrowed stays here for the next ones.
pub fn begin_transaction(keys: Vec<DbKey>) {
    THIS.with(|t| {
        let mut t = t.borrow_mut();
        let held = std::mem::take(&mut t.ended.held);
        t.transaction = Some((keys, held));
    });
}

/// A SWAPDB of the transaction's queue swapped databases `a` and `b` on every
/// shard: the keys held here for it are in the other one now (their owners
/// rename them too: [`crate::mesh::lending::Lending::holder_swapping`]).
pub fn swapped_in_transaction((a, b): (usize, usize)) {
    let rename = |keys: &mut [DbKey]| {
        for (db, _) in keys {
            *db = crate::mesh::lending::swapped(*db, (a, b));
        }
    };
    let swap_counts = |held: &mut Vec<u64>| {
        if held.len() <= a.max(b) {
            held.resize(a.max(b) + 1, 0);
        }
        held.swap(a, b);
    };
    THIS.with(|t| {
        let t = &mut *t.borrow_mut();
        rename(&mut t.ended.loans);
        swap_counts(&mut t.ended.held);
        if let Some((keys, held)) = t.transaction.as_mut() {
            rename(keys);
            swap_counts(held);
        }
    });
}

/// The transaction's queue ran ([`begin_transaction`]): the keys its commands
/// borrowed outside its scripts (SORT's pattern keys), to send home with the others.
pub fn end_transaction() -> Vec<DbKey> {
    THIS.with(|t| {
        let mut t = t.borrow_mut();
        t.transaction = None;
        std::mem::take(&mut t.ended).loans
    })
}

/// The shard's outbox, for the script about to run ([`ThisShard::outbox`]).
pub fn hold_outbox(outbox: crate::mesh::forward::Outbox) {
    THIS.with(|t| t.borrow_mut().outbox = Some(outbox));
}

/// The shard's outbox back after the script.
pub fn give_back_outbox() -> crate::mesh::forward::Outbox {
    THIS.with(|t| t.borrow_mut().outbox.take().unwrap_or_default())
}

/// The script about to run may borrow keys while it runs ([`begin_run`]).
pub fn may_borrow() -> bool {
    THIS.with(|t| {
        let run = t.borrow().run;
        run.holds_lock || run.may_lock_now
    })
}

/// The script ran: what it left behind.
pub fn end_run() -> Ended {
    THIS.with(|t| {
        let mut t = t.borrow_mut();
        let confined = std::mem::take(&mut t.run).probation && !t.ended.reached;
        let t = &mut *t;
        if let Some((keys, held)) = t.transaction.as_mut() {
            keys.extend(t.ended.loans.iter().cloned());
            *held = t.ended.held.clone();
        }
        Ended {
            confined,
            ..std::mem::take(&mut t.ended)
        }
    })
}

/// The host's side of a script's call of `keys` of `db` that it did not declare
/// and other shards own ([`ruvio_engine::scripting::ScriptHost::reach`]).
pub fn reach(server: Server<'_>, engine: &mut Engine, call: Reaching<'_>) -> Reach {
    let Server { topo, me, .. } = server;
    let (db, wrote) = (call.db, call.wrote);
    THIS.with(|t| {
        let mut t = t.borrow_mut();
        t.ended.reached |= call.outside;
        let mut wanted: Vec<(usize, DbKey)> = call
            .keys
            .iter()
            .map(|key| (topo.key_owner(key), key))
            .filter(|(owner, _)| *owner != me)
            .filter(|(_, key)| !t.holds(db, key))
            .map(|(owner, key)| (owner, (db, key.to_vec())))
            .collect();
        if wanted.is_empty() {
            return Reach::Here;
        }
        if let Err(refusal) = t.may_wait_on_others(server, wrote) {
            return refusal;
        }
        // With the lock, the keys kept here are the script's to use.
        wanted.retain(|(_, (db, key))| !t.holds(*db, key));
        wanted.sort();
        wanted.dedup();
        let mut at = 0;
        while at < wanted.len() {
            let owner = wanted[at].0;
            let end = at + wanted[at..].iter().take_while(|(o, _)| *o == owner).count();
            let ticket = t.next_ticket();
            let request = LendRequest {
                from: me,
                ticket,
                keys: wanted[at..end].iter().map(|(_, k)| k.clone()).collect(),
                now: true,
            };
            let asked = std::time::Instant::now();
            let lent = crate::mesh::forward::lend_now(owner, request);
            let waited = asked.elapsed().as_nanos() as u64;
            t.ended.longest_wait_ns = t.ended.longest_wait_ns.max(waited);
            for (entry_db, key, entry) in lent {
                if let Some(entry) = entry {
                    engine.adopt(entry_db, entry);
                    add_held(&mut t.ended.held, entry_db);
                }
                t.ended.loans.push((entry_db, key));
            }
            at = end;
        }
        Reach::Here
    })
}

/// The host's side of a script's KEYS, FLUSHDB, FLUSHALL or SWAPDB
/// ([`ruvio_engine::scripting::ScriptHost::elsewhere`]): with the script lock (held,
/// or taken now as for a key of another shard; the script is known from then on),
/// every other shard runs it now and answers, in shard order. A SWAPDB while the
/// script holds keys of other shards is refused: they would go home to the wrong
/// database.
pub fn elsewhere(server: Server<'_>, call: Elsewhere<'_>) -> Result<Vec<Vec<u8>>, Reach> {
    let Server { topo, me, .. } = server;
    THIS.with(|t| {
        let mut t = t.borrow_mut();
        let swapdb = call.args.get(0).eq_ignore_ascii_case(b"swapdb");
        if swapdb && t.holds_any() {
            return Err(Reach::Unsupported);
        }
        t.ended.reached = true;
        t.may_wait_on_others(server, call.wrote)?;
        if swapdb && !wait_for_loans_home(server.shards) {
            return Err(Reach::Unsupported);
        }
        Ok(t.run_on_every_other(me, topo.nodes.len(), call))
    })
}

/// The host's side of a script's SCAN or RANDOMKEY
/// ([`ruvio_engine::scripting::ScriptHost::spread`]): the shards that answer are
/// asked as a client's would be routed (this one through `here`; RANDOMKEY goes on
/// to the next shard while it finds none); asking another takes the script lock as
/// for a key of another shard.
pub fn spread(
    server: Server<'_>,
    spreading: Spreading<'_>,
    here: &mut dyn FnMut(Args<'_>) -> Vec<u8>,
) -> Result<Vec<u8>, Reach> {
    let Server { topo, me, .. } = server;
    let call = spreading.call;
    let mut ask = |shard: usize, args: OwnedArgs| -> Result<Vec<u8>, Reach> {
        if shard == me {
            return Ok(here(args.args()));
        }
        THIS.with(|t| {
            let mut t = t.borrow_mut();
            t.ended.reached = true;
            t.may_wait_on_others(server, call.wrote)?;
            Ok(t.run_now(me, shard, call, args))
        })
    };
    let args = OwnedArgs::from_args(call.args);
    if !call.args.get(0).eq_ignore_ascii_case(b"scan") {
        let counts: Vec<u64> = (0..topo.nodes.len())
            .map(|s| match s == me {
                true => spreading.here_keys,
                false => published_keys(server.shards, s, call.db),
            })
            .collect();
        // Picked by the counts last published; a shard found empty (they lag by up
        // to a tick) passes to the next, so nil means no shard has a key.
        let first = crate::net::conn::weighted_pick(&counts, spreading.pick).unwrap_or(me);
        let shards = counts.len();
        let mut reply = Vec::new();
        for shard in (0..shards).map(|i| (first + i) % shards) {
            reply = ask(shard, args.clone())?;
            if !(reply.starts_with(b"$-1") || reply.starts_with(b"_")) {
                break;
            }
        }
        return Ok(reply);
    }
    let shards = topo.nodes.len();
    let cursor = ruvio_engine::parse_cursor(call.args.get(1));
    let Some((first, inner)) = cursor.and_then(|c| crate::net::conn::scan_cursor(c, shards)) else {
        // Unparsable, or past the last shard: the engine answers as Redis.
        return ask(me, args);
    };
    let mut parts = Vec::new();
    for shard in first..shards {
        let cursor = if shard == first { inner } else { 0 }.to_string();
        let part_args = call
            .args
            .iter()
            .enumerate()
            .map(|(i, a)| if i == 1 { cursor.as_bytes() } else { a })
            .collect();
        let part = ask(shard, part_args)?;
        let more = crate::net::conn::scan_parts(&part).is_none_or(|(inner, _, _)| inner != 0);
        parts.push(part);
        if more {
            break;
        }
    }
    let mut out = Vec::new();
    crate::net::conn::merge_scan(&parts, first as u64, &mut out);
    Ok(out)
}

/// Keys of database `db` on shard `shard`, as it last published them.
fn published_keys(shards: &[ShardGauges], shard: usize, db: usize) -> u64 {
    shards[shard]
        .keys
        .get(db)
        .map_or(0, |(keys, _)| keys.load(SeqCst))
}

/// A command of a transaction holding the script lock that each shard answers
/// for its part (DBSIZE, KEYS, FLUSHDB, FLUSHALL): every other shard's reply, in
/// shard order, asked now (what this shard queued for them goes out first).
/// `outbox`: shard `me`'s, of `shards`.
pub fn run_on_others(
    outbox: &mut Outbox,
    (me, shards): (usize, usize),
    db: usize,
    resp3: bool,
    args: Args<'_>,
) -> Vec<Vec<u8>> {
    crate::mesh::forward::with_mesh(|mesh| mesh.ship(outbox));
    let call = Elsewhere {
        db,
        args,
        resp3,
        wrote: true,
    };
    THIS.with(|t| t.borrow_mut().run_on_every_other(me, shards, call))
}

/// DBSIZE of database `db` on the other shards, asked of each now, when the running
/// script holds the script lock (its keys of theirs are here, in this shard's
/// count, not in theirs); `None` otherwise (the caller uses the published counts).
pub fn count_elsewhere(server: Server<'_>, db: usize) -> Option<u64> {
    let Server { topo, me, .. } = server;
    THIS.with(|t| {
        let mut t = t.borrow_mut();
        if !t.holds_lock() {
            return None;
        }
        if let Some(outbox) = t.outbox.as_mut() {
            crate::mesh::forward::with_mesh(|mesh| mesh.ship(outbox));
        }
        let dbsize: OwnedArgs = [b"DBSIZE".as_slice()].into_iter().collect();
        let call = Elsewhere {
            db,
            args: dbsize.args(),
            resp3: false,
            wrote: false,
        };
        let parts = t.run_on_every_other(me, topo.nodes.len(), call);
        let count = |reply: &Vec<u8>| ruvio_resp::parse_int_reply(reply).unwrap_or(0).max(0);
        Some(parts.iter().map(count).sum::<i64>() as u64)
    })
}

/// A key of another shard of database `db` is here for the script about to run
/// (borrowed for its command).
pub fn note_held(db: usize) {
    THIS.with(|t| add_held(&mut t.borrow_mut().ended.held, db));
}

fn add_held(held: &mut Vec<u64>, db: usize) {
    if held.len() <= db {
        held.resize(db + 1, 0);
    }
    held[db] += 1;
}

/// Keys of other shards of database `db` here for the running script: a script's
/// DBSIZE counts them on their owners, not here.
pub fn held_here(db: usize) -> u64 {
    THIS.with(|t| t.borrow().ended.held.get(db).copied().unwrap_or(0))
}

/// Take the lock in the middle of a script, if it is free and the server quiet;
/// false, and the lock stays free, otherwise.
fn lock_now(server: Server<'_>) -> bool {
    let Server {
        lock, shards, me, ..
    } = server;
    if lock
        .holder
        .compare_exchange(0, me + 1, SeqCst, SeqCst)
        .is_err()
    {
        return false;
    }
    let quiet = shards[me].lent.load(SeqCst) == 0
        && shards
            .iter()
            .all(|gauges| gauges.borrowing.load(SeqCst) == 0);
    if !quiet {
        free(server);
    }
    quiet
}

/// Keys borrowed by a locked command's scripts stay here for the next command of
/// the batch ([`take_batch`] when it ends).
pub fn keep_in_batch(loans: Vec<DbKey>) {
    THIS.with(|t| t.borrow_mut().batch.extend(loans));
}

/// Keys of other shards a batch of borrowing commands keeps here until the end
/// of the loop iteration (`shard/lending/batch.rs`): a script holding the lock
/// uses them where they are, as a locked batch's keys.
pub fn note_kept(keys: &[DbKey]) {
    THIS.with(|t| t.borrow_mut().kept.extend_from_slice(keys));
}

/// The batch of borrowing commands sent its keys home.
pub fn forget_kept() {
    THIS.with(|t| t.borrow_mut().kept.clear());
}

/// The keys the batch kept, to send home (the batch is over).
pub fn take_batch() -> Vec<DbKey> {
    THIS.with(|t| std::mem::take(&mut t.borrow_mut().batch))
}

/// A command of client `noloop_writer` (in NOLOOP mode; `None`: any other
/// writer) wrote `key` of `db`: true when the batch keeps it, and its owner
/// hears of the write when the batch ends ([`take_batch_written`]).
///
/// The owner then invalidates the key's readers as Redis would have at each
/// write, except the NOLOOP client, when it is the key's only writer in the
/// batch: its own writes owe it nothing. A key that another client wrote too
/// invalidates every reader, the NOLOOP client included (Redis would have, at
/// the other client's write, had the NOLOOP client read the key before it; an
/// invalidation too many costs a cache one read, one too few serves a stale
/// value).
pub fn defer_written(db: usize, key: &[u8], noloop_writer: Option<u64>) -> bool {
    THIS.with(|t| {
        let mut t = t.borrow_mut();
        if !has(&t.batch, db, key) {
            return false;
        }
        let noted = t
            .batch_written
            .iter_mut()
            .find(|((d, k), _)| *d == db && k == key);
        match noted {
            Some((_, writer)) if *writer != noloop_writer => *writer = None,
            Some(_) => {}
            None => t.batch_written.push(((db, key.to_vec()), noloop_writer)),
        }
        true
    })
}

/// `keys` has `key` of `db`.
fn has(keys: &[DbKey], db: usize, key: &[u8]) -> bool {
    keys.iter().any(|(d, k)| *d == db && k == key)
}

/// The keys the batch kept that its commands wrote, in the order first
/// written, each with its NOLOOP writer ([`defer_written`]); the batch is over.
pub fn take_batch_written() -> Vec<(DbKey, Option<u64>)> {
    THIS.with(|t| std::mem::take(&mut t.borrow_mut().batch_written))
}

/// Key `key` of `db` is here, kept by the batch of locked commands.
pub fn batch_holds(db: usize, key: &[u8]) -> bool {
    THIS.with(|t| has(&t.borrow().batch, db, key))
}

/// Take the script lock for this shard; false when another shard holds it (this
/// shard is then woken when it is free). A shard keeping it for a batch has it for
/// its next command once the one before is done.
pub fn try_lock(server: Server<'_>, lending: &Lending) -> bool {
    let lock = server.lock;
    let me = server.me + 1;
    if lending.holding_batch() && lock.holder.load(SeqCst) == me {
        return !lending.lock_in_use();
    }
    if lock.holder.compare_exchange(0, me, SeqCst, SeqCst).is_ok() {
        return true;
    }
    wait_for_lock(server)
}

/// Ask to be woken when the lock is free; true when it already is (try again).
fn wait_for_lock(server: Server<'_>) -> bool {
    let lock = server.lock;
    lock.parked.fetch_or(1 << (server.me % 64), SeqCst);
    let me = server.me + 1;
    lock.holder.compare_exchange(0, me, SeqCst, SeqCst).is_ok()
}

/// The lock holder may let its script borrow now: no command of any shard is
/// borrowing keys, and none of this shard's keys is out on loan. One that swaps
/// databases (`swapping`) also waits for every key given back to be home: then
/// every key out on loan while it runs is its own, which it renames as the swap
/// moves them, as their owners do ([`crate::mesh::lending::Lending::swap_dbs`]).
pub fn quiet(server: Server<'_>, lending: &Lending, swapping: bool) -> bool {
    let shards = server.shards;
    !lending.any_lent()
        && shards.iter().all(|s| s.borrowing.load(SeqCst) == 0)
        && (!swapping || no_loans(shards))
}

/// No key of any shard is out on loan.
fn no_loans(shards: &[ShardGauges]) -> bool {
    shards.iter().all(|s| s.lent.load(SeqCst) == 0)
}

/// A script holding the lock and no key of another shard swaps databases: the
/// keys other commands gave back before it took the lock are on their way home
/// (their owners take them back in their own loops); wait for them, at most
/// `LOANS_HOME_WAIT`. False if they are not home by then.
fn wait_for_loans_home(shards: &[ShardGauges]) -> bool {
    let start = std::time::Instant::now();
    while !no_loans(shards) {
        if start.elapsed() > LOANS_HOME_WAIT {
            return false;
        }
        std::thread::yield_now();
    }
    true
}

/// How long [`wait_for_loans_home`] waits: keys given back arrive within an
/// owner's loop iteration.
const LOANS_HOME_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

/// Free the lock and wake the shards that parked commands behind it.
pub fn unlock(server: Server<'_>) {
    free(server);
}

/// Free the lock held by shard `me` and wake the shards parked behind it.
fn free(server: Server<'_>) {
    let Server {
        lock, shards, me, ..
    } = server;
    lock.holder.store(0, SeqCst);
    let parked = lock.parked.swap(0, SeqCst);
    for shard in (0..shards.len()).filter(|s| parked & (1 << (s % 64)) != 0) {
        if shard != me {
            crate::mesh::forward::ring(shard);
        }
    }
}

/// A command of this shard starts borrowing keys; false when another shard holds
/// the script lock (the command waits until it is free: this shard is woken then).
pub fn begin_borrowing(server: Server<'_>) -> bool {
    let lock = server.lock;
    let count = &server.shards[server.me].borrowing;
    count.fetch_add(1, SeqCst);
    // Parked on the holder's own shard too: the holder's script will wait on
    // this thread, where a borrowing command could not go on.
    if lock.holder.load(SeqCst) == 0 {
        return true;
    }
    count.fetch_sub(1, SeqCst);
    lock.parked.fetch_or(1 << (server.me % 64), SeqCst);
    // Freed meanwhile: nobody will wake this shard, so go on now.
    if lock.holder.load(SeqCst) == 0 {
        return begin_borrowing(server);
    }
    false
}

/// A command of this shard is done borrowing: the lock holder may be waiting for
/// the server to be quiet.
pub fn end_borrowing(server: Server<'_>) {
    server.shards[server.me].borrowing.fetch_sub(1, SeqCst);
    let holder = server.lock.holder.load(SeqCst);
    if holder != 0 && holder != server.me + 1 {
        crate::mesh::forward::ring(holder - 1);
    }
}

/// Whether the script `args` runs (EVAL, EVALSHA, FCALL ...) takes the script lock
/// before it starts: it is known to reach keys outside its declared slots, or this
/// shard has not run it yet (its first run here is its probation).
pub fn must_lock(lock: &ScriptLock, args: Args<'_>) -> bool {
    identity(args)
        .is_some_and(|id| reaches(lock, id) || THIS.with(|t| !t.borrow().confined.contains(&id)))
}

/// Whether the script `args` runs is known to reach keys outside its declared
/// slots (its probation is over: it reached one).
pub fn known_to_reach(lock: &ScriptLock, args: Args<'_>) -> bool {
    identity(args).is_some_and(|id| reaches(lock, id))
}

/// Whether script `id` is known to reach keys outside its declared slots (this
/// shard's copy of the known scripts refreshed first when they grew).
fn reaches(lock: &ScriptLock, id: u64) -> bool {
    let version = lock.known_version.load(SeqCst);
    THIS.with(|t| {
        let mut t = t.borrow_mut();
        if t.known_version != version {
            let known = lock.known.lock();
            t.reaching = known.unwrap_or_else(|e| e.into_inner()).clone();
            t.known_version = version;
        }
        t.reaching.contains(&id)
    })
}

/// The script `args` passed its probation (under the script lock, it reached no
/// key outside its declared slots): from now on it runs without the lock on this
/// shard, unless a run reaches such a key.
pub fn confined(args: Args<'_>) {
    if let Some(id) = identity(args) {
        THIS.with(|t| t.borrow_mut().confined.insert(id));
    }
}

/// Remember that the script `args` runs reaches undeclared keys of other shards
/// (an EVAL's body under its SHA1 too, for a later EVALSHA).
pub fn remember(lock: &ScriptLock, args: Args<'_>) {
    let Some(id) = identity(args) else {
        return;
    };
    if reaches(lock, id) {
        // Known already (its SHA1 too): no lock, no hashing on every run.
        return;
    }
    let mut known = lock.known.lock().unwrap_or_else(|e| e.into_inner());
    let mut added = known.insert(id);
    if args.get(0).len() == 4 || args.get(0).eq_ignore_ascii_case(b"eval_ro") {
        let sha = ruvio_engine::scripting::sha1_hex(args.get(1));
        added |= known.insert(identity_of(b's', sha.as_bytes(), args.get(2)));
    }
    if added {
        lock.known_version.fetch_add(1, SeqCst);
    }
}

/// A script as its command names it, with how many keys it declares, hashed: an
/// EVAL's body, an EVALSHA's SHA1 (any case), an FCALL's function name.
fn identity(args: Args<'_>) -> Option<u64> {
    if args.len() < 3 {
        return None;
    }
    let name = args.get(0);
    let (named, numkeys) = (args.get(1), args.get(2));
    Some(
        if name.len() >= 5 && name[..5].eq_ignore_ascii_case(b"fcall") {
            identity_of(b'f', named, numkeys)
        } else if name.len() >= 7 && name[..7].eq_ignore_ascii_case(b"evalsha") {
            identity_of(b's', &named.to_ascii_lowercase(), numkeys)
        } else {
            identity_of(b'b', named, numkeys)
        },
    )
}

fn identity_of(kind: u8, named: &[u8], numkeys: &[u8]) -> u64 {
    // Fixed seeds: every shard hashes a script the same way.
    ahash::RandomState::with_seeds(1, 2, 3, 4).hash_one((kind, named, numkeys))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_keeps_a_key_s_noloop_writer_only_while_it_is_the_only_writer() {
        keep_in_batch(vec![(0, b"a".to_vec()), (0, b"b".to_vec())]);
        assert!(!defer_written(0, b"elsewhere", Some(7)));
        assert!(defer_written(0, b"a", Some(7)));
        assert!(defer_written(0, b"b", Some(7)));
        assert!(defer_written(0, b"a", Some(7)));
        assert!(defer_written(0, b"b", None));
        assert!(defer_written(0, b"b", Some(7)));
        let written = take_batch_written();
        let a_then_b = vec![((0, b"a".to_vec()), Some(7)), ((0, b"b".to_vec()), None)];
        assert_eq!(written, a_then_b);
        assert_eq!(take_batch().len(), 2);
        assert!(take_batch_written().is_empty());
    }
}
