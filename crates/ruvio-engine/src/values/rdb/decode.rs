//! Reading one value in Redis's RDB object format, every encoding Redis has
//! written since RDB 1 up to Redis 7.4's hashes with field expiry (RDB 12), into
//! plain element lists ([`Loaded`]; a stream into its nodes and groups); the caller builds Ruvio's own encoding from
//! them under its thresholds (`crate::rdb::build`). Every read is bounds-checked and
//! every count is checked against the bytes left, so a bad payload is an error,
//! never a panic or a huge allocation.

use std::borrow::Cow;

use super::listpack::{read_intset, read_listpack, read_ziplist, read_zipmap, Elem, Malformed};
use super::{lzf, types};

/// Why a payload did not load.
#[derive(Debug, PartialEq, Eq)]
pub enum LoadError {
    /// Truncated or malformed bytes (Redis: `Bad data format`).
    Corrupt,
    /// A module type (Redis modules are not part of Ruvio).
    Module,
    /// A type byte no Redis version writes.
    UnknownType(u8),
}

impl From<Malformed> for LoadError {
    fn from(_: Malformed) -> LoadError {
        LoadError::Corrupt
    }
}

/// A hash field: field, value, absolute expiry time in ms (0: none).
pub type HashField = (Vec<u8>, Vec<u8>, u64);

/// A decoded value, elements in their stored order.
#[derive(Debug, PartialEq)]
pub enum Loaded {
    /// A string.
    Str(Vec<u8>),
    /// A list.
    List(Vec<Vec<u8>>),
    /// A set.
    Set(Vec<Vec<u8>>),
    /// A sorted set.
    ZSet(Vec<(Vec<u8>, f64)>),
    /// A hash.
    Hash(Vec<HashField>),
    /// A stream, with its groups.
    Stream(Box<super::stream::LoadedStream>),
}

/// A cursor over RDB bytes.
pub struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    /// Read from the start of `bytes`.
    pub fn new(bytes: &'a [u8]) -> Reader<'a> {
        Reader { bytes, at: 0 }
    }

    /// Bytes not yet read.
    pub fn remaining(&self) -> usize {
        self.bytes.len() - self.at
    }

    /// The next `n` bytes.
    pub fn take(&mut self, n: usize) -> Result<&'a [u8], LoadError> {
        if n > self.remaining() {
            return Err(LoadError::Corrupt);
        }
        let s = &self.bytes[self.at..self.at + n];
        self.at += n;
        Ok(s)
    }

    /// One byte.
    pub fn u8(&mut self) -> Result<u8, LoadError> {
        Ok(self.take(1)?[0])
    }

    /// A little-endian u64 (millisecond times, binary doubles).
    pub fn u64_le(&mut self) -> Result<u64, LoadError> {
        let b = self.take(8)?;
        Ok(u64::from_le_bytes(b.try_into().expect("8 bytes")))
    }

    /// `rdbLoadLenByRef`: a length, or (`true`) a special string encoding number.
    fn len_or_encoding(&mut self) -> Result<(u64, bool), LoadError> {
        let b = self.u8()?;
        Ok(match b >> 6 {
            0 => (u64::from(b & 0x3f), false),
            1 => ((u64::from(b & 0x3f) << 8) | u64::from(self.u8()?), false),
            2 => match b {
                0x80 => (
                    u64::from(u32::from_be_bytes(self.take(4)?.try_into().expect("4"))),
                    false,
                ),
                0x81 => (
                    u64::from_be_bytes(self.take(8)?.try_into().expect("8")),
                    false,
                ),
                _ => return Err(LoadError::Corrupt),
            },
            _ => (u64::from(b & 0x3f), true),
        })
    }

    /// A length (never an encoded string).
    pub fn len(&mut self) -> Result<u64, LoadError> {
        match self.len_or_encoding()? {
            (n, false) => Ok(n),
            _ => Err(LoadError::Corrupt),
        }
    }

    /// A count of items each at least `min_bytes` long: more than the bytes left
    /// could hold is corrupt (so a bad count never reserves memory).
    fn count(&mut self, min_bytes: usize) -> Result<usize, LoadError> {
        let n = self.len()?;
        if n > (self.remaining() / min_bytes.max(1)) as u64 {
            return Err(LoadError::Corrupt);
        }
        Ok(n as usize)
    }

    /// `rdbGenericLoadStringObject`: verbatim, an 8/16/32-bit integer, or LZF.
    pub fn string(&mut self) -> Result<Cow<'a, [u8]>, LoadError> {
        let (n, encoded) = self.len_or_encoding()?;
        if !encoded {
            let n = usize::try_from(n).map_err(|_| LoadError::Corrupt)?;
            return Ok(Cow::Borrowed(self.take(n)?));
        }
        let int = match n {
            0 => i64::from(self.u8()? as i8),
            1 => i64::from(i16::from_le_bytes(self.take(2)?.try_into().expect("2"))),
            2 => i64::from(i32::from_le_bytes(self.take(4)?.try_into().expect("4"))),
            3 => {
                let packed_len = self.len()?;
                let len = self.len()?;
                // LZF expands at most ~1:180 (a 264-byte reference in 2-3 bytes).
                if packed_len > self.remaining() as u64 || len > packed_len.saturating_mul(200) {
                    return Err(LoadError::Corrupt);
                }
                let packed = self.take(packed_len as usize)?;
                let bytes = lzf::decompress(packed, len as usize).ok_or(LoadError::Corrupt)?;
                return Ok(Cow::Owned(bytes));
            }
            _ => return Err(LoadError::Corrupt),
        };
        Ok(Cow::Owned(
            itoa::Buffer::new().format(int).as_bytes().to_vec(),
        ))
    }

    /// RDB 1-7's text score (`rdbLoadDoubleValue`): a length byte, 253 nan, 254
    /// +inf, 255 -inf.
    fn text_double(&mut self) -> Result<f64, LoadError> {
        match self.u8()? {
            253 => Ok(f64::NAN),
            254 => Ok(f64::INFINITY),
            255 => Ok(f64::NEG_INFINITY),
            n => parse_score(self.take(usize::from(n))?),
        }
    }

    /// A binary double (`rdbLoadBinaryDoubleValue`).
    fn binary_double(&mut self) -> Result<f64, LoadError> {
        Ok(f64::from_bits(self.u64_le()?))
    }
}

fn parse_score(text: &[u8]) -> Result<f64, LoadError> {
    std::str::from_utf8(text)
        .ok()
        .and_then(|s| s.parse::<f64>().ok())
        .ok_or(LoadError::Corrupt)
}

fn owned(elems: Vec<Elem<'_>>) -> Vec<Vec<u8>> {
    elems.iter().map(|e| e.bytes().into_owned()).collect()
}

fn pairs<T>(
    mut flat: Vec<Vec<u8>>,
    pair: impl Fn(Vec<u8>, Vec<u8>) -> Result<T, LoadError>,
) -> Result<Vec<T>, LoadError> {
    if !flat.len().is_multiple_of(2) {
        return Err(LoadError::Corrupt);
    }
    let mut out = Vec::with_capacity(flat.len() / 2);
    let mut it = flat.drain(..);
    while let (Some(a), Some(b)) = (it.next(), it.next()) {
        out.push(pair(a, b)?);
    }
    Ok(out)
}

fn score_pair(member: Vec<u8>, score: Vec<u8>) -> Result<(Vec<u8>, f64), LoadError> {
    Ok((member, parse_score(&score)?))
}

/// Read the object of type `kind` (the type byte already read).
pub fn read_object(r: &mut Reader<'_>, kind: u8) -> Result<Loaded, LoadError> {
    let loaded = match kind {
        types::STRING => Loaded::Str(r.string()?.into_owned()),
        types::LIST => {
            let n = r.count(1)?;
            Loaded::List(
                (0..n)
                    .map(|_| r.string().map(Cow::into_owned))
                    .collect::<Result<_, _>>()?,
            )
        }
        types::SET => {
            let n = r.count(1)?;
            Loaded::Set(
                (0..n)
                    .map(|_| r.string().map(Cow::into_owned))
                    .collect::<Result<_, _>>()?,
            )
        }
        types::ZSET | types::ZSET_2 => {
            let n = r.count(2)?;
            let mut out = Vec::with_capacity(n);
            for _ in 0..n {
                let member = r.string()?.into_owned();
                let score = if kind == types::ZSET {
                    r.text_double()?
                } else {
                    r.binary_double()?
                };
                out.push((member, score));
            }
            Loaded::ZSet(out)
        }
        types::HASH => {
            let n = r.count(2)?;
            let mut out = Vec::with_capacity(n);
            for _ in 0..n {
                out.push((r.string()?.into_owned(), r.string()?.into_owned(), 0));
            }
            Loaded::Hash(out)
        }
        types::HASH_METADATA_PRE_GA | types::HASH_METADATA => {
            let min = if kind == types::HASH_METADATA {
                r.u64_le()?
            } else {
                0
            };
            let n = r.count(3)?;
            let mut out = Vec::with_capacity(n);
            for _ in 0..n {
                let ttl = r.len()?;
                let at = match (ttl, kind) {
                    (0, _) => 0,
                    (t, types::HASH_METADATA) => t.checked_add(min).ok_or(LoadError::Corrupt)? - 1,
                    (t, _) => t,
                };
                out.push((r.string()?.into_owned(), r.string()?.into_owned(), at));
            }
            Loaded::Hash(out)
        }
        types::HASH_ZIPMAP => {
            let blob = r.string()?;
            let fields = read_zipmap(&blob)?;
            Loaded::Hash(
                fields
                    .into_iter()
                    .map(|(f, v)| (f.to_vec(), v.to_vec(), 0))
                    .collect(),
            )
        }
        types::LIST_ZIPLIST => Loaded::List(owned(read_ziplist(&r.string()?)?)),
        types::SET_INTSET => {
            let values = read_intset(&r.string()?)?;
            Loaded::Set(
                values
                    .iter()
                    .map(|v| itoa::Buffer::new().format(*v).as_bytes().to_vec())
                    .collect(),
            )
        }
        types::SET_LISTPACK => Loaded::Set(owned(read_listpack(&r.string()?)?)),
        types::ZSET_ZIPLIST => Loaded::ZSet(pairs(owned(read_ziplist(&r.string()?)?), score_pair)?),
        types::ZSET_LISTPACK => {
            Loaded::ZSet(pairs(owned(read_listpack(&r.string()?)?), score_pair)?)
        }
        types::HASH_ZIPLIST => Loaded::Hash(pairs(owned(read_ziplist(&r.string()?)?), |f, v| {
            Ok((f, v, 0))
        })?),
        types::HASH_LISTPACK => {
            Loaded::Hash(pairs(owned(read_listpack(&r.string()?)?), |f, v| {
                Ok((f, v, 0))
            })?)
        }
        types::HASH_LISTPACK_EX_PRE_GA | types::HASH_LISTPACK_EX => {
            if kind == types::HASH_LISTPACK_EX {
                r.u64_le()?; // the next expiry time, also found in the triples
            }
            Loaded::Hash(read_listpack_ex(&r.string()?)?)
        }
        types::LIST_QUICKLIST | types::LIST_QUICKLIST_2 => Loaded::List(read_quicklist(r, kind)?),
        types::MODULE_PRE_GA | types::MODULE_2 => return Err(LoadError::Module),
        types::STREAM_LISTPACKS | types::STREAM_LISTPACKS_2 | types::STREAM_LISTPACKS_3 => {
            Loaded::Stream(Box::new(super::stream::read_stream(r, kind)?))
        }
        other => return Err(LoadError::UnknownType(other)),
    };
    Ok(loaded)
}

/// Listpack triples field, value, expiry time (0: none).
fn read_listpack_ex(blob: &[u8]) -> Result<Vec<HashField>, LoadError> {
    let elems = read_listpack(blob)?;
    if !elems.len().is_multiple_of(3) {
        return Err(LoadError::Corrupt);
    }
    elems
        .chunks_exact(3)
        .map(|t| match t[2] {
            Elem::Int(at) if at >= 0 => Ok((
                t[0].bytes().into_owned(),
                t[1].bytes().into_owned(),
                at as u64,
            )),
            _ => Err(LoadError::Corrupt),
        })
        .collect()
}

/// Redis's `QUICKLIST_NODE_CONTAINER_PLAIN`: a node holding one big element.
const QUICKLIST_NODE_PLAIN: u64 = 1;
/// `QUICKLIST_NODE_CONTAINER_PACKED`.
const QUICKLIST_NODE_PACKED: u64 = 2;

/// A quicklist: nodes of ziplists (RDB 7-9) or of listpacks / plain elements (10+).
fn read_quicklist(r: &mut Reader<'_>, kind: u8) -> Result<Vec<Vec<u8>>, LoadError> {
    let nodes = r.count(2)?;
    let mut out = Vec::new();
    for _ in 0..nodes {
        let container = if kind == types::LIST_QUICKLIST_2 {
            r.len()?
        } else {
            QUICKLIST_NODE_PACKED
        };
        let blob = r.string()?;
        if blob.is_empty() {
            return Err(LoadError::Corrupt);
        }
        match (container, kind) {
            (QUICKLIST_NODE_PLAIN, _) => out.push(blob.into_owned()),
            (QUICKLIST_NODE_PACKED, types::LIST_QUICKLIST_2) => {
                out.extend(owned(read_listpack(&blob)?))
            }
            (QUICKLIST_NODE_PACKED, _) => out.extend(owned(read_ziplist(&blob)?)),
            _ => return Err(LoadError::Corrupt),
        }
    }
    Ok(out)
}
