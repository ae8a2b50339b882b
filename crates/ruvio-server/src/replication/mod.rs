//! Replication (not built yet; issue "Replication on Redis's own protocol").
//!
//! Will own: REPLICAOF/PSYNC/SYNC/REPLCONF on Redis's protocol in both directions,
//! the replication backlog fed from the engine's deterministic log records (the
//! same records `persistence::wal` writes), replica links and offsets, WAIT and
//! WAITAOF, ROLE, FAILOVER and INFO replication. It will sit above persistence
//! (it reads the log's records) and below `cmd` (whose rows call it).
