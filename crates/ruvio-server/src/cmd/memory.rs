//! MEMORY STATS: Redis 7.0's fields, from the server's figures. The engine
//! answers MEMORY's other subcommands (`ruvio_engine::keys::object`); STATS needs
//! every shard and the process, so the server adds it to the engine's container
//! ([`SUBCOMMANDS`], joined in `cmd::registry`). The shard collects the figures
//! (`shard::memory_figures`) and `stats::memory` writes the reply.
//!
//! Where each figure comes from (docs/observability.md has the table):
//! - `total.allocated`, `peak.allocated`, `startup.allocated`: the allocator
//!   counter (`memory::alloc`), its sampled peak, its value at the first tick;
//! - `clients.normal`, `aof.buffer`, `db.N`: what each shard publishes
//!   (`shard::publish_memory`: its connections' memory, its log group being
//!   filled, its tables' entry chunks, index and TTL marks), fresh: in forward
//!   mode the other shards publish before the reply, as for INFO;
//! - `lua.caches`, `functions.caches`: the script cache's and the libraries' bytes;
//! - `allocator.*`: glibc's own account (`mallinfo2`: bytes in use, bytes held
//!   from the system) and the process's RSS;
//! - `replication.backlog`, `clients.slaves`, `cluster.links`: 0, as Ruvio has no
//!   replicas and no cluster bus yet; `overhead.hashtable.slot-to-keys`: 0, as
//!   Ruvio keeps no slot-to-keys index (CLUSTER COUNTKEYSINSLOT walks the table).
//!
//! The derived figures use Redis's formulas (`getMemoryOverheadData`): the
//! overhead is their sum, the dataset what the allocator counts beyond it, the
//! percentages and ratios single-precision as Redis computes them.

use super::{Ctx, Server, ServerCommand, ServerResult};
use crate::mesh::gather::{Gather, Then};
use ruvio_engine::command::command;
use ruvio_engine::KeySpec;
use ruvio_resp::{Args, Reply};

/// MEMORY's subcommands the server answers.
#[rustfmt::skip]
pub const SUBCOMMANDS: &[ServerCommand] = &[
    command!("memory|stats", 2, 0, KeySpec::NONE, ["slow"], "server", "4.0.0",
        "Show memory usage details", "O(1)", stats),
];

/// `MEMORY STATS`: the other shards publish their figures first (with one
/// shard, the next tick answers), then `stats::memory` writes the reply.
fn stats<S: Server>(ctx: &mut Ctx<'_, S>, _args: Args<'_>, _reply: &mut Reply<'_>) -> ServerResult {
    ctx.gather = Some(Gather::AfterAll(Then::MemoryStats));
    Ok(())
}
