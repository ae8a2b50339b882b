//! The Redis Cluster bus: what cluster nodes say to each other on `cluster-port`
//! (gossip, failure reports, slot updates, failover votes, Pub/Sub propagation).
//!
//! Today this holds the wire format ([`message`]; the nodes.conf text is
//! `cluster::nodes_file`), proven against a real
//! `redis-server --cluster-enabled yes` (tests/cluster_bus_wire.rs); the links,
//! the node table and the membership logic that use it come next (issue 35,
//! docs/cluster.md). It sits on the cluster's floor: it knows bytes and node
//! names, never a connection or a shard.

pub mod links;
pub mod message;
