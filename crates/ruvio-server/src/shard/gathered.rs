//! Gathers on a shard: [`Gatherer`] for `ShardCore`, what the mesh's bookkeeping
//! of a server-wide answer (`mesh::gather`) reads and asks here, and the shard's
//! side of it: the answers rendered once every shard published (INFO, LATENCY
//! HISTOGRAM, MEMORY STATS, a dump or an export put together, SHUTDOWN's end),
//! this shard's counters published for another shard's INFO, and its part of
//! another shard's CLIENT LIST, KILL or UNBLOCK and DEBUG questions.

use crate::config::output_limits::OutputLimits;
use crate::mesh::forward::{Outbox, Tag};
use crate::mesh::gather::{Delivery, Gatherer, Gathering, Then};
use crate::mesh::queries::ClientQuery;
use crate::net::conn::{ClientState, Conn};
use crate::net::slab::Slab;
use crate::observability::{Awaited, Timing};
use crate::shard::ShardCore;
use ruvio_resp::{Protocol, Reply};

impl Gatherer for ShardCore {
    #[inline]
    fn shard_id(&self) -> usize {
        self.id
    }

    #[inline]
    fn shard_count(&self) -> usize {
        self.topo.nodes.len()
    }

    #[inline]
    fn gathering(&mut self) -> (&mut Gathering, &mut Outbox) {
        (&mut self.gathering, &mut self.outbox)
    }

    #[inline]
    fn timing(&self) -> &Timing {
        &self.timing
    }

    fn render(
        &mut self,
        conns: &mut Slab<Conn>,
        then: Then,
        proto: Protocol,
    ) -> Result<Vec<u8>, Then> {
        render(self, conns, then, proto)
    }

    #[inline]
    fn record_answered(&mut self, client: &ClientState, record: &Awaited) {
        super::exec::observe_answered(self, client, record);
    }

    #[inline]
    fn delivery(&mut self) -> Delivery<'_> {
        let limits: &OutputLimits = &self.cfg.client_output_buffer_limit;
        Delivery {
            limits,
            now_ms: self.now_ms,
            dirty: &mut self.dirty,
            resume: &mut self.resume,
        }
    }
}

/// Every shard answered: the answer `then` names, or `then` back when it must
/// wait for the tick (SHUTDOWN with a shard's log not yet on disk, a promotion
/// with a shard's feed not on yet).
fn render(
    core: &mut ShardCore,
    conns: &mut Slab<Conn>,
    then: Then,
    proto: Protocol,
) -> Result<Vec<u8>, Then> {
    Ok(match then {
        Then::Shutdown { .. } if !crate::persistence::shutdown::every_shard_prepared(core) => {
            return Err(then);
        }
        Then::Promoted if core.shared.replication.promoting() => return Err(then),
        Then::Promoted => b"+OK\r\n".to_vec(),
        Then::Info { sections } => {
            let text = crate::cmd::info::info_text(core, conns.len(), &sections);
            let mut out = Vec::new();
            Reply::new(&mut out, proto).verbatim("txt", text.as_bytes());
            out
        }
        Then::LatencyHistogram(commands) => {
            let shards = crate::cmd::slowlog::visible_shards(&core.cfg, core.id);
            let source = (&core.timing, &core.shared.observatory, core.id, shards);
            crate::cmd::latency::histogram_reply(source, proto, &commands)
        }
        Then::Reply(bytes) => bytes,
        Then::MemoryStats => {
            let figures = super::memory_figures(core, conns);
            let mut out = Vec::new();
            crate::stats::memory::write_memory_stats(&figures, &mut Reply::new(&mut out, proto));
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
    })
}

/// Another shard's INFO wants this shard's counters now.
pub fn publish(core: &mut ShardCore, conns: &Slab<Conn>, from: usize, ticket: u64) {
    super::publish_gauges(core, conns.len());
    super::publish_memory(core, conns);
    // Per-command histograms too (INFO latencystats, LATENCY HISTOGRAM): copied
    // only when asked, they are too large for every tick.
    let histograms = core.timing.histograms();
    core.shared
        .observatory
        .publish_histograms(core.id, histograms);
    core.outbox.published(from, ticket);
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
    let filling_before = core.wal.as_ref().map_or(0, |w| w.filling_bytes());
    let part = match query {
        ClientQuery::Run(asked) => super::node_forward::run_asked(core, conns, (from, tag), asked),
        query => Some(crate::cmd::client::answer(core, conns, None, query)),
    };
    let Some(part) = part else {
        // Parked here: answered when served (`parked.rs`).
        return;
    };
    // What the command changed of the node's slots reaches the asking shard
    // before its answer does.
    super::node_forward::publish_node_map(core);
    let ns = started.map(|t| core.timing.elapsed_ns(t));
    // A write asked of this shard (a slot in flight's key here) is answered
    // once its record is durable under `always`, as a forwarded write is.
    crate::persistence::durable::reply_forwarded(core, from, tag.ran(ns), &part, filling_before);
}
