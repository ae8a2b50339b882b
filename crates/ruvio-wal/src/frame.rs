//! Record framing: `payload length (u32 LE) | CRC32C of the payload (u32 LE) |
//! payload`. A command's payload is `kind (1) | db (varint) | argument count
//! (varint) | per argument: length (varint) and bytes`. A group's payload is
//! `kind (1) | command bodies (a command's payload without its kind)`, two or more:
//! one checksum covers them all, so a transaction or a script is replayed whole or
//! not at all. The bodies carry no headers of their own, so nothing inside a group
//! reads as a record when a reader looks for good records after a bad one.
//!
//! The length comes first so a reader knows where the next record starts; the
//! checksum covers the payload only, so a torn write (the length written, the
//! payload not) is found by the checksum. A payload is never empty (it holds at
//! least its kind byte), which lets a reader tell zero-filled space after the last
//! record from a record.

/// Bytes before a payload: its length and its checksum.
pub const HEADER_BYTES: usize = 8;

/// Largest payload a reader accepts. A command's arguments are bounded by
/// `client-query-buffer-limit` (1 GiB) on the way in; the format's u32 length would
/// allow 4 GiB, and a reader refuses more than this before allocating anything.
pub const PAYLOAD_BYTES_MAX: usize = 1 << 31;

/// The payload holds one command.
pub const KIND_COMMAND: u8 = 1;

/// The payload holds command bodies that replay together or not at all.
pub const KIND_GROUP: u8 = 2;

/// An open group of records at the end of a buffer ([`Group::begin`]).
#[derive(Debug, PartialEq, Eq)]
pub struct Group {
    start: usize,
    members: usize,
}

impl Group {
    /// Open a group at the end of `out`: the records appended with
    /// [`append`](Self::append) until [`end`](Self::end) form one frame.
    pub fn begin(out: &mut Vec<u8>) -> Group {
        let start = out.len();
        out.extend_from_slice(&[0; HEADER_BYTES]);
        out.push(KIND_GROUP);
        Group { start, members: 0 }
    }

    /// Add one command (`args` run in database `db`) to the group.
    pub fn append<'a>(
        &mut self,
        out: &mut Vec<u8>,
        db: usize,
        args: impl IntoIterator<Item = &'a [u8]>,
    ) {
        append_body(out, db, args);
        self.members += 1;
    }

    /// Close the group: nothing when it is empty, a command record when it holds
    /// one command (a group's body is a command's), a group record otherwise.
    pub fn end(self, out: &mut Vec<u8>) {
        match self.members {
            0 => out.truncate(self.start),
            1 => {
                out[self.start + HEADER_BYTES] = KIND_COMMAND;
                seal(out, self.start);
            }
            _ => seal(out, self.start),
        }
    }
}

/// Append one command record (`args` run in database `db`) to `out`.
pub fn append_command<'a>(out: &mut Vec<u8>, db: usize, args: impl IntoIterator<Item = &'a [u8]>) {
    let start = out.len();
    out.extend_from_slice(&[0; HEADER_BYTES]);
    out.push(KIND_COMMAND);
    append_body(out, db, args);
    seal(out, start);
}

/// A command's body: `db (varint) | argument count | per argument: length and bytes`.
fn append_body<'a>(out: &mut Vec<u8>, db: usize, args: impl IntoIterator<Item = &'a [u8]>) {
    put_varint(out, db as u64);
    // The count precedes the arguments but is known after them: it goes into a
    // fixed-size slot, so nothing is moved and nothing allocated.
    let count_at = out.len();
    out.extend_from_slice(&[0; COUNT_BYTES]);
    let mut count: u64 = 0;
    for arg in args {
        put_varint(out, arg.len() as u64);
        out.extend_from_slice(arg);
        count += 1;
    }
    put_fixed_varint(&mut out[count_at..count_at + COUNT_BYTES], count);
}

/// Fill in the header of the frame starting at `start` (its payload runs to the end).
fn seal(out: &mut [u8], start: usize) {
    let payload = &out[start + HEADER_BYTES..];
    let len = payload.len() as u32;
    let crc = crc32c::crc32c(payload);
    out[start..start + 4].copy_from_slice(&len.to_le_bytes());
    out[start + 4..start + 8].copy_from_slice(&crc.to_le_bytes());
}

/// The argument count is written in a fixed 5-byte varint (counts stay below 2^35),
/// so it can be filled in after the arguments without moving them.
pub(crate) const COUNT_BYTES: usize = 5;

/// LEB128 varint.
pub(crate) fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// A varint padded to exactly `slot.len()` bytes (continuation bits on all but the last).
fn put_fixed_varint(slot: &mut [u8], mut v: u64) {
    let last = slot.len() - 1;
    for (i, byte) in slot.iter_mut().enumerate() {
        let low = (v & 0x7f) as u8;
        v >>= 7;
        *byte = if i == last { low } else { low | 0x80 };
    }
}

/// Read a varint at `*pos`; `None` if it runs past the end or past 64 bits.
pub(crate) fn get_varint(buf: &[u8], pos: &mut usize) -> Option<u64> {
    let mut v: u64 = 0;
    for shift in (0..64).step_by(7) {
        let byte = *buf.get(*pos)?;
        *pos += 1;
        v |= u64::from(byte & 0x7f).checked_shl(shift)?;
        if byte & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_round_trip() {
        for v in [0, 1, 127, 128, 300, u32::MAX as u64, u64::MAX] {
            let mut out = Vec::new();
            put_varint(&mut out, v);
            let mut pos = 0;
            assert_eq!(get_varint(&out, &mut pos), Some(v));
            assert_eq!(pos, out.len());
        }
        let mut slot = [0u8; COUNT_BYTES];
        put_fixed_varint(&mut slot, 1000);
        let mut pos = 0;
        assert_eq!(get_varint(&slot, &mut pos), Some(1000));
        assert_eq!(pos, COUNT_BYTES);
    }
}
