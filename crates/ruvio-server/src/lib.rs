//! The server's modules as a library: the `ruvio` binary (main.rs) starts the
//! shards from them, and the fuzz targets (fuzz/, see docs/fuzzing.md) drive the
//! same dispatch path in process, without sockets.
//!
//! One folder per subsystem, listed here from the floor up; docs/architecture.md
//! draws the same order with what each owns, and `tests/layering.rs` fails on an
//! import that runs against it. A module may use what is on its own floor or below.
//!
//! | floor | subsystem | owns |
//! |---|---|---|
//! | 0 | [`clock`] | the wall clock in Unix milliseconds |
//! | 0 | [`config`] | settings: defaults, the TOML file, flags |
//! | 0 | [`memory`] | the allocator's count of bytes, the `maxmemory` limit |
//! | 0 | [`serverlog`] | the server log: `loglevel`, `logfile`, Redis's line format |
//! | 1 | [`cluster`] | which shard owns which slot, how shards present themselves |
//! | 1 | [`stats`] | counters and the gauges INFO reports |
//! | 2 | [`net`] | sockets, one connection and its reply queue, output limits |
//! | 2 | [`acl`] | ACL users, the check before a command runs, ACL LOG, the ACL file |
//! | 3 | [`persistence`] | the log, group commit, snapshots, loading, import/export, shutdown |
//! | 3 | [`messaging`] | Pub/Sub delivery, keyspace notifications |
//! | 4 | [`mesh`] | forwarding, gathers, lending, owner transactions, the script lock |
//! | 4 | [`scripting`] | what a script needs of the server beyond its keyspace |
//! | 4 | [`transactions`] | MULTI/EXEC and WATCH |
//! | 5 | [`replication`] | Redis's replication both ways: role, link, offset, backlog, replicas |
//! | 5 | [`tracking`] | CLIENT TRACKING: keys read, BCAST prefixes, invalidations |
//! | 6 | [`cmd`] | the command table, the server's own commands (client, config, info ...) |
//! | 7 | [`shard`] | the loop, its state, dispatch, execution, blocked clients |

pub mod acl;
pub mod clock;
pub mod cluster;
pub mod cmd;
pub mod config;
pub mod dial;
pub mod memory;
pub mod mesh;
pub mod messaging;
pub mod net;
pub mod observability;
pub mod persistence;
pub mod replication;
pub mod scripting;
pub mod serverlog;
pub mod shard;
pub mod stats;
pub mod tracking;
pub mod transactions;

/// Exit status when a shard cannot go on (its loop panicked, or a command panicked
/// after it had begun changing the keyspace): EX_SOFTWARE. The process exits as a
/// whole, so a service manager restarts it, rather than leave a dead shard behind
/// whose clients and held replies would wait forever (docs/faults.md).
pub const EXIT_SHARD_FAILED: i32 = 70;
