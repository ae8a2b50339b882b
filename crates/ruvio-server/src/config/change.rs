//! A change made on one shard that every other shard applies to its own copy of
//! the server's state: CONFIG SET's validated pairs, RESETSTAT, CLIENT PAUSE, a
//! SAVE or BGSAVE to take part in, SHUTDOWN, the function libraries. One server,
//! one configuration: a client's command lands on one shard, which broadcasts the
//! change over the mesh (`Outbox::broadcast`); `shard::settings::apply_config_change`
//! applies it. Plain data here, so the subsystems that start such a change (the
//! snapshot, shutdown) need nothing above the configuration to say it.

use std::sync::atomic::Ordering::SeqCst;
use std::sync::atomic::{AtomicBool, AtomicUsize};
use std::sync::Arc;

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
    /// DEBUG RELOAD: reload this shard's keyspace through its RDB form and say
    /// how it went in the outcome every shard of the reload shares.
    Reload(Arc<ReloadOutcome>),
    /// Forward mode as one node of the cluster bus: shard 0's slot map
    /// changed; route by the one it left in `Shared` (a copy of 16,384
    /// entries travels once, not once per shard).
    NodeSlots,
    /// Forward mode as one node of the cluster bus: a PUBLISH made on another
    /// shard, for shard 0 (which holds the node's links) to send to every
    /// other node; the other shards ignore it.
    BusPublish { channel: Vec<u8>, message: Vec<u8> },
}

/// What the shards of one DEBUG RELOAD tell the shard that answers it: each adds
/// its part before it publishes for the gather, so the answer, sent once every
/// shard published, reads every part (the mesh's queues order the two).
#[derive(Debug, Default)]
pub struct ReloadOutcome {
    /// Keys loaded back, over the shards.
    keys: AtomicUsize,
    /// A shard's dump did not load back (that shard kept its keyspace).
    load_failed: AtomicBool,
    /// A shard was writing a snapshot (a background save, a replica's full sync)
    /// and did not reload: its databases hold the snapshot's state.
    saving: AtomicBool,
}

/// Redis's answer when the dump does not load back.
pub const RELOAD_FAILED: &str = "ERR Error trying to load the RDB dump";
/// Ruvio's answer while a snapshot is being written (the reload replaces the
/// databases that hold the snapshot's state).
pub const RELOAD_WAITS_FOR_SAVE: &str =
    "ERR DEBUG RELOAD waits for the background save in progress";

impl ReloadOutcome {
    /// A shard reloaded `keys` keys.
    pub fn reloaded(&self, keys: usize) {
        self.keys.fetch_add(keys, SeqCst);
    }

    /// A shard's dump did not load back.
    pub fn failed(&self) {
        self.load_failed.store(true, SeqCst);
    }

    /// A shard was writing a snapshot and did not reload.
    pub fn refused_while_saving(&self) {
        self.saving.store(true, SeqCst);
    }

    /// The keys every shard loaded back.
    pub fn keys(&self) -> usize {
        self.keys.load(SeqCst)
    }

    /// The error line to answer (without `-` and CRLF), or `None` for `+OK`: a
    /// failed load first, as Redis's only error of a reload.
    pub fn error(&self) -> Option<&'static str> {
        if self.load_failed.load(SeqCst) {
            Some(RELOAD_FAILED)
        } else if self.saving.load(SeqCst) {
            Some(RELOAD_WAITS_FOR_SAVE)
        } else {
            None
        }
    }

    /// The whole answer, once every shard added its part; the server log says
    /// `DB reloaded by DEBUG RELOAD` when it is `+OK`, as Redis's.
    pub fn answer(&self) -> Vec<u8> {
        match self.error() {
            Some(line) => format!("-{line}\r\n").into_bytes(),
            None => {
                eprintln!("DB reloaded by DEBUG RELOAD ({} keys)", self.keys());
                b"+OK\r\n".to_vec()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reload_answers_ok_only_when_every_shard_reloaded() {
        let outcome = ReloadOutcome::default();
        outcome.reloaded(3);
        outcome.reloaded(4);
        assert_eq!(outcome.keys(), 7);
        assert_eq!(outcome.answer(), b"+OK\r\n");
        outcome.refused_while_saving();
        let waits = format!("-{RELOAD_WAITS_FOR_SAVE}\r\n");
        assert_eq!(outcome.answer(), waits.as_bytes());
        // A failed load is Redis's error, whatever else happened.
        outcome.failed();
        assert_eq!(
            outcome.answer(),
            b"-ERR Error trying to load the RDB dump\r\n"
        );
    }
}
