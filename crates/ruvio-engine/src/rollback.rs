//! The undo journal's apply side: a command that ends commits its changes (the
//! entries it deleted are freed now) or, when it panicked, has them reversed,
//! newest first (see [`crate::undo`] for what is recorded and why).
//!
//! Why a module of its own, on the engine's floor: reversing a step changes the
//! databases of a whole shard (a SWAPDB, a MOVE between databases) and recounts
//! their memory, so it stands on [`Engine`]; the steps themselves are recorded
//! below it, by the keyspace (`keyspace::journal`) and the values (`undo`).

use crate::engine::Engine;
use crate::keyspace::journal::{self, Step, KEEP_STEPS_MAX};
use crate::keyspace::Entry;
use crate::undo::{self, ValueStep};

/// The command ends: true when it was the outermost one (its steps are then
/// due, and whether they can all be reversed is reset for the next command).
fn end() -> Option<bool> {
    if !undo::leave() {
        return None;
    }
    journal::end_command();
    Some(undo::take_unrecoverable())
}

impl Engine {
    /// The command ended normally: its changes stand. Entries it deleted are freed
    /// now (a big one lazily, as [`Engine::delete`] does outside a command).
    pub fn commit_changes(&mut self) {
        if end().is_none() {
            return;
        }
        journal::drain_steps(|step| {
            if let Step::Deleted { entry, .. } = step {
                self.free_deleted(entry);
            }
        });
        undo::clear_value_steps(KEEP_STEPS_MAX);
        undo::clear_arena();
    }

    /// The command panicked: reverse its changes, newest first. False (and
    /// nothing reversed) when one of them cannot be: the caller must not serve
    /// this keyspace any more.
    pub fn roll_back(&mut self) -> bool {
        let Some(unrecoverable) = end() else {
            // An enclosing command rolls back the whole when its own panic arrives.
            return true;
        };
        let mut steps = journal::take_steps().unwrap_or_default();
        let mut value_steps = undo::take_value_steps();
        if unrecoverable {
            // What can be reversed is dropped with the rest: the process ends.
            undo::clear_arena();
            return false;
        }
        let restored_in_place = steps.iter().any(|s| {
            matches!(
                s,
                Step::Modified { .. } | Step::Copied { .. } | Step::Values { .. }
            )
        });
        undo::ARENA.with_borrow(|arena| {
            while let Some(step) = steps.pop() {
                self.reverse(step, &mut value_steps, arena);
            }
        });
        undo::clear_arena();
        if restored_in_place {
            for db in 0..self.db_count() {
                self.db_mut(db).recount_heap_bytes();
            }
        }
        journal::reuse(steps);
        undo::reuse_value_steps(value_steps, KEEP_STEPS_MAX);
        true
    }

    fn reverse(&mut self, step: Step, value_steps: &mut Vec<ValueStep>, arena: &[u8]) {
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
            Step::Values { db, id, count } => {
                for _ in 0..count {
                    match value_steps.pop().expect("a value step per count") {
                        ValueStep::Inverse(inverse) => self.db_mut(db).reverse(id, inverse, arena),
                        ValueStep::Group(change) => self.db_mut(db).reverse_groups(id, *change),
                    }
                }
            }
        }
    }
}
