//! What a cluster node knows of the cluster and how bus messages change it: the
//! node table, the slot owners, the epochs, handshakes, gossip, failure reports
//! and FAIL, as Redis 7's `cluster.c` keeps them (`clusterProcessPacket`,
//! `clusterProcessGossipSection`, `clusterUpdateSlotsConfigWith`,
//! `clusterHandleConfigEpochCollision`, `markNodeAsFailingIfNeeded`,
//! `clusterCron`).
//!
//! Sans I/O on purpose: [`Cluster`] never touches a socket or a clock. The caller
//! tells it what happened (a link accepted or closed, a message read, a tick of
//! the cron with the time) and performs the [`Action`]s it returns (connect,
//! send, close, save nodes.conf, deliver a PUBLISH). So the whole protocol runs
//! the same under a test's threads (tests/cluster_membership.rs puts two of them
//! in one cluster with a real redis-server) and, later, on a shard's loop, and a
//! reader sees the rules without the plumbing.
//!
//! Files: the node table, messages, gossip, slots and epochs here; failure
//! detection and the failover election in `membership_failure.rs`; the
//! operator's changes and the start from nodes.conf in `membership_admin.rs`;
//! CLUSTER NODES and nodes.conf's text in `membership_show.rs`.
//!
//! Shard ids (Redis 7.2): every node has one, random when the node is created,
//! as its name is; a replica takes its master's (CLUSTER REPLICATE, or when it
//! learns whom it follows) and keeps it when promoted. Each PING/PONG/MEET
//! carries the sender's as extension type 3, but only to a node that said it
//! reads extensions (the `MFLAG_EXT_DATA` every Ruvio and Redis 7.2.7+ header
//! carries): Redis 7.0 logs a warning for every unknown extension it reads, and
//! sets the flag only when it sends a hostname, so a 7.0 peer without one is
//! never sent the id (Redis 7.2.7's `nodeSupportsExtensions`).

use super::bus::message::{
    node_flags as flag, set_slot_bit, Body, Extension, Gossip, Header, Kind, Message, NodeName,
    MFLAG_EXT_DATA, MFLAG_PAUSED, NAME_LEN, SLOT_BYTES,
};
use std::collections::{BTreeMap, HashMap};

/// A link: one TCP connection of the bus, numbered by the cluster.
pub type LinkId = u64;

/// What the caller must do for the cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Open link `link` to `ip:cport`; messages sent on it before it is connected
    /// wait for the connection. If it fails, call [`Cluster::link_closed`].
    Connect {
        link: LinkId,
        ip: String,
        cport: u16,
    },
    /// Write `message` on `link`.
    Send { link: LinkId, message: Box<Message> },
    /// Close `link` (nothing more is read from it).
    Close { link: LinkId },
    /// The node table changed: write nodes.conf (atomically).
    SaveConfig,
    /// A PUBLISH from the bus, for this node's subscribers.
    Publish { channel: Vec<u8>, message: Vec<u8> },
    /// Hold clients' writes until Unix ms `until` (a replica's CLUSTER
    /// FAILOVER: its master stops its stream while the replica catches up).
    PauseWrites { until: u64 },
    /// Let them go again (the manual failover ended).
    Unpause,
}

/// How this node is reached and how patient it is.
#[derive(Clone, Debug)]
pub struct Settings {
    pub name: NodeName,
    pub ip: String,
    /// The ports it announces (`cluster-announce-*port` or the real ones:
    /// `config::cluster::AnnouncedPorts`): client port, plain client port when
    /// that one is TLS (else 0), bus port.
    pub port: u16,
    pub pport: u16,
    pub cport: u16,
    /// `cluster-node-timeout`, milliseconds.
    pub node_timeout: u64,
    /// Seeds the node's random choices (handshake names, whom to ping).
    pub seed: u64,
}

/// A node as this one knows it.
#[derive(Clone, Debug)]
pub struct Node {
    pub name: NodeName,
    pub ip: String,
    pub port: u16,
    pub cport: u16,
    pub pport: u16,
    /// `node_flags` bits.
    pub flags: u16,
    /// Its shard: 40 hex characters its master and replicas share.
    pub shard_id: NodeName,
    /// It sent a message with `MFLAG_EXT_DATA`: it reads PING extensions.
    pub supports_extensions: bool,
    /// Its `cluster-announce-hostname` ("": none), from its PINGs' hostname
    /// extension.
    pub hostname: String,
    /// The master of a replica, by index.
    pub master: Option<usize>,
    pub config_epoch: u64,
    pub repl_offset: u64,
    /// Unix ms: when this node learnt of it, sent the PING still unanswered (0:
    /// none), heard a PONG, heard anything, saw it FAIL.
    pub created: u64,
    pub ping_sent: u64,
    pub pong_received: u64,
    pub data_received: u64,
    pub fail_time: u64,
    /// The link this node opened to it, and when.
    pub link: Option<(LinkId, u64)>,
    /// Masters that said it is failing, and when they last said so.
    pub fail_reports: Vec<(usize, u64)>,
    /// Unix ms this node last voted for a replica of it (a master).
    pub voted_time: u64,
    /// Unix ms it was first seen orphaned: a master without a working replica
    /// that was meant to have one (0: not orphaned).
    pub orphaned_since: u64,
}

impl Node {
    fn new(name: NodeName, ip: &str, port: u16, cport: u16, flags: u16, now: u64) -> Node {
        Node {
            name,
            ip: ip.to_string(),
            port,
            cport,
            pport: 0,
            flags,
            // None yet: `Cluster::add_node` draws one, as Redis's
            // `createClusterNode` does.
            shard_id: [0; NAME_LEN],
            supports_extensions: false,
            hostname: String::new(),
            master: None,
            config_epoch: 0,
            repl_offset: 0,
            created: now,
            ping_sent: 0,
            pong_received: 0,
            data_received: 0,
            fail_time: 0,
            link: None,
            fail_reports: Vec::new(),
            voted_time: 0,
            orphaned_since: 0,
        }
    }

    fn has(&self, bits: u16) -> bool {
        self.flags & bits != 0
    }

    pub fn is_master(&self) -> bool {
        self.has(flag::MASTER)
    }
}

/// The state the cron's cluster-state check keeps (`CLUSTER_OK`/`CLUSTER_FAIL`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    Ok,
    Fail,
}

/// Slots without an owner.
const NO_OWNER: u32 = u32::MAX;

/// One node's view of the cluster.
pub struct Cluster {
    settings: Settings,
    /// Nodes by index; a forgotten node leaves `None` (indexes stay stable, so
    /// slot owners and links never point at the wrong node).
    nodes: Vec<Option<Node>>,
    by_name: HashMap<NodeName, usize>,
    /// The owner of each slot (an index into `nodes`).
    owners: Vec<u32>,
    pub current_epoch: u64,
    pub last_vote_epoch: u64,
    pub state: State,
    /// Each open link and the node it belongs to, when known.
    links: HashMap<LinkId, Option<usize>>,
    next_link: LinkId,
    cron_runs: u64,
    random: u64,
    /// A replica's election for its failed master (`failover_auth_*`).
    election: Election,
    /// CLUSTER FAILOVER under way, on the replica or its master (`mf_*`).
    manual: ManualFailover,
    /// Counts the changes of what routing reads (a slot's owner, a node's
    /// address, the cluster state), so a reader rebuilds its slot map only when
    /// it moved ([`Cluster::generation`]).
    generation: u64,
    /// Actions of an operator's change (FORGET, RESET) for the next step.
    pending: Vec<Action>,
    /// This node's address is `cluster-announce-ip`, sent in every header
    /// (else the peers take the address its connections come from).
    announces_ip: bool,
    /// `cluster-require-full-coverage`: a slot without a live owner makes the
    /// cluster down.
    require_full_coverage: bool,
    /// CLUSTER SETSLOT MIGRATING: this node's slots moving, to whom.
    migrating: BTreeMap<u16, usize>,
    /// CLUSTER SETSLOT IMPORTING: slots moving here, from whom.
    importing: BTreeMap<u16, usize>,
    /// What a replica's failover and replica migration obey.
    rules: FailoverRules,
    /// The replication link to this node's master: `None` while it runs,
    /// else the Unix ms it stopped ([`Cluster::set_master_link`]).
    master_link_down_since: Option<u64>,
    /// Why this replica last could not fail over, and when that was logged.
    cant_failover: CantFailover,
    /// Nodes CLUSTER FORGET dropped, until the Unix ms gossip may bring them
    /// back (Redis's node blacklist).
    forgotten: HashMap<NodeName, u64>,
}

/// This node's own index in `nodes`.
const MYSELF: usize = 0;

impl Cluster {
    /// A node alone in its cluster, a master without slots (as a redis-server
    /// started with `cluster-enabled yes` and no nodes.conf).
    pub fn new(settings: Settings, now: u64) -> Cluster {
        let mut me = Node::new(
            settings.name,
            &settings.ip,
            settings.port,
            settings.cport,
            flag::MYSELF | flag::MASTER,
            now,
        );
        me.pport = settings.pport;
        let random = settings.seed | 1;
        let mut cluster = Cluster {
            by_name: HashMap::from([(settings.name, MYSELF)]),
            settings,
            nodes: vec![Some(me)],
            owners: vec![NO_OWNER; SLOT_BYTES * 8],
            current_epoch: 0,
            last_vote_epoch: 0,
            state: State::Fail,
            links: HashMap::new(),
            next_link: 1,
            cron_runs: 0,
            random,
            election: Election::default(),
            manual: ManualFailover::default(),
            generation: 0,
            pending: Vec::new(),
            announces_ip: false,
            require_full_coverage: true,
            migrating: BTreeMap::new(),
            importing: BTreeMap::new(),
            rules: FailoverRules::default(),
            master_link_down_since: None,
            cant_failover: CantFailover::default(),
            forgotten: HashMap::new(),
        };
        cluster.node_mut(MYSELF).shard_id = cluster.random_name();
        cluster.update_state();
        cluster
    }

    fn node(&self, i: usize) -> &Node {
        self.nodes[i].as_ref().expect("a live node index")
    }

    fn node_mut(&mut self, i: usize) -> &mut Node {
        self.nodes[i].as_mut().expect("a live node index")
    }

    fn live(&self) -> impl Iterator<Item = (usize, &Node)> {
        self.nodes
            .iter()
            .enumerate()
            .filter_map(|(i, n)| n.as_ref().map(|n| (i, n)))
    }

    fn lookup(&self, name: &NodeName) -> Option<usize> {
        self.by_name.get(name).copied()
    }

    fn next_random(&mut self) -> u64 {
        // xorshift64*: enough for names and picks, no dependency.
        let mut x = self.random;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.random = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn random_name(&mut self) -> NodeName {
        let mut name = [0; NAME_LEN];
        for chunk in name.chunks_mut(16) {
            let hex = format!("{:016x}", self.next_random());
            chunk.copy_from_slice(&hex.as_bytes()[..chunk.len()]);
        }
        name
    }

    /// Adds `node`, with a random shard id unless it has one.
    fn add_node(&mut self, mut node: Node) -> usize {
        let name = node.name;
        if node.shard_id == [0; NAME_LEN] {
            node.shard_id = self.random_name();
        }
        self.nodes.push(Some(node));
        let i = self.nodes.len() - 1;
        self.by_name.insert(name, i);
        i
    }

    /// Forgets node `i`: its slots lose their owner, its links close.
    fn delete_node(&mut self, i: usize, actions: &mut Vec<Action>) {
        let Some(node) = self.nodes[i].take() else {
            return;
        };
        self.by_name.remove(&node.name);
        self.generation += 1;
        self.forget_in_flight(i);
        for owner in self.owners.iter_mut().filter(|o| **o == i as u32) {
            *owner = NO_OWNER;
        }
        for (link, of) in self.links.iter_mut() {
            if *of == Some(i) {
                *of = None;
                actions.push(Action::Close { link: *link });
            }
        }
        for other in self.nodes.iter_mut().flatten() {
            other.fail_reports.retain(|(by, _)| *by != i);
            if other.master == Some(i) {
                other.master = None;
            }
        }
    }

    // --- what the caller reports -------------------------------------------------

    /// CLUSTER MEET: a handshake with `ip:port` (bus port `cport`) starts at the
    /// next cron run. False when one with that address is already going on.
    pub fn meet(&mut self, ip: &str, port: u16, cport: u16, now: u64) -> bool {
        let busy = self.live().any(|(_, n)| {
            n.has(flag::HANDSHAKE) && n.ip == ip && n.port == port && n.cport == cport
        });
        if busy {
            return false;
        }
        let name = self.random_name();
        let node = Node::new(name, ip, port, cport, flag::HANDSHAKE | flag::MEET, now);
        self.add_node(node);
        true
    }

    /// CLUSTER ADDSLOTS on this node (the caller checked the slots are free).
    pub fn add_slots(&mut self, slots: impl IntoIterator<Item = u16>) {
        for slot in slots {
            self.owners[usize::from(slot)] = MYSELF as u32;
        }
        self.update_state();
    }

    /// A connection accepted on the bus port.
    pub fn accepted(&mut self) -> LinkId {
        let link = self.next_link;
        self.next_link += 1;
        self.links.insert(link, None);
        link
    }

    /// A link ended (closed by the peer, a failed connect, an error).
    pub fn link_closed(&mut self, link: LinkId) {
        if let Some(Some(i)) = self.links.remove(&link) {
            if let Some(node) = self.nodes[i].as_mut() {
                if node.link.map(|(l, _)| l) == Some(link) {
                    node.link = None;
                }
            }
        }
    }

    /// A message read from `link`, whose peer's address is `peer_ip`.
    pub fn on_message(
        &mut self,
        link: LinkId,
        message: &Message,
        peer_ip: &str,
        now: u64,
    ) -> Vec<Action> {
        let mut actions = Vec::new();
        self.process(link, message, peer_ip, now, &mut actions);
        actions
    }

    /// Redis's `clusterCron`, to be called every 100 ms.
    pub fn cron(&mut self, now: u64) -> Vec<Action> {
        let mut actions = Vec::new();
        self.cron_runs += 1;
        let timeout = self.settings.node_timeout;
        let handshake_timeout = timeout.max(1000);
        let indexes: Vec<usize> = self.live().map(|(i, _)| i).collect();
        for &i in &indexes {
            let node = self.node(i);
            if i == MYSELF || node.has(flag::NOADDR) {
                continue;
            }
            if node.has(flag::HANDSHAKE) && now.saturating_sub(node.created) > handshake_timeout {
                self.delete_node(i, &mut actions);
                continue;
            }
            if node.link.is_none() {
                let (ip, cport, meet) = (node.ip.clone(), node.cport, node.has(flag::MEET));
                let old_ping = node.ping_sent;
                let link = self.accepted();
                self.links.insert(link, Some(i));
                let node = self.node_mut(i);
                node.link = Some((link, now));
                actions.push(Action::Connect { link, ip, cport });
                let kind = if meet { Kind::Meet } else { Kind::Ping };
                self.send_ping(link, kind, Some(i), now, &mut actions);
                let node = self.node_mut(i);
                if old_ping != 0 {
                    node.ping_sent = old_ping;
                }
                node.flags &= !flag::MEET;
            }
        }
        if self.cron_runs.is_multiple_of(10) {
            // Once a second, PING the node heard from longest ago of five random ones.
            let candidates: Vec<usize> = indexes
                .iter()
                .copied()
                .filter(|&i| self.nodes[i].is_some())
                .collect();
            let mut oldest: Option<usize> = None;
            for _ in 0..5 {
                if candidates.is_empty() {
                    break;
                }
                let pick = candidates[(self.next_random() % candidates.len() as u64) as usize];
                let node = self.node(pick);
                if pick == MYSELF
                    || node.link.is_none()
                    || node.ping_sent != 0
                    || node.has(flag::HANDSHAKE)
                {
                    continue;
                }
                if oldest.is_none_or(|o| node.pong_received < self.node(o).pong_received) {
                    oldest = Some(pick);
                }
            }
            if let Some(i) = oldest {
                let (link, _) = self.node(i).link.expect("checked");
                self.send_ping(link, Kind::Ping, Some(i), now, &mut actions);
            }
        }
        self.detect_failures(&indexes, now, &mut actions);
        self.manual_failover_cron(now, &mut actions);
        self.run_election(now, &mut actions);
        self.migrate_to_orphans_if_needed(now, &mut actions);
        actions
    }

    // --- messages ---------------------------------------------------------------

    fn process(
        &mut self,
        link: LinkId,
        message: &Message,
        peer_ip: &str,
        now: u64,
        actions: &mut Vec<Action>,
    ) {
        let header = &message.header;
        let kind = message.kind;
        let mut sender = self
            .lookup(&header.sender)
            .filter(|&s| !self.node(s).has(flag::HANDSHAKE));
        if let Some(s) = sender {
            // An inbound link belongs to its sender once it is known.
            if let Some(of @ None) = self.links.get_mut(&link) {
                *of = Some(s);
            }
            if s != MYSELF {
                let node = self.node_mut(s);
                node.data_received = now;
                if header.config_epoch > node.config_epoch {
                    node.config_epoch = header.config_epoch;
                    actions.push(Action::SaveConfig);
                }
                node.repl_offset = header.offset;
                node.supports_extensions |= header.mflags[0] & MFLAG_EXT_DATA != 0;
                if header.current_epoch > self.current_epoch {
                    self.current_epoch = header.current_epoch;
                    actions.push(Action::SaveConfig);
                }
                if header.mflags[0] & MFLAG_PAUSED != 0 {
                    self.master_paused(s, header.offset);
                }
            }
        }
        if matches!(kind, Kind::Ping | Kind::Meet) {
            if sender.is_none() && kind == Kind::Meet {
                let ip = if header.ip.is_empty() {
                    peer_ip.to_string()
                } else {
                    String::from_utf8_lossy(&header.ip).into_owned()
                };
                let name = self.random_name();
                let mut node =
                    Node::new(name, &ip, header.port, header.cport, flag::HANDSHAKE, now);
                node.pport = header.pport;
                self.add_node(node);
                if let Body::Ping { gossip, .. } = &message.body {
                    self.process_gossip(None, gossip, now, actions);
                }
                actions.push(Action::SaveConfig);
            }
            self.send_ping(link, Kind::Pong, None, now, actions);
        }
        if kind.is_ping_like() {
            // The node this link was opened to (outbound links only).
            let target = self
                .links
                .get(&link)
                .copied()
                .flatten()
                .filter(|&i| self.node(i).link.map(|(l, _)| l) == Some(link));
            if let Some(t) = target {
                if self.node(t).has(flag::HANDSHAKE) {
                    if let Some(known) = sender {
                        // Met again under an address it had: keep the known one.
                        let node = self.node_mut(known);
                        if node.ip != peer_ip && !peer_ip.is_empty() {
                            node.ip = peer_ip.to_string();
                            self.generation += 1;
                        }
                        self.delete_node(t, actions);
                        return;
                    }
                    self.rename(t, header.sender);
                    let node = self.node_mut(t);
                    node.flags &= !flag::HANDSHAKE;
                    node.flags |= header.flags & (flag::MASTER | flag::REPLICA);
                    actions.push(Action::SaveConfig);
                } else if self.node(t).name != header.sender {
                    // The node at this address changed its name: forget the address.
                    let node = self.node_mut(t);
                    node.flags |= flag::NOADDR;
                    node.ip.clear();
                    node.port = 0;
                    node.cport = 0;
                    node.link = None;
                    self.links.remove(&link);
                    self.generation += 1;
                    actions.push(Action::Close { link });
                    actions.push(Action::SaveConfig);
                    return;
                }
            }
            sender = self
                .lookup(&header.sender)
                .filter(|&s| !self.node(s).has(flag::HANDSHAKE));
            if let Some(t) = target.filter(|&t| kind == Kind::Pong && self.nodes[t].is_some()) {
                let node = self.node_mut(t);
                node.pong_received = now;
                node.ping_sent = 0;
                if node.has(flag::PFAIL) {
                    node.flags &= !flag::PFAIL;
                    self.update_state();
                } else if node.has(flag::FAIL) {
                    self.clear_failure_if_needed(t, now, actions);
                }
            }
            if let Some(s) = sender.filter(|&s| s != MYSELF) {
                // Also a node just out of its handshake (not yet `sender` above).
                self.node_mut(s).supports_extensions |= header.mflags[0] & MFLAG_EXT_DATA != 0;
                if kind == Kind::Ping {
                    self.update_address_if_needed(s, link, header, peer_ip, actions);
                }
                self.update_role(s, header, actions);
                // Whether it may fail over is the sender's own say (its
                // `cluster-replica-no-failover`), as Redis copies it.
                let node = self.node_mut(s);
                node.flags = (node.flags & !flag::NOFAILOVER) | (header.flags & flag::NOFAILOVER);
                let claims_master = self.node(s).is_master();
                if claims_master && self.slots_of(s) != *header.slots {
                    self.update_slots_with(s, header.config_epoch, &header.slots, actions);
                    self.answer_stale_claim(link, s, header, actions);
                }
                self.handle_epoch_collision(s, actions);
                if let Body::Ping { gossip, extensions } = &message.body {
                    self.process_gossip(Some(s), gossip, now, actions);
                    self.process_extensions(s, extensions, actions);
                }
            }
            if sender.is_none() {
                self.ignore_unknown_claim(kind, header);
            }
            return;
        }
        let Some(s) = sender else {
            // FAIL, UPDATE, PUBLISH and the votes count only from a node this
            // one knows.
            self.ignore_unknown_sender(message);
            return;
        };
        match &message.body {
            Body::Empty if kind == Kind::FailoverAuthRequest => {
                self.vote_if_needed(s, header, now, actions);
            }
            Body::Empty if kind == Kind::MfStart => {
                self.manual_failover_requested(s, link, now, actions);
            }
            Body::Empty if kind == Kind::FailoverAuthAck => {
                let voter = self.node(s);
                if voter.is_master()
                    && self.owners.contains(&(s as u32))
                    && header.current_epoch >= self.election.epoch
                {
                    self.election.votes += 1;
                }
            }
            Body::Fail { node } if kind == Kind::Fail => {
                let failing = self
                    .lookup(node)
                    .filter(|&f| f != MYSELF && !self.node(f).has(flag::FAIL));
                if let Some(f) = failing {
                    let failing = self.node_mut(f);
                    failing.flags = (failing.flags | flag::FAIL) & !flag::PFAIL;
                    failing.fail_time = now;
                    self.update_state();
                    actions.push(Action::SaveConfig);
                }
            }
            Body::Update {
                config_epoch,
                node,
                slots,
            } => self.on_update(*config_epoch, node, slots, actions),
            Body::Publish { channel, message } => actions.push(Action::Publish {
                channel: channel.clone(),
                message: message.clone(),
            }),
            // Manual failover (MFSTART) and modules: not handled yet.
            _ => {}
        }
    }

    /// `nodeUpdateAddressIfNeeded`: a known node PINGing from another address
    /// (a restart elsewhere) is reached there from now on; its old link goes.
    /// Not from the link this node opened to it (that address is the known one).
    fn update_address_if_needed(
        &mut self,
        s: usize,
        link: LinkId,
        header: &Header,
        peer_ip: &str,
        actions: &mut Vec<Action>,
    ) {
        let ip = match header.ip.is_empty() {
            true => peer_ip.to_string(),
            false => String::from_utf8_lossy(&header.ip).into_owned(),
        };
        let node = self.node(s);
        let same = node.ip == ip
            && node.port == header.port
            && node.pport == header.pport
            && node.cport == header.cport;
        if same || node.link.map(|(l, _)| l) == Some(link) || ip.is_empty() {
            return;
        }
        let node = self.node_mut(s);
        (node.ip, node.port, node.pport, node.cport) =
            (ip, header.port, header.pport, header.cport);
        node.flags &= !flag::NOADDR;
        if let Some((old, _)) = node.link.take() {
            self.links.remove(&old);
            actions.push(Action::Close { link: old });
        }
        self.generation += 1;
        actions.push(Action::SaveConfig);
    }

    /// `clusterProcessPingExt`: the sender's hostname (none when it sent
    /// none, as Redis 7.0's `updateAnnouncedHostname`); its shard id, from its
    /// extension, or else (a node that sends none: Redis 7.0) its master's, or
    /// its own.
    fn process_extensions(
        &mut self,
        s: usize,
        extensions: &[Extension],
        actions: &mut Vec<Action>,
    ) {
        // Only what `cluster-announce-hostname` accepts: a name a peer could
        // not have been given would break the CLUSTER NODES line.
        let hostname = extensions.iter().find_map(|e| match e {
            Extension::Hostname(name) => std::str::from_utf8(name)
                .ok()
                .filter(|name| crate::config::params::announced_hostname(name).is_ok())
                .map(str::to_string),
            _ => None,
        });
        if self.set_hostname(s, hostname.unwrap_or_default()) {
            actions.push(Action::SaveConfig);
        }
        let sent = extensions.iter().find_map(|e| match e {
            Extension::ShardId(id) => Some(*id),
            _ => None,
        });
        let node = self.node(s);
        let master = node.master.filter(|_| !node.is_master());
        let id = sent.unwrap_or_else(|| {
            master
                .and_then(|m| self.nodes[m].as_ref())
                .map_or(node.shard_id, |m| m.shard_id)
        });
        self.update_shard_id(s, id, actions);
    }

    /// `updateShardId`: node `i` is in shard `id`, and so is this node when `i`
    /// is its master (a replica follows its master's shard).
    pub(super) fn update_shard_id(&mut self, i: usize, id: NodeName, actions: &mut Vec<Action>) {
        if self.node(i).shard_id != id {
            self.node_mut(i).shard_id = id;
            actions.push(Action::SaveConfig);
        }
        let me = self.node(MYSELF);
        if i != MYSELF && me.master == Some(i) && me.shard_id != id {
            self.node_mut(MYSELF).shard_id = id;
            actions.push(Action::SaveConfig);
        }
    }

    /// This node now follows `m` (Redis's `clusterSetMaster`): it joins `m`'s
    /// shard.
    pub(super) fn join_shard_of(&mut self, m: usize) {
        self.node_mut(MYSELF).shard_id = self.node(m).shard_id;
    }

    fn rename(&mut self, i: usize, name: NodeName) {
        let old = self.node(i).name;
        self.by_name.remove(&old);
        self.node_mut(i).name = name;
        self.by_name.insert(name, i);
    }

    pub(super) fn set_master_role(&mut self, i: usize) {
        let node = self.node_mut(i);
        if node.master.is_some() && i != MYSELF {
            // A promoted replica: meant to have replicas (replica migration).
            node.flags |= flag::MIGRATE_TO;
        }
        node.flags = (node.flags | flag::MASTER) & !flag::REPLICA;
        node.master = None;
    }

    /// A PING/PONG says whether its sender is a master or whose replica it is.
    fn update_role(&mut self, s: usize, header: &Header, actions: &mut Vec<Action>) {
        if header.replica_of == [0; NAME_LEN] {
            if !self.node(s).is_master() {
                self.set_master_role(s);
                actions.push(Action::SaveConfig);
            }
            return;
        }
        let master = self.lookup(&header.replica_of);
        let node = self.node(s);
        if node.is_master() || node.master != master {
            let node = self.node_mut(s);
            node.flags = (node.flags | flag::REPLICA) & !flag::MASTER;
            node.master = master;
            for owner in self.owners.iter_mut().filter(|o| **o == s as u32) {
                *owner = NO_OWNER;
            }
            if let Some(m) = master {
                // A replica joins its master's shard (Redis 7.2 does it when
                // it first learns the master).
                self.update_shard_id(s, self.node(m).shard_id, actions);
            }
            self.update_state();
            actions.push(Action::SaveConfig);
        }
    }

    /// The slots node `i` owns as a bitmap.
    pub(super) fn slots_of(&self, i: usize) -> [u8; SLOT_BYTES] {
        let mut slots = [0; SLOT_BYTES];
        for (slot, owner) in self.owners.iter().enumerate() {
            if *owner == i as u32 {
                set_slot_bit(&mut slots, slot as u16);
            }
        }
        slots
    }

    /// `clusterProcessGossipSection`: failure reports from masters, fresher PONG
    /// times, and nodes this one did not know (added under their own names).
    fn process_gossip(
        &mut self,
        sender: Option<usize>,
        gossip: &[Gossip],
        now: u64,
        actions: &mut Vec<Action>,
    ) {
        for entry in gossip {
            match self.lookup(&entry.name) {
                Some(n) => {
                    let reporter = sender.filter(|&s| self.node(s).is_master() && n != MYSELF);
                    if let Some(s) = reporter {
                        let failing = entry.flags & (flag::FAIL | flag::PFAIL) != 0;
                        let reports = &mut self.node_mut(n).fail_reports;
                        reports.retain(|(by, _)| *by != s);
                        if failing {
                            reports.push((s, now));
                            self.mark_failing_if_needed(n, now, actions);
                        }
                    }
                    let node = self.node(n);
                    let fine = entry.flags & (flag::FAIL | flag::PFAIL) == 0;
                    let pong = u64::from(entry.pong_received) * 1000;
                    if n != MYSELF
                        && fine
                        && node.ping_sent == 0
                        && node.fail_reports.is_empty()
                        && pong <= now + 500
                        && pong > node.pong_received
                    {
                        self.node_mut(n).pong_received = pong;
                    }
                }
                None => {
                    if sender.is_some()
                        && entry.flags & flag::NOADDR == 0
                        && entry.name != [0; NAME_LEN]
                        && !self.forgotten_lately(&entry.name, now)
                    {
                        let ip = String::from_utf8_lossy(&entry.ip).into_owned();
                        let flags = entry.flags & !(flag::MYSELF | flag::MEET);
                        let mut node =
                            Node::new(entry.name, &ip, entry.port, entry.cport, flags, now);
                        node.pport = entry.pport;
                        self.add_node(node);
                        actions.push(Action::SaveConfig);
                    }
                }
            }
        }
    }

    /// `clusterUpdateState`: ok when every slot is served by a node not failing
    /// and this node sees a majority of the serving masters.
    fn update_state(&mut self) {
        // One pass over the 16,384 owners (a SETSLOT runs this).
        let mut serving = vec![false; self.nodes.len()];
        let mut every_slot_up = true;
        for &owner in &self.owners {
            match self.nodes.get(owner as usize).and_then(Option::as_ref) {
                Some(node) => {
                    serving[owner as usize] = true;
                    every_slot_up &= !node.has(flag::FAIL);
                }
                None => every_slot_up = false,
            }
        }
        let covered = !self.require_full_coverage || every_slot_up;
        let size = self.size();
        let reachable = serving
            .iter()
            .enumerate()
            .filter(|(i, s)| **s && !self.node(*i).has(flag::FAIL | flag::PFAIL))
            .count();
        self.state = if covered && reachable > size / 2 {
            State::Ok
        } else {
            State::Fail
        };
        self.generation += 1;
    }

    /// Changes so far of what routing reads: slot owners, node addresses, the
    /// cluster state. Equal numbers mean an unchanged slot map.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The owner of `slot`: its name and client address.
    pub fn slot_owner(&self, slot: u16) -> Option<(NodeName, &str, u16)> {
        self.slot_owner_index(slot)
            .and_then(|i| self.node_address(i))
    }

    /// The owner of `slot` as its place in the node table (the same node for
    /// every slot it owns until the next [`Cluster::generation`]), for a caller
    /// that resolves each owner once rather than once per slot.
    pub fn slot_owner_index(&self, slot: u16) -> Option<usize> {
        let owner = *self.owners.get(usize::from(slot))? as usize;
        self.nodes.get(owner)?.as_ref().map(|_| owner)
    }

    /// The name and address of the node at `index` of the node table.
    pub fn node_address(&self, index: usize) -> Option<(NodeName, &str, u16)> {
        let node = self.node_at(index)?;
        Some((node.name, node.ip.as_str(), node.port))
    }

    /// The node at `index` of the node table (its client addresses: `ip`,
    /// `port`, `pport` under `tls-cluster`, `hostname`).
    pub fn node_at(&self, index: usize) -> Option<&Node> {
        self.nodes.get(index)?.as_ref()
    }

    /// This node's name.
    pub fn myself(&self) -> NodeName {
        self.node(MYSELF).name
    }

    /// This node's shard id (CLUSTER MYSHARDID).
    pub fn my_shard_id(&self) -> NodeName {
        self.node(MYSELF).shard_id
    }
}

/// CLUSTER NODES and nodes.conf from the table.
#[path = "membership_show.rs"]
mod show;

/// Failure detection (PFAIL to FAIL, FAIL lifted) and failover by election
/// (a replica's, and a master's vote).
#[path = "membership_failure.rs"]
mod failure;
pub use failure::FailoverRules;
use failure::{CantFailover, Election};

/// The replica's side: whom it follows, its offset, a master that lost its
/// slots following their new owner, CLUSTER FAILOVER and MFSTART.
#[path = "membership_replica.rs"]
mod replica;
pub use replica::FailoverMode;
use replica::ManualFailover;

/// Claims on slots and epochs from other nodes: a stale claim answered with
/// an UPDATE, an UPDATE taken or refused, epoch collisions, and what comes
/// from nodes this one does not know.
#[path = "membership_claims.rs"]
mod claims;

/// Replica migration: a replica moving to a master left without one.
#[path = "membership_orphans.rs"]
mod orphans;

/// CLUSTER SETSLOT: slots migrating and importing.
#[path = "membership_migration.rs"]
mod migration;
pub use migration::SetSlot;

/// What an operator's CLUSTER subcommands change (slots, epochs, FORGET, RESET)
/// and the start from a nodes.conf.
#[path = "membership_admin.rs"]
mod admin;

#[path = "membership_send.rs"]
mod send;

#[cfg(test)]
#[path = "membership_tests.rs"]
mod tests;
