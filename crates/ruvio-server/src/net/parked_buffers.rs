//! Buffers for the replies parked behind a held slot, kept per shard thread
//! once their slot is released, for the next slot's.
//!
//! Why: a pipeline that mixes local and forwarded commands (forward mode's
//! default: with n shards, n-1 keys in n live elsewhere) holds a slot for each
//! forwarded command and parks the local replies after it in a buffer of the
//! slot's own. Each such slot allocated a fresh buffer, grew it by
//! reallocation and freed it when the slot went (two shards sharing a CPU:
//! 4,032 instructions a GET before, 3,900 with these, `scripts/instr_ab.py`). Kept per
//! shard thread, not per connection, so ten thousand idle connections keep
//! nothing; at most [`KEPT_MAX`] buffers of at most [`KEPT_BYTES_MAX`] each.
//! A buffer made new starts with room for a few replies ([`NEW_BYTES`]).

use std::cell::RefCell;

/// Buffers kept per shard thread: the slots held at once by the shard's
/// pipelined clients (50 clients at pipeline 16 hold a few hundred).
const KEPT_MAX: usize = 512;
/// A larger buffer (a large reply parked) is freed, not kept: at most 512 KiB
/// kept per shard.
const KEPT_BYTES_MAX: usize = 1 << 10;
/// A new buffer's room: a few small replies without growing (from empty, a
/// `Vec` grows through 8, 16, 32 ... bytes, a reallocation each).
const NEW_BYTES: usize = 256;

thread_local! {
    static KEPT: RefCell<Vec<Vec<u8>>> = const { RefCell::new(Vec::new()) };
}

/// An empty buffer for a slot's parked replies: a kept one when there is one.
#[inline(never)]
pub fn take() -> Vec<u8> {
    KEPT.with_borrow_mut(Vec::pop)
        .unwrap_or_else(|| Vec::with_capacity(NEW_BYTES))
}

/// A released slot's buffer, its bytes sent on: kept for the next slot when
/// there is room. Inlined up to the test of a slot that parked nothing (every
/// slot of a pipeline forwarded whole).
#[inline]
pub fn give_back(buffer: Vec<u8>) {
    if buffer.capacity() != 0 {
        keep(buffer);
    }
}

fn keep(mut buffer: Vec<u8>) {
    if buffer.capacity() > KEPT_BYTES_MAX {
        return;
    }
    buffer.clear();
    KEPT.with_borrow_mut(|kept| {
        if kept.len() < KEPT_MAX {
            kept.push(buffer);
        }
    });
}
