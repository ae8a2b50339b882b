//! What the keyspace stores: every family's value type with its encodings, the
//! RDB object bytes of a value, and nothing that knows about keys, databases or
//! commands.
//!
//! Why a floor of its own, below `keyspace`: an entry keeps a value in one word and
//! must know each value type, while every command stands on the keyspace. With the
//! values here the imports run one way (values <- keyspace <- engine <- commands),
//! so a value and its encodings can be read, changed and tested alone.
//!
//! - [`list`]: `ListValue` (listpack, quicklist) and Redis 7.2's list size rules.
//! - [`hash`]: `HashValue` (listpack, listpackex, hashtable) with field expiry.
//! - [`set`]: `SetValue` (intset, listpack, hashtable).
//! - [`zset`]: `ZSetValue` (listpack, skiplist).
//! - [`stream`]: `StreamValue` (entries in nodes), its IDs and consumer groups.
//! - [`rdb`]: a value in Redis's RDB object format, written and read back (the
//!   file around the objects is `crate::rdb`, above).
//!
//! A value's mutators record their inverses for the undo journal through
//! [`crate::undo`] (on this floor); the public views of a value
//! ([`crate::value`]) are on this floor too.

pub(crate) mod hash;
pub(crate) mod list;
pub(crate) mod rdb;
pub(crate) mod set;
pub(crate) mod stream;
pub(crate) mod zset;
