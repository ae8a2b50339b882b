//! The backlog's bytes: the stream's last bytes, kept as the buffers they came
//! in, and where in the stream the first of them stands.
//!
//! Why buffers rather than one ring of bytes: a shard hands its records over
//! once per loop iteration as one buffer of its own (`Feed::take`), under the
//! backlog's lock. Copying it into a ring of bytes was one of the three copies
//! of every record a replica costs (the feed, the backlog, the replica's
//! output); moving the buffer in is a pointer's worth of work whatever its
//! size. Trimming drops whole buffers from the front and skips into the first
//! one, so no byte moves there either. Small pieces (a `SELECT`, a PING to the
//! replicas, a replica's stream as its primary's reads deliver it) join the
//! last buffer instead of becoming buffers of their own, so the count of
//! buffers stays near the backlog's size over [`JOIN_MAX_BYTES`].

use std::collections::VecDeque;

/// A piece this small is copied onto the end of the last buffer (while that
/// stays within [`BUFFER_MAX_BYTES`]) rather than kept as a buffer of its own.
const JOIN_MAX_BYTES: usize = 4 << 10;
/// The size the last buffer grows to by small pieces joining it.
const BUFFER_MAX_BYTES: usize = 64 << 10;

/// The stream's bytes from `first_offset` on.
#[derive(Debug, Default)]
pub struct Backlog {
    buffers: VecDeque<Vec<u8>>,
    /// Bytes at the front of the first buffer trimmed already.
    head: usize,
    /// Bytes held (the buffers' lengths less `head`).
    len: usize,
    first_offset: u64,
}

impl Backlog {
    /// An empty backlog whose first byte will be the stream's byte `first_offset`.
    pub fn starting_at(first_offset: u64) -> Backlog {
        Backlog {
            first_offset,
            ..Backlog::default()
        }
    }

    /// Bytes held.
    pub fn bytes_held(&self) -> usize {
        self.len
    }

    /// The stream offset of the first byte held.
    pub fn first_offset(&self) -> u64 {
        self.first_offset
    }

    /// `bytes` after the last byte: moved in, or joined to the last buffer
    /// when small. A buffer kept holds at most twice its bytes: a shard's
    /// feed starts each iteration with room for up to 64 KiB (`Feed::take`),
    /// and a backlog of buffers that each use a tenth of their room would
    /// take ten times its size (shrinking gives the tail back to the
    /// allocator in place).
    pub fn push(&mut self, mut bytes: Vec<u8>) {
        if bytes.len() <= JOIN_MAX_BYTES {
            self.push_slice(&bytes);
            return;
        }
        if bytes.capacity() > 2 * bytes.len() {
            bytes.shrink_to_fit();
        }
        self.len += bytes.len();
        self.buffers.push_back(bytes);
    }

    /// `bytes` after the last byte, copied.
    pub fn push_slice(&mut self, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        self.len += bytes.len();
        if bytes.len() <= JOIN_MAX_BYTES {
            if let Some(last) = self.buffers.back_mut() {
                if last.len() + bytes.len() <= BUFFER_MAX_BYTES {
                    last.extend_from_slice(bytes);
                    return;
                }
            }
        }
        let mut buffer = Vec::with_capacity(bytes.len().max(JOIN_MAX_BYTES));
        buffer.extend_from_slice(bytes);
        self.buffers.push_back(buffer);
    }

    /// The first `n` bytes (at most every byte held) are no longer held.
    pub fn drop_front(&mut self, n: usize) {
        let mut n = n.min(self.len);
        self.len -= n;
        self.first_offset += n as u64;
        while n > 0 {
            let Some(first) = self.buffers.front() else {
                break;
            };
            let left = first.len() - self.head;
            if n < left {
                self.head += n;
                return;
            }
            n -= left;
            self.buffers.pop_front();
            self.head = 0;
        }
        if self.buffers.is_empty() {
            self.head = 0;
        }
    }

    /// Appends to `out` the `take` bytes that follow the first `skip` held. A
    /// replica reads near the end, so the buffers are found from the back.
    pub fn copy_range(&self, skip: usize, take: usize, out: &mut Vec<u8>) {
        let take = take.min(self.len.saturating_sub(skip));
        if take == 0 {
            return;
        }
        // The buffer holding byte `skip`, and where in it that byte is: count
        // the bytes after it back from the end.
        let mut after = self.len - skip;
        let mut index = self.buffers.len();
        let mut at = 0;
        while after > 0 {
            index -= 1;
            let start = if index == 0 { self.head } else { 0 };
            let held = self.buffers[index].len() - start;
            if after <= held {
                at = start + held - after;
                break;
            }
            after -= held;
        }
        out.reserve(take);
        let mut left = take;
        for buffer in self.buffers.range(index..) {
            let n = (buffer.len() - at).min(left);
            out.extend_from_slice(&buffer[at..at + n]);
            left -= n;
            at = 0;
            if left == 0 {
                break;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The backlog's bytes, read back whole.
    fn held(b: &Backlog) -> Vec<u8> {
        let mut out = Vec::new();
        b.copy_range(0, usize::MAX, &mut out);
        out
    }

    #[test]
    fn holds_what_was_pushed_in_order_across_buffers() {
        let mut b = Backlog::starting_at(10);
        let big: Vec<u8> = (0..JOIN_MAX_BYTES + 1).map(|i| i as u8).collect();
        b.push(b"ab".to_vec());
        b.push(big.clone());
        b.push_slice(b"cd");
        let mut expected = b"ab".to_vec();
        expected.extend_from_slice(&big);
        expected.extend_from_slice(b"cd");
        assert_eq!(held(&b), expected);
        assert_eq!(b.bytes_held(), expected.len());
        assert_eq!(b.first_offset(), 10);
        // Every window reads the same bytes as the whole.
        for (skip, take) in [
            (0, 1),
            (1, 2),
            (2, 5),
            (3, JOIN_MAX_BYTES),
            (expected.len() - 1, 9),
        ] {
            let mut out = Vec::new();
            b.copy_range(skip, take, &mut out);
            let end = (skip + take).min(expected.len());
            assert_eq!(out, expected[skip..end], "skip {skip} take {take}");
        }
    }

    #[test]
    fn a_buffer_kept_holds_at_most_twice_its_bytes() {
        let mut b = Backlog::default();
        let mut roomy = Vec::with_capacity(64 << 10);
        roomy.extend_from_slice(&[1; JOIN_MAX_BYTES + 1]);
        b.push(roomy);
        assert!(b.buffers[0].capacity() <= 2 * (JOIN_MAX_BYTES + 1));
        assert_eq!(held(&b), vec![1; JOIN_MAX_BYTES + 1]);
    }

    #[test]
    fn small_pieces_join_the_last_buffer_up_to_its_limit() {
        let mut b = Backlog::default();
        for _ in 0..BUFFER_MAX_BYTES / 1000 + 1 {
            b.push(vec![7; 1000]);
        }
        assert_eq!(b.buffers.len(), 2);
        assert!(b
            .buffers
            .iter()
            .all(|buffer| buffer.len() <= BUFFER_MAX_BYTES));
    }

    #[test]
    fn dropping_the_front_moves_the_first_offset_and_keeps_the_rest() {
        let mut b = Backlog::starting_at(1);
        let first: Vec<u8> = (0..5000u32).map(|i| (i % 251) as u8).collect();
        let second: Vec<u8> = (0..6000u32).map(|i| (i % 241) as u8).collect();
        b.push(first.clone());
        b.push(second.clone());
        let mut all = first.clone();
        all.extend_from_slice(&second);
        // Into the first buffer, to its end, into the second.
        let mut dropped = 0;
        for n in [100, 4900, 1, 5998] {
            b.drop_front(n);
            dropped += n;
            assert_eq!(b.first_offset(), 1 + dropped as u64);
            assert_eq!(held(&b), all[dropped..]);
        }
        assert_eq!(b.buffers.len(), 1);
        b.drop_front(10);
        assert_eq!(b.bytes_held(), 0);
        assert_eq!(b.first_offset(), 1 + all.len() as u64);
        b.push_slice(b"x");
        assert_eq!(held(&b), b"x");
    }
}
