//! LEB128 varints as the packed encodings write them: seven payload bits per
//! byte, least significant group first, the high bit set on every byte but the
//! last. Byte blocks (`block`) store their length this way, and the packed list,
//! hash, set and sorted set their headers, lengths and scores.
//!
//! Why one place: those five encodings each carried a private copy of the same
//! loops (and three an unsafe header reader), so one copy is one set of loops to
//! read, test and keep byte-identical. Every function is `#[inline]`, so a
//! caller compiles to the loop it had before.
//!
//! Readers trust their input: the bytes were written by this crate, so a varint
//! that runs off its slice is a bug (an index panic), never a client error.

/// Payload bits per byte.
pub(crate) const PAYLOAD_BITS: u32 = 7;
/// The continuation bit: another byte follows.
pub(crate) const MORE: u8 = 0x80;
/// The payload bits of one byte.
pub(crate) const PAYLOAD_MASK: u8 = 0x7f;
/// Longest varint of a `u64`: 64 bits in 7-bit groups.
pub(crate) const BYTES_MAX: usize = 10;
const _: () = assert!(BYTES_MAX == (u64::BITS as usize).div_ceil(PAYLOAD_BITS as usize));

/// Bytes the varint of `v` takes (1 for 0).
#[inline]
pub(crate) fn len(v: u64) -> usize {
    let bits = u64::BITS - v.leading_zeros().min(u64::BITS - 1);
    bits.div_ceil(PAYLOAD_BITS) as usize
}

/// Write `v` at the start of `out`; returns the bytes written ([`len`] of `v`).
/// Panics when `out` is shorter.
#[inline]
pub(crate) fn write(out: &mut [u8], mut v: u64) -> usize {
    let mut i = 0;
    loop {
        let low = (v as u8) & PAYLOAD_MASK;
        v >>= PAYLOAD_BITS;
        if v == 0 {
            out[i] = low;
            return i + 1;
        }
        out[i] = low | MORE;
        i += 1;
    }
}

/// Append `v` to `out`.
#[inline]
pub(crate) fn push(out: &mut Vec<u8>, mut v: u64) {
    loop {
        let low = (v as u8) & PAYLOAD_MASK;
        v >>= PAYLOAD_BITS;
        if v == 0 {
            out.push(low);
            return;
        }
        out.push(low | MORE);
    }
}

/// A varint in a small buffer, for callers that copy it into a block or splice.
#[derive(Clone, Copy)]
pub(crate) struct Encoded {
    buf: [u8; BYTES_MAX],
    len: u8,
}

impl Encoded {
    /// The varint's bytes.
    #[inline]
    pub(crate) fn bytes(&self) -> &[u8] {
        &self.buf[..usize::from(self.len)]
    }
}

/// The varint of `v` in a small buffer.
#[inline]
pub(crate) fn encode(v: u64) -> Encoded {
    let mut buf = [0u8; BYTES_MAX];
    let n = write(&mut buf, v);
    Encoded { buf, len: n as u8 }
}

/// The one decoding loop: the varint whose bytes `byte` gives from offset `at`.
/// `inline(always)`, so each reader below compiles to this loop with its own
/// byte access (a checked index or a raw read) and nothing else.
#[inline(always)]
fn decode(mut byte: impl FnMut(usize) -> u8, mut at: usize) -> (u64, usize) {
    let (mut v, mut shift) = (0u64, 0);
    loop {
        let b = byte(at);
        at += 1;
        v |= u64::from(b & PAYLOAD_MASK) << shift;
        if b & MORE == 0 {
            return (v, at);
        }
        shift += PAYLOAD_BITS;
    }
}

/// The varint at `bytes[at..]`: its value and the offset just after it.
/// Panics when the varint runs past the slice.
#[inline]
pub(crate) fn read(bytes: &[u8], at: usize) -> (u64, usize) {
    decode(|i| bytes[i], at)
}

/// The varint at byte `at` of a raw block: its value and the offset just after
/// it. For the headers at the start of packed blocks, read on every access,
/// where building a slice first would need the length the header holds.
///
/// # Safety
/// `ptr.add(at)` starts a complete varint written by this module inside one live
/// allocation: every byte from `at` up to and including the first one without
/// [`MORE`] is in bounds and initialized.
#[inline]
pub(crate) unsafe fn read_raw(ptr: *const u8, at: usize) -> (u64, usize) {
    // SAFETY: per the contract, `decode` asks only for bytes up to the varint's
    // last, which are readable.
    decode(|i| unsafe { ptr.add(i).read() }, at)
}

/// The two varints that open a packed hash's, set's or sorted set's block: their
/// values and the header's length (where the entries start).
///
/// # Safety
/// As [`read_raw`]: `ptr` starts two complete varints inside one live allocation.
#[inline]
pub(crate) unsafe fn read_raw_pair(ptr: *const u8) -> (usize, usize, usize) {
    // SAFETY: per the contract, the first varint starts at `ptr` ...
    let (a, at) = unsafe { read_raw(ptr, 0) };
    // SAFETY: ... and the second right after it.
    let (b, at) = unsafe { read_raw(ptr, at) };
    (a as usize, b as usize, at)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn lengths_at_each_boundary() {
        assert_eq!(len(0), 1);
        assert_eq!(len(127), 1);
        assert_eq!(len(128), 2);
        assert_eq!(len(16_383), 2);
        assert_eq!(len(16_384), 3);
        assert_eq!(len(u64::MAX), BYTES_MAX);
        // The bytes themselves, least significant group first.
        assert_eq!(encode(300).bytes(), &[0xac, 0x02]);
        assert_eq!(encode(0).bytes(), &[0x00]);
    }

    proptest! {
        /// Every writer writes the same `len(v)` bytes, and both readers give
        /// `v` back and stop just after them.
        #[test]
        fn round_trips_any_u64(v in any::<u64>(), at in 0usize..4) {
            let n = len(v);
            let mut slice = [0xffu8; BYTES_MAX + 4];
            prop_assert_eq!(write(&mut slice[at..], v), n);
            let mut vec = vec![0xee; at];
            push(&mut vec, v);
            prop_assert_eq!(vec.len(), at + n);
            prop_assert_eq!(&vec[at..], &slice[at..at + n]);
            let encoded = encode(v);
            prop_assert_eq!(encoded.bytes(), &slice[at..at + n]);
            prop_assert_eq!(read(&slice, at), (v, at + n));
            // SAFETY: `slice` holds the complete varint written at `at`.
            prop_assert_eq!(unsafe { read_raw(slice.as_ptr(), at) }, (v, at + n));
        }

        /// A header's two varints read back as written, with their length.
        #[test]
        fn pairs_round_trip(a in any::<u32>(), b in any::<u32>()) {
            let mut head = Vec::new();
            push(&mut head, u64::from(a));
            push(&mut head, u64::from(b));
            // SAFETY: `head` holds two complete varints from its start.
            let pair = unsafe { read_raw_pair(head.as_ptr()) };
            prop_assert_eq!(pair, (a as usize, b as usize, head.len()));
        }
    }
}
