//! The primary's view of a Ruvio replica on shard links (forward mode,
//! docs/replication.md "Shard links"): its n connections, one per shard,
//! each attached to its shard's own history ([`super::history::Node`]'s
//! `Primary`), are one replica to INFO (`connected_slaves`, `slaveN:`),
//! ROLE, WAIT, `min-replicas-to-write` and FAILOVER.
//!
//! **Which links are one replica**: those with the same address and
//! listening port (`REPLCONF listening-port`), the pair by which INFO, ROLE,
//! Sentinel and `FAILOVER TO host port` already name a replica. Two
//! replicas that shared that pair would be one to every tool anyway; an ID
//! sent in the handshake would have told them apart for this count alone,
//! at the cost of a second name for the same thing.
//!
//! **What it shows** is what the replica itself says of its links: the
//! offset is the server offset every link acknowledged (each link's ACK
//! read as the last server offset mark it had applied, `RUVIO OFFSET`,
//! [`super::link_barrier`]; the least of the links'), the number the
//! replica's own `slave_repl_offset` shows, comparable with this server's
//! `master_repl_offset` as Sentinel and FAILOVER compare them; the lag the
//! worst link's, and it is `online` only while every one of its n links is.
//!
//! **WAIT** counts it once every link acknowledged what its own shard's
//! history held when WAIT was called: each shard's history has offsets of
//! its own, so the call keeps one offset per shard ([`link_offsets`]) and
//! compares each link's ACK with its shard's; **WAITAOF** the same with each
//! link's `FACK` (a replica with a log: what its shard's log fsynced).

use super::primary::ReplicaInfo;
use super::State;

/// A Ruvio replica on shard links as the primary sees it.
#[derive(Clone, Debug)]
pub struct LinkedReplica {
    pub ip: String,
    pub port: u16,
    /// Each shard's link (by shard), `None` while that link is not attached
    /// (it connects again, or has not yet).
    pub links: Vec<Option<ReplicaInfo>>,
    /// The server offset every link acknowledged (see the module's docs).
    pub server_offset: u64,
}

impl LinkedReplica {
    /// Redis's state names, the worst of the links': a link not attached
    /// counts as `wait_bgsave` (it will ask for a sync), then `send_bulk`,
    /// and `online` only when every link is.
    pub fn state(&self) -> &'static str {
        let rank = |state: &str| match state {
            "online" => 2,
            "send_bulk" => 1,
            _ => 0,
        };
        self.links
            .iter()
            .map(|link| link.as_ref().map_or("wait_bgsave", |l| l.state))
            .min_by_key(|state| rank(state))
            .unwrap_or("wait_bgsave")
    }

    pub fn online(&self) -> bool {
        self.state() == "online"
    }

    /// The server offset every link acknowledged.
    pub fn offset(&self) -> u64 {
        self.server_offset
    }

    /// When the link heard from longest ago was last heard from (its lag is
    /// the replica's).
    pub fn last_ack_ms(&self) -> u64 {
        self.links
            .iter()
            .flatten()
            .map(|l| l.last_ack_ms)
            .min()
            .unwrap_or(0)
    }

    /// Every link is online and acknowledged its shard's `offsets[shard]`.
    pub fn acked(&self, offsets: &[u64]) -> bool {
        self.online()
            && self.links.len() == offsets.len()
            && self
                .links
                .iter()
                .zip(offsets)
                .all(|(link, &offset)| link.as_ref().is_some_and(|l| l.ack_offset >= offset))
    }

    /// Every link is online and its shard's log fsynced its shard's
    /// `offsets[shard]` (the link's `FACK`; WAITAOF).
    pub fn fsynced(&self, offsets: &[u64]) -> bool {
        self.online()
            && self.links.len() == offsets.len()
            && self.links.iter().zip(offsets).all(|(link, &offset)| {
                link.as_ref()
                    .is_some_and(|l| l.aof_offset >= offset && l.aof_offset > 0)
            })
    }

    /// Online and every link heard from within `max_lag_s` seconds.
    pub fn good(&self, now_ms: u64, max_lag_s: u64) -> bool {
        self.online() && now_ms.saturating_sub(self.last_ack_ms()) / 1000 <= max_lag_s
    }

    /// The one line INFO and ROLE show for it.
    pub fn as_info(&self) -> ReplicaInfo {
        let first = self.links.iter().flatten().next();
        ReplicaInfo {
            client_id: first.map_or(0, |l| l.client_id),
            host: first.map_or(0, |l| l.host),
            ip: self.ip.clone(),
            port: self.port,
            state: self.state(),
            ack_offset: self.offset(),
            aof_offset: 0,
            last_ack_ms: self.last_ack_ms(),
            acks: self
                .links
                .iter()
                .flatten()
                .map(|l| l.acks)
                .min()
                .unwrap_or(0),
        }
    }
}

/// The replicas on shard links of a forward-mode primary: the links
/// attached to each shard's own history, grouped by address and listening
/// port, in the order their first link attached.
pub fn linked_replicas(state: &State) -> Vec<LinkedReplica> {
    let shards = state.nodes.len();
    let mut replicas: Vec<LinkedReplica> = Vec::new();
    for shard in 0..shards {
        let node = state.node_history(shard);
        if !node.primary.active() {
            continue;
        }
        for link in node.primary.replicas() {
            let at = replicas
                .iter()
                .position(|r| r.ip == link.ip && r.port == link.port);
            let at = at.unwrap_or_else(|| {
                replicas.push(LinkedReplica {
                    ip: link.ip.clone(),
                    port: link.port,
                    links: vec![None; shards],
                    server_offset: 0,
                });
                replicas.len() - 1
            });
            // A link's later connection (the earlier one not yet gone) is the
            // one that counts.
            replicas[at].links[shard] = Some(link);
        }
    }
    for replica in &mut replicas {
        let reached = replica.links.iter().enumerate().map(|(shard, link)| {
            link.as_ref().map_or(0, |l| {
                state.node_history(shard).server_offset_at(l.ack_offset)
            })
        });
        replica.server_offset = reached.min().unwrap_or(0);
    }
    replicas
}

/// Each shard's own history's offset now (what a WAIT called now waits for
/// on each shard link).
pub fn link_offsets(state: &State) -> Vec<u64> {
    (0..state.nodes.len())
        .map(|shard| state.node_history(shard).offset())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn link(shard: usize, port: u16, state: &'static str, ack: u64, at_ms: u64) -> ReplicaInfo {
        ReplicaInfo {
            client_id: 10 + shard as u64,
            host: shard,
            ip: "127.0.0.1".into(),
            port,
            state,
            ack_offset: ack,
            aof_offset: 0,
            last_ack_ms: at_ms,
            acks: 1,
        }
    }

    #[test]
    fn a_replica_of_n_links_is_online_and_acked_only_when_every_link_is() {
        let mut replica = LinkedReplica {
            ip: "127.0.0.1".into(),
            port: 7000,
            links: vec![
                Some(link(0, 7000, "online", 100, 5_000)),
                Some(link(1, 7000, "send_bulk", 0, 9_000)),
            ],
            server_offset: 0,
        };
        assert_eq!(replica.state(), "send_bulk");
        assert!(!replica.acked(&[0, 0]), "not online");
        replica.links[1] = Some(link(1, 7000, "online", 40, 9_000));
        assert!(replica.online());
        // Each link against its own shard's offset.
        assert!(replica.acked(&[100, 40]));
        assert!(!replica.acked(&[100, 41]));
        assert!(!replica.acked(&[101, 40]));
        assert!(!replica.acked(&[100]), "another shard count");
        let info = replica.as_info();
        assert_eq!(info.state, "online");
        // The worst link's lag: the one heard from at 5 s.
        assert_eq!(info.last_ack_ms, 5_000);
        assert!(replica.good(15_000, 10) && !replica.good(16_000, 10));
        // A link gone: the replica waits for its sync.
        replica.links[0] = None;
        assert_eq!(replica.state(), "wait_bgsave");
        assert!(!replica.acked(&[0, 0]) && !replica.good(9_000, 10));
    }

    #[test]
    fn links_group_by_address_and_listening_port() {
        let state = State::new(2);
        for shard in 0..2 {
            let node = state.node_history(shard);
            node.primary.create_backlog(0, 0);
            // Marks of server offsets 50 + shard and, 10 bytes on, 70 + shard.
            node.mark_server_offset(50 + shard as u64);
            node.primary
                .append_stream(&[b'x'; 10], node.offset_counter());
            let before_second = node.offset();
            node.mark_server_offset(70 + shard as u64);
            let after_second = node.offset();
            node.primary
                .attach(link(shard, 7000, "online", before_second, 1));
            let mut other = link(shard, 7001, "online", after_second, 1);
            other.client_id += 100;
            node.primary.attach(other);
        }
        let replicas = linked_replicas(&state);
        let seen: Vec<(u16, u64, bool)> = replicas
            .iter()
            .map(|r| (r.port, r.offset(), r.online()))
            .collect();
        // 7000's links acknowledged the first mark only (the least: shard
        // 0's 50), 7001's both (the least: 70).
        assert_eq!(seen, [(7000, 50, true), (7001, 70, true)]);
        // One shard's link of 7001 gone.
        state.node_history(1).primary.detach(111, 2);
        let replicas = linked_replicas(&state);
        assert_eq!(replicas[1].state(), "wait_bgsave");
        let ends: Vec<u64> = (0..2).map(|s| state.node_history(s).offset()).collect();
        assert_eq!(link_offsets(&state), ends);
    }
}
