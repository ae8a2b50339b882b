//! The set value (Redis's t_set.c encodings): what a set key stores, apart from the
//! set commands (`crate::sets`).
//!
//! Why three encodings, and why Redis's: most sets are small (tags, a user's
//! roles, ids), and a small set in one exact-size block costs a few bytes per
//! member instead of a hash table's tens; sets of small integers pack tighter
//! still. Which one a set uses is visible (OBJECT ENCODING) and decides reply
//! order (intsets reply sorted, listpacks in insertion order), so conversions
//! happen exactly where Redis 7.2 converts.
//!
//! - [`intset`]: `Intset`, sorted integers of one width (16/32/64 bits).
//! - [`packed`]: `SPacked`, members in insertion order in one block
//!   (`listpack`).
//! - [`table`]: `Table`, a dense member vector with a hash index (`hashtable`);
//!   `member`: one member's heap block in it.
//! - [`value`]: `SetValue`, one tagged word holding any of them, with Redis's
//!   conversion rules.

pub(crate) mod intset;
mod member;
pub(crate) mod packed;
pub(crate) mod table;
pub(crate) mod value;

#[cfg(test)]
mod tests;

pub use value::{SetEncoding, SetLimits, SetValue};
