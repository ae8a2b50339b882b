//! Fault containment support: a count of keyspace mutations, and fault points for
//! tests.
//!
//! The server catches a panic in a command (a bug: no input may cause one) and
//! rolls the command's changes back from the undo journal ([`crate::undo`]). Every
//! change to a database goes through [`crate::keyspace::Db`]'s `insert`, `delete`,
//! `remove`, `rename`, `modify` and `set_expire`, or through the engine's
//! `flush_all`, `flush_db`, `swap_dbs`, `move_entry` and `adopt`; each bumps this
//! shard's mutation count (a thread-local: one shard per thread, one add per
//! change), which tells the server's log whether the command had changed anything
//! before it panicked.
//!
//! Fault points exist only in debug builds (the test binaries): with
//! `RUVIO_FAULT=lpush:mid-write` in the environment, LPUSH panics at its `mid-write`
//! point, so the tests can show what a real bug would do. Release builds compile
//! them to nothing. Points: the list pushes (`lpush`, `rpush`, `lpushx`, `rpushx`)
//! at `before-write` and `mid-write` (after the change of an existing list, inside
//! it as far as the store is concerned); MSET and MSETNX at `mid-write` (after the
//! first key is set); the server's log at `wal:enospc` (every log write after the
//! first fails with ENOSPC), `wal:slow-write` (every log write waits 200 ms before
//! it is submitted), `wal:slow-fsync-<shard>` (that shard's fdatasyncs under
//! `always` start 200 ms late) and `wal:late-write-<shard>` (that shard learns of
//! each completed log write 200 ms late); snapshots at `snapshot:fail` (every SAVE,
//! BGSAVE and exit save fails); the mesh at `mesh:slow-part-<shard>` (that shard
//! runs each part of a split or every-shard command 100 ms longer).

use std::cell::Cell;

thread_local! {
    static MUTATIONS: Cell<u64> = const { Cell::new(0) };
}

/// Count one change to this shard's keyspace (about to be made).
#[inline]
pub(crate) fn note_mutation() {
    MUTATIONS.with(|m| m.set(m.get().wrapping_add(1)));
    change_point();
}

#[cfg(debug_assertions)]
thread_local! {
    static PANIC_AT_CHANGE_POINT: Cell<u64> = const { Cell::new(0) };
}

/// Tests of the undo journal (debug builds only): panic at the `n`-th change
/// point from now (1 is the next; 0 disarms). Change points are every change of a
/// database about to be made, and every change in place of a value just made (the
/// value then holds the whole change, which its undo must remove).
#[cfg(debug_assertions)]
pub fn panic_at_change_point(n: u64) {
    PANIC_AT_CHANGE_POINT.with(|c| c.set(n));
}

/// A change point (see [`panic_at_change_point`]); nothing in release builds.
#[inline]
pub(crate) fn change_point() {
    #[cfg(debug_assertions)]
    PANIC_AT_CHANGE_POINT.with(|c| match c.get() {
        0 => {}
        1 => {
            c.set(0);
            panic!("change point reached (fault::panic_at_change_point)");
        }
        n => c.set(n - 1),
    });
}

/// Changes made to this thread's keyspace so far (compare two readings).
#[inline]
pub fn mutations() -> u64 {
    MUTATIONS.with(Cell::get)
}

/// Panic here when `RUVIO_FAULT` is `<command>:<stage>` for this command (its name
/// as the client sent it, any case) and stage (debug builds only).
pub(crate) fn point(command: &[u8], stage: &str) {
    if is_armed(command, stage) {
        panic!(
            "fault point {}:{stage} (RUVIO_FAULT)",
            String::from_utf8_lossy(command)
        );
    }
}

/// `RUVIO_FAULT` is `<name>:<stage>` (name compared in any case); always false in
/// release builds. The server uses it for its own fault points (the log's disk).
#[cfg(debug_assertions)]
pub fn is_armed(name: &[u8], stage: &str) -> bool {
    static ARMED: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    let armed = ARMED.get_or_init(|| std::env::var("RUVIO_FAULT").ok());
    armed
        .as_deref()
        .and_then(|a| a.split_once(':'))
        .is_some_and(|(n, s)| s == stage && n.as_bytes().eq_ignore_ascii_case(name))
}

/// Fault points are compiled out of release builds.
#[cfg(not(debug_assertions))]
#[inline(always)]
pub fn is_armed(_name: &[u8], _stage: &str) -> bool {
    false
}
