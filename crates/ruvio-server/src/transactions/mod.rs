//! Transactions: MULTI/EXEC as the dispatcher runs them ([`multi`]; running the
//! queue: [`exec_run`]) and WATCH's
//! optimistic locking, registered with the shard that owns each watched key
//! ([`watch`]). The command rows are in `cmd::transactions`; the design and its
//! cost in docs/transactions.md.
//!
//! Shaped so because a queued transaction runs where its keys live: on the
//! client's shard, on one other owner (`mesh::owner_tx`), or over borrowed keys
//! (`mesh::lending`); WATCH must see a write whichever shard made it.

pub mod exec_run;
pub mod multi;
pub mod watch;
