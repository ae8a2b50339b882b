//! Ruvio's engine: the keyspace of one shard, value encodings, every command's
//! semantics, expiry, memory accounting and the command table (as data).
//!
//! Plain synchronous Rust: no async, no sockets, no files. Every command can be
//! unit-tested without a server. Handlers write their reply through
//! [`ruvio_resp::Reply`]; the server decides where those bytes go.
//!
//! Layout: the modules stand in floors, each importing only its own floor and
//! those below (`crate::X` paths never point up), so a value can be read and
//! tested without the keyspace, and the keyspace without any command:
//! 1. Helpers every floor uses: `args`, `glob`, `longdouble` (Redis' argument,
//!    pattern and `long double` rules), [`error`] (every client-visible error
//!    text, the server's too, in one place), [`slot`] (CRC16 hash slots and hash
//!    tags, exactly as Redis Cluster), [`fault`], `block`, `memsize` (what a heap
//!    block costs) and `clock` (the access clock in an entry and
//!    `maxmemory-policy`).
//! 2. Values, what the keyspace stores: `values` (each family's value type and
//!    encodings, and a value's RDB object bytes), [`value`] (public views of
//!    values: type, encoding, string contents) and [`undo`] (the undo journal's
//!    state and the record side the values use).
//! 3. `keyspace`: the per-database table, its compact entry layout, the snapshot's
//!    copy-on-write and the journal's steps of database changes.
//! 4. The engine: [`engine`] ([`Engine`], one shard's databases, lookups with
//!    lazy expiry, active expiry, statistics, memory accounting), [`command`] (the
//!    command table's row format, shared with the server's own commands, and the
//!    context a handler runs in), `evict`, `rollback` (the journal's apply side),
//!    `leases` (FILLGET's leases) and [`snapshot`].
//! 5. The command families, one module each as Redis' t_*.c files: `strings`,
//!    `bitmaps`, `hll`, `keys`, `lists`, `hashes`, `sets`, `zsets`, `geo`, `sort`,
//!    `streams`, `fill` (FILLGET and FILLSET, Ruvio's stampede-free cache read),
//!    [`scripting`] and [`rdb`] (DUMP/RESTORE payloads, RDB files); each exports
//!    `COMMANDS`, and `table` chains them for [`Engine::commands`].
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

/// The Redis version Ruvio reports (HELLO, INFO's `redis_version`, Lua's
/// `redis.REDIS_VERSION`): the newest Redis whose command additions Ruvio has,
/// 8.0 (7.4's hash field expiry, 8.0's HGETEX / HSETEX / HGETDEL, and 8.2's BITOP
/// operators beyond). Clients and test suites gate features on it (ioredis's tests
/// skip HEXPIRE below 7.4; redis-py offers client-side caching from 7.4, which
/// needs CLIENT TRACKING: Ruvio lacks it). docs/compatibility.md lists what of
/// Redis up to this version is missing.
pub const REDIS_VERSION: &str = "8.0.0";

/// [`REDIS_VERSION`] as Redis's `REDIS_VERSION_NUM`: `0x00MMmmpp`.
pub const REDIS_VERSION_NUM: u32 = version_num(REDIS_VERSION);

/// `"major.minor.patch"` as `(major << 16) | (minor << 8) | patch`.
const fn version_num(version: &str) -> u32 {
    let bytes = version.as_bytes();
    let (mut parts, mut part, mut i) = ([0u32; 3], 0, 0);
    while i < bytes.len() {
        if bytes[i] == b'.' {
            part += 1;
        } else {
            parts[part] = parts[part] * 10 + (bytes[i] - b'0') as u32;
        }
        i += 1;
    }
    (parts[0] << 16) | (parts[1] << 8) | parts[2]
}

const _: () = assert!(version_num("7.0.15") == 458_767);

pub mod command;
pub mod debug_digest;
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
mod clock;
mod evict;
mod fill;
mod geo;
mod glob;
mod hashes;
mod hll;
mod keys;
mod keyspace;
mod leases;
mod lists;
mod longdouble;
mod memsize;
mod rollback;
pub mod scripting;
mod sets;
mod sort;
mod streams;
mod strings;
mod table;
mod values;
mod varint;
mod zsets;

pub use args::parse_cursor;
pub use clock::EvictionPolicy;
pub use command::{
    CommandMeta, CommandRow, CommandTree, EngineCommand, EngineFn, ExecCtx, KeySpec, MergeRule,
};
pub use engine::{Engine, EngineConfig, EngineStats, KeyNote, KeyNoteKind};
pub use error::CmdError;
pub use glob::{glob_match, GlobMatcher};
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
