//! The cluster: which shard owns which of the 16384 hash slots, and how the shards
//! present themselves to cluster-aware clients (CLUSTER SLOTS / SHARDS / NODES,
//! MOVED). Today the topology is fixed inside one process: each shard is a master
//! node owning one contiguous slot range ([`topology`]).
//!
//! Shaped so because routing reads it on every keyed command: a slot's owner is
//! one array lookup, and nothing here knows a connection or a shard loop. The
//! cluster bus (gossip with other hosts, slot migration, failover) will live here
//! beside the topology, changing it through the same few methods.

pub mod bus;
pub mod membership;
pub mod nodes_file;
pub mod topology;
