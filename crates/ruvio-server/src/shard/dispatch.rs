//! From received bytes to replies: parse each command of the read batch, look it up,
//! check arity and authentication once, route it by hash slot, run it.
//!
//! Routing (see DESIGN.md): in per-shard mode a key of another shard gets `MOVED`
//! and keys in different slots get `CROSSSLOT`, as Redis Cluster; in forward mode
//! the command runs where its keys live and the reply comes back through a held
//! slot of the connection's reply queue, multi-key commands split and merged.

use crate::cmd::registry::{registry, Command, Handler};
use crate::cmd::Ctx;
use crate::config::PortMode;
use crate::memory::limit;
use crate::mesh::forward::Tag;
use crate::mesh::lending;
use crate::net::conn::{BlockedOn, ClientState, Conn, Merge, ReplyMode, ReplyQueue};
use crate::net::slab::Slab;
use crate::observability::monitor::{self, Source};
use crate::observability::Parked;
use crate::persistence::durable;
use crate::shard::blocking::Waiter;
use crate::shard::exec::{self, run_engine, Caller};
use crate::shard::prefetch::prefetch_window;
use crate::shard::refusals::{
    acl_denied, acl_refusal, denies_oom, is_script_call, subscribed_mode_refusal, waits_for_pause,
};
use crate::shard::route::{busy_refusal, owner_groups, route, Route};
use crate::shard::ShardCore;
use crate::stats::TIMING_SAMPLE_EVERY;
use ruvio_engine::command::flags::{
    ADMIN, ALLOW_BUSY, BLOCKING, LOADING, NO_AUTH, SKIP_MONITOR, WRITE,
};
use ruvio_engine::command::CommandTree;
use ruvio_engine::CmdError;
use ruvio_resp::{Args, OwnedArgs, Parsed, Protocol, Reply};
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
        return true;
    }
    conn.input_need = 0;
    let acl = &core.shared.acl;
    if conn.client.acl.epoch != acl.epoch() && !crate::cmd::acl::keeps_access(acl, &mut conn.client)
    {
        // Its user was deleted, or lost a channel it listens to, while this
        // connection was out of reach of the change (see `acl`).
        conn.client.closing = true;
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
    while pos < input.len() && !client.closing && client.blocked.is_none() {
        if replies.is_backed_up(sending) {
            // The client is not reading its replies: the rest of this read waits
            // until they are sent (the shard resumes it), as the next read does.
            break;
        }
        if prefetched == 0 {
            prefetched = prefetch_window(core, parser, &input[pos..], client.db);
        }
        match parser.parse(&input[pos..], &core.limits) {
            Ok(Parsed::Complete { args, consumed }) => {
                if core.pause.is_active() && waits_for_pause(core, args) {
                    // Left unread: it runs when the pause ends.
                    client.paused = true;
                    core.pause.park(who);
                    break;
                }
                if client.borrowing_tx.is_some()
                    && super::lending::must_wait_for_transaction(core, client, args)
                {
                    // Left unread: it runs once the transaction answered.
                    let seq = client.borrowing_tx.map_or(0, |(_, seq)| seq);
                    client.blocked = Some(BlockedOn::waiting(seq));
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
                pos += consumed;
                prefetched -= 1;
                let mut run = !args.is_empty();
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
                    execute(core, conns, client, replies, who, args);
                }
                if client.master {
                    // The replication offset counts the stream's bytes once each
                    // command ran (REPLCONF GETACK answers the offset before it).
                    let db = client.db;
                    let bytes = &input[pos - consumed..pos];
                    let state = &core.shared.replication;
                    match client.shard_link {
                        true => state.shard_link_processed(core.id, bytes, db, core.now_ms),
                        false => state.processed(bytes, db, core.now_ms),
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
    if client.master {
        // A replica with a log marks where the stream is (see `stream_mark`).
        crate::shard::replica::mark_stream(core, client);
        crate::shard::primary::wake_stream_hosts(core);
    }
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
    let before = replies.sink().len();
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
pub(crate) fn run_command(
    core: &mut ShardCore,
    conns: &mut Slab<Conn>,
    client: &mut ClientState,
    replies: &mut ReplyQueue,
    who: (u32, u32),
    args: Args<'_>,
) {
    let asking = client.asking;
    run_checked(core, conns, client, replies, who, args);
    // ASKING holds for one command, outside MULTI (Redis's `resetClient`).
    if asking && client.multi.is_none() && !args.get(0).eq_ignore_ascii_case(b"asking") {
        client.asking = false;
    }
}

/// [`run_command`] but for ASKING's lifetime.
fn run_checked(
    core: &mut ShardCore,
    conns: &mut Slab<Conn>,
    client: &mut ClientState,
    replies: &mut ReplyQueue,
    who: (u32, u32),
    args: Args<'_>,
) {
    let Some(cmd) = registry().lookup(args.get(0)) else {
        let e = CmdError::unknown_command(args);
        core.stats.count_error(&e);
        crate::transactions::multi::flag_refused(client);
        return e.write(&mut Reply::new(replies.sink(), client.proto));
    };
    // Redis names the command it looked up, whatever becomes of it (queued,
    // refused); a container's subcommand once resolved, below and in `queue`.
    client.last_cmd = cmd.meta.name;
    client.last_cmd_ms = core.now_ms;
    if is_script_call(cmd) {
        let over = core.cfg.maxmemory != 0 && limit::must_refuse(core);
        ruvio_engine::scripting::set_oom_at_start(over);
    }
    // A container runs as its subcommand, which has statistics of its own; an
    // unknown subcommand fails as the container (after the refusals below: an
    // ACL check passes it, its own error comes later). Resolved once here.
    let resolved = cmd.resolve(args);
    let row_meta = resolved.as_ref().map_or(cmd.meta, |sub| sub.meta);
    let rejected = if !cmd.meta.arity_ok(args.len()) {
        Some(CmdError::WrongArity(cmd.meta.name))
    } else if !client.authenticated && !cmd.meta.has(NO_AUTH) && core.shared.acl.auth_required() {
        Some(CmdError::NoAuth)
    } else if let Some((row, denied)) = acl_refusal(core, client, &resolved, args) {
        // A command the user may run goes on to the checks below.
        Some(acl_denied(core, client, row, args, denied))
    } else if core.loading.refuses() && !row_meta.has(LOADING) {
        Some(CmdError::Line(
            crate::persistence::loading::LOADING_ERROR.to_vec(),
        ))
    } else if core.cfg.maxmemory != 0 && denies_oom(cmd, args) && limit::must_refuse(core) {
        Some(CmdError::Oom)
    } else if client.proto == Protocol::Resp2 && client.subs.active() {
        subscribed_mode_refusal(cmd, args)
    } else if (client.multi.is_some() || cmd.meta.name == "exec") && !cmd.meta.has(ALLOW_BUSY) {
        // Redis refuses a command with -BUSY before queueing it (EXEC aborts,
        // in MULTI or not).
        core.shared.scripts.busy_elsewhere(core.id)
    } else {
        None
    };
    let rejected = match rejected {
        None if core.shared.replication.is_replica() && !client.master => {
            let link_up = core.shared.replication.link_up();
            crate::replication::refusal(link_up, &core.cfg, row_meta, args)
        }
        None if !client.master && super::node_replica::following(core) => {
            super::node_replica::refusal(core, row_meta, args)
        }
        None if core.shared.replication.writes_refused() && !client.master => {
            // Set while any history refuses: this shard's own decides.
            let state = &core.shared.replication;
            state
                .history(core.id, core.cfg.port_mode)
                .writes_refused()
                .then(|| crate::replication::too_few_replicas(row_meta, args))
                .flatten()
        }
        rejected => rejected,
    };
    if let Some(e) = rejected {
        let e = super::multi::refused(core, client, cmd, e);
        core.stats.count_rejected(cmd.stat, &e);
        return e.write(&mut Reply::new(replies.sink(), client.proto));
    }
    if super::multi::queue(core, client, replies, cmd, args) {
        return;
    }
    let (stat, result, awaited) = match resolved {
        Ok(sub) => {
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
                && (core.stats.per_command[sub.stat].calls + 1)
                    .is_multiple_of(TIMING_SAMPLE_EVERY))
            .then(Instant::now);
            let reply_start = replies.sink().len();
            let result = match sub.meta.name {
                // They need the reply queue: run here rather than as server handlers.
                "exec" => super::multi::exec(core, conns, client, replies, who),
                "watch" => super::multi::watch_keys(core, client, replies, who, args),
                "sort" | "sort_ro" if client.acl.restricted => {
                    match crate::acl::check::sort_refusal(
                        &client.acl.user,
                        sub.stat,
                        sub.meta,
                        args,
                    ) {
                        Some(refusal) => Err(CmdError::Line(refusal.as_bytes().to_vec())),
                        None => run_routed(core, conns, client, replies, who, sub, args),
                    }
                }
                _ => run_routed(core, conns, client, replies, who, sub, args),
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
                    let reply_bytes = replies.sink().len().saturating_sub(reply_start);
                    let who =
                        crate::observability::Who::Here(crate::observability::commandlog::Client {
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
        Err(e) => (cmd.stat, Err(e), false),
    };
    // Counted after the call, as Redis' call() does: INFO does not see itself
    // (one that awaits other shards is counted once answered).
    if !awaited {
        core.stats.count_call(stat);
    }
    if let Err(e) = result {
        core.stats.count_failed(stat, &e);
        e.write(&mut Reply::new(replies.sink(), client.proto));
    }
}

/// Run resolved command `cmd` where its keys are: here, on another shard (a held
/// reply slot), or split over several. An error to write comes back.
fn run_routed(
    core: &mut ShardCore,
    conns: &mut Slab<Conn>,
    client: &mut ClientState,
    replies: &mut ReplyQueue,
    who: (u32, u32),
    cmd: &'static Command,
    args: Args<'_>,
) -> Result<(), CmdError> {
    let route = route(core, cmd, args, super::route::InFlight::of(client));
    let route = super::node_replica::route_for_client(core, client, cmd, route);
    if !cmd.meta.has(ALLOW_BUSY) {
        if let Some(busy) = busy_refusal(core, &route) {
            return Err(busy);
        }
    }
    match route {
        Route::Local => run_local(core, conns, client, replies, who, cmd, args),
        Route::Moved(slot, shard) => Err(CmdError::Moved {
            slot,
            host: core
                .topo
                .announced_host(&core.cfg.cluster_announce_ip, &client.local)
                .to_string(),
            port: core
                .cfg
                .client_port(shard, core.topo.nodes[shard].port, client.tls),
        }),
        Route::MovedToNode(slot, target) => Err(super::route::moved_to_node(core, slot, target)),
        Route::Ask(slot) => Err(super::route::ask(core, slot)),
        Route::TryAgain => Err(CmdError::TryAgain),
        Route::SlotNotServed => Err(CmdError::SlotNotServed),
        Route::ClusterDown => Err(CmdError::ClusterDown),
        Route::ClusterDownReadOnly => Err(CmdError::ClusterDownReadOnly),
        Route::CrossSlot => Err(CmdError::CrossSlot),
        Route::Remote(shard) => {
            let seq = replies.hold(Merge::Single, 1);
            // The owner times and logs it (see `observability`).
            core.timing.hand_off();
            let mut tag = Tag {
                whole: true,
                // The owner runs this row without looking it up again.
                row: u16::try_from(cmd.stat + 1).unwrap_or(0),
                ..Tag::for_command(client, who, seq, 0)
            };
            if tag.tracking != 0 {
                tag.tracking |= crate::net::conn::tracking_command::WHOLE;
            }
            core.outbox.request(shard, core.id, tag, args.iter());
            if cmd.meta.has(BLOCKING) {
                // It may park on the owner: run nothing else until it answers.
                client.blocked = Some(BlockedOn {
                    seq,
                    remote: Some(shard),
                    command_bytes: Some(args.byte_len() as u32),
                });
            }
            Ok(())
        }
        // A split command's arguments are checked here: no shard sees them whole.
        Route::Split(_) if !whole_key_steps(cmd, args) => Err(CmdError::WrongArity(cmd.meta.name)),
        Route::Split(groups) => {
            let gate = durable::open_parts_gate(core.wal.as_ref(), replies, cmd.meta.has(WRITE));
            split(core, client, replies, who, cmd, args, groups);
            if let Some(gate) = gate {
                durable::close_gate(&mut core.gated, core.wal.as_ref(), replies, who, gate);
            }
            Ok(())
        }
        Route::Lend(groups) => {
            // It runs once the keys are here, timed then (`mesh::lending`).
            core.timing.hand_off();
            borrow_and_run(core, conns, client, replies, who, cmd, args, groups);
            Ok(())
        }
        // A shard link's stream holds its own shard's FLUSHALL, FLUSHDB and
        // SWAPDB (each primary shard's in place): each acts on its shard only.
        Route::AllShards if client.shard_link => {
            run_local(core, conns, client, replies, who, cmd, args)
        }
        Route::AllShards => {
            let shards = core.topo.nodes.len();
            if cmd.merge == Some(Merge::FirstNonNull) {
                // RANDOMKEY: each shard's key count with its key, weighed at merge.
                let pick = core.engine.next_random() as u32;
                let seq = replies.hold(Merge::WeightedPick { pick }, 2 * shards);
                for shard in 0..shards {
                    let count = [b"DBSIZE".as_slice()].into_iter();
                    send_part(core, client, replies, who, seq, 2 * shard, shard, count);
                    send_part(
                        core,
                        client,
                        replies,
                        who,
                        seq,
                        2 * shard + 1,
                        shard,
                        args.iter(),
                    );
                }
                await_parts(core, replies, seq);
                return Ok(());
            }
            let gate = durable::open_parts_gate(core.wal.as_ref(), replies, cmd.meta.has(WRITE));
            let seq = replies.hold(cmd.merge.unwrap_or(Merge::Single), shards);
            for shard in 0..shards {
                send_part(core, client, replies, who, seq, shard, shard, args.iter());
            }
            await_parts(core, replies, seq);
            if let Some(gate) = gate {
                durable::close_gate(&mut core.gated, core.wal.as_ref(), replies, who, gate);
            }
            Ok(())
        }
        Route::Scan(shard, inner) => {
            // The shard in the cursor continues from its position, every later shard
            // from its start: the merge keeps what a single Redis would return.
            let shards = core.topo.nodes.len();
            let merge = Merge::Scan {
                shard: shard as u16,
            };
            let seq = replies.hold(merge, shards - shard);
            for (part, owner) in (shard..shards).enumerate() {
                let cursor = if part == 0 { inner } else { 0 }.to_string();
                let rewritten =
                    args.iter()
                        .enumerate()
                        .map(|(i, a)| if i == 1 { cursor.as_bytes() } else { a });
                send_part(
                    core,
                    client,
                    replies,
                    who,
                    seq,
                    part,
                    owner,
                    rewritten.collect::<Vec<_>>().into_iter(),
                );
            }
            await_parts(core, replies, seq);
            Ok(())
        }
    }
}

/// A command whose parts other shards answer (split, every shard, SCAN) is
/// recorded once they all did, with their times and its whole reply (see
/// `observability::Awaited`), when anything records commands.
fn await_parts(core: &mut ShardCore, replies: &ReplyQueue, seq: u64) {
    if core.timing.active() && !replies.is_released(seq) {
        core.timing.await_reply(seq);
    }
}

/// Run a command on this shard with the client's context. A server handler's
/// error comes back to be written once by [`execute`]; an engine handler's is
/// written and counted by [`run_engine`].
fn run_local(
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
            let forward_shards = core.topo.mode == PortMode::Forward && core.topo.nodes.len() > 1;
            let script = crate::mesh::script_lock::is_script(cmd.meta);
            if forward_shards && script {
                crate::mesh::script_lock::begin_run(crate::mesh::script_lock::Run {
                    // Not inside EXEC: borrowing would leave the queue half run
                    // while it waits (the call gets Redis Cluster's error then).
                    may_start_over: !client.in_exec,
                    may_lock_now: !core.logs(),
                    ..Default::default()
                });
            }
            let ran = {
                // Lent to the hook that answers the other clients while a script is busy.
                let _lent = script.then(|| crate::net::lent::lend(conns));
                run_engine(core, cmd, caller, args, replies.sink())
            };
            if let Some(gate) = gate {
                durable::close_gate(&mut core.gated, core.wal.as_ref(), replies, who, gate);
            }
            if ran.start_over {
                // It reached undeclared keys of other shards: again, under the
                // script lock (see `script_lock`).
                let groups = owner_groups(core, cmd, args);
                // Its run there is the one timed (`mesh::lending`).
                core.timing.hand_off();
                borrow_and_run(core, conns, client, replies, who, cmd, args, groups);
                return Ok(());
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
            let gate = (cmd.meta.has(WRITE) && !cmd.meta.keys.is_none())
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
            let wait = ctx.wait;
            if let Some(gather) = ctx.gather {
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
                    replicas: w.replicas,
                    deadline_ms: w.deadline_ms,
                    aof: w.aof,
                };
                crate::shard::primary::wait(core, wait);
                core.timing.park(Parked::Waiting);
            }
            if let Some(gate) = gate {
                durable::close_gate(&mut core.gated, core.wal.as_ref(), replies, who, gate);
            }
            result
        }
        None => unreachable!("{} resolves to a subcommand", cmd.meta.name),
    }
}

/// Send part `part` of held slot `seq` to `shard`, or run it here when `shard` is this one.
/// True when it ran here and its reply is in.
#[allow(clippy::too_many_arguments)]
fn send_part<'a>(
    core: &mut ShardCore,
    client: &ClientState,
    replies: &mut ReplyQueue,
    who: (u32, u32),
    seq: u64,
    part: usize,
    shard: usize,
    args: impl ExactSizeIterator<Item = &'a [u8]>,
) -> bool {
    let tag = Tag::for_command(client, who, seq, part as u16);
    if shard != core.id {
        core.outbox.request(shard, core.id, tag, args);
        return false;
    }
    let owned: OwnedArgs = args.collect();
    let mut out = Vec::new();
    let Some(cmd) = registry().lookup(owned.args().get(0)) else {
        replies.fill(seq, part, out);
        return true;
    };
    let caller = Caller {
        may_block: false,
        ..Caller::of(client, core.id)
    };
    match run_engine(core, cmd, caller, owned.args(), &mut out).block {
        // A key of this part is lent to another shard: the part waits for it.
        Some(block) => {
            let waiter = Waiter::Local {
                index: who.0,
                gen: who.1,
                seq,
                part: part as u16,
            };
            exec::park(core, waiter, caller, owned.args(), block);
            false
        }
        None => {
            replies.fill(seq, part, out);
            true
        }
    }
}

/// True when the arguments after the first key come in whole key steps (MSET's
/// key/value pairs), as the command's own arity check would demand.
fn whole_key_steps(cmd: &Command, args: Args<'_>) -> bool {
    let (first, _, step) = cmd.meta.keys.legacy_range();
    let (first, step) = (first.max(1) as usize, step.max(1) as usize);
    args.len() >= first && (args.len() - first).is_multiple_of(step)
}

/// Split a multi-key command by shard: each shard gets its keys (with the arguments
/// that follow each key up to the key step, e.g. MSET's values).
fn split(
    core: &mut ShardCore,
    client: &ClientState,
    replies: &mut ReplyQueue,
    who: (u32, u32),
    cmd: &Command,
    args: Args<'_>,
    groups: Vec<(usize, Vec<usize>)>,
) {
    let merge = cmd.merge.unwrap_or(Merge::Single);
    // A write while some client tracks: its parts' invalidations are gathered
    // here and delivered in key order (see `tracking`).
    let tracked = cmd.meta.has(WRITE) && core.shared.tracking.anyone_tracks();
    let order: Vec<u16> = if merge == Merge::Scatter || tracked {
        let mut order = Vec::new();
        for pos in cmd.meta.keys.positions(args) {
            let owner = core.topo.key_owner(args.get(pos));
            order.push(groups.iter().position(|(s, _)| *s == owner).unwrap_or(0) as u16);
        }
        order
    } else {
        Vec::new()
    };
    let seq = replies.next_seq();
    if tracked {
        core.tracking
            .split_started(who, seq, groups.len(), order.clone());
    }
    let order = if merge == Merge::Scatter {
        order
    } else {
        Vec::new()
    };
    let held = replies.hold_ordered(merge, groups.len(), order);
    debug_assert_eq!(held, seq);
    let step = cmd.meta.keys.legacy_range().2.max(1) as usize;
    for (part, (shard, positions)) in groups.iter().enumerate() {
        let mut sub: Vec<&[u8]> = vec![args.get(0)];
        for &p in positions {
            sub.extend((p..(p + step).min(args.len())).map(|i| args.get(i)));
        }
        let keys: Vec<&[u8]> = match tracked && *shard == core.id {
            true => positions.iter().map(|&p| args.get(p)).collect(),
            false => Vec::new(),
        };
        let since = core.tracking.owed_len();
        let here = send_part(
            core,
            client,
            replies,
            who,
            seq,
            part,
            *shard,
            sub.into_iter(),
        );
        if !tracked || *shard != core.id {
            continue;
        }
        match here {
            true => {
                let owed = core
                    .tracking
                    .take_part_owed(since, core.id, &keys, &core.outbox);
                core.tracking
                    .split_owed(who, seq, part as u16, owed.into_iter());
                core.tracking.split_answered_here(who, seq);
            }
            false => core.tracking.split_abandoned(who, seq),
        }
    }
    await_parts(core, replies, seq);
}

/// Run `cmd` on keys borrowed from their owners `groups` (see [`lending`]); like a
/// blocked client, the connection runs nothing after it until it is answered.
#[allow(clippy::too_many_arguments)]
fn borrow_and_run(
    core: &mut ShardCore,
    conns: &mut Slab<Conn>,
    client: &mut ClientState,
    replies: &mut ReplyQueue,
    who: (u32, u32),
    cmd: &'static Command,
    args: Args<'_>,
    groups: Vec<(usize, Vec<usize>)>,
) {
    let seq = replies.hold(Merge::Single, 1);
    client.blocked = Some(BlockedOn::waiting(seq));
    let at_once = super::lending::start(
        core,
        conns,
        who,
        seq,
        Caller::of(client, core.id),
        cmd,
        args,
        groups,
    );
    // Run while its connection was out of the slab, its writer's slot waits
    // for its invalidations (see `tracking`).
    if lending::keep_answered_at_once(&mut core.lending) {
        replies.keep(seq);
    }
    if let Some(reply) = at_once {
        replies.fill(seq, 0, reply);
        client.blocked = None;
    }
}
