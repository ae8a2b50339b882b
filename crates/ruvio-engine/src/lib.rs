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
//! - [`engine`]: [`Engine`], one shard's databases, lookups with lazy expiry, active
//!   expiry, statistics, memory accounting.
//! - `keyspace`: the per-database table and its compact entry layout.
//! - [`value`]: public views of values (type, encoding, string contents).
//! - [`error`]: every client-visible error text, in one place.
//! - `strings`, `keys`: the command families; each exports `COMMANDS`.
//! - `args`, `glob`, `longdouble`: Redis' argument, pattern and `long double` rules.
//!
//! What the server must know:
//! - Arity is checked by the server ([`CommandMeta::arity_ok`]); handlers assume it.
//! - [`ExecCtx::now_ms`] is wall-clock Unix milliseconds; every expiry decision
//!   (lazy or active) compares against it, and relative TTLs are stored as absolute
//!   times.
//! - Container commands OBJECT and MEMORY are single rows (key position 2, so
//!   `OBJECT ENCODING key` routes by its key); their handlers resolve the subcommand
//!   and answer Redis' `unknown subcommand` / subcommand arity errors. The
//!   subcommand rows (`object|encoding` ...) are in [`Engine::subcommands`] for
//!   COMMAND INFO/DOCS.
//! - SCAN cursors are slab slot ids below 2^32.

#![warn(missing_docs)]

pub mod command;
pub mod engine;
pub mod error;
pub mod slot;
pub mod value;

mod args;
mod glob;
mod keys;
mod keyspace;
mod lists;
mod longdouble;
mod strings;

pub use command::{CommandMeta, EngineCommand, EngineFn, ExecCtx, KeySpec, MergeRule};
pub use engine::{Engine, EngineConfig, EngineStats};
pub use error::CmdError;
pub use glob::glob_match;
pub use keyspace::ENTRY_BYTES;

/// The generic keyspace family's table.
pub use keys::COMMANDS as KEY_COMMANDS;
/// The string family's table (also reachable through [`Engine::commands`]).
pub use strings::COMMANDS as STRING_COMMANDS;
