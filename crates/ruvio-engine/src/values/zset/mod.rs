//! The sorted-set value (Redis's t_zset.c encodings): what a sorted-set key
//! stores, apart from the commands (`crate::zsets`).
//!
//! Why two encodings, and why Redis's: most sorted sets are tiny, and one
//! exact-size block keeps them near 100 bytes per key; big ones need O(log n)
//! rank and range. OBJECT ENCODING shows which one a set uses, so the switch
//! happens where Redis 7.2 switches (see [`value`]).
//!
//! - [`packed`]: `ZPacked`, members with compact scores in one block (`listpack`).
//! - [`tree`]: `ZTree`, a counted B+tree of member handles plus slots and a
//!   member index (`skiplist`).
//! - [`value`]: `ZSetValue`, one tagged word holding either.

pub(crate) mod packed;
pub(crate) mod tree;
pub(crate) mod value;

pub use value::{ZLimits, ZSetEncoding, ZSetValue};
