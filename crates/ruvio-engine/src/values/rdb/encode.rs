//! Writing one value in Redis's RDB object format: the type byte and the object,
//! into a byte sink, one key at a time (DUMP now; an RDB file or a forkless
//! snapshot appends the same bytes per key).
//!
//! The encoding chosen is the one Redis 7.0 writes for the same contents, so a
//! small value's DUMP is byte-identical to Redis's: strings as integers, LZF or
//! verbatim (`rdbSaveRawString`); lists as a quicklist of listpacks (type 18, one
//! node per Ruvio node); small hashes and sorted sets as one listpack (16, 17);
//! intsets as Redis's intset blob (11); everything else element by element (sets
//! 2, hashes 4, sorted sets 5 with binary doubles, largest first as Redis saves a
//! skiplist). Ruvio's listpack-encoded sets are written as a plain set (type 2),
//! which Redis 7.0 loads (its `SET_LISTPACK`, type 20, needs RDB 11). A hash with
//! field expiry times is written as Redis 7.4's `HASH_METADATA` (24, RDB 12).
//! Streams are Redis 7.0's `STREAM_LISTPACKS_2` (19, see [`super::stream`]).

use super::listpack::{write_intset, ListpackWriter};
use super::{lzf, types, RDB_VERSION, RDB_VERSION_HASH_TTL};
use crate::value::{StrRef, ValueRef};
use crate::values::hash::HashValue;
use crate::values::list::ListValue;
use crate::values::set::SetValue;
use crate::values::zset::ZSetValue;

/// `rdbSaveLen`: 6, 14, 32 or 64 bits, big-endian.
pub fn write_len(out: &mut Vec<u8>, len: u64) {
    if len < 1 << 6 {
        out.push(len as u8);
    } else if len < 1 << 14 {
        out.extend_from_slice(&[0x40 | (len >> 8) as u8, len as u8]);
    } else if len <= u64::from(u32::MAX) {
        out.push(0x80);
        out.extend_from_slice(&(len as u32).to_be_bytes());
    } else {
        out.push(0x81);
        out.extend_from_slice(&len.to_be_bytes());
    }
}

/// `rdbEncodeInteger`: an integer that fits 8, 16 or 32 bits as `0xC0..0xC2`.
fn write_small_int(out: &mut Vec<u8>, v: i64) -> bool {
    if let Ok(b) = i8::try_from(v) {
        out.extend_from_slice(&[0xc0, b as u8]);
    } else if let Ok(h) = i16::try_from(v) {
        out.push(0xc1);
        out.extend_from_slice(&h.to_le_bytes());
    } else if let Ok(w) = i32::try_from(v) {
        out.push(0xc2);
        out.extend_from_slice(&w.to_le_bytes());
    } else {
        return false;
    }
    true
}

/// `rdbSaveRawString`: a short canonical integer as an integer, a string over 20
/// bytes LZF-compressed when that saves at least 4 bytes, else verbatim.
pub fn write_string(out: &mut Vec<u8>, s: &[u8]) {
    if s.len() <= 11 {
        if let Some(v) = ruvio_resp::string2ll(s) {
            if write_small_int(out, v) {
                return;
            }
        }
    }
    if s.len() > 20 {
        if let Some(packed) = lzf::compress(s, s.len() - 4) {
            out.push(0xc3);
            write_len(out, packed.len() as u64);
            write_len(out, s.len() as u64);
            out.extend_from_slice(&packed);
            return;
        }
    }
    write_len(out, s.len() as u64);
    out.extend_from_slice(s);
}

/// `rdbSaveLongLongAsStringObject`: an int-encoded string.
fn write_int_string(out: &mut Vec<u8>, v: i64) {
    if !write_small_int(out, v) {
        let mut buf = itoa::Buffer::new();
        let text = buf.format(v).as_bytes();
        write_len(out, text.len() as u64);
        out.extend_from_slice(text);
    }
}

fn write_str_ref(out: &mut Vec<u8>, s: StrRef<'_>) {
    match s {
        StrRef::Int(v) => write_int_string(out, v),
        StrRef::Bytes(b) => write_string(out, b),
    }
}

/// Append `value`'s type byte and object to `out`; returns the RDB version the
/// bytes need (10, or 12 for a hash with field expiry times).
pub fn write_object(out: &mut Vec<u8>, value: ValueRef<'_>) -> u16 {
    match value {
        ValueRef::Stream(s) => super::stream::write_stream(out, s),
        ValueRef::Str(s) => {
            out.push(types::STRING);
            write_str_ref(out, s);
        }
        ValueRef::List(l) => write_list(out, l),
        ValueRef::Set(s) => write_set(out, s),
        ValueRef::ZSet(z) => write_zset(out, z),
        ValueRef::Hash(h) if h.next_expire_at().is_some() => {
            write_hash_with_ttls(out, h);
            return RDB_VERSION_HASH_TTL;
        }
        ValueRef::Hash(h) => write_hash(out, h),
    }
    RDB_VERSION
}

/// A quicklist of listpacks (`RDB_TYPE_LIST_QUICKLIST_2`): a listpack-encoded list
/// is one node, a quicklist keeps its node boundaries (as Redis's would).
fn write_list(out: &mut Vec<u8>, list: &ListValue) {
    out.push(types::LIST_QUICKLIST_2);
    let shape = list.node_shape();
    let node_lens = if shape.is_empty() {
        vec![list.len()]
    } else {
        shape.iter().map(|&(n, _)| n).collect()
    };
    write_len(out, node_lens.len() as u64);
    let mut elems = list.iter();
    for n in node_lens {
        let mut lp = ListpackWriter::new();
        for e in elems.by_ref().take(n) {
            lp.push(e);
        }
        write_len(out, QUICKLIST_NODE_PACKED);
        write_string(out, &lp.finish());
    }
}

/// Redis's `QUICKLIST_NODE_CONTAINER_PACKED`.
const QUICKLIST_NODE_PACKED: u64 = 2;

fn write_set(out: &mut Vec<u8>, set: &SetValue) {
    if set.encoding() == crate::values::set::SetEncoding::Intset {
        out.push(types::SET_INTSET);
        let values: Vec<i64> = set
            .iter()
            .map(|m| match m {
                StrRef::Int(v) => v,
                StrRef::Bytes(b) => ruvio_resp::string2ll(b).unwrap_or_default(),
            })
            .collect();
        let mut blob = Vec::with_capacity(8 + values.len() * 8);
        write_intset(&values, &mut blob);
        write_string(out, &blob);
        return;
    }
    out.push(types::SET);
    write_len(out, set.len() as u64);
    for m in set.iter() {
        write_str_ref(out, m);
    }
}

fn write_zset(out: &mut Vec<u8>, zset: &ZSetValue) {
    if zset.encoding() == crate::values::zset::ZSetEncoding::Listpack {
        out.push(types::ZSET_LISTPACK);
        let mut lp = ListpackWriter::new();
        let mut text = Vec::with_capacity(24);
        for (member, score) in zset.iter() {
            lp.push(member);
            text.clear();
            d2string(score, &mut text);
            lp.push(&text);
        }
        write_string(out, &lp.finish());
        return;
    }
    out.push(types::ZSET_2);
    write_len(out, zset.len() as u64);
    for (member, score) in zset.iter_from(0, true) {
        write_string(out, member);
        out.extend_from_slice(&score.to_le_bytes());
    }
}

/// Redis 7.0's `d2string`, the text of a listpack score: integral doubles of
/// magnitude below 2^52 as integers (so -0 is `0`), others as `%.17g`.
fn d2string(score: f64, out: &mut Vec<u8>) {
    const LIMIT: f64 = 4_503_599_627_370_496.0;
    if score > -LIMIT && score < LIMIT && score == (score as i64) as f64 {
        out.extend_from_slice(itoa::Buffer::new().format(score as i64).as_bytes());
    } else {
        ruvio_resp::format_double_g17(score, out);
    }
}

fn write_hash(out: &mut Vec<u8>, hash: &HashValue) {
    use crate::values::hash::HashEncoding;
    // A `listpackex` hash whose fields all lost their expiry is a plain listpack.
    if matches!(
        hash.encoding(),
        HashEncoding::Listpack | HashEncoding::ListpackEx
    ) {
        out.push(types::HASH_LISTPACK);
        let mut lp = ListpackWriter::new();
        for f in hash.entries() {
            lp.push(f.field);
            lp.push(f.value);
        }
        write_string(out, &lp.finish());
        return;
    }
    out.push(types::HASH);
    write_len(out, hash.len() as u64);
    for f in hash.entries() {
        write_string(out, f.field);
        write_string(out, f.value);
    }
}

/// `RDB_TYPE_HASH_METADATA`: the smallest expiry time (8 bytes), then per field
/// its time relative to it plus one (0: none), the field and the value.
fn write_hash_with_ttls(out: &mut Vec<u8>, hash: &HashValue) {
    out.push(types::HASH_METADATA);
    let min = hash
        .entries()
        .filter_map(|f| f.expire_at)
        .min()
        .unwrap_or_default();
    out.extend_from_slice(&min.to_le_bytes());
    write_len(out, hash.len() as u64);
    for f in hash.entries() {
        write_len(out, f.expire_at.map_or(0, |at| at - min + 1));
        write_string(out, f.field);
        write_string(out, f.value);
    }
}
