//! Server-wide answers in forward mode, gathered over the mesh, so that a plain
//! client sees one server whichever shard it landed on:
//!
//! - INFO asks every other shard to publish its counters and tables now
//!   ([`ShardMsg::Publish`](crate::mesh::forward::ShardMsg)), then renders from the
//!   published values: everything a shard did before it saw the request is counted
//!   (its replies to this client included), and no shard waits for another.
//! - CONFIG SET, CONFIG RESETSTAT, CLIENT PAUSE and UNPAUSE broadcast their change,
//!   then the same request: its answer arrives after the change (the queue to each
//!   shard is ordered), so the client's `+OK` means every shard applied it.
//! - DEBUG RELOAD broadcasts the reload the same way; each shard notes how its
//!   part went in an outcome they share, read once every shard published.
//! - CLIENT LIST and CLIENT KILL send the question ([`ClientQuery`]) to every shard;
//!   each answers for its own connections in a part of one held reply, merged by
//!   [`Merge::ClientLines`] or [`Merge::SumInts`] / [`Merge::KillOne`].
//! - CLIENT UNBLOCK of a command parked on another shard asks that shard alone
//!   ([`Gather::Ask`]): it unblocks (and logs) the command, then answers 1 or 0.
//!
//! A gathered command is recorded (INFO commandstats, SLOWLOG, the histograms)
//! once its answer is complete, as Redis records a command after its reply: its
//! own INFO or LATENCY HISTOGRAM does not count it (`observability::Awaited`).
//!
//! Like a cross-shard command, the caller's connection runs nothing it pipelined
//! after the command until the answer is complete.

use crate::mesh::forward::Tag;
use crate::mesh::queries::ClientQuery;
use crate::net::conn::{BlockedOn, ClientState, Conn, Merge, ReplyQueue};
use crate::net::slab::Slab;
use crate::shard::ShardCore;
use ahash::AHashMap;
use ruvio_resp::{Protocol, Reply};

/// What a server command asks to be gathered from every shard.
#[derive(Debug)]
pub enum Gather {
    /// Once every other shard has published (and applied what was sent before).
    AfterAll(Then),
    /// Ask every shard `query`; `local` is this shard's part, already answered.
    Clients {
        query: ClientQuery,
        merge: Merge,
        local: Vec<u8>,
    },
    /// A PUBLISH whose subscribers are on other shards too.
    Publish(Box<crate::messaging::pubsub::Publication>),
    /// Ask shard `shard` alone `query` (CLIENT UNBLOCK of a command parked
    /// there): its answer is the reply.
    Ask { shard: usize, query: ClientQuery },
}

/// What to answer once every shard has published.
#[derive(Debug)]
pub enum Then {
    /// INFO with these section names, rendered from the fresh counters.
    Info { sections: Vec<String> },
    /// LATENCY HISTOGRAM of these commands, from the fresh histograms.
    LatencyHistogram(Vec<Vec<u8>>),
    /// This reply (a broadcast change's `+OK`).
    Reply(Vec<u8>),
    /// DEBUG EXPORT-RDB: every shard wrote its part of this file; assemble it.
    ExportRdb(String),
    /// SAVE or BGSAVE without a log: every shard wrote its part of the dump at
    /// `path`; assemble it and answer `answer`.
    Dump { path: String, answer: Vec<u8> },
    /// SHUTDOWN: every shard prepared to exit (see `shutdown`).
    Shutdown { force: bool },
    /// MEMORY STATS, rendered from the fresh figures.
    MemoryStats,
    /// DEBUG RELOAD: every shard reloaded (or said why not) in this outcome.
    Reload(std::sync::Arc<crate::config::change::ReloadOutcome>),
}

/// A call waiting for the other shards to publish.
#[derive(Debug)]
struct Pending {
    conn: u32,
    gen: u32,
    seq: u64,
    proto: Protocol,
    then: Then,
    missing: usize,
}

/// A shard's calls in flight.
#[derive(Debug, Default)]
pub struct Gathering {
    next_ticket: u64,
    pending: AHashMap<u64, Pending>,
    /// Calls every shard has answered that still wait for something the tick
    /// looks at: SHUTDOWN until every shard's log is on disk (a shard answers the
    /// gather at once but may flush only when its direct write in flight ends).
    waiting: Vec<Pending>,
}

/// Hold the caller's reply and send `gather`'s questions to the other shards.
/// The held slot comes back, for the caller to record the command once it is
/// answered; not PUBLISH's (recorded when it ran here: docs/observability.md).
pub fn start(
    core: &mut ShardCore,
    client: &mut ClientState,
    replies: &mut ReplyQueue,
    who: (u32, u32),
    gather: Gather,
) -> Option<u64> {
    let shards = core.topo.nodes.len();
    let others = (0..shards).filter(|&s| s != core.id);
    match gather {
        Gather::AfterAll(then) => {
            let seq = replies.hold(Merge::Single, 1);
            client.blocked = Some(BlockedOn::waiting(seq));
            core.gathering.next_ticket += 1;
            let ticket = core.gathering.next_ticket;
            let pending = Pending {
                conn: who.0,
                gen: who.1,
                seq,
                proto: client.proto,
                then,
                missing: shards - 1,
            };
            if pending.missing == 0 {
                // One shard: nobody to ask; the tick completes it.
                core.gathering.waiting.push(pending);
                return Some(seq);
            }
            core.gathering.pending.insert(ticket, pending);
            for to in others {
                core.outbox.publish(to, core.id, ticket);
            }
            Some(seq)
        }
        Gather::Clients {
            query,
            merge,
            local,
        } => {
            let seq = replies.hold(merge, shards);
            client.blocked = Some(BlockedOn::waiting(seq));
            for to in others {
                let tag = Tag::for_client(client, who, seq, to as u16);
                core.outbox.clients(to, core.id, tag, query.clone());
            }
            replies.fill(seq, core.id, local);
            Some(seq)
        }
        Gather::Ask { shard, query } => {
            let seq = replies.hold(Merge::Single, 1);
            client.blocked = Some(BlockedOn::waiting(seq));
            let tag = Tag::for_client(client, who, seq, 0);
            core.outbox.clients(shard, core.id, tag, query);
            Some(seq)
        }
        Gather::Publish(publication) => {
            crate::mesh::publish::start_publish(
                &mut core.outbox,
                client,
                replies,
                who,
                *publication,
            );
            None
        }
    }
}

/// Another shard's INFO wants this shard's counters now.
pub fn publish(core: &mut ShardCore, conns: &Slab<Conn>, from: usize, ticket: u64) {
    crate::shard::publish_gauges(core, conns.len());
    crate::shard::publish_memory(core, conns);
    // Per-command histograms too (INFO latencystats, LATENCY HISTOGRAM): copied
    // only when asked, they are too large for every tick.
    let histograms = core.timing.histograms();
    core.shared
        .observatory
        .publish_histograms(core.id, histograms);
    core.outbox.published(from, ticket);
}

/// A shard published for call `ticket`: answer it when it was the last.
pub fn published(core: &mut ShardCore, conns: &mut Slab<Conn>, ticket: u64) {
    let Some(pending) = core.gathering.pending.get_mut(&ticket) else {
        return;
    };
    pending.missing -= 1;
    if pending.missing > 0 {
        return;
    }
    let Some(p) = core.gathering.pending.remove(&ticket) else {
        return;
    };
    complete(core, conns, p);
}

/// The tick: complete the calls that were waiting.
pub fn on_tick(core: &mut ShardCore, conns: &mut Slab<Conn>) {
    for p in std::mem::take(&mut core.gathering.waiting) {
        complete(core, conns, p);
    }
}

/// Every shard answered call `p`: render and deliver its reply, or (SHUTDOWN with
/// a shard's log not yet on disk) leave it for the tick.
fn complete(core: &mut ShardCore, conns: &mut Slab<Conn>, p: Pending) {
    // Rendering the answer is the command's own work: its record adds it.
    let started = core.timing.start();
    let out = match p.then {
        Then::Shutdown { .. } if !crate::persistence::shutdown::every_shard_prepared(core) => {
            return core.gathering.waiting.push(p);
        }
        Then::Info { sections } => {
            let text = crate::cmd::info::info_text(core, conns.len(), &sections);
            let mut out = Vec::new();
            Reply::new(&mut out, p.proto).verbatim("txt", text.as_bytes());
            out
        }
        Then::LatencyHistogram(commands) => {
            let shards = crate::cmd::slowlog::visible_shards(&core.cfg, core.id);
            let source = (&core.timing, &core.shared.observatory, core.id, shards);
            crate::cmd::latency::histogram_reply(source, p.proto, &commands)
        }
        Then::Reply(bytes) => bytes,
        Then::MemoryStats => {
            let figures = crate::shard::memory_figures(core, conns);
            let mut out = Vec::new();
            crate::stats::memory::write_memory_stats(&figures, &mut Reply::new(&mut out, p.proto));
            out
        }
        Then::ExportRdb(path) => {
            match crate::persistence::export::assemble(&path, 0..core.topo.nodes.len()) {
                Ok(()) => b"+OK\r\n".to_vec(),
                Err(e) => format!("-ERR EXPORT-RDB failed: {e}\r\n").into_bytes(),
            }
        }
        Then::Dump { path, answer } => {
            crate::cmd::config::Configured::finish_dump(core, &path, &answer)
        }
        Then::Shutdown { force } => crate::persistence::shutdown::conclude(core, force),
        Then::Reload(outcome) => outcome.answer(),
    };
    let ns = started.map_or(0, |t| core.timing.elapsed_ns(t));
    deliver(core, conns, (p.conn, p.gen), p.seq, 0, (out, ns));
}

/// Another shard's CLIENT LIST, KILL or UNBLOCK: answer for this shard's
/// connections (and parked commands), with the time it took.
pub fn answer_clients(
    core: &mut ShardCore,
    conns: &mut Slab<Conn>,
    from: usize,
    tag: Tag,
    query: &ClientQuery,
) {
    let started = core.timing.start();
    let part = crate::cmd::client::answer(core, conns, None, query);
    let ns = started.map(|t| core.timing.elapsed_ns(t));
    core.outbox.reply(from, tag.ran(ns), &part);
}

/// Put part `part` of held reply `seq` into connection `who`'s queue (`ran_ns`:
/// the time the part took where it ran, 0 when not timed); a client waiting
/// for it goes on with what it pipelined after. A command recorded once
/// answered is recorded when this completes its reply. The bytes are a buffer
/// of their own or a slice of a message's reply batch (copied once, into the
/// queue: `net::reply_queue::PartBytes`).
pub fn deliver<'a>(
    core: &mut ShardCore,
    conns: &mut Slab<Conn>,
    who: (u32, u32),
    seq: u64,
    part: usize,
    (bytes, ran_ns): (impl Into<crate::net::reply_queue::PartBytes<'a>>, u64),
) {
    let Some(conn) = conns.get_mut(who.0, who.1) else {
        return;
    };
    if let Some(record) = conn.replies.fill_part(seq, part, bytes, ran_ns) {
        crate::shard::exec::observe_answered(core, &conn.client, &record);
    }
    core.dirty.push(who);
    let limits = &core.cfg.client_output_buffer_limit;
    crate::net::outlimit::enforce(limits, core.now_ms, &mut core.dirty, conn, who);
    let answered = conn
        .client
        .blocked
        .is_some_and(|b| conn.replies.is_released(b.seq));
    if answered {
        conn.client.blocked = None;
        core.resume.push(who);
    }
}
