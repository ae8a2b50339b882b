//! MONITOR's feed: the line Redis writes for each command a server runs, and where
//! those lines wait until the shard hands them to the monitors.
//!
//! Redis 7.0 feeds its monitors from `call()`, after a command ran (so SELECT shows
//! the database it chose), for every command but the rejected ones (unknown,
//! arity, NOAUTH ... never reach `call()`), admin commands and those flagged
//! `skip_monitor`: EVAL and its kin are fed before they run instead, so their
//! `redis.call`s (`[0 lua]`) follow them; EXEC is fed after its queue. AUTH's and
//! HELLO's secrets read `(redacted)`.
//!
//! How it is shaped: a command runs on whichever shard owns its keys, and a
//! monitor lives on the shard of its connection. So every line is written, once,
//! into a per-thread buffer ([`feed`]) by whoever ran or dispatched the command
//! (the dispatcher with the client's address, the script runner through the
//! engine's sink); the shard then appends the buffer to its own monitors and ships
//! it to each other shard that has monitors ([`Monitors::shards_watching`]), ahead
//! of its requests to them, so a script's EVAL line comes before the lines of the
//! calls it makes there. With no monitor anywhere the request path pays one load
//! and branch ([`attached`]).
//!
//! Output limits: Redis 7.0 counts a monitor as a normal client for
//! `client-output-buffer-limit` (`getClientType` exposes monitors as normal), and
//! so does Ruvio; docs/observability.md has the measurement.

use ruvio_resp::Args;
use std::cell::RefCell;
use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};

/// A monitor is attached on some shard.
static ATTACHED: AtomicBool = AtomicBool::new(false);

/// Whether any client of the server is in MONITOR mode: the request path's one
/// test.
#[inline]
pub fn attached() -> bool {
    ATTACHED.load(Relaxed)
}

/// How many monitors each shard has, readable by every shard.
#[derive(Debug)]
pub struct Monitors {
    per_shard: Vec<AtomicUsize>,
}

impl Monitors {
    pub fn new(shards: usize) -> Monitors {
        Monitors {
            per_shard: (0..shards).map(|_| AtomicUsize::new(0)).collect(),
        }
    }

    /// A connection of `shard` entered MONITOR mode.
    pub fn attach(&self, shard: usize) {
        self.per_shard[shard].fetch_add(1, Relaxed);
        self.publish();
    }

    /// A monitor of `shard` closed (or left by RESET).
    pub fn detach(&self, shard: usize) {
        let _ = self.per_shard[shard].fetch_update(Relaxed, Relaxed, |n| n.checked_sub(1));
        self.publish();
    }

    /// The shards other than `me` whose monitors must see this shard's lines.
    pub fn shards_watching(&self, me: usize) -> impl Iterator<Item = usize> + '_ {
        self.per_shard
            .iter()
            .enumerate()
            .filter(move |(id, n)| *id != me && n.load(Relaxed) > 0)
            .map(|(id, _)| id)
    }

    fn publish(&self) {
        let any = self.per_shard.iter().any(|n| n.load(Relaxed) > 0);
        ATTACHED.store(any, Relaxed);
        ruvio_engine::scripting::set_monitored(any);
    }
}

/// One shard's monitors: its connections in MONITOR mode (slab index, generation).
#[derive(Debug, Default)]
pub struct ShardMonitors {
    pub local: Vec<(u32, u32)>,
}

impl ShardMonitors {
    /// Connection `who` of shard `shard` enters MONITOR mode.
    pub fn attach(&mut self, counts: &Monitors, shard: usize, who: (u32, u32)) {
        self.local.push(who);
        counts.attach(shard);
    }

    /// Connection `who` leaves MONITOR mode (closed, or RESET).
    pub fn detach(&mut self, counts: &Monitors, shard: usize, who: (u32, u32)) {
        self.local.retain(|&w| w != who);
        counts.detach(shard);
    }
}

/// Who sent a command, as the line names it.
#[derive(Clone, Copy, Debug)]
pub enum Source<'a> {
    /// A client connection: its `ip:port`.
    Client(&'a str),
    /// A script's `redis.call`.
    Lua,
}

thread_local! {
    /// Lines fed on this shard's thread and not yet handed to the monitors.
    static PENDING: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// Feed the monitors command `args`, run in database `db` by `source` (see the
/// module docs for which commands Redis feeds).
pub fn feed(db: usize, source: Source<'_>, args: Args<'_>) {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    PENDING.with(|p| write_line(&mut p.borrow_mut(), now, db, source, args));
}

/// The engine's sink for a script's calls (see `ruvio_engine::scripting::set_monitor_sink`).
pub fn feed_script_call(db: usize, args: Args<'_>) {
    feed(db, Source::Lua, args);
}

/// The lines fed since the last take (empty most of the time).
pub fn take_pending() -> Vec<u8> {
    PENDING.with(|p| std::mem::take(&mut *p.borrow_mut()))
}

/// Whether lines wait to be handed out.
pub fn has_pending() -> bool {
    PENDING.with(|p| !p.borrow().is_empty())
}

/// One line as Redis's `replicationFeedMonitors` writes it, status-reply framed:
/// `+1339518083.107412 [0 127.0.0.1:60866] "keys" "*"`.
fn write_line(
    out: &mut Vec<u8>,
    now: std::time::Duration,
    db: usize,
    source: Source<'_>,
    args: Args<'_>,
) {
    let _ = write!(out, "+{}.{:06} [{db} ", now.as_secs(), now.subsec_micros());
    match source {
        Source::Client(addr) => out.extend_from_slice(addr.as_bytes()),
        Source::Lua => out.extend_from_slice(b"lua"),
    }
    out.push(b']');
    let secret = redacted_from(args);
    for (i, arg) in args.iter().enumerate() {
        out.push(b' ');
        if secret.as_ref().is_some_and(|s| s.contains(&i)) {
            out.extend_from_slice(b"\"(redacted)\"");
        } else {
            quote(out, arg);
        }
    }
    out.extend_from_slice(b"\r\n");
}

/// The arguments Redis redacts (`redactClientCommandArgument`): AUTH's, HELLO's
/// AUTH username and password, MIGRATE's AUTH / AUTH2 credentials.
fn redacted_from(args: Args<'_>) -> Option<std::ops::Range<usize>> {
    let name = args.get(0);
    let after = |token: &[u8], count: usize| {
        (1..args.len())
            .find(|&i| args.get(i).eq_ignore_ascii_case(token))
            .map(|i| i + 1..(i + 1 + count).min(args.len()))
    };
    if name.eq_ignore_ascii_case(b"auth") {
        Some(1..args.len())
    } else if name.eq_ignore_ascii_case(b"hello") {
        after(b"auth", 2)
    } else if name.eq_ignore_ascii_case(b"migrate") {
        after(b"auth", 1).or_else(|| after(b"auth2", 2))
    } else {
        None
    }
}

/// Redis's `sdscatrepr`: quoted, with C escapes for the quote, the backslash and
/// control characters and `\xHH` for other unprintable bytes.
fn quote(out: &mut Vec<u8>, arg: &[u8]) {
    out.push(b'"');
    for &b in arg {
        match b {
            b'\\' | b'"' => out.extend_from_slice(&[b'\\', b]),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            7 => out.extend_from_slice(b"\\a"),
            8 => out.extend_from_slice(b"\\b"),
            0x20..=0x7e => out.push(b),
            _ => {
                let _ = write!(out, "\\x{b:02x}");
            }
        }
    }
    out.push(b'"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use ruvio_resp::OwnedArgs;

    fn line(args: &[&[u8]], source: Source<'_>) -> String {
        let mut owned = OwnedArgs::default();
        args.iter().for_each(|a| owned.push(a));
        let mut out = Vec::new();
        let now = std::time::Duration::new(1339518083, 107_412_000);
        write_line(&mut out, now, 3, source, owned.args());
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn a_line_is_written_as_redis_writes_it() {
        assert_eq!(
            line(
                &[b"set", b"a\"b\\\n\x01\xff"],
                Source::Client("127.0.0.1:6000")
            ),
            "+1339518083.107412 [3 127.0.0.1:6000] \"set\" \"a\\\"b\\\\\\n\\x01\\xff\"\r\n"
        );
        assert_eq!(
            line(&[b"get", b"k"], Source::Lua),
            "+1339518083.107412 [3 lua] \"get\" \"k\"\r\n"
        );
    }

    #[test]
    fn secrets_are_redacted_as_redis_redacts_them() {
        let l = line(&[b"AUTH", b"user", b"pass"], Source::Lua);
        assert!(
            l.ends_with("\"AUTH\" \"(redacted)\" \"(redacted)\"\r\n"),
            "{l}"
        );
        let l = line(
            &[b"hello", b"3", b"auth", b"u", b"p", b"setname", b"n"],
            Source::Lua,
        );
        assert!(
            l.ends_with(
                "\"hello\" \"3\" \"auth\" \"(redacted)\" \"(redacted)\" \"setname\" \"n\"\r\n"
            ),
            "{l}"
        );
        let l = line(&[b"hello", b"3", b"AUTH", b"u"], Source::Lua);
        assert!(l.ends_with("\"AUTH\" \"(redacted)\"\r\n"), "{l}");
    }
}
