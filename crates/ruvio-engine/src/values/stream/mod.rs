//! The stream value (Redis's t_stream.c data): what a stream key stores, apart from
//! the commands (`crate::streams`), which also own the rules for reading IDs from
//! arguments.
//!
//! Why nodes: the value packs entries into nodes of up to 100, as Redis does, so a
//! stream of small events costs little more than its payload (see
//! docs/streams.md for the numbers).
//!
//! - [`id`]: entry IDs.
//! - [`value`]: `StreamValue`, the entries in nodes, with the last ID,
//!   entries-added and max-deleted-id Redis keeps.
//! - [`groups`]: consumer groups inside the value (PELs, consumers), and how each
//!   change of them is reversed.

pub(crate) mod groups;
pub(crate) mod id;
pub(crate) mod value;

#[cfg(test)]
mod tests;

pub use value::StreamValue;
