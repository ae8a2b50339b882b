//! From received bytes to replies: parse each command of the read batch, look it up,
//! check it once, route it by hash slot, run it. The usual call (admitted, run
//! here) is one inlined path from `run_command` to `run_local`: the refusals
//! sit behind one gate (`refusals::needs_checks`), and a refusal, a command for
//! other shards (`elsewhere`) or one that blocks leaves it for a function out of
//! line (docs/runtime.md, "The per-request path of one shard").
//!
//! Routing (see DESIGN.md): in per-shard mode a key of another shard gets `MOVED`
//! and keys in different slots get `CROSSSLOT`, as Redis Cluster; in forward mode
//! the command runs where its keys live and the reply comes back through a held
//! slot of the connection's reply queue, multi-key commands split and merged.

use crate::cmd::registry::{registry, Command, Handler, InDispatch, Placement};
use crate::cmd::Ctx;
use crate::config::PortMode;
use crate::net::conn::{BlockedOn, ClientState, Conn, Merge, ReplyMode, ReplyQueue};
use crate::net::slab::Slab;
use crate::observability::monitor::{self, Source};
use crate::observability::Parked;
use crate::persistence::durable;
use crate::shard::blocking::Waiter;
use crate::shard::exec::{self, run_engine, Caller};
use crate::shard::prefetch::prefetch_window;
use crate::shard::refusals::{needs_checks, refusal, waits_for_pause};
use crate::shard::route::{owner_groups, route, runs_here, Route};
use crate::shard::ShardCore;
use crate::stats::TIMING_SAMPLE_EVERY;
use ruvio_engine::command::flags::{ADMIN, ALLOW_BUSY, SKIP_MONITOR, WRITE};
use ruvio_engine::command::CommandTree;
use ruvio_engine::CmdError;
use ruvio_resp::{Args, Parsed, Reply};
use std::time::Instant;

/// Parse and run every complete command in the connection's input. Returns false
/// when the connection must stop reading (it is closing).
pub fn process_input(
    core: &mut ShardCore,
    conns: &mut Slab<Conn>,
    conn: &mut Conn,
    index: u32,
) -> bool {
    if conn.client.blocked.is_none() && conn.client.exec_rest.is_some() {
        let who = (index, conn.gen);
        super::multi::continue_exec(core, conns, &mut conn.client, &mut conn.replies, who);
    }
    let waiting = conn.client.blocked.is_some() || conn.client.paused;
    if conn.input.len() - conn.input_start < conn.input_need || waiting {
        // What a look-ahead read of this input is forgotten before it moves
        // (see `prefetch::KeyWindow::scan`), here and at the end.
        conn.parser.forget_ahead();
        return true;
    }
    conn.input_need = 0;
    if core.node_follower.is_some() {
        // Forward mode as one node: shard 0's latest slot map before this
        // input is routed (`node_forward`).
        super::node_forward::follow_node_map(core);
    }
    let acl = &core.shared.acl;
    if conn.client.acl.epoch != acl.epoch() && !crate::cmd::acl::keeps_access(acl, &mut conn.client)
    {
        // Its user was deleted, or lost a channel it listens to, while this
        // connection was out of reach of the change (see `acl`).
        conn.client.closing = true;
        conn.parser.forget_ahead();
        return false;
    }
    let who = (index, conn.gen);
    let sending = conn.sending.len();
    // Commands at the front whose lines the shard's batch pass already prefetched.
    let mut prefetched = std::mem::take(&mut conn.prefetched);
    // What CLIENT LIST shows of this connection while one of its commands runs.
    conn.client.batch_buffers = conn.buffer_use();
    let Conn {
        input,
        parser,
        client,
        replies,
        ..
    } = conn;
    let mut pos = conn.input_start;
    let first = pos;
    // The primary's stream (single, or a shard link's): the bytes of the
    // commands that ran and are not counted yet. Counted once per read (the
    // backlog's lock and a copy, a link's book), not once per command; at
    // once where the count is read: before a REPLCONF GETACK runs, before a
    // link's `RUVIO` record (a mark is tied to the history's end, a barrier
    // waits), and per command during a catch-up. A link's commands are
    // counted as applied (`settled`) while none of them waits for another
    // shard's answer; the ones before the first that does are counted so
    // at once, as they were settled.
    let mut uncounted = pos..pos;
    let mut link_settled = true;
    while pos < input.len() && !client.closing && client.blocked.is_none() {
        if replies.is_backed_up(sending) {
            // The client is not reading its replies: the rest of this read waits
            // until they are sent (the shard resumes it), as the next read does.
            break;
        }
        if client.slot_import && pos > first && super::slot_import::time_up(core) {
            // A slot import's slice is over (a command at least ran in it):
            // the rest waits for the next.
            break;
        }
        if prefetched == 0 {
            prefetched = prefetch_window(core, parser, &input[pos..], client.db);
        }
        match parser.parse(&input[pos..], &core.limits) {
            Ok(Parsed::Complete { args, consumed }) => {
                if !args.is_empty() && left_unread(core, client, replies, who, args) {
                    break;
                }
                if client.master && !crate::shard::replica::stream_runs(core, client) {
                    // REPLICAOF changed the primary: nothing more of this stream runs.
                    client.closing = true;
                    client.killed = true;
                    break;
                }
                if client.master
                    && client.multi.is_none()
                    && core.shared.replication.primary.cutting()
                {
                    // A full sync of this replica's own replica cuts while the
                    // stream stands still; shard 0's tick runs the rest after it.
                    break;
                }
                let mut run = !args.is_empty();
                if client.shard_link && run {
                    if !uncounted.is_empty() && crate::replication::link_barrier::is_record(args) {
                        let counted = (client.db, link_settled);
                        count_stream(core, client, &input[uncounted.clone()], counted);
                        uncounted.start = uncounted.end;
                    }
                    // A Ruvio replica's shard link: a barrier record waits for
                    // another link (see `replication::link_barrier`).
                    match crate::shard::replica::link_barrier(core, args, who) {
                        crate::shard::replica::AtBarrier::Run
                            if core.replication.link_skip != 0
                                && crate::shard::replica::skipped_by_barrier(
                                    core, client, args,
                                ) =>
                        {
                            run = false
                        }
                        crate::shard::replica::AtBarrier::Run => {}
                        crate::shard::replica::AtBarrier::Passed => run = false,
                        crate::shard::replica::AtBarrier::Wait => break,
                    }
                }
                pos += consumed;
                prefetched -= 1;
                if client.master && core.shared.replication.in_catch_up() {
                    // After a restart whose shards' logs ended apart (see
                    // `replica::catch_up`).
                    let end = core.shared.replication.offset() + consumed as u64;
                    if !core.shared.replication.catching_up(end) {
                        core.shared.replication.end_catch_up();
                    } else if run {
                        match crate::shard::replica::catch_up(core, args, end) {
                            crate::shard::replica::CatchUp::Run => {}
                            crate::shard::replica::CatchUp::Skip => run = false,
                            crate::shard::replica::CatchUp::GiveUp => {
                                crate::shard::replica::give_up_catch_up(core, args);
                                client.closing = true;
                                client.killed = true;
                                break;
                            }
                        }
                    }
                }
                if run {
                    if client.master && !uncounted.is_empty() && is_replconf(args) {
                        // It may be a GETACK: it answers the offset before it.
                        let counted = (client.db, link_settled);
                        count_stream(core, client, &input[uncounted.clone()], counted);
                        uncounted.start = uncounted.end;
                    }
                    execute(core, conns, client, replies, who, args);
                }
                if client.master {
                    // The replication offset counts the stream's bytes once each
                    // command ran.
                    if client.shard_link
                        && link_settled
                        && (client.blocked.is_some() || replies.is_holding())
                    {
                        // This one waits for another shard: the ones before
                        // it were applied. (The database counted is the one
                        // after it: the count at the read's end sets it again.)
                        let before = uncounted.start..pos - consumed;
                        if !before.is_empty() {
                            count_stream(core, client, &input[before], (client.db, true));
                        }
                        uncounted.start = pos - consumed;
                        link_settled = false;
                    }
                    uncounted.end = pos;
                    if !client.shard_link && core.shared.replication.in_catch_up() {
                        // The catch-up reads the offset before each command.
                        count_stream(core, client, &input[uncounted.clone()], (client.db, true));
                        uncounted.start = pos;
                    }
                }
                if crate::net::outlimit::hard_limit_crossed(
                    &core.cfg.client_output_buffer_limit,
                    client,
                    replies,
                ) {
                    // Stop here: the shard closes it (see `outlimit`).
                    client.closing = true;
                }
            }
            Ok(Parsed::Incomplete { need_bytes }) => {
                conn.input_need = need_bytes;
                break;
            }
            Err(e) => {
                e.write_reply(replies.sink());
                client.closing = true;
            }
        }
    }
    if !uncounted.is_empty() {
        count_stream(core, client, &input[uncounted], (client.db, link_settled));
    }
    if client.master {
        // A replica with a log marks where the stream is (see `stream_mark`).
        crate::shard::replica::mark_stream(core, client, false);
        crate::shard::primary::wake_stream_hosts(core);
    }
    parser.forget_ahead();
    if conn.recv_in_flight {
        // The kernel is writing after the current end of `input` (a blocked client's
        // input, run once it was answered): keep the bytes in place until then.
        conn.input_start = pos;
    } else {
        input.drain(..pos);
        conn.input_start = 0;
    }
    if input.len() - conn.input_start > core.cfg.client_query_buffer_limit {
        // Redis closes such a client without a reply (client-query-buffer-limit).
        client.closing = true;
    }
    !client.closing
}

/// The primary's stream: `bytes` (whole commands) ran, leaving the client in
/// database `db`; a shard link's were applied too when `settled` (none of
/// them waits for another shard's answer).
fn count_stream(
    core: &ShardCore,
    client: &ClientState,
    bytes: &[u8],
    (db, settled): (usize, bool),
) {
    let state = &core.shared.replication;
    match client.shard_link {
        true => state.shard_link_processed(core.id, bytes, (db, settled), core.now_ms),
        false => state.processed(bytes, db, core.now_ms),
    }
}

/// REPLCONF, whatever its case (a GETACK from the primary reads the offset).
fn is_replconf(args: Args<'_>) -> bool {
    args.get(0).eq_ignore_ascii_case(b"replconf")
}

/// Run one command and leave its reply (or a held slot for it) in `replies`.
///
/// Errors are written once, here (engine errors in [`run_engine`], which also runs
/// forwarded commands), from their type: one found before the command is admitted
/// (unknown command, arity, NOAUTH) counts as a rejected call, one after (unknown
/// subcommand included) as a failed call, whichever kind of handler answered it.
fn execute(
    core: &mut ShardCore,
    conns: &mut Slab<Conn>,
    client: &mut ClientState,
    replies: &mut ReplyQueue,
    who: (u32, u32),
    args: Args<'_>,
) {
    // CLIENT REPLY SKIP hides the next reply whatever it is, rejections included
    // (Redis flips the flag in resetClient, after every command).
    if client.reply_mode == ReplyMode::SkipNext {
        client.reply_mode = ReplyMode::Skip;
    }
    let before = replies.sink_len();
    let first_new_slot = replies.next_seq();
    // A reply answered later (another shard, a blocked command) is dropped when it
    // arrives, even if that is before this command returns (a local part).
    replies.silent_new = client.reply_mode.silences();
    run_command(core, conns, client, replies, who, args);
    replies.silent_new = false;
    // The mode after the command decides for a reply written now: CLIENT REPLY ON
    // answers +OK although the mode was OFF when it started. A reply written
    // behind a slot the command held (an `always` gate: the master client's
    // writes under a log) is dropped too.
    if client.reply_mode.silences() {
        replies.drop_immediate(first_new_slot, before);
    }
    // Its Pub/Sub frames go out whatever the mode (see `ClientState::pushes`);
    // empty but under CLIENT REPLY OFF/SKIP, so one test on the request path.
    if !client.pushes.is_empty() {
        replies.sink().append(&mut client.pushes);
    }
    if client.tracking.flags != 0 || core.tracking.owes() {
        after_tracked(core, conns, client, replies, args);
    }
    if client.reply_mode == ReplyMode::Skip {
        client.reply_mode = ReplyMode::On;
    }
}

/// CLIENT TRACKING after a command: what this shard owes the client goes right
/// after its reply (Redis' `tracking_pending_keys`), and CLIENT CACHING's choice
/// lasts one command (or one transaction; CLIENT's own subcommands keep it), as
/// Redis' resetClient.
#[cold]
fn after_tracked(
    core: &mut ShardCore,
    conns: &mut Slab<Conn>,
    client: &mut ClientState,
    replies: &mut ReplyQueue,
    args: Args<'_>,
) {
    if core.tracking.owes() {
        let (tracking, mut to) = core.tracking_parts();
        tracking.after_command(&mut to, conns, client, replies.sink());
    }
    use crate::net::conn::tracking_flags::CACHING;
    if client.tracking.flags & CACHING != 0
        && client.multi.is_none()
        && !args.get(0).eq_ignore_ascii_case(b"client")
    {
        client.tracking.flags &= !CACHING;
    }
}

/// Look a command up, check it, route it and run it (or send it on).
///
/// One inlined path for the usual call: the refusals behind one gate
/// ([`needs_checks`]), the route's answer for a local command read from the
/// row, the handler called from here; everything else (a refusal, an unknown
/// command, a command for other shards, a blocked one) leaves it for a cold
/// function.
#[inline(always)]
pub(crate) fn run_command(
    core: &mut ShardCore,
    conns: &mut Slab<Conn>,
    client: &mut ClientState,
    replies: &mut ReplyQueue,
    who: (u32, u32),
    args: Args<'_>,
) {
    let asking = client.asking;
    let Some(cmd) = registry().lookup(args.get(0)) else {
        return unknown_command(core, client, replies, args);
    };
    // Redis names the command it looked up, whatever becomes of it (queued,
    // refused); a container's subcommand once resolved, below and in `queue`.
    client.last_cmd = cmd.meta.name;
    client.last_cmd_ms = core.now_ms;
    // A container runs as its subcommand, which has statistics of its own; an
    // unknown subcommand fails as the container (after the refusals: an ACL
    // check passes it, its own error comes later). Resolved once here.
    let resolved = match cmd.subcommands.is_empty() {
        true => Ok(cmd),
        false => cmd.resolve(args),
    };
    if needs_checks(core, client, cmd, args) {
        if let Some(e) = refusal(core, client, cmd, &resolved, args) {
            refused(core, client, replies, cmd, e);
            return end_asking(client, asking, args);
        }
    }
    if let Ok(sub) = resolved {
        // A later WAIT waits for the replicas to have it (queued in MULTI too).
        client.wrote |= sub.may_write;
    }
    if client.multi.is_some() && super::multi::queue(core, client, replies, cmd, args) {
        return end_asking(client, asking, args);
    }
    let (stat, result, awaited) = match resolved {
        Ok(sub) => run_admitted(core, conns, client, replies, who, sub, args),
        Err(e) => (cmd.stat, Err(e), false),
    };
    // Counted after the call, as Redis' call() does: INFO does not see itself
    // (one that awaits other shards is counted once answered).
    if !awaited {
        core.stats.count_call(stat);
    }
    if let Err(e) = result {
        failed(core, client, replies, stat, e);
    }
    end_asking(client, asking, args);
}

/// Whether the command at the front waits, left unread, for something else
/// to end first (set up here to be resumed then). An empty line (an inline
/// request with no words, as redis-cli --pipe sends before its closing ECHO)
/// never gets here: it is skipped, as by Redis's processInlineBuffer.
fn left_unread(
    core: &mut ShardCore,
    client: &mut ClientState,
    replies: &ReplyQueue,
    who: (u32, u32),
    args: Args<'_>,
) -> bool {
    if core.pause.is_active() && waits_for_pause(core, args) {
        // It runs when the pause ends.
        client.paused = true;
        core.pause.park(who);
        return true;
    }
    if super::slot_export::holds(core, client, args) {
        // It runs when its slots' handover is over.
        client.paused = true;
        super::slot_export::park(core, who);
        return true;
    }
    if client.borrowing_tx.is_some()
        && super::lending::must_wait_for_transaction(core, client, args)
    {
        // It runs once the transaction answered.
        let seq = client.borrowing_tx.map_or(0, |(_, seq)| seq);
        client.blocked = Some(BlockedOn::waiting(seq));
        return true;
    }
    if !client.in_place_txs.is_empty() {
        if let Some(seq) = super::in_place::must_wait(core, client, args) {
            // It runs once that transaction answered.
            client.blocked = Some(BlockedOn::waiting(seq));
            return true;
        }
    }
    if replies.is_holding() && client.multi.is_none() && waits_for_writes(args) {
        // A WAIT or WAITAOF counts the writes sent before it, so it runs once
        // their replies are in (a forwarded write is in its owner's records by then).
        client.blocked = Some(BlockedOn::waiting(replies.next_seq() - 1));
        return true;
    }
    false
}

/// WAIT and WAITAOF: they count the writes the client sent before them
/// (Redis's `c->woff`), so none of those may still be on its way to its shard.
fn waits_for_writes(args: Args<'_>) -> bool {
    let name = args.get(0);
    name.eq_ignore_ascii_case(b"wait") || name.eq_ignore_ascii_case(b"waitaof")
}

/// ASKING holds for one command, outside MULTI (Redis's `resetClient`): the
/// flag the client had when this command started ends with it.
#[inline(always)]
fn end_asking(client: &mut ClientState, asking: bool, args: Args<'_>) {
    if asking && client.multi.is_none() && !args.get(0).eq_ignore_ascii_case(b"asking") {
        client.asking = false;
    }
}

/// A command not in the table.
#[cold]
#[inline(never)]
fn unknown_command(
    core: &mut ShardCore,
    client: &mut ClientState,
    replies: &mut ReplyQueue,
    args: Args<'_>,
) {
    let e = CmdError::unknown_command(args);
    core.stats.count_error(&e);
    crate::transactions::multi::flag_refused(client);
    e.write(&mut Reply::new(replies.sink(), client.proto));
    end_asking(client, client.asking, args);
}

/// A command refused before it ran (a rejected call; in MULTI it fails the
/// transaction, EXEC aborts it).
#[cold]
#[inline(never)]
fn refused(
    core: &mut ShardCore,
    client: &mut ClientState,
    replies: &mut ReplyQueue,
    cmd: &'static Command,
    e: CmdError,
) {
    let e = super::multi::refused(core, client, cmd, e);
    core.stats.count_rejected(cmd.stat, &e);
    e.write(&mut Reply::new(replies.sink(), client.proto));
}

/// A command that ran and failed (a failed call).
#[cold]
#[inline(never)]
fn failed(
    core: &mut ShardCore,
    client: &mut ClientState,
    replies: &mut ReplyQueue,
    stat: usize,
    e: CmdError,
) {
    core.stats.count_failed(stat, &e);
    e.write(&mut Reply::new(replies.sink(), client.proto));
}

/// Run resolved row `sub`, admitted, with what Redis's `call()` does around
/// it: MONITOR's feed, the command clock and its records, the blocked clients
/// its writes serve. Answers its statistics slot, its result, and whether it
/// awaits other shards (counted once they answered).
#[inline(always)]
fn run_admitted(
    core: &mut ShardCore,
    conns: &mut Slab<Conn>,
    client: &mut ClientState,
    replies: &mut ReplyQueue,
    who: (u32, u32),
    sub: &'static Command,
    args: Args<'_>,
) -> (usize, Result<(), CmdError>, bool) {
    client.last_cmd = sub.meta.name;
    let monitored = monitor::attached() && !sub.meta.has(ADMIN);
    if monitored && sub.meta.has(SKIP_MONITOR) {
        // Scripts are fed before they run, so their calls follow them.
        monitor::feed(client.db, Source::Client(&client.peer), args);
    }
    // Every command is timed when observability wants it (INFO
    // commandstats then counts exact times), else one in 64 for
    // commandstats alone.
    let timed = core.timing.start();
    let sampled = (timed.is_none()
        && (core.stats.per_command[sub.stat].calls + 1).is_multiple_of(TIMING_SAMPLE_EVERY))
    .then(Instant::now);
    let reply_start = replies.sink_len();
    let result = match sub.in_dispatch {
        InDispatch::No => run_routed(core, conns, client, replies, who, sub, args),
        // They need the reply queue: run here rather than as server handlers.
        InDispatch::Exec => super::multi::exec(core, conns, client, replies, who),
        InDispatch::Watch => super::multi::watch_keys(core, client, replies, who, args),
        InDispatch::Sort => sort(core, conns, client, replies, who, sub, args),
    };
    let ns = timed.map(|t| core.timing.elapsed_ns(t));
    // A gathered or split command answers once other shards did: it is
    // recorded then (`exec::observe_answered`), as Redis records a
    // command after its reply (its own INFO does not count it).
    let awaiting = core.timing.take_awaiting().filter(|_| result.is_ok());
    if let Some(seq) = awaiting {
        let sampled_usec = sampled.map_or(0, |started| {
            started.elapsed().as_micros() as u64 * TIMING_SAMPLE_EVERY
        });
        let record = exec::awaited(sub, args, ns, sampled_usec);
        if let Some(record) = replies.await_record(seq, record) {
            exec::observe_answered(core, client, &record);
        }
    } else {
        let stat = &mut core.stats.per_command[sub.stat];
        if let Some(ns) = ns {
            stat.usec += ns / 1000;
        } else if let Some(started) = sampled {
            stat.usec += started.elapsed().as_micros() as u64 * TIMING_SAMPLE_EVERY;
        }
    }
    let parked = core.timing.take_parked();
    if awaiting.is_none() && core.timing.active() && !core.timing.take_handed_off() {
        if let Some(parked) = parked {
            let ticket = match parked {
                Parked::Blocked(ticket) => Some(ticket),
                Parked::Waiting => None,
            };
            exec::observe_parked(core, sub, ticket, ns);
        } else {
            let reply_bytes = replies.sink_len().saturating_sub(reply_start);
            let who = crate::observability::Who::Here(crate::observability::commandlog::Client {
                peer: &client.peer,
                name: &client.name,
            });
            exec::observe(core, sub, who, args, (ns, reply_bytes));
        }
    }
    if monitored {
        if !sub.meta.has(SKIP_MONITOR) {
            // After the call, as Redis's call(): SELECT shows its database.
            monitor::feed(client.db, Source::Client(&client.peer), args);
        }
        let running = crate::shard::monitor::Running { who, replies };
        crate::shard::monitor::hand_out(core, conns, Some(running));
    }
    if !client.in_exec && core.blocking.has_ready() {
        // After the command is recorded, as Redis serves them after
        // `call()` (handleClientsBlockedOnKeys): a served command's slow
        // log entry follows the write's. Inside EXEC they are served after
        // the whole queue, which re-checks the keys then.
        exec::serve_ready(core, conns);
    }
    (sub.stat, result, awaiting.is_some())
}

/// SORT and SORT_RO: a restricted user may not read the keys its BY and GET
/// patterns name (checked before it is routed), else as any command.
#[inline(never)]
fn sort(
    core: &mut ShardCore,
    conns: &mut Slab<Conn>,
    client: &mut ClientState,
    replies: &mut ReplyQueue,
    who: (u32, u32),
    sub: &'static Command,
    args: Args<'_>,
) -> Result<(), CmdError> {
    if client.acl.restricted {
        let user = &client.acl.user;
        if let Some(refusal) = crate::acl::check::sort_refusal(user, sub.stat, sub.meta, args) {
            return Err(CmdError::Line(refusal.as_bytes().to_vec()));
        }
    }
    run_routed(core, conns, client, replies, who, sub, args)
}

/// Run resolved command `cmd` where its keys are: here, or elsewhere
/// ([`super::elsewhere`]: another shard, split over several, a redirection).
/// An error to write comes back.
#[inline(always)]
fn run_routed(
    core: &mut ShardCore,
    conns: &mut Slab<Conn>,
    client: &mut ClientState,
    replies: &mut ReplyQueue,
    who: (u32, u32),
    cmd: &'static Command,
    args: Args<'_>,
) -> Result<(), CmdError> {
    if runs_here(core, cmd) {
        return run_local(core, conns, client, replies, who, cmd, args);
    }
    let route = route(core, cmd, args, super::route::InFlight::of(client));
    match super::node_replica::route_for_client(core, client, (cmd, args), route) {
        Route::Local => run_local(core, conns, client, replies, who, cmd, args),
        route => super::elsewhere::run(core, conns, client, replies, who, cmd, args, route),
    }
}

/// Run a command on this shard with the client's context. A server handler's
/// error comes back to be written once by [`execute`]; an engine handler's is
/// written and counted by [`run_engine`].
#[inline(always)]
pub(super) fn run_local(
    core: &mut ShardCore,
    conns: &mut Slab<Conn>,
    client: &mut ClientState,
    replies: &mut ReplyQueue,
    who: (u32, u32),
    cmd: &'static Command,
    args: Args<'_>,
) -> Result<(), CmdError> {
    match cmd.handler {
        Some(Handler::Engine(_)) => {
            let caller = Caller::of(client, core.id);
            let gate = cmd
                .meta
                .has(WRITE)
                .then(|| durable::open_gate(core.wal.as_ref(), replies))
                .flatten();
            let script = cmd.script_call;
            if script && core.topo.mode == PortMode::Forward && core.topo.nodes.len() > 1 {
                crate::mesh::script_lock::begin_run(crate::mesh::script_lock::Run {
                    // Not inside EXEC: borrowing would leave the queue half run
                    // while it waits (the call gets Redis Cluster's error then).
                    may_start_over: !client.in_exec,
                    may_lock_now: !core.logs(),
                    ..Default::default()
                });
            }
            let ran = match script {
                true => {
                    // Lent to the hook that answers the other clients while a
                    // script is busy.
                    let _lent = crate::net::lent::lend(conns);
                    super::busy_routes::keep_for_script(core.node_routes());
                    run_engine(core, cmd, caller, args, replies.sink())
                }
                false => run_engine(core, cmd, caller, args, replies.sink()),
            };
            if let Some(gate) = gate {
                durable::close_gate(&mut core.gated, core.wal.as_ref(), replies, who, gate);
            }
            if ran.start_over || ran.block.is_some() {
                unfinished(core, conns, client, replies, who, (cmd, args), caller, ran);
            }
            // The clients blocked on the keys it wrote are served by `run_command`
            // once it is recorded.
            Ok(())
        }
        Some(Handler::Server(handler)) => {
            // Server commands answer -BUSY as Redis does while any shard runs a
            // script past the threshold (several would wait for that shard).
            if !cmd.meta.has(ALLOW_BUSY) {
                if let Some(busy) = core.shared.scripts.busy_elsewhere(core.id) {
                    return Err(busy);
                }
            }
            // A server command that writes keys (MIGRATE's DEL) answers, under
            // `always`, once that write is durable, as an engine write does.
            let gate = (cmd.placement == Placement::KeysHere)
                .then(|| durable::open_gate(core.wal.as_ref(), replies))
                .flatten();
            let mut reply = Reply::new(replies.sink(), client.proto);
            let mut ctx = Ctx {
                core,
                client,
                conns,
                gather: None,
                who,
                wait: None,
            };
            let result = handler(&mut ctx, args, &mut reply);
            if ctx.gather.is_some() || ctx.wait.is_some() {
                let (gather, wait) = (ctx.gather, ctx.wait);
                answers_later(core, client, replies, who, gather, wait);
            }
            if cmd.meta.group == "cluster" && core.cluster_node.is_some() {
                // What a CLUSTER subcommand changed of the slots on shard 0 of
                // a forward-mode node reaches the other shards before its reply
                // reaches the client (the tick publishes the bus's changes).
                super::node_forward::publish_node_map(core);
            }
            if let Some(gate) = gate {
                durable::close_gate(&mut core.gated, core.wal.as_ref(), replies, who, gate);
            }
            result
        }
        None => unreachable!("{} resolves to a subcommand", cmd.meta.name),
    }
}

/// An engine command that did not finish here: a script that reached
/// undeclared keys of other shards runs again on borrowed keys, a blocking
/// command parks until its keys change or its timeout.
#[cold]
#[inline(never)]
#[allow(clippy::too_many_arguments)]
fn unfinished(
    core: &mut ShardCore,
    conns: &mut Slab<Conn>,
    client: &mut ClientState,
    replies: &mut ReplyQueue,
    who: (u32, u32),
    (cmd, args): (&'static Command, Args<'_>),
    caller: Caller,
    ran: exec::Ran,
) {
    if ran.start_over {
        // It reached undeclared keys of other shards: again, under the
        // script lock (see `script_lock`).
        let groups = owner_groups(core, cmd, args);
        // Its run there is the one timed (`mesh::lending`).
        core.timing.hand_off();
        super::elsewhere::borrow_and_run(core, conns, client, replies, who, cmd, args, groups);
        return;
    }
    if let Some(block) = ran.block {
        let seq = replies.hold(Merge::Single, 1);
        client.blocked = Some(BlockedOn {
            command_bytes: Some(args.byte_len() as u32),
            ..BlockedOn::waiting(seq)
        });
        let waiter = Waiter::Local {
            index: who.0,
            gen: who.1,
            seq,
            part: 0,
        };
        let ticket = exec::park(core, waiter, caller, args, block);
        core.timing.park(Parked::Blocked(ticket));
    }
}

/// A server command whose reply comes later: gathered from every shard
/// (`mesh::gather`), or WAIT / WAITAOF for replicas or the log.
#[cold]
#[inline(never)]
fn answers_later(
    core: &mut ShardCore,
    client: &mut ClientState,
    replies: &mut ReplyQueue,
    who: (u32, u32),
    gather: Option<crate::mesh::gather::Gather>,
    wait: Option<crate::cmd::replication::WaitReplicas>,
) {
    if let Some(gather) = gather {
        if let Some(seq) = crate::mesh::gather::start(core, client, replies, who, gather) {
            // Recorded once every shard answered (`run_command`).
            core.timing.await_reply(seq);
        }
    }
    if let Some(w) = wait {
        let seq = replies.hold(crate::net::conn::Merge::Single, 1);
        client.blocked = Some(BlockedOn::waiting(seq));
        let wait = crate::replication::serve::WaitFor {
            who,
            seq,
            offset: w.offset,
            link_offsets: w.link_offsets,
            replicas: w.replicas,
            deadline_ms: w.deadline_ms,
            aof: w.aof,
        };
        crate::shard::primary::wait(core, wait);
        core.timing.park(Parked::Waiting);
    }
}
