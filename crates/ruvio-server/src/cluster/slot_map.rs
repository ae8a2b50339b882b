//! What routing reads of a node of the cluster bus: each slot's owner as one
//! array entry ([`SlotMap`]), the slots in flight, and the node's routing
//! settings ([`NodeRoutes`]).
//!
//! Why apart from the membership: routing runs on every keyed command and must
//! stay one array lookup, and in forward mode it runs on every shard of the
//! process while the membership lives on shard 0 alone (docs/cluster.md). The
//! map is plain data, built from the membership only when its
//! [`Cluster::generation`] moved, so shard 0 can hand each other shard a copy
//! (an `Arc`) instead of the membership.

use super::membership::{Cluster, Node, State};
use super::node::ServedSlots;
use crate::config::cluster::Endpoint;
use ruvio_engine::slot::SLOT_COUNT;
use ruvio_engine::CmdError;
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;
use std::sync::Arc;

/// The map's entries past the targets' indexes.
const SLOT_HERE: u16 = u16::MAX;
const SLOT_UNBOUND: u16 = u16::MAX - 1;

/// Where a keyed command of a slot goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SlotRoute {
    /// This node serves it.
    Here,
    /// Another node does: its index in [`SlotMap::target`].
    Moved(u16),
    /// No node serves it (`-CLUSTERDOWN Hash slot not served`).
    Unbound,
    /// The cluster is down (`-CLUSTERDOWN The cluster is down`).
    Down,
}

/// Where a client is sent: a node's address as its bus header gives it.
/// Under the node's `tls-cluster yes` `port` is its TLS port and `pport` its
/// plain one (0 otherwise); `hostname` its `cluster-announce-hostname`.
#[derive(Clone, Debug, PartialEq, Eq)]
struct ClientAddress {
    ip: String,
    port: u16,
    pport: u16,
    hostname: String,
}

impl ClientAddress {
    fn of(node: &Node) -> ClientAddress {
        ClientAddress {
            ip: node.ip.clone(),
            port: node.port,
            pport: node.pport,
            hostname: node.hostname.clone(),
        }
    }

    /// The address a client is told: the endpoint this node prefers
    /// (`cluster-preferred-endpoint-type`), and the plain port to a plain
    /// client while this node runs `tls-cluster yes` (`plain`), when the node
    /// has one (Redis's `clusterRedirectClient`).
    fn told(&self, endpoint: Endpoint, plain: bool) -> (&str, u16) {
        let host = endpoint.of(&self.ip, &self.hostname);
        match plain && self.pport != 0 {
            true => (host, self.pport),
            false => (host, self.port),
        }
    }
}

/// Each slot's owner as the membership of one node sees it, with the slots in
/// flight: a copy that can cross threads.
#[derive(Clone, Debug)]
pub struct SlotMap {
    /// The membership's generation it was built from.
    generation: u64,
    /// Each slot's entry: an index into `targets`, or one of `SLOT_*`.
    entries: Box<[u16]>,
    /// The cluster state was `fail` when the map was built.
    down: bool,
    /// The client addresses of the other nodes that serve slots.
    targets: Vec<ClientAddress>,
    /// SETSLOT MIGRATING: the node's slots moving out, to whose address.
    migrating: BTreeMap<u16, ClientAddress>,
    /// SETSLOT IMPORTING: slots moving in.
    importing: BTreeSet<u16>,
    /// A replica node: its master's entry (READONLY reads of its slots run).
    master: Option<u16>,
}

impl SlotMap {
    /// No slot served by anyone, the cluster down: a node before its first map.
    pub fn unbuilt() -> SlotMap {
        SlotMap {
            generation: u64::MAX,
            entries: vec![SLOT_UNBOUND; usize::from(SLOT_COUNT)].into_boxed_slice(),
            down: true,
            targets: Vec::new(),
            migrating: BTreeMap::new(),
            importing: BTreeSet::new(),
            master: None,
        }
    }

    /// The membership's generation this map was built from.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Build again from `cluster` when its generation moved; true when it did.
    pub fn follow(&mut self, cluster: &Cluster) -> bool {
        let generation = cluster.generation();
        if generation == self.generation {
            return false;
        }
        self.generation = generation;
        self.targets.clear();
        self.down = cluster.state == State::Fail;
        let myself = cluster.myself();
        let master_name = cluster.master_name();
        let (targets, master) = (&mut self.targets, &mut self.master);
        *master = None;
        // Each owner's entry worked out once, not once per slot (a SETSLOT
        // rebuilds all 16,384: name and address compares per slot cost it
        // 1.2 M instructions).
        let mut entry_of: Vec<Option<u16>> = Vec::new();
        let mut entry_for = |owner: usize| {
            let node = cluster.node_at(owner)?;
            if node.name == myself {
                return Some(SLOT_HERE);
            }
            let address = ClientAddress::of(node);
            let at = match targets.iter().position(|t| *t == address) {
                Some(at) => at,
                None => {
                    targets.push(address);
                    targets.len() - 1
                }
            };
            if master_name == Some(node.name) {
                *master = Some(at as u16);
            }
            Some(at as u16)
        };
        for slot in 0..SLOT_COUNT {
            self.entries[usize::from(slot)] = match cluster.slot_owner_index(slot) {
                None => SLOT_UNBOUND,
                Some(owner) => {
                    if entry_of.len() <= owner {
                        entry_of.resize(owner + 1, None);
                    }
                    *entry_of[owner].get_or_insert_with(|| entry_for(owner).unwrap_or(SLOT_UNBOUND))
                }
            };
        }
        self.migrating = cluster
            .migrating_slots()
            .map(|(slot, node)| (slot, ClientAddress::of(node)))
            .collect();
        self.importing = cluster.importing_slots().collect();
        true
    }

    /// Where a keyed command of `slot` goes: one array lookup.
    #[inline]
    pub fn slot_route(&self, slot: u16) -> SlotRoute {
        match self.entries[usize::from(slot) % self.entries.len()] {
            SLOT_UNBOUND => SlotRoute::Unbound,
            _ if self.down => SlotRoute::Down,
            SLOT_HERE => SlotRoute::Here,
            target => SlotRoute::Moved(target),
        }
    }

    /// The slot's owner whatever the cluster state.
    pub fn owner_route(&self, slot: u16) -> SlotRoute {
        match self.entries[usize::from(slot) % self.entries.len()] {
            SLOT_UNBOUND => SlotRoute::Unbound,
            SLOT_HERE => SlotRoute::Here,
            target => SlotRoute::Moved(target),
        }
    }

    /// The client address of a [`SlotRoute::Moved`] target by `endpoint`;
    /// `plain`: told to a plain client under `tls-cluster yes`
    /// ([`NodeRoutes::moved`]).
    pub fn target(&self, target: u16, endpoint: Endpoint, plain: bool) -> (&str, u16) {
        match self.targets.get(usize::from(target)) {
            Some(address) => address.told(endpoint, plain),
            None => ("", 0),
        }
    }

    /// The node marked `slot` MIGRATING.
    pub fn migrating(&self, slot: u16) -> bool {
        self.migrating.contains_key(&slot)
    }

    /// The address `slot` is migrating to, when the node marked it MIGRATING;
    /// `endpoint` and `plain` as for [`SlotMap::target`].
    pub fn migrating_to(&self, slot: u16, endpoint: Endpoint, plain: bool) -> Option<(&str, u16)> {
        self.migrating
            .get(&slot)
            .map(|address| address.told(endpoint, plain))
    }

    /// The cluster state was `fail` when the map was built.
    pub fn down(&self) -> bool {
        self.down
    }

    /// The node marked `slot` IMPORTING.
    pub fn importing(&self, slot: u16) -> bool {
        self.importing.contains(&slot)
    }

    /// Some slot is migrating or importing (routing looks closer only then).
    pub fn slots_in_flight(&self) -> bool {
        !self.migrating.is_empty() || !self.importing.is_empty()
    }

    /// This node is a replica and its master owns `slot`.
    pub fn my_master_serves(&self, slot: u16) -> bool {
        self.master.is_some()
            && self.master == Some(self.entries[usize::from(slot) % self.entries.len()])
    }
}

/// The client a redirection is for, as routing reads it.
#[derive(Clone, Copy, Debug)]
pub struct ClientSide {
    /// The stream of the master this node replicates.
    pub master: bool,
    /// It sent READONLY.
    pub readonly: bool,
    /// It came in on the TLS port.
    pub tls: bool,
}

/// What routing reads on one shard of a node: the slot map (the node's own, or
/// in forward mode shard 0's copy), `cluster-allow-reads-when-down`,
/// `tls-cluster`, and the slots the shard's scripts may reach. A clone shares
/// the map and the slots (a busy script's hook routes by one:
/// `shard/busy_routes.rs`).
#[derive(Clone)]
pub struct NodeRoutes {
    map: Arc<SlotMap>,
    /// `cluster-allow-reads-when-down`: a down cluster still serves reads.
    reads_when_down: bool,
    /// `tls-cluster yes`: redirections name the plain port to plain clients.
    tls_cluster: bool,
    /// `cluster-preferred-endpoint-type`: what redirections name a node by.
    endpoint: Endpoint,
    /// The slots whose entry is this node, for the shard's scripts.
    served: Rc<ServedSlots>,
}

impl NodeRoutes {
    /// Routes before any map: nothing served.
    pub fn new() -> NodeRoutes {
        NodeRoutes {
            map: Arc::new(SlotMap::unbuilt()),
            reads_when_down: false,
            tls_cluster: false,
            endpoint: Endpoint::Ip,
            served: Rc::new(ServedSlots::new()),
        }
    }

    /// The map routing reads.
    pub fn map(&self) -> &Arc<SlotMap> {
        &self.map
    }

    /// Route by `cluster`'s slots when its generation moved since the map was
    /// built; true when it did.
    pub fn follow(&mut self, cluster: &Cluster) -> bool {
        if self.map.generation == cluster.generation() {
            return false;
        }
        Arc::make_mut(&mut self.map).follow(cluster);
        self.rewrite_served();
        true
    }

    /// Route by `map` (forward mode: shard 0's copy) from the next command on.
    pub fn adopt(&mut self, map: Arc<SlotMap>) {
        self.map = map;
        self.rewrite_served();
    }

    fn rewrite_served(&self) {
        for slot in 0..SLOT_COUNT {
            let here = self.map.entries[usize::from(slot)] == SLOT_HERE;
            self.served.set(slot, here);
        }
    }

    /// Where a keyed command of `slot` goes: one array lookup.
    #[inline]
    pub fn slot_route(&self, slot: u16) -> SlotRoute {
        self.map.slot_route(slot)
    }

    /// The slot's owner whatever the cluster state (a read while the cluster
    /// is down, with `cluster-allow-reads-when-down yes`).
    pub fn owner_route(&self, slot: u16) -> SlotRoute {
        self.map.owner_route(slot)
    }

    /// `cluster-allow-reads-when-down`.
    pub fn reads_when_down(&self) -> bool {
        self.reads_when_down
    }

    /// CONFIG SET cluster-allow-reads-when-down.
    pub fn set_reads_when_down(&mut self, allowed: bool) {
        self.reads_when_down = allowed;
    }

    /// CONFIG SET tls-cluster.
    pub fn set_tls_cluster(&mut self, on: bool) {
        self.tls_cluster = on;
    }

    /// CONFIG SET cluster-preferred-endpoint-type.
    pub fn set_endpoint(&mut self, endpoint: Endpoint) {
        self.endpoint = endpoint;
    }

    /// A client of that transport is told nodes' plain ports (Redis's
    /// `use_pport`: this node runs `tls-cluster yes`, the client came in plain).
    fn tells_plain(&self, client_tls: bool) -> bool {
        self.tls_cluster && !client_tls
    }

    /// `-MOVED` to [`SlotRoute::Moved`] target `target`, as a client of that
    /// transport is told it.
    pub fn moved(&self, slot: u16, target: u16, client_tls: bool) -> CmdError {
        let plain = self.tells_plain(client_tls);
        let (host, port) = self.map.target(target, self.endpoint, plain);
        CmdError::Moved {
            slot,
            host: host.to_string(),
            port,
        }
    }

    /// `-ASK` to the node migrating `slot` goes to, as a client of that
    /// transport is told it.
    pub fn ask(&self, slot: u16, client_tls: bool) -> CmdError {
        let plain = self.tells_plain(client_tls);
        let (host, port) = self
            .map
            .migrating_to(slot, self.endpoint, plain)
            .unwrap_or(("", 0));
        CmdError::Ask {
            slot,
            host: host.to_string(),
            port,
        }
    }

    /// The slots this node serves, as the shard's scripts read them.
    pub fn served_slots(&self) -> Rc<ServedSlots> {
        self.served.clone()
    }

    /// What runs even while the cluster is down (shard channels: Redis's
    /// `cluster-allow-pubsubshard-when-down yes`, its default): here, `-MOVED`
    /// to the owner (as a client of that transport is told it), or not served.
    pub fn redirect_ignoring_state(&self, slot: u16, client_tls: bool) -> Result<(), CmdError> {
        self.moved_or_here(slot, self.owner_route(slot), client_tls)
    }

    /// Keys of `slot` (one slot, checked for CROSSSLOT before) run here, or
    /// Redis's refusal (`getNodeByQuery`'s order past the keys): the cluster
    /// down (`write`: the keys are written, refused even when reads go on
    /// while down), no owner, `-MOVED` to the owner. For what is checked
    /// apart from a command's route: MULTI's queue and EXEC, WATCH.
    pub fn redirect(&self, slot: u16, write: bool, client_tls: bool) -> Result<(), CmdError> {
        let owner = match self.slot_route(slot) {
            SlotRoute::Down if !self.reads_when_down => return Err(CmdError::ClusterDown),
            SlotRoute::Down if write => return Err(CmdError::ClusterDownReadOnly),
            SlotRoute::Down => self.owner_route(slot),
            route => route,
        };
        self.moved_or_here(slot, owner, client_tls)
    }

    fn moved_or_here(&self, slot: u16, owner: SlotRoute, client_tls: bool) -> Result<(), CmdError> {
        match owner {
            SlotRoute::Here => Ok(()),
            SlotRoute::Moved(target) => Err(self.moved(slot, target, client_tls)),
            SlotRoute::Unbound | SlotRoute::Down => Err(CmdError::SlotNotServed),
        }
    }

    /// [`Self::redirect`] for client `who`: the stream of the master this
    /// node replicates runs whatever the slot (Redis's `mustObeyClient`), and
    /// a READONLY client's reads of that master's slots run here
    /// (`getNodeByQuery`).
    pub fn redirect_client(&self, slot: u16, write: bool, who: ClientSide) -> Result<(), CmdError> {
        if who.master {
            return Ok(());
        }
        match self.redirect(slot, write, who.tls) {
            Err(CmdError::Moved { .. })
                if who.readonly && !write && self.map.my_master_serves(slot) =>
            {
                Ok(())
            }
            other => other,
        }
    }
}

impl Default for NodeRoutes {
    fn default() -> Self {
        NodeRoutes::new()
    }
}
