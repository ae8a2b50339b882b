//! A client's transaction as its connection holds it: the commands queued between
//! MULTI and EXEC ([`Queued`]), and an EXEC's place in its queue while it runs in
//! turn ([`InTurn`]). Plain data, kept here with the connection (as its watched
//! keys and subscriptions are) so that the connection does not name the
//! transactions above it; what MULTI, EXEC and WATCH do is
//! `crate::transactions::multi`'s and the shard's (`shard/multi.rs`).
//!
//! A queued command names the row it resolved to by the row's statistics slot
//! (`cmd::registry::Registry::row`, as a forwarded command's `Tag::row` does):
//! a number the connection can hold without knowing the command table.

use ruvio_resp::{Args, ArgsBatch};

/// The commands of a transaction, each with the statistics slot of the row that
/// runs it, their arguments copied into one buffer (two allocations that grow,
/// not two per command).
#[derive(Debug, Default)]
pub struct Commands {
    rows: Vec<usize>,
    args: ArgsBatch,
}

impl Commands {
    /// Queue a command: `row`, the statistics slot of its resolved row, and its
    /// arguments.
    pub fn push(&mut self, row: usize, args: Args<'_>) {
        self.rows.push(row);
        self.args.push(args.iter());
    }

    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// No commands yet, with room for all of these: a part of this queue
    /// (`mesh::in_place`) fills it without growing through doublings.
    pub fn empty_like(&self) -> Commands {
        Commands {
            rows: Vec::with_capacity(self.rows.len()),
            args: self.args.empty_like(usize::MAX),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Command `i`: its row's statistics slot and its arguments.
    pub fn get(&self, i: usize) -> Option<(usize, Args<'_>)> {
        Some((*self.rows.get(i)?, self.args.get(i)?))
    }

    /// Every command in order: its row's statistics slot and its arguments.
    pub fn iter(&self) -> impl Iterator<Item = (usize, Args<'_>)> {
        self.rows.iter().copied().zip(self.args.iter())
    }

    /// Arguments of the queued commands together.
    pub fn arg_count(&self) -> usize {
        self.args.arg_count()
    }

    /// Bytes of the queued commands' arguments.
    pub fn arg_bytes(&self) -> usize {
        self.args.arg_bytes()
    }
}

/// A client's open transaction (between MULTI and EXEC or DISCARD).
#[derive(Debug, Default)]
pub struct Queued {
    /// The commands, resolved to the row that runs them, with their arguments.
    pub commands: Commands,
    /// A command was refused while queueing: EXEC aborts.
    pub failed: bool,
}

impl Queued {
    /// Commands queued (CLIENT LIST `multi=`).
    pub fn len(&self) -> usize {
        self.commands.len()
    }

    /// Nothing queued yet.
    pub fn is_empty(&self) -> bool {
        self.commands.is_empty()
    }

    /// Arguments of the queued commands together (CLIENT LIST `multi-mem=`).
    pub fn argument_count(&self) -> usize {
        self.commands.arg_count()
    }

    /// Bytes of the queued commands' arguments.
    pub fn argument_bytes(&self) -> usize {
        self.commands.arg_bytes()
    }
}

/// An EXEC running its queue in turn (see `shard::exec_run::continue_exec`).
#[derive(Debug)]
pub struct InTurn {
    pub commands: Commands,
    /// The next command to run.
    pub next: usize,
    /// The watch epoch still to check before the first command runs.
    pub check_epoch: Option<u64>,
}
