//! Ruvio's engine: the keyspace of one shard, value encodings, every command's
//! semantics, expiry, memory accounting and the command table (as data).
//!
//! Plain synchronous Rust: no async, no sockets, no files. Every command can be
//! unit-tested without a server. Handlers write their reply through
//! [`ruvio_resp::Reply`]; the server decides where those bytes go.
//!
//! Layout (one module per command family, as Redis' t_*.c files):
//! - [`command`]: the command table's row format (name, arity, flags, keys, ACL
//!   categories, merge rule, subcommands), shared with the server's own commands.
//! - [`slot`]: CRC16 hash slots and hash tags, exactly as Redis Cluster.
//! - [`engine`]: [`Engine`], one shard's databases, lookups with lazy expiry, active
//!   expiry, statistics, memory accounting.
//! - `keyspace`: the per-database table and its compact entry layout.
//! - [`value`]: public views of values (type, encoding, string contents).
//! - [`error`]: every client-visible error text (the server's too), in one place.
//! - `strings`, `bitmaps`, `hll`, `keys`, `lists`, `hashes`, `sets`, `zsets`, `geo`, `sort`, `streams`:
//!   the command families;
//!   each exports `COMMANDS`.
//! - `fill`: FILLGET and FILLSET, Ruvio's stampede-free cache read, and the
//!   per-shard fill leases.
//! - `args`, `glob`, `longdouble`: Redis' argument, pattern and `long double` rules.
//!
//! What the server must know:
//! - Arity is checked by the server ([`CommandMeta::arity_ok`]); handlers assume it.
//! - [`ExecCtx::now_ms`] is wall-clock Unix milliseconds; every expiry decision
//!   (lazy or active) compares against it, and relative TTLs are stored as absolute
//!   times.
//! - Container commands OBJECT and MEMORY are rows without a handler that carry
//!   their subcommand rows (`object|encoding` ...); the caller resolves the
//!   subcommand ([`CommandTree::resolve`]: Redis' `unknown subcommand` and
//!   subcommand arity errors) and routes and runs the subcommand's row.
//! - SCAN cursors are slab slot ids below 2^32.
//! - FILLGET leases end on their own: the server calls
//!   [`Engine::expire_fill_leases`] every loop iteration and runs the clients
//!   blocked on each key it reports again.

#![warn(missing_docs)]

pub mod command;
pub mod engine;
pub mod error;
pub mod fault;
pub mod rdb;
pub mod slot;
pub mod snapshot;
pub mod undo;
pub mod value;

mod args;
mod bitmaps;
mod block;
mod evict;
mod fill;
mod geo;
mod glob;
mod hashes;
mod hll;
mod keys;
mod keyspace;
mod lists;
mod longdouble;
pub mod scripting;
mod sets;
mod sort;
mod streams;
mod strings;
mod zsets;

pub use args::parse_cursor;
pub use command::{
    CommandMeta, CommandRow, CommandTree, EngineCommand, EngineFn, ExecCtx, KeySpec, MergeRule,
};
pub use engine::{Engine, EngineConfig, EngineStats, KeyNote, KeyNoteKind};
pub use error::CmdError;
pub use evict::EvictionPolicy;
pub use glob::glob_match;
pub use hll::DistinctEstimate;
pub use keyspace::{Entry, ENTRY_BYTES};
#[cfg(feature = "bench-internals")]
#[doc(hidden)]
pub use longdouble::bench as longdouble_bench;
pub use sort::value_keys_wanted;

/// The bitmap family's table (also reachable through [`Engine::commands`]).
pub use bitmaps::COMMANDS as BITMAP_COMMANDS;
/// The fill family's table (FILLGET, FILLSET).
pub use fill::COMMANDS as FILL_COMMANDS;
/// Lease length when FILLGET names none, and the longest LEASE and WAIT.
pub use fill::{LEASE_MS_DEFAULT, LEASE_MS_MAX};
/// The geo family's table (also reachable through [`Engine::commands`]).
pub use geo::COMMANDS as GEO_COMMANDS;
/// The hash family's table (also reachable through [`Engine::commands`]).
pub use hashes::COMMANDS as HASH_COMMANDS;
/// The HyperLogLog family's table (also reachable through [`Engine::commands`]).
pub use hll::COMMANDS as HLL_COMMANDS;
/// The generic keyspace family's table.
pub use keys::COMMANDS as KEY_COMMANDS;
/// The list family's table (also reachable through [`Engine::commands`]).
pub use lists::COMMANDS as LIST_COMMANDS;
/// The set family's table (also reachable through [`Engine::commands`]).
pub use sets::COMMANDS as SET_COMMANDS;
/// SORT and SORT_RO (also reachable through [`Engine::commands`]).
pub use sort::COMMANDS as SORT_COMMANDS;
/// The stream family's table (also reachable through [`Engine::commands`]).
pub use streams::COMMANDS as STREAM_COMMANDS;
/// The string family's table (also reachable through [`Engine::commands`]).
pub use strings::COMMANDS as STRING_COMMANDS;
/// The sorted-set family's command table.
pub use zsets::COMMANDS as ZSET_COMMANDS;
