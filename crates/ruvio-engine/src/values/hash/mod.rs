//! The hash value (Redis's t_hash.c encodings) with per-field expiry: what a hash
//! key stores, apart from the hash commands (`crate::hashes`).
//!
//! Why these pieces:
//! - [`listpack`]: a small hash is one exact-size heap block of length-prefixed
//!   pairs (Redis's `listpack`), or triples with an expiry time once a field TTL
//!   command has touched it (`listpackex`). Small hashes are most hashes, so their
//!   bytes decide the memory bill.
//! - [`table`]: a big hash is a slab of one-block field nodes with a hash index of
//!   slot ids (Redis's `hashtable`): stable ids give HSCAN a cursor that never
//!   misses a field, and a min-heap of expiry times finds expired fields without a
//!   scan.
//! - [`value`]: [`HashValue`], one machine word that is either of the two (tag in
//!   the pointer's low bit), so the keyspace entry can store it in its value word.
//!   Every conversion rule lives there, next to the writes that trigger them.
//!
//! The command layer passes Redis's `hash-max-listpack-entries` and
//! `hash-max-listpack-value` (engine settings) as [`HashLimits`] to every write.

pub(crate) mod listpack;
pub(crate) mod table;
pub(crate) mod value;

#[cfg(test)]
mod tests;

pub use value::{FieldRef, HashValue};

/// Redis's `hash-max-listpack-entries` default.
pub const LISTPACK_ENTRIES_DEFAULT: usize = 128;
/// Redis's `hash-max-listpack-value` default.
pub const LISTPACK_VALUE_BYTES_DEFAULT: usize = 64;

/// The two configuration values that decide when a packed hash becomes a table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HashLimits {
    /// `hash-max-listpack-entries`: a packed hash holds at most this many fields.
    pub listpack_entries_max: usize,
    /// `hash-max-listpack-value`: a packed hash holds no field or value longer.
    pub listpack_value_bytes_max: usize,
}

impl HashLimits {
    /// Redis's defaults (128 entries, 64 bytes).
    pub const DEFAULT: HashLimits = HashLimits {
        listpack_entries_max: LISTPACK_ENTRIES_DEFAULT,
        listpack_value_bytes_max: LISTPACK_VALUE_BYTES_DEFAULT,
    };
}

impl Default for HashLimits {
    fn default() -> Self {
        HashLimits::DEFAULT
    }
}

/// The encoding OBJECT ENCODING reports for a hash (Redis 7.4+ names).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HashEncoding {
    /// One packed block of field/value pairs.
    Listpack,
    /// One packed block of field/value/expiry triples.
    ListpackEx,
    /// A table of field nodes.
    Hashtable,
}

impl HashEncoding {
    /// The name OBJECT ENCODING replies with.
    pub fn name(self) -> &'static str {
        match self {
            HashEncoding::Listpack => "listpack",
            HashEncoding::ListpackEx => "listpackex",
            HashEncoding::Hashtable => "hashtable",
        }
    }
}
