//! A change made on one shard that every other shard applies to its own copy of
//! the server's state: CONFIG SET's validated pairs, RESETSTAT, CLIENT PAUSE, a
//! SAVE or BGSAVE to take part in, SHUTDOWN, the function libraries. One server,
//! one configuration: a client's command lands on one shard, which broadcasts the
//! change over the mesh (`Outbox::broadcast`); `cmd::config::apply_config_change`
//! applies it. Plain data here, so the subsystems that start such a change (the
//! snapshot, shutdown) need nothing above the configuration to say it.

/// A configuration change made on one shard, for every other shard to apply too
/// (one server, one configuration: a client's CONFIG SET lands on one shard).
#[derive(Clone, Debug)]
pub enum ConfigChange {
    /// Parameters already validated by the shard that received CONFIG SET.
    Set(Vec<(String, String)>),
    /// CONFIG RESETSTAT, which started this statistics epoch.
    ResetStats { epoch: u64 },
    /// CLIENT PAUSE until `until_ms` (ALL when `all`, else WRITE).
    Pause { until_ms: u64, all: bool },
    /// CLIENT UNPAUSE.
    Unpause,
    /// DEBUG EXPORT-RDB: write this shard's part of the file at this path.
    ExportRdb(String),
    /// SAVE or BGSAVE without a log: write this shard's part of the dump file at
    /// this path (`dir`/`dbfilename`).
    DumpPart(String),
    /// SAVE: take this shard's snapshot.
    Snapshot,
    /// BGSAVE / BGREWRITEAOF: begin this shard's part (see `snapshot`).
    BackgroundSave,
    /// SHUTDOWN or a signal: prepare to exit, saving or not (see `shutdown`).
    Exit { save: bool },
    /// The function libraries after a FUNCTION change, as a FUNCTION DUMP payload.
    Functions(Vec<u8>),
    /// DEBUG SET-SKIP-CHECKSUM-VALIDATION: RESTORE checks payload CRCs or not.
    SkipChecksumValidation(bool),
    /// The ACL users changed (the table is shared): the shard's connections take
    /// the new rules, and those of a deleted user close.
    AclUsers,
}
