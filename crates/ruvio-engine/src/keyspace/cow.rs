//! A database's part of a snapshot taken in slices while the shard keeps serving
//! (BGSAVE without fork; the driver is [`crate::snapshot`]).
//!
//! The snapshot is the database as it was when it began. A scan walks the slab's
//! slots in order from a cursor, a bounded number per call; every slot below the
//! cursor is done. What keeps the result consistent is copy-on-write of entries,
//! done by the database's own mutators ([`super::Db`]):
//!
//! - before an entry at or past the cursor changes, loses its expiry or is removed,
//!   its old state is written *ahead* (into [`Cow::ahead`]) and its slot marked
//!   passed, so the scan skips it later;
//! - a key inserted into a slot at or past the cursor marks the slot passed (it was
//!   not there at the start); slots at or past [`Cow::end`] (the slab's high mark at
//!   the start) were never part of the snapshot;
//! - a database flushed during the snapshot hands its whole old slab to the
//!   [`Cow`] ([`Cow::freeze`]): the scan goes on over it and nothing else touches it.
//!
//! Slots never move (see `slab`), so a slot id names one entry from the start until
//! the entry changes. Cost while no snapshot runs: one predictable branch per
//! mutation. During one: a bit test per mutation, one entry written early per first
//! change of a not-yet-scanned key, and `end / 8` bytes of bits.

use super::entry::Entry;
use super::slab::Slab;
use crate::clock::{clock_of, idle_seconds, lfu_decayed, ClockRules, EvictionPolicy};
use crate::values::rdb::encode::{write_len, write_object, write_string};
use crate::values::rdb::{opcode, RDB_VERSION};

/// One database's snapshot state.
pub(crate) struct Cow {
    /// The database number these keys are saved under (SWAPDB moves a database
    /// together with its `Cow`).
    pub(crate) db_index: usize,
    /// Slots below this are done.
    cursor: u32,
    /// Slots at or past this were unused at the start.
    end: u32,
    /// One bit per slot in `cursor..end` the scan must skip: written ahead, or
    /// filled after the start.
    passed: Vec<u64>,
    /// Entries written ahead of the scan, as RDB bytes, not yet taken.
    pub(crate) ahead: Vec<u8>,
    /// The slab of a database flushed during the snapshot: the scan reads it.
    frozen: Option<Slab>,
    /// How clocks are saved and the time the snapshot began (expired keys are left
    /// out; LRU/LFU hints are as of then).
    clock: ClockRules,
    began_ms: u64,
    /// The highest RDB version an entry written needs.
    pub(crate) version: u16,
    /// The first entry that could not be written.
    pub(crate) error: Option<String>,
    /// Keys and keys with an expiry at the start, for the `RESIZEDB` hint of the
    /// first section written (then `None`).
    pub(crate) sizes: Option<(usize, usize)>,
}

impl Cow {
    /// A snapshot of database `db_index`, whose slab hands out slots below `end`.
    pub(crate) fn new(db_index: usize, end: u32, clock: ClockRules, began_ms: u64) -> Cow {
        Cow {
            db_index,
            cursor: 0,
            end,
            passed: vec![0; (end as usize).div_ceil(64)],
            ahead: Vec::new(),
            frozen: None,
            clock,
            began_ms,
            version: RDB_VERSION,
            error: None,
            sizes: None,
        }
    }

    /// Slot `id` still belongs to the scan: inside `cursor..end`, not passed, and
    /// the live slab is the one scanned.
    fn pending(&self, id: u32) -> bool {
        self.frozen.is_none()
            && (self.cursor..self.end).contains(&id)
            && self.passed[id as usize / 64] & (1 << (id % 64)) == 0
    }

    fn pass(&mut self, id: u32) {
        self.passed[id as usize / 64] |= 1 << (id % 64);
    }

    /// Entry `id` of `slab` is about to change: write its old state first, if the
    /// scan has not reached it.
    pub(crate) fn before_change(&mut self, slab: &Slab, id: u32) {
        if self.pending(id) {
            self.pass(id);
            let mut ahead = std::mem::take(&mut self.ahead);
            self.write(&mut ahead, slab.get(id));
            self.ahead = ahead;
        }
    }

    /// A key was inserted into slot `id`: it was not in the database at the start.
    pub(crate) fn filled(&mut self, id: u32) {
        if self.pending(id) {
            self.pass(id);
        }
    }

    /// The database is being flushed: the scan continues over its old `slab`.
    /// A second flush hands back the slab the scan does not need.
    pub(crate) fn freeze(&mut self, slab: Slab) -> Option<Slab> {
        if self.frozen.is_some() {
            return Some(slab);
        }
        self.frozen = Some(slab);
        None
    }

    /// Write up to `budget` more entries of `live` (or of the frozen slab) into
    /// `out`, counting them off `budget`; true once every slot is done.
    pub(crate) fn scan(&mut self, live: &Slab, out: &mut Vec<u8>, budget: &mut usize) -> bool {
        let frozen = self.frozen.take();
        let slab = frozen.as_ref().unwrap_or(live);
        while self.cursor < self.end && *budget > 0 {
            let id = self.cursor;
            self.cursor += 1;
            let skip = self.passed[id as usize / 64] & (1 << (id % 64)) != 0;
            let entry = slab.get(id);
            if skip || entry.is_vacant() {
                continue;
            }
            self.write(out, entry);
            *budget -= 1;
        }
        self.frozen = frozen;
        self.cursor == self.end
    }

    /// The slab kept for the scan, for freeing once the snapshot ends.
    pub(crate) fn into_frozen(self) -> Option<Slab> {
        self.frozen
    }

    fn write(&mut self, out: &mut Vec<u8>, entry: &Entry) {
        match write_entry(out, entry, self.clock, self.began_ms) {
            Ok(version) => self.version = self.version.max(version),
            Err(e) => {
                self.error.get_or_insert(e);
            }
        }
    }
}

/// One key as an RDB file holds it (expiry, access hint, type, key, object), or
/// nothing when it is expired at `now_ms`; returns the RDB version its object
/// needs, or an error naming a key whose type cannot be written yet (a stream).
pub(crate) fn write_entry(
    out: &mut Vec<u8>,
    entry: &Entry,
    clock: ClockRules,
    now_ms: u64,
) -> Result<u16, String> {
    let at = entry.expire_at();
    if at.is_some_and(|at| at <= now_ms) {
        return Ok(RDB_VERSION);
    }
    if let Some(at) = at {
        out.push(opcode::EXPIRETIME_MS);
        out.extend_from_slice(&at.to_le_bytes());
    }
    write_access_hint(out, clock, entry.clock(), now_ms);
    // The type byte goes before the key: write the object aside first.
    let mut object = Vec::new();
    let needs = write_object(&mut object, entry.value());
    out.push(object[0]);
    write_string(out, entry.key());
    out.extend_from_slice(&object[1..]);
    Ok(needs)
}

/// Redis saves a key's idle seconds under an LRU policy and its LFU counter under
/// an LFU one, so a server loading the file evicts in the same order.
fn write_access_hint(out: &mut Vec<u8>, rules: ClockRules, clock: u32, now_ms: u64) {
    match rules.policy {
        EvictionPolicy::AllKeysLru | EvictionPolicy::VolatileLru => {
            out.push(opcode::IDLE);
            write_len(out, u64::from(idle_seconds(clock_of(now_ms), clock)));
        }
        EvictionPolicy::AllKeysLfu | EvictionPolicy::VolatileLfu => {
            out.push(opcode::FREQ);
            out.push(lfu_decayed(clock, now_ms, rules.lfu_decay_time) as u8);
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Db, NewValue};
    use super::*;

    fn put(db: &mut Db, key: &str, value: &str) -> u32 {
        db.insert(Entry::new(
            key.as_bytes(),
            NewValue::Str {
                bytes: value.as_bytes(),
                raw: false,
            },
            0,
        ))
    }

    /// The keys written (ahead and by the scan), decoded from the RDB bytes: each
    /// string key here is `0x00 len key len value` with short lengths.
    fn keys_of(bytes: &[u8]) -> Vec<(String, String)> {
        let mut out = Vec::new();
        let mut at = 0;
        while at < bytes.len() {
            assert_eq!(bytes[at], 0, "a string object");
            let klen = bytes[at + 1] as usize;
            let key = String::from_utf8_lossy(&bytes[at + 2..at + 2 + klen]).into_owned();
            let vat = at + 2 + klen;
            let vlen = bytes[vat] as usize;
            let value = String::from_utf8_lossy(&bytes[vat + 1..vat + 1 + vlen]).into_owned();
            out.push((key, value));
            at = vat + 1 + vlen;
        }
        out.sort();
        out
    }

    fn begin(db: &mut Db) {
        db.cow = Some(Box::new(Cow::new(
            0,
            db.slots_high(),
            ClockRules::default(),
            0,
        )));
    }

    fn drain(db: &mut Db, budget: usize) -> (Vec<u8>, bool) {
        let Db { cow, slab, .. } = db;
        let cow = cow.as_deref_mut().expect("a snapshot");
        let mut out = std::mem::take(&mut cow.ahead);
        let mut budget = budget;
        let done = cow.scan(slab, &mut out, &mut budget);
        (out, done)
    }

    #[test]
    fn changes_during_the_scan_leave_the_snapshot_as_at_its_start() {
        let mut db = Db::default();
        for n in 0..100 {
            put(&mut db, &format!("k{n:03}"), "old");
        }
        begin(&mut db);
        let (mut written, done) = drain(&mut db, 30);
        assert!(!done);
        // Behind the cursor, ahead of it, a removal, a new key, a reused slot.
        let id = db.find(b"k005").unwrap();
        db.modify(id, |e| {
            e.set_value(NewValue::Str {
                bytes: b"new",
                raw: false,
            })
        });
        let id = db.find(b"k090").unwrap();
        db.modify(id, |e| {
            e.set_value(NewValue::Str {
                bytes: b"new",
                raw: false,
            })
        });
        let id = db.find(b"k080").unwrap();
        db.remove(id);
        put(&mut db, "fresh", "new");
        let id = db.find(b"k070").unwrap();
        db.set_expire(id, Some(1));
        loop {
            let (more, done) = drain(&mut db, 7);
            written.extend(more);
            if done {
                break;
            }
        }
        let expected: Vec<(String, String)> = (0..100)
            .map(|n| (format!("k{n:03}"), "old".to_string()))
            .collect();
        // No key doubled or lost, none changed, no new key; k070's expiry set
        // after the start is not in the snapshot (the parse would stop at it).
        assert_eq!(keys_of(&written), expected);
    }

    #[test]
    fn a_flush_during_the_scan_keeps_the_old_keys_for_it() {
        let mut db = Db::default();
        for n in 0..50 {
            put(&mut db, &format!("k{n:02}"), "v");
        }
        begin(&mut db);
        let (mut written, _) = drain(&mut db, 10);
        let _ = db.take_chunks();
        put(&mut db, "after", "v");
        loop {
            let (more, done) = drain(&mut db, 10);
            written.extend(more);
            if done {
                break;
            }
        }
        let got = keys_of(&written);
        assert_eq!(got.len(), 50);
        assert!(got.iter().all(|(k, _)| k != "after"));
    }
}
