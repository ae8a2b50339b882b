//! The Redis Cluster bus: what cluster nodes say to each other on `cluster-port`
//! (gossip, failure reports, slot updates, failover votes, Pub/Sub propagation).
//!
//! It holds the wire format ([`message`]; the nodes.conf text is
//! `cluster::nodes_file`), proven against a real
//! `redis-server --cluster-enabled yes` (tests/cluster_bus_wire.rs), and the
//! sockets ([`links`], TLS under `tls-cluster yes`: [`tls`]) the membership (`cluster::membership`) is stepped over,
//! by a shard's node (`cluster::node`) or a test's thread. It sits on the
//! cluster's floor: it knows bytes and node names, never a client connection
//! or a shard.

pub mod links;
pub mod message;
pub mod tls;
