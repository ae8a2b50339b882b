//! What a node shows of its table: CLUSTER NODES's lines and nodes.conf
//! (`cluster::nodes_file`'s text), from the membership's nodes and slot owners.

use super::{flag, Cluster, MYSELF};
use crate::cluster::nodes_file::{NodeLine, NodesFile};

/// Each flag bit and its name in a node line, in Redis's order.
pub(super) const FLAG_NAMES: [(u16, &str); 8] = [
    (flag::MYSELF, "myself"),
    (flag::MASTER, "master"),
    (flag::REPLICA, "slave"),
    (flag::PFAIL, "fail?"),
    (flag::FAIL, "fail"),
    (flag::HANDSHAKE, "handshake"),
    (flag::NOADDR, "noaddr"),
    (flag::NOFAILOVER, "nofailover"),
];

impl Cluster {
    pub(super) fn line(&self, i: usize) -> NodeLine {
        let node = self.node(i);
        let mut slots = Vec::new();
        let mut run: Option<(u16, u16)> = None;
        for (slot, owner) in self.owners.iter().enumerate() {
            let slot = slot as u16;
            if *owner == i as u32 {
                run = match run {
                    Some((first, last)) if last + 1 == slot => Some((first, slot)),
                    Some(done) => {
                        slots.push(done);
                        Some((slot, slot))
                    }
                    None => Some((slot, slot)),
                };
            }
        }
        slots.extend(run);
        let in_flight = match i {
            MYSELF => self.in_flight_lines(),
            _ => Default::default(),
        };
        NodeLine {
            name: String::from_utf8_lossy(&node.name).into_owned(),
            ip: node.ip.clone(),
            port: node.port,
            pport: node.pport,
            cport: node.cport,
            hostname: (!node.hostname.is_empty()).then(|| node.hostname.clone()),
            shard_id: Some(String::from_utf8_lossy(&node.shard_id).into_owned()),
            flags: FLAG_NAMES
                .iter()
                .filter(|(bit, _)| node.flags & bit != 0)
                .map(|(_, name)| *name)
                .collect(),
            master: node
                .master
                .and_then(|m| self.nodes[m].as_ref())
                .map(|m| String::from_utf8_lossy(&m.name).into_owned()),
            ping_sent: node.ping_sent,
            pong_received: node.pong_received,
            config_epoch: if node.is_master() {
                node.config_epoch
            } else {
                node.master
                    .and_then(|m| self.nodes[m].as_ref())
                    .map_or(0, |m| m.config_epoch)
            },
            connected: i == MYSELF || node.link.is_some(),
            slots,
            migrating: in_flight.0,
            importing: in_flight.1,
        }
    }

    /// CLUSTER NODES's reply text (nodes.conf's lines without the aux fields,
    /// which Redis 7.2 keeps from clients).
    pub fn cluster_nodes(&self) -> String {
        let mut out = String::new();
        for (i, _) in self.live() {
            let line = NodeLine {
                shard_id: None,
                ..self.line(i)
            };
            crate::cluster::nodes_file::render_line(&line, &mut out);
            out.push('\n');
        }
        out
    }

    /// What nodes.conf holds.
    pub fn nodes_file(&self) -> NodesFile {
        NodesFile {
            nodes: self.live().map(|(i, _)| self.line(i)).collect(),
            current_epoch: self.current_epoch,
            last_vote_epoch: self.last_vote_epoch,
        }
    }
}
