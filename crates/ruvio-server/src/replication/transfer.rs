//! An RDB being received, as INFO's `master_sync_*` fields show it: counted
//! by the link that receives it (the single stream's, or each shard link's
//! for its shard's part), read by INFO from any thread. Apart from `state`
//! because shard links count one each (`shard_links::LinkBook`) and INFO
//! adds theirs up.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicI64, AtomicU64};

/// INFO's view of an RDB transfer in progress.
#[derive(Clone, Copy, Debug)]
pub struct Transfer {
    pub total_bytes: i64,
    pub read_bytes: i64,
    pub last_io_ms: u64,
}

impl Transfer {
    /// Two links' transfers as one: sizes and bytes summed (a size not known
    /// yet leaves the sum unknown, -1), the later arrival.
    pub fn and(self, other: Transfer) -> Transfer {
        let known = self.total_bytes >= 0 && other.total_bytes >= 0;
        Transfer {
            total_bytes: if known {
                self.total_bytes + other.total_bytes
            } else {
                -1
            },
            read_bytes: self.read_bytes + other.read_bytes,
            last_io_ms: self.last_io_ms.max(other.last_io_ms),
        }
    }
}

/// An RDB being received: its size (-1 before the primary said it, 0 for
/// the diskless form, as Redis's `repl_transfer_size`), the bytes read, and
/// when bytes last arrived.
#[derive(Debug)]
pub struct TransferCount {
    total_bytes: AtomicI64,
    read_bytes: AtomicI64,
    io_ms: AtomicU64,
}

impl Default for TransferCount {
    fn default() -> TransferCount {
        TransferCount {
            total_bytes: AtomicI64::new(-1),
            read_bytes: AtomicI64::new(0),
            io_ms: AtomicU64::new(0),
        }
    }
}

impl TransferCount {
    /// The RDB's size is known (`None`: before its header): nothing read yet.
    pub fn started(&self, total_bytes: Option<i64>, now_ms: u64) {
        self.total_bytes.store(total_bytes.unwrap_or(-1), Relaxed);
        self.read_bytes.store(0, Relaxed);
        self.io_ms.store(now_ms, Relaxed);
    }

    pub fn read(&self, bytes: usize, now_ms: u64) {
        self.read_bytes.fetch_add(bytes as i64, Relaxed);
        self.io_ms.store(now_ms, Relaxed);
    }

    pub fn get(&self) -> Transfer {
        Transfer {
            total_bytes: self.total_bytes.load(Relaxed),
            read_bytes: self.read_bytes.load(Relaxed),
            last_io_ms: self.io_ms.load(Relaxed),
        }
    }
}
