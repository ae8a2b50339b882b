//! Long scripts: `busy-reply-threshold` (`lua-time-limit`), `-BUSY`, SCRIPT KILL
//! (and FUNCTION KILL) on a thread-per-core server.
//!
//! Redis runs a script on its one thread and, past the threshold, answers other
//! clients from inside the script's Lua hook. A Ruvio shard does the same for its
//! own clients, and the other shards help:
//! - the busy shard runs the script; a Lua count hook (every
//!   [`HOOK_INSTRUCTIONS`] instructions, as Redis' 100,000) checks a kill request
//!   and, past the threshold, calls the server's [`set_serve_while_busy`] callback,
//!   which answers the shard's other connections (`-BUSY`, SCRIPT KILL, FUNCTION
//!   KILL, SHUTDOWN NOSAVE) without entering the shard's loop (the server's
//!   `shard/busy.rs`);
//! - every other shard sees the busy shard's [`ScriptWatch`] (atomics, shared by
//!   all shards) and, past the threshold, answers `-BUSY` to a command that would
//!   have to run on it, and serves SCRIPT KILL / FUNCTION KILL by setting its kill
//!   request.
//!
//! A kill request names the run it is for, so a request that arrives as one script
//! ends never stops the next one.
//!
//! A running function also publishes its name and FCALL command ([`About`]) for
//! FUNCTION STATS' `running_script` on the other shards: a mutex taken once per
//! FCALL by its shard (uncontended unless STATS reads it), buffers reused.

use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use ruvio_resp::Args;

use crate::error::CmdError;

/// Lua instructions between two kill checks (Redis' `LUA_MASKCOUNT` hook: 100,000).
pub(super) const HOOK_INSTRUCTIONS: u32 = 100_000;

/// `busy-reply-threshold`'s default, ms (Redis' `lua-time-limit` 5000).
const BUSY_REPLY_THRESHOLD_DEFAULT_MS: u64 = 5000;

/// `-BUSY` for a running EVAL script (Redis' `shared.slowevalerr`).
const BUSY_EVAL: &str =
    "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.";
/// `-BUSY` for a running function (Redis' `shared.slowscripterr`).
const BUSY_FUNCTION: &str =
    "BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE.";

/// The text the killed script's caller gets (before the script position).
pub(super) const KILLED: &str = "ERR Script killed by user with SCRIPT KILL...";

/// Milliseconds on one clock every shard reads (monotonic, from first use).
fn clock_ms() -> u64 {
    static START: OnceLock<Instant> = OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_millis() as u64
}

/// One shard's running script as the other shards see it. On a cache line of its
/// own: each script start and end writes it, and two shards running scripts must
/// not share a line.
#[derive(Default, Debug)]
#[repr(align(128))]
pub struct ScriptWatch {
    /// The running script's run number; 0 when none runs.
    run: AtomicU64,
    /// When it started ([`clock_ms`]).
    started_ms: AtomicU64,
    /// The run a kill was asked for.
    kill: AtomicU64,
    /// The running script has called a write command: it cannot be killed.
    wrote: AtomicBool,
    /// The running script is a function (FCALL), not an EVAL script.
    function: AtomicBool,
    /// The running function's name and command (FUNCTION STATS).
    about: Mutex<About>,
    /// This shard's count of scripts' write calls ([`script_writes`]), as the
    /// other shards read it for a WATCH they answer while it is busy.
    writes: AtomicU64,
    /// WATCHes of this shard's keys that other shards answered while its script
    /// was busy, for it to register when the script command ends
    /// ([`ScriptWatches::watch_while_busy`]).
    answered: Mutex<Vec<WatchWhileBusy>>,
    /// Something may be in `answered`: the busy shard's one check per script
    /// command (it takes the lock only then).
    has_answered: AtomicBool,
}

/// A WATCH of keys of a busy shard that another shard answered `+OK` at once (as
/// Redis answers WATCH while a script is busy): what the busy shard registers
/// after its script command, and touches if the script wrote one of the keys
/// after `writes_at`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatchWhileBusy {
    /// The shard the watching client is connected to.
    pub shard: usize,
    /// The watching client's id.
    pub client_id: u64,
    /// Its watch epoch when it watched (an UNWATCH since moves it on).
    pub epoch: u64,
    /// The database of the keys.
    pub db: usize,
    /// The keys new to the client's watch list, all the busy shard's.
    pub keys: Vec<Vec<u8>>,
    /// The busy shard's [`script_writes`] count as published when `+OK` was
    /// decided (at most the true count then: a write counted later is after).
    pub writes_at: u64,
}

/// What FUNCTION STATS shows of a running function.
#[derive(Default, Debug)]
struct About {
    /// The run described: a reader ignores a description of an earlier run.
    run: u64,
    name: Vec<u8>,
    /// The command's arguments end to end; `ends` closes each.
    command: Vec<u8>,
    ends: Vec<usize>,
}

/// A running function as FUNCTION STATS' `running_script` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunningFunction {
    pub name: Vec<u8>,
    /// The FCALL as its client sent it.
    pub command: Vec<Vec<u8>>,
    pub duration_ms: u64,
}

impl ScriptWatch {
    /// The kind of the script running past `threshold_ms`, if one is.
    #[inline]
    fn busy(&self, threshold_ms: u64) -> Option<bool> {
        // The run is published after its start time: read it first.
        if self.run.load(Ordering::Acquire) == 0 {
            return None;
        }
        let started = self.started_ms.load(Ordering::Acquire);
        (clock_ms().saturating_sub(started) >= threshold_ms)
            .then(|| self.function.load(Ordering::Acquire))
    }

    /// The function running here now, if one is.
    fn running_function(&self) -> Option<RunningFunction> {
        let run = self.run.load(Ordering::Acquire);
        if run == 0 || !self.function.load(Ordering::Acquire) {
            return None;
        }
        let started = self.started_ms.load(Ordering::Acquire);
        let about = self.about.lock().unwrap_or_else(|e| e.into_inner());
        if about.run != run {
            return None;
        }
        let starts = std::iter::once(0).chain(about.ends.iter().copied());
        let command = starts
            .zip(&about.ends)
            .map(|(start, &end)| about.command[start..end].to_vec())
            .collect();
        Some(RunningFunction {
            name: about.name.clone(),
            command,
            duration_ms: clock_ms().saturating_sub(started),
        })
    }

    /// Describe run `run` of function `name`, called by `command`.
    fn describe(&self, run: u64, name: &str, command: Args<'_>) {
        let mut about = self.about.lock().unwrap_or_else(|e| e.into_inner());
        let About {
            run: described,
            name: about_name,
            command: bytes,
            ends,
        } = &mut *about;
        *described = run;
        about_name.clear();
        about_name.extend_from_slice(name.as_bytes());
        bytes.clear();
        ends.clear();
        for arg in command.iter() {
            bytes.extend_from_slice(arg);
            ends.push(bytes.len());
        }
    }
}

/// Every shard's [`ScriptWatch`] and the threshold, shared by all shards.
#[derive(Debug)]
pub struct ScriptWatches {
    shards: Vec<ScriptWatch>,
    threshold_ms: AtomicU64,
    /// Run numbers, unique across shards.
    next_run: AtomicU64,
}

impl ScriptWatches {
    /// Watches for `shards` shards, none running, the default threshold.
    pub fn new(shards: usize) -> ScriptWatches {
        ScriptWatches {
            shards: (0..shards).map(|_| ScriptWatch::default()).collect(),
            threshold_ms: AtomicU64::new(BUSY_REPLY_THRESHOLD_DEFAULT_MS),
            next_run: AtomicU64::new(1),
        }
    }

    /// `busy-reply-threshold` in ms.
    pub fn threshold_ms(&self) -> u64 {
        self.threshold_ms.load(Ordering::Relaxed)
    }

    /// CONFIG SET busy-reply-threshold (or lua-time-limit).
    pub fn set_threshold_ms(&self, ms: u64) {
        self.threshold_ms.store(ms, Ordering::Relaxed);
    }

    /// `-BUSY` if `shard` runs a script past the threshold. Inlined up to the
    /// test for a running script: every command forwarded to `shard` asks.
    #[inline]
    pub fn busy_error(&self, shard: usize) -> Option<CmdError> {
        let function = self.shards.get(shard)?.busy(self.threshold_ms())?;
        Some(busy_error(function))
    }

    /// `-BUSY` if a shard other than `shard` runs a script past the threshold.
    pub fn busy_elsewhere(&self, shard: usize) -> Option<CmdError> {
        (0..self.shards.len())
            .filter(|&s| s != shard)
            .find_map(|s| self.busy_error(s))
    }

    /// WATCH of keys of `shard` from another shard's client while `shard` runs a
    /// script past the threshold: queue the registration for `shard` to make when
    /// its script command ends, and tell the caller to answer `+OK` now (`Ok`).
    /// `Err` gives the watch back when `shard` is not busy (any more): the caller
    /// registers it by a message, as for a shard that is not busy.
    ///
    /// Why nothing is lost when the script ends meanwhile: this stores the flag
    /// then reads the run, the busy shard stores the run (0 at the script's end)
    /// then reads the flag ([`ScriptWatches::take_answered_watches`]), all four
    /// sequentially consistent: one of the two sees the other's store, so either the
    /// run changed here (the caller sends the message) or the shard takes the
    /// watch, after this pushed it (the lock is held across both).
    pub fn watch_while_busy(
        &self,
        shard: usize,
        mut watch: WatchWhileBusy,
    ) -> Result<(), WatchWhileBusy> {
        let Some(own) = self.shards.get(shard) else {
            return Err(watch);
        };
        let run = own.run.load(Ordering::SeqCst);
        if run == 0 || own.busy(self.threshold_ms()).is_none() {
            return Err(watch);
        }
        let mut answered = own.answered.lock().unwrap_or_else(|e| e.into_inner());
        own.has_answered.store(true, Ordering::SeqCst);
        std::sync::atomic::fence(Ordering::SeqCst);
        if own.run.load(Ordering::SeqCst) != run {
            return Err(watch);
        }
        watch.writes_at = own.writes.load(Ordering::SeqCst);
        answered.push(watch);
        Ok(())
    }

    /// The WATCHes other shards answered while `shard`'s script command ran (see
    /// [`ScriptWatches::watch_while_busy`]): called by `shard` when that command
    /// ends, after its script's run was closed; one load when there are none.
    pub fn take_answered_watches(&self, shard: usize) -> Vec<WatchWhileBusy> {
        let Some(own) = self.shards.get(shard) else {
            return Vec::new();
        };
        // SeqCst after the run's SeqCst store (the script's end): the two are in
        // the one order all SeqCst operations share, as the other side's.
        if !own.has_answered.load(Ordering::SeqCst) {
            return Vec::new();
        }
        let mut answered = own.answered.lock().unwrap_or_else(|e| e.into_inner());
        own.has_answered.store(false, Ordering::SeqCst);
        std::mem::take(&mut *answered)
    }

    /// SCRIPT KILL (`function` false) or FUNCTION KILL (true), with Redis' replies:
    /// stop every running script of that kind that has not written.
    fn kill(&self, function: bool) -> Result<(), CmdError> {
        let mut killed = false;
        let mut found = None;
        for watch in &self.shards {
            let run = watch.run.load(Ordering::Acquire);
            if run == 0 {
                continue;
            }
            let refusal = if watch.wrote.load(Ordering::Acquire) {
                Some(CmdError::quoted(
                    "UNKILLABLE Sorry the script already executed write commands against the dataset. \
                     You can either wait the script termination or kill the server in a hard way using \
                     the SHUTDOWN NOSAVE command.",
                    b"",
                    "",
                ))
            } else if watch.function.load(Ordering::Acquire) != function {
                Some(busy_error(!function))
            } else {
                watch.kill.store(run, Ordering::Release);
                killed = true;
                None
            };
            found = found.or(Some(refusal));
        }
        match found {
            None => Err(CmdError::quoted(
                "NOTBUSY No scripts in execution right now.",
                b"",
                "",
            )),
            _ if killed => Ok(()),
            Some(refusal) => Err(refusal.unwrap_or_else(|| busy_error(function))),
        }
    }
}

/// FUNCTION STATS' `running_script`: a function running on any shard (the first
/// found when several run at once), `None` when none does; Redis' `-BUSY` for an
/// EVAL script running past the threshold (Redis answers STATS so then).
pub fn running_function() -> Result<Option<RunningFunction>, CmdError> {
    WATCHES.with(|w| {
        let w = w.borrow();
        let Some((watches, _)) = w.as_ref() else {
            return Ok(None);
        };
        let threshold = watches.threshold_ms();
        if watches
            .shards
            .iter()
            .any(|s| s.busy(threshold) == Some(false))
        {
            return Err(busy_error(false));
        }
        Ok(watches
            .shards
            .iter()
            .find_map(ScriptWatch::running_function))
    })
}

/// Redis' `-BUSY` for a running script of that kind.
fn busy_error(function: bool) -> CmdError {
    CmdError::quoted(if function { BUSY_FUNCTION } else { BUSY_EVAL }, b"", "")
}

thread_local! {
    /// Every shard's watch and this shard's index among them (set at shard start).
    static WATCHES: RefCell<Option<(Arc<ScriptWatches>, usize)>> = const { RefCell::new(None) };
    /// The run number of the script this shard runs now (0: none).
    static CURRENT_RUN: Cell<u64> = const { Cell::new(0) };
    /// How the server answers this shard's other clients while its script is busy.
    static SERVE_WHILE_BUSY: Cell<Option<fn(&CmdError)>> = const { Cell::new(None) };
    /// Write commands scripts on this shard have called, ever (never reset).
    static SCRIPT_WRITES: Cell<u64> = const { Cell::new(0) };
}

/// Give this shard thread's scripts the server's way of answering the shard's other
/// clients while a script runs past `busy-reply-threshold` (called from the Lua
/// hook with the `-BUSY` of the running script's kind, so it must not run commands
/// on the keyspace: it answers `-BUSY` and acts on SCRIPT KILL, FUNCTION KILL and
/// SHUTDOWN NOSAVE).
pub fn set_serve_while_busy(serve: fn(&CmdError)) {
    SERVE_WHILE_BUSY.with(|s| s.set(Some(serve)));
}

/// From the Lua hook: past the threshold, let the server answer the shard's other
/// clients (a kill request they make is seen by the [`kill_requested`] that follows).
pub(super) fn serve_others_if_busy() {
    let Some(serve) = SERVE_WHILE_BUSY.with(Cell::get) else {
        return;
    };
    if CURRENT_RUN.with(Cell::get) == 0 {
        return;
    }
    let busy = with_own(|watches, own| own.busy(watches.threshold_ms()).map(busy_error));
    if let Some(busy) = busy.flatten() {
        serve(&busy);
    }
}

/// Tell this shard thread where the script watches are and which one is its own.
pub fn set_script_watches(watches: Arc<ScriptWatches>, shard: usize) {
    WATCHES.with(|w| *w.borrow_mut() = Some((watches, shard)));
}

fn with_own<R>(f: impl FnOnce(&ScriptWatches, &ScriptWatch) -> R) -> Option<R> {
    WATCHES.with(|w| {
        let w = w.borrow();
        let (watches, shard) = w.as_ref()?;
        Some(f(watches, watches.shards.get(*shard)?))
    })
}

/// SCRIPT KILL (`function` false) / FUNCTION KILL (`true`) from this shard: stops
/// a script running on any shard. Without watches (an engine alone): `-NOTBUSY`.
pub fn kill(function: bool) -> Result<(), CmdError> {
    WATCHES.with(|w| match w.borrow().as_ref() {
        Some((watches, _)) => watches.kill(function),
        None => ScriptWatches::new(0).kill(function),
    })
}

/// A script running on this shard, published while it lives.
pub struct Running(());

impl Running {
    /// Publish a script as running on this shard: a function when `function` names
    /// it and the command that called it.
    pub fn start(function: Option<(&str, Args<'_>)>) -> Running {
        let run = with_own(|watches, own| {
            let run = watches.next_run.fetch_add(1, Ordering::Relaxed);
            if let Some((name, command)) = function {
                own.describe(run, name, command);
            }
            own.wrote.store(false, Ordering::Release);
            own.function.store(function.is_some(), Ordering::Release);
            own.started_ms.store(clock_ms(), Ordering::Release);
            own.run.store(run, Ordering::Release);
            run
        });
        CURRENT_RUN.with(|r| r.set(run.unwrap_or(0)));
        Running(())
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        CURRENT_RUN.with(|r| r.set(0));
        // SeqCst: the other shards' WATCH while busy reads it after its own
        // store (see `ScriptWatches::watch_while_busy`).
        with_own(|_, own| own.run.store(0, Ordering::SeqCst));
    }
}

/// The running script called a write command: from now on it cannot be killed.
pub(super) fn note_write() {
    let writes = SCRIPT_WRITES.with(|w| {
        w.set(w.get() + 1);
        w.get()
    });
    with_own(|_, own| {
        own.wrote.store(true, Ordering::Release);
        own.writes.store(writes, Ordering::Release);
    });
}

/// How many write commands scripts on this shard have called so far: the
/// server's busy hook notes it when it answers a WATCH while a script runs, and
/// compares after the script to know whether a write came after that WATCH.
pub fn script_writes() -> u64 {
    SCRIPT_WRITES.with(Cell::get)
}

/// SCRIPT KILL / FUNCTION KILL asked to stop the script running on this shard.
pub(super) fn kill_requested() -> bool {
    let run = CURRENT_RUN.with(|r| r.get());
    run != 0 && with_own(|_, own| own.kill.load(Ordering::Acquire) == run) == Some(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(e: CmdError) -> String {
        e.message().to_string()
    }

    /// This thread as shard 0 of two, the threshold at `threshold_ms`.
    fn watches(threshold_ms: u64) -> Arc<ScriptWatches> {
        let watches = Arc::new(ScriptWatches::new(2));
        watches.set_threshold_ms(threshold_ms);
        set_script_watches(watches.clone(), 0);
        watches
    }

    #[test]
    fn script_kill_stops_only_the_run_it_was_asked_for() {
        let watches = watches(0);
        assert_eq!(
            message(kill(false).unwrap_err()),
            "NOTBUSY No scripts in execution right now."
        );
        let running = Running::start(None);
        assert!(!kill_requested());
        assert!(watches.busy_error(0).is_some() && watches.busy_error(1).is_none());
        assert!(kill(false).is_ok());
        assert!(kill_requested());
        drop(running);
        assert!(watches.busy_error(0).is_none());
        // The next script is not stopped by the earlier request.
        let _next = Running::start(None);
        assert!(!kill_requested());
    }

    #[test]
    fn a_script_that_wrote_or_of_the_other_kind_is_not_killed() {
        let _watches = watches(0);
        let running = Running::start(None);
        note_write();
        assert!(message(kill(false).unwrap_err()).starts_with("UNKILLABLE Sorry the script"));
        assert!(!kill_requested());
        drop(running);
        let command: ruvio_resp::OwnedArgs =
            ["fcall", "f", "0"].iter().map(|a| a.as_bytes()).collect();
        let _function = Running::start(Some(("f", command.args())));
        assert_eq!(message(kill(false).unwrap_err()), BUSY_FUNCTION);
        assert!(!kill_requested());
        assert!(kill(true).is_ok());
        assert!(kill_requested());
    }

    #[test]
    fn function_stats_sees_a_running_function_and_refuses_during_a_busy_eval() {
        let watches = watches(60_000);
        assert_eq!(running_function(), Ok(None));
        let command: ruvio_resp::OwnedArgs = ["FCALL", "spin", "1", "k"]
            .iter()
            .map(|a| a.as_bytes())
            .collect();
        let function = Running::start(Some(("spin", command.args())));
        let seen = running_function().unwrap().expect("a running function");
        assert_eq!(seen.name, b"spin");
        assert_eq!(seen.command, [&b"FCALL"[..], b"spin", b"1", b"k"]);
        drop(function);
        assert_eq!(running_function(), Ok(None));
        let eval = Running::start(None);
        assert_eq!(running_function(), Ok(None), "an EVAL before the threshold");
        watches.set_threshold_ms(0);
        assert_eq!(message(running_function().unwrap_err()), BUSY_EVAL);
        drop(eval);
        assert_eq!(running_function(), Ok(None));
    }

    fn watch_of(client_id: u64) -> WatchWhileBusy {
        WatchWhileBusy {
            shard: 1,
            client_id,
            epoch: 0,
            db: 0,
            keys: vec![b"k".to_vec()],
            writes_at: 0,
        }
    }

    #[test]
    fn a_watch_answered_while_busy_is_taken_with_the_writes_before_it() {
        let watches = watches(60_000);
        assert!(
            watches.watch_while_busy(0, watch_of(1)).is_err(),
            "no script"
        );
        let running = Running::start(None);
        assert!(
            watches.watch_while_busy(0, watch_of(2)).is_err(),
            "before the threshold"
        );
        watches.set_threshold_ms(0);
        note_write();
        let before = script_writes();
        assert!(watches.watch_while_busy(0, watch_of(3)).is_ok());
        assert!(
            watches.watch_while_busy(1, watch_of(4)).is_err(),
            "shard 1 idle"
        );
        note_write();
        drop(running);
        assert!(
            watches.watch_while_busy(0, watch_of(5)).is_err(),
            "the script ended: the caller sends its message"
        );
        let taken = watches.take_answered_watches(0);
        assert_eq!(taken.len(), 1);
        assert_eq!((taken[0].client_id, taken[0].writes_at), (3, before));
        assert!(
            script_writes() > taken[0].writes_at,
            "a write after its +OK"
        );
        assert!(watches.take_answered_watches(0).is_empty());
    }

    #[test]
    fn busy_only_past_the_threshold() {
        let watches = watches(60_000);
        let running = Running::start(None);
        assert!(watches.busy_error(0).is_none());
        watches.set_threshold_ms(0);
        assert_eq!(message(watches.busy_error(0).unwrap()), BUSY_EVAL);
        drop(running);
        assert!(watches.busy_error(0).is_none());
    }
}
