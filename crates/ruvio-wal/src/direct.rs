//! The block arithmetic of writing a log with direct I/O (`O_DIRECT`), no I/O of
//! its own: the server submits what [`DirectLog`] hands out on its ring.
//!
//! Why direct writes: a buffered write copies the records into the page cache on
//! an io_uring worker thread of the shard's CPU (about 12 % of that CPU at a
//! million logged SETs a second), and an fdatasync must then write those pages
//! back. A direct write sends the buffer to the device as it is; the fdatasync
//! after it only flushes the device's cache. Measured in docs/durability.md.
//!
//! What direct writes ask: each one covers whole blocks ([`BLOCK`]) at a
//! block-aligned file offset, from a block-aligned buffer. A log grows by records
//! of any length, so each write starts at the block holding the log's end and
//! writes that block's earlier bytes again (the *tail*, kept here), then the new
//! records, then zeros to the block's end. Writes never overlap in time (one is in
//! flight at most), so a later write of the same block always lands last.
//!
//! The zeros after the log's end read as "no more records" (a record's length is
//! never zero, `crate::read`). Space ahead of the end is zero-filled in advance
//! ([`DirectLog::zero_fill_due`]), a chunk at a time: a write into blocks already
//! allocated and written changes no file metadata, so its fdatasync needs no
//! journal commit, which on this machine's disk halves its cost. A zero fill never
//! overlaps the write in flight, nor a write the area it fills.

/// Direct writes cover whole blocks of this many bytes at aligned offsets: the
/// file system's block, so ext4 treats them as aligned (an unaligned direct write
/// waits for every other one on the file).
pub const BLOCK: usize = 4096;

/// Space zero-filled by one write ahead of the log's end.
pub const ZERO_CHUNK: usize = 1 << 20;

/// Zero filling keeps this far ahead of the log's end.
pub const ZERO_AHEAD: u64 = 4 << 20;

/// A write buffer larger than this is given back once its write completes (one
/// large record must not keep its size allocated).
pub const KEEP_CAPACITY_MAX: usize = 1 << 20;

/// A reusable buffer whose contents start at a block-aligned address.
#[derive(Debug, Default)]
pub struct AlignedBuf {
    bytes: Vec<u8>,
    at: usize,
    len: usize,
}

impl AlignedBuf {
    /// `len` zero bytes (a whole number of blocks).
    pub fn zeros(len: usize) -> AlignedBuf {
        let mut buf = AlignedBuf::default();
        buf.fill(&[&vec![0; len]]);
        buf
    }

    /// Hold `parts` one after the other, then zeros up to a whole number of blocks.
    pub fn fill(&mut self, parts: &[&[u8]]) {
        let data: usize = parts.iter().map(|p| p.len()).sum();
        let len = data.div_ceil(BLOCK) * BLOCK;
        if self.bytes.len() < len + BLOCK {
            self.bytes = vec![0; len + BLOCK];
        }
        self.at = self.bytes.as_ptr().align_offset(BLOCK);
        self.len = len;
        let mut pos = self.at;
        for part in parts {
            self.bytes[pos..pos + part.len()].copy_from_slice(part);
            pos += part.len();
        }
        self.bytes[pos..self.at + len].fill(0);
    }

    /// Give the memory back if it is larger than [`KEEP_CAPACITY_MAX`].
    pub fn shrink(&mut self) {
        if self.bytes.len() > KEEP_CAPACITY_MAX {
            *self = AlignedBuf::default();
        }
    }

    pub fn as_slice(&self) -> &[u8] {
        &self.bytes[self.at..self.at + self.len]
    }
}

/// A write to submit: `bytes` at file offset `offset` (both block-aligned).
#[derive(Debug, PartialEq, Eq)]
pub struct BlockWrite<'a> {
    pub offset: u64,
    pub bytes: &'a [u8],
}

/// The write in flight: `staged` holds it from file offset `start`; `done` bytes
/// of it are written; the log ends at `end` once it completes.
#[derive(Debug)]
struct InFlight {
    start: u64,
    done: usize,
    end: u64,
}

/// A direct write's completion the log cannot go on from.
#[derive(Debug, PartialEq, Eq)]
pub enum WriteFailed {
    /// The kernel's error (negative errno) or nothing written.
    Error(i32),
    /// Part of the blocks written, not ending on a block: the rest cannot be
    /// written directly.
    Unaligned,
}

/// One segment file written directly: where its records end, the partial last
/// block, the write in flight and the zero filling ahead.
#[derive(Debug)]
pub struct DirectLog {
    /// The records written so far end here.
    end: u64,
    /// The bytes of the block holding `end`, before it.
    tail: Vec<u8>,
    staged: AlignedBuf,
    in_flight: Option<InFlight>,
    /// The file is written (records or zeros) up to here, or a write in flight
    /// will have written it.
    zeroed: u64,
    /// A zero fill in flight: its offset.
    zeroing: Option<u64>,
    zeros: AlignedBuf,
}

impl DirectLog {
    /// A segment whose records end at `end`; `tail` holds the bytes of its last
    /// block before `end` (`end % BLOCK` of them). The file must hold nothing
    /// after `end` (a cut segment is truncated first).
    pub fn new(end: u64, tail: Vec<u8>) -> DirectLog {
        debug_assert_eq!(tail.len() as u64, end % BLOCK as u64);
        DirectLog {
            end,
            tail,
            staged: AlignedBuf::default(),
            in_flight: None,
            zeroed: align_up(end),
            zeroing: None,
            zeros: AlignedBuf::default(),
        }
    }

    /// Where the records written so far end.
    pub fn end(&self) -> u64 {
        self.end
    }

    /// A write is in flight.
    pub fn writing(&self) -> bool {
        self.in_flight.is_some()
    }

    /// The records of the write in flight (empty when none is), without the
    /// earlier bytes of its first block nor the zeros after them.
    pub fn records_in_flight(&self) -> &[u8] {
        let Some(flight) = &self.in_flight else {
            return &[];
        };
        let from = (self.end - flight.start) as usize;
        &self.staged.as_slice()[from..from + (flight.end - self.end) as usize]
    }

    /// A zero fill is in flight.
    pub fn zero_filling(&self) -> bool {
        self.zeroing.is_some()
    }

    /// Whether `len` bytes of records may be written now: no write in flight, and
    /// no zero fill in flight where they would go.
    pub fn can_write(&self, len: usize) -> bool {
        let write_end = align_up(self.end + len as u64);
        self.in_flight.is_none() && self.zeroing.is_none_or(|at| write_end <= at)
    }

    /// Stage `records` (the bytes that follow the log's end) as the next write
    /// (check [`can_write`](Self::can_write) first).
    pub fn write(&mut self, records: &[u8]) -> BlockWrite<'_> {
        let start = self.end - self.tail.len() as u64;
        self.staged.fill(&[&self.tail, records]);
        let end = self.end + records.len() as u64;
        self.zeroed = self.zeroed.max(align_up(end));
        self.in_flight = Some(InFlight {
            start,
            done: 0,
            end,
        });
        BlockWrite {
            offset: start,
            bytes: self.staged.as_slice(),
        }
    }

    /// The write in flight wrote `result` bytes (or failed with `-errno`): the
    /// rest to submit after a short write, or `None` once all of it is written.
    pub fn written(&mut self, result: i32) -> Result<Option<BlockWrite<'_>>, WriteFailed> {
        let Some(flight) = self.in_flight.as_mut() else {
            return Ok(None);
        };
        if result <= 0 {
            self.in_flight = None;
            return Err(WriteFailed::Error(result));
        }
        flight.done += result as usize;
        let total = self.staged.as_slice().len();
        if flight.done < total {
            if !flight.done.is_multiple_of(BLOCK) {
                self.in_flight = None;
                return Err(WriteFailed::Unaligned);
            }
            let (offset, done) = (flight.start + flight.done as u64, flight.done);
            return Ok(Some(BlockWrite {
                offset,
                bytes: &self.staged.as_slice()[done..],
            }));
        }
        let (start, end) = (flight.start, flight.end);
        self.in_flight = None;
        let keep = (end % BLOCK as u64) as usize;
        let from = (end - start) as usize - keep;
        self.tail.clear();
        self.tail
            .extend_from_slice(&self.staged.as_slice()[from..from + keep]);
        self.staged.shrink();
        self.end = end;
        Ok(None)
    }

    /// The next zero fill to submit: when none is in flight and the filled space
    /// ahead of the log's end is shorter than [`ZERO_AHEAD`], a chunk after it (not
    /// past `limit`, the segment's size; never where the write in flight goes).
    pub fn zero_fill_due(&mut self, limit: u64) -> Option<BlockWrite<'_>> {
        let behind = self.zeroed < self.end + ZERO_AHEAD && self.zeroed < limit;
        if self.zeroing.is_some() || !behind {
            return None;
        }
        if self.zeros.as_slice().is_empty() {
            self.zeros = AlignedBuf::zeros(ZERO_CHUNK);
        }
        let offset = self.zeroed;
        self.zeroing = Some(offset);
        self.zeroed += ZERO_CHUNK as u64;
        Some(BlockWrite {
            offset,
            bytes: self.zeros.as_slice(),
        })
    }

    /// The zero fill in flight completed with `result`. A short or failed fill is
    /// not an error of the log (the records' own writes allocate what it did
    /// not): the space after what it wrote counts as not filled.
    pub fn zero_filled(&mut self, result: i32) {
        let Some(offset) = self.zeroing.take() else {
            return;
        };
        if result < ZERO_CHUNK as i32 {
            let filled = offset + (result.max(0) as u64 / BLOCK as u64) * BLOCK as u64;
            // Only the fill's own space goes back: a record write may have gone past it.
            if self.zeroed == offset + ZERO_CHUNK as u64 {
                self.zeroed = filled;
            }
        }
    }
}

/// `n` rounded up to a whole number of blocks.
pub fn align_up(n: u64) -> u64 {
    n.div_ceil(BLOCK as u64) * BLOCK as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A file as the writes leave it.
    fn apply(file: &mut Vec<u8>, write: &BlockWrite<'_>) {
        let (at, len) = (write.offset as usize, write.bytes.len());
        assert_eq!(at % BLOCK, 0);
        assert_eq!(len % BLOCK, 0);
        if file.len() < at + len {
            file.resize(at + len, 0xEE);
        }
        file[at..at + len].copy_from_slice(write.bytes);
    }

    #[test]
    fn aligned_buffers_start_on_a_block_and_end_padded() {
        let mut buf = AlignedBuf::default();
        buf.fill(&[b"abc", b"de"]);
        assert_eq!(buf.as_slice().as_ptr() as usize % BLOCK, 0);
        assert_eq!(buf.as_slice().len(), BLOCK);
        assert_eq!(&buf.as_slice()[..5], b"abcde");
        assert!(buf.as_slice()[5..].iter().all(|&b| b == 0));
    }

    #[test]
    fn a_short_write_continues_on_a_block_and_fails_off_one() {
        let mut log = DirectLog::new(0, Vec::new());
        let records = vec![7u8; 3 * BLOCK + 10];
        log.write(&records);
        assert_eq!(log.records_in_flight(), &records[..]);
        let rest = log.written(BLOCK as i32).unwrap().unwrap();
        assert_eq!(rest.offset, BLOCK as u64);
        assert_eq!(rest.bytes.len(), 3 * BLOCK);
        assert_eq!(log.written(3 * BLOCK as i32), Ok(None));
        assert_eq!(log.end(), records.len() as u64);
        assert!(log.records_in_flight().is_empty());
        log.write(b"x");
        assert_eq!(log.written(100), Err(WriteFailed::Unaligned));
        log.write(b"x");
        assert_eq!(log.written(-28), Err(WriteFailed::Error(-28)));
    }

    proptest! {
        /// Records of any lengths written through a DirectLog, with zero fills
        /// completing between them, leave the file holding exactly the records
        /// in order, then zeros: what the reader needs.
        #[test]
        fn the_file_holds_the_records_then_zeros(
            // (The log never writes zero bytes of records: `Wal::next_write`.)
            writes in proptest::collection::vec((1usize..9000, any::<bool>(), any::<bool>()), 1..30),
            resume in 0u64..3,
        ) {
            let mut file = Vec::new();
            let mut expected = Vec::new();
            // Resuming a segment: some records already there.
            let first = vec![3u8; (resume * 1000) as usize];
            file.extend_from_slice(&first);
            expected.extend_from_slice(&first);
            let tail = first[first.len() / BLOCK * BLOCK..].to_vec();
            let mut log = DirectLog::new(first.len() as u64, tail);
            let mut pending_zero: Option<(u64, usize)> = None;
            for (i, (len, fill_first, fill_done)) in writes.into_iter().enumerate() {
                if fill_first && pending_zero.is_none() {
                    if let Some(w) = log.zero_fill_due(64 << 20) {
                        pending_zero = Some((w.offset, w.bytes.len()));
                    }
                }
                if fill_done {
                    if let Some((offset, len)) = pending_zero.take() {
                        apply(&mut file, &BlockWrite { offset, bytes: &vec![0; len] });
                        log.zero_filled(len as i32);
                    }
                }
                let records: Vec<u8> = (0..len).map(|j| (i + j) as u8 | 1).collect();
                if !log.can_write(records.len()) {
                    // Only a zero fill in the way: it completes first.
                    let (offset, len) = pending_zero.take().expect("a zero fill in the way");
                    apply(&mut file, &BlockWrite { offset, bytes: &vec![0; len] });
                    log.zero_filled(len as i32);
                }
                let write = log.write(&records);
                let (offset, bytes) = (write.offset, write.bytes.to_vec());
                apply(&mut file, &BlockWrite { offset, bytes: &bytes });
                prop_assert_eq!(log.written(bytes.len() as i32), Ok(None));
                expected.extend_from_slice(&records);
            }
            if let Some((offset, len)) = pending_zero.take() {
                apply(&mut file, &BlockWrite { offset, bytes: &vec![0; len] });
                log.zero_filled(len as i32);
            }
            prop_assert_eq!(log.end(), expected.len() as u64);
            prop_assert_eq!(&file[..expected.len()], &expected[..]);
            prop_assert!(file[expected.len()..].iter().all(|&b| b == 0));
        }
    }
}
