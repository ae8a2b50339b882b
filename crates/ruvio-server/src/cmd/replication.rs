//! The replication commands: REPLICAOF (and its old name SLAVEOF), ROLE and
//! REPLCONF, with Redis 7.0's arity, flags and replies. They read and change
//! `replication::State`; shard 0 acts on it (see `replication`).

use super::{Ctx, Server, ServerCommand, ServerResult, SharedReads};
use crate::mesh::gather::{Gather, Then};
use crate::replication::primary::ReplicaInfo;
use ruvio_engine::command::{command, flags::*};
use ruvio_engine::{CmdError, KeySpec};
use ruvio_resp::{Args, Reply};
use std::sync::atomic::Ordering::Relaxed;

/// The replication family's table.
#[rustfmt::skip]
pub const COMMANDS: &[ServerCommand] = &[
    command!("replicaof", 3, ADMIN | NOSCRIPT | STALE | NO_ASYNC_LOADING, KeySpec::NONE,
        ["admin", "slow", "dangerous"], "server", "5.0.0",
        "Make the server a replica of another instance, or promote it as master.", "O(1)", replicaof),
    command!("slaveof", 3, ADMIN | NOSCRIPT | STALE | NO_ASYNC_LOADING, KeySpec::NONE,
        ["admin", "slow", "dangerous"], "server", "1.0.0",
        "Make the server a replica of another instance, or promote it as master.", "O(1)", replicaof),
    command!("role", 1, NOSCRIPT | LOADING | STALE | FAST, KeySpec::NONE,
        ["admin", "fast", "dangerous"], "server", "2.8.12",
        "Return the role of the instance in the context of replication", "O(1)", role),
    command!("replconf", -1, ADMIN | NOSCRIPT | LOADING | STALE | ALLOW_BUSY, KeySpec::NONE,
        ["admin", "slow", "dangerous"], "server", "3.0.0",
        "An internal command for configuring the replication stream", "O(1)", replconf),
    command!("psync", -3, ADMIN | NOSCRIPT | NO_ASYNC_LOADING | NO_MULTI, KeySpec::NONE,
        ["admin", "slow", "dangerous"], "server", "2.8.0",
        "Internal command used for replication", "", sync),
    command!("sync", 1, ADMIN | NOSCRIPT | NO_ASYNC_LOADING | NO_MULTI, KeySpec::NONE,
        ["admin", "slow", "dangerous"], "server", "1.0.0",
        "Internal command used for replication", "", sync),
    command!("failover", -1, ADMIN | NOSCRIPT | STALE, KeySpec::NONE,
        ["admin", "slow", "dangerous"], "server", "6.2.0",
        "Start a coordinated failover between this server and one of its replicas.", "O(1)", failover),
    command!("waitaof", 4, NOSCRIPT, KeySpec::NONE,
        ["slow", "connection"], "generic", "7.2.0",
        "Blocks until all of the preceding write commands sent by the connection are written to the append-only file of the master and/or replicas.", "O(1)", waitaof),
    command!("wait", 3, NOSCRIPT, KeySpec::NONE,
        ["slow", "connection"], "generic", "3.0.0",
        "Wait for the synchronous replication of all the write commands sent in the context of the current connection", "O(1)", wait),
];

/// A WAIT that must wait: the dispatcher holds the client's reply until
/// `replicas` replicas acknowledged `offset`, or `deadline_ms` (0: never).
#[derive(Clone, Debug)]
pub struct WaitReplicas {
    pub offset: u64,
    /// Each shard's own history's offset when WAIT ran (what a replica on
    /// shard links must acknowledge on each link; empty: none counts).
    pub link_offsets: Vec<u64>,
    pub replicas: usize,
    pub deadline_ms: u64,
    /// WAITAOF: the logs to wait for, and its reply's shape.
    pub aof: Option<crate::replication::serve::AofWait>,
}

/// `PSYNC replicationid offset` and `SYNC`: the connection becomes a replica's.
/// A partial resync (`+CONTINUE`) when the ID is this server's history and the
/// backlog holds the offset; otherwise a full sync, sent once every shard cut
/// (`replication::primary`): `+FULLRESYNC <replid> <offset>`, then the RDB. In
/// per-shard mode the history is the shard node's own (`replication::history`):
/// its replid, its offset, its backlog, and a full sync of its keys only.
fn sync<S: Server>(ctx: &mut Ctx<'_, S>, args: Args<'_>, reply: &mut Reply<'_>) -> ServerResult {
    if ctx.client.replica.attached {
        return Ok(());
    }
    let core = &*ctx.core;
    let state = core.shared().replication();
    let take_over = args.len() > 3 && args.get(0).eq_ignore_ascii_case(b"psync");
    if take_over && args.get(3).eq_ignore_ascii_case(b"failover") {
        // The old primary's FAILOVER: this replica of it takes over.
        crate::serverlog::log(
            crate::serverlog::Level::Warning,
            &format!(
                "Failover request received for replid {}.",
                String::from_utf8_lossy(args.get(1))
            ),
        );
        if !state.follows_a_primary() {
            return Err(CmdError::Line(
                b"ERR PSYNC FAILOVER can't be sent to a master.".to_vec(),
            ));
        }
        // A link of the old primary (its hand-over to a replica on shard
        // links) names the shard's own history, which this shard's follows.
        let replid = match ctx.client.replica.shard_link {
            true => state.node_history(core.shard_id()).ids().replid,
            false => state.ids().replid,
        };
        if args.get(1) != replid.as_bytes() {
            return Err(CmdError::Line(
                b"ERR PSYNC FAILOVER replid must match my replid.".to_vec(),
            ));
        }
        state.promote();
        crate::serverlog::log(
            crate::serverlog::Level::Notice,
            &format!(
                "MASTER MODE enabled (failover request from '{}')",
                ctx.client.peer
            ),
        );
    }
    if state.ids().failover.phase != crate::replication::state::FailoverPhase::None {
        return Err(CmdError::Line(
            b"NOMASTERLINK Can't SYNC while failing over".to_vec(),
        ));
    }
    // A replica on shard links serves a single stream from the server's
    // own history, made of what its shards apply (`State::records_applied`).
    let shard_link = ctx.client.replica.shard_link;
    let (shard, port_mode) = (core.shard_id(), core.settings().port_mode);
    let history = state.followed(shard, port_mode, shard_link);
    // A cluster replica node (per-shard mode) relays its link's history.
    let relays = history.is_following();
    let link_up = match (shard_link, relays) {
        // A link of a replica of this replica follows this shard's link.
        (true, _) => state.shard_links.book(core.shard_id()).up(),
        (false, true) => history.following().up,
        (false, false) => state.link_up(),
    };
    if (state.follows_a_primary() || relays) && !link_up {
        // A replica serves replicas of its own only while its stream runs
        // (Redis's syncCommand).
        return Err(CmdError::Line(
            b"NOMASTERLINK Can't SYNC while not connected with my master".to_vec(),
        ));
    }
    let primary = history.primary;
    let psync = args.get(0).eq_ignore_ascii_case(b"psync");
    let offset = history.offset();
    let mut continue_from = None;
    if psync {
        let ids = history.ids();
        let (replid, next) = (args.get(1), super::parse_i64(args.get(2)));
        let known = replid == ids.replid.as_bytes()
            || (replid == ids.replid2.as_bytes() && next.is_some_and(|n| n <= ids.second_offset));
        if let Some(next) = next.filter(|&n| known && n > 0) {
            if primary.can_continue(next as u64, offset) {
                continue_from = Some(next as u64 - 1);
            }
        }
    }
    let peer = ctx.client.replica.clone();
    ctx.client.replica.attached = true;
    // Its `replica-announce-ip` when it sent one, as Redis's `slave_addr`.
    let ip = match &peer.announced_ip {
        Some(announced) => announced.to_string(),
        None => ctx
            .client
            .peer
            .rsplit_once(':')
            .map_or(String::new(), |(ip, _)| ip.to_string()),
    };
    let size = core
        .settings()
        .param("repl-backlog-size")
        .parse()
        .unwrap_or(1 << 20);
    if !primary.active() {
        // The first replica of a server without a backlog: a new history
        // (a replica node's is its link's, whatever its backlog).
        if !relays {
            history.new_history();
        }
        primary.create_backlog(offset, size);
    }
    let server = &state.primary;
    if shard_link && !state.follows_a_primary() && !server.active() {
        // A replica on links shows the server's offset (the marks its
        // shards' histories carry name it), so the server's history runs
        // while links do.
        state.new_history();
        server.create_backlog(state.offset(), size);
    }
    let counter = match (continue_from, psync && args.get(1) != b"?") {
        (Some(_), _) => &primary.sync_partial_ok,
        (None, true) => {
            primary.sync_partial_err.fetch_add(1, Relaxed);
            &primary.sync_full
        }
        (None, false) => &primary.sync_full,
    };
    counter.fetch_add(1, Relaxed);
    let phase = match continue_from {
        Some(sent) => {
            let line = match peer.capa_psync2 {
                true => format!("+CONTINUE {}\r\n", history.ids().replid),
                false => "+CONTINUE\r\n".to_string(),
            };
            reply.out.extend_from_slice(line.as_bytes());
            crate::serverlog::log(
                crate::serverlog::Level::Notice,
                &format!(
                    "Partial resynchronization request from {} accepted",
                    ctx.client.peer
                ),
            );
            crate::replication::serve::Phase::Online {
                sent,
                after_ack: None,
            }
        }
        None => crate::replication::serve::Phase::Cut(None),
    };
    let online = continue_from.is_some();
    if let Some(sent) = continue_from {
        primary.pin(ctx.client.id, sent);
    }
    primary.attach(ReplicaInfo {
        client_id: ctx.client.id,
        host: shard,
        ip,
        port: peer.listening_port,
        state: if online { "online" } else { "wait_bgsave" },
        ack_offset: continue_from.unwrap_or(0),
        aof_offset: 0,
        last_ack_ms: core.now_ms(),
        acks: 0,
    });
    let generation = history.replicas_generation();
    ctx.core
        .replication_part()
        .hosted
        .push(crate::replication::serve::Hosted {
            who: ctx.who,
            client_id: ctx.client.id,
            eof: peer.capa_eof && psync,
            old_sync: !psync,
            shard_link: peer.shard_link,
            generation,
            phase,
        });
    Ok(())
}

/// `REPLCONF ruvio-shard <i>/<n>` (Ruvio's own): a Ruvio replica of `n` shards
/// asks that this connection be its link for shard `i`, which then follows
/// shard i's own history (its records only, a full sync of its keys only). Only
/// a forward-mode primary of `n` shards takes it, and only on shard `i`: a
/// connection lands on whichever shard SO_REUSEPORT picked, so the replica
/// connects again until one lands there (n tries on average, at link setup
/// only), and the stream never passes through another shard. Any error (a
/// redis-server's "Unrecognized REPLCONF option" included) means the single
/// stream of the whole server.
fn shard_link<S: Server>(ctx: &mut Ctx<'_, S>, value: &[u8]) -> Result<(), CmdError> {
    let core = &*ctx.core;
    let mut halves = value.splitn(2, |&b| b == b'/');
    let shard = halves.next().and_then(super::parse_i64);
    let shards = halves.next().and_then(super::parse_i64);
    // A replica on the single stream has no shard histories (a chained
    // Ruvio replica takes the single stream); one on shard links serves
    // each shard's from its link's.
    let cfg = core.settings();
    let state = core.shared().replication();
    let ours = cfg.port_mode == crate::config::PortMode::Forward
        && (!state.follows_a_primary() || state.shard_links.following(state.ids().epoch))
        && shards == Some(cfg.shards as i64)
        && shard.is_some_and(|i| (0..cfg.shards as i64).contains(&i));
    if !ours {
        return Err(CmdError::Line(
            format!(
                "ERR ruvio-shard needs a forward-mode primary of {} shards",
                cfg.shards
            )
            .into_bytes(),
        ));
    }
    if shard != Some(core.shard_id() as i64) {
        return Err(CmdError::Line(
            format!(
                "ERR ruvio-shard: this connection is on shard {}",
                core.shard_id()
            )
            .into_bytes(),
        ));
    }
    ctx.client.replica.shard_link = true;
    Ok(())
}

/// FAILOVER to a replica on shard links from a server that would not follow
/// it on links (Ruvio's own: Redis has no such replica; the hand-over on the
/// single stream would be refused after writes paused).
const NO_LINKS_HERE: &str =
    "ERR FAILOVER to a replica on shard links needs replica-shard-links yes here";

/// `FAILOVER [TO host port [FORCE]] [ABORT] [TIMEOUT ms]`: writes pause on every
/// shard, and once a replica (the one named) acknowledged every byte, this
/// server follows it and asks it to take over (`PSYNC ... FAILOVER`); shard 0's
/// tick drives it (`shard::primary`). Redis 7.0's checks, order and errors.
fn failover<S: Server>(
    ctx: &mut Ctx<'_, S>,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> ServerResult {
    use crate::replication::state::{Failover, FailoverPhase};
    let line = |text: &str| CmdError::Line(text.as_bytes().to_vec());
    if ctx.core.settings().cluster_mode() {
        return Err(line(
            "ERR FAILOVER not allowed in cluster mode. Use CLUSTER FAILOVER command instead.",
        ));
    }
    let state = ctx.core.shared().replication();
    if args.len() == 2 && args.get(1).eq_ignore_ascii_case(b"abort") {
        if state.ids().failover.phase == FailoverPhase::None {
            return Err(line("ERR No failover in progress."));
        }
        state.end_failover(Some("Failover manually aborted"));
        reply.ok();
        return Ok(());
    }
    let (mut timeout_ms, mut force, mut target) = (0i64, false, None);
    let mut i = 1;
    while i < args.len() {
        let word = args.get(i);
        if word.eq_ignore_ascii_case(b"timeout") && i + 1 < args.len() && timeout_ms == 0 {
            timeout_ms = super::parse_i64(args.get(i + 1)).ok_or(CmdError::NotInteger)?;
            if timeout_ms <= 0 {
                return Err(line("ERR FAILOVER timeout must be greater than 0"));
            }
            i += 2;
        } else if word.eq_ignore_ascii_case(b"to") && i + 2 < args.len() && target.is_none() {
            let port = super::parse_i64(args.get(i + 2)).ok_or(CmdError::NotInteger)?;
            target = Some((String::from_utf8_lossy(args.get(i + 1)).into_owned(), port));
            i += 3;
        } else if word.eq_ignore_ascii_case(b"force") && !force {
            force = true;
            i += 1;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    if state.ids().failover.phase != FailoverPhase::None {
        return Err(line("ERR FAILOVER already in progress."));
    }
    if state.follows_a_primary() {
        return Err(line("ERR FAILOVER is not valid when server is a replica."));
    }
    // A replica of the single stream continues the server's history; one
    // on shard links continues each shard's (`State::failover_to`).
    // One on links takes over link by link, which this server then
    // follows only if it takes links itself.
    let replicas = state.primary.replicas();
    let linked = crate::replication::link_replicas::linked_replicas(state);
    let takes_links = ctx.core.settings().takes_shard_links();
    if replicas.is_empty() && linked.is_empty() {
        return Err(line("ERR FAILOVER requires connected replicas."));
    }
    if force && (timeout_ms == 0 || target.is_none()) {
        return Err(line(
            "ERR FAILOVER with force option requires both a timeout and target HOST and IP.",
        ));
    }
    let mut on_links_target = false;
    let target = match target {
        Some((host, port)) => {
            let named =
                |r: &ReplicaInfo| r.ip.eq_ignore_ascii_case(&host) && i64::from(r.port) == port;
            let single = replicas.iter().find(|r| named(r)).cloned();
            let on_links = linked.iter().map(|r| r.as_info()).find(|r| named(r));
            on_links_target = single.is_none() && on_links.is_some();
            if on_links_target && !takes_links {
                return Err(line(NO_LINKS_HERE));
            }
            let Some(replica) = single.or(on_links) else {
                return Err(line("ERR FAILOVER target HOST and PORT is not a replica."));
            };
            if replica.state != "online" {
                return Err(line("ERR FAILOVER target replica is not online."));
            }
            crate::serverlog::log(
                crate::serverlog::Level::Notice,
                &format!("FAILOVER requested to {host}:{port}."),
            );
            Some((host, replica.port))
        }
        None if replicas.is_empty() && !takes_links => return Err(line(NO_LINKS_HERE)),
        None => {
            crate::serverlog::log(
                crate::serverlog::Level::Notice,
                "FAILOVER requested to any replica.",
            );
            None
        }
    };
    state.start_failover(Failover {
        phase: FailoverPhase::WaitForSync,
        target,
        end_ms: match timeout_ms {
            0 => 0,
            ms => ctx.core.now_ms().saturating_add(ms as u64),
        },
        force,
        on_links: on_links_target,
    });
    // Writes wait on every shard until the failover ends (CLIENT PAUSE WRITE).
    ctx.core.pause_everywhere(u64::MAX, false);
    super::ok_everywhere(ctx, reply);
    Ok(())
}

/// `WAIT numreplicas timeout`: the number of replicas that acknowledged this
/// client's writes, once `numreplicas` did or the timeout (ms, 0: none) passed.
fn wait<S: Server>(ctx: &mut Ctx<'_, S>, args: Args<'_>, reply: &mut Reply<'_>) -> ServerResult {
    if follows_a_master(ctx.core) {
        return Err(CmdError::Line(
            b"ERR WAIT cannot be used with replica instances. Please also note that since Redis 4.0 if a replica is configured to be writable (which is not the default) writes to replicas are just local and are not propagated.".to_vec(),
        ));
    }
    let replicas = super::parse_i64(args.get(1)).ok_or(CmdError::NotInteger)?;
    let timeout = super::parse_i64(args.get(2)).ok_or(CmdError::TimeoutNotInteger)?;
    if timeout < 0 {
        return Err(CmdError::Line(b"ERR timeout is negative".to_vec()));
    }
    let (offset, link_offsets) = writes_offset(ctx);
    let history = history_of(ctx.core);
    let acked = history.acked_at_least(offset, &link_offsets);
    if ctx.client.in_exec || acked as i64 >= replicas {
        reply.int(acked as i64);
        return Ok(());
    }
    ctx.wait = Some(WaitReplicas {
        offset,
        link_offsets,
        replicas: replicas as usize,
        deadline_ms: deadline(ctx.core.now_ms(), timeout),
        aof: None,
    });
    Ok(())
}

/// The offset WAIT waits for, Redis's `c->woff`: where the client's writes
/// reached. The first WAIT after a write reads it, after this shard's records
/// went to the backlog (its forwarded writes are there already: dispatch runs
/// WAIT once their replies are in), and later ones keep it until the next
/// write, so another client's writes made since are not waited for. Before its
/// first write, 0: every replica counts, as on Redis. A replica on shard links
/// counts once each link acknowledged its own shard's history as it stood.
fn writes_offset<S: Server>(ctx: &mut Ctx<'_, S>) -> (u64, Vec<u64>) {
    if ctx.client.wrote {
        let offset = offset_after_flush(ctx);
        let links = history_of(ctx.core).link_offsets();
        ctx.client.wrote = false;
        ctx.client.woff = Some((offset, links));
    }
    match &ctx.client.woff {
        Some((offset, links)) => (*offset, links.clone()),
        None => (0, vec![0; history_of(ctx.core).link_offsets().len()]),
    }
}

fn deadline(now_ms: u64, timeout_ms: i64) -> u64 {
    match timeout_ms {
        0 => 0,
        ms => now_ms.saturating_add(ms as u64),
    }
}

/// The replication offset after this shard's pending records went to the
/// backlogs (the offset a WAIT or WAITAOF of this client waits for). Through
/// the loop's own path: a shard link's history takes them too, and the
/// server's passes its barriers (a cut holding this shard's records keeps
/// them, as it does the loop's).
fn offset_after_flush<S: Server>(ctx: &mut Ctx<'_, S>) -> u64 {
    ctx.core.flush_replication_feed();
    history_of(ctx.core).offset()
}

/// This server follows a primary (REPLICAOF), or this shard is a cluster
/// replica node (per-shard mode): Redis's `server.masterhost` set, which
/// WAIT and WAITAOF refuse (a replica node relays its master's GETACKs and
/// sends none of its own).
fn follows_a_master<S: Server>(core: &S) -> bool {
    core.shared().replication().is_replica() || history_of(core).is_following()
}

/// The history this shard's clients' writes are part of (the server's, or in
/// per-shard mode the shard node's own).
fn history_of<S: Server>(core: &S) -> crate::replication::history::History<'_> {
    let state = core.shared().replication();
    state.history(core.shard_id(), core.settings().port_mode)
}

/// `WAITAOF numlocal numreplicas timeout` (Redis 7.2): `[1 if every shard's log
/// synced the writes made before it, replicas whose own log did (FACK)]`, once
/// both are reached or the timeout (ms, 0: none) passed.
fn waitaof<S: Server>(ctx: &mut Ctx<'_, S>, args: Args<'_>, reply: &mut Reply<'_>) -> ServerResult {
    let numlocal = super::parse_i64(args.get(1)).ok_or(CmdError::NotInteger)?;
    if !(0..=1).contains(&numlocal) {
        return Err(CmdError::Line(
            b"ERR value is out of range, value must between 0 and 1".to_vec(),
        ));
    }
    let replicas = super::parse_i64(args.get(2)).ok_or(CmdError::NotInteger)?;
    if replicas < 0 {
        return Err(CmdError::Line(
            b"ERR value is out of range, must be positive".to_vec(),
        ));
    }
    let timeout = super::parse_i64(args.get(3)).ok_or(CmdError::TimeoutNotInteger)?;
    if timeout < 0 {
        return Err(CmdError::Line(b"ERR timeout is negative".to_vec()));
    }
    if follows_a_master(ctx.core) {
        return Err(CmdError::Line(
            b"ERR WAITAOF cannot be used with replica instances. Please also note that writes to replicas are just local and are not propagated.".to_vec(),
        ));
    }
    if numlocal == 1 && !ctx.core.has_log() {
        return Err(CmdError::Line(
            b"ERR WAITAOF cannot be used when numlocal is set but appendonly is disabled.".to_vec(),
        ));
    }
    let offset = offset_after_flush(ctx);
    let core = &*ctx.core;
    // The log bytes every shard had appended: the writes this client saw
    // answered are among them (a shard publishes before its replies leave).
    let (id, gauges) = (core.shard_id(), core.shared().shards());
    let log = core.log_bytes();
    let targets: Vec<(usize, u64)> = match log {
        None => Vec::new(),
        Some(own) => {
            let shards = crate::messaging::pubsub::visible_shards_of(
                core.settings().port_mode,
                id,
                gauges.len(),
            );
            shards
                .map(|shard| match shard == id {
                    true => (shard, own.appended),
                    false => (shard, gauges[shard].log_appended_bytes.load(Relaxed)),
                })
                .collect()
        }
    };
    let own = log.map(|own| own.synced);
    let synced = crate::replication::serve::log_synced(&targets, id, own, gauges);
    let link_offsets = history_of(core).link_offsets();
    let acked = history_of(core).fsynced_at_least(offset, &link_offsets);
    let done = acked as i64 >= replicas && (synced || numlocal == 0);
    if ctx.client.in_exec || done {
        reply.array(2);
        reply.int(i64::from(synced));
        reply.int(acked as i64);
        return Ok(());
    }
    ctx.wait = Some(WaitReplicas {
        offset,
        link_offsets,
        replicas: replicas as usize,
        deadline_ms: deadline(ctx.core.now_ms(), timeout),
        aof: Some(crate::replication::serve::AofWait {
            local: numlocal == 1,
            targets,
        }),
    });
    Ok(())
}

/// `REPLICAOF host port` / `REPLICAOF NO ONE` (and SLAVEOF): follow a primary, or
/// become one keeping the data. Not with a log yet: Ruvio's own error says so. Per-shard mode is a
/// cluster (`cluster_enabled:1`), where Redis refuses it.
fn replicaof<S: Server>(
    ctx: &mut Ctx<'_, S>,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> ServerResult {
    if ctx.core.settings().cluster_mode() {
        return Err(CmdError::Line(
            b"ERR REPLICAOF not allowed in cluster mode.".to_vec(),
        ));
    }
    let state = ctx.core.shared().replication();
    let (host, port) = (args.get(1), args.get(2));
    if host.eq_ignore_ascii_case(b"no") && port.eq_ignore_ascii_case(b"one") {
        if !state.promote() {
            reply.ok();
            return Ok(());
        }
        crate::serverlog::log(
            crate::serverlog::Level::Notice,
            "MASTER MODE enabled (user request)",
        );
        // `+OK` once every shard records its writes (`State::promote`).
        ctx.gather = Some(Gather::AfterAll(Then::Promoted));
        return Ok(());
    }
    let port = super::parse_i64(port)
        .and_then(|p| u16::try_from(p).ok())
        .ok_or_else(|| CmdError::Line(b"ERR Invalid master port".to_vec()))?;
    let host = String::from_utf8_lossy(host).into_owned();
    if !state.follow(&host, port) {
        reply.simple("OK Already connected to specified master");
        return Ok(());
    }
    crate::serverlog::log(
        crate::serverlog::Level::Notice,
        &format!("REPLICAOF {host}:{port} enabled (user request)"),
    );
    reply.ok();
    Ok(())
}

/// `ROLE`
fn role<S: Server>(ctx: &mut Ctx<'_, S>, _args: Args<'_>, reply: &mut Reply<'_>) -> ServerResult {
    crate::replication::role(history_of(ctx.core), reply);
    Ok(())
}

/// `REPLCONF option value [option value ...]`: from the primary's stream, GETACK
/// is answered with `REPLCONF ACK <offset>` (the one reply the master client
/// gets, written as a push so its silenced replies do not drop it). From a
/// replica of this server: `listening-port` and `capa` are kept for PSYNC and
/// INFO, `ACK <offset>` is noted (no reply), the others answer `+OK`.
fn replconf<S: Server>(
    ctx: &mut Ctx<'_, S>,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> ServerResult {
    if args.len().is_multiple_of(2) {
        return Err(CmdError::Syntax);
    }
    let mut i = 1;
    while i < args.len() {
        let (option, value) = (args.get(i), args.get(i + 1));
        if option.eq_ignore_ascii_case(b"ack") {
            // From a replica of this server: its offset (WAIT, INFO's lag).
            if let (true, Some(offset)) = (ctx.client.replica.attached, super::parse_i64(value)) {
                // Redis 7.2 replicas add `FACK <offset>`: what their own log synced.
                let fack = (args.len() > i + 3 && args.get(i + 2).eq_ignore_ascii_case(b"fack"))
                    .then(|| super::parse_i64(args.get(i + 3)))
                    .flatten()
                    .map(|f| f.max(0) as u64);
                let core = &*ctx.core;
                let link = ctx.client.replica.shard_link;
                let state = core.shared().replication();
                let history = state.followed(core.shard_id(), core.settings().port_mode, link);
                let offset = offset.max(0) as u64;
                history
                    .primary
                    .acked(ctx.client.id, offset, fack, core.now_ms());
            }
            return Ok(());
        }
        if option.eq_ignore_ascii_case(b"ip-address") {
            // Redis's NET_HOST_STR_LEN bounds it.
            if value.len() >= 256 {
                return Err(CmdError::Line(
                    format!(
                        "ERR REPLCONF ip-address provided by replica instance is too long: {} bytes",
                        value.len()
                    )
                    .into_bytes(),
                ));
            }
            let ip = String::from_utf8_lossy(value).into();
            ctx.client.replica.announced_ip = Some(ip);
            i += 2;
            continue;
        }
        if option.eq_ignore_ascii_case(b"listening-port") {
            let port = super::parse_i64(value).and_then(|p| u16::try_from(p).ok());
            let port = port.ok_or(CmdError::NotInteger)?;
            ctx.client.replica.listening_port = port;
            i += 2;
            continue;
        }
        if option.eq_ignore_ascii_case(b"capa") {
            if value.eq_ignore_ascii_case(b"eof") {
                ctx.client.replica.capa_eof = true;
            } else if value.eq_ignore_ascii_case(b"psync2") {
                ctx.client.replica.capa_psync2 = true;
            }
            i += 2;
            continue;
        }
        if option.eq_ignore_ascii_case(b"ruvio-shard") {
            shard_link(ctx, value)?;
            i += 2;
            continue;
        }
        if option.eq_ignore_ascii_case(b"getack") {
            if ctx.client.master {
                let logs = ctx.core.settings().durability.logs();
                let state = ctx.core.shared().replication();
                let ack = match ctx.client.shard_link {
                    true => state.link_ack(ctx.core.shard_id(), logs),
                    false => state.ack(logs),
                };
                ctx.client.pushes.extend_from_slice(&ack);
            }
            return Ok(());
        }
        if !option.eq_ignore_ascii_case(b"rdb-only") {
            // Printed with `%s` by `addReplyErrorFormat`: up to a NUL, CR and LF
            // trimmed at the end and spaces elsewhere, the bytes as they are.
            return Err(CmdError::quoted(
                "ERR Unrecognized REPLCONF option: ",
                ruvio_engine::error::until_nul(option),
                "",
            ));
        }
        i += 2;
    }
    reply.ok();
    Ok(())
}
