//! The cluster bus's settings, under Redis's names: `cluster-enabled`,
//! `cluster-port`, `cluster-node-timeout`, `cluster-config-file` (docs/cluster.md).
//!
//! Why a file of their own: `cluster-enabled yes` changes what a shard is (in
//! per-shard mode a node of a Redis Cluster with its own bus port, name and
//! nodes.conf; in forward mode the process is one node, owned by shard 0), so
//! the rules that derive each node's bus port and nodes.conf from the flags are
//! read in one place. Without `cluster-enabled yes`, per-shard mode keeps its fixed topology
//! (each shard a node of a cluster that is the whole process, no bus).

use super::{Config, PortMode};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// What `redis-server` adds to a node's client port for its bus port when
/// `cluster-port` is 0 (Redis's `CLUSTER_PORT_INCR`).
pub const BUS_PORT_OFFSET: u16 = 10000;

/// `cluster-enabled yes` was given (file or flag).
pub(super) fn bus_enabled(params: &BTreeMap<&'static str, String>) -> bool {
    params.get("cluster-enabled").map(String::as_str) == Some("yes")
}

/// The port mode of a node of the bus: forward mode (the process is one node)
/// only when asked for by name, flag or file; otherwise each shard is a node
/// (per-shard mode), as `--cluster-enabled yes` alone has always meant.
pub(super) fn bus_port_mode(asked: Option<PortMode>) -> PortMode {
    asked.unwrap_or(PortMode::PerShard)
}

impl Config {
    /// Each shard is a node of the cluster bus (`cluster-enabled yes`).
    pub fn cluster_bus(&self) -> bool {
        bus_enabled(&self.params)
    }

    /// A Redis Cluster node to its clients (INFO's `cluster_enabled:1`, HELLO's
    /// `mode`, REPLICAOF refused): per-shard mode, or forward mode as one
    /// node of the bus.
    pub fn cluster_mode(&self) -> bool {
        self.port_mode == PortMode::PerShard || self.cluster_bus()
    }

    /// Shard `shard`'s bus port: `cluster-port` (the first shard's; the next
    /// ones follow it) or, when that is 0, the shard's client port + 10000.
    pub fn cluster_bus_port(&self, shard: usize) -> u16 {
        let first: u16 = self.param("cluster-port").parse().unwrap_or(0);
        match first {
            0 => self.shard_port(shard).wrapping_add(BUS_PORT_OFFSET),
            first => first.wrapping_add(shard as u16),
        }
    }

    /// `cluster-node-timeout` in milliseconds.
    pub fn cluster_node_timeout_ms(&self) -> u64 {
        self.param("cluster-node-timeout").parse().unwrap_or(15_000)
    }

    /// Shard `shard`'s nodes.conf: `cluster-config-file` when it was set (the
    /// first shard's; a relative name is under `dir`), else, and for the other
    /// shards, `nodes-<port>.conf` in `dir`: one file per node, as each
    /// redis-server of a cluster on one host is given its own.
    pub fn cluster_config_path(&self, shard: usize) -> PathBuf {
        match self.params.get("cluster-config-file") {
            Some(name) if shard == 0 => self.dir.join(name),
            _ => self
                .dir
                .join(format!("nodes-{}.conf", self.shard_port(shard))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Cli;

    fn load(port_mode: Option<PortMode>, redis: &[(&str, &str)]) -> Result<Config, String> {
        Config::load(Cli {
            port: Some(7000),
            shards: Some(2),
            port_mode,
            dir: Some(PathBuf::from("/data")),
            redis: redis
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..Cli::default()
        })
    }

    #[test]
    fn cluster_enabled_makes_each_shard_a_node() {
        let cfg = load(None, &[("cluster-enabled", "yes")]).unwrap();
        assert!(cfg.cluster_bus());
        assert_eq!(cfg.port_mode, PortMode::PerShard);
        assert_eq!(
            (cfg.cluster_bus_port(0), cfg.cluster_bus_port(1)),
            (17000, 17001)
        );
        assert_eq!(
            cfg.cluster_config_path(1),
            PathBuf::from("/data/nodes-7001.conf")
        );
        assert_eq!(cfg.cluster_node_timeout_ms(), 15_000);
        // Forward mode by name: the process is one node, shard 0's.
        let one = load(Some(PortMode::Forward), &[("cluster-enabled", "yes")]).unwrap();
        assert_eq!(one.port_mode, PortMode::Forward);
        assert_eq!(
            (one.cluster_bus_port(0), one.cluster_config_path(0)),
            (17000, PathBuf::from("/data/nodes-7000.conf"))
        );
    }

    #[test]
    fn cluster_settings_under_redis_names() {
        let cfg = load(
            None,
            &[
                ("cluster-enabled", "yes"),
                ("cluster-port", "20000"),
                ("cluster-node-timeout", "2000"),
                ("cluster-config-file", "mine.conf"),
            ],
        )
        .unwrap();
        assert_eq!(
            (cfg.cluster_bus_port(0), cfg.cluster_bus_port(1)),
            (20000, 20001)
        );
        assert_eq!(cfg.cluster_node_timeout_ms(), 2000);
        assert_eq!(cfg.cluster_config_path(0), PathBuf::from("/data/mine.conf"));
        assert_eq!(
            cfg.cluster_config_path(1),
            PathBuf::from("/data/nodes-7001.conf")
        );
        let plain = load(Some(PortMode::PerShard), &[]).unwrap();
        assert!(!plain.cluster_bus());
    }
}
