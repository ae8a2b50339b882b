//! The write-ahead log's format, with no I/O scheduling: how a write is framed as a
//! record ([`frame`]), how a shard's log is cut into segment files ([`segment`]),
//! how a log is read back, including where a torn or corrupt tail ends it
//! ([`read`]), and the block arithmetic of writing it with direct I/O ([`direct`]). The server decides when bytes go to disk (its io_uring ring, group
//! commit, fsync policy: docs/durability.md); this crate only knows bytes.
//!
//! A record is logical: one command as the engine asked it to be logged
//! (`Effects::log_records`: relative expiries as absolute times, random choices as
//! their outcome), with the database it ran in. Replaying a shard's records in
//! order through the engine rebuilds its keyspace.

pub mod direct;
pub mod frame;
pub mod read;
pub mod segment;

pub use frame::{append_command, Group};
pub use read::{read_log, record_keys, LogEnd, Record};
