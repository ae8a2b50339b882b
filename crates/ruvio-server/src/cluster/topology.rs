//! Which shard owns which hash slot, and how the shards present themselves to
//! cluster-aware clients: each shard is a master node with a stable id that owns
//! one contiguous slot range; together the ranges cover all 16384 slots.

use crate::config::{Config, PortMode};
use ruvio_engine::slot::SLOT_COUNT;

/// One shard as a cluster node.
#[derive(Clone, Debug)]
pub struct Node {
    /// 40 hex characters, derived from the address so it is stable across restarts.
    pub id: String,
    /// Its shard's id (CLUSTER MYSHARDID): a master alone in its shard, so
    /// as stable as `id`, and another.
    pub shard_id: String,
    pub port: u16,
    pub first_slot: u16,
    pub last_slot: u16,
}

/// The slot map of the whole server.
#[derive(Clone, Debug)]
pub struct Topology {
    pub nodes: Vec<Node>,
    /// The bind address (127.0.0.1 when bound to every interface): the node ids'
    /// seed, and what clients are told unless [`Topology::announced_host`] says else.
    pub host: String,
    /// Bound to every interface (0.0.0.0 or ::).
    wildcard: bool,
    pub mode: PortMode,
    slot_owner: Vec<u16>,
}

impl Topology {
    pub fn new(cfg: &Config) -> Topology {
        let n = cfg.shards;
        let wildcard = cfg.bind == "0.0.0.0" || cfg.bind == "::";
        let host = if wildcard {
            "127.0.0.1".into()
        } else {
            cfg.bind.clone()
        };
        let nodes: Vec<Node> = (0..n)
            .map(|i| Node {
                id: node_id("ruvio", &host, cfg.shard_port(i), i),
                shard_id: node_id("ruvio-shard", &host, cfg.shard_port(i), i),
                port: cfg.shard_port(i),
                first_slot: (i * SLOT_COUNT as usize / n) as u16,
                last_slot: ((i + 1) * SLOT_COUNT as usize / n - 1) as u16,
            })
            .collect();
        let mut slot_owner = vec![0u16; SLOT_COUNT as usize];
        for (i, node) in nodes.iter().enumerate() {
            slot_owner[node.first_slot as usize..=node.last_slot as usize].fill(i as u16);
        }
        Topology {
            nodes,
            host,
            wildcard,
            mode: cfg.port_mode,
            slot_owner,
        }
    }

    /// The host clients are told to connect to (MOVED, CLUSTER SLOTS/SHARDS/NODES):
    /// `cluster-announce-ip` when set, else the bind address; bound to every
    /// interface, the address this client reached us on (`local`, `ip:port`), so a
    /// client on another machine is never sent to 127.0.0.1.
    pub fn announced_host<'a>(&'a self, announce_ip: &'a str, local: &'a str) -> &'a str {
        if !announce_ip.is_empty() {
            return announce_ip;
        }
        if !self.wildcard {
            return &self.host;
        }
        match local.rsplit_once(':') {
            Some((ip, _port)) if !ip.is_empty() => ip.trim_start_matches('[').trim_end_matches(']'),
            _ => &self.host,
        }
    }

    /// The shard that owns `slot`.
    #[inline]
    pub fn owner(&self, slot: u16) -> usize {
        self.slot_owner[slot as usize] as usize
    }

    /// The shard that owns `key`.
    #[inline]
    pub fn key_owner(&self, key: &[u8]) -> usize {
        self.owner(ruvio_engine::slot::key_slot(key))
    }
}

/// A stable 40-hex-digit id from the node's address, of the kind `tag` names
/// (`ruvio`: the node's, `ruvio-shard`: its shard's).
fn node_id(tag: &str, host: &str, port: u16, shard: usize) -> String {
    let mut state: u64 = 0xcbf2_9ce4_8422_2325;
    let mut hex = String::with_capacity(40);
    let seed = format!("{tag}:{host}:{port}:{shard}");
    while hex.len() < 40 {
        for b in seed.bytes().chain(hex.len().to_le_bytes()) {
            state = (state ^ b as u64).wrapping_mul(0x0100_0000_01b3);
        }
        hex.push_str(&format!("{state:016x}"));
    }
    hex.truncate(40);
    hex
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Cli, Config};

    #[test]
    fn ranges_cover_all_slots() {
        for shards in 1..=7 {
            let cli = Cli {
                shards: Some(shards),
                port_mode: Some(PortMode::PerShard),
                port: Some(7000),
                ..Cli::default()
            };
            let topo = Topology::new(&Config::load(cli).unwrap());
            assert_eq!(topo.nodes[0].first_slot, 0);
            assert_eq!(topo.nodes.last().unwrap().last_slot, SLOT_COUNT - 1);
            for w in topo.nodes.windows(2) {
                assert_eq!(w[0].last_slot + 1, w[1].first_slot);
                assert_ne!(w[0].id, w[1].id);
            }
            assert!(topo.nodes.iter().all(|n| n.id.len() == 40));
        }
    }

    #[test]
    fn announced_host_follows_announce_ip_then_bind_then_the_client() {
        let topo = |bind: &str| {
            let cli = Cli {
                bind: Some(bind.into()),
                ..Cli::default()
            };
            Topology::new(&Config::load(cli).unwrap())
        };
        let specific = topo("127.0.0.2");
        assert_eq!(specific.announced_host("", "127.0.0.2:7000"), "127.0.0.2");
        assert_eq!(
            specific.announced_host("10.1.2.3", "127.0.0.2:7000"),
            "10.1.2.3"
        );
        let any = topo("0.0.0.0");
        assert_eq!(any.announced_host("", "192.0.2.7:7000"), "192.0.2.7");
        assert_eq!(any.announced_host("", "[::1]:7000"), "::1");
        assert_eq!(any.announced_host("", ""), "127.0.0.1");
        assert_eq!(
            any.announced_host("host.example", "192.0.2.7:7000"),
            "host.example"
        );
    }
}
