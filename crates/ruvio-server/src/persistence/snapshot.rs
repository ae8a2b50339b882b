//! BGSAVE and BGREWRITEAOF without fork: every shard writes a snapshot of its
//! keyspace in time slices while it keeps serving (docs/durability.md).
//!
//! - **Consistency**: the engine's [`Snapshot`] gives the keyspace as it was at the
//!   start, whatever the commands that run between slices do (copy-on-write of
//!   entries, see `ruvio_engine::snapshot`). The file is tagged with the log
//!   position at the start, so recovery loads it and replays the log after it, as
//!   for SAVE's snapshots (`snapshot::save`).
//! - **Slices**: once per loop iteration the shard writes keys for at most
//!   [`SLICE`] (plus one batch of [`KEYS_PER_STEP`]) into a buffer; while a
//!   snapshot runs the loop does not sleep waiting for clients. Full buffers of
//!   [`WRITE_BYTES`] go to a writer thread of the save, which writes them to a
//!   temporary file (the checksum follows them; writeback is started every
//!   [`WRITEBACK_BYTES`] so dirty pages never pile up). The shard never waits for
//!   the disk: when [`CHUNKS_QUEUED_MAX`] buffers wait for the writer, the slice
//!   writes no key (the save takes longer; its memory stays bounded).
//! - **Sealing**: the writer thread then seals the file (version digits if a key
//!   needed a newer RDB version, checksum, `fsync`, rename, directory `fsync`) and
//!   deletes the older snapshot and the log segments it covers; the shard polls
//!   for the outcome on its loop.
//! - **Keys on loan**: keys of the shard lent to another shard when the snapshot
//!   begins (a command on borrowed keys, `lending`) are out of the keyspace, so
//!   not in the snapshot; their state is logged when they come home, changed or
//!   not, so the log after the snapshot's position restores them.
//! - **The Redis view**: BGSAVE / BGREWRITEAOF (the log is rewritten by taking a
//!   snapshot: its older segments go), their `SCHEDULE`d forms, INFO persistence's
//!   `rdb_bgsave_in_progress`, `rdb_last_bgsave_status`, `rdb_*_bgsave_time_sec`,
//!   `aof_rewrite_*`. The whole server saves (every shard, both port modes); LASTSAVE
//!   moves once every shard is done.
//!
//! What a save needs of the shard it runs on (its keyspace, its log's position,
//! its change counts, LASTSAVE, lent keys, the broadcast to the other shards) is
//! [`Saving`], implemented by the shard (`shard/save.rs`): this subsystem names
//! nothing above it.

use crate::observability::{Observatory, Timing};
use crate::persistence::wal::Wal;
use ruvio_engine::rdb::file::{
    header, header_with_aux, version_digits, Checksum, END_OF_KEYS, VERSION_AT,
};
use ruvio_engine::rdb::RDB_VERSION;
use ruvio_engine::snapshot::Snapshot;
use ruvio_engine::Engine;
use std::fmt::Display;
use std::fs::File;
use std::io::{Read, Write};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering::AcqRel, Ordering::Relaxed};
use std::sync::mpsc::{self, Receiver, SyncSender, TryRecvError, TrySendError};
use std::time::{Duration, Instant};

/// Time a loop iteration spends writing keys (p99 of the other clients' commands
/// grows by about this much).
const SLICE: Duration = Duration::from_micros(250);
/// Keys written between two looks at the clock.
const KEYS_PER_STEP: usize = 256;
/// Bytes gathered before a `write` to the file.
const WRITE_BYTES: usize = 1 << 20;
/// Chunks of [`WRITE_BYTES`] waiting for the writer thread at most (the memory a
/// save may hold when the disk is slower than the scan).
const CHUNKS_QUEUED_MAX: usize = 16;
/// Bytes written between two writeback starts.
const WRITEBACK_BYTES: u64 = 16 << 20;

/// What a background snapshot was asked as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// BGSAVE.
    Rdb,
    /// BGREWRITEAOF: the log is rewritten as a snapshot plus what follows it.
    Aof,
}

/// The server's background saves, for every shard (in `Shared`).
#[derive(Debug)]
pub struct SaveState {
    /// Shards whose snapshot of the current save is not done yet.
    running: AtomicU64,
    /// The current (or last) save was asked as BGREWRITEAOF.
    aof: AtomicBool,
    started_ms: AtomicU64,
    /// A shard of the current save failed.
    failing: AtomicBool,
    last_rdb_ok: AtomicBool,
    last_aof_ok: AtomicBool,
    last_rdb_secs: AtomicI64,
    last_aof_secs: AtomicI64,
    scheduled_rdb: AtomicBool,
    scheduled_aof: AtomicBool,
}

impl Default for SaveState {
    fn default() -> Self {
        SaveState {
            running: AtomicU64::new(0),
            aof: AtomicBool::new(false),
            started_ms: AtomicU64::new(0),
            failing: AtomicBool::new(false),
            last_rdb_ok: AtomicBool::new(true),
            last_aof_ok: AtomicBool::new(true),
            last_rdb_secs: AtomicI64::new(-1),
            last_aof_secs: AtomicI64::new(-1),
            scheduled_rdb: AtomicBool::new(false),
            scheduled_aof: AtomicBool::new(false),
        }
    }
}

/// What asking for a background save did.
#[derive(Debug, PartialEq, Eq)]
pub enum Start {
    Started,
    /// A save of this kind runs already.
    SameRunning,
    /// A save of the other kind runs.
    OtherRunning,
}

impl SaveState {
    /// Claim the server for a save of `kind` on `shards` shards, unless one runs.
    pub fn try_start(&self, kind: Kind, shards: usize, now_ms: u64) -> Start {
        if self
            .running
            .compare_exchange(0, shards as u64, AcqRel, Relaxed)
            .is_ok()
        {
            self.aof.store(kind == Kind::Aof, Relaxed);
            self.started_ms.store(now_ms, Relaxed);
            self.failing.store(false, Relaxed);
            return Start::Started;
        }
        if self.running_kind() == Some(kind) {
            Start::SameRunning
        } else {
            Start::OtherRunning
        }
    }

    /// Run a save of `kind` once the current one ends (`SCHEDULE`).
    pub fn schedule(&self, kind: Kind) {
        match kind {
            Kind::Rdb => self.scheduled_rdb.store(true, Relaxed),
            Kind::Aof => self.scheduled_aof.store(true, Relaxed),
        }
    }

    /// The kind of the save running now.
    pub fn running_kind(&self) -> Option<Kind> {
        (self.running.load(Relaxed) > 0).then(|| {
            if self.aof.load(Relaxed) {
                Kind::Aof
            } else {
                Kind::Rdb
            }
        })
    }

    /// The last BGSAVE ended well (or none ran yet).
    pub fn last_ok(&self) -> bool {
        self.last_rdb_ok.load(Relaxed)
    }

    /// When the current (or last) save started, Unix ms.
    pub fn started_ms(&self) -> u64 {
        self.started_ms.load(Relaxed)
    }

    /// A shard is done with the current save (`ok`: its file is sealed). True
    /// for the last one.
    fn shard_done(&self, ok: bool, now_ms: u64) -> bool {
        if !ok {
            self.failing.store(true, Relaxed);
        }
        if self.running.fetch_sub(1, AcqRel) != 1 {
            return false;
        }
        let secs = (now_ms.saturating_sub(self.started_ms.load(Relaxed)) / 1000) as i64;
        let ok = !self.failing.load(Relaxed);
        if self.aof.load(Relaxed) {
            self.last_aof_ok.store(ok, Relaxed);
            self.last_aof_secs.store(secs, Relaxed);
        } else {
            self.last_rdb_ok.store(ok, Relaxed);
            self.last_rdb_secs.store(secs, Relaxed);
        }
        true
    }

    /// The save asked with `SCHEDULE` while another ran, taken (to start now).
    fn take_scheduled(&self) -> Option<Kind> {
        if self.scheduled_rdb.swap(false, Relaxed) {
            Some(Kind::Rdb)
        } else if self.scheduled_aof.swap(false, Relaxed) {
            Some(Kind::Aof)
        } else {
            None
        }
    }

    /// Seconds the running save of `kind` has taken, or -1.
    fn current_secs(&self, kind: Kind, now_ms: u64) -> i64 {
        if self.running_kind() == Some(kind) {
            (now_ms.saturating_sub(self.started_ms.load(Relaxed)) / 1000) as i64
        } else {
            -1
        }
    }

    /// INFO persistence's `rdb_` lines about saves, in Redis' order (`last_save`:
    /// LASTSAVE's time).
    pub fn info_rdb(&self, now_ms: u64, last_save: u64, line: &mut dyn FnMut(&str, &dyn Display)) {
        let running = self.running_kind() == Some(Kind::Rdb);
        line("rdb_bgsave_in_progress", &u8::from(running));
        line("rdb_last_save_time", &last_save);
        line("rdb_last_bgsave_status", &status(&self.last_rdb_ok));
        line(
            "rdb_last_bgsave_time_sec",
            &self.last_rdb_secs.load(Relaxed),
        );
        line(
            "rdb_current_bgsave_time_sec",
            &self.current_secs(Kind::Rdb, now_ms),
        );
    }

    /// INFO persistence's `aof_` lines about log rewrites, in Redis' order.
    pub fn info_aof(&self, now_ms: u64, line: &mut dyn FnMut(&str, &dyn Display)) {
        let running = self.running_kind() == Some(Kind::Aof);
        line("aof_rewrite_in_progress", &u8::from(running));
        line(
            "aof_rewrite_scheduled",
            &u8::from(self.scheduled_aof.load(Relaxed)),
        );
        line(
            "aof_last_rewrite_time_sec",
            &self.last_aof_secs.load(Relaxed),
        );
        line(
            "aof_current_rewrite_time_sec",
            &self.current_secs(Kind::Aof, now_ms),
        );
        line("aof_last_bgrewrite_status", &status(&self.last_aof_ok));
    }
}

fn status(ok: &AtomicBool) -> &'static str {
    if ok.load(Relaxed) {
        "ok"
    } else {
        "err"
    }
}

/// One shard's part of a background save.
#[derive(Default)]
pub struct ShardSave {
    writing: Option<Writing>,
    /// The writer thread, once every byte went to it: its outcome.
    sealing: Option<Receiver<Result<(), String>>>,
    /// `dirty` when the snapshot began (what the save covers).
    dirty_at_start: u64,
}

impl ShardSave {
    /// A save is under way on this shard: the loop must not sleep.
    pub fn busy(&self) -> bool {
        self.writing.is_some()
    }
}

/// What the shard hands its writer thread.
enum Chunk {
    /// The next bytes of the file.
    Bytes(Vec<u8>),
    /// Every byte was sent; the keys need this RDB version.
    End(u16),
}

/// The keys being written.
struct Writing {
    /// `None` once every key is out (the end is being handed over).
    snapshot: Option<Snapshot>,
    /// The RDB version the keys need, once the scan ended.
    version: u16,
    writer: SyncSender<Chunk>,
    outcome: Receiver<Result<(), String>>,
    /// Bytes not handed to the writer yet.
    pending: Vec<u8>,
    keys_per_slice: usize,
}

/// What a save needs of the shard it runs on: the shard implements it
/// (`shard/save.rs`); generic, not dyn.
pub trait Saving {
    /// This shard's id.
    fn shard(&self) -> usize;
    /// How many shards the server has.
    fn shards(&self) -> usize;
    /// The loop iteration's wall clock.
    fn now_ms(&self) -> u64;
    /// The shard's log, if it keeps one (a snapshot is named by its position).
    fn wal(&self) -> Option<&Wal>;
    fn engine(&mut self) -> &mut Engine;
    /// The snapshot begins: keys out on loan are logged when they come home.
    fn snapshot_taken(&mut self);
    /// A replica's place in its primary's stream that the keyspace is exactly
    /// at now, for the snapshot to carry (see `stream_mark`).
    fn stream_mark(&self) -> Option<crate::persistence::stream_mark::StreamMark>;
    /// The server's save (every shard's).
    fn save_state(&self) -> &SaveState;
    /// This shard's part of a background save.
    fn part(&mut self) -> &mut ShardSave;
    /// Changes since the start (the dirty count).
    fn changes(&self) -> u64;
    /// The changes up to `changes` count as saved (published now: INFO's
    /// `rdb_changes_since_last_save` right after SAVE must read 0).
    fn saved_up_to(&mut self, changes: u64, publish: bool);
    /// LASTSAVE moves to `unix_s` (never back).
    fn saved_at(&self, unix_s: u64);
    /// Ask every other shard to begin its part of the save just claimed.
    fn tell_others(&mut self);
    /// Where a slice's time goes (the latency monitor's `snapshot-slice`).
    fn timing(&self) -> (&Timing, &Observatory);
}

/// A snapshot of this shard (SAVE): its keyspace written as an RDB file named by
/// the log position it covers, `snapshot-<segment>-<offset>.rdb` (temp file,
/// fsync, rename, so a crash leaves the previous one), then older snapshots and
/// the segments before its one are deleted. Taken whole while the shard waits,
/// as Redis' SAVE blocks (a time-sliced version that keeps serving is issue 8's
/// next step).
pub fn save(core: &mut impl Saving) -> Result<(), String> {
    let Some(wal) = core.wal() else {
        return Err("persistence is off (--durability memory)".into());
    };
    injected_failure()?;
    let (segment, offset) = wal.log_end();
    let dir = wal.dir().to_path_buf();
    core.snapshot_taken();
    let now_ms = core.now_ms();
    let (section, version) = ruvio_engine::rdb::file::write_section(core.engine(), now_ms)?;
    let file = match core.stream_mark() {
        Some(mark) => mark.with_aux(|aux| {
            ruvio_engine::rdb::file::assemble_with_aux([section.as_slice()], version, aux)
        }),
        None => ruvio_engine::rdb::file::assemble([section.as_slice()], version),
    };
    let tmp = dir.join(format!(
        "{}.tmp",
        crate::persistence::wal::snapshot_name(segment, offset)
    ));
    let write = || -> std::io::Result<()> {
        let mut f = std::fs::File::create(&tmp)?;
        std::io::Write::write_all(&mut f, &file)?;
        f.sync_all()?;
        crate::persistence::wal::make_current(&tmp, &dir, (segment, offset))
    };
    write().map_err(|e| format!("{}: {e}", tmp.display()))?;
    core.saved_at(now_ms / 1000);
    mark_saved(core);
    Ok(())
}

/// This shard's changes count as saved, published now, not at the next tick:
/// SAVE answers once every shard has saved, and INFO's
/// rdb_changes_since_last_save right after it must read 0.
pub fn mark_saved(core: &mut impl Saving) {
    let changes = core.changes();
    core.saved_up_to(changes, true);
}

/// Begin this shard's part of the save the server just claimed.
pub fn request(core: &mut impl Saving) {
    if core.part().busy() {
        return;
    }
    match open(core) {
        Ok(writing) => {
            let changes = core.changes();
            let part = core.part();
            part.writing = Some(writing);
            part.dirty_at_start = changes;
        }
        Err(e) => finish(core, Err(e)),
    }
}

/// The snapshot begun, its file created and its writer thread started.
fn open(core: &mut impl Saving) -> Result<Writing, String> {
    let Some(wal) = core.wal() else {
        return Err("persistence is off (--durability memory)".into());
    };
    injected_failure()?;
    let position = wal.log_end();
    let dir = wal.dir().to_path_buf();
    let tmp = dir.join(format!(
        "{}.tmp",
        crate::persistence::wal::snapshot_name(position.0, position.1)
    ));
    let file = File::create(&tmp).map_err(|e| format!("{}: {e}", tmp.display()))?;
    let now_ms = core.now_ms();
    core.snapshot_taken();
    let (writer, chunks) = mpsc::sync_channel(CHUNKS_QUEUED_MAX);
    let (done, outcome) = mpsc::channel();
    std::thread::Builder::new()
        .name(format!("ruvio-save-{}", core.shard()))
        .spawn(move || {
            run_on_any_cpu();
            let result = write_file(&file, &tmp, &chunks)
                .and_then(|()| crate::persistence::wal::make_current(&tmp, &dir, position))
                .map_err(|e| format!("{}: {e}", tmp.display()));
            if result.is_err() {
                let _ = std::fs::remove_file(&tmp);
            }
            let _ = done.send(result);
        })
        .map_err(|e| format!("cannot start a thread: {e}"))?;
    Ok(Writing {
        snapshot: Some(Snapshot::begin(core.engine(), now_ms)),
        version: RDB_VERSION,
        writer,
        outcome,
        // The header goes out with the first keys.
        pending: match core.stream_mark() {
            Some(mark) => mark.with_aux(|aux| header_with_aux(RDB_VERSION, aux)),
            None => header(RDB_VERSION),
        },
        keys_per_slice: keys_per_slice(),
    })
}

/// The writer thread: the chunks in order into the file (the checksum follows
/// them, writeback starts every [`WRITEBACK_BYTES`]), then the seal.
fn write_file(file: &File, path: &Path, chunks: &Receiver<Chunk>) -> std::io::Result<()> {
    let mut checksum = Checksum::default();
    let mut writer = file;
    let (mut written, mut kicked) = (0u64, 0u64);
    loop {
        match chunks.recv() {
            Ok(Chunk::Bytes(bytes)) => {
                checksum.update(&bytes);
                writer.write_all(&bytes)?;
                written += bytes.len() as u64;
                if written - kicked >= WRITEBACK_BYTES {
                    start_writeback(file, kicked, written - kicked);
                    kicked = written;
                }
            }
            Ok(Chunk::End(version)) => return seal(file, path, version, checksum),
            Err(_) => return Err(std::io::Error::other("the save was abandoned")),
        }
    }
}

/// A thread started by a shard inherits its pinning to the shard's CPU, where it
/// would take turns with the shard's loop: let the writer run on any CPU.
fn run_on_any_cpu() {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; CPU_SET writes inside it;
    // sched_setaffinity(0, ...) changes only the calling thread.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for cpu in 0..libc::CPU_SETSIZE as usize {
            libc::CPU_SET(cpu, &mut set);
        }
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

/// Ask the kernel to start writing `len` bytes at `offset` out now (no wait), so a
/// large file's dirty pages do not pile up for the final fsync.
fn start_writeback(file: &File, offset: u64, len: u64) {
    use std::os::fd::AsRawFd;
    // SAFETY: a plain syscall on a descriptor this thread owns; it only starts I/O.
    unsafe {
        libc::sync_file_range(
            file.as_raw_fd(),
            offset as i64,
            len as i64,
            libc::SYNC_FILE_RANGE_WRITE,
        );
    }
}

/// `RUVIO_FAULT=snapshot:fail` (debug builds): every snapshot fails, to test what
/// SAVE, BGSAVE and SHUTDOWN answer then.
pub(crate) fn injected_failure() -> Result<(), String> {
    if ruvio_engine::fault::is_armed(b"snapshot", "fail") {
        return Err("injected failure (RUVIO_FAULT=snapshot:fail)".into());
    }
    Ok(())
}

/// Keys a slice writes at most: unbounded (time decides), or fewer in debug
/// builds when `RUVIO_SNAPSHOT_SLICE_KEYS` says so (tests make a save last).
fn keys_per_slice() -> usize {
    let knob = cfg!(debug_assertions)
        .then(|| std::env::var("RUVIO_SNAPSHOT_SLICE_KEYS").ok())
        .flatten()
        .and_then(|v| v.parse().ok());
    knob.unwrap_or(usize::MAX)
}

/// One loop iteration's share of the work: write a slice, or take the writer's
/// outcome.
pub fn run_slice(core: &mut impl Saving) {
    if let Some(mut writing) = core.part().writing.take() {
        // Ruvio's own latency event: a slice of a background save, on the shard's
        // loop (Redis forks instead; docs/observability.md).
        let timed = core.timing().0.monitor_start();
        let written = write_slice(core.engine(), &mut writing);
        let ((timing, observatory), now_ms) = (core.timing(), core.now_ms());
        timing.sample(observatory, "snapshot-slice", timed, now_ms);
        match written {
            Ok(false) => core.part().writing = Some(writing),
            Ok(true) => core.part().sealing = Some(writing.outcome),
            Err(e) => {
                if let Some(snapshot) = writing.snapshot.take() {
                    let _ = snapshot.end(core.engine());
                }
                finish(core, Err(e));
            }
        }
    }
    let outcome = match core.part().sealing.as_ref().map(Receiver::try_recv) {
        None | Some(Err(TryRecvError::Empty)) => return,
        Some(Ok(outcome)) => outcome,
        Some(Err(TryRecvError::Disconnected)) => Err("the writer thread died".into()),
    };
    core.part().sealing = None;
    finish(core, outcome);
}

/// Write keys for one slice; true once every byte and the end went to the
/// writer. When the writer is behind (the disk is slower), no key is written:
/// the save takes longer, the shard never waits.
fn write_slice(engine: &mut Engine, w: &mut Writing) -> Result<bool, String> {
    let began = Instant::now();
    let mut keys_left = w.keys_per_slice;
    loop {
        if w.pending.len() >= WRITE_BYTES || (w.snapshot.is_none() && !w.pending.is_empty()) {
            let bytes = std::mem::replace(&mut w.pending, Vec::with_capacity(WRITE_BYTES));
            match w.writer.try_send(Chunk::Bytes(bytes)) {
                Ok(()) => {}
                Err(TrySendError::Full(Chunk::Bytes(bytes))) => {
                    w.pending = bytes;
                    return Ok(false);
                }
                Err(_) => return Err(writer_gone(w)),
            }
        }
        let Some(snapshot) = w.snapshot.as_mut() else {
            return match w.writer.try_send(Chunk::End(w.version)) {
                Ok(()) => Ok(true),
                Err(TrySendError::Full(_)) => Ok(false),
                Err(_) => Err(writer_gone(w)),
            };
        };
        let step = KEYS_PER_STEP.min(keys_left);
        keys_left -= step;
        if snapshot.step(engine, &mut w.pending, step) {
            w.pending.push(END_OF_KEYS);
            let snapshot = w.snapshot.take().expect("scanning");
            w.version = snapshot.end(engine)?;
            continue;
        }
        if keys_left == 0 || began.elapsed() >= SLICE {
            return Ok(false);
        }
    }
}

/// The writer thread stopped early: its error.
fn writer_gone(w: &Writing) -> String {
    match w.outcome.recv() {
        Ok(Err(e)) => e,
        _ => "the writer thread died".into(),
    }
}

/// Complete the file: the version digits when a key needed a newer version than
/// the header said (then the checksum is read back from the file), the checksum,
/// and an `fsync`.
pub(crate) fn seal(
    file: &File,
    path: &Path,
    version: u16,
    checksum: Checksum,
) -> std::io::Result<()> {
    let trailer = if version == RDB_VERSION {
        checksum.finish()
    } else {
        file.write_all_at(&version_digits(version), VERSION_AT as u64)?;
        checksum_of(path)?
    };
    let end = file.metadata()?.len();
    file.write_all_at(&trailer, end)?;
    file.sync_all()
}

fn checksum_of(path: &Path) -> std::io::Result<[u8; 8]> {
    let mut checksum = Checksum::default();
    let mut file = File::open(path)?;
    let mut chunk = vec![0; WRITE_BYTES];
    loop {
        let n = file.read(&mut chunk)?;
        if n == 0 {
            return Ok(checksum.finish());
        }
        checksum.update(&chunk[..n]);
    }
}

/// This shard's part ended with `outcome`; the last shard of the save completes
/// it for the server (LASTSAVE, status) and starts a scheduled one.
fn finish(core: &mut impl Saving, outcome: Result<(), String>) {
    match &outcome {
        Ok(()) => {
            let at_start = core.part().dirty_at_start;
            core.saved_up_to(at_start, false);
        }
        Err(e) => eprintln!("ruvio: shard {}: background save failed: {e}", core.shard()),
    }
    let now_ms = core.now_ms();
    let state = core.save_state();
    if !state.shard_done(outcome.is_ok(), now_ms) {
        return;
    }
    if !state.failing.load(Relaxed) {
        core.saved_at(now_ms / 1000);
    }
    start_scheduled(core);
}

/// Start the save asked with `SCHEDULE` (or inside EXEC), unless one runs.
pub fn start_scheduled(core: &mut impl Saving) {
    let state = core.save_state();
    if state.running_kind().is_some() {
        return;
    }
    if let Some(kind) = state.take_scheduled() {
        if start(core, kind) != Start::Started {
            core.save_state().schedule(kind);
        }
    }
}

/// Start a save of `kind` on every shard, if none runs (see [`SaveState::try_start`]).
pub fn start(core: &mut impl Saving, kind: Kind) -> Start {
    let (shards, now_ms) = (core.shards(), core.now_ms());
    let started = core.save_state().try_start(kind, shards, now_ms);
    if started == Start::Started {
        core.tell_others();
        request(core);
    }
    started
}
