//! Redis's listpack, ziplist, zipmap and intset blobs: writing listpacks and
//! intsets byte for byte as Redis does (so DUMP of a small collection equals
//! Redis's), and reading all four, every length checked (a bad blob is an error,
//! never a panic or an out-of-bounds read).
//!
//! Listpack (Redis 7): `[total bytes u32][count u16] entries... 0xFF`, each entry
//! an encoding header, its data and a backlen. Ziplist (before 7.0):
//! `[total u32][tail offset u32][count u16] entries... 0xFF`, each entry the
//! previous entry's length (1 or 5 bytes), an encoding header and its data.

use std::borrow::Cow;

use crate::values::list::rules::listpack_int;

/// A listpack being built (`lpNew` + `lpAppend`).
pub struct ListpackWriter {
    buf: Vec<u8>,
    count: usize,
}

impl ListpackWriter {
    /// An empty listpack.
    pub fn new() -> ListpackWriter {
        let mut buf = Vec::with_capacity(64);
        buf.extend_from_slice(&[0; 6]);
        ListpackWriter { buf, count: 0 }
    }

    /// Append `elem`, as an integer when Redis would store it as one.
    pub fn push(&mut self, elem: &[u8]) {
        match listpack_int(elem) {
            Some(v) => self.push_int(v),
            None => self.push_str(elem),
        }
    }

    /// Append an integer in the smallest of Redis's integer encodings.
    pub fn push_int(&mut self, v: i64) {
        let start = self.buf.len();
        match v {
            0..=127 => self.buf.push(v as u8),
            -4096..=4095 => {
                let u = (v as u64) & 0x1fff;
                self.buf
                    .extend_from_slice(&[0xc0 | (u >> 8) as u8, u as u8]);
            }
            _ if i16::try_from(v).is_ok() => {
                self.buf.push(0xf1);
                self.buf.extend_from_slice(&(v as i16).to_le_bytes());
            }
            -8_388_608..=8_388_607 => {
                self.buf.push(0xf2);
                self.buf.extend_from_slice(&(v as i32).to_le_bytes()[..3]);
            }
            _ if i32::try_from(v).is_ok() => {
                self.buf.push(0xf3);
                self.buf.extend_from_slice(&(v as i32).to_le_bytes());
            }
            _ => {
                self.buf.push(0xf4);
                self.buf.extend_from_slice(&v.to_le_bytes());
            }
        }
        self.end_entry(start);
    }

    /// Append bytes as a string entry.
    pub fn push_str(&mut self, s: &[u8]) {
        let start = self.buf.len();
        let len = s.len();
        if len < 64 {
            self.buf.push(0x80 | len as u8);
        } else if len < 4096 {
            self.buf
                .extend_from_slice(&[0xe0 | (len >> 8) as u8, len as u8]);
        } else {
            self.buf.push(0xf0);
            self.buf.extend_from_slice(&(len as u32).to_le_bytes());
        }
        self.buf.extend_from_slice(s);
        self.end_entry(start);
    }

    /// `lpEncodeBacklen`: the entry's length, 7 bits a byte, read from the end.
    fn end_entry(&mut self, start: usize) {
        let l = self.buf.len() - start;
        // Redis's thresholds (one below each power of 128, not at it).
        let n = match l {
            0..=127 => 1,
            128..=16382 => 2,
            16383..=2_097_150 => 3,
            2_097_151..=268_435_454 => 4,
            _ => 5,
        };
        // Most significant 7-bit group first; every byte after it has bit 7 set.
        for i in (0..n).rev() {
            let group = ((l >> (7 * i)) & 127) as u8;
            self.buf.push(if i == n - 1 { group } else { group | 128 });
        }
        self.count += 1;
    }

    /// The finished blob.
    pub fn finish(mut self) -> Vec<u8> {
        self.buf.push(0xff);
        let total = self.buf.len() as u32;
        self.buf[..4].copy_from_slice(&total.to_le_bytes());
        let count = self.count.min(65535) as u16;
        self.buf[4..6].copy_from_slice(&count.to_le_bytes());
        self.buf
    }
}

/// A malformed blob.
#[derive(Debug, PartialEq, Eq)]
pub struct Malformed;

/// One decoded element: bytes, or an integer (formatted by the caller).
pub enum Elem<'a> {
    /// A string entry.
    Str(&'a [u8]),
    /// An integer entry.
    Int(i64),
}

impl<'a> Elem<'a> {
    /// The element's bytes (integers in decimal).
    pub fn bytes(&self) -> Cow<'a, [u8]> {
        match *self {
            Elem::Str(s) => Cow::Borrowed(s),
            Elem::Int(v) => Cow::Owned(itoa::Buffer::new().format(v).as_bytes().to_vec()),
        }
    }
}

fn take<'a>(blob: &'a [u8], at: &mut usize, n: usize) -> Result<&'a [u8], Malformed> {
    let end = at.checked_add(n).ok_or(Malformed)?;
    let s = blob.get(*at..end).ok_or(Malformed)?;
    *at = end;
    Ok(s)
}

fn sign_extend(u: u64, bits: u32) -> i64 {
    let shift = 64 - bits;
    ((u << shift) as i64) >> shift
}

fn le(bytes: &[u8]) -> u64 {
    bytes
        .iter()
        .rev()
        .fold(0u64, |acc, &b| (acc << 8) | u64::from(b))
}

/// Every element of a listpack, in order.
pub fn read_listpack(blob: &[u8]) -> Result<Vec<Elem<'_>>, Malformed> {
    if blob.len() < 7 || le(&blob[..4]) as usize != blob.len() || blob[blob.len() - 1] != 0xff {
        return Err(Malformed);
    }
    let declared = le(&blob[4..6]) as usize;
    let mut at = 6;
    let mut out = Vec::with_capacity(declared.min(blob.len()));
    while at < blob.len() - 1 {
        let start = at;
        let b = blob[at];
        at += 1;
        let elem = match b {
            0x00..=0x7f => Elem::Int(i64::from(b)),
            0x80..=0xbf => Elem::Str(take(blob, &mut at, usize::from(b & 0x3f))?),
            0xc0..=0xdf => {
                let lo = take(blob, &mut at, 1)?[0];
                Elem::Int(sign_extend((u64::from(b & 0x1f) << 8) | u64::from(lo), 13))
            }
            0xe0..=0xef => {
                let lo = take(blob, &mut at, 1)?[0];
                let len = (usize::from(b & 0x0f) << 8) | usize::from(lo);
                Elem::Str(take(blob, &mut at, len)?)
            }
            0xf0 => {
                let len = le(take(blob, &mut at, 4)?) as usize;
                Elem::Str(take(blob, &mut at, len)?)
            }
            0xf1 => Elem::Int(sign_extend(le(take(blob, &mut at, 2)?), 16)),
            0xf2 => Elem::Int(sign_extend(le(take(blob, &mut at, 3)?), 24)),
            0xf3 => Elem::Int(sign_extend(le(take(blob, &mut at, 4)?), 32)),
            0xf4 => Elem::Int(le(take(blob, &mut at, 8)?) as i64),
            _ => return Err(Malformed),
        };
        let entry_len = at - start;
        skip_backlen(blob, &mut at, entry_len)?;
        out.push(elem);
    }
    if declared != 65535 && declared != out.len() {
        return Err(Malformed);
    }
    Ok(out)
}

fn skip_backlen(blob: &[u8], at: &mut usize, entry_len: usize) -> Result<(), Malformed> {
    let n = match entry_len {
        0..=127 => 1,
        128..=16382 => 2,
        16383..=2_097_150 => 3,
        2_097_151..=268_435_454 => 4,
        _ => 5,
    };
    take(blob, at, n).map(|_| ())
}

/// Every element of a ziplist (Redis before 7.0), in order.
pub fn read_ziplist(blob: &[u8]) -> Result<Vec<Elem<'_>>, Malformed> {
    if blob.len() < 11 || le(&blob[..4]) as usize != blob.len() || blob[blob.len() - 1] != 0xff {
        return Err(Malformed);
    }
    let declared = le(&blob[8..10]) as usize;
    let mut at = 10;
    let mut out = Vec::with_capacity(declared.min(blob.len()));
    while at < blob.len() - 1 {
        // The previous entry's length: one byte, or 0xFE and four bytes.
        if take(blob, &mut at, 1)?[0] == 0xfe {
            take(blob, &mut at, 4)?;
        }
        let b = take(blob, &mut at, 1)?[0];
        let elem = match b >> 6 {
            0 => Elem::Str(take(blob, &mut at, usize::from(b & 0x3f))?),
            1 => {
                let lo = take(blob, &mut at, 1)?[0];
                Elem::Str(take(
                    blob,
                    &mut at,
                    (usize::from(b & 0x3f) << 8) | usize::from(lo),
                )?)
            }
            2 => {
                let len = take(blob, &mut at, 4)?;
                let len = u32::from_be_bytes([len[0], len[1], len[2], len[3]]) as usize;
                Elem::Str(take(blob, &mut at, len)?)
            }
            _ => match b {
                0xc0 => Elem::Int(sign_extend(le(take(blob, &mut at, 2)?), 16)),
                0xd0 => Elem::Int(sign_extend(le(take(blob, &mut at, 4)?), 32)),
                0xe0 => Elem::Int(le(take(blob, &mut at, 8)?) as i64),
                0xf0 => Elem::Int(sign_extend(le(take(blob, &mut at, 3)?), 24)),
                0xfe => Elem::Int(i64::from(take(blob, &mut at, 1)?[0] as i8)),
                0xf1..=0xfd => Elem::Int(i64::from(b & 0x0f) - 1),
                _ => return Err(Malformed),
            },
        };
        out.push(elem);
    }
    if declared != 65535 && declared != out.len() {
        return Err(Malformed);
    }
    Ok(out)
}

/// A field and its value.
pub type Pair<'a> = (&'a [u8], &'a [u8]);

/// The field/value pairs of a zipmap (Redis 2.4's small hashes).
pub fn read_zipmap(blob: &[u8]) -> Result<Vec<Pair<'_>>, Malformed> {
    fn len(blob: &[u8], at: &mut usize) -> Result<Option<usize>, Malformed> {
        match take(blob, at, 1)?[0] {
            0xff => Ok(None),
            254 => {
                let b = take(blob, at, 4)?;
                Ok(Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize))
            }
            253 => Err(Malformed),
            n => Ok(Some(usize::from(n))),
        }
    }
    let mut at = 1; // the count byte (not trusted past 253)
    let mut out = Vec::new();
    while let Some(flen) = len(blob, &mut at)? {
        let field = take(blob, &mut at, flen)?;
        let vlen = len(blob, &mut at)?.ok_or(Malformed)?;
        let free = usize::from(take(blob, &mut at, 1)?[0]);
        let value = take(blob, &mut at, vlen)?;
        take(blob, &mut at, free)?;
        out.push((field, value));
    }
    if at != blob.len() {
        return Err(Malformed);
    }
    Ok(out)
}

/// Redis's intset blob: `[width u32][count u32]` then little-endian integers,
/// strictly ascending.
pub fn write_intset(values: &[i64], out: &mut Vec<u8>) {
    let width: usize = values
        .iter()
        .map(|&v| {
            if i16::try_from(v).is_ok() {
                2
            } else if i32::try_from(v).is_ok() {
                4
            } else {
                8
            }
        })
        .max()
        .unwrap_or(2);
    out.extend_from_slice(&(width as u32).to_le_bytes());
    out.extend_from_slice(&(values.len() as u32).to_le_bytes());
    for v in values {
        out.extend_from_slice(&v.to_le_bytes()[..width]);
    }
}

/// The integers of an intset blob (checked ascending, as Redis's deep check).
pub fn read_intset(blob: &[u8]) -> Result<Vec<i64>, Malformed> {
    if blob.len() < 8 {
        return Err(Malformed);
    }
    let width = le(&blob[..4]) as usize;
    let count = le(&blob[4..8]) as usize;
    if !matches!(width, 2 | 4 | 8) || count.checked_mul(width) != Some(blob.len() - 8) {
        return Err(Malformed);
    }
    let values: Vec<i64> = blob[8..]
        .chunks_exact(width)
        .map(|c| sign_extend(le(c), width as u32 * 8))
        .collect();
    if values.windows(2).any(|w| w[0] >= w[1]) {
        return Err(Malformed);
    }
    Ok(values)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn listpack_matches_redis_layout() {
        // RPUSH l a 1 -5000 on Redis 7.0: listpack bytes from DEBUG LISTPACK.
        let mut w = ListpackWriter::new();
        for e in [&b"a"[..], b"1", b"-5000", b"100000"] {
            w.push(e);
        }
        let lp = w.finish();
        let got: Vec<Vec<u8>> = read_listpack(&lp)
            .unwrap()
            .iter()
            .map(|e| e.bytes().into_owned())
            .collect();
        assert_eq!(got, [&b"a"[..], b"1", b"-5000", b"100000"]);
        assert_eq!(&lp[6..9], &[0x81, b'a', 2]);
        assert_eq!(&lp[9..11], &[1, 1]);
    }

    proptest! {
        #[test]
        fn listpack_round_trip(elems in proptest::collection::vec(
            prop_oneof![any::<i64>().prop_map(|v| v.to_string().into_bytes()),
                        proptest::collection::vec(any::<u8>(), 0..5000)], 0..20)) {
            let mut w = ListpackWriter::new();
            for e in &elems {
                w.push(e);
            }
            let lp = w.finish();
            let got: Vec<Vec<u8>> = read_listpack(&lp).unwrap().iter().map(|e| e.bytes().into_owned()).collect();
            prop_assert_eq!(got, elems);
        }

        #[test]
        fn readers_never_panic(blob in proptest::collection::vec(any::<u8>(), 0..300)) {
            let _ = read_listpack(&blob);
            let _ = read_ziplist(&blob);
            let _ = read_zipmap(&blob);
            let _ = read_intset(&blob);
        }
    }
}
