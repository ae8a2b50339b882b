//! The server's modules as a library: the `ruvio` binary (main.rs) starts the
//! shards from them, and the fuzz targets (fuzz/, see docs/fuzzing.md) drive the
//! same dispatch path in process, without sockets.

pub mod alloc;
pub mod blocking;
pub mod cmd;
pub mod config;
pub mod conn;
pub mod dispatch;
pub mod exec;
pub mod forward;
pub mod gather;
pub mod inproc;
pub mod lending;
pub mod memory;
pub mod net;
pub mod pause;
pub mod registry;
pub mod shard;
pub mod slab;
pub mod stats;
pub mod topology;
