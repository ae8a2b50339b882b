//! The server around a shard's scripts: what `redis.call` of PUBLISH, SPUBLISH,
//! DBSIZE, LASTSAVE, PUBSUB, INFO and MIGRATE needs beyond the shard's keyspace
//! ([`ruvio_engine::scripting::ScriptHost`]), and the queue of what scripts
//! published (delivered by `messaging::notify`).
//!
//! A script runs inside the engine on one shard and cannot wait for the others, so
//! a script's PUBLISH is split in two:
//! - its reply, at the call, counts the receivers from every shard's subscription
//!   registry (forward mode: the whole server's, as one Redis counts; per-shard
//!   mode: the node's own, as Redis Cluster does). The registries are read under
//!   their mutexes, so the count is exact at that moment;
//! - the message itself is an effect of the command
//!   ([`ruvio_engine::command::Published`]): queued after the script with the
//!   keyspace events and sent at the end of the loop iteration (or before a later
//!   client PUBLISH on the shard, which keeps one publisher's messages in order),
//!   through the Pub/Sub path (this shard's subscribers, then a batch to every other
//!   shard with subscribers; per-shard mode: every shard for PUBLISH, as the
//!   cluster bus carries it, the owner alone for SPUBLISH).
//!
//! So a subscriber that subscribes or leaves between the script's call and the end
//! of its loop iteration may make the count differ from the deliveries: the same
//! window Redis has between two commands, now the length of one loop iteration.
//! DBSIZE adds the other shards' key counts as they last published them (on their
//! 10 ms tick): a write on another shard shows within one tick. A script holding
//! the script lock asks every other shard instead (exact: nothing can write there
//! between its question and its end but single-key commands of other clients).

use crate::cluster::node::ServedSlots;
use crate::cluster::topology::Topology;
use crate::config::{Config, PortMode};
use crate::mesh::script_lock::ScriptLock;
use crate::messaging::pubsub::{Kind, Subscribers};
use crate::stats::ShardGauges;
use ruvio_engine::glob_match;
use ruvio_engine::scripting::{Elsewhere, Migrated, Reach, Reaching, ScriptHost, Spreading};
use ruvio_engine::slot::SLOT_COUNT;
use ruvio_engine::{CmdError, Engine};
use ruvio_resp::{Args, Reply};
use std::rc::Rc;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

/// What the host reads of the state every shard shares: implemented by the
/// shard's `Shared` (`shard/shared.rs`), which composes subsystems above this one.
pub trait ServerState: 'static {
    /// Every shard's Pub/Sub subscribers.
    fn subscribers(&self) -> &Subscribers;
    /// Every shard's published gauges.
    fn gauges(&self) -> &[ShardGauges];
    /// The script lock.
    fn script_lock(&self) -> &ScriptLock;
    /// LASTSAVE.
    fn last_save_unix_s(&self) -> u64;
    /// This server, or shard `shard`'s cluster node, is a replica.
    fn is_replica(&self, shard: usize) -> bool;
    /// Its link to the primary is up.
    fn primary_link_up(&self, shard: usize) -> bool;
}

/// INFO's text of the sections `wanted` for shard `id` (see [`ServerCommands`]).
pub type InfoText<S> =
    fn(cfg: &Config, shared: &S, id: usize, engine: &Engine, wanted: &[String]) -> String;

/// PUBSUB subcommand `name` over the subscriptions of `shards` (see
/// [`ServerCommands`]).
pub type PubsubAnswer = fn(
    subscribers: &Subscribers,
    shards: std::ops::Range<usize>,
    name: &str,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> Option<Result<(), CmdError>>;

/// MIGRATE of `args` from database `db`'s keys at `now_ms` (see
/// [`ServerCommands`]); `cluster_mode`: this server is a cluster node.
pub type MigrateKeys =
    fn(cluster_mode: bool, engine: &Engine, db: usize, now_ms: u64, args: Args<'_>) -> Migrated;

/// The server's own commands a script may call beyond its keyspace, answered by
/// the command layer (`cmd`, above this one), which hands them over at install:
/// `cmd::script_commands`.
pub struct ServerCommands<S> {
    /// INFO's text of the sections `wanted` for shard `id`, from what every shard
    /// published (a script cannot wait for the others, nor read its shard's live
    /// counters).
    pub info: InfoText<S>,
    /// PUBSUB subcommand `name` (its row's name) over the subscriptions of
    /// `shards`; `None` for a name that is not one.
    pub pubsub: PubsubAnswer,
    /// MIGRATE: the keys sent as a client's MIGRATE sends them; the ones the
    /// target took come back for the script to delete.
    pub migrate: MigrateKeys,
}

impl<S> Clone for ServerCommands<S> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<S> Copy for ServerCommands<S> {}

/// One shard's view of the server, for its scripts.
struct Host<S> {
    /// The shard's settings (INFO's), a copy renewed after each CONFIG SET
    /// ([`install`] again).
    cfg: Config,
    shared: Arc<S>,
    topo: Arc<Topology>,
    id: usize,
    mode: PortMode,
    /// The hash slots this shard serves.
    slots: LocalSlots,
    commands: ServerCommands<S>,
}

/// The hash slots a shard serves, which its scripts may touch undeclared keys
/// of (per-shard mode: Redis Cluster's rule).
enum LocalSlots {
    /// The fixed topology's range (inclusive).
    Range(u16, u16),
    /// A node of the cluster bus: its slots as the membership gives them now.
    Node(Rc<ServedSlots>),
}

impl LocalSlots {
    fn contains(&self, slot: u16) -> bool {
        match self {
            LocalSlots::Range(first, last) => (*first..=*last).contains(&slot),
            LocalSlots::Node(served) => served.contains(slot),
        }
    }
}

/// Give this shard thread's scripts the server around them (at shard start, and
/// again after CONFIG SET: its scripts' INFO shows the settings). `served`: the
/// slots of the shard's node, with `cluster-enabled yes`.
pub fn install<S: ServerState>(
    cfg: &Config,
    shared: Arc<S>,
    topo: Arc<Topology>,
    id: usize,
    commands: ServerCommands<S>,
    served: Option<Rc<ServedSlots>>,
) {
    let slots = match served {
        Some(served) => LocalSlots::Node(served),
        None => LocalSlots::Range(topo.nodes[id].first_slot, topo.nodes[id].last_slot),
    };
    let every_slot = matches!(slots, LocalSlots::Range(0, last) if last == SLOT_COUNT - 1);
    ruvio_engine::scripting::set_every_slot_local(every_slot);
    ruvio_engine::scripting::set_script_host(Box::new(Host {
        cfg: cfg.clone(),
        shared,
        mode: topo.mode,
        topo,
        id,
        slots,
        commands,
    }));
}

/// How many subscribers of shards `counted` a message on `channel` reaches now
/// (pattern subscribers included for a plain channel; `shard_channel`: SPUBLISH's),
/// read under the registries' mutexes.
pub fn receivers(
    subscribers: &Subscribers,
    counted: std::ops::Range<usize>,
    shard_channel: bool,
    channel: &[u8],
) -> u64 {
    let kind = if shard_channel {
        Kind::Shard
    } else {
        Kind::Channel
    };
    let subscribers = &subscribers.shards;
    let mut receivers = 0;
    for shard in counted {
        if !subscribers[shard].may_receive(kind) {
            continue;
        }
        let registry = subscribers[shard].registry();
        receivers += registry.of(kind).get(channel).map_or(0, Vec::len) as u64;
        if kind == Kind::Channel {
            receivers += registry
                .of(Kind::Pattern)
                .iter()
                .filter(|(pattern, _)| glob_match(pattern, channel))
                .map(|(_, list)| list.len() as u64)
                .sum::<u64>();
        }
    }
    receivers
}

impl<S: ServerState> Host<S> {
    /// The shards whose subscribers a publication from here counts, and PUBSUB
    /// sees ([`crate::messaging::pubsub::visible_shards_of`]).
    fn counted_shards(&self) -> std::ops::Range<usize> {
        crate::messaging::pubsub::visible_shards_of(
            self.mode,
            self.id,
            self.shared.subscribers().shards.len(),
        )
    }
}

impl<S: ServerState> Host<S> {
    /// A node of the cluster bus (its slots are the membership's).
    fn is_node(&self) -> bool {
        matches!(self.slots, LocalSlots::Node(_))
    }

    /// What the script lock reads of the server, for this shard.
    fn script_server(&self) -> crate::mesh::script_lock::Server<'_> {
        crate::mesh::script_lock::Server {
            lock: self.shared.script_lock(),
            shards: self.shared.gauges(),
            topo: &self.topo,
            me: self.id,
        }
    }

    /// A script's INFO: the engine's numbers and what every shard published (this
    /// one's at most a tick old: its live counters are out of a script's reach),
    /// without waiting for the other shards as a client's INFO does.
    fn info(&self, engine: &Engine, args: Args<'_>, reply: &mut Reply<'_>) {
        let wanted: Vec<String> = args
            .iter()
            .skip(1)
            .map(|a| String::from_utf8_lossy(a).to_ascii_lowercase())
            .collect();
        let text = (self.commands.info)(&self.cfg, &self.shared, self.id, engine, &wanted);
        reply.verbatim("txt", text.as_bytes());
    }
}

impl<S: ServerState> ScriptHost for Host<S> {
    fn refuses_writes(&self) -> bool {
        self.shared.is_replica(self.id) && self.cfg.param("replica-read-only") == "yes"
    }

    fn refuses_stale(&self) -> bool {
        self.shared.is_replica(self.id)
            && !self.shared.primary_link_up(self.id)
            && self.cfg.param("replica-serve-stale-data") == "no"
    }

    fn receivers(&self, shard_channel: bool, channel: &[u8]) -> Option<u64> {
        if shard_channel && self.mode == PortMode::PerShard {
            let slot = ruvio_engine::slot::key_slot(channel);
            if !self.slots.contains(slot) {
                return None;
            }
        }
        Some(receivers(
            self.shared.subscribers(),
            self.counted_shards(),
            shard_channel,
            channel,
        ))
    }

    fn keys_elsewhere(&self, db: usize) -> u64 {
        if self.mode == PortMode::PerShard {
            return 0;
        }
        if let Some(exact) = crate::mesh::script_lock::count_elsewhere(self.script_server(), db) {
            return exact;
        }
        let shards = self.shared.gauges().iter().enumerate();
        let elsewhere: u64 = shards
            .filter(|&(shard, _)| shard != self.id)
            .filter_map(|(_, gauges)| gauges.keys.get(db))
            .map(|(keys, _)| keys.load(Relaxed))
            .sum();
        // Their keys borrowed here count on them (they publish lent keys too).
        elsewhere.saturating_sub(crate::mesh::script_lock::held_here(db))
    }

    fn call(
        &self,
        engine: &Engine,
        name: &str,
        args: Args<'_>,
        reply: &mut Reply<'_>,
    ) -> Option<Result<(), CmdError>> {
        match name {
            "lastsave" => {
                reply.int(self.shared.last_save_unix_s() as i64);
                return Some(Ok(()));
            }
            "info" => {
                self.info(engine, args, reply);
                return Some(Ok(()));
            }
            _ => {}
        }
        let shards = self.counted_shards();
        (self.commands.pubsub)(self.shared.subscribers(), shards, name, args, reply)
    }

    fn migrate(&self, engine: &Engine, db: usize, now_ms: u64, args: Args<'_>) -> Migrated {
        (self.commands.migrate)(self.cfg.cluster_mode(), engine, db, now_ms, args)
    }

    fn elsewhere(&self, call: Elsewhere<'_>) -> Result<Vec<Vec<u8>>, Reach> {
        match self.mode {
            PortMode::Forward => crate::mesh::script_lock::elsewhere(self.script_server(), call),
            // A Redis Cluster node's KEYS and FLUSH* are its own.
            PortMode::PerShard => Ok(Vec::new()),
        }
    }

    fn spread(
        &self,
        call: Spreading<'_>,
        here: &mut dyn FnMut(Args<'_>) -> Vec<u8>,
    ) -> Result<Vec<u8>, Reach> {
        match self.mode {
            PortMode::Forward => crate::mesh::script_lock::spread(self.script_server(), call, here),
            // A Redis Cluster node's SCAN and RANDOMKEY are its own.
            PortMode::PerShard => Ok(here(call.call.args)),
        }
    }

    fn reach(&self, engine: &mut Engine, call: Reaching<'_>) -> Reach {
        // Redis Cluster's rule: a node's scripts see its own slots only.
        let local = |key: &&[u8]| {
            let slot = ruvio_engine::slot::key_slot(key);
            self.slots.contains(slot)
        };
        match self.mode {
            // A forward-mode node: its slots, wherever inside it they are.
            PortMode::Forward if self.is_node() && !call.keys.iter().all(local) => Reach::Refused,
            PortMode::Forward => {
                crate::mesh::script_lock::reach(self.script_server(), engine, call)
            }
            PortMode::PerShard => match call.keys.iter().all(local) {
                true => Reach::Here,
                false => Reach::Refused,
            },
        }
    }
}
