//! Where a shard's connections are while one of its scripts runs: lent to the
//! script's Lua hook, which answers the other clients once the script is past
//! `busy-reply-threshold` (`shard/busy.rs`).
//!
//! Why lend rather than share: the shard's loop holds its connection slab mutably
//! all the way down to the command that runs the script, and the hook is called
//! from inside that command. Moving the slab into this thread's slot for the
//! script's length (a few words each way, only for script commands) gives the hook
//! the one reference there is, with no second path to the shard's state.

use crate::net::conn::Conn;
use crate::net::slab::Slab;
use std::cell::RefCell;

thread_local! {
    /// The shard's connections while a script command runs.
    static LENT: RefCell<Option<Slab<Conn>>> = const { RefCell::new(None) };
}

/// The connections lent for a script command; given back when dropped (also when
/// the command panics).
pub struct Lent<'a> {
    conns: &'a mut Slab<Conn>,
}

/// Lend the shard's connections to the script hook while a script command runs.
pub fn lend(conns: &mut Slab<Conn>) -> Lent<'_> {
    let slab = std::mem::take(conns);
    LENT.with_borrow_mut(|lent| *lent = Some(slab));
    Lent { conns }
}

impl Drop for Lent<'_> {
    fn drop(&mut self) {
        if let Some(slab) = LENT.with_borrow_mut(Option::take) {
            *self.conns = slab;
        }
    }
}

/// Run `f` on the lent connections; None when none are lent (no script command
/// runs, or one the shard did not lend them for).
pub fn with_lent<R>(f: impl FnOnce(&mut Slab<Conn>) -> R) -> Option<R> {
    LENT.with_borrow_mut(|lent| lent.as_mut().map(f))
}
