//! Running engine commands on this shard, whoever asked: a local connection, another
//! shard (forward mode) or a blocked client whose key was written. One function
//! ([`run_engine`]) builds the execution context, runs the handler, writes a typed
//! error once, counts it, and consumes the command's effects (dirty counter, keys
//! that wake blocked clients). Blocked clients are parked, served, timed out,
//! woken when a FILLGET lease ends, and released in `parked.rs` (the bookkeeping
//! itself is [`crate::shard::blocking`]); what a command did is recorded for the
//! logs and INFO in `observe.rs`. Both are re-exported here, so callers name
//! `shard::exec::...` as before.

use crate::cmd::registry::{Command, Handler};
use crate::net::conn::tracking_command;
use crate::shard::ShardCore;
use ruvio_engine::command::flags::{READONLY, WRITE};
use ruvio_engine::command::{Block, Effects, ExecCtx, KeyPositions, Outcome};
use ruvio_engine::CmdError;
use ruvio_resp::{Args, Reply};

pub use super::observe::{
    awaited, observe, observe_answered, observe_parked, observe_served, Served,
};
pub(crate) use super::parked::parked_argv;
pub use super::parked::{
    deliver, drop_waiter, early_reply, expire_blocked, expire_fill_leases, park, park_watch,
    serve_ready, unblock,
};
/// Who runs a command and how, as it travels with the command (`net::caller`).
pub use crate::net::caller::{Caller, Tracked};

/// What running a command left to do.
#[derive(Debug, Default)]
pub struct Ran {
    /// Park the command: nothing to serve yet, or a key of it is lent out.
    pub block: Option<Block>,
    /// `(db, key)` written, when the caller was borrowing.
    pub modified: Vec<(usize, Vec<u8>)>,
    /// A script's keys borrowed while it ran (see [`crate::mesh::script_lock`]): they
    /// are in this shard's keyspace until the caller sends them home.
    pub loans: Vec<(usize, Vec<u8>)>,
    /// The script stopped to start over under the script lock: its reply was not
    /// written and it changed nothing.
    pub start_over: bool,
    /// The script took the script lock while it ran (a caller borrowing frees it
    /// once `loans` are home; otherwise they are sent and it is freed here).
    pub locked_now: bool,
}

/// Run engine command `cmd` with `args`, appending its reply (or error) to `out`.
/// When the command has nothing to serve yet, or one of its keys is lent to another
/// shard, nothing is written and [`Ran::block`] says what to wait for.
pub fn run_engine(
    core: &mut ShardCore,
    cmd: &Command,
    caller: Caller,
    args: Args<'_>,
    out: &mut Vec<u8>,
) -> Ran {
    let Some(Handler::Engine(handler)) = cmd.handler else {
        Reply::new(out, caller.proto).error("ERR internal: not a keyspace command");
        return Ran::default();
    };
    if !caller.borrowing && core.lending.any_lent() {
        let block =
            lent_keys(core, cmd, caller.db, args).or_else(|| loans_out(core, cmd, caller.db));
        if block.is_some() {
            return Ran {
                block,
                ..Ran::default()
            };
        }
    }
    // A command on keys borrowed from other shards is not logged here: its keys'
    // records belong in their owners' logs (docs/durability.md, known gaps).
    let logging = core.logs() && may_write(cmd) && !caller.borrowing;
    if let Some(error) = core
        .wal
        .as_ref()
        .and_then(|w| w.failed())
        .filter(|_| logging)
    {
        let e = CmdError::AofWriteFailed(error.to_string());
        core.stats.count_failed(cmd.stat, &e);
        e.write(&mut Reply::new(out, caller.proto));
        return Ran::default();
    }
    let mut ctx = ExecCtx::new(caller.db, core.now_ms);
    ctx.no_touch = caller.no_touch;
    ctx.may_block = caller.may_block;
    let watched = core.watches.any();
    let script = cmd.meta.group == "scripting";
    // A script that may borrow keys while it runs holds this shard's outbox (what
    // the shard queued for others goes out before its first lend request), and
    // its written keys are recorded to report.
    let may_borrow = script && crate::mesh::script_lock::may_borrow();
    // A restricted client's script has its calls checked, wherever it runs.
    let _acl = match script {
        true => crate::acl::script::enter(caller.client_id, &core.shared.acl),
        false => None,
    };
    if may_borrow {
        crate::mesh::script_lock::hold_outbox(std::mem::take(&mut core.outbox));
    }
    // A flush owes each tracking client one null ([`flushed`]), not its keys.
    let tracked = core.tracking.active() && !is_flush(cmd);
    // A script's written keys are recorded too: a WATCH the busy hook answers
    // while it runs is registered after it, by what it wrote
    // ([`adopt_pending_watches`]).
    // A whole-slot migration forwards what writes did to its keys.
    let exporting = super::slot_export::exporting(core) && may_write(cmd);
    let keys = caller.borrowing
        || !core.blocking.is_empty()
        || watched
        || may_borrow
        || tracked
        || script
        || exporting;
    let notify = crate::messaging::notify::wanted(core.cfg.notify_keyspace_events);
    if keys || logging || notify {
        let records = logging || exporting;
        ctx.effects = Effects::recording(core.spare_record.take(), keys, notify, records);
    }
    if watched && cmd.meta.keys.is_none() {
        let flushed =
            crate::transactions::watch::flushed_dbs(&core.engine, cmd.meta.name, caller.db, args);
        core.touch_watched_in(&flushed);
    }
    if script && caller.tracking.bits & tracking_command::REMEMBER != 0 {
        // The keys its read-only calls read are remembered for the caller.
        ctx.effects.record_reads();
    }
    let reply_start = out.len();
    let mutations_before = ruvio_engine::fault::mutations();
    ruvio_engine::undo::begin();
    let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        handler(
            &mut core.engine,
            &mut ctx,
            args,
            &mut Reply::new(out, caller.proto),
        )
    }));
    let mut reply = Reply::new(out, caller.proto);
    let outcome = match ran {
        Ok(outcome) => {
            core.engine.commit_changes();
            outcome
        }
        Err(_) => {
            let changed = ruvio_engine::fault::mutations() != mutations_before;
            contain_panic(core, cmd, changed, &mut ctx);
            reply.out.truncate(reply_start);
            Err(CmdError::InternalPanic(cmd.meta.name))
        }
    };
    if cmd.meta.keys.is_none() && matches!(outcome, Ok(Outcome::Done)) {
        flushed(core, cmd);
    }
    if (core.lending.any_lent() || !core.blocking.is_empty())
        && crate::mesh::lending::swaps_dbs(cmd.meta)
        && matches!(outcome, Ok(Outcome::Done))
    {
        swapped_dbs(core, args);
    }
    if may_borrow {
        core.outbox = crate::mesh::script_lock::give_back_outbox();
    }
    let ended = match script {
        true => script_ran(core, args),
        false => Default::default(),
    };
    if ended.start_over {
        reply.out.truncate(reply_start);
        return ended;
    }
    if script {
        adopt_resets(core);
    }
    core.stats.dirty += ctx.effects.dirty;
    if !ctx.effects.published.is_empty() {
        let published = std::mem::take(&mut ctx.effects.published);
        core.queue_published(published);
    }
    let feeding = core.replication.feed.on();
    if notify || tracked || feeding {
        // Before the command's records: a key it found expired is deleted on
        // replicas first, as Redis propagates the DEL of a lazy expiry.
        take_expired(core);
    }
    if logging {
        // A command logged as several records (a script's writes, a rewrite into
        // two) replays whole or not at all, and reaches replicas as MULTI/EXEC.
        core.log_begin();
        if let Some(wal) = core.wal.as_mut() {
            ctx.effects
                .visit_log_records(args, |record| wal.append(caller.db, record));
        }
        if core.replication.feed.records_for(caller.client_id) {
            feed_records(&mut core.replication.feed, &ctx.effects, args, caller.db);
        }
        core.log_end();
    }
    if exporting {
        super::slot_export::record_write(core, cmd, args, &ctx.effects);
    }
    if notify {
        let notes = core.engine.take_key_notes();
        let flags = core.cfg.notify_keyspace_events;
        core.notifications.queue_effects(flags, notes, &ctx.effects);
    }
    if caller.tracking.bits != 0 {
        track(core, cmd, caller, args, &outcome, &ctx.effects);
    }
    // Only these look at the written keys: no iterator over an empty list
    // for every other command.
    let signalled = tracked || watched || !core.blocking.is_empty();
    if signalled {
        for (db, key) in ctx.effects.modified_keys() {
            // Borrowed keys are their owners' to invalidate (`ShardMsg::Written`).
            if tracked && (!caller.borrowing || core.topo.key_owner(key) == core.id) {
                let noloop = caller.tracking.bits & tracking_command::NOLOOP != 0;
                core.tracking.written(caller.client_id, noloop, key);
            }
            // Nobody parked, no key to signal (`signal` would copy the key to look).
            if !core.blocking.is_empty() {
                core.blocking.signal(db, key);
            }
            if watched {
                core.touch_watched(db, key);
            }
        }
    }
    if script {
        adopt_pending_watches(core, &ctx.effects);
    }
    let modified = match caller.borrowing {
        true => ctx
            .effects
            .modified_keys()
            .map(|(db, k)| (db, k.to_vec()))
            .collect(),
        false => Vec::new(),
    };
    let block = match outcome {
        Ok(Outcome::Done) => None,
        Ok(Outcome::Block(block)) if caller.may_block => Some(block),
        Ok(Outcome::Block(_)) => {
            reply.null_array();
            None
        }
        Err(e) => {
            core.stats.count_failed(cmd.stat, &e);
            e.write(&mut reply);
            None
        }
    };
    if !caller.borrowing && ended.locked_now {
        let written: Vec<(usize, Vec<u8>)> = ctx
            .effects
            .modified_keys()
            .map(|(db, k)| (db, k.to_vec()))
            .collect();
        let noloop_writer = crate::mesh::lending::noloop_writer(&caller);
        super::lending::send_loans_home(core, ended.loans, &written, noloop_writer);
        crate::mesh::script_lock::unlock(core.script_server());
        return finish_ran(core, &mut ctx, block, modified, Ran::default());
    }
    finish_ran(core, &mut ctx, block, modified, ended)
}

/// Finish the RESETs the busy hook answered while the script command that just
/// ended ran ([`crate::shard::busy::Reset`]): this shard's tracking table and
/// monitor list forget those clients before the script's writes owe
/// invalidations or its MONITOR lines are handed out, so a client that was told
/// `+RESET` gets neither.
fn adopt_resets(core: &mut ShardCore) {
    let resets = crate::shard::busy::take_resets();
    if resets.is_empty() {
        return;
    }
    let broadcast = crate::tracking::broadcasts(&core.topo);
    for mut reset in resets {
        if reset.monitor {
            core.monitors.local.retain(|&w| w != reset.who);
        }
        let (tracking, mut to) = core.tracking_parts();
        tracking.disable_mode(&mut to, broadcast, reset.client_id, &mut reset.tracking);
    }
}

/// Register the WATCHes answered while the script command that just ended ran:
/// by the busy hook for this shard's clients
/// ([`crate::shard::busy::PendingWatch`]) and by the other shards for theirs
/// (`ScriptWatches::watch_while_busy`), after the script's own writes touched
/// the watchers there were: a watch whose key the script wrote after its `+OK`
/// (a write counted since, and that key among the script's written ones) is
/// touched, so the client's EXEC fails as in Redis (another shard's client by a
/// `Touched` message, which reaches its shard before any key this shard lends
/// it). A write of that key before the WATCH and of another after it also
/// touches it (one key's write order within a script is not recorded): an EXEC
/// that fails where Redis's would not, never one that runs over a change.
pub fn adopt_pending_watches(core: &mut ShardCore, written: &Effects) {
    let (unwatched, pending) = crate::shard::busy::take_watches();
    for ended in unwatched {
        let below = ended.epoch + 1;
        crate::transactions::multi::forget_unwatched(core, ended.client_id, below, ended.keys);
    }
    let elsewhere = core.shared.scripts.take_answered_watches(core.id);
    if pending.is_empty() && elsewhere.is_empty() {
        return;
    }
    let writes_now = ruvio_engine::scripting::script_writes();
    let here = pending
        .into_iter()
        .map(|w| ruvio_engine::scripting::WatchWhileBusy {
            shard: core.id,
            client_id: w.client_id,
            epoch: w.epoch,
            db: w.db,
            keys: w.keys,
            writes_at: w.writes_at,
        });
    for watch in here.chain(elsewhere) {
        let who = crate::transactions::watch::WatchingClient {
            shard: watch.shard,
            client_id: watch.client_id,
            epoch: watch.epoch,
        };
        core.watches
            .register(&core.engine, core.now_ms, who, watch.db, &watch.keys);
        let changed = writes_now > watch.writes_at
            && written
                .modified_keys()
                .any(|(db, k)| db == watch.db && watch.keys.iter().any(|w| w == k));
        if !changed {
            continue;
        }
        if watch.shard == core.id {
            core.watches.mark_touched(watch.client_id, watch.epoch);
        } else {
            core.outbox
                .touched(watch.shard, watch.client_id, watch.epoch);
        }
    }
}

/// The command's records for the replication stream (`replication::feed`):
/// out of line, as only a primary with a backlog runs it, and inlined its code
/// crowded the request path out of the instruction cache (cachegrind, one
/// shard, SET: L1i misses per SET 134 -> 93 with a replica, 78 -> 60 without;
/// docs/replication.md).
#[inline(never)]
fn feed_records(
    feed: &mut crate::replication::feed::Feed,
    effects: &Effects,
    args: Args<'_>,
    db: usize,
) {
    match effects.plain_record(args) {
        Some(args) => feed.record_request(db, args),
        None => effects.visit_log_records(args, |record| feed.record(db, record)),
    }
}

/// The keys the engine expired (lazily in a command, or actively): their readers'
/// invalidations and their keyspace events. Inline, the rest out of line: it
/// runs after every command while a replica is attached, and almost always
/// finds nothing (a call and an empty vector's take and drop were some 30
/// instructions a SET, callgrind, docs/replication.md).
#[inline]
pub fn take_expired(core: &mut ShardCore) {
    if core.engine.has_expired() {
        report_expired(core);
    }
}

#[inline(never)]
fn report_expired(core: &mut ShardCore) {
    let expired = core.engine.take_expired();
    for (db, key) in &expired {
        // Replicas delete what expired here (Redis 7.0 propagates a DEL).
        core.replication
            .feed
            .record(*db, &mut [&b"DEL"[..], key].into_iter());
    }
    if core.tracking.active() {
        for (_, key) in &expired {
            core.tracking.written(0, false, key);
        }
    }
    let flags = core.cfg.notify_keyspace_events;
    core.notifications.queue_expired_keys(flags, expired);
}

/// CLIENT TRACKING after a command of a tracking client: a read-only command's
/// keys, and the keys a script's read-only calls read, are remembered for it
/// (Redis' trackingRememberKeys), by the shard that owns each (a key borrowed
/// from another shard is remembered there).
#[cold]
fn track(
    core: &mut ShardCore,
    cmd: &Command,
    caller: Caller,
    args: Args<'_>,
    outcome: &Result<Outcome, CmdError>,
    effects: &Effects,
) {
    if caller.tracking.bits & tracking_command::REMEMBER == 0 {
        return;
    }
    let named_read = matches!(outcome, Ok(Outcome::Done)) && cmd.meta.has(READONLY);
    let elsewhere = caller.borrowing || cmd.meta.group == "scripting";
    // The common read (GET, MGET ... run here, its keys in one range, nothing
    // read besides them): its keys go to the table straight from the arguments.
    if named_read && !elsewhere && effects.read_keys().next().is_none() {
        if let Some(range) = cmd.meta.keys.single_range(args) {
            if !range.is_empty() {
                core.engine.record_expired(true);
                let (shard, client_id) = (caller.tracking.shard, caller.client_id);
                core.tracking
                    .remember(shard, client_id, range.map(|p| args.get(p)));
            }
            return;
        }
    }
    // Most reads name a key or a few: no allocation for them per read.
    let mut keys: smallvec::SmallVec<[&[u8]; 4]> =
        effects.read_keys().map(|(_, key)| key).collect();
    if named_read {
        match cmd.meta.keys.single_range(args) {
            Some(range) => keys.extend(range.map(|p| args.get(p))),
            None => keys.extend(cmd.meta.keys.keys(args)),
        }
    }
    if keys.is_empty() {
        return;
    }
    // Expired keys owe their readers an invalidation.
    core.engine.record_expired(true);
    let (shard, client_id) = (caller.tracking.shard, caller.client_id);
    if !elsewhere {
        core.tracking.remember(shard, client_id, keys.into_iter());
        return;
    }
    let mut lent: Vec<(usize, Vec<Vec<u8>>)> = Vec::new();
    for key in keys {
        let owner = core.topo.key_owner(key);
        if owner == core.id {
            core.tracking.remember(shard, client_id, [key].into_iter());
            continue;
        }
        match lent.iter_mut().find(|(o, _)| *o == owner) {
            Some((_, keys)) => keys.push(key.to_vec()),
            None => lent.push((owner, vec![key.to_vec()])),
        }
    }
    for (owner, keys) in lent {
        core.outbox.remember(owner, shard, client_id, keys);
    }
}

/// A flush ran here (FLUSHDB, FLUSHALL): every tracking client of this shard is
/// owed a null, and the table starts over. Cold: keyless commands only.
#[cold]
fn flushed(core: &mut ShardCore, cmd: &Command) {
    if is_flush(cmd) {
        core.tracking.flushed();
    }
}

/// FLUSHDB or FLUSHALL.
fn is_flush(cmd: &Command) -> bool {
    cmd.meta.keys.is_none() && matches!(cmd.meta.name, "flushdb" | "flushall")
}

/// SWAPDB `a` `b` ran: the keys out on loan are renamed
/// ([`crate::mesh::lending::Lending::swap_dbs`])
/// and the clients blocked on keys of either database are looked at again (the
/// keys there now may serve them). Cold: SWAPDB with loans or waiters.
#[cold]
fn swapped_dbs(core: &mut ShardCore, args: Args<'_>) {
    let index = |at: usize| crate::cmd::connection::select_index(&core.engine, args.get(at));
    if let (Ok(a), Ok(b)) = (index(1), index(2)) {
        if core.lending.any_lent() {
            core.lending.swap_dbs(a, b);
        }
        core.blocking.signal_db(a);
        core.blocking.signal_db(b);
    }
}

/// The `Ran` of a command that ran to its end: what `script` left (see
/// [`script_ran`]) with its block and modified keys; its recorded effects' buffers
/// are kept for the next command.
fn finish_ran(
    core: &mut ShardCore,
    ctx: &mut ExecCtx,
    block: Option<Block>,
    modified: Vec<(usize, Vec<u8>)>,
    script: Ran,
) -> Ran {
    if let Some(record) = ctx.effects.take_record() {
        core.spare_record = Some(record);
    }
    Ran {
        block,
        modified,
        ..script
    }
}

/// After a script: the keys it borrowed while it ran, whether it took the script
/// lock meanwhile or stopped to start over; a script that reached undeclared keys
/// of other shards is remembered (see [`crate::mesh::script_lock`]).
fn script_ran(core: &ShardCore, args: Args<'_>) -> Ran {
    let ended = crate::mesh::script_lock::end_run();
    if ended.longest_wait_ns > 0 {
        let (observatory, now_ms) = (&core.shared.observatory, core.now_ms);
        let waited = ended.longest_wait_ns;
        core.timing
            .sample_ns(observatory, "mesh-round-trip", waited, now_ms);
    }
    if ended.reached {
        crate::mesh::script_lock::remember(&core.shared.script_lock, args);
    } else if ended.confined {
        crate::mesh::script_lock::confined(args);
    }
    Ran {
        loans: ended.loans,
        locked_now: ended.locked_now,
        start_over: ruvio_engine::scripting::take_start_over(),
        ..Ran::default()
    }
}

/// Whether `cmd` can change the keyspace, so its effects are logged: a write
/// command, or a script (EVAL, FCALL: Redis flags them neither write nor
/// may-replicate, their `redis.call`s decide).
fn may_write(cmd: &Command) -> bool {
    cmd.meta.has(WRITE) || cmd.meta.group == "scripting"
}

/// A keyspace command panicked (a bug: no input may cause one). Its changes are
/// undone from the engine's undo journal (`ruvio_engine::undo`) and its effects
/// dropped; the caller gets an error (its partial reply is dropped by the caller of
/// this), and the connection and the shard go on. If it made a change the journal
/// cannot reverse (in place in a value too big to copy, a flush), a value may be
/// half-changed: the process exits with a clear message (so the service manager
/// restarts it, and the log's replay undoes the change) rather than serve it. See
/// docs/faults.md.
fn contain_panic(core: &mut ShardCore, cmd: &Command, changed: bool, ctx: &mut ExecCtx) {
    let name = cmd.meta.name;
    if !core.engine.roll_back() {
        eprintln!(
            "ruvio: shard {}: '{name}' panicked after a change that cannot be undone in \
             place; exiting rather than serve data that may be half-changed",
            core.id
        );
        std::process::exit(crate::EXIT_SHARD_FAILED);
    }
    match changed {
        true => eprintln!(
            "ruvio: shard {}: '{name}' panicked part-way; its changes were undone and it \
             was answered with an error",
            core.id
        ),
        false => eprintln!(
            "ruvio: shard {}: '{name}' panicked before changing anything; answered with an \
             error",
            core.id
        ),
    }
    // Nothing happened: no log record, no keyspace event, no key to wake or touch.
    if let Some(record) = ctx.effects.take_record() {
        core.spare_record = Some(record);
    }
    ctx.effects = Default::default();
    core.engine.take_key_notes();
}

/// The keys of a command that are lent to another shard right now, as a block
/// request without deadline: the command runs when they are back.
fn lent_keys(core: &ShardCore, cmd: &Command, db: usize, args: Args<'_>) -> Option<Block> {
    let keys: KeyPositions = cmd
        .meta
        .keys
        .positions(args)
        .into_iter()
        .filter(|&p| core.lending.is_lent(db, args.get(p)))
        .collect();
    (!keys.is_empty()).then_some(Block {
        keys,
        deadline_ms: None,
        rewrite: Vec::new(),
    })
}

/// A script about to run on this shard without borrowing while keys of this
/// shard are out on loan: it may reach any of them without declaring it (a job
/// hash built from a declared key's prefix, BullMQ's way), and would find it
/// missing and write a fresh one that the loan's return then overwrites. So it
/// waits for them, as a block request with no key positions (`parked::wait_keys`: the
/// keys out on loan in its database), and runs once they are home, as one Redis
/// would have run it after the borrower's command. Scripts that borrow or hold
/// the script lock never see this: the lock waits for a quiet server.
fn loans_out(core: &ShardCore, cmd: &Command, db: usize) -> Option<Block> {
    let waits = crate::mesh::script_lock::is_script(cmd.meta) && core.lending.any_lent_in(db);
    waits.then(|| Block {
        keys: KeyPositions::new(),
        deadline_ms: None,
        rewrite: Vec::new(),
    })
}
