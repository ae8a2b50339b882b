//! Transactions: MULTI/EXEC's data and the steps that touch only it ([`multi`]:
//! a transaction on borrowed keys, forgetting a client's watches) and WATCH's
//! optimistic locking, registered with the shard that owns each watched key
//! ([`watch`]). Queueing and running a queue are the shard's
//! (`shard/multi.rs`, `shard/exec_run.rs`): they run commands on its core and
//! answer its connections. The command rows are in `cmd::transactions`; the
//! design and its cost in docs/transactions.md.
//!
//! Shaped so because a queued transaction runs where its keys live: on the
//! client's shard, on one other owner (`mesh::owner_tx`), or over borrowed keys
//! (`mesh::lending`); WATCH must see a write whichever shard made it.

pub mod multi;
pub mod watch;
