//! Lists (Redis's t_list.c): the list value with its two encodings.
//!
//! Why two encodings, and why Redis's: small lists are the common case (queues of
//! a few jobs, recent-items lists), and one exact-size block per small list is
//! what keeps them cheap; big lists need bounded nodes so a push never moves
//! megabytes. Which one a list uses is visible (OBJECT ENCODING), so the switch
//! happens exactly where Redis 7.2 switches, judged by Redis's own listpack byte
//! sizes rather than Ruvio's.
//!
//! - [`rules`]: Redis 7.2's size and limit rules as functions (`lpBytes` of an
//!   element, `quicklistNodeExceedsLimit`, the shrink rule).
//! - [`listpack`]: `Packed`, elements in one block (a whole small list, or one
//!   node of a big one).
//! - [`quicklist`]: `Quicklist`, a chain of packed nodes with Redis's node rules.
//! - [`value`]: `ListValue`, one tagged word holding either, with the operations
//!   the list commands need and the conversions they trigger.

// The command family (next) is the user; until it lands only tests call in.
#![cfg_attr(not(test), allow(dead_code))]

pub(crate) mod listpack;
pub(crate) mod quicklist;
pub(crate) mod rules;
pub(crate) mod value;

#[cfg(test)]
mod tests;

#[allow(unused_imports)]
pub use value::{clamp_range, End, Iter, ListEncoding, ListValue, Popped, RevIter};
