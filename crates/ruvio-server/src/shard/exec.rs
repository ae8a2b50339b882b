//! Running engine commands on this shard, whoever asked: a local connection, another
//! shard (forward mode) or a blocked client whose key was written. One function
//! ([`run_engine`]) builds the execution context, runs the handler, writes a typed
//! error once, counts it, and consumes the command's effects (dirty counter, keys
//! that wake blocked clients). Blocked clients are parked, served, timed out,
//! woken when a FILLGET lease ends, and released here (the bookkeeping itself is
//! [`crate::shard::blocking`]).

use crate::cmd::registry::{registry, Command, Handler};
use crate::net::conn::tracking_command;
use crate::net::conn::Conn;
use crate::net::slab::Slab;
use crate::shard::blocking::{Blocked, Waiter};
use crate::shard::ShardCore;
use ruvio_engine::command::flags::{FAST, READONLY, SKIP_SLOWLOG, WRITE};
use ruvio_engine::command::{Block, Effects, ExecCtx, KeyPositions, Outcome};
use ruvio_engine::CmdError;
use ruvio_resp::{Args, OwnedArgs, Protocol, Reply};

/// Who runs a command and how.
#[derive(Clone, Copy, Debug)]
pub struct Caller {
    pub client_id: u64,
    pub db: usize,
    pub proto: Protocol,
    pub no_touch: bool,
    /// False inside a context that must not block (a timed-out retry, later MULTI).
    pub may_block: bool,
    /// Running a cross-shard command on borrowed keys (see [`crate::mesh::lending`]):
    /// lent keys are not waited for, and the keys written are reported.
    pub borrowing: bool,
    /// CLIENT TRACKING as the command carries it (bits 0: not tracking).
    pub tracking: Tracked,
}

/// CLIENT TRACKING as a command carries it to the shard that runs it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tracked {
    /// `net::conn::tracking_command` bits.
    pub bits: u8,
    /// The client's shard: where its invalidations go.
    pub shard: usize,
}

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
        if let Some(block) = lent_keys(core, cmd, caller.db, args) {
            return Ran {
                block: Some(block),
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
        core.stats.per_command[cmd.stat].failed += 1;
        core.stats.count_error(&e);
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
    let keys =
        caller.borrowing || !core.blocking.is_empty() || watched || may_borrow || tracked || script;
    let notify = crate::messaging::notify::wanted(core.cfg.notify_keyspace_events);
    if keys || logging || notify {
        ctx.effects = Effects::recording(core.spare_record.take(), keys, notify, logging);
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
        crate::scripting::host::queue(&mut core.notifications, published);
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
        if feeding {
            let feed = &mut core.replication.feed;
            ctx.effects
                .visit_log_records(args, |record| feed.record(caller.db, record));
        }
        core.log_end();
    }
    if notify {
        let notes = core.engine.take_key_notes();
        let flags = core.cfg.notify_keyspace_events;
        core.notifications.queue_effects(flags, notes, &ctx.effects);
    }
    if caller.tracking.bits != 0 {
        track(core, cmd, caller, args, &outcome, &ctx.effects);
    }
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
            core.stats.per_command[cmd.stat].failed += 1;
            core.stats.count_error(&e);
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
        crate::mesh::lending::send_loans_home(core, ended.loans, &written, noloop_writer);
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

/// The keys the engine expired (lazily in a command, or actively): their readers'
/// invalidations and their keyspace events.
pub fn take_expired(core: &mut ShardCore) {
    let expired = core.engine.take_expired();
    if expired.is_empty() {
        return;
    }
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
            None => keys.extend(
                cmd.meta
                    .keys
                    .positions(args)
                    .into_iter()
                    .map(|p| args.get(p)),
            ),
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

/// Record command `cmd` of client `who` that ran here for `ns` (when timed) and
/// answered `reply_bytes` (see [`crate::observability`]): where the client is
/// (`shard::dispatch`), on the owner of a command forwarded whole
/// (`shard::messages`), or once borrowed keys arrived (`mesh::lending`).
#[inline(never)]
pub fn observe(
    core: &mut ShardCore,
    cmd: &Command,
    who: crate::observability::Who<'_>,
    args: Args<'_>,
    (ns, reply_bytes): (Option<u64>, usize),
) {
    let ran = crate::observability::Ran {
        shard: core.id,
        stat: cmd.stat,
        fast: cmd.meta.has(FAST),
        loggable: !cmd.meta.has(SKIP_SLOWLOG),
        args,
        reply_bytes,
        client: who,
        now_ms: core.now_ms,
    };
    core.timing.finish(&core.shared.observatory, ns, ran);
}

/// The record of command `cmd` (`args`), which ran here for `ns` (when timed,
/// else `sampled_usec` for INFO commandstats) and answers once other shards
/// answered: kept with its held reply slot ([`observe_answered`]). Its
/// arguments are copied: the logs may want them then (a CONFIG SET may have
/// turned them on meanwhile, and Redis logs that CONFIG SET).
pub fn awaited(
    cmd: &Command,
    args: Args<'_>,
    ns: Option<u64>,
    sampled_usec: u64,
) -> Box<crate::observability::Awaited> {
    Box::new(crate::observability::Awaited {
        stat: cmd.stat,
        fast: cmd.meta.has(FAST),
        loggable: !cmd.meta.has(SKIP_SLOWLOG),
        args: OwnedArgs::from_args(args),
        ns,
        sampled_usec,
        reply_bytes: 0,
    })
}

/// Record a gathered or split command of `client` whose answer is complete
/// now (see [`crate::observability::Awaited`]): INFO commandstats counts its
/// call and time, and it is recorded as [`observe`] records any command, with
/// its whole reply's size.
pub fn observe_answered(
    core: &mut ShardCore,
    client: &crate::net::conn::ClientState,
    record: &crate::observability::Awaited,
) {
    core.stats.commands += 1;
    let stat = &mut core.stats.per_command[record.stat];
    stat.calls += 1;
    stat.usec += record.ns.map_or(record.sampled_usec, |ns| ns / 1000);
    if !core.timing.active() {
        return;
    }
    let who = crate::observability::Who::Here(crate::observability::commandlog::Client {
        peer: &client.peer,
        name: &client.name,
    });
    let ran = crate::observability::Ran {
        shard: core.id,
        stat: record.stat,
        fast: record.fast,
        loggable: record.loggable,
        args: record.args.args(),
        reply_bytes: record.reply_bytes,
        client: who,
        now_ms: core.now_ms,
    };
    core.timing.finish(&core.shared.observatory, record.ns, ran);
}

/// Record command `cmd` that ran here for `ns` (when timed) and parked: only
/// the latency monitor's sample, as Redis 7.0's `call()` for a client it
/// blocked; the rest waits until it is served ([`observe_unblocked`]). Its first
/// run's time is kept with ticket `ticket` (WAIT has none: Redis never records
/// it further).
pub fn observe_parked(core: &mut ShardCore, cmd: &Command, ticket: Option<u64>, ns: Option<u64>) {
    if let Some(ticket) = ticket {
        core.blocking.note_first_run(ticket, ns.unwrap_or(0));
    }
    if let Some(ns) = ns {
        let observatory = &core.shared.observatory;
        core.timing
            .sample_command(observatory, cmd.meta.has(FAST), ns, core.now_ms);
    }
}

/// Record blocked command `cmd` (ticket `ticket`, run again as `argv`), served
/// now by a run of `ns` that answered `reply_bytes`, as Redis 7.0's
/// `updateStatsOnUnblock`: INFO commandstats adds the first run's time and this
/// run's (its call was counted when it parked), and the histogram, the slow log
/// and the size logs record it as one command of their sum (see
/// [`crate::observability::Timing::finish_unblocked`]).
///
/// `argv` is `None` for a command CLIENT UNBLOCK answered: Redis 7.0 records it
/// too, as a failed call of its first run's time whose arguments it already
/// freed (its slow log entry has no arguments). A command that timed out is not
/// recorded again.
#[inline(never)]
fn observe_unblocked(
    core: &mut ShardCore,
    cmd: &Command,
    ticket: u64,
    argv: Option<&OwnedArgs>,
    (ns, reply_bytes): (Option<u64>, usize),
) {
    let Some(blocked) = core.blocking.get(ticket) else {
        return;
    };
    let Some(first_ns) = blocked.first_run_ns else {
        return;
    };
    let client_id = blocked.client_id;
    let sent = argv.and(blocked.sent_argv.clone());
    let args = sent.as_ref().or(argv);
    let served = Served {
        client_id,
        first_ns,
        ns,
        reply_bytes,
    };
    observe_served(core, cmd, args.map(|a| a.args()), served);
}

/// A parked command answered now (see [`observe_served`]).
#[derive(Clone, Copy, Debug)]
pub struct Served {
    pub client_id: u64,
    /// Its first run's time, ns.
    pub first_ns: u64,
    /// The serving run's time, when timed (CLIENT UNBLOCK: 0).
    pub ns: Option<u64>,
    pub reply_bytes: usize,
}

/// Record parked command `cmd`, answered now as `served` says, with arguments
/// `args` (`None`: CLIENT UNBLOCK answered it, a failed call without
/// arguments): [`observe_unblocked`] for a command parked here,
/// `mesh::lending` for one over several shards' keys.
pub fn observe_served(core: &mut ShardCore, cmd: &Command, args: Option<Args<'_>>, served: Served) {
    let stat = &mut core.stats.per_command[cmd.stat];
    if let Some(ns) = served.ns {
        stat.usec += served.first_ns / 1000 + ns / 1000;
    }
    if args.is_none() {
        stat.failed += 1;
    }
    if !core.timing.active() {
        return;
    }
    let none = OwnedArgs::default();
    let ran = crate::observability::Ran {
        shard: core.id,
        stat: cmd.stat,
        fast: cmd.meta.has(FAST),
        loggable: !cmd.meta.has(SKIP_SLOWLOG),
        args: args.unwrap_or_else(|| none.args()),
        reply_bytes: served.reply_bytes,
        client: crate::observability::Who::Id(served.client_id),
        now_ms: core.now_ms,
    };
    let (first_ns, ns) = (served.first_ns, served.ns);
    core.timing
        .finish_unblocked(&core.shared.observatory, first_ns, ns, ran);
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

/// Park a command that returned [`Outcome::Block`]; its ticket.
pub fn park(
    core: &mut ShardCore,
    waiter: Waiter,
    caller: Caller,
    args: Args<'_>,
    block: Block,
) -> u64 {
    let keys = block.keys.iter().map(|&i| args.get(i).to_vec()).collect();
    core.shared.note_blocked(caller.client_id, Some(core.id));
    core.blocking.park(Blocked {
        waiter,
        client_id: caller.client_id,
        db: caller.db,
        proto: caller.proto,
        no_touch: caller.no_touch,
        argv: parked_argv(args, &block.rewrite),
        keys,
        deadline_ms: block.deadline_ms,
        first_run_ns: None,
        sent_argv: (!block.rewrite.is_empty()).then(|| OwnedArgs::from_args(args)),
    })
}

/// The arguments a parked command runs with again: its own, with the handler's
/// replacements (XREAD's `$` as the ID it stood for).
pub(crate) fn parked_argv(args: Args<'_>, rewrite: &[(usize, Vec<u8>)]) -> OwnedArgs {
    if rewrite.is_empty() {
        return OwnedArgs::from_args(args);
    }
    OwnedArgs::from_iter((0..args.len()).map(|i| {
        rewrite
            .iter()
            .find(|(at, _)| *at == i)
            .map_or(args.get(i), |(_, new)| new.as_slice())
    }))
}

/// Serve the clients blocked on every key written since the last call, oldest
/// first per key, until no written key has a waiter that can be served. A served
/// command may write keys itself (BLMOVE pushes): those are served in turn. Each
/// round removes a client, so this ends.
pub fn serve_ready(core: &mut ShardCore, conns: &mut Slab<Conn>) {
    while let Some((db, key)) = core.blocking.take_ready() {
        // The value types a pop waiter found nothing to take from this round:
        // the later pop waiters of that type would find nothing either. Other
        // waiters of the key still run (XREADGROUP's on a deleted stream is
        // answered its error while BLPOP waiters on the name keep waiting).
        let mut starved: Vec<&'static str> = Vec::new();
        for ticket in core.blocking.waiting_on(db, &key) {
            let Some(blocked) = core.blocking.get(ticket) else {
                continue;
            };
            if let Waiter::Watch { shard, ticket: op } = blocked.waiter {
                // Only a key that exists can serve a blocking command. A key given
                // back unchanged by a borrower still counts as written; waking on
                // it would let two cross-shard blocking commands on absent keys
                // wake each other forever.
                if !core.engine.exists(db, &key, core.now_ms) {
                    continue;
                }
                // A coordinator elsewhere retries; whoever is next here may still
                // take the element first (fairness across shards is approximate).
                core.blocking.remove(ticket);
                crate::mesh::lending::wake(core, conns, shard, op);
                continue;
            }
            let argv = blocked.argv.clone();
            let caller = caller_of(blocked);
            let Some(cmd) = registry().lookup(argv.args().get(0)) else {
                continue;
            };
            let pops = pops_from(cmd);
            if pops.is_some_and(|t| starved.contains(&t)) || !serves_waiter(core, cmd, db, &key) {
                // A list written over by a string (LPUSH, DEL, SET in one EXEC)
                // keeps its BLPOP waiting, as Redis 7.0 serves only the waiters
                // of the type the key holds.
                continue;
            }
            let mut out = Vec::new();
            let filling_before = core.wal.as_ref().map_or(0, |w| w.filling_bytes());
            let timed = core.timing.start();
            if let Some(block) = run_engine(core, cmd, caller, argv.args(), &mut out).block {
                // Nothing to serve after all (another waiter took it, or a key is
                // lent out): keep waiting, on the keys it waits for now.
                core.blocking.rearm(ticket, &argv.args(), &block);
                starved.extend(pops);
                continue;
            }
            let ns = timed.map(|t| core.timing.elapsed_ns(t));
            observe_unblocked(core, cmd, ticket, Some(&argv), (ns, out.len()));
            release_served(core, conns, ticket, out, filling_before);
        }
    }
}

/// Whether `key` of `db` holds the type blocked command `cmd` waits for (or
/// nothing: the command then finds it missing and waits again).
fn serves_waiter(core: &ShardCore, cmd: &Command, db: usize, key: &[u8]) -> bool {
    let Some(entry) = core.engine.peek_entry(db, key, core.now_ms) else {
        return true;
    };
    let waits_for = match (pops_from(cmd), cmd.meta.name) {
        (Some(value_type), _) => value_type,
        // XREADGROUP runs again whatever the key holds: Redis 7.0 answers its
        // blocked client `-UNBLOCKED the stream key no longer exists` then.
        (None, "xread") => "stream",
        _ => return true,
    };
    entry.value().value_type().name() == waits_for
}

/// The value type a blocking pop takes from (list or sorted set): when one such
/// waiter of a key finds nothing, every later one of the same type would not.
fn pops_from(cmd: &Command) -> Option<&'static str> {
    match cmd.meta.name {
        "blpop" | "brpop" | "blmove" | "brpoplpush" | "blmpop" => Some("list"),
        "bzpopmin" | "bzpopmax" | "bzmpop" => Some("zset"),
        _ => None,
    }
}

/// Answer every blocked client whose deadline has passed with a null array.
pub fn expire_blocked(core: &mut ShardCore, conns: &mut Slab<Conn>) {
    if core
        .blocking
        .next_deadline()
        .is_none_or(|at| at >= core.now_ms)
    {
        return;
    }
    for ticket in core.blocking.timed_out(core.now_ms) {
        answer_early(core, conns, ticket, false);
    }
}

/// End the fill leases past their time (FILLGET): the clients blocked on their
/// keys run again, and the oldest receives the next lease.
pub fn expire_fill_leases(core: &mut ShardCore, conns: &mut Slab<Conn>) {
    let mut ended = false;
    let blocking = &mut core.blocking;
    core.engine.expire_fill_leases(core.now_ms, |db, key| {
        blocking.signal(db, key);
        ended = true;
    });
    if ended {
        serve_ready(core, conns);
    }
}

/// CLIENT UNBLOCK on this shard: answer `client_id`'s blocked command now with a
/// null array (`error = false`) or `-UNBLOCKED`. False when it is not parked here.
pub fn unblock(core: &mut ShardCore, conns: &mut Slab<Conn>, client_id: u64, error: bool) -> bool {
    let parked =
        |b: &Blocked| b.client_id == client_id && !matches!(b.waiter, Waiter::Watch { .. });
    match core.blocking.find(parked) {
        Some(ticket) => {
            let name = core
                .blocking
                .get(ticket)
                .map(|b| b.argv.args().get(0).to_vec());
            if let Some(cmd) = name.and_then(|name| registry().lookup(&name)) {
                observe_unblocked(core, cmd, ticket, None, (Some(0), 0));
            }
            answer_early(core, conns, ticket, error);
            true
        }
        None => crate::mesh::lending::unblock(core, conns, client_id, error),
    }
}

/// The reply a client unblocked without data gets: a null array (timeout), or
/// `-UNBLOCKED` (CLIENT UNBLOCK ... ERROR).
pub fn early_reply(proto: Protocol, error: bool) -> Vec<u8> {
    let mut out = Vec::new();
    let mut reply = Reply::new(&mut out, proto);
    if error {
        reply.error("UNBLOCKED client unblocked via CLIENT UNBLOCK");
    } else {
        reply.null_array();
    }
    out
}

/// Forget the commands a departed client left parked here.
pub fn drop_waiter(core: &mut ShardCore, gone: impl Fn(&Waiter) -> bool) {
    while let Some(ticket) = core.blocking.find(|b| gone(&b.waiter)) {
        if let Some(b) = core.blocking.remove(ticket) {
            core.shared.note_blocked(b.client_id, None);
        }
    }
}

fn caller_of(blocked: &Blocked) -> Caller {
    Caller {
        client_id: blocked.client_id,
        db: blocked.db,
        proto: blocked.proto,
        no_touch: blocked.no_touch,
        may_block: true,
        borrowing: false,
        tracking: Tracked::default(),
    }
}

/// Timeout or CLIENT UNBLOCK: the reply Redis gives a client unblocked without data.
fn answer_early(core: &mut ShardCore, conns: &mut Slab<Conn>, ticket: u64, error: bool) {
    let Some(blocked) = core.blocking.get(ticket) else {
        return;
    };
    let out = early_reply(blocked.proto, error);
    release(core, conns, ticket, out);
}

/// Remove `ticket` and deliver `reply` to its client.
fn release(core: &mut ShardCore, conns: &mut Slab<Conn>, ticket: u64, reply: Vec<u8>) {
    let Some(blocked) = core.blocking.remove(ticket) else {
        return;
    };
    core.shared.note_blocked(blocked.client_id, None);
    deliver(core, conns, blocked.waiter, reply);
}

/// [`release`] for a command served now, whose write may have been logged since
/// the log held `filling_before` bytes: under `always` the reply waits for the
/// write's group ([`crate::persistence::durable::hold_served`]).
fn release_served(
    core: &mut ShardCore,
    conns: &mut Slab<Conn>,
    ticket: u64,
    reply: Vec<u8>,
    filling_before: usize,
) {
    let Some(blocked) = core.blocking.remove(ticket) else {
        return;
    };
    core.shared.note_blocked(blocked.client_id, None);
    if let Some((waiter, reply)) =
        crate::persistence::durable::hold_served(core, blocked.waiter, reply, filling_before)
    {
        deliver(core, conns, waiter, reply);
    }
}

/// Hand `reply` to the client `waiter` names.
pub fn deliver(core: &mut ShardCore, conns: &mut Slab<Conn>, waiter: Waiter, reply: Vec<u8>) {
    match waiter {
        Waiter::Local {
            index,
            gen,
            seq,
            part,
        } => {
            if let Some(conn) = conns.get_mut(index, gen) {
                // A part of a split command that waited for a lent key may be
                // its last: the command is recorded then.
                if let Some(record) = conn.replies.fill_part(seq, part as usize, reply, 0) {
                    observe_answered(core, &conn.client, &record);
                }
                core.dirty.push((index, gen));
                conn.unblock_if_waiting_on(seq, &mut core.resume, (index, gen));
            }
        }
        Waiter::Remote { shard, tag } => core.outbox.reply(shard, tag, &reply),
        Waiter::Watch { .. } => {}
    }
}

#[cfg(test)]
mod tests {
    use crate::shard::inproc::TwoShards;

    /// Found by fuzz/dispatch_2shards: two cross-shard blocking commands on absent
    /// keys. Each try borrows the keys and gives them back unchanged, which marks
    /// them written on their owner; that woke the other command's watch, whose try
    /// woke the first again, forever (the shards never went quiet). The settle of
    /// the harness panics on such a livelock.
    #[test]
    fn cross_shard_blocking_commands_on_absent_keys_stay_parked() {
        let mut server = TwoShards::new();
        // "b" and "c" live on shard 0, "a" and "d" on shard 1.
        server.send(1, &["BRPOP", "b", "a", "100"]);
        server.send(0, &["BLPOP", "a", "b", "c", "d", "100"]);
        assert!(server.view(0).blocked && server.view(1).blocked);
        server.send(1, &["PING"]);
        server.advance(101_000);
        for c in 0..2 {
            let view = server.view(c);
            assert!(!view.blocked && !view.holding, "client {c}: {view:?}");
        }
        assert_eq!(server.view(0).replies, b"*-1\r\n");
        assert_eq!(server.view(1).replies, b"*-1\r\n+PONG\r\n");
    }

    /// A watched key that comes back with data still wakes the waiting command.
    #[test]
    fn cross_shard_blocking_command_is_served_by_a_push() {
        let mut server = TwoShards::new();
        server.send(0, &["BLPOP", "a", "b", "0"]);
        server.send(1, &["RPUSH", "b", "v"]);
        assert_eq!(server.view(0).replies, b"*2\r\n$1\r\nb\r\n$1\r\nv\r\n");
        assert_eq!(server.view(1).replies, b":1\r\n");
    }
}
