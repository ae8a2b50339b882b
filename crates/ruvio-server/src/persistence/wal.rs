//! A shard's write-ahead log: what its writes append, when the bytes go to disk,
//! and how the keyspace is rebuilt from it at start (docs/durability.md).
//!
//! - **Appending** costs a memcpy: `exec::run_engine` hands every write's log
//!   records (the engine's `Effects::visit_log_records`) to [`Wal::append`], which
//!   frames them into the `filling` buffer.
//! - **Writing** is one io_uring write per loop iteration at most: when no write is
//!   in flight and `filling` holds records, the shard submits them at the
//!   segment's offset on its own ring (the loop never waits for the disk). Records
//!   appended meanwhile form the next write: group commit falls out of the double
//!   buffer. The segment is written with direct I/O where the file system allows
//!   it (`ruvio_wal::direct`: whole blocks from an aligned copy, the space ahead
//!   zero-filled in advance; `filling` is then refilled in place), buffered
//!   otherwise (`filling` and `writing` swap).
//! - **everysec**: an fdatasync once a second (from the tick), never two at once.
//! - **Latency**: each write's and each `always` sync's time from submission to
//!   completion is kept ([`Wal::take_latencies`]) for the shard to sample under
//!   Redis's `aof-write*` and `aof-fsync-always` events: the loop never waits for
//!   the disk, but the records and the replies held for them do, and that wait is
//!   what an operator needs to see.
//! - **Back-pressure**: when the disk is slower than the writes and `filling` passes
//!   [`FILLING_BYTES_MAX`], the shard takes no new client input until it drains.
//! - **Disk errors** (a failed or short write, a failed fsync) stop the log: writes
//!   get Redis' `-MISCONF Errors writing to the AOF file: ...`, reads go on, INFO
//!   persistence says `aof_last_write_status:err`. Under `always` the process exits
//!   instead, as Redis does: the replies waiting for the failed group can be neither
//!   sent nor taken back.
//! - **Recovery** ([`recover`]) replays each segment in order through the engine's
//!   own handlers before the shard takes clients; a torn tail is cut at the last
//!   good record (with a log line), damage in the middle refuses the start unless
//!   `--wal-truncate-corrupt`. It and the snapshot files' names are
//!   `recovery.rs`, re-exported here, so callers name `persistence::wal::...` as
//!   before.

use crate::config::{Config, Durability};
use ruvio_wal::direct::{BlockWrite, DirectLog, WriteFailed, BLOCK, KEEP_CAPACITY_MAX};
use ruvio_wal::segment::{segment_name, shard_dir, SEGMENT_BYTES_MAX};
use ruvio_wal::{append_command, Group};
use std::fs::{File, OpenOptions};
use std::os::fd::{AsRawFd, RawFd};
use std::path::{Path, PathBuf};

pub(crate) use super::recovery::{has_snapshot, make_current, snapshot_name};
pub use super::recovery::{recover, recover_marked, HandlerOf, RecoveredEnd};

/// Records waiting for the disk beyond this stop the shard from reading new
/// requests (the log's memory stays bounded when the disk is slower than writes).
pub const FILLING_BYTES_MAX: usize = 64 << 20;

/// How often `everysec` syncs the log.
const FSYNC_EVERY_MS: u64 = 1000;

/// `always`: group syncs that may be in flight at once. With more than one, the
/// next group is written and synced while earlier syncs run. On this machine's
/// disk the syncs serialize anyway and smaller groups mean more of them: a quick
/// A/B of 1, 2 and 4 (SET, 50 and 200 clients, pipeline 16; docs/durability.md)
/// found 1 as fast or faster everywhere but at 50 clients unpipelined, so one it is.
const GROUP_SYNCS_MAX: u32 = 1;

/// One shard's log.
pub struct Wal {
    mode: Durability,
    dir: PathBuf,
    file: File,
    segment: u64,
    /// Bytes of the current segment written or being written.
    offset: u64,
    /// Records appended since the last write was submitted.
    filling: Vec<u8>,
    /// The bytes of the buffered write in flight (untouched until it completes).
    /// Direct writes go from `DirectLog`'s aligned copy instead, and `filling` is
    /// refilled in place.
    writing: Vec<u8>,
    /// Bytes of `writing` the kernel has taken so far.
    written: usize,
    write_in_flight: bool,
    /// Fsyncs submitted and not completed (everysec: at most one).
    fsyncs_in_flight: u32,
    /// Bytes were written since the last fsync started.
    unsynced: bool,
    next_fsync_ms: u64,
    /// The first disk error; the log takes no more writes once set.
    error: Option<String>,
    /// Writes completed (the fault point counts them).
    writes_done: u64,
    /// The group records appended now belong to (always: released together).
    open_group: u64,
    /// The group of the write in flight.
    writing_group: u64,
    /// Every group up to this one is on disk.
    durable_group: u64,
    /// Records that replay together (a command's, a transaction's, a script's):
    /// open while `atomic_depth` > 0.
    atomic: Option<Group>,
    atomic_depth: u32,
    /// The segment written with direct I/O (`None`: buffered writes, where the
    /// file system refuses `O_DIRECT`, as tmpfs does).
    direct: Option<Direct>,
    /// SHUTDOWN's flush waits for the write in flight ([`Wal::flush_must_wait`]).
    exit_flush_waits: bool,
    /// What the metrics endpoint reports of the log ([`LogStats`]), and when the
    /// fsync in flight started (one at a time: see [`GROUP_SYNCS_MAX`]).
    stats: LogStats,
    fsync_started: Option<std::time::Instant>,
    /// Record bytes whose write completed, and how many of those the fsync in
    /// flight covers and the last completed one covered (WAITAOF's local count).
    completed_bytes: u64,
    fsync_covers: u64,
    synced_bytes: u64,
    /// When the write in flight was submitted, and the latency monitor's event
    /// for the state it met ([`WriteContext`]).
    write_started: Option<(std::time::Instant, WriteContext)>,
    /// Completed operations' latencies the shard has not sampled yet
    /// ([`Wal::take_latencies`]).
    latencies: Latencies,
}

/// What a log write met when it was submitted: Redis 7.0's three `aof-write-*`
/// latency events, which tell the usual causes of a slow write apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteContext {
    /// An fsync of the log was in flight (`aof-write-pending-fsync`).
    PendingFsync,
    /// A background save was writing its snapshot (`aof-write-active-child`: a
    /// Redis child writing an RDB or rewriting the AOF).
    ActiveSave,
    /// Neither (`aof-write-alone`).
    Alone,
}

impl WriteContext {
    /// Redis's name for the latency event.
    pub fn event(self) -> &'static str {
        match self {
            WriteContext::PendingFsync => "aof-write-pending-fsync",
            WriteContext::ActiveSave => "aof-write-active-child",
            WriteContext::Alone => "aof-write-alone",
        }
    }
}

/// The log operations that completed since the shard last looked, with their
/// time from submission to completion in ns (at most one of each: one write and
/// one `always` sync are in flight at a time, and the shard looks after each
/// completion).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Latencies {
    /// A write (with the rest of a short write), and what it met.
    pub write: Option<(u64, WriteContext)>,
    /// An `always` group's fdatasync (Redis's `aof-fsync-always`; the
    /// `everysec` sync runs beside the loop as Redis's background fsync does,
    /// and has no event of its own there either).
    pub fsync_always: Option<u64>,
    /// The fdatasync of a full segment before the next one opens, which the
    /// loop waits for (Ruvio's own `log-segment-sync`: Redis has no such step).
    pub segment_sync: Option<u64>,
}

/// A log's running totals, counted per write and per fsync (never per record).
#[derive(Debug, Default, Clone, Copy)]
pub struct LogStats {
    /// Record bytes handed to the disk.
    pub written_bytes: u64,
    /// Fsyncs completed, and their total time from submission to completion.
    pub fsyncs: u64,
    pub fsync_us: u64,
}

/// The current segment opened for direct writes, and its block arithmetic.
struct Direct {
    file: File,
    log: DirectLog,
}

impl Direct {
    /// Segment `number` of `dir` for direct writes after its first `end` bytes
    /// (nothing after them), or `None` where the file system refuses `O_DIRECT`.
    fn open(dir: &Path, number: u64, end: u64) -> std::io::Result<Option<Direct>> {
        use std::os::unix::fs::{FileExt, OpenOptionsExt};
        let path = dir.join(segment_name(number));
        let file = match OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_DIRECT)
            .open(&path)
        {
            Ok(file) => file,
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => return Ok(None),
            Err(e) => return Err(e),
        };
        // The partial last block, read through a buffered descriptor (a direct
        // read would want an aligned buffer).
        let mut tail = vec![0; (end % BLOCK as u64) as usize];
        let tail_at = end - tail.len() as u64;
        File::open(&path)?.read_exact_at(&mut tail, tail_at)?;
        Ok(Some(Direct {
            file,
            log: DirectLog::new(end, tail),
        }))
    }
}

impl WriteOp {
    /// A direct write of `write` to `fd`.
    fn direct(fd: RawFd, write: BlockWrite<'_>) -> WriteOp {
        WriteOp {
            fd,
            ptr: write.bytes.as_ptr(),
            len: write.bytes.len().min(u32::MAX as usize) as u32,
            offset: write.offset,
        }
    }
}

/// A write the shard submits: `len` bytes at `ptr` to `fd` at `offset`.
pub struct WriteOp {
    pub fd: RawFd,
    pub ptr: *const u8,
    pub len: u32,
    pub offset: u64,
}

impl Wal {
    /// Open shard `shard`'s log for appending after recovery: the last segment,
    /// cut to `valid_bytes`, or a first segment.
    pub fn open(cfg: &Config, shard: usize, end: RecoveredEnd) -> std::io::Result<Wal> {
        let dir = shard_dir(&cfg.dir, shard);
        std::fs::create_dir_all(&dir)?;
        let (segment, offset) = match end {
            RecoveredEnd::Segment {
                number,
                valid_bytes,
            } => (number, valid_bytes),
            RecoveredEnd::Empty => (1, 0),
        };
        let file = open_segment(&dir, segment)?;
        file.set_len(offset)?;
        let direct = Direct::open(&dir, segment, offset)?;
        Ok(Wal {
            mode: cfg.durability,
            dir,
            file,
            segment,
            offset,
            filling: Vec::new(),
            writing: Vec::new(),
            written: 0,
            write_in_flight: false,
            fsyncs_in_flight: 0,
            unsynced: false,
            next_fsync_ms: 0,
            error: None,
            writes_done: 0,
            open_group: 1,
            writing_group: 0,
            durable_group: 0,
            atomic: None,
            atomic_depth: 0,
            direct,
            exit_flush_waits: false,
            stats: LogStats::default(),
            fsync_started: None,
            completed_bytes: 0,
            fsync_covers: 0,
            synced_bytes: 0,
            write_started: None,
            latencies: Latencies::default(),
        })
    }

    /// Log one record: `args` ran in database `db`.
    pub fn append(&mut self, db: usize, args: &mut dyn Iterator<Item = &[u8]>) {
        if self.error.is_some() {
            return;
        }
        match &mut self.atomic {
            Some(group) => group.append(&mut self.filling, db, args),
            None => append_command(&mut self.filling, db, args),
        }
    }

    /// The records appended until the matching [`end_atomic`](Self::end_atomic)
    /// replay whole or not at all (one frame, one checksum). Nests: the outermost
    /// pair makes the frame (a script inside EXEC is part of the transaction's).
    pub fn begin_atomic(&mut self) {
        if self.atomic_depth == 0 {
            self.atomic = Some(Group::begin(&mut self.filling));
        }
        self.atomic_depth += 1;
    }

    /// Close what [`begin_atomic`](Self::begin_atomic) opened.
    pub fn end_atomic(&mut self) {
        self.atomic_depth = self.atomic_depth.saturating_sub(1);
        if self.atomic_depth == 0 {
            if let Some(group) = self.atomic.take() {
                group.end(&mut self.filling);
            }
        }
    }

    /// `always`: replies of logged writes wait for their group.
    pub fn gates_replies(&self) -> bool {
        self.mode == Durability::Always
    }

    /// The group records appended now belong to.
    pub fn open_group(&self) -> u64 {
        self.open_group
    }

    /// Every group up to this one is on disk.
    pub fn durable_group(&self) -> u64 {
        self.durable_group
    }

    /// Bytes appended so far and not yet submitted (a write logged something when
    /// this grew).
    pub fn filling_bytes(&self) -> usize {
        self.filling.len()
    }

    /// Where the next record will be in the log: `(segment, offset)`, counting the
    /// bytes still in flight or waiting. A snapshot taken now covers everything
    /// before it.
    pub fn log_end(&self) -> (u64, u64) {
        let in_flight = self.records_in_flight().len();
        (
            self.segment,
            self.offset + (in_flight + self.filling.len()) as u64,
        )
    }

    /// Record bytes appended since the log opened (WAITAOF's target).
    pub fn appended_bytes(&self) -> u64 {
        self.stats.written_bytes + self.filling.len() as u64
    }

    /// Record bytes an fsync has covered since the log opened.
    pub fn synced_bytes(&self) -> u64 {
        self.synced_bytes
    }

    /// The directory of this shard's log and snapshots.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Write and sync every record appended so far, blocking (the process is about
    /// to exit: SHUTDOWN). A buffered write in flight is written again at its
    /// offset (the same bytes), the waiting records after it; nothing here changes
    /// the state, so if the exit is called off the ring's writes complete as usual.
    /// A direct write in flight must complete first
    /// ([`flush_must_wait`](Self::flush_must_wait)): then only the waiting records
    /// are written, buffered, after the log's end.
    pub fn flush_blocking(&self) -> Result<(), String> {
        if let Some(e) = &self.error {
            return Err(e.clone());
        }
        let in_flight = self.records_in_flight();
        let write = || -> std::io::Result<()> {
            use std::os::unix::fs::FileExt;
            self.file.write_all_at(in_flight, self.offset)?;
            let after = self.offset + in_flight.len() as u64;
            self.file.write_all_at(&self.filling, after)?;
            self.file.sync_data()
        };
        write().map_err(|e| format!("{}: {e}", self.dir.display()))
    }

    /// The records of the write in flight the kernel has not taken yet.
    fn records_in_flight(&self) -> &[u8] {
        match &self.direct {
            _ if !self.write_in_flight => &[],
            Some(direct) => direct.log.records_in_flight(),
            None => &self.writing[self.written..],
        }
    }

    /// [`flush_blocking`](Self::flush_blocking) must wait for the direct writes in
    /// flight: the records' write rewrites whole blocks, and a zero fill ahead may
    /// cover the space after the log's end; landing after the flush, either could
    /// zero records the flush wrote there.
    pub fn flush_must_wait(&self) -> bool {
        self.direct.is_some() && (self.write_in_flight || self.zero_filling())
    }

    /// A zero fill ahead of the log's end is in flight.
    fn zero_filling(&self) -> bool {
        self.direct.as_ref().is_some_and(|d| d.log.zero_filling())
    }

    /// SHUTDOWN's flush runs once the write in flight completes.
    pub fn defer_exit_flush(&mut self) {
        self.exit_flush_waits = true;
    }

    /// A direct write completed: whether SHUTDOWN's flush waited for it and
    /// nothing is in flight now.
    pub fn take_exit_flush(&mut self) -> bool {
        !self.flush_must_wait() && std::mem::take(&mut self.exit_flush_waits)
    }

    /// The log's running totals (the metrics endpoint's `ruvio_log_*`).
    pub fn stats(&self) -> LogStats {
        self.stats
    }

    /// The latencies of the operations completed since the last call, for the
    /// latency monitor.
    pub fn take_latencies(&mut self) -> Latencies {
        std::mem::take(&mut self.latencies)
    }

    /// The first disk error, when writes must be refused.
    pub fn failed(&self) -> Option<&str> {
        self.error.as_deref()
    }

    /// Too many records wait for the disk: take no new requests.
    pub fn backed_up(&self) -> bool {
        self.filling.len() > FILLING_BYTES_MAX
    }

    /// The next write to submit, if none is in flight and records wait.
    /// Under `always` each write is followed by an fdatasync of its group; the
    /// next group's write may start while up to [`GROUP_SYNCS_MAX`] syncs run
    /// (a sync covers every write completed before it, so groups become durable
    /// in order whichever sync ends first). A full segment waits for its syncs
    /// to end, then rotates.
    ///
    /// `saving`: a background save is under way (what the write's latency
    /// event names, [`WriteContext`]).
    pub fn next_write(&mut self, saving: bool) -> Option<WriteOp> {
        let syncs_full = self.gates_replies()
            && (self.fsyncs_in_flight >= GROUP_SYNCS_MAX || self.offset >= SEGMENT_BYTES_MAX);
        let blocked = |d: &Direct| !d.log.can_write(self.filling.len());
        let busy = self.write_in_flight || syncs_full || self.direct.as_ref().is_some_and(blocked);
        // An open group is not written half (it closes within the command that opened it).
        if busy || self.filling.is_empty() || self.error.is_some() || self.atomic.is_some() {
            return None;
        }
        injected_slow_disk();
        let context = match () {
            _ if self.fsyncs_in_flight > 0 => WriteContext::PendingFsync,
            _ if saving => WriteContext::ActiveSave,
            _ => WriteContext::Alone,
        };
        self.write_started = Some((std::time::Instant::now(), context));
        self.stats.written_bytes += self.filling.len() as u64;
        self.write_in_flight = true;
        self.writing_group = self.open_group;
        self.open_group += 1;
        if let Some(direct) = self.direct.as_mut() {
            // The aligned copy is what goes to disk: `filling` is emptied and
            // refilled in place, one records buffer instead of the buffered
            // path's two (no speed change measured: docs/durability.md).
            let fd = direct.file.as_raw_fd();
            let op = WriteOp::direct(fd, direct.log.write(&self.filling));
            if self.filling.capacity() > KEEP_CAPACITY_MAX {
                self.filling = Vec::new();
            }
            self.filling.clear();
            return Some(op);
        }
        std::mem::swap(&mut self.filling, &mut self.writing);
        self.filling.clear();
        self.written = 0;
        Some(self.pending_op())
    }

    fn pending_op(&self) -> WriteOp {
        let rest = &self.writing[self.written..];
        WriteOp {
            fd: self.file.as_raw_fd(),
            ptr: rest.as_ptr(),
            len: rest.len().min(u32::MAX as usize) as u32,
            offset: self.offset,
        }
    }

    /// The write in flight completed with `result`; returns the rest to submit
    /// after a short write.
    pub fn write_done(&mut self, result: i32) -> Option<WriteOp> {
        let result = self.injected_fault(result);
        if let Some(direct) = self.direct.as_mut() {
            let fd = direct.file.as_raw_fd();
            match direct.log.written(result) {
                Ok(Some(rest)) => return Some(WriteOp::direct(fd, rest)),
                Ok(None) => self.offset = direct.log.end(),
                Err(failed) => {
                    self.write_in_flight = false;
                    let errno = match failed {
                        WriteFailed::Error(result) => result,
                        WriteFailed::Unaligned => 0,
                    };
                    self.fail("write", errno);
                    return None;
                }
            }
        } else {
            if result <= 0 {
                self.write_in_flight = false;
                self.fail("write", result);
                return None;
            }
            self.written += result as usize;
            self.offset += result as u64;
            if self.written < self.writing.len() {
                return Some(self.pending_op());
            }
        }
        self.unsynced = true;
        self.write_in_flight = false;
        self.completed_bytes = self.stats.written_bytes;
        if let Some((started, context)) = self.write_started.take() {
            self.latencies.write = Some((started.elapsed().as_nanos() as u64, context));
        }
        // `writing` becomes the next `filling`: one large record must not keep its size.
        if self.writing.capacity() > KEEP_CAPACITY_MAX {
            self.writing = Vec::new();
        }
        if !self.gates_replies() {
            self.rotate_if_drained();
        }
        None
    }

    /// The next zero fill ahead of the log's end (direct writes), if one is due.
    pub fn zero_fill_due(&mut self) -> Option<WriteOp> {
        if self.error.is_some() || self.exit_flush_waits {
            return None;
        }
        let direct = self.direct.as_mut()?;
        let fd = direct.file.as_raw_fd();
        let fill = direct.log.zero_fill_due(SEGMENT_BYTES_MAX)?;
        Some(WriteOp::direct(fd, fill))
    }

    /// The zero fill in flight completed with `result` (a failed one only means
    /// the records' writes allocate that space themselves).
    pub fn zero_fill_done(&mut self, result: i32) {
        if let Some(direct) = self.direct.as_mut() {
            direct.log.zero_filled(result);
        }
        self.rotate_if_drained();
    }

    /// A full segment with nothing in flight on it (no write, sync or zero fill)
    /// makes way for the next one.
    fn rotate_if_drained(&mut self) {
        let drained = self.fsyncs_in_flight == 0 && !self.write_in_flight && !self.zero_filling();
        if drained && self.offset >= SEGMENT_BYTES_MAX {
            self.rotate();
        }
    }

    /// `RUVIO_FAULT=wal:enospc` (debug builds): every write after the first one
    /// fails as a full disk would, to test what writers and readers see.
    fn injected_fault(&mut self, result: i32) -> i32 {
        self.writes_done += 1;
        let full = ruvio_engine::fault::is_armed(b"wal", "enospc") && self.writes_done > 1;
        if full {
            -libc::ENOSPC
        } else {
            result
        }
    }

    /// An fsync to start now (`everysec`: once a second, one at a time).
    pub fn fsync_due(&mut self, now_ms: u64) -> Option<RawFd> {
        let due = self.mode == Durability::Everysec && now_ms >= self.next_fsync_ms;
        if !due || !self.unsynced || self.fsyncs_in_flight > 0 || self.error.is_some() {
            return None;
        }
        self.next_fsync_ms = now_ms + FSYNC_EVERY_MS;
        self.unsynced = false;
        self.fsync_covers = self.completed_bytes;
        self.fsyncs_in_flight += 1;
        self.fsync_started = Some(std::time::Instant::now());
        Some(self.file.as_raw_fd())
    }

    /// `always`: the group just written goes to disk now (one fdatasync per
    /// group): its descriptor and the group, which [`fsync_done`](Self::fsync_done)
    /// gets back.
    pub fn group_sync_due(&mut self) -> Option<(RawFd, u64)> {
        if !self.gates_replies() || self.error.is_some() || self.write_in_flight {
            return None;
        }
        self.fsyncs_in_flight += 1;
        self.fsync_covers = self.completed_bytes;
        self.fsync_started = Some(std::time::Instant::now());
        Some((self.file.as_raw_fd(), self.writing_group))
    }

    /// An fsync completed with `result`; under `always` the group it was started
    /// for (and every one before: their writes had completed) is now durable.
    pub fn fsync_done(&mut self, result: i32, group: u64) {
        self.fsyncs_in_flight -= 1;
        if result < 0 {
            self.fail("fsync", result);
            return;
        }
        self.synced_bytes = self.synced_bytes.max(self.fsync_covers);
        if let Some(started) = self.fsync_started.take() {
            let ns = started.elapsed().as_nanos() as u64;
            self.stats.fsyncs += 1;
            self.stats.fsync_us += ns / 1000;
            if self.mode == Durability::Always {
                self.latencies.fsync_always = Some(ns);
            }
        }
        if self.gates_replies() {
            self.durable_group = self.durable_group.max(group);
            self.rotate_if_drained();
        }
    }

    /// Start the next segment: the current one is synced first (its last bytes must
    /// not be lost when only the new file is synced later).
    fn rotate(&mut self) {
        let started = std::time::Instant::now();
        if let Err(e) = self.file.sync_data() {
            self.error = Some(strerror(e.raw_os_error().unwrap_or(libc::EIO)));
            return;
        }
        self.latencies.segment_sync = Some(started.elapsed().as_nanos() as u64);
        let next = self.segment + 1;
        let opened = open_segment(&self.dir, next)
            .and_then(|file| Ok((Direct::open(&self.dir, next, 0)?, file)));
        match opened {
            Ok((direct, file)) => {
                self.file = file;
                self.direct = direct;
                self.segment = next;
                self.offset = 0;
            }
            Err(e) => self.error = Some(strerror(e.raw_os_error().unwrap_or(libc::EIO))),
        }
    }

    fn fail(&mut self, what: &str, result: i32) {
        let error = if result == 0 {
            "short write".to_string()
        } else {
            strerror(-result)
        };
        if self.gates_replies() {
            // Replies of the writes in this group are queued behind it and can
            // never be released as written: as Redis under appendfsync always,
            // stop rather than acknowledge or drop them.
            eprintln!(
                "ruvio: log {what} failed in {}: {error}; cannot recover from a log write error under durability always, exiting",
                self.dir.display()
            );
            std::process::exit(crate::EXIT_SHARD_FAILED);
        }
        eprintln!(
            "ruvio: log {what} failed in {}: {error}; writes are refused from now on",
            self.dir.display()
        );
        self.error.get_or_insert(error);
    }
}

/// `RUVIO_FAULT=wal:slow-write` (debug builds): each log write waits 200 ms
/// before it is submitted, the records still only in memory, as behind a slow
/// disk; the shard's loop stalls meanwhile. Tests use it to see that no reply
/// waiting for those records goes out before them (release builds: nothing).
fn injected_slow_disk() {
    if ruvio_engine::fault::is_armed(b"wal", "slow-write") {
        std::thread::sleep(std::time::Duration::from_millis(SLOW_WRITE_MS));
    }
}

/// How long `wal:slow-write` holds each write.
const SLOW_WRITE_MS: u64 = 200;

/// `RUVIO_FAULT=wal:slow-fsync-<shard>` (debug builds): under `always`, shard
/// `<shard>` starts each group's fdatasync [`SLOW_FSYNC_NS`] after its write,
/// while its loop goes on, as a disk slow to flush would; tests see which replies
/// wait for that shard's groups (release builds: never).
pub fn fsync_delayed(shard: usize) -> bool {
    cfg!(debug_assertions) && ruvio_engine::fault::is_armed(b"wal", &format!("slow-fsync-{shard}"))
}

/// How late `wal:slow-fsync-<shard>` starts each fdatasync.
pub const SLOW_FSYNC_NS: u32 = 200_000_000;

/// `RUVIO_FAULT=wal:late-write-<shard>` (debug builds): shard `<shard>` learns
/// of each completed log write [`LATE_WRITE_NS`] late (a timeout holds the
/// completion) while its loop goes on, so the write stays in flight as behind a
/// slow disk; tests reach what waits for a write in flight (SHUTDOWN's flush).
pub fn write_reported_late(shard: usize) -> bool {
    cfg!(debug_assertions) && ruvio_engine::fault::is_armed(b"wal", &format!("late-write-{shard}"))
}

/// How late `wal:late-write-<shard>` reports each write.
pub const LATE_WRITE_NS: u32 = 200_000_000;

/// The C library's text for `errno` (Redis prints `strerror`), without Rust's
/// ` (os error N)` suffix.
fn strerror(errno: i32) -> String {
    let text = std::io::Error::from_raw_os_error(errno).to_string();
    match text.find(" (os error") {
        Some(cut) => text[..cut].to_string(),
        None => text,
    }
}

fn open_segment(dir: &Path, number: u64) -> std::io::Result<File> {
    OpenOptions::new()
        .create(true)
        .read(true)
        .write(true)
        .truncate(false)
        .open(dir.join(segment_name(number)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Cli, Config, Durability};
    use ruvio_wal::read_log;

    fn config(dir: &Path) -> Config {
        Config::load(Cli {
            durability: Some(Durability::Everysec),
            dir: Some(dir.to_path_buf()),
            shards: Some(1),
            cpus: Some("0".into()),
            ..Cli::default()
        })
        .expect("a configuration")
    }

    fn records_in(dir: &Path) -> Vec<Vec<Vec<u8>>> {
        let bytes = std::fs::read(shard_dir(dir, 0).join(segment_name(1))).unwrap();
        let mut out = Vec::new();
        read_log(&bytes, |r| {
            out.push(r.args.iter().map(|a| a.to_vec()).collect())
        });
        out
    }

    /// SHUTDOWN's flush: records never submitted to the ring, and the rest of a
    /// write in flight, are on disk afterwards.
    #[test]
    fn flush_blocking_writes_what_waits_and_what_is_in_flight() {
        let dir = std::env::temp_dir().join(format!("ruvio-wal-flush-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let mut wal = Wal::open(&config(&dir), 0, RecoveredEnd::Empty).unwrap();
        let set = |key: &'static [u8]| [&b"SET"[..], key, b"v"];
        wal.append(0, &mut set(b"a").into_iter());
        // The ring took this write but has not done it: its bytes are in flight.
        let in_flight = wal.next_write(false).expect("a write");
        assert!(in_flight.len > 0);
        wal.append(0, &mut set(b"b").into_iter());
        assert!(records_in(&dir).is_empty());
        wal.flush_blocking().unwrap();
        let keys: Vec<Vec<u8>> = records_in(&dir).into_iter().map(|r| r[1].clone()).collect();
        assert_eq!(keys, [b"a".to_vec(), b"b".to_vec()]);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A snapshot taken while a write is in flight covers its records: the log's
    /// end counts them until the write completes, and then the segment's end does.
    #[test]
    fn the_log_end_counts_the_write_in_flight() {
        let dir = std::env::temp_dir().join(format!("ruvio-wal-end-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let mut wal = Wal::open(&config(&dir), 0, RecoveredEnd::Empty).unwrap();
        wal.append(0, &mut [&b"SET"[..], b"a", b"v"].into_iter());
        let appended = wal.log_end();
        let op = wal.next_write(false).expect("a write");
        assert_eq!(wal.log_end(), appended);
        wal.append(0, &mut [&b"SET"[..], b"b", b"v"].into_iter());
        let both = wal.log_end();
        assert!(both.1 > appended.1);
        assert!(wal.write_done(op.len as i32).is_none());
        assert_eq!(wal.log_end(), both);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// What the latency monitor samples: each write's time with what it met
    /// (a save under way, an fsync in flight), once; a full segment's sync.
    #[test]
    fn completed_operations_leave_their_latencies() {
        let dir = std::env::temp_dir().join(format!("ruvio-wal-lat-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let mut wal = Wal::open(&config(&dir), 0, RecoveredEnd::Empty).unwrap();
        let write = |wal: &mut Wal, saving: bool| {
            wal.append(0, &mut [&b"SET"[..], b"a", b"v"].into_iter());
            let op = wal.next_write(saving).expect("a write");
            assert!(wal.write_done(op.len as i32).is_none());
            wal.take_latencies()
        };
        let met = |l: Latencies| l.write.map(|(_, context)| context);
        assert_eq!(met(write(&mut wal, true)), Some(WriteContext::ActiveSave));
        assert_eq!(wal.take_latencies(), Latencies::default());
        assert!(wal.fsync_due(0).is_some());
        assert_eq!(met(write(&mut wal, true)), Some(WriteContext::PendingFsync));
        wal.fsync_done(0, 0);
        // everysec's sync has no event (Redis's runs in the background too).
        assert_eq!(wal.take_latencies(), Latencies::default());
        assert_eq!(met(write(&mut wal, false)), Some(WriteContext::Alone));
        wal.offset = SEGMENT_BYTES_MAX;
        wal.rotate_if_drained();
        assert_eq!(wal.segment, 2);
        assert!(wal.take_latencies().segment_sync.is_some());
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A save the process did not finish leaves a `.tmp`: the next start deletes
    /// it and loads the last sealed snapshot.
    #[test]
    fn an_unfinished_snapshot_is_deleted_at_start() {
        let dir = std::env::temp_dir().join(format!("ruvio-wal-tmp-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let shard = shard_dir(&dir, 0);
        std::fs::create_dir_all(&shard).unwrap();
        let unfinished = shard.join(format!("{}.tmp", snapshot_name(1, 40)));
        std::fs::write(&unfinished, b"REDIS0010").unwrap();
        let cfg = config(&dir);
        let mut engine = crate::persistence::loading::empty_engine(&cfg);
        let handler_of = crate::cmd::registry::logged_handler;
        recover(&mut engine, &cfg, 0, 0, handler_of).unwrap();
        assert!(!unfinished.exists());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
