//! Shared pieces of Ruvio's fuzz targets (docs/fuzzing.md): the request parser run
//! as a connection runs it, an in-process two-shard server, and an engine driven
//! by commands next to a plain model of each data type.

pub mod resp;
