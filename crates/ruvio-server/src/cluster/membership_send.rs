//! What this node sends: the header every message carries (its name, ports,
//! epochs, flags, slots), PING/PONG/MEET with their gossip and extensions, a
//! message to every node, PUBLISH, as Redis 7's `clusterBuildMessageHdr`,
//! `clusterSendPing`, `clusterBroadcastMessage` and `clusterSendPublish`.
//!
//! Apart from membership.rs's rules for what it receives, so that the reading
//! side and the writing side of the protocol each fit on a screen or two.

use super::{
    flag, Action, Body, Cluster, Extension, Gossip, Header, Kind, LinkId, Message, State,
    MFLAG_EXT_DATA, MFLAG_PAUSED, MYSELF,
};

impl Cluster {
    /// The header of every message this node sends.
    pub(in crate::cluster) fn header(&self) -> Header {
        let me = self.node(MYSELF);
        let mut header = Header::new(me.name);
        if self.announces_ip {
            header.ip = me.ip.as_bytes().to_vec();
        }
        header.port = me.port;
        header.pport = me.pport;
        header.cport = me.cport;
        header.current_epoch = self.current_epoch;
        header.config_epoch = me.config_epoch;
        header.offset = me.repl_offset;
        header.flags = me.flags;
        header.state = match self.state {
            State::Ok => 0,
            State::Fail => 1,
        };
        // Every message says this node reads PING extensions (Redis 7.2.7+),
        // so its peers send it theirs.
        header.mflags[0] |= MFLAG_EXT_DATA;
        if me.is_master() && self.manual.end != 0 {
            // Writes are paused for a replica's CLUSTER FAILOVER.
            header.mflags[0] |= MFLAG_PAUSED;
        }
        // A replica speaks for its master's slots and config epoch.
        let serving = match me.master {
            Some(m) if !me.is_master() && self.nodes[m].is_some() => {
                header.replica_of = self.node(m).name;
                header.config_epoch = self.node(m).config_epoch;
                m
            }
            _ => MYSELF,
        };
        *header.slots = self.slots_of(serving);
        header
    }

    /// A PING/PONG/MEET with gossip about a tenth of the nodes (at least three)
    /// and every node this one suspects, as `clusterSendPing`.
    pub(super) fn send_ping(
        &mut self,
        link: LinkId,
        kind: Kind,
        to: Option<usize>,
        now: u64,
        actions: &mut Vec<Action>,
    ) {
        let total = self.live().count();
        let wanted = (total / 10).max(3).min(total.saturating_sub(2));
        let mut chosen: Vec<usize> = Vec::new();
        let candidates: Vec<usize> = self.live().map(|(i, _)| i).collect();
        let mut tries = wanted * 3;
        while chosen.len() < wanted && tries > 0 {
            tries -= 1;
            let i = candidates[(self.next_random() % candidates.len() as u64) as usize];
            let node = self.node(i);
            let useless = i == MYSELF
                || node.has(flag::HANDSHAKE | flag::NOADDR | flag::PFAIL)
                || (node.link.is_none() && !self.owners.contains(&(i as u32)));
            if !useless && !chosen.contains(&i) {
                chosen.push(i);
            }
        }
        for (i, node) in self.live() {
            if node.has(flag::PFAIL) && !node.has(flag::HANDSHAKE | flag::NOADDR) {
                chosen.push(i);
            }
        }
        let gossip = chosen
            .iter()
            .map(|&i| {
                let node = self.node(i);
                Gossip {
                    name: node.name,
                    ping_sent: (node.ping_sent / 1000) as u32,
                    pong_received: (node.pong_received / 1000) as u32,
                    ip: node.ip.as_bytes().to_vec(),
                    port: node.port,
                    cport: node.cport,
                    flags: node.flags,
                    pport: node.pport,
                }
            })
            .collect();
        // The hostname to every node (Redis 7.0 sends it so, and reads it);
        // the shard id only to a node that reads extensions (see the module
        // docs).
        let me = self.node(MYSELF);
        let mut extensions = Vec::new();
        if !me.hostname.is_empty() {
            extensions.push(Extension::Hostname(me.hostname.as_bytes().to_vec()));
        }
        let reader = to.or_else(|| self.links.get(&link).copied().flatten());
        let reads_extensions = reader
            .and_then(|i| self.nodes[i].as_ref())
            .is_some_and(|n| n.supports_extensions);
        if reads_extensions {
            extensions.push(Extension::ShardId(me.shard_id));
        }
        let body = Body::Ping { gossip, extensions };
        let message = Message::new(kind, self.header(), body);
        if let Some(i) = to.filter(|_| kind == Kind::Ping) {
            self.node_mut(i).ping_sent = now;
        }
        actions.push(Action::Send {
            link,
            message: Box::new(message),
        });
    }

    /// `message` on the link to every node this one has connected to.
    pub(super) fn broadcast(&self, message: &Message, actions: &mut Vec<Action>) {
        for (i, node) in self.live() {
            if i == MYSELF || node.has(flag::HANDSHAKE) {
                continue;
            }
            if let Some((link, _)) = node.link {
                actions.push(Action::Send {
                    link,
                    message: Box::new(message.clone()),
                });
            }
        }
    }

    /// PUBLISH from this node to every other (Pub/Sub across the cluster).
    pub fn publish(&self, channel: &[u8], message: &[u8]) -> Vec<Action> {
        let body = Body::Publish {
            channel: channel.to_vec(),
            message: message.to_vec(),
        };
        let mut actions = Vec::new();
        self.broadcast(
            &Message::new(Kind::Publish, self.header(), body),
            &mut actions,
        );
        actions
    }
}
