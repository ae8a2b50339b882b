//! The cluster bus's settings, under Redis's names: `cluster-enabled`,
//! `cluster-port`, `cluster-node-timeout`, `cluster-config-file`, and the ports a
//! node announces (`cluster-announce-port`, `-bus-port`, `-tls-port`; docs/cluster.md).
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

/// `cluster-preferred-endpoint-type`: what a redirection and CLUSTER SLOTS
/// name a node by.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Endpoint {
    #[default]
    Ip,
    Hostname,
    /// `unknown-endpoint`: nothing (the client goes where it asked).
    Unknown,
}

impl Endpoint {
    /// The setting's value (checked against its words already).
    pub fn parse(value: &str) -> Endpoint {
        match value {
            "hostname" => Endpoint::Hostname,
            "unknown-endpoint" => Endpoint::Unknown,
            _ => Endpoint::Ip,
        }
    }

    /// Redis 7.0's `getPreferredEndpoint` for a node at `ip` announcing
    /// `hostname` ("": none): `?` for a hostname it has not got.
    pub fn of<'a>(self, ip: &'a str, hostname: &'a str) -> &'a str {
        match self {
            Endpoint::Ip => ip,
            Endpoint::Hostname if hostname.is_empty() => "?",
            Endpoint::Hostname => hostname,
            Endpoint::Unknown => "",
        }
    }
}

/// The ports a node tells the cluster it is reached at: in every bus header it
/// sends, in its own line of CLUSTER NODES and nodes.conf, in CLUSTER SLOTS and
/// SHARDS (Redis's `myself->port`, `pport`, `cport`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AnnouncedPorts {
    /// The client port: the TLS port under `tls-cluster yes`, else the plain one.
    pub port: u16,
    /// The plain client port when `port` is the TLS one; 0 otherwise.
    pub pport: u16,
    /// The bus port.
    pub cport: u16,
}

/// The ports a node really listens on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ListenPorts {
    pub plain: u16,
    /// The TLS client port, when TLS is on.
    pub tls: Option<u16>,
    pub cport: u16,
}

/// `cluster-announce-port`, `-tls-port`, `-bus-port` as given; 0 for "the real one".
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PortAnnouncements {
    pub port: u16,
    pub tls_port: u16,
    pub bus_port: u16,
}

impl ListenPorts {
    /// Redis 7.0's `deriveAnnouncedPorts`: under `tls-cluster` the TLS port is
    /// the node's port and the plain one its `pport`, else the plain port alone;
    /// a non-zero announcement replaces the real port. Under `tls-cluster`,
    /// `cluster-announce-tls-port` takes the announced plain port along with it
    /// (a 0 there then announces no plain port at all), and without it
    /// `cluster-announce-port` stands for the TLS port, as Redis has it.
    pub fn announced(self, tls_cluster: bool, given: PortAnnouncements) -> AnnouncedPorts {
        let tls = self.tls.filter(|_| tls_cluster);
        let mut ports = AnnouncedPorts {
            port: tls.unwrap_or(self.plain),
            pport: tls.map_or(0, |_| self.plain),
            cport: self.cport,
        };
        if tls.is_some() && given.tls_port != 0 {
            ports.port = given.tls_port;
            ports.pport = given.port;
        } else if given.port != 0 {
            ports.port = given.port;
        }
        if given.bus_port != 0 {
            ports.cport = given.bus_port;
        }
        ports
    }
}

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
    /// ones follow it) or, when that is 0, the shard's client port + 10000:
    /// its TLS port under `tls-cluster yes` (Redis 7.0's `clusterInit`), the
    /// plain one otherwise. Worked out once, at the node's start.
    pub fn cluster_bus_port(&self, shard: usize) -> u16 {
        let first: u16 = self.param("cluster-port").parse().unwrap_or(0);
        let tls = self.tls_port(shard).filter(|_| self.bus_tls());
        match first {
            0 => tls
                .unwrap_or_else(|| self.shard_port(shard))
                .wrapping_add(BUS_PORT_OFFSET),
            first => first.wrapping_add(shard as u16),
        }
    }

    /// `tls-cluster yes` with a TLS port: the bus runs TLS and the nodes are
    /// told each other's TLS ports.
    pub fn bus_tls(&self) -> bool {
        self.param("tls-cluster") == "yes" && self.tls_port(0).is_some()
    }

    /// What shard `shard`'s node, listening for the bus on `cport`, announces
    /// of its ports (see [`ListenPorts::announced`]). In per-shard mode shard i
    /// announces each given port + i, as its real ports count up from the first
    /// shard's; in forward mode the process is one node and the settings are
    /// its own.
    pub fn announced_ports(&self, shard: usize, cport: u16) -> AnnouncedPorts {
        let offset = match self.port_mode {
            PortMode::PerShard => shard as u16,
            PortMode::Forward => 0,
        };
        let given = |name: &str| match self.param(name).parse::<u16>().unwrap_or(0) {
            0 => 0,
            port => port.wrapping_add(offset),
        };
        let listening = ListenPorts {
            plain: self.shard_port(shard),
            tls: self.tls_port(shard),
            cport,
        };
        let given = PortAnnouncements {
            port: given("cluster-announce-port"),
            tls_port: given("cluster-announce-tls-port"),
            bus_port: given("cluster-announce-bus-port"),
        };
        listening.announced(self.param("tls-cluster") == "yes", given)
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

    #[test]
    fn announced_ports_follow_redis_derivation() {
        let ports = |port, pport, cport| AnnouncedPorts { port, pport, cport };
        let plain = ListenPorts {
            plain: 7000,
            tls: None,
            cport: 17000,
        };
        let none = PortAnnouncements::default();
        let all = PortAnnouncements {
            port: 7100,
            tls_port: 7200,
            bus_port: 17100,
        };
        assert_eq!(plain.announced(false, none), ports(7000, 0, 17000));
        assert_eq!(plain.announced(false, all), ports(7100, 0, 17100));
        // tls-cluster without a TLS port: plain as before.
        assert_eq!(plain.announced(true, all), ports(7100, 0, 17100));
        let tls = ListenPorts {
            tls: Some(7500),
            ..plain
        };
        // Without tls-cluster the TLS port is not the cluster's business.
        assert_eq!(tls.announced(false, all), ports(7100, 0, 17100));
        assert_eq!(tls.announced(true, none), ports(7500, 7000, 17000));
        assert_eq!(tls.announced(true, all), ports(7200, 7100, 17100));
        // Redis: the TLS announcement carries the plain one, even a 0 ...
        let tls_only = PortAnnouncements {
            tls_port: 7200,
            ..none
        };
        assert_eq!(tls.announced(true, tls_only), ports(7200, 0, 17000));
        // ... and the plain announcement alone stands for the TLS port.
        let port_only = PortAnnouncements { port: 7100, ..none };
        assert_eq!(tls.announced(true, port_only), ports(7100, 7000, 17000));
    }

    #[test]
    fn each_shard_announces_the_given_ports_plus_its_index() {
        let given = [
            ("cluster-enabled", "yes"),
            ("cluster-announce-port", "8000"),
            ("cluster-announce-bus-port", "18000"),
        ];
        let per_shard = load(None, &given).unwrap();
        let at = |port, cport| AnnouncedPorts {
            port,
            pport: 0,
            cport,
        };
        let announced =
            |cfg: &Config, shard| cfg.announced_ports(shard, cfg.cluster_bus_port(shard));
        assert_eq!(announced(&per_shard, 0), at(8000, 18000));
        assert_eq!(announced(&per_shard, 1), at(8001, 18001));
        let forward = load(Some(PortMode::Forward), &given).unwrap();
        assert_eq!(announced(&forward, 0), at(8000, 18000));
        let real = load(None, &[("cluster-enabled", "yes")]).unwrap();
        assert_eq!(announced(&real, 1), at(7001, 17001));
    }

    #[test]
    fn under_tls_cluster_the_bus_port_follows_the_tls_port() {
        let tls = [
            ("cluster-enabled", "yes"),
            ("tls-port", "7400"),
            ("tls-cluster", "yes"),
        ];
        let per_shard = load(None, &tls).unwrap();
        assert!(per_shard.bus_tls());
        assert_eq!(
            (per_shard.cluster_bus_port(0), per_shard.cluster_bus_port(1)),
            (17400, 17401)
        );
        // cluster-port still wins; without tls-cluster the plain port counts.
        let given = load(None, &[tls[0], tls[1], tls[2], ("cluster-port", "9000")]).unwrap();
        assert_eq!(given.cluster_bus_port(1), 9001);
        let plain = load(None, &[tls[0], tls[1]]).unwrap();
        assert!(!plain.bus_tls());
        assert_eq!(plain.cluster_bus_port(0), 17000);
    }
}
