//! Messaging: Pub/Sub delivery on every shard ([`pubsub`]; the commands are in
//! `cmd::pubsub`, the design in docs/pubsub.md) and keyspace notifications, the
//! engine's recorded events published as Redis publishes them ([`notify`]).
//!
//! Shaped so because a subscription lives on the shard of its connection while a
//! message may be published on any shard: delivery is a fan-out over the mesh to
//! each shard's own subscribers, written straight into their reply queues.

pub mod notify;
pub mod pubsub;
