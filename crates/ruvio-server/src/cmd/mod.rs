//! The command table and the server's own command families. [`registry`] is the
//! one table every command is looked up in: the engine's families and these.
//! The families here are the commands that need the connection or the
//! server rather than only the keyspace. Each module exports `COMMANDS`, a table of
//! [`ServerCommand`] rows in the engine's row format (`command!`); a container
//! (CLIENT, CONFIG, COMMAND, CLUSTER, DEBUG) carries its subcommand rows, which the
//! dispatcher resolves, checks and runs directly.
//!
//! A handler returns `Err(CmdError)` having written nothing; the dispatcher writes
//! the error once and counts the failure from the type, as for engine commands.
//!
//! A handler is generic over the shard it runs on (`Ctx<'_, S>`, `S:`
//! [`Server`]): it reads the shard and asks steps of it only through that trait,
//! which the shard, the floor above, implements (`shard/families.rs`), so a
//! family never names `ShardCore`. The rows hold each handler's one instance,
//! for the type the shard names through [`RowsFor`]: no `dyn`, no indirection.

pub mod acl;
pub mod client;
pub mod cluster;
pub mod cluster_node;
pub mod cluster_slot_migration;
pub mod config;
pub mod connection;
pub mod debug;
pub mod functions;
pub mod info;
pub mod introspection;
pub mod latency;
pub mod memory;
pub mod migrate;
pub mod persistence;
pub mod pubsub;
pub mod registry;
pub mod replication;
pub mod server;
pub mod slowlog;
pub mod transactions;

use crate::mesh::gather::{Gather, Then};
use crate::net::conn::{ClientState, Conn};
use crate::net::slab::Slab;
use ruvio_engine::{CmdError, CommandRow};
use ruvio_resp::{Args, Reply};

/// Everything a server command may look at or change. `S` is the shard as the
/// families see it ([`Server`]): a handler generic over it reads and asks only
/// through the trait, monomorphised for the one shard type (no `dyn`).
pub struct Ctx<'a, S: Server> {
    pub core: &'a mut S,
    pub client: &'a mut ClientState,
    /// The shard's other connections (the caller's own is taken out while it runs).
    pub conns: &'a mut Slab<Conn>,
    /// Set by a handler whose answer needs every shard (forward mode): the
    /// dispatcher holds the reply and asks them ([`crate::mesh::gather`]).
    pub gather: Option<Gather>,
    /// The caller's connection (slab index, generation).
    pub who: (u32, u32),
    /// Set by WAIT when it must wait for replicas: the dispatcher holds the reply.
    pub wait: Option<replication::WaitReplicas>,
}

/// The shard as the families see it: the parts they read (the keyspace, the
/// settings, the clock, the command timing ...) and the steps the shard owns
/// (CLIENT PAUSE and UNPAUSE, a blocked client's early answer, its gauges as of
/// now, MONITOR's list of connections, a broadcast to the other shards,
/// UNWATCH). Defined here, below the shard, and implemented by it
/// (`shard/families.rs`) so that a family calls the shard without naming it;
/// called on the concrete core, never through `dyn`. CONFIG's part
/// ([`config::Configured`]: the running values, what a setting does) comes with it.
pub trait Server: config::Configured {
    /// This shard's index.
    fn shard_id(&self) -> usize;
    /// The wall clock as the loop read it this iteration.
    fn now_ms(&self) -> u64;
    /// This shard's copy of the settings.
    fn settings(&self) -> &crate::config::Config;
    /// Which shard owns which key.
    fn topology(&self) -> &std::sync::Arc<crate::cluster::topology::Topology>;
    /// This shard's keyspace.
    fn engine(&self) -> &ruvio_engine::Engine;
    /// This shard's keyspace, to change.
    fn engine_mut(&mut self) -> &mut ruvio_engine::Engine;
    /// The WATCH table (a client's `dirty_cas`).
    fn watch_table(&self) -> &crate::transactions::watch::Watches;
    /// This shard's CLIENT TRACKING table (a client's BCAST prefixes).
    fn tracking_table(&self) -> &crate::tracking::Tracking;
    /// Connection `who` (slab index, generation) has something to flush or close.
    fn mark_conn_dirty(&mut self, who: (u32, u32));
    /// CLIENT PAUSE on every shard until `until_ms` (ALL when `all`): this shard
    /// pauses now and tells the others, whose copies pause before the caller's
    /// `+OK` ([`ok_everywhere`]). The one way a family starts a pause, so the
    /// pause stays the shard's part.
    fn pause_everywhere(&mut self, until_ms: u64, all: bool);
    /// End CLIENT PAUSE on every shard: this shard's connections that waited run
    /// what they hold, and the others are told to do the same.
    fn unpause_everywhere(&mut self, conns: &mut Slab<Conn>);
    /// Send a settings change (CONFIG SET's values, a reset, a snapshot ...) to
    /// every other shard, which applies it before the caller's answer when the
    /// caller waits for them ([`ok_everywhere`]).
    fn broadcast(&mut self, change: crate::config::change::ConfigChange);
    /// Answer blocked client `client_id` of this shard now, with a timeout's
    /// answer or (`error`) `-UNBLOCKED`; false if none of its clients has that id.
    fn unblock_client(&mut self, conns: &mut Slab<Conn>, client_id: u64, error: bool) -> bool;
    /// Publish this shard's gauges as of now (`clients` is its connection count).
    fn publish_gauges_now(&self, clients: usize);
    /// This shard's blocked clients, as INFO counts them.
    fn blocked_clients(&self) -> u64;
    /// Publish this shard's per-command histograms (INFO latencystats).
    fn publish_histograms(&self);
    /// This shard's live counters.
    fn live_stats(&self) -> &crate::stats::ShardStats;
    /// This shard's log failed a write.
    fn log_failed(&self) -> bool;
    /// Connection `who` of this shard enters MONITOR mode.
    fn attach_monitor(&mut self, who: (u32, u32));
    /// Connection `who` of this shard leaves MONITOR mode (RESET).
    fn detach_monitor(&mut self, who: (u32, u32));
    /// This shard keeps a log (durability everysec or always), not memory only.
    fn has_log(&self) -> bool;
    /// How far this shard's log got (WAITAOF), `None` without a log.
    fn log_bytes(&self) -> Option<LogBytes>;
    /// Command timing and sizes: the command logs' settings, histograms.
    fn command_timing(&self) -> &crate::observability::Timing;
    /// This shard's CLIENT TRACKING tables and what delivering an invalidation
    /// touches beside them.
    fn tracking_parts(&mut self) -> (&mut crate::tracking::Tracking, crate::tracking::Deliver<'_>);
    /// `cluster-enabled yes`: this shard as a node of the cluster bus.
    fn cluster_node(&self) -> Option<&crate::cluster::node::ShardNode>;
    /// [`cluster_node`](Self::cluster_node), to change (a publication over the bus).
    fn cluster_node_mut(&mut self) -> Option<&mut crate::cluster::node::ShardNode>;
    /// What routing reads of this shard's node: its own slot map, or in
    /// forward mode shard 0's copy (every shard of the process has one).
    fn node_routes(&self) -> Option<&crate::cluster::slot_map::NodeRoutes>;
    /// What Pub/Sub delivery touches of this shard, and the outbox that relays a
    /// message to the other shards.
    fn delivery(
        &mut self,
    ) -> (
        crate::messaging::pubsub::Delivery<'_>,
        &mut crate::mesh::forward::Outbox,
    );
    /// Publish what scripts published before a client's PUBLISH on this shard
    /// (`caller`: the running connection, out of the slab).
    fn deliver_published(
        &mut self,
        conns: &mut Slab<Conn>,
        caller: Option<crate::messaging::pubsub::Caller<'_>>,
    );
    /// The shards whose subscriptions a PUBSUB call on this shard sees.
    fn visible_shards(&self) -> std::ops::Range<usize>;
    /// This shard's part of replication: its feed of the records it wrote,
    /// the replicas it hosts (PSYNC's attach, WAIT's flush of the feed).
    fn replication_part(&mut self) -> &mut crate::replication::serve::ShardPart;
    /// Hand this shard's pending records to every history that takes them
    /// (the server's, and this shard's own while a shard link follows it),
    /// as the loop does before replies leave: WAIT reads the offsets after.
    fn flush_replication_feed(&mut self);
    /// Record a command for the replicas only, not the log (FUNCTION's changes,
    /// which the shard's own file keeps).
    fn feed_replicas(&mut self, db: usize, argv: &mut dyn Iterator<Item = &[u8]>);
    /// Forget every key `client` watches (UNWATCH, RESET): the owners of the
    /// keys forget its watches, a new watch epoch starts.
    fn unwatch(&mut self, client: &mut ClientState);
    /// DISCARD: drop `client`'s open transaction and its watches.
    fn discard(&mut self, client: &mut ClientState) -> ServerResult;
    /// What every shard shares.
    type Shared: SharedReads;
    /// What every shard shares, as this shard holds it.
    fn shared(&self) -> &Self::Shared;
}

/// How far a shard's log got, in bytes since it opened: what it appended and
/// what is on disk (WAITAOF's numlocal waits for the second to reach the first).
#[derive(Clone, Copy, Debug)]
pub struct LogBytes {
    pub appended: u64,
    pub synced: u64,
}

/// What the families (INFO) read of what every shard shares: the shard's
/// `Shared` implements it (`shard/families.rs`).
pub trait SharedReads {
    /// The bytes `maxmemory` limits: allocated bytes less what the keyspaces reuse.
    fn used_for_maxmemory(&self) -> u64;
    /// Every shard's published gauges, by shard id.
    fn shards(&self) -> &[crate::stats::ShardGauges];
    /// When the server started.
    fn started(&self) -> std::time::Instant;
    /// INFO's `run_id`.
    fn run_id(&self) -> &str;
    /// LASTSAVE.
    fn last_save_unix_s(&self) -> u64;
    /// BGSAVE's state and history.
    fn background_save(&self) -> &crate::persistence::snapshot::SaveState;
    /// Whether a shard is loading.
    fn loading(&self) -> &crate::persistence::loading::LoadingState;
    /// Every shard's Pub/Sub subscribers.
    fn pubsub(&self) -> &crate::messaging::pubsub::Subscribers;
    /// CLIENT TRACKING's directory.
    fn tracking(&self) -> &crate::tracking::Directory;
    /// The latency monitor and command histograms.
    fn observatory(&self) -> &crate::observability::Observatory;
    /// The replication state every shard reads.
    fn replication(&self) -> &crate::replication::State;
    /// The current statistics epoch.
    fn stats_epoch(&self) -> u64;
    /// Start a new statistics epoch (CONFIG RESETSTAT) and return it.
    fn next_stats_epoch(&self) -> u64;
    /// ACL's users and log.
    fn acl(&self) -> &std::sync::Arc<crate::acl::Acl>;
    /// The shard where client `client_id` is blocked, if it is.
    fn blocked_on(&self, client_id: u64) -> Option<usize>;
    /// Active expiry on or off, by shard (DEBUG SET-ACTIVE-EXPIRE).
    fn active_expire(&self) -> &[std::sync::atomic::AtomicBool];
    /// Which shard runs a script too long (SHUTDOWN's BUSY answer).
    fn scripts(&self) -> &ruvio_engine::scripting::ScriptWatches;
    /// Sum one gauge over all shards.
    fn sum(
        &self,
        gauge: impl Fn(&crate::stats::ShardGauges) -> &std::sync::atomic::AtomicU64,
    ) -> u64;
    /// Sum a resettable counter over the shards of the current statistics epoch.
    fn sum_counter(
        &self,
        gauge: impl Fn(&crate::stats::ShardGauges) -> &std::sync::atomic::AtomicU64,
    ) -> u64;
    /// Read the published tables of the current epoch of shards `shards`, but `skipped`.
    fn for_tables(
        &self,
        shards: std::ops::Range<usize>,
        skipped: Option<usize>,
        f: impl FnMut(&crate::stats::StatTables),
    );
}

/// What a server handler returns: `Ok` after writing its whole reply, or the error
/// the dispatcher writes.
pub type ServerResult = Result<(), CmdError>;

/// The server commands a script's `redis.call` reaches through the scripting
/// host (which sits below this layer and so is handed them), over `S`, what
/// every shard shares (the shard's `Shared`).
#[inline]
pub fn script_commands<S: SharedReads>() -> crate::scripting::host::ServerCommands<S> {
    crate::scripting::host::ServerCommands {
        info: info::script_text::<S>,
        pubsub: pubsub::script_answer,
        migrate: migrate::send,
    }
}

/// Which shard type the rows' handlers are instantiated for. A row holds a
/// plain `fn` pointer, so its handler must be one instance of the generic
/// function; the shard, the floor above, says which by implementing this for
/// [`Rows`] (`shard/families.rs`), the way it implements [`Server`], and `cmd`
/// never names it. Only [`ServerFn`] reads it: a handler that took
/// `Ctx<'_, RowCore>` could reach past [`Server`] into the core, and
/// `tests/layering.rs` (`no_family_names_the_concrete_core`) fails on one.
pub trait RowsFor {
    /// The shard the table's handlers run on.
    type Core: Server;
}

/// The command table's server rows, as a type: what [`RowsFor`] is implemented for.
pub struct Rows;

/// The shard type the rows run on ([`RowsFor`]).
type RowCore = <Rows as RowsFor>::Core;

/// A server command handler: a generic handler's instance for `RowCore`.
pub type ServerFn = fn(&mut Ctx<'_, RowCore>, Args<'_>, &mut Reply<'_>) -> ServerResult;

/// One row of a server family's table.
pub type ServerCommand = CommandRow<ServerFn>;

/// Server subcommands of the engine's containers: the container's name and the
/// rows the server adds to it (MEMORY STATS needs every shard and the process).
pub fn engine_container_additions() -> [(&'static str, &'static [ServerCommand]); 1] {
    [("memory", memory::SUBCOMMANDS)]
}

/// Every server family's rows.
pub fn commands() -> impl Iterator<Item = &'static ServerCommand> {
    [
        connection::COMMANDS,
        client::COMMANDS,
        cluster::COMMANDS,
        info::COMMANDS,
        config::COMMANDS,
        server::COMMANDS,
        debug::COMMANDS,
        introspection::COMMANDS,
        pubsub::COMMANDS,
        transactions::COMMANDS,
        persistence::COMMANDS,
        functions::COMMANDS,
        slowlog::COMMANDS,
        latency::COMMANDS,
        acl::COMMANDS,
        replication::COMMANDS,
    ]
    .into_iter()
    .flatten()
}

/// Parse a whole argument as an i64 the way Redis' string2ll does.
pub use ruvio_resp::string2ll as parse_i64;

/// Answer `+OK` once every shard applied what this command broadcast (forward mode
/// with several shards; at once otherwise).
pub fn ok_everywhere<S: Server>(ctx: &mut Ctx<'_, S>, reply: &mut Reply<'_>) {
    let shards = ctx.core.topology().nodes.len();
    if shards > 1 && ctx.core.settings().port_mode == crate::config::PortMode::Forward {
        ctx.gather = Some(Gather::AfterAll(Then::Reply(b"+OK\r\n".to_vec())));
    } else {
        reply.ok();
    }
}
