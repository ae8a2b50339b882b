//! What an operator changes by hand (CLUSTER ADDSLOTS, DELSLOTS, FORGET,
//! RESET, SET-CONFIG-EPOCH, BUMPEPOCH, COUNT-FAILURE-REPORTS) and the start
//! from a nodes.conf, as Redis 7's `clusterCommand` and `clusterLoadConfig` do.
//!
//! Apart from the protocol's rules (membership.rs) because none of it is said
//! on the bus: these are the node's own decisions, each followed by a save of
//! nodes.conf, and the checks whose errors a client reads are the caller's
//! (`cmd/cluster_node.rs`), which knows Redis's wording.

use super::show::FLAG_NAMES;
use super::{flag, Cluster, Node, Settings, MYSELF, NO_OWNER};
use crate::cluster::bus::message::NodeName;
use crate::cluster::nodes_file::NodesFile;

/// How long a forgotten node stays out of gossip (Redis's
/// `CLUSTER_BLACKLIST_TTL`, 60 s).
const FORGOTTEN_FOR_MS: u64 = 60_000;

/// A node line's name as a node name, when it is one (40 characters).
fn node_name(text: &str) -> Option<NodeName> {
    text.as_bytes().try_into().ok()
}

impl Cluster {
    /// The node a nodes.conf describes, as it was saved (`clusterLoadConfig`):
    /// its own name, epochs and slots, and the nodes it knew, to be reconnected
    /// by the cron. This node's address is `settings`'s (a restart may change
    /// it); a handshake in flight is not kept.
    pub fn from_file(settings: Settings, file: &NodesFile, now: u64) -> Result<Cluster, String> {
        let me = file.myself().ok_or("no myself line")?;
        let name = node_name(&me.name).ok_or("myself's name is not 40 characters")?;
        let mut cluster = Cluster::new(Settings { name, ..settings }, now);
        cluster.current_epoch = file.current_epoch;
        cluster.last_vote_epoch = file.last_vote_epoch;
        let mut indexes = Vec::with_capacity(file.nodes.len());
        for line in &file.nodes {
            let Some(name) = node_name(&line.name) else {
                return Err(format!("bad node name '{}'", line.name));
            };
            let flags = FLAG_NAMES
                .iter()
                .filter(|(_, shown)| line.has_flag(shown))
                .fold(0, |bits, (bit, _)| bits | bit);
            if flags & flag::HANDSHAKE != 0 {
                indexes.push(None);
                continue;
            }
            let i = if flags & flag::MYSELF != 0 {
                let me = cluster.node_mut(MYSELF);
                // Whether it may fail over is its setting's to say now
                // (`set_failover_rules`), not what the file kept.
                me.flags = flags & !(flag::PFAIL | flag::FAIL | flag::NOFAILOVER);
                MYSELF
            } else {
                let node = Node::new(name, &line.ip, line.port, line.cport, flags, now);
                cluster.add_node(node)
            };
            let node = cluster.node_mut(i);
            node.config_epoch = line.config_epoch;
            if let Some(id) = line.shard_id.as_deref().and_then(node_name) {
                node.shard_id = id;
            }
            node.hostname = line.hostname.clone().unwrap_or_default();
            for &(first, last) in &line.slots {
                cluster.owners[usize::from(first)..=usize::from(last)].fill(i as u32);
            }
            indexes.push(Some(i));
        }
        for (line, i) in file.nodes.iter().zip(&indexes) {
            let (Some(i), Some(master)) = (i, &line.master) else {
                continue;
            };
            let master = node_name(master).and_then(|m| cluster.lookup(&m));
            let node = cluster.node_mut(*i);
            node.master = master;
            // A replica is in its master's shard: a file without shard ids
            // (Redis 7.0's) or one saved before the replica heard its
            // master's id gets it here, as Redis 7.2's `auxShardIdSetter`.
            if let Some(m) = master {
                cluster.node_mut(*i).shard_id = cluster.node(m).shard_id;
            }
        }
        cluster.restore_in_flight(&me.migrating, &me.importing);
        cluster.update_state();
        Ok(cluster)
    }

    /// Whether `slot` has an owner (ADDSLOTS refuses it, DELSLOTS wants it).
    pub fn slot_assigned(&self, slot: u16) -> bool {
        self.owners[usize::from(slot)] != NO_OWNER
    }

    /// CLUSTER DELSLOTS: the slots lose their owner (the caller checked they
    /// had one).
    pub fn del_slots(&mut self, slots: impl IntoIterator<Item = u16>) {
        for slot in slots {
            self.owners[usize::from(slot)] = NO_OWNER;
        }
        self.update_state();
    }

    /// This node is a replica (ADDSLOTS and the like are for masters).
    pub fn is_replica(&self) -> bool {
        !self.node(MYSELF).is_master()
    }

    /// Node `i`'s hostname is `hostname` ("": none); true when that changed
    /// it (routing names hostnames: the slot map is built again).
    pub(super) fn set_hostname(&mut self, i: usize, hostname: String) -> bool {
        if self.node(i).hostname == hostname {
            return false;
        }
        self.node_mut(i).hostname = hostname;
        self.generation += 1;
        true
    }

    /// CONFIG SET cluster-announce-hostname (and the start): this node's
    /// hostname, sent in every PING/PONG/MEET from now on and kept in
    /// nodes.conf; true when it changed.
    pub fn set_own_hostname(&mut self, hostname: &str) -> bool {
        self.set_hostname(MYSELF, hostname.to_string())
    }

    /// CLUSTER FORGET dropped `name` less than a minute before `now` (the
    /// expired entries go as they are looked at, as Redis's blacklist
    /// cleans itself on every check).
    pub(super) fn forgotten_lately(&mut self, name: &NodeName, now: u64) -> bool {
        self.forgotten.retain(|_, until| *until > now);
        self.forgotten.contains_key(name)
    }

    /// CLUSTER FORGET `name`, with Redis's refusals.
    pub fn forget(&mut self, name: &[u8], now: u64) -> Result<(), String> {
        let found = <&NodeName>::try_from(name)
            .ok()
            .and_then(|n| self.lookup(n));
        let Some(i) = found else {
            return Err(format!(
                "ERR Unknown node {}",
                String::from_utf8_lossy(name)
            ));
        };
        if i == MYSELF {
            return Err("ERR I tried hard but I can't forget myself...".into());
        }
        if self.is_replica() && self.node(MYSELF).master == Some(i) {
            return Err("ERR Can't forget my master!".into());
        }
        // Gossip from nodes that still know it does not bring it back for a
        // minute: long enough to send the FORGET to every node.
        let forgotten = self.node(i).name;
        self.forgotten.insert(forgotten, now + FORGOTTEN_FOR_MS);
        let mut actions = Vec::new();
        self.delete_node(i, &mut actions);
        // Closing its links is the caller's next step's: `delete_node` already
        // unmapped them, and the cron drops links of no node.
        self.pending.extend(actions);
        self.update_state();
        Ok(())
    }

    /// CLUSTER COUNT-FAILURE-REPORTS `name`: the masters that currently say
    /// it is failing; `None` for an unknown node.
    pub fn failure_reports(&self, name: &[u8], now: u64) -> Option<usize> {
        let i = <&NodeName>::try_from(name)
            .ok()
            .and_then(|n| self.lookup(n))?;
        let validity = self.settings.node_timeout * 2;
        let reports = &self.node(i).fail_reports;
        Some(
            reports
                .iter()
                .filter(|(_, at)| now.saturating_sub(*at) <= validity)
                .count(),
        )
    }

    /// CLUSTER SET-CONFIG-EPOCH: only on a node alone with epoch 0.
    pub fn set_config_epoch(&mut self, epoch: u64) -> Result<(), &'static str> {
        if self.live().count() > 1 {
            return Err(
                "ERR The user can assign a config epoch only when the node does not know any other node.",
            );
        }
        if self.node(MYSELF).config_epoch != 0 {
            return Err("ERR Node config epoch is already non-zero");
        }
        self.node_mut(MYSELF).config_epoch = epoch;
        self.current_epoch = self.current_epoch.max(epoch);
        self.update_state();
        Ok(())
    }

    /// CLUSTER BUMPEPOCH (`clusterBumpConfigEpochWithoutConsensus`): a new
    /// config epoch unless this node's is already the greatest and not 0.
    /// Whether it bumped, and the node's config epoch.
    pub fn bump_epoch(&mut self) -> (bool, u64) {
        let max = self
            .live()
            .map(|(_, n)| n.config_epoch)
            .fold(self.current_epoch, u64::max);
        let mine = self.node(MYSELF).config_epoch;
        if mine == 0 || mine != max {
            self.current_epoch += 1;
            let epoch = self.current_epoch;
            self.node_mut(MYSELF).config_epoch = epoch;
            return (true, epoch);
        }
        (false, mine)
    }

    /// This node's config epoch and the cluster's current epoch (CLUSTER INFO).
    pub fn epochs(&self) -> (u64, u64) {
        let me = self.node(MYSELF);
        let mine = match me.master.and_then(|m| self.nodes[m].as_ref()) {
            Some(master) if !me.is_master() => master.config_epoch,
            _ => me.config_epoch,
        };
        (self.current_epoch, mine)
    }

    /// CLUSTER RESET (`clusterReset`): a master alone without slots; HARD also
    /// takes a new name and zeroes the epochs. The caller checked the node
    /// holds no keys if it is a master.
    pub fn reset(&mut self, hard: bool, now: u64) {
        let me = self.node_mut(MYSELF);
        me.flags = (me.flags | flag::MASTER) & !flag::REPLICA;
        me.master = None;
        self.owners.fill(NO_OWNER);
        self.migrating.clear();
        self.importing.clear();
        let others: Vec<usize> = self
            .live()
            .map(|(i, _)| i)
            .filter(|&i| i != MYSELF)
            .collect();
        let mut actions = Vec::new();
        for i in others {
            self.delete_node(i, &mut actions);
        }
        self.pending.extend(actions);
        if hard {
            self.current_epoch = 0;
            self.last_vote_epoch = 0;
            self.node_mut(MYSELF).config_epoch = 0;
            let name = self.random_name();
            self.rename(MYSELF, name);
            self.settings.name = name;
            self.node_mut(MYSELF).shard_id = self.random_name();
        }
        self.node_mut(MYSELF).created = now;
        self.update_state();
    }

    /// What the operator's changes left to do on the bus (links of forgotten
    /// nodes to close), for the caller to perform.
    pub fn take_pending(&mut self) -> Vec<super::Action> {
        std::mem::take(&mut self.pending)
    }

    /// Slots assigned, and of those served by a node `fail?` and `fail`
    /// (CLUSTER INFO's `cluster_slots_*`).
    pub fn slot_health(&self) -> (usize, usize, usize) {
        let (mut assigned, mut pfail, mut fail) = (0, 0, 0);
        for &owner in &self.owners {
            let Some(node) = self.nodes.get(owner as usize).and_then(Option::as_ref) else {
                continue;
            };
            assigned += 1;
            if node.has(flag::FAIL) {
                fail += 1;
            } else if node.has(flag::PFAIL) {
                pfail += 1;
            }
        }
        (assigned, pfail, fail)
    }

    /// The links that belong to a known node (CLUSTER LINKS): its name, the
    /// link, and whether this node opened it (`to`) or accepted it (`from`),
    /// by node, `to` first.
    pub fn node_links(&self) -> Vec<(NodeName, super::LinkId, bool)> {
        let mut links: Vec<(usize, bool, super::LinkId)> = self
            .links
            .iter()
            .filter_map(|(&link, &of)| {
                let i = of.filter(|&i| i != MYSELF)?;
                let node = self.nodes[i].as_ref()?;
                let outbound = node.link.map(|(l, _)| l) == Some(link);
                Some((i, !outbound, link))
            })
            .collect();
        links.sort_unstable();
        links
            .into_iter()
            .map(|(i, inbound, link)| (self.node(i).name, link, !inbound))
            .collect()
    }

    /// CONFIG SET cluster-node-timeout: how long a silent node has before it
    /// is `fail?`, from the next cron on.
    pub fn set_node_timeout(&mut self, timeout_ms: u64) {
        self.settings.node_timeout = timeout_ms;
    }

    /// This node's address is `ip`; `announced` (`cluster-announce-ip`): it
    /// goes in every message's header, for the peers to reach it there (else
    /// they take the address its connections come from). True when the
    /// address changed (nodes.conf is then the caller's to save).
    pub fn set_own_ip(&mut self, ip: &str, announced: bool) -> bool {
        self.announces_ip = announced;
        if self.node(MYSELF).ip == ip {
            return false;
        }
        self.settings.ip = ip.to_string();
        self.node_mut(MYSELF).ip = ip.to_string();
        self.generation += 1;
        true
    }

    /// `cluster-announce-port`, `-bus-port`, `-tls-port` (at start or by
    /// CONFIG SET; Redis's `clusterUpdateMyselfAnnouncedPorts`): the ports this
    /// node shows of itself and sends in every header from now on, the peers
    /// taking them from its next PING. True when they changed (nodes.conf is
    /// then the caller's to save).
    pub fn announce_ports(&mut self, port: u16, pport: u16, cport: u16) -> bool {
        let me = self.node_mut(MYSELF);
        if (me.port, me.pport, me.cport) == (port, pport, cport) {
            return false;
        }
        (me.port, me.pport, me.cport) = (port, pport, cport);
        (self.settings.port, self.settings.pport, self.settings.cport) = (port, pport, cport);
        self.generation += 1;
        true
    }

    /// CONFIG SET cluster-require-full-coverage: with `no`, slots without a
    /// live owner leave the cluster up (their keys still answer `not served`).
    pub fn set_require_full_coverage(&mut self, required: bool) {
        self.require_full_coverage = required;
        self.update_state();
    }

    /// Nodes this one knows (CLUSTER INFO's `cluster_known_nodes`).
    pub fn known_nodes(&self) -> usize {
        self.live().count()
    }
}
