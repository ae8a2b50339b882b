//! What this shard does with a message from another shard (forward mode): run the
//! requests it was sent and answer them, take replies into their held slots, lend
//! and take back keys, register watches, apply broadcast changes, answer gathers.
//!
//! Apart from the mesh (`mesh::forward`: the message types, the outboxes and the
//! rings) because handling a message is the shard's work: it runs commands on the
//! keyspace and writes into connections, the mesh only carries the bytes.

use super::multi::QueuedRows;
use crate::cmd::registry::registry;
use crate::mesh::forward::{
    Control, ReplyBatch, RequestBatch, ShardMsg, Tag, POSITIONS_SHARDS_MIN, REPLY_BATCH_BYTES,
};
use crate::mesh::gather;
use crate::mesh::owner_tx::{self, Deferred, OwnerTx};
use crate::net::conn::Conn;
use crate::net::slab::Slab;
use crate::shard::blocking::Waiter;
use crate::shard::exec::{self, run_engine, Caller};
use crate::shard::ShardCore;
use ruvio_engine::command::CommandTree;
use ruvio_resp::{Protocol, Reply};

/// What a forwarded command's reply is written into first: most replies fit.
const REPLY_SCRATCH_BYTES: usize = 256;
/// The scratch reply goes back to the shard for the next batch up to this
/// capacity; a larger one (a large value's reply) is freed.
const REPLY_SCRATCH_KEPT_MAX: usize = 16 << 10;

/// Handle message `msg` as it is taken off shard `from`'s channel. From
/// [`POSITIONS_SHARDS_MIN`] shards on, the messages taken from each channel
/// are counted, and an invalidation may wait for another shard's channel to
/// reach a position (relayed for a third shard's client, `tracking`); with
/// fewer, one branch.
pub fn take(core: &mut ShardCore, conns: &mut Slab<Conn>, from: usize, mut msg: ShardMsg) {
    if let ShardMsg::Replies(ReplyBatch {
        spare: Some(spare), ..
    }) = &mut msg
    {
        // The request batch `from` ran comes back for a later one; the box
        // stays with the batch to carry its buffers back.
        core.outbox.recycle(from, spare);
    }
    if core.outbox.shards() < POSITIONS_SHARDS_MIN {
        return handle(core, conns, msg);
    }
    match msg {
        ShardMsg::Invalidate(inv) => {
            let (tracking, mut to) = core.tracking_parts();
            tracking.relayed(&mut to, conns, from, inv);
        }
        msg => handle(core, conns, msg),
    }
    let (tracking, mut to) = core.tracking_parts();
    tracking.taken_from(&mut to, conns, from);
}

/// The answers a waiting script took off shards `answered`' channels
/// (`mesh::forward::request_now`) count as taken, once the messages taken
/// before them (set aside, handled first) are in: a count that lags only
/// makes an invalidation wait longer.
pub fn answers_taken(core: &mut ShardCore, conns: &mut Slab<Conn>, answered: Vec<usize>) {
    for from in answered {
        let (tracking, mut to) = core.tracking_parts();
        tracking.taken_from(&mut to, conns, from);
    }
}

/// Handle one message from another shard.
pub fn handle(core: &mut ShardCore, conns: &mut Slab<Conn>, msg: ShardMsg) {
    match msg {
        ShardMsg::Requests(batch) if owner_tx::is_waiting(&core.lending, batch.from) => {
            owner_tx::defer(&mut core.lending, batch.from, Deferred::Requests(batch))
        }
        ShardMsg::Requests(batch) => run_requests(core, conns, batch),
        ShardMsg::Control(
            control @ (Control::Cancel { from, .. }
            | Control::StreamMark { from, .. }
            | Control::ChainCut { from }),
        ) if owner_tx::is_waiting(&core.lending, from) => {
            owner_tx::defer(&mut core.lending, from, Deferred::Control(control))
        }
        ShardMsg::Control(control) => self::control(core, control),
        ShardMsg::Transaction(tx) => transaction_arrived(core, conns, *tx),
        ShardMsg::Part(part) => super::in_place::part_arrived(core, conns, *part),
        ShardMsg::PartRan(ran) => super::in_place::part_ran(core, conns, *ran),
        ShardMsg::Release(release) => super::in_place::release(core, conns, release),
        ShardMsg::Lend(request) => super::lending::lend(core, conns, request),
        ShardMsg::Lent {
            ticket,
            entries,
            waited,
        } => super::lending::lent(core, conns, ticket, entries, waited),
        ShardMsg::GiveBack {
            from,
            entries,
            records,
        } => super::lending::take_back(core, conns, from, entries, records),
        ShardMsg::Watch(request) => super::lending::watch(core, conns, request),
        ShardMsg::Wake { ticket } => super::lending::retry(core, conns, ticket),
        ShardMsg::Unwatch { from, ticket } => super::lending::unwatch(core, from, ticket),
        ShardMsg::Config(change) => super::settings::apply_config_change(core, conns, &change),
        ShardMsg::Publish { from, ticket } => super::gathered::publish(core, conns, from, ticket),
        ShardMsg::Published { ticket } => gather::published(core, conns, ticket),
        ShardMsg::Clients { from, tag, query } => {
            super::gathered::answer_clients(core, conns, from, tag, &query)
        }
        ShardMsg::Messages(batch) => {
            let (mut to, outbox) = core.delivery();
            crate::messaging::pubsub::deliver_batch(&mut to, outbox, conns, batch)
        }
        ShardMsg::MonitorLines(lines) => {
            crate::shard::monitor::deliver_here(core, conns, &lines, None)
        }
        ShardMsg::WatchKeys {
            from,
            tag,
            epoch,
            keys,
        } => super::multi::watched_by(core, from, tag, epoch, keys),
        ShardMsg::WatchKeysNow {
            from,
            client_id,
            epoch,
            db,
            keys,
            left,
        } => {
            let who = crate::transactions::watch::WatchingClient {
                shard: from,
                client_id,
                epoch,
            };
            core.watches
                .register(&core.engine, core.now_ms, who, db, &keys);
            left.fetch_sub(1, std::sync::atomic::Ordering::Release);
            crate::mesh::forward::ring(from);
        }
        ShardMsg::UnwatchKeys {
            client_id,
            below_epoch,
            keys,
        } => core.watches.unregister(client_id, below_epoch, &keys),
        ShardMsg::Touched { client_id, epoch } => core.watches.mark_touched(client_id, epoch),
        ShardMsg::Written {
            keys,
            noloop_writer,
            gather,
        } => written(core, keys, noloop_writer, gather),
        ShardMsg::WrittenOwed { ticket, owed } => {
            let (tracking, mut to) = core.tracking_parts();
            tracking.gather_answered(&mut to, conns, ticket, owed);
        }
        ShardMsg::Replies(mut batch) if !batch.owed.is_empty() => {
            core.tracking
                .split_owed_from(std::mem::take(&mut batch.owed));
            handle(core, conns, ShardMsg::Replies(batch));
        }
        ShardMsg::Replies(mut batch)
            if batch.tags.len() == 1 && batch.replies.len() >= REPLY_BATCH_BYTES =>
        {
            // A large reply travels alone: its buffer moves, no copy.
            let (tag, _) = batch.tags[0];
            let bytes = std::mem::take(&mut batch.replies);
            split_part_answered(core, conns, &tag);
            gather::deliver(
                core,
                conns,
                (tag.conn, tag.gen),
                tag.seq,
                tag.part as usize,
                (bytes, u64::from(tag.ran_ns)),
            );
        }
        ShardMsg::Replies(batch) => {
            let mut offset = 0;
            for &(tag, len) in batch.tags.iter() {
                // Copied once, from the batch into the client's queue.
                let bytes = &batch.replies[offset..offset + len as usize];
                offset += len as usize;
                let who = (tag.conn, tag.gen);
                split_part_answered(core, conns, &tag);
                let part = (bytes, u64::from(tag.ran_ns));
                gather::deliver(core, conns, who, tag.seq, tag.part as usize, part);
            }
            if let Some(spare) = batch.spare {
                // Its buffers go back to its sender with the next requests.
                core.outbox.keep_spare(spare, batch.replies, batch.tags);
            }
        }
        ShardMsg::GiveBackAcked {
            entries,
            records,
            from,
            ticket,
        } => super::lending::take_back_acked(core, conns, entries, records, from, ticket),
        ShardMsg::Durable { ticket } => {
            crate::persistence::durable::acknowledged(core, conns, ticket)
        }
        ShardMsg::RunNow {
            from,
            ticket,
            db,
            resp3,
            args,
        } => run_now(core, from, ticket, (db, resp3), args),
        // Only a script waiting on its thread takes these ([`request_now`]).
        ShardMsg::RanNow { .. } => {}
        ShardMsg::Invalidate(invalidation) => {
            let (tracking, mut to) = core.tracking_parts();
            tracking.deliver(&mut to, conns, invalidation);
        }
        ShardMsg::Remember {
            shard,
            client_id,
            keys,
        } => {
            core.engine.record_expired(true);
            let keys = keys.iter().map(Vec::as_slice);
            core.tracking.remember(shard, client_id, keys);
        }
        ShardMsg::BcastPrefixes {
            shard,
            client_id,
            noloop,
            prefixes,
        } => {
            core.engine.record_expired(true);
            core.tracking
                .subscribe(shard, client_id, noloop, prefixes.as_deref());
        }
    }
}

/// Borrowed keys a coordinator wrote came home: touch their watchers,
/// invalidate their readers; with `gather`, the invalidations owed to clients
/// of the coordinator's shard or of this one go back to the coordinator, to
/// be sent in the order the keys were written (see `tracking`).
fn written(
    core: &mut ShardCore,
    keys: Vec<crate::mesh::lending::DbKey>,
    noloop_writer: Option<u64>,
    gather: Option<Box<(usize, u64, Vec<u32>)>>,
) {
    let since = core.tracking.owed_len();
    for (db, key) in &keys {
        if core.tracking.active() {
            let writer = noloop_writer.unwrap_or(0);
            core.tracking.written(writer, noloop_writer.is_some(), key);
        }
        core.touch_watched(*db, key);
    }
    let Some(gather) = gather else {
        return;
    };
    let (coordinator, ticket, places) = *gather;
    let names: Vec<&[u8]> = keys.iter().map(|(_, k)| k.as_slice()).collect();
    let owed = core
        .tracking
        .take_part_owed(since, coordinator, &names, &core.outbox);
    let owed = owed
        .into_iter()
        .map(|(i, shard, inv)| (places[i as usize], shard, inv))
        .collect();
    core.outbox.written_owed(coordinator, ticket, owed);
}

/// A part of a split write this shard is the origin of answered: with every
/// part in, its invalidations go out in key order, before the reply is filled
/// in (the writer's own come right after it). One test when no split gathers.
fn split_part_answered(core: &mut ShardCore, conns: &mut Slab<Conn>, tag: &Tag) {
    if core.tracking.splitting() {
        let (tracking, mut to) = core.tracking_parts();
        tracking.split_answered(&mut to, conns, (tag.conn, tag.gen), tag.seq);
    }
}

/// This shard ran part `tag.part` of a split write for shard `origin`, which
/// owes invalidations past `since`: those the origin delivers in key order
/// travel with the part's reply (see `tracking`).
fn relay_part_owed(
    core: &mut ShardCore,
    origin: usize,
    (tag, cmd): (Tag, &crate::cmd::registry::Command),
    args: ruvio_resp::Args<'_>,
    since: usize,
) {
    let keys: Vec<&[u8]> = cmd.meta.keys.keys(args).collect();
    let owed = core
        .tracking
        .take_part_owed(since, origin, &keys, &core.outbox);
    let owed =
        owed.into_iter().map(
            |(index, shard, invalidation)| crate::mesh::forward::PartOwed {
                tag,
                index,
                shard,
                invalidation,
            },
        );
    core.outbox.part_owed(origin, owed);
}

/// A locked script's command of every shard, run here for it (no client: its
/// database and protocol, nothing to block).
fn run_now(
    core: &mut ShardCore,
    from: usize,
    ticket: u64,
    (db, resp3): (usize, bool),
    args: ruvio_resp::OwnedArgs,
) {
    let mut out = Vec::new();
    let proto = if resp3 {
        Protocol::Resp3
    } else {
        Protocol::Resp2
    };
    let filling_before = core.wal.as_ref().map_or(0, |w| w.filling_bytes());
    match registry()
        .lookup(args.args().get(0))
        .and_then(|c| c.resolve(args.args()).ok())
    {
        Some(cmd) => {
            let caller = Caller {
                client_id: 0,
                db,
                proto,
                no_touch: true,
                may_block: false,
                borrowing: false,
                tracking: Default::default(),
            };
            run_engine(core, cmd, caller, args.args(), &mut out);
        }
        None => Reply::new(&mut out, proto).error("ERR internal: unknown command"),
    }
    crate::persistence::durable::reply_ran_now(core, from, ticket, out, filling_before);
}

/// A control message about a blocked client.
pub(crate) fn control(core: &mut ShardCore, control: Control) {
    match control {
        Control::Cancel { from, conn, gen } => {
            exec::drop_waiter(
                core,
                |w| matches!(w, Waiter::Remote { shard, tag } if *shard == from && tag.conn == conn && tag.gen == gen),
            );
        }
        Control::StreamMark { mark, .. } => crate::shard::replica::note_stream_mark(core, *mark),
        Control::ChainCut { .. } => core.replication.stream_cut = true,
    }
}

/// How much longer `mesh:slow-part-<shard>` makes each part.
const SLOW_PART: std::time::Duration = std::time::Duration::from_millis(100);

/// `RUVIO_FAULT=mesh:slow-part-<shard>` (debug builds): shard `<shard>` takes
/// [`SLOW_PART`] longer to run each part of a split or every-shard command, so
/// a test sees a part's time in its command's record.
fn slow_part_fault(shard: usize) {
    if cfg!(debug_assertions)
        && ruvio_engine::fault::is_armed(b"mesh", &format!("slow-part-{shard}"))
    {
        std::thread::sleep(SLOW_PART);
    }
}

/// Execute forwarded commands against this shard's keyspace and queue the replies;
/// a command with nothing to serve yet is parked until a write or its deadline.
pub(crate) fn run_requests(core: &mut ShardCore, conns: &mut Slab<Conn>, mut batch: RequestBatch) {
    // The reply buffers the origin sent back are for the next replies to it;
    // the box carries this batch back.
    let mut spare = batch.spare.take();
    if let Some(spare) = spare.as_mut() {
        core.outbox.recycle(batch.from, spare);
    }
    // Room for a small reply from the start (it only carries each reply to the
    // outbox's batch), kept in the shard from batch to batch: no allocation per
    // batch. Taken, not borrowed: the engine runs with the whole core.
    let mut out = std::mem::take(&mut core.reply_scratch);
    out.reserve(REPLY_SCRATCH_BYTES);
    let mut built = crate::net::outlimit::BuiltOutput::default();
    for (&tag, args) in batch.tags.iter().zip(batch.commands.iter()) {
        out.clear();
        let caller = tag.caller(batch.from);
        // The origin resolved it already: its row comes in the tag, or is found
        // again by name (a part of a split or every-shard command).
        let row = match tag.row {
            0 => registry()
                .lookup(args.get(0))
                .and_then(|c| c.resolve(args).ok()),
            row => registry().row(usize::from(row) - 1),
        };
        let Some(cmd) = row else {
            Reply::new(&mut out, caller.proto).error("ERR internal: unknown forwarded command");
            core.outbox.reply(batch.from, tag, &out);
            continue;
        };
        let filling_before = core.wal.as_ref().map_or(0, |w| w.filling_bytes());
        let script = crate::mesh::script_lock::is_script(cmd.meta);
        if script {
            // It cannot start over from here, but may take the script lock.
            crate::mesh::script_lock::begin_run(crate::mesh::script_lock::Run {
                may_lock_now: !core.logs(),
                ..Default::default()
            });
        }
        // A command forwarded whole is timed here, where it runs (see
        // `observability`); so is a part of a split or every-shard command,
        // whose time goes back with its reply (`Tag::ran_ns`).
        let timed = core.timing.start();
        if !tag.whole {
            slow_part_fault(core.id);
        }
        let owed_before = core.tracking.owed_len();
        // `run_engine` contains a panicking handler itself (docs/faults.md).
        let block = {
            // Lent to the hook that answers the other clients while a script is busy.
            let _lent = script.then(|| {
                super::busy_routes::keep_for_script(core.node_routes());
                crate::net::lent::lend(conns)
            });
            run_engine(core, cmd, caller, args, &mut out)
        };
        let ns = timed.map(|t| core.timing.elapsed_ns(t));
        let observed = tag.whole && core.timing.active();
        if observed && block.block.is_none() {
            let who = crate::observability::Who::Id(tag.client_id);
            exec::observe(core, cmd, who, args, (ns, out.len()));
        }
        match block.block {
            Some(block) => {
                let waiter = Waiter::Remote {
                    shard: batch.from,
                    tag,
                };
                let ticket = exec::park(core, waiter, caller, args, block);
                if observed {
                    // Recorded when it is served (`exec::observe_unblocked`).
                    exec::observe_parked(core, cmd, Some(ticket), ns);
                }
            }
            None => {
                if !tag.whole && core.tracking.owed_len() > owed_before {
                    relay_part_owed(core, batch.from, (tag, cmd), args, owed_before);
                }
                if tag.tracking != 0 {
                    let (resp3, bits) = (tag.resp3, tag.tracking);
                    let t = &mut core.tracking;
                    crate::tracking::after_forwarded(
                        t,
                        batch.from,
                        tag.client_id,
                        bits,
                        resp3,
                        &mut out,
                    );
                }
                let limits = &core.cfg.client_output_buffer_limit;
                crate::net::outlimit::cap_forwarded(
                    limits,
                    &mut built,
                    (tag.conn, tag.gen),
                    &mut out,
                );
                let tag = if tag.whole { tag } else { tag.ran(ns) };
                crate::persistence::durable::reply_forwarded(
                    core,
                    batch.from,
                    tag,
                    &out,
                    filling_before,
                )
            }
        }
        exec::serve_ready(core, conns);
    }
    if out.capacity() <= REPLY_SCRATCH_KEPT_MAX {
        out.clear();
        core.reply_scratch = out;
    }
    core.outbox.send_back(batch, spare);
}

/// The owner's side of a transaction sent whole to it ([`owner_tx`]): run `tx`
/// now, or queue it when one of its keys is lent (or something from its shard
/// waits already).
pub(crate) fn transaction_arrived(core: &mut ShardCore, conns: &mut Slab<Conn>, tx: OwnerTx) {
    let must_wait = owner_tx::is_waiting(&core.lending, tx.from)
        || tx.keys.iter().any(|(db, k)| core.lending.is_lent(*db, k));
    if must_wait {
        owner_tx::defer(
            &mut core.lending,
            tx.from,
            Deferred::Transaction(Box::new(tx)),
        );
    } else {
        run_transaction(core, conns, &tx);
    }
}

/// Keys came home: run what waits behind a transaction sent whole here
/// ([`owner_tx`]), per shard, up to the first transaction whose keys are still
/// lent. The shards take turns going first ([`crate::mesh::lending::Lending::deferred_turn`]):
/// two coordinators whose transactions in place wait for the same keys get them
/// one after the other, not always the lower shard first.
pub(crate) fn run_deferred(core: &mut ShardCore, conns: &mut Slab<Conn>) {
    let shards = core.lending.deferred.len();
    let first = core.lending.deferred_turn % shards.max(1);
    for from in (first..shards).chain(0..first) {
        loop {
            let blocked = match core.lending.deferred[from].front() {
                None => break,
                Some(Deferred::Transaction(tx)) => {
                    tx.keys.iter().any(|(db, k)| core.lending.is_lent(*db, k))
                }
                Some(Deferred::Part(part)) => super::in_place::must_wait_here(core, part),
                Some(_) => false,
            };
            if blocked {
                break;
            }
            match core.lending.deferred[from].pop_front() {
                Some(Deferred::Transaction(tx)) => run_transaction(core, conns, &tx),
                Some(Deferred::Part(part)) => {
                    core.lending.deferred_turn = from + 1;
                    super::in_place::run_part(core, conns, *part);
                }
                Some(Deferred::Requests(batch)) => run_requests(core, conns, batch),
                Some(Deferred::Control(c)) => control(core, c),
                None => break,
            }
        }
    }
}

/// Run the queue here with nothing in between, log it as one group, answer the
/// array (queued blocking commands do not block, as in any EXEC).
fn run_transaction(core: &mut ShardCore, conns: &mut Slab<Conn>, tx: &OwnerTx) {
    let caller = Caller {
        may_block: false,
        ..tx.tag.caller(tx.from)
    };
    let filling_before = core.wal.as_ref().map_or(0, |w| w.filling_bytes());
    let mut out = Vec::new();
    Reply::new(&mut out, caller.proto).array(tx.commands.len());
    run_queue(core, caller, &tx.commands, &mut out, &mut Vec::new());
    exec::serve_ready(core, conns);
    let limits = &core.cfg.client_output_buffer_limit;
    let mut built = crate::net::outlimit::BuiltOutput::default();
    crate::net::outlimit::cap_forwarded(limits, &mut built, (tx.tag.conn, tx.tag.gen), &mut out);
    crate::persistence::durable::reply_forwarded(core, tx.from, tx.tag, &out, filling_before);
}

/// Run a transaction's `commands` here, one after the other, logged as one group,
/// their replies appended to `out` (where each ends, into `ends`). Each is timed
/// and counted as Redis counts EXEC's commands.
pub(super) fn run_queue(
    core: &mut ShardCore,
    caller: Caller,
    commands: &crate::net::queued::Commands,
    out: &mut Vec<u8>,
    ends: &mut Vec<usize>,
) {
    core.log_begin();
    for (cmd, args) in commands.rows() {
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
        let ran = run_engine(core, cmd, caller, args, out);
        if core.timing.active() {
            let ns = timed.map(|t| core.timing.elapsed_ns(t));
            let who = crate::observability::Who::Id(caller.client_id);
            exec::observe(core, cmd, who, args, (ns, out.len() - reply_start));
        }
        if ran.block.is_some() {
            // Only a script naming an undeclared key that is out on loan gets here
            // (the declared keys were checked): its slot needs an answer.
            Reply::new(out, caller.proto)
                .error("TRYAGAIN a key of this script is in use by a cross-shard command");
        }
        core.stats.count_call(cmd.stat);
        ends.push(out.len());
    }
    core.log_end();
}
