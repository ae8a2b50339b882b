//! Ruvio's engine: the keyspace of one shard, value encodings, every command's
//! semantics, expiry, memory accounting and the command table (as data).
//!
//! Plain synchronous Rust: no async, no sockets, no files. Every command can be
//! unit-tested without a server. Handlers write their reply through
//! [`ruvio_resp::Reply`]; the server decides where those bytes go.
//!
//! Layout (one module per command family, as Redis' t_*.c files):
//! - [`command`]: the command metadata type (name, arity, flags, keys, ACL categories).
//! - [`slot`]: CRC16 hash slots and hash tags, exactly as Redis Cluster.
//! - `keyspace`: the per-database table and its compact entry layout.
//! - `strings`, `keys`, `dbadmin`: the command families; each exports `COMMANDS`.

pub mod command;
pub mod slot;

pub use command::{CommandMeta, EngineCommand, EngineFn, KeySpec};
