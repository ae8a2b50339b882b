//! Forward-mode processes as cluster nodes with replicas, for the tests of
//! forward mode as one node through failovers and reshards
//! (tests/cluster_forward_failover.rs, tests/cluster_forward_client_failover.rs):
//! six processes of two shards, three masters and a replica of each, built by
//! `redis-cli --cluster create --cluster-replicas 1` as an operator builds a
//! Redis Cluster, and what those tests ask of a node's view.

use super::cluster_process::{agree, epochs_settled, info_field, own_line, text, Node};
use super::cluster_tools::{create, myid};
use super::replication::wait_for;
use super::*;

/// The slot ranges `port`'s own line of CLUSTER NODES gives it.
pub fn own_ranges(port: u16) -> Vec<(i64, i64)> {
    own_line(port)
        .split(' ')
        .skip(8)
        .filter_map(|range| match range.split_once('-') {
            Some((a, b)) => Some((a.parse().ok()?, b.parse().ok()?)),
            None => range.parse().ok().map(|s| (s, s)),
        })
        .collect()
}

/// `port` is a replica of `master` with its link up, and the master knows it
/// as its replica (it takes a manual failover's MFSTART only then).
pub fn follows(port: u16, master: u16) -> bool {
    let (id, master_id) = (myid(port), myid(master));
    let seen = text(&RawConn::connect(master).cmd(&["CLUSTER", "NODES"]));
    let known = seen
        .lines()
        .any(|l| l.starts_with(&id) && l.contains(&format!("slave {master_id}")));
    let me = own_line(port);
    me.contains("slave")
        && me.contains(&master_id)
        && known
        && info_field(port, "master_link_status") == "up"
}

/// Six forward-mode processes of two shards, three masters and a replica of
/// each, by `redis-cli --cluster create --cluster-replicas 1`.
pub struct SixNodes {
    pub nodes: Vec<Node>,
}

impl SixNodes {
    /// The six processes (data directories named after `name`), the cluster
    /// created, every node agreeing, the epochs settled and every replica's
    /// link up.
    pub fn create(cli: &std::path::Path, name: &str) -> SixNodes {
        let nodes: Vec<Node> = (0..6)
            .map(|i| {
                let dir = unique_dir(&format!("{name}-{i}"));
                Node::start_forward(free_ports(1, true), 2, &dir)
            })
            .collect();
        let six = SixNodes { nodes };
        let addresses: Vec<String> = six
            .ports()
            .iter()
            .map(|p| format!("127.0.0.1:{p}"))
            .collect();
        create(cli, &addresses, &["--cluster-replicas", "1"]);
        let ports = six.ports();
        wait_for("six nodes agree", || agree(&ports, 6).is_ok());
        wait_for("the epochs settled", || epochs_settled(&ports));
        wait_for("every replica's link up", || {
            six.replicas().iter().all(|&(r, m)| follows(r, m))
        });
        six
    }

    pub fn ports(&self) -> Vec<u16> {
        self.nodes.iter().map(|n| n.port).collect()
    }

    /// (replica, its master) for each replica.
    pub fn replicas(&self) -> Vec<(u16, u16)> {
        let ports = self.ports();
        let by_id: Vec<(String, u16)> = ports.iter().map(|&p| (myid(p), p)).collect();
        ports
            .iter()
            .filter_map(|&p| {
                let me = own_line(p);
                let master = me.split(' ').nth(3)?;
                let (_, m) = by_id.iter().find(|(id, _)| id == master)?;
                me.contains("slave").then_some((p, *m))
            })
            .collect()
    }

    pub fn node(&mut self, port: u16) -> &mut Node {
        self.nodes.iter_mut().find(|n| n.port == port).unwrap()
    }
}
