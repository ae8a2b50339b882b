//! A snapshot of a shard's keyspace written in slices while the shard keeps serving
//! (BGSAVE without fork): the RDB bytes of the keyspace as it was when the snapshot
//! began, produced a bounded number of keys at a time.
//!
//! Consistency comes from copy-on-write of entries inside each database (see
//! `keyspace::cow`): a key about to change before the scan reached it is written
//! first, keys added after the start are skipped, a flushed database's old entries
//! stay with the snapshot. The driver here only walks the databases in order and
//! hands out bytes; where they go (a file, its checksum, its name) is the server's
//! business. The bytes are an RDB file's body: `SELECTDB` runs and keys, to be put
//! between [`crate::rdb::file::header`] and the end-of-keys opcode.

use crate::values::rdb::RDB_VERSION;
use crate::Engine;

/// A snapshot in progress on one engine (its state lives in the databases, which
/// SWAPDB may move around: each knows the number it is saved under).
#[derive(Debug)]
pub struct Snapshot(());

impl Snapshot {
    /// Begin a snapshot of `engine` as it is now; keys expired at `now_ms` are left
    /// out. While it runs, every database writes its keys ahead of a change.
    pub fn begin(engine: &mut Engine, now_ms: u64) -> Snapshot {
        let clock = engine.config().clock_rules();
        for db in 0..engine.db_count() {
            engine.db_mut(db).snapshot_begin(db, clock, now_ms);
        }
        Snapshot(())
    }

    /// Append the next bytes to `out`: every key written ahead since the last
    /// step, then up to `keys` more scanned ones. True once every key is out.
    pub fn step(&mut self, engine: &mut Engine, out: &mut Vec<u8>, keys: usize) -> bool {
        let mut budget = keys;
        let mut done = true;
        for db in 0..engine.db_count() {
            // Every database drains what it wrote ahead; the first unfinished
            // ones share the budget.
            done = engine.db_mut(db).snapshot_step(out, &mut budget) && done;
        }
        done
    }

    /// End the snapshot (done or abandoned): the databases stop writing ahead, the
    /// entries a flush left to it are freed lazily. Returns the RDB version the
    /// keys written need, or the first key that could not be written.
    pub fn end(self, engine: &mut Engine) -> Result<u16, String> {
        let mut version = Ok(RDB_VERSION);
        for db in 0..engine.db_count() {
            let (result, chunks) = engine.db_mut(db).snapshot_end();
            engine.free_later(chunks);
            version = match (version, result) {
                (Err(e), _) | (Ok(_), Err(e)) => Err(e),
                (Ok(a), Ok(b)) => Ok(a.max(b)),
            };
        }
        version
    }
}
