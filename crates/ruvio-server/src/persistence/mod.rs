//! Persistence: how a shard's writes survive a restart, and how a keyspace is
//! rebuilt (docs/durability.md).
//!
//! - [`wal`]: the shard's write-ahead log (appending, group writes, fsync); its
//!   replay at start and the snapshot files' names: `recovery.rs`.
//! - [`durable`]: `--durability always`, replies released once their group is on disk.
//! - [`snapshot`]: BGSAVE without fork, in slices; [`save_rules`]: Redis' `save` rules.
//! - [`loading`]: LOADING at start; [`import`]: `--import-rdb`; [`export`]: DEBUG
//!   EXPORT-RDB; [`reshard`]: a data directory moved to a new shard count.
//! - [`shutdown`]: SHUTDOWN and SIGTERM, leaving without losing data.
//! - [`stream_mark`]: a replica's place in its primary's stream, kept in each
//!   shard's log for a partial resync after a restart.
//!
//! Shaped so because the log's format and files belong to ruvio-wal and the
//! snapshot's encoding to the engine: this folder is the glue that decides when
//! bytes go to disk and what a client waits for meanwhile.

pub mod durable;
pub mod export;
pub mod import;
pub mod loading;
mod recovery;
pub mod reshard;
pub mod save_rules;
pub mod shutdown;
pub mod snapshot;
pub mod stream_mark;
pub mod wal;
