//! Stream entry IDs (`<ms>-<seq>`, two unsigned 64-bit numbers); reading them from
//! arguments is the commands' business (`crate::values::stream::id`).

/// An entry ID: milliseconds, then a sequence number within them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StreamId {
    /// Milliseconds part.
    pub ms: u64,
    /// Sequence part.
    pub seq: u64,
}

impl StreamId {
    /// `0-0`.
    pub const MIN: StreamId = StreamId { ms: 0, seq: 0 };
    /// The greatest ID there is.
    pub const MAX: StreamId = StreamId {
        ms: u64::MAX,
        seq: u64::MAX,
    };

    /// `ms-seq`.
    pub const fn new(ms: u64, seq: u64) -> StreamId {
        StreamId { ms, seq }
    }

    /// The next ID (`streamIncrID`), `None` after [`StreamId::MAX`].
    pub fn next(self) -> Option<StreamId> {
        match (self.ms, self.seq) {
            (u64::MAX, u64::MAX) => None,
            (ms, u64::MAX) => Some(StreamId::new(ms + 1, 0)),
            (ms, seq) => Some(StreamId::new(ms, seq + 1)),
        }
    }

    /// The previous ID (`streamDecrID`), `None` before `0-0`.
    pub fn prev(self) -> Option<StreamId> {
        match (self.ms, self.seq) {
            (0, 0) => None,
            (ms, 0) => Some(StreamId::new(ms - 1, u64::MAX)),
            (ms, seq) => Some(StreamId::new(ms, seq - 1)),
        }
    }

    /// [`format`](Self::format) without an allocation (replies of many entries).
    pub fn format_inline(self) -> smallvec::SmallVec<[u8; 41]> {
        let mut out = smallvec::SmallVec::new();
        out.extend_from_slice(itoa::Buffer::new().format(self.ms).as_bytes());
        out.push(b'-');
        out.extend_from_slice(itoa::Buffer::new().format(self.seq).as_bytes());
        out
    }

    /// The ID as a reply writes it.
    pub fn format(self) -> Vec<u8> {
        self.format_inline().to_vec()
    }
}
