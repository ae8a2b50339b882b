//! The log's I/O on the shard's ring: its writes (and the zero fill ahead of them),
//! fsyncs now or delayed, a late write's report, and the log latencies sampled.
//! Apart from `mod.rs` because it is the persistence side of the ring, the same
//! submissions as a connection's but for the log's file.

use super::{
    token, token_group, Shard, OP_WAL_FSYNC, OP_WAL_FSYNC_DELAY, OP_WAL_WRITE, OP_WAL_WRITE_LATE,
    OP_WAL_ZERO_FILL,
};
use io_uring::{opcode, types};
use std::os::fd::RawFd;

impl Shard {
    /// Submit the log's next write, if one is due (one in flight at a time), and
    /// the zero fill ahead of it (direct writes).
    pub(super) fn submit_wal_write(&mut self) {
        let Some(wal) = self.core.wal.as_mut() else {
            return;
        };
        let saving = self.core.background_save.busy();
        let (write, fill) = (wal.next_write(saving), wal.zero_fill_due());
        if let Some(op) = write {
            self.push_wal_write(op);
        }
        if let Some(op) = fill {
            self.push_write(op, OP_WAL_ZERO_FILL);
        }
    }

    fn push_wal_write(&mut self, op: crate::persistence::wal::WriteOp) {
        self.push_write(op, OP_WAL_WRITE);
    }

    fn push_write(&mut self, op: crate::persistence::wal::WriteOp, kind: u64) {
        let write = opcode::Write::new(types::Fd(op.fd), op.ptr, op.len)
            .offset(op.offset)
            .build()
            .user_data(token(kind, 0, 0));
        self.push(write);
    }

    /// The log's write completed: continue a short write; under `always` sync the
    /// group now (submitted with the next wait: no linked entries, which a full
    /// ring could separate); else start the next write.
    pub(super) fn wal_written(&mut self, result: i32) {
        let Some(wal) = self.core.wal.as_mut() else {
            return;
        };
        if let Some(rest) = wal.write_done(result) {
            return self.push_wal_write(rest);
        }
        self.sample_log_latencies();
        self.exit_flush_if_waiting();
        let Some(wal) = self.core.wal.as_mut() else {
            return;
        };
        if let Some((fd, group)) = wal.group_sync_due() {
            match crate::persistence::wal::fsync_delayed(self.core.id) {
                true => self.push_fsync_delay(fd, group),
                false => self.push_fsync(fd, group),
            }
        }
        self.submit_wal_write();
    }

    /// Hand the latencies of the log's completed write or `always` sync to the
    /// latency monitor, under Redis's event names (docs/observability.md): a
    /// write as `aof-write` and as the `aof-write-*` event of what it met, a sync
    /// as `aof-fsync-always`. Each is its completion's time less its
    /// submission's: the ring does the waiting, so this is how long the records
    /// (and, under `always`, the replies held for them) waited for the disk. A
    /// full segment's sync, which the loop does wait for, is Ruvio's own
    /// `log-segment-sync`.
    pub(super) fn sample_log_latencies(&mut self) {
        let Some(wal) = self.core.wal.as_mut() else {
            return;
        };
        let latencies = wal.take_latencies();
        let (timing, now_ms) = (&self.core.timing, self.core.now_ms);
        let observatory = &self.core.shared.observatory;
        if let Some((ns, context)) = latencies.write {
            timing.sample_ns(observatory, context.event(), ns, now_ms);
            timing.sample_ns(observatory, "aof-write", ns, now_ms);
        }
        if let Some(ns) = latencies.fsync_always {
            timing.sample_ns(observatory, "aof-fsync-always", ns, now_ms);
        }
        if let Some(ns) = latencies.segment_sync {
            timing.sample_ns(observatory, "log-segment-sync", ns, now_ms);
        }
    }

    /// SHUTDOWN's flush of the log waited for the direct writes in flight (see
    /// `Wal::flush_must_wait`): run it once the last one completed.
    pub(super) fn exit_flush_if_waiting(&mut self) {
        if self
            .core
            .wal
            .as_mut()
            .is_some_and(|wal| wal.take_exit_flush())
        {
            crate::persistence::shutdown::prepare(&mut self.core, false);
        }
    }

    /// `wal::fsync_delayed` (debug builds): the group's fdatasync starts when a
    /// timeout on the ring completes; the loop goes on meanwhile. The token carries
    /// the descriptor and the group (below 2^32 in a test).
    fn push_fsync_delay(&mut self, fd: RawFd, group: u64) {
        static DELAY: types::Timespec =
            types::Timespec::new().nsec(crate::persistence::wal::SLOW_FSYNC_NS);
        let entry = opcode::Timeout::new(&DELAY).build().user_data(token(
            OP_WAL_FSYNC_DELAY,
            fd as u32,
            group as u32,
        ));
        self.push(entry);
    }

    /// `wal::write_reported_late` (debug builds): the write's `result` comes back
    /// with a timeout's completion, `LATE_WRITE_NS` from now.
    pub(super) fn push_late_write_report(&mut self, result: i32) {
        static DELAY: types::Timespec =
            types::Timespec::new().nsec(crate::persistence::wal::LATE_WRITE_NS);
        let entry = opcode::Timeout::new(&DELAY).build().user_data(token(
            OP_WAL_WRITE_LATE,
            0,
            result as u32,
        ));
        self.push(entry);
    }

    /// Submit an fdatasync of the log; `group` (always) comes back with its completion.
    pub(super) fn push_fsync(&mut self, fd: RawFd, group: u64) {
        let (gen, index) = token_group(group);
        let entry = opcode::Fsync::new(types::Fd(fd))
            .flags(types::FsyncFlags::DATASYNC)
            .build()
            .user_data(token(OP_WAL_FSYNC, gen, index));
        self.push(entry);
    }

    /// everysec: start the log's fsync once a second.
    pub(super) fn sync_wal_if_due(&mut self) {
        let now = self.core.now_ms;
        if let Some(fd) = self.core.wal.as_mut().and_then(|w| w.fsync_due(now)) {
            self.push_fsync(fd, 0);
        }
    }
}
