//! Shared pieces of Ruvio's fuzz targets (docs/fuzzing.md): the request parser run
//! as a connection runs it, requests built from the command table, and an engine
//! driven by commands next to a plain model of each data type. The in-process
//! two-shard server is `ruvio_server::shard::inproc`.

pub mod commands;
pub mod engine;
pub mod resp;
