//! Leaving without losing data: SHUTDOWN [SAVE|NOSAVE] [NOW] [FORCE] and SIGTERM /
//! SIGINT, as Redis' `prepareForShutdown`.
//!
//! Before the process exits every shard prepares: with a save, it writes its
//! snapshot (SAVE's, `snapshot::save`: blocking, the process is about to go);
//! without one, it writes and syncs the records its log still holds in memory (as
//! Redis fsyncs its AOF), so even `everysec` loses nothing at a clean exit. A save
//! happens when SAVE is given, or when `save` rules exist and NOSAVE is not given.
//! Without a log (`--durability memory`) there is nothing to write.
//!
//! SHUTDOWN: the shard that got it prepares, tells the others (a broadcast), waits
//! for all of them (`gather`, then the tick until every shard's count is in:
//! a shard whose direct write is in flight flushes when it ends), then exits, or, when a save failed and FORCE is not
//! given, answers `-ERR Errors trying to SHUTDOWN. Check logs.` and goes on (a
//! failed log sync is logged only, as Redis does with its AOF).
//! A signal: one thread takes SIGTERM and SIGINT for the process; shard 0's tick
//! sees it, starts the same preparation and exits once every shard is done (after
//! a failure it logs and goes on, as Redis does).
//!
//! What a shard does toward the exit (tell the others, write its snapshot, reach
//! its log) is asked of it through [`Leaving`], which the shard implements
//! (`shard/exit.rs`): this subsystem holds the protocol and names nothing above it.

use crate::persistence::wal::Wal;
use std::sync::atomic::{
    AtomicBool, AtomicU64, Ordering::AcqRel, Ordering::Acquire, Ordering::Release,
};

/// The exit the server is preparing (in `Shared`).
#[derive(Debug, Default)]
pub struct ExitState {
    /// Shards done preparing for the exit asked last.
    prepared: AtomicU64,
    /// A shard's snapshot or log sync failed.
    failed: AtomicBool,
    /// A signal asked for the exit: shard 0 starts it on its tick.
    signalled: AtomicBool,
    /// Shard 0 waits for the shards to prepare the exit a signal asked for.
    waiting: AtomicBool,
}

/// What leaving needs of a shard: the shard implements it (`shard/exit.rs`).
pub trait Leaving {
    /// This shard's id.
    fn shard(&self) -> usize;
    /// How many shards the server has.
    fn shards(&self) -> usize;
    /// The exit every shard shares.
    fn exit_state(&self) -> &ExitState;
    /// `save` rules are configured.
    fn has_save_rules(&self) -> bool;
    /// Ask every other shard to prepare (after what was sent them before).
    fn tell_others(&mut self, save: bool);
    /// The shard's log, if it keeps one.
    fn wal(&mut self) -> Option<&mut Wal>;
    /// Write the shard's snapshot now (SAVE's, blocking: the process is about to go).
    fn save_snapshot(&mut self) -> Result<(), String>;
}

/// Whether leaving saves: SAVE given, or rules configured and NOSAVE not given.
pub fn saves(shard: &impl Leaving, save: bool, nosave: bool) -> bool {
    save || (!nosave && shard.has_save_rules())
}

/// Prepare every shard for the exit: this one now, the others as the broadcast
/// reaches them.
pub fn begin(shard: &mut impl Leaving, save: bool) {
    let exit = shard.exit_state();
    exit.prepared.store(0, Release);
    exit.failed.store(false, Release);
    shard.tell_others(save);
    prepare(shard, save);
}

/// This shard's part: its snapshot, or its log's last records on disk.
pub fn prepare(shard: &mut impl Leaving, save: bool) {
    let result = match shard.wal() {
        None => Ok(()),
        Some(_) if save => shard.save_snapshot(),
        Some(wal) if wal.flush_must_wait() => {
            // The shard's loop calls this again when the write completes.
            return wal.defer_exit_flush();
        }
        Some(wal) => wal.flush_blocking(),
    };
    let id = shard.shard();
    let exit = shard.exit_state();
    match result {
        Err(e) if save => {
            eprintln!("ruvio: shard {id}: saving before exiting failed: {e}");
            exit.failed.store(true, Release);
        }
        // As Redis, which logs a failed AOF fsync at shutdown and exits anyway (a
        // failed log refused every write since, so none is lost unacknowledged).
        Err(e) => eprintln!("ruvio: shard {id}: syncing the log before exiting failed: {e}"),
        Ok(()) => {}
    }
    exit.prepared.fetch_add(1, AcqRel);
}

/// Every shard has prepared (its snapshot written or its log synced, a flush
/// deferred behind a direct write included).
pub fn every_shard_prepared(shard: &impl Leaving) -> bool {
    shard.exit_state().prepared.load(Acquire) >= shard.shards() as u64
}

/// Every shard prepared: exit, unless one failed and not `force`; then the reply
/// SHUTDOWN gives.
pub fn conclude(shard: &impl Leaving, force: bool) -> Vec<u8> {
    if shard.exit_state().failed.load(Acquire) && !force {
        return b"-ERR Errors trying to SHUTDOWN. Check logs.\r\n".to_vec();
    }
    eprintln!("ruvio: shard {}: ready to exit, bye bye", shard.shard());
    std::process::exit(0);
}

/// Shard 0's tick: start the exit a signal asked for, and end the process once
/// every shard prepared.
pub fn on_tick(shard: &mut impl Leaving) {
    if shard.shard() != 0 {
        return;
    }
    let exit = shard.exit_state();
    if exit.signalled.swap(false, AcqRel) {
        eprintln!("ruvio: received a signal to stop, preparing to exit");
        exit.waiting.store(true, Release);
        let save = saves(shard, false, false);
        begin(shard, save);
    }
    let exit = shard.exit_state();
    let shards = shard.shards() as u64;
    if !exit.waiting.load(Acquire) || exit.prepared.load(Acquire) < shards {
        return;
    }
    exit.waiting.store(false, Release);
    if exit.failed.load(Acquire) {
        eprintln!("ruvio: errors preparing to exit (logged above); not exiting");
        return;
    }
    eprintln!("ruvio: ready to exit, bye bye");
    std::process::exit(0);
}

impl ExitState {
    /// A signal asked for the exit (from the signal thread).
    pub fn signal(&self) {
        self.signalled.store(true, Release);
    }
}

/// From `main`, before the shards start: SIGTERM and SIGINT are blocked in every
/// thread (the shards inherit the mask) and one thread waits for them and asks
/// shard 0 to exit cleanly (`on_signal`: [`ExitState::signal`] of the state every
/// shard shares).
pub fn watch_signals(on_signal: impl Fn() + Send + 'static) -> std::io::Result<()> {
    // SAFETY: plain libc calls on a signal set owned by this function.
    let set = unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::sigaddset(&mut set, libc::SIGINT);
        let rc = libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        if rc != 0 {
            return Err(std::io::Error::from_raw_os_error(rc));
        }
        set
    };
    std::thread::Builder::new()
        .name("ruvio-signals".into())
        .spawn(move || loop {
            let mut signal = 0;
            // SAFETY: waits on the set built above, blocked in every thread.
            let rc = unsafe { libc::sigwait(&set, &mut signal) };
            if rc == 0 {
                on_signal();
            }
        })?;
    Ok(())
}
