//! The cluster: which shard owns which of the 16384 hash slots, and how the shards
//! present themselves to cluster-aware clients (CLUSTER SLOTS / SHARDS / NODES,
//! MOVED). Today the topology is fixed inside one process: each shard is a master
//! node owning one contiguous slot range ([`topology`]).
//!
//! Shaped so because routing reads it on every keyed command: a slot's owner is
//! one array lookup, and nothing here knows a connection or a shard loop. With
//! `cluster-enabled yes` each shard is instead a node of a Redis Cluster
//! ([`node`]: its membership, bus links, nodes.conf and the slot map routing
//! reads), which other nodes, redis-server's included, can join.

pub mod bus;
pub mod membership;
pub mod node;
pub mod nodes_file;
pub mod slot_map;
pub mod slot_migration;
pub mod slot_pace;
pub mod topology;
