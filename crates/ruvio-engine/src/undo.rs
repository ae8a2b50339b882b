//! The undo journal: what the running command changed in the keyspace, kept until
//! it ends, so that a panic part-way (a bug: no input may cause one) can put every
//! database back as the command found it and the shard can go on.
//!
//! Redis and Dragonfly crash on such a bug. Ruvio answers the command with an error
//! and keeps serving, which is only safe if the keyspace is left consistent: a
//! command's changes either all happen or none does. So while a command runs (the
//! server calls [`begin`] before its handler and [`Engine::commit_changes`] or
//! [`Engine::roll_back`] after), every primitive change of a database records how
//! to reverse it here, cheaply:
//!
//! - an insert records its slot (rolled back by removing what is there);
//! - a delete hands the deleted entry itself to the journal (moved, not copied:
//!   it is freed when the command ends, as it would have been at once);
//! - an expiry change records the old expiry;
//! - RENAME and MOVE record where the entry came from;
//! - SWAPDB records the pair;
//! - a change of a value in place (`Db::modify`: SET over a key, INCR, HSET,
//!   LPUSH ...) records a copy of the entry before the change, once per entry per
//!   command: a 48-byte copy when the entry is all inline (a short string, an
//!   integer); else, when every heap block it owns is one block of plain bytes (a
//!   string, a list, hash, set or sorted set in its compact encoding) of at most
//!   [`COPY_BYTES_MAX`] together, the entry's 48 bytes in the step and the blocks'
//!   bytes appended to a byte arena the journal keeps between commands (a memcpy,
//!   no allocation; a roll-back allocates the blocks afresh).
//!
//! - a change in place of a big value (a string past the copy bound, a
//!   quicklist, a hash or set table, a skiplist, any stream: too big to copy on
//!   every write) opens the entry, and its own mutators record the inverse of
//!   each primitive change ([`Inverse`]): a pushed element is taken off again, a
//!   popped one put back into the node it came from, an element set or inserted
//!   gets its old bytes back or is removed (a node split puts back copies of the
//!   nodes it touched), LREM's elements go back to their node positions, a
//!   quicklist that shrank into a listpack becomes one again, a field or member
//!   inserted is removed, one removed is put back (a set member into the
//!   position it had), an old value, expiry or score is put back; a string gets
//!   back the bytes a write in place covered and its old length; a stream gets
//!   back its counters and IDs, an appended entry is cut off, a deleted one
//!   marked live, a dropped node put back, and each change of its consumer
//!   groups is reversed from what it replaced ([`GroupChange`], held, not
//!   copied); a value replaced whole (SET over it) is moved into the journal, as
//!   a deleted entry is. Byte strings go to the same arena.
//!
//! What is not recorded marks the journal *unrecoverable*: a change of a compact
//! collection past [`COPY_BYTES_MAX`] under raised limits, FLUSHDB/FLUSHALL, an
//! entry taken out of the keyspace to be handed elsewhere (lending between
//! shards), and anything past [`HELD_BYTES_MAX`] of held entries or
//! [`ARENA_BYTES_MAX`] of arena bytes in one command. A panic after such a change
//! still ends the process (the server's `contain_panic`), and the log's replay
//! undoes it. docs/faults.md.
//!
//! Slots matter: a rolled-back command leaves every entry in the slot it had, so
//! SCAN cursors held by clients stay valid and the journal's own slot numbers
//! refer to the same entries at each step of the way back.

use std::cell::{Cell, RefCell};

use crate::engine::Engine;
use crate::keyspace::{Entry, EntryId, FlatCopy, ENTRY_BYTES};
use crate::lists::End;
use crate::streams::groups::GroupChange;
use crate::streams::id::StreamId;

/// Most bytes of deleted entries the journal holds for one command (kept until it
/// ends): a script or DEL over a million keys must not double the memory they
/// take. Past it the command goes on unrecorded, as one that cannot be undone.
pub const HELD_BYTES_MAX: usize = 64 << 20;

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
    /// The entry in this slot was this copy (its blocks' bytes in [`ARENA`])
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
    /// The consumer groups of the stream in this slot changed; this reverses it.
    GroupChange {
        db: usize,
        id: EntryId,
        change: Box<GroupChange>,
    },
    /// A big value in this slot changed by one primitive; this reverses it.
    Inverse {
        db: usize,
        id: EntryId,
        inverse: Inverse,
    },
}

/// A byte string the journal keeps in its arena: where it starts, how long it is.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Kept {
    at: u32,
    len: u32,
}

impl Kept {
    /// Append `bytes` to `arena`.
    pub(crate) fn of(arena: &mut Vec<u8>, bytes: &[u8]) -> Kept {
        let at = arena.len() as u32;
        arena.extend_from_slice(bytes);
        Kept {
            at,
            len: bytes.len() as u32,
        }
    }

    /// The bytes in `arena`.
    pub(crate) fn get(self, arena: &[u8]) -> &[u8] {
        &arena[self.at as usize..(self.at + self.len) as usize]
    }
}

/// How to reverse one primitive change of a big value (a quicklist, a hash or
/// set table, a skiplist, a stream, a string past the copy bound), recorded by
/// the value's own mutators while [`keep_preimage`] has its entry open. Byte
/// strings are [`Kept`] in the arena. Each puts back what it names whether or
/// not a later change went through, and the tests check the same DUMP after a
/// roll-back (quicklist nodes, table and set order included).
#[derive(Clone, Copy, Debug)]
pub(crate) enum Inverse {
    /// Take the element pushed at this end off again.
    ListPop(End),
    /// Put `elem`, popped off `end`, back: into the end node, or into a node of
    /// its own when the pop dropped the node it was in.
    ListUnpop {
        end: End,
        elem: Kept,
        own_node: bool,
    },
    /// Put back the element that was at `index` (LSET in a quicklist).
    ListSet { index: u64, old: Kept },
    /// Remove the element inserted at `index` (LINSERT in a quicklist).
    ListRemoveAt(u64),
    /// Put back node `at` of a quicklist, a copy of its block (a LINSERT split
    /// its neighbourhood).
    ListNodeBack { at: u32, block: Kept },
    /// Take out the `count` nodes from `at` that a LINSERT's split and merges
    /// left in place of the nodes put back after.
    ListNodesOut { at: u32, count: u32 },
    /// Make the list, which shrank into a listpack, a quicklist of one node with
    /// this fill again.
    ListToQuicklist { fill: i32 },
    /// Put `elem` back at position `pos` of node `node`, into a new node there
    /// when `own_node` (LREM in a quicklist).
    ListReinsert {
        node: u32,
        pos: u32,
        own_node: bool,
        elem: Kept,
    },
    /// Remove an inserted field.
    HashRemove(Kept),
    /// Put back a removed field.
    HashInsert {
        field: Kept,
        value: Kept,
        expire_at: Option<u64>,
    },
    /// Put back the value a field had.
    HashValue { field: Kept, value: Kept },
    /// Put back the expiry a field had.
    HashExpire { field: Kept, expire_at: Option<u64> },
    /// Remove an added member.
    SetRemove(Kept),
    /// Put back a member removed from position `at` of the set's table.
    SetInsert { member: Kept, at: u32 },
    /// Remove an added member.
    ZRemove(Kept),
    /// Put back a removed member with its score.
    ZInsert { member: Kept, score: f64 },
    /// Put back the score a member had.
    ZScore { member: Kept, score: f64 },
    /// Put back a stream's counters and IDs (`streams::value` encodes them).
    StreamMeta(Kept),
    /// Put back the stream's node `master` as this copy (replacing any there).
    StreamNodeBack {
        master: StreamId,
        bytes: Kept,
        count: u32,
        live: u32,
        lp_bytes: u32,
    },
    /// Take out the stream's node `master` (an append started it).
    StreamNodeOut { master: StreamId },
    /// Cut the stream's node `master` back to what it was before an append.
    StreamNodeCut {
        master: StreamId,
        len: u32,
        count: u32,
        live: u32,
        lp_bytes: u32,
    },
    /// Mark the entry at byte `at` of node `master` live again.
    StreamUndelete { master: StreamId, at: u32 },
    /// Put back a big string as it was: `old` at byte `at`, cut to `len` bytes,
    /// `raw` or not (APPEND, SETRANGE, SETBIT, BITFIELD in place).
    StrRestore {
        len: u32,
        raw: bool,
        at: u32,
        old: Kept,
    },
}

thread_local! {
    /// Commands running now (a script's commands run inside it): recording is on
    /// while above zero.
    static DEPTH: Cell<u32> = const { Cell::new(0) };
    /// A change was made that the journal cannot reverse.
    static UNRECOVERABLE: Cell<bool> = const { Cell::new(false) };
    /// How to reverse the running command's changes, oldest first.
    static STEPS: RefCell<Vec<Step>> = const { RefCell::new(Vec::new()) };
    /// Heap bytes of the deleted entries the steps hold.
    static HELD_BYTES: Cell<usize> = const { Cell::new(0) };
    /// The bytes of the heap blocks the [`Step::Copied`] steps copied and the
    /// byte strings of the [`Step::Inverse`] steps.
    static ARENA: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
    /// The big value whose mutators record their inverses now (database and
    /// slot), while `Db::modify` runs its change. The mutators do not know
    /// which value they belong to: a change closure must change only the entry
    /// it was given (true of every command: values built on the side, such as
    /// STORE results, are built outside any `Db::modify`).
    static OPEN: Cell<Option<(usize, EntryId)>> = const { Cell::new(None) };
}

/// Most bytes the arena holds for one command (a script popping a million
/// elements must not double their memory); past it the command goes on as one
/// that cannot be undone.
pub const ARENA_BYTES_MAX: usize = 64 << 20;

/// Most bytes of heap blocks copied for one change in place: a compact
/// collection at Redis's default limits (8 KiB lists, 128 short fields) fits.
/// A longer string records inverses instead; a collection kept compact past it
/// by raised limits is neither copied nor reversed (the change is then one that
/// cannot be undone).
pub const COPY_BYTES_MAX: usize = 16 << 10;

/// Arena bytes kept between commands (a script that copied a lot does not pin it).
const KEEP_ARENA_BYTES_MAX: usize = 1 << 20;

/// A command starts: record its changes until it ends.
pub fn begin() {
    DEPTH.with(|d| d.set(d.get() + 1));
}

/// True while a command runs (its changes are recorded).
#[inline]
pub(crate) fn recording() -> bool {
    DEPTH.with(Cell::get) > 0
}

/// Record `step` (one that holds no entry) if a command is running.
#[inline]
pub(crate) fn record(step: Step) {
    if recording() {
        STEPS.with_borrow_mut(|steps| steps.push(step));
    }
}

/// Record `step`, which holds `entry_bytes` of a deleted entry, if a command is
/// running; gives it back otherwise, and when the entries the journal holds would
/// pass [`HELD_BYTES_MAX`] (the command can then no longer be rolled back).
pub(crate) fn hold(step: Step, entry_bytes: usize) -> Option<Step> {
    if !recording() {
        return Some(step);
    }
    let held = HELD_BYTES.with(Cell::get) + entry_bytes + ENTRY_BYTES;
    if held > HELD_BYTES_MAX {
        mark_unrecoverable();
        return Some(step);
    }
    HELD_BYTES.with(|h| h.set(held));
    STEPS.with_borrow_mut(|steps| steps.push(step));
    None
}

/// A change the journal cannot reverse was made (while a command runs).
#[inline]
pub(crate) fn mark_unrecoverable() {
    if recording() {
        UNRECOVERABLE.with(|u| u.set(true));
    }
}

/// Record a copy of `entry` (entry `id` of `db`) before a change in place, if a
/// command is running: a 48-byte copy of an all-inline entry, or its heap blocks'
/// bytes appended to the arena when they are plain blocks of at most
/// [`COPY_BYTES_MAX`]. Else, for a big string, list, hash, set, sorted set or a
/// stream, open it so its mutators record their inverses (true: the caller
/// closes it after the change); anything else (a compact collection past the
/// bound) marks the command unrecoverable.
pub(crate) fn keep_preimage(db: usize, id: EntryId, entry: &Entry) -> bool {
    if !recording() || has_preimage(db, id) {
        return false;
    }
    if let Some(before) = entry.copy_if_inline() {
        record(Step::Modified { db, id, before });
        return false;
    }
    let copied = ARENA.with_borrow_mut(|arena| {
        let room = arena.len() <= ARENA_BYTES_MAX;
        room.then(|| entry.copy_flat(arena, COPY_BYTES_MAX))
            .flatten()
    });
    match copied {
        Some(before) => record(Step::Copied { db, id, before }),
        None if entry.records_inverses() => {
            OPEN.with(|o| o.set(Some((db, id))));
            return true;
        }
        None => mark_unrecoverable(),
    }
    false
}

/// The open entry's value is about to be replaced whole (SET over a big value):
/// the journal takes the entry as it was (moved, not copied, as a delete's), to
/// put it back on a roll-back. Past [`HELD_BYTES_MAX`] it is dropped and the
/// command can no longer be undone.
pub(crate) fn record_replaced(before: Entry) {
    let Some((db, id)) = OPEN.with(Cell::get) else {
        return drop(before);
    };
    let bytes = before.heap_bytes();
    drop(hold(Step::Modified { db, id, before }, bytes));
}

/// The change of the open entry ended.
pub(crate) fn close_open_entry() {
    OPEN.with(|o| o.set(None));
}

/// True when a big value is open: its mutators must record an inverse of each
/// change ([`record_inverse`]) or say there is none ([`no_inverse`]).
#[inline]
pub(crate) fn inverses_wanted() -> bool {
    OPEN.with(Cell::get).is_some()
}

/// Record how to reverse a change of the open value; `build` keeps the byte
/// strings it needs in the arena. Past [`ARENA_BYTES_MAX`] the command becomes
/// one that cannot be undone.
pub(crate) fn record_inverse(build: impl FnOnce(&mut Vec<u8>) -> Inverse) {
    let Some((db, id)) = OPEN.with(Cell::get) else {
        return;
    };
    let inverse = ARENA.with_borrow_mut(|arena| {
        if arena.len() > ARENA_BYTES_MAX {
            return None;
        }
        Some(build(arena))
    });
    match inverse {
        Some(inverse) => record(Step::Inverse { db, id, inverse }),
        None => mark_unrecoverable(),
    }
}

/// Record how to reverse a change of the open stream's consumer groups.
pub(crate) fn record_group_change(change: GroupChange) {
    let Some((db, id)) = OPEN.with(Cell::get) else {
        return;
    };
    let change = Box::new(change);
    record(Step::GroupChange { db, id, change });
}

/// Keep `bytes` in the arena for an inverse recorded later (while a value is
/// open; None otherwise, or past [`ARENA_BYTES_MAX`], which [`record_inverse`]
/// then reports).
pub(crate) fn keep_bytes(bytes: &[u8]) -> Option<Kept> {
    inverses_wanted().then(|| ARENA.with_borrow_mut(|arena| Kept::of(arena, bytes)))
}

/// A change of the open value that has no recorded inverse: the command
/// cannot be undone.
pub(crate) fn no_inverse() {
    if inverses_wanted() {
        mark_unrecoverable();
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

/// The command ends: true when it was the outermost one (its steps are then
/// due, and whether they can all be reversed is reset for the next command).
fn end() -> Option<bool> {
    let depth = DEPTH.with(|d| {
        d.set(d.get().saturating_sub(1));
        d.get()
    });
    if depth > 0 {
        return None;
    }
    if HELD_BYTES.with(Cell::get) != 0 {
        HELD_BYTES.with(|h| h.set(0));
    }
    close_open_entry();
    Some(UNRECOVERABLE.with(|u| u.replace(false)))
}

/// Take the steps of the command that ended, if it recorded any.
fn take_steps() -> Option<Vec<Step>> {
    STEPS.with_borrow_mut(|steps| (!steps.is_empty()).then(|| std::mem::take(steps)))
}

/// Empty the arena for the next command, keeping its room up to a bound.
fn clear_arena() {
    ARENA.with_borrow_mut(|arena| {
        if arena.is_empty() {
            return;
        }
        arena.clear();
        if arena.capacity() > KEEP_ARENA_BYTES_MAX {
            arena.shrink_to(KEEP_ARENA_BYTES_MAX);
        }
    });
}

/// Steps whose room the journal keeps between commands (no allocation per command
/// once it has grown; a script's thousands of steps do not pin their room).
const KEEP_STEPS_MAX: usize = 1024;

/// Give an emptied step buffer back for the next command.
fn reuse(mut steps: Vec<Step>) {
    if steps.capacity() <= KEEP_STEPS_MAX {
        steps.clear();
        STEPS.with_borrow_mut(|kept| {
            if kept.is_empty() {
                *kept = steps;
            }
        });
    }
}

impl Engine {
    /// The command ended normally: its changes stand. Entries it deleted are freed
    /// now (a big one lazily, as [`Engine::delete`] does outside a command).
    pub fn commit_changes(&mut self) {
        if end().is_none() {
            return;
        }
        STEPS.with_borrow_mut(|steps| {
            if steps.is_empty() {
                return;
            }
            for step in steps.drain(..) {
                if let Step::Deleted { entry, .. } = step {
                    self.free_deleted(entry);
                }
            }
            if steps.capacity() > KEEP_STEPS_MAX {
                steps.shrink_to(KEEP_STEPS_MAX);
            }
        });
        clear_arena();
    }

    /// The command panicked: reverse its changes, newest first. False (and
    /// nothing reversed) when one of them cannot be: the caller must not serve
    /// this keyspace any more.
    pub fn roll_back(&mut self) -> bool {
        let Some(unrecoverable) = end() else {
            // An enclosing command rolls back the whole when its own panic arrives.
            return true;
        };
        let mut steps = take_steps().unwrap_or_default();
        if unrecoverable {
            // What can be reversed is dropped with the rest: the process ends.
            clear_arena();
            return false;
        }
        let restored_in_place = steps.iter().any(|s| {
            matches!(
                s,
                Step::Modified { .. }
                    | Step::Copied { .. }
                    | Step::Inverse { .. }
                    | Step::GroupChange { .. }
            )
        });
        ARENA.with_borrow(|arena| {
            while let Some(step) = steps.pop() {
                self.reverse(step, arena);
            }
        });
        clear_arena();
        if restored_in_place {
            for db in 0..self.db_count() {
                self.db_mut(db).recount_heap_bytes();
            }
        }
        reuse(steps);
        true
    }

    fn reverse(&mut self, step: Step, arena: &[u8]) {
        match step {
            Step::Inserted { db, id } => drop(self.db_mut(db).unlink(id)),
            Step::Deleted { db, id, entry } => self.db_mut(db).insert_at(id, entry),
            Step::Expiry { db, id, was } => self.db_mut(db).set_expire(id, was),
            Step::Modified { db, id, before } => self.db_mut(db).restore(id, before),
            Step::Copied { db, id, before } => {
                let before = Entry::from_flat(&before, arena);
                self.db_mut(db).restore(id, before)
            }
            Step::Moved { from, to, key } => {
                let entry = self.db_mut(to.0).unlink(to.1);
                self.db_mut(from.0).insert_at(from.1, entry.rekey(&key));
            }
            Step::Swapped { a, b } => self.swap_dbs(a, b),
            Step::Inverse { db, id, inverse } => self.db_mut(db).reverse(id, inverse, arena),
            Step::GroupChange { db, id, change } => self.db_mut(db).reverse_groups(id, *change),
        }
    }
}
