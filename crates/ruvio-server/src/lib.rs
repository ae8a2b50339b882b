//! The server's modules as a library: the `ruvio` binary (main.rs) starts the
//! shards from them, and the fuzz targets (fuzz/, see docs/fuzzing.md) drive the
//! same dispatch path in process, without sockets.

pub mod alloc;
pub mod blocking;
pub mod cmd;
pub mod config;
pub mod conn;
pub mod dispatch;
pub mod durable;
pub mod exec;
pub mod export;
pub mod forward;
pub mod gather;
pub mod import;
pub mod inproc;
pub mod lending;
pub mod loading;
pub mod memory;
pub mod multi;
pub mod net;
pub mod notify;
pub mod outlimit;
pub mod owner_tx;
pub mod pause;
pub mod pubsub;
pub mod registry;
pub mod reshard;
pub mod save_rules;
pub mod script_host;
pub mod script_lock;
pub mod shard;
pub mod shutdown;
pub mod slab;
pub mod snapshot;
pub mod stats;
pub mod topology;
pub mod wal;
pub mod watch;

/// Exit status when a shard cannot go on (its loop panicked, or a command panicked
/// after it had begun changing the keyspace): EX_SOFTWARE. The process exits as a
/// whole, so a service manager restarts it, rather than leave a dead shard behind
/// whose clients and held replies would wait forever (docs/faults.md).
pub const EXIT_SHARD_FAILED: i32 = 70;
