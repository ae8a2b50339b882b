//! The server log: Redis's `loglevel` and `logfile`, and Redis's line format
//! (`pid:M 04 Dec 2026 05:10:00.123 * message`), so that tools that read a Redis
//! log (and people used to one) read Ruvio's.
//!
//! One log for the whole process, on standard error: every shard thread writes
//! whole lines through one lock (a line is short and logging is rare: start,
//! saves, errors, `redis.log`), so lines never interleave. The level is an atomic
//! every shard reads without the lock; CONFIG SET loglevel changes it for all at
//! once. `logfile PATH` puts the file in standard error's place (`dup2`), so every
//! message of the process goes there, the plain `ruvio: ...` lines of the
//! subsystems not yet writing through here and a panic's report included.
//! `logfile ""` keeps standard error (Redis writes to standard output; Ruvio
//! keeps standard output free for what a caller pipes).

use std::io::Write;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Mutex;

/// Redis's levels, lowest first (`LL_DEBUG` .. `LL_WARNING`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    Debug = 0,
    Verbose = 1,
    Notice = 2,
    Warning = 3,
}

impl Level {
    /// The level named as `loglevel` names it.
    pub fn parse(name: &str) -> Option<Level> {
        Some(match name.to_ascii_lowercase().as_str() {
            "debug" => Level::Debug,
            "verbose" => Level::Verbose,
            "notice" => Level::Notice,
            "warning" => Level::Warning,
            _ => return None,
        })
    }

    /// A level by its number (Lua's `redis.LOG_*`).
    pub fn from_number(n: i64) -> Option<Level> {
        Some(match n {
            0 => Level::Debug,
            1 => Level::Verbose,
            2 => Level::Notice,
            3 => Level::Warning,
            _ => return None,
        })
    }

    /// The mark Redis puts before a message of this level.
    fn mark(self) -> char {
        match self {
            Level::Debug => '.',
            Level::Verbose => '-',
            Level::Notice => '*',
            Level::Warning => '#',
        }
    }
}

static LEVEL: AtomicU8 = AtomicU8::new(Level::Notice as u8);
/// Held while a line is written, so lines of different threads never mix.
static WRITING: Mutex<()> = Mutex::new(());

/// Set `loglevel`.
pub fn set_level(level: Level) {
    LEVEL.store(level as u8, Ordering::Relaxed);
}

/// Send the log, and all of standard error, to `path` (appended to, as Redis
/// does); an empty path keeps standard error.
pub fn set_file(path: &str) -> std::io::Result<()> {
    if path.is_empty() {
        return Ok(());
    }
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?;
    // SAFETY: both descriptors are open; dup2 replaces descriptor 2 atomically
    // and `file` closes its own copy when dropped.
    let moved = unsafe { libc::dup2(std::os::fd::AsRawFd::as_raw_fd(&file), libc::STDERR_FILENO) };
    if moved < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// The role letter of each line, as Redis's: `M` for a primary, `S` for a
/// replica (replication sets it when the role changes).
static ROLE: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(b'M');

/// This server is a replica (`S`) or a primary (`M`) from now on.
pub fn set_replica_role(replica: bool) {
    ROLE.store(if replica { b'S' } else { b'M' }, Ordering::Relaxed);
}

/// Whether a message of `level` would be written now.
pub fn enabled(level: Level) -> bool {
    level as u8 >= LEVEL.load(Ordering::Relaxed)
}

/// Write `message` as one line if `level` is at or above `loglevel`.
pub fn log(level: Level, message: &str) {
    if !enabled(level) {
        return;
    }
    let now_ms = crate::clock::unix_ms();
    let line = format!(
        "{}:{} {} {} {message}\n",
        std::process::id(),
        ROLE.load(Ordering::Relaxed) as char,
        redis_timestamp(now_ms),
        level.mark()
    );
    let _writing = WRITING.lock().unwrap_or_else(|e| e.into_inner());
    let written = std::io::stderr().write_all(line.as_bytes());
    // A log that cannot be written has nowhere to report it; the server goes on.
    let _ = written;
}

/// `04 Dec 2026 05:10:00.123` (UTC) for Unix milliseconds.
fn redis_timestamp(unix_ms: u64) -> String {
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let secs = unix_ms / 1000;
    let (year, month, day) = civil_from_days((secs / 86_400) as i64);
    let in_day = secs % 86_400;
    format!(
        "{day:02} {} {year} {:02}:{:02}:{:02}.{:03}",
        MONTHS[month as usize - 1],
        in_day / 3600,
        in_day / 60 % 60,
        in_day % 60,
        unix_ms % 1000
    )
}

/// Year, month (1-12) and day (1-31) of a day count since 1970-01-01 (the
/// proleptic Gregorian calendar, by eras of 400 years).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let mp = (5 * day_of_year + 2) / 153;
    let day = (day_of_year - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_read_as_redis_writes_them() {
        assert_eq!(redis_timestamp(0), "01 Jan 1970 00:00:00.000");
        // 2026-12-04 05:10:00.123 UTC
        assert_eq!(
            redis_timestamp(1_796_361_000_123),
            "04 Dec 2026 05:10:00.123"
        );
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
    }

    #[test]
    fn levels_filter_as_redis_does() {
        assert!(Level::Warning > Level::Notice);
        assert_eq!(Level::parse("VERBOSE"), Some(Level::Verbose));
        assert_eq!(Level::from_number(4), None);
    }
}
