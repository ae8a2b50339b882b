//! The list value (Redis's t_list.c encodings): what a list key stores, apart from
//! the list commands (`crate::lists`) that change it.
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
//!   node of a big one; sets keep their small members in it too).
//! - [`quicklist`]: `Quicklist`, a chain of packed nodes with Redis's node rules.
//! - [`value`]: `ListValue`, one tagged word holding either, with the operations
//!   the list commands need and the conversions they trigger.

pub(crate) mod listpack;
pub(crate) mod quicklist;
pub(crate) mod rules;
pub(crate) mod value;

#[cfg(test)]
mod tests;

pub use rules::ListShape;
pub use value::{clamp_range, End, ListEncoding, ListValue, Popped};
