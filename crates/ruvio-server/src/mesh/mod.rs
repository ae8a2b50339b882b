//! The mesh: work that crosses shards in forward mode, over one lock-free SPSC ring
//! per ordered pair of shards.
//!
//! - [`forward`]: requests sent to the shard that owns their keys, replies back in
//!   request order; the message types every other part of the mesh sends; the
//!   channels that carry them (`channels.rs`).
//! - [`gather`]: server-wide answers (INFO, DBSIZE, KEYS, SCAN, FLUSHALL, CONFIG SET
//!   ...) asked of every shard and merged.
//! - [`lending`]: multi-key commands over several shards run by borrowing the keys.
//! - [`in_place`]: a transaction whose commands each touch one shard runs each
//!   shard's part where its keys live, under locks taken in shard order.
//! - [`owner_tx`]: a transaction whose keys all live on one other shard runs there.
//! - [`publish`]: Pub/Sub messages to other shards (the outbox as messaging's relay).
//! - [`queries`]: the questions every shard answers of its clients or keys (CLIENT
//!   LIST, KILL, UNBLOCK; DEBUG DIGEST, POPULATE, OBJECT), gathered.
//! - [`script_lock`]: scripts that reach keys they did not declare on other shards.
//!
//! Shaped so because a shard never touches another shard's memory: everything that
//! crosses is a typed message carrying owned data (docs/cross-shard.md).

mod channels;
pub mod forward;
pub mod gather;
pub mod in_place;
pub mod lending;
pub mod owner_tx;
pub mod publish;
pub mod queries;
pub mod script_lock;
