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
//!
//! This file keeps the calls in flight and delivers the parts; what an answer
//! reads of the shard, and the answers themselves (INFO's text, MEMORY STATS, a
//! dump put together, another shard's question about its clients), are the
//! shard's ([`Gatherer`], in `shard/gathered.rs`).

use crate::config::output_limits::OutputLimits;
use crate::mesh::forward::{Outbox, Tag};
use crate::mesh::queries::ClientQuery;
use crate::net::conn::{BlockedOn, ClientState, Conn, Merge, ReplyQueue};
use crate::net::slab::Slab;
use crate::observability::{Awaited, Timing};
use ahash::AHashMap;
use ruvio_resp::Protocol;

/// What a gather reads and asks of the shard it runs on. Defined here, below the
/// shard, and implemented by it (`shard/gathered.rs`, which also renders the
/// answers: INFO, LATENCY HISTOGRAM, MEMORY STATS, a dump's assembly ...), so
/// that the mesh keeps the bookkeeping of a gather without naming the shard or
/// the commands; called on the concrete core, never through `dyn` (a forwarded
/// command's reply comes home through [`deliver`]).
pub trait Gatherer {
    /// This shard's index.
    fn shard_id(&self) -> usize;
    /// How many shards the server has.
    fn shard_count(&self) -> usize;
    /// This shard's calls in flight and its outbox to the other shards.
    fn gathering(&mut self) -> (&mut Gathering, &mut Outbox);
    /// The command clock (a gathered answer's rendering is the command's work).
    fn timing(&self) -> &Timing;
    /// Every shard answered: render the answer `then` names, or give it back when
    /// it must wait for the tick (SHUTDOWN until every shard prepared to exit).
    fn render(
        &mut self,
        conns: &mut Slab<Conn>,
        then: Then,
        proto: Protocol,
    ) -> Result<Vec<u8>, Then>;
    /// A command recorded once answered (`record`) got its whole reply.
    fn record_answered(&mut self, client: &ClientState, record: &Awaited);
    /// What delivering a reply part touches of the shard.
    fn delivery(&mut self) -> Delivery<'_>;
}

/// The parts of the shard a delivered reply touches: the output limits checked
/// against the grown queue, the clock they read, the connections to flush, and
/// those whose held command got its whole answer.
pub struct Delivery<'a> {
    pub limits: &'a OutputLimits,
    pub now_ms: u64,
    pub dirty: &'a mut Vec<(u32, u32)>,
    pub resume: &'a mut Vec<(u32, u32)>,
}

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
    /// REPLICAOF NO ONE: `+OK` once every shard records its writes (the
    /// tick looks again until then).
    Promoted,
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
    core: &mut impl Gatherer,
    client: &mut ClientState,
    replies: &mut ReplyQueue,
    who: (u32, u32),
    gather: Gather,
) -> Option<u64> {
    let (shards, id) = (core.shard_count(), core.shard_id());
    let others = (0..shards).filter(|&s| s != id);
    let (gathering, outbox) = core.gathering();
    match gather {
        Gather::AfterAll(then) => {
            let seq = replies.hold(Merge::Single, 1);
            client.blocked = Some(BlockedOn::waiting(seq));
            gathering.next_ticket += 1;
            let ticket = gathering.next_ticket;
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
                gathering.waiting.push(pending);
                return Some(seq);
            }
            gathering.pending.insert(ticket, pending);
            for to in others {
                outbox.publish(to, id, ticket);
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
                outbox.clients(to, id, tag, query.clone());
            }
            replies.fill(seq, id, local);
            Some(seq)
        }
        Gather::Ask { shard, query } => {
            let seq = replies.hold(Merge::Single, 1);
            client.blocked = Some(BlockedOn::waiting(seq));
            let tag = Tag::for_client(client, who, seq, 0);
            outbox.clients(shard, id, tag, query);
            Some(seq)
        }
        Gather::Publish(publication) => {
            crate::mesh::publish::start_publish(outbox, client, replies, who, *publication);
            None
        }
    }
}

/// A shard published for call `ticket`: answer it when it was the last.
pub fn published(core: &mut impl Gatherer, conns: &mut Slab<Conn>, ticket: u64) {
    let (gathering, _) = core.gathering();
    let Some(pending) = gathering.pending.get_mut(&ticket) else {
        return;
    };
    pending.missing -= 1;
    if pending.missing > 0 {
        return;
    }
    let Some(p) = gathering.pending.remove(&ticket) else {
        return;
    };
    complete(core, conns, p);
}

/// The tick: complete the calls that were waiting.
pub fn on_tick(core: &mut impl Gatherer, conns: &mut Slab<Conn>) {
    for p in std::mem::take(&mut core.gathering().0.waiting) {
        complete(core, conns, p);
    }
}

/// Every shard answered call `p`: render and deliver its reply, or (SHUTDOWN with
/// a shard's log not yet on disk) leave it for the tick.
fn complete(core: &mut impl Gatherer, conns: &mut Slab<Conn>, mut p: Pending) {
    // Rendering the answer is the command's own work: its record adds it.
    let started = core.timing().start();
    let out = match core.render(conns, p.then, p.proto) {
        Ok(out) => out,
        Err(then) => {
            p.then = then;
            return core.gathering().0.waiting.push(p);
        }
    };
    let ns = started.map_or(0, |t| core.timing().elapsed_ns(t));
    deliver(core, conns, (p.conn, p.gen), p.seq, 0, (out, ns));
}

/// Put part `part` of held reply `seq` into connection `who`'s queue (`ran_ns`:
/// the time the part took where it ran, 0 when not timed); a client waiting
/// for it goes on with what it pipelined after. A command recorded once
/// answered is recorded when this completes its reply. The bytes are a buffer
/// of their own or a slice of a message's reply batch (copied once, into the
/// queue: `net::reply_queue::PartBytes`).
pub fn deliver<'a>(
    core: &mut impl Gatherer,
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
        core.record_answered(&conn.client, &record);
    }
    let at = core.delivery();
    if at.dirty.last() != Some(&who) {
        // A batch's replies to one pipeline land one after the other: the
        // connection is marked once, not once per reply.
        at.dirty.push(who);
    }
    crate::net::outlimit::enforce(at.limits, at.now_ms, at.dirty, conn, who);
    let answered = conn
        .client
        .blocked
        .is_some_and(|b| conn.replies.is_released(b.seq));
    if answered {
        conn.client.blocked = None;
        at.resume.push(who);
    }
}
