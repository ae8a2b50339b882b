//! The undo journal's steps of database changes (`crate::undo` has the journal's
//! state and the values' side): what a running command did to this shard's
//! databases, newest last, each step enough to reverse one change.
//!
//! Why here, on the keyspace's floor: the steps hold entries (a deleted one, one
//! as it was before a change in place), so they sit with the type they hold;
//! values below record into `crate::undo` without knowing entries, and a run of
//! their records becomes one [`Step::Values`] naming the entry when its change
//! ends (or when the open value is replaced whole, so the order stays that of the
//! changes). Reversing the steps is the engine's (`crate::rollback`), above.

use std::cell::{Cell, RefCell};

use super::entry::FlatCopy;
use super::{Entry, EntryId, ENTRY_BYTES};
use crate::undo::{self, ARENA_BYTES_MAX, COPY_BYTES_MAX, HELD_BYTES_MAX};

thread_local! {
    /// How to reverse the running command's changes, oldest first.
    static STEPS: RefCell<Vec<Step>> = const { RefCell::new(Vec::new()) };
    /// Heap bytes of the deleted entries the steps hold.
    static HELD_BYTES: Cell<usize> = const { Cell::new(0) };
}

/// Steps whose room the journal keeps between commands (no allocation per command
/// once it has grown; a script's thousands of steps do not pin their room).
pub(crate) const KEEP_STEPS_MAX: usize = 1024;

/// How to reverse one primitive change. Databases are numbered as the engine
/// numbered them when the change was made (rolled back in reverse order, so a
/// SWAPDB is undone before any change made before it).
pub(crate) enum Step {
    /// An entry was put into this slot.
    Inserted { db: usize, id: EntryId },
    /// This entry was deleted from this slot.
    Deleted {
        db: usize,
        id: EntryId,
        entry: Entry,
    },
    /// The entry in this slot had this expiry.
    Expiry {
        db: usize,
        id: EntryId,
        was: Option<u64>,
    },
    /// The entry in this slot was this before a change in place.
    Modified {
        db: usize,
        id: EntryId,
        before: Entry,
    },
    /// The entry in this slot was this copy (its blocks' bytes in [`undo::ARENA`])
    /// before a change in place.
    Copied {
        db: usize,
        id: EntryId,
        before: FlatCopy,
    },
    /// The entry now in `to` (database and slot) was `key` in `from`.
    Moved {
        from: (usize, EntryId),
        to: (usize, EntryId),
        key: Vec<u8>,
    },
    /// Two databases were swapped.
    Swapped { a: usize, b: usize },
    /// The big value in this slot changed: the last `count` value steps of
    /// [`undo`] (recorded by its mutators while it was open) reverse it.
    Values { db: usize, id: EntryId, count: u32 },
}

/// Record `step` (one that holds no entry) if a command is running.
#[inline]
pub(crate) fn record(step: Step) {
    if undo::recording() {
        STEPS.with_borrow_mut(|steps| steps.push(step));
    }
}

/// Record `step`, which holds `entry_bytes` of a deleted entry, if a command is
/// running; gives it back otherwise, and when the entries the journal holds would
/// pass [`HELD_BYTES_MAX`] (the command can then no longer be rolled back).
pub(crate) fn hold(step: Step, entry_bytes: usize) -> Option<Step> {
    if !undo::recording() {
        return Some(step);
    }
    let held = HELD_BYTES.with(Cell::get) + entry_bytes + ENTRY_BYTES;
    if held > HELD_BYTES_MAX {
        undo::mark_unrecoverable();
        return Some(step);
    }
    HELD_BYTES.with(|h| h.set(held));
    STEPS.with_borrow_mut(|steps| steps.push(step));
    None
}

/// Record a copy of `entry` (entry `id` of `db`) before a change in place, if a
/// command is running: a 48-byte copy of an all-inline entry, or its heap blocks'
/// bytes appended to the arena when they are plain blocks of at most
/// [`COPY_BYTES_MAX`]. Else, for a big string, list, hash, set, sorted set or a
/// stream, open it so its mutators record their inverses (true: the caller
/// closes it after the change); anything else (a compact collection past the
/// bound) marks the command unrecoverable.
pub(crate) fn keep_preimage(db: usize, id: EntryId, entry: &Entry) -> bool {
    if !undo::recording() || has_preimage(db, id) {
        return false;
    }
    if let Some(before) = entry.copy_if_inline() {
        record(Step::Modified { db, id, before });
        return false;
    }
    let copied = undo::ARENA.with_borrow_mut(|arena| {
        let room = arena.len() <= ARENA_BYTES_MAX;
        room.then(|| entry.copy_flat(arena, COPY_BYTES_MAX))
            .flatten()
    });
    match copied {
        Some(before) => record(Step::Copied { db, id, before }),
        None if entry.records_inverses() => {
            undo::open(db, id);
            return true;
        }
        None => undo::mark_unrecoverable(),
    }
    false
}

/// The open entry's value is about to be replaced whole (SET over a big value):
/// the journal takes the entry as it was (moved, not copied, as a delete's), to
/// put it back on a roll-back. Past [`HELD_BYTES_MAX`] it is dropped and the
/// command can no longer be undone.
pub(crate) fn record_replaced(before: Entry) {
    let Some((db, id)) = undo::open_entry() else {
        return drop(before);
    };
    claim_value_steps();
    let bytes = before.heap_bytes();
    drop(hold(Step::Modified { db, id, before }, bytes));
}

/// The change of the open entry ended (or its command did, cut short).
pub(crate) fn close_open_entry() {
    claim_value_steps();
    undo::close();
}

/// The value steps the open entry's mutators recorded since the last claim become
/// one step naming the entry, in their place among the keyspace's steps. Pushed
/// whether or not a command still runs: a panic in the middle of a change closes
/// the entry only once the command has ended ([`end_command`]), and its steps
/// must still be there to reverse.
fn claim_value_steps() {
    let count = undo::take_pending();
    if count > 0 {
        if let Some((db, id)) = undo::open_entry() {
            STEPS.with_borrow_mut(|steps| steps.push(Step::Values { db, id, count }));
        }
    }
}

/// True when the running command already recorded a copy of entry `id` of `db`
/// (looking back a few steps only: a later copy is not needed, the first restores
/// what the command found; a miss merely copies again).
pub(crate) fn has_preimage(db: usize, id: EntryId) -> bool {
    const LOOK_BACK: usize = 8;
    STEPS.with_borrow(|steps| {
        steps.iter().rev().take(LOOK_BACK).any(|s| match s {
            Step::Modified { db: d, id: i, .. } | Step::Copied { db: d, id: i, .. } => {
                *d == db && *i == id
            }
            _ => false,
        })
    })
}

/// The outermost command ended: the held bytes are counted afresh for the next
/// one and the open entry, if a panic left one, is closed.
pub(crate) fn end_command() {
    if HELD_BYTES.with(Cell::get) != 0 {
        HELD_BYTES.with(|h| h.set(0));
    }
    close_open_entry();
}

/// Take the steps of the command that ended, if it recorded any.
pub(crate) fn take_steps() -> Option<Vec<Step>> {
    STEPS.with_borrow_mut(|steps| (!steps.is_empty()).then(|| std::mem::take(steps)))
}

/// Hand each step of the command that ended to `each` (oldest first), keeping
/// their room for the next command up to a bound.
pub(crate) fn drain_steps(mut each: impl FnMut(Step)) {
    STEPS.with_borrow_mut(|steps| {
        if steps.is_empty() {
            return;
        }
        for step in steps.drain(..) {
            each(step);
        }
        if steps.capacity() > KEEP_STEPS_MAX {
            steps.shrink_to(KEEP_STEPS_MAX);
        }
    });
}

/// Give an emptied step buffer back for the next command.
pub(crate) fn reuse(mut steps: Vec<Step>) {
    if steps.capacity() <= KEEP_STEPS_MAX {
        steps.clear();
        STEPS.with_borrow_mut(|kept| {
            if kept.is_empty() {
                *kept = steps;
            }
        });
    }
}
