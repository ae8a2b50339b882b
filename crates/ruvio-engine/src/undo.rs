//! The undo journal: what the running command changed in the keyspace, kept until
//! it ends, so that a panic part-way (a bug: no input may cause one) can put every
//! database back as the command found it and the shard can go on.
//!
//! Redis and Dragonfly crash on such a bug. Ruvio answers the command with an error
//! and keeps serving, which is only safe if the keyspace is left consistent: a
//! command's changes either all happen or none does. So while a command runs (the
//! server calls [`begin`] before its handler and
//! [`Engine::commit_changes`](crate::Engine::commit_changes) or
//! [`Engine::roll_back`](crate::Engine::roll_back) after), every primitive
//! change of a database records how to reverse it here, cheaply:
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
//! Where each part lives (the journal spans three floors, each part beside what
//! it names): this module, below the keyspace, holds the journal's state, the
//! inverses a value records ([`Inverse`], [`record_inverse`]) and the bounds;
//! the keyspace's `journal` holds the steps of database changes (they hold
//! entries) and turns each run of a value's inverses into one step naming its
//! entry; the engine's `rollback` commits or reverses them when the command ends.
//!
//! Slots matter: a rolled-back command leaves every entry in the slot it had, so
//! SCAN cursors held by clients stay valid and the journal's own slot numbers
//! refer to the same entries at each step of the way back.

use std::cell::{Cell, RefCell};

use crate::values::list::End;
use crate::values::stream::groups::GroupChange;
use crate::values::stream::id::StreamId;

/// Most bytes of deleted entries the journal holds for one command (kept until it
/// ends): a script or DEL over a million keys must not double the memory they
/// take. Past it the command goes on unrecorded, as one that cannot be undone.
pub const HELD_BYTES_MAX: usize = 64 << 20;

/// How to reverse one change of an open value: a primitive change of the value, or
/// a change of a stream's consumer groups (reversed from what it replaced, held,
/// not copied).
pub(crate) enum ValueStep {
    /// A big value changed by one primitive; this reverses it.
    Inverse(Inverse),
    /// The consumer groups of the stream changed; this reverses it.
    Group(Box<GroupChange>),
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
/// the value's own mutators while `keyspace::journal::keep_preimage` has its entry open. Byte
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
    ListToQuicklist {
        shape: crate::values::list::ListShape,
    },
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
    /// Put back a stream's counters and IDs (`values::stream::value` encodes them).
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
    /// How to reverse the changes of open values, oldest first; the keyspace's
    /// steps (`keyspace::journal`) say which entry each run of them belongs to.
    static VALUE_STEPS: RefCell<Vec<ValueStep>> = const { RefCell::new(Vec::new()) };
    /// Value steps recorded since the keyspace last claimed them.
    static PENDING: Cell<u32> = const { Cell::new(0) };
    /// The bytes of the heap blocks the keyspace's `Copied` steps copied and the
    /// byte strings of the [`ValueStep`]s.
    pub(crate) static ARENA: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
    /// The big value whose mutators record their inverses now (database and
    /// slot), while `Db::modify` runs its change. The mutators do not know
    /// which value they belong to: a change closure must change only the entry
    /// it was given (true of every command: values built on the side, such as
    /// STORE results, are built outside any `Db::modify`).
    static OPEN: Cell<Option<(usize, u32)>> = const { Cell::new(None) };
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

/// A change the journal cannot reverse was made (while a command runs).
#[inline]
pub(crate) fn mark_unrecoverable() {
    if recording() {
        UNRECOVERABLE.with(|u| u.set(true));
    }
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
    if !inverses_wanted() {
        return;
    }
    let inverse = ARENA.with_borrow_mut(|arena| {
        if arena.len() > ARENA_BYTES_MAX {
            return None;
        }
        Some(build(arena))
    });
    match inverse {
        Some(inverse) => push(ValueStep::Inverse(inverse)),
        None => mark_unrecoverable(),
    }
}

/// Record how to reverse a change of the open stream's consumer groups.
pub(crate) fn record_group_change(change: GroupChange) {
    if !inverses_wanted() {
        return;
    }
    push(ValueStep::Group(Box::new(change)));
}

/// Record `step` of the open value.
fn push(step: ValueStep) {
    VALUE_STEPS.with_borrow_mut(|steps| steps.push(step));
    PENDING.with(|p| p.set(p.get() + 1));
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

/// Entry `id` of database `db` is open: its value's mutators record their
/// inverses until [`close`].
pub(crate) fn open(db: usize, id: u32) {
    OPEN.with(|o| o.set(Some((db, id))));
}

/// The open entry (database and slot), if any.
#[inline]
pub(crate) fn open_entry() -> Option<(usize, u32)> {
    OPEN.with(Cell::get)
}

/// No entry is open any more.
pub(crate) fn close() {
    OPEN.with(|o| o.set(None));
}

/// How many value steps were recorded since the last call (the keyspace's step
/// that names their entry claims them).
pub(crate) fn take_pending() -> u32 {
    PENDING.with(|p| p.replace(0))
}

/// The value steps recorded, for a roll-back (oldest first).
pub(crate) fn take_value_steps() -> Vec<ValueStep> {
    VALUE_STEPS.with_borrow_mut(std::mem::take)
}

/// Give an emptied value step buffer back for the next command (its room kept up
/// to `keep_max` steps).
pub(crate) fn reuse_value_steps(mut steps: Vec<ValueStep>, keep_max: usize) {
    if steps.capacity() <= keep_max {
        steps.clear();
        VALUE_STEPS.with_borrow_mut(|kept| {
            if kept.is_empty() {
                *kept = steps;
            }
        });
    }
}

/// Drop the value steps of a command that ended normally (their room kept up to
/// `keep_max` steps).
pub(crate) fn clear_value_steps(keep_max: usize) {
    VALUE_STEPS.with_borrow_mut(|steps| {
        if steps.is_empty() {
            return;
        }
        steps.clear();
        if steps.capacity() > keep_max {
            steps.shrink_to(keep_max);
        }
    });
}

/// A command ends: true when it was the outermost one.
pub(crate) fn leave() -> bool {
    DEPTH.with(|d| {
        d.set(d.get().saturating_sub(1));
        d.get()
    }) == 0
}

/// Whether a change the journal cannot reverse was made, reset for the next
/// command.
pub(crate) fn take_unrecoverable() -> bool {
    UNRECOVERABLE.with(|u| u.replace(false))
}

/// Empty the arena for the next command, keeping its room up to a bound.
pub(crate) fn clear_arena() {
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
