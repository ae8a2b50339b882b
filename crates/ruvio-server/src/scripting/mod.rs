//! The scripting host: what a script's `redis.call` needs of the server beyond the
//! shard's keyspace (PUBLISH, INFO, DBSIZE ...), and the delivery of what scripts
//! published ([`host`]). Lua itself, EVAL and FUNCTION semantics are the engine's
//! (`ruvio_engine::scripting`); scripts that reach keys on other shards are the
//! mesh's script lock (`mesh::script_lock`).
//!
//! Shaped so because a script runs synchronously inside the engine on one shard and
//! cannot wait for the others: the host answers from what this shard already knows.

pub mod host;
