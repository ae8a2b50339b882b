//! Redis's RDB object format: DUMP/RESTORE payloads now, RDB files and per-shard
//! snapshots later, all from the same two halves.
//!
//! - `encode`, `decode`, `listpack`, `lzf`, `stream`: one value's type
//!   byte and object, written as Redis 7.0 writes it and read back from every
//!   encoding any Redis version writes. They live in [`crate::values::rdb`], below
//!   the keyspace (whose snapshot writes entries as they are about to change), and
//!   are re-exported here.
//! - [`build`]: those elements made into a Ruvio value under the configured
//!   encoding thresholds (what Redis does after loading: convert when too big).
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
pub mod file;

pub(crate) use crate::values::rdb::{decode, encode, stream};
pub use crate::values::rdb::{types, RDB_VERSION, RDB_VERSION_HASH_TTL, RDB_VERSION_MAX};

use crc::{Crc, Table, CRC_64_REDIS};

use crate::value::ValueRef;

/// Redis's `crc64` (Jones polynomial, reflected), slice-by-16 tables (32 KiB,
/// built at compile time): DUMP of a big value and RDB files checksum fast.
static CRC64: Crc<u64, Table<16>> = Crc::<u64, Table<16>>::new(&CRC_64_REDIS);

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
    verify_payload_with(payload, true)
}

/// [`verify_payload`], the CRC-64 checked only when `check_crc` (Redis's
/// `verifyDumpPayload` under `skip_checksum_validation` checks the version alone).
pub fn verify_payload_with(payload: &[u8], check_crc: bool) -> Option<&[u8]> {
    let body_len = payload.len().checked_sub(10)?;
    let footer = &payload[body_len..];
    let version = u16::from_le_bytes([footer[0], footer[1]]);
    if version > RDB_VERSION_MAX {
        return None;
    }
    let crc = u64::from_le_bytes(footer[2..].try_into().expect("8 bytes"));
    let crc_ok = !check_crc || CRC64.checksum(&payload[..body_len + 2]) == crc;
    crc_ok.then_some(&payload[..body_len])
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
