//! Redis's RDB object format: DUMP/RESTORE payloads now, RDB files and per-shard
//! snapshots later, all from the same two halves.
//!
//! - [`encode`]: one value's type byte and object appended to a byte sink, in the
//!   encoding Redis 7.0 would write for the same contents (so a small value's DUMP
//!   equals Redis's byte for byte).
//! - [`decode`]: one object read back, from every encoding any Redis version
//!   writes (up to 7.4's hashes with field expiry), into plain elements.
//! - [`build`]: those elements made into a Ruvio value under the configured
//!   encoding thresholds (what Redis does after loading: convert when too big).
//! - [`listpack`], [`lzf`]: the blobs inside objects, and Redis's string compression.
//! - [`file`]: a whole Redis RDB file loaded into one shard (`--import-rdb`), and
//!   written whole or as a stream (a snapshot taken in slices: [`crate::snapshot`]).
//!
//! A DUMP payload is `type byte | object | RDB version (u16 LE) | CRC-64 (u64 LE)`,
//! the CRC (Redis's crc64, Jones polynomial, from the `crc` crate) over all bytes
//! before it. Ruvio writes RDB version 10 (Redis 7.0's, so the Redis 7.0 of the
//! test machine restores it) and reads up to 12 (Redis 7.4).
//!
//! Cost: DUMP of a string is one CRC pass over the bytes plus, above 20 bytes, one
//! LZF attempt (a per-thread table, no allocation beyond the output); collections
//! are written element by element with no intermediate copy except each listpack
//! blob. RESTORE decodes into element vectors, then inserts them.

pub(crate) mod build;
pub(crate) mod decode;
pub(crate) mod encode;
pub mod file;
pub(crate) mod listpack;
pub(crate) mod lzf;
pub(crate) mod stream;

use crc::{Crc, Table, CRC_64_REDIS};

use crate::value::ValueRef;

/// The RDB version Ruvio writes (Redis 7.0's).
pub const RDB_VERSION: u16 = 10;
/// The version a hash with field expiry times needs (Redis 7.4's).
pub const RDB_VERSION_HASH_TTL: u16 = 12;
/// The newest version Ruvio reads.
pub const RDB_VERSION_MAX: u16 = 12;

/// Redis's `crc64` (Jones polynomial, reflected), slice-by-16 tables (32 KiB,
/// built at compile time): DUMP of a big value and RDB files checksum fast.
static CRC64: Crc<u64, Table<16>> = Crc::<u64, Table<16>>::new(&CRC_64_REDIS);

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

/// The DUMP payload of `value`.
pub fn dump_payload(value: ValueRef<'_>) -> Vec<u8> {
    // A string's payload is its bytes plus at most 9 length bytes, the type byte
    // and the 10-byte footer: one allocation.
    let hint = match value {
        ValueRef::Str(s) => s.len() + 20,
        _ => 64,
    };
    let mut out = Vec::with_capacity(hint);
    let version = encode::write_object(&mut out, value);
    seal(out, version)
}

/// Append the footer (RDB `version`, CRC-64) to object bytes: a DUMP payload.
pub fn seal(mut object: Vec<u8>, version: u16) -> Vec<u8> {
    object.extend_from_slice(&version.to_le_bytes());
    let crc = CRC64.checksum(&object);
    object.extend_from_slice(&crc.to_le_bytes());
    object
}

/// Redis's `verifyDumpPayload`: the object bytes when the footer's version is one
/// Ruvio reads and the checksum matches (`None`: `DUMP payload version or checksum
/// are wrong`). A zero checksum is not special (Redis skips it only when
/// `skip-checksum-validation` is configured, which Ruvio does not have).
pub fn verify_payload(payload: &[u8]) -> Option<&[u8]> {
    let body_len = payload.len().checked_sub(10)?;
    let footer = &payload[body_len..];
    let version = u16::from_le_bytes([footer[0], footer[1]]);
    if version > RDB_VERSION_MAX {
        return None;
    }
    let crc = u64::from_le_bytes(footer[2..].try_into().expect("8 bytes"));
    (CRC64.checksum(&payload[..body_len + 2]) == crc).then_some(&payload[..body_len])
}

/// Decode the object bytes of a verified payload. Bytes after the object are
/// ignored, as Redis's RESTORE ignores them.
pub fn load_payload(object: &[u8]) -> Result<decode::Loaded, decode::LoadError> {
    let mut r = decode::Reader::new(object);
    let kind = r.u8()?;
    decode::read_object(&mut r, kind)
}

#[cfg(test)]
mod tests;
