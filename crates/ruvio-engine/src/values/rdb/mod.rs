//! A value in Redis's RDB object format: its type byte and object written into a
//! byte sink (DUMP, an RDB file, a snapshot taken in slices), and read back.
//!
//! Why below the keyspace, apart from `crate::rdb` (payloads, files, loading into a
//! shard): the keyspace's snapshot writes an entry's old state the moment it is
//! about to change (`keyspace::cow`), so the writer of one value must be reachable
//! from there without calling up into the engine.
//!
//! - [`encode`]: one value's type byte and object, as Redis 7.0 writes it.
//! - [`decode`]: one object read back, from every encoding any Redis version
//!   writes, into plain elements (`crate::rdb` builds values of them).
//! - [`listpack`], [`lzf`]: the blobs inside objects, and Redis's string compression.
//! - [`stream`]: streams, written and read.
//! - [`opcode`], [`write_select_db`], [`write_resize_db`]: the bytes around keys in
//!   a file, shared by the loader and the writers.

pub(crate) mod decode;
pub(crate) mod encode;
pub(crate) mod listpack;
pub(crate) mod lzf;
pub(crate) mod stream;

use encode::write_len;

/// The RDB version Ruvio writes (Redis 7.0's).
pub const RDB_VERSION: u16 = 10;
/// The version a hash with field expiry times needs (Redis 7.4's).
pub const RDB_VERSION_HASH_TTL: u16 = 12;
/// The newest version Ruvio reads.
pub const RDB_VERSION_MAX: u16 = 12;

/// The object type bytes (`RDB_TYPE_*`).
pub mod types {
    /// A string.
    pub const STRING: u8 = 0;
    /// A list, element by element (RDB < 7).
    pub const LIST: u8 = 1;
    /// A set, member by member.
    pub const SET: u8 = 2;
    /// A sorted set with text scores (RDB < 8).
    pub const ZSET: u8 = 3;
    /// A hash, pair by pair.
    pub const HASH: u8 = 4;
    /// A sorted set with binary scores.
    pub const ZSET_2: u8 = 5;
    /// A module value (pre-GA format).
    pub const MODULE_PRE_GA: u8 = 6;
    /// A module value.
    pub const MODULE_2: u8 = 7;
    /// A zipmap hash (Redis 2.4).
    pub const HASH_ZIPMAP: u8 = 9;
    /// A ziplist list (Redis < 3.2).
    pub const LIST_ZIPLIST: u8 = 10;
    /// An intset.
    pub const SET_INTSET: u8 = 11;
    /// A ziplist sorted set (Redis < 7.0).
    pub const ZSET_ZIPLIST: u8 = 12;
    /// A ziplist hash (Redis < 7.0).
    pub const HASH_ZIPLIST: u8 = 13;
    /// A quicklist of ziplists (Redis 3.2 - 6.2).
    pub const LIST_QUICKLIST: u8 = 14;
    /// A stream.
    pub const STREAM_LISTPACKS: u8 = 15;
    /// A listpack hash (Redis 7.0+).
    pub const HASH_LISTPACK: u8 = 16;
    /// A listpack sorted set (Redis 7.0+).
    pub const ZSET_LISTPACK: u8 = 17;
    /// A quicklist of listpacks or plain nodes (Redis 7.0+).
    pub const LIST_QUICKLIST_2: u8 = 18;
    /// A stream (Redis 7.0).
    pub const STREAM_LISTPACKS_2: u8 = 19;
    /// A listpack set (Redis 7.2+).
    pub const SET_LISTPACK: u8 = 20;
    /// A stream (Redis 7.2+).
    pub const STREAM_LISTPACKS_3: u8 = 21;
    /// A hash with field expiry, absolute times (Redis 7.4 release candidates).
    pub const HASH_METADATA_PRE_GA: u8 = 22;
    /// A listpack hash with field expiry (Redis 7.4 release candidates).
    pub const HASH_LISTPACK_EX_PRE_GA: u8 = 23;
    /// A hash with field expiry (Redis 7.4+).
    pub const HASH_METADATA: u8 = 24;
    /// A listpack hash with field expiry (Redis 7.4+).
    pub const HASH_LISTPACK_EX: u8 = 25;
}

/// `RDB_OPCODE_*`.
pub(crate) mod opcode {
    pub const SLOT_INFO: u8 = 0xf4;
    pub const FUNCTION2: u8 = 0xf5;
    pub const FUNCTION_PRE_GA: u8 = 0xf6;
    pub const MODULE_AUX: u8 = 0xf7;
    pub const IDLE: u8 = 0xf8;
    pub const FREQ: u8 = 0xf9;
    pub const AUX: u8 = 0xfa;
    pub const RESIZEDB: u8 = 0xfb;
    pub const EXPIRETIME_MS: u8 = 0xfc;
    pub const EXPIRETIME: u8 = 0xfd;
    pub const SELECTDB: u8 = 0xfe;
    pub const EOF: u8 = 0xff;
}

/// `SELECTDB db`: the keys that follow are in database `db`.
pub(crate) fn write_select_db(out: &mut Vec<u8>, db: usize) {
    out.push(opcode::SELECTDB);
    write_len(out, db as u64);
}

/// `RESIZEDB keys volatile`: how many keys (and keys with an expiry) the database
/// that follows holds, so a loader sizes its table once (Redis writes it too).
pub(crate) fn write_resize_db(out: &mut Vec<u8>, keys: usize, volatile: usize) {
    out.push(opcode::RESIZEDB);
    write_len(out, keys as u64);
    write_len(out, volatile as u64);
}
