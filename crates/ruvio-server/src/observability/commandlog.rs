//! The command logs: SLOWLOG's (Valkey's `slow` command log) and Valkey 8.1's
//! `large-request` and `large-reply` logs, which share one entry shape (id, Unix
//! time, amount, argv, client address, client name) and differ in what the
//! amount is (microseconds, request bytes, reply bytes).
//!
//! Each shard keeps its own three logs, newest first, behind a lock that only the
//! shard takes when it logs a command (a slow or large one: rarely, unless a
//! threshold is 0) and SLOWLOG / COMMANDLOG take when they read or reset; ids come
//! from one counter per log kind for the whole process, so they are unique and
//! increase server-wide and a read merges the shards' logs newest first by id.
//!
//! An entry keeps what Redis keeps (slowlog.c's `slowlogCreateEntry`): at most
//! [`ENTRY_ARGS_MAX`] arguments, the last replaced by `... (N more arguments)`,
//! each cut at [`ENTRY_ARG_BYTES_MAX`] bytes with `... (N more bytes)`; the
//! password of AUTH, HELLO AUTH, MIGRATE's AUTH and AUTH2 and CONFIG SET of a
//! sensitive parameter are `(redacted)`, as Redis 7.0 redacts them.

use ruvio_resp::Args;
use std::collections::VecDeque;

/// Arguments an entry keeps (Redis's SLOWLOG_ENTRY_MAX_ARGC): logging a huge
/// MSET whole would cost more memory than it tells.
pub const ENTRY_ARGS_MAX: usize = 32;

/// Bytes of one argument an entry keeps (Redis's SLOWLOG_ENTRY_MAX_STRING).
pub const ENTRY_ARG_BYTES_MAX: usize = 128;

/// What Redis writes for an argument it does not show.
const REDACTED: &[u8] = b"(redacted)";

/// The three command logs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogKind {
    /// Execution time above `slowlog-log-slower-than` (SLOWLOG's log).
    Slow = 0,
    /// A request above `commandlog-request-larger-than` bytes.
    LargeRequest = 1,
    /// A reply above `commandlog-reply-larger-than` bytes.
    LargeReply = 2,
}

/// Log kinds.
pub const LOG_KINDS: usize = 3;

impl LogKind {
    /// The kind COMMANDLOG names `name` (any case, as Valkey's `strcasecmp`).
    pub fn parse(name: &[u8]) -> Option<LogKind> {
        [
            (b"slow".as_slice(), LogKind::Slow),
            (b"large-request", LogKind::LargeRequest),
            (b"large-reply", LogKind::LargeReply),
        ]
        .into_iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, kind)| kind)
    }
}

/// One logged command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub id: u64,
    pub unix_s: u64,
    /// Microseconds (slow) or bytes (large-request, large-reply).
    pub amount: u64,
    pub argv: Vec<Box<[u8]>>,
    /// The client's `addr:port`.
    pub peer: Box<str>,
    pub name: Box<[u8]>,
}

/// The client a logged command came from.
#[derive(Clone, Copy, Debug)]
pub struct Client<'a> {
    pub peer: &'a str,
    pub name: &'a [u8],
}

/// A command's arguments as an entry keeps them (see the module docs).
pub fn kept_argv(args: Args<'_>) -> Vec<Box<[u8]>> {
    let argc = args.len();
    let kept = argc.min(ENTRY_ARGS_MAX);
    let hidden = hidden_args(args);
    let mut out = Vec::with_capacity(kept);
    for (i, arg) in args.iter().take(kept).enumerate() {
        if kept != argc && i == kept - 1 {
            let more = argc - kept + 1;
            out.push(format!("... ({more} more arguments)").into_bytes().into());
        } else if hidden >> i & 1 == 1 {
            out.push(REDACTED.into());
        } else if arg.len() > ENTRY_ARG_BYTES_MAX {
            let mut cut = arg[..ENTRY_ARG_BYTES_MAX].to_vec();
            let more = arg.len() - ENTRY_ARG_BYTES_MAX;
            cut.extend_from_slice(format!("... ({more} more bytes)").as_bytes());
            out.push(cut.into());
        } else {
            out.push(arg.into());
        }
    }
    out
}

/// Redis's SENSITIVE_CONFIG parameters: CONFIG SET hides their values.
const SENSITIVE_PARAMS: &[&[u8]] = &[b"requirepass", b"masterauth"];

/// The positions (bits, below [`ENTRY_ARGS_MAX`]) of the arguments Redis 7.0
/// redacts: every argument of AUTH, HELLO's `AUTH username password`, CONFIG
/// SET's values of sensitive parameters.
fn hidden_args(args: Args<'_>) -> u64 {
    const _: () = assert!(ENTRY_ARGS_MAX < 64, "one bit per kept argument");
    let argc = args.len().min(ENTRY_ARGS_MAX);
    let is = |i: usize, word: &[u8]| i < args.len() && args.get(i).eq_ignore_ascii_case(word);
    let mut hidden = 0u64;
    if is(0, b"auth") {
        hidden = !0 << 1;
    } else if is(0, b"config") && is(1, b"set") {
        for i in (2..argc.saturating_sub(1)).step_by(2) {
            if SENSITIVE_PARAMS.iter().any(|p| is(i, p)) {
                hidden |= 1 << (i + 1);
            }
        }
    } else if is(0, b"hello") {
        // HELLO [protover [AUTH username password] [SETNAME name]]
        let mut i = 2;
        while i < argc {
            if is(i, b"auth") {
                hidden |= 0b11 << (i + 1);
                i += 3;
            } else {
                i += 2;
            }
        }
    } else if is(0, b"migrate") {
        // MIGRATE's option loop (cmd/migrate/): AUTH's password, AUTH2's user
        // and password, until KEYS or an option it does not know.
        let mut i = 6;
        while i < argc {
            if is(i, b"auth") && i + 1 < argc {
                hidden |= 1 << (i + 1);
                i += 2;
            } else if is(i, b"auth2") && i + 2 < argc {
                hidden |= 0b11 << (i + 1);
                i += 3;
            } else if is(i, b"copy") || is(i, b"replace") {
                i += 1;
            } else {
                break;
            }
        }
    }
    hidden
}

/// One shard's three logs, newest first.
#[derive(Debug, Default)]
pub struct ShardLogs {
    logs: [VecDeque<Entry>; LOG_KINDS],
}

impl ShardLogs {
    /// Add `entry` to log `kind`, keeping at most `len_max` entries.
    pub fn push(&mut self, kind: LogKind, entry: Entry, len_max: usize) {
        let log = &mut self.logs[kind as usize];
        log.push_front(entry);
        log.truncate(len_max);
    }

    /// Log `kind`, newest first.
    pub fn entries(&self, kind: LogKind) -> impl Iterator<Item = &Entry> {
        self.logs[kind as usize].iter()
    }

    pub fn len(&self, kind: LogKind) -> usize {
        self.logs[kind as usize].len()
    }

    pub fn reset(&mut self, kind: LogKind) {
        self.logs[kind as usize].clear();
    }
}

/// Up to `count` entries of several shards' logs, newest first: the merge by id
/// of each log's newest `count`.
pub fn newest<'a>(
    logs: impl Iterator<Item = &'a ShardLogs>,
    kind: LogKind,
    count: usize,
) -> Vec<Entry> {
    let mut all: Vec<Entry> = Vec::new();
    for log in logs {
        all.extend(log.entries(kind).take(count).cloned());
    }
    all.sort_unstable_by_key(|e| std::cmp::Reverse(e.id));
    all.truncate(count);
    all
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kept(args: &[&[u8]]) -> Vec<Vec<u8>> {
        let owned = ruvio_resp::OwnedArgs::from_iter(args.iter().copied());
        kept_argv(owned.args())
            .into_iter()
            .map(|a| a.to_vec())
            .collect()
    }

    #[test]
    fn arguments_past_the_limit_are_counted_in_the_last_one() {
        let many: Vec<Vec<u8>> = (0..40).map(|i| i.to_string().into_bytes()).collect();
        let refs: Vec<&[u8]> = many.iter().map(|a| a.as_slice()).collect();
        let out = kept(&refs);
        assert_eq!(out.len(), ENTRY_ARGS_MAX);
        assert_eq!(out[30], b"30");
        assert_eq!(out[31], b"... (9 more arguments)");
        assert_eq!(kept(&refs[..32]).len(), 32);
        assert_eq!(kept(&refs[..32])[31], b"31");
    }

    #[test]
    fn long_arguments_are_cut() {
        let long = vec![b'x'; 200];
        let out = kept(&[b"set", b"k", &long]);
        let mut expected = vec![b'x'; 128];
        expected.extend_from_slice(b"... (72 more bytes)");
        assert_eq!(out[2], expected);
        assert_eq!(kept(&[b"set", b"k", &long[..128]])[2].len(), 128);
    }

    #[test]
    fn auth_is_redacted() {
        let r = REDACTED.to_vec();
        assert_eq!(
            kept(&[b"AUTH", b"user", b"pw"])[1..],
            [r.clone(), r.clone()]
        );
        let hello = kept(&[b"HELLO", b"3", b"AUTH", b"u", b"p", b"SETNAME", b"n"]);
        assert_eq!(
            hello[3..],
            [r.clone(), r.clone(), b"SETNAME".to_vec(), b"n".to_vec()]
        );
        let config = kept(&[b"CONFIG", b"SET", b"maxmemory", b"1", b"requirepass", b"pw"]);
        assert_eq!(
            config[3..],
            [b"1".to_vec(), b"requirepass".to_vec(), r.clone()]
        );
        let migrate = kept(&[
            b"MIGRATE", b"h", b"1", b"", b"0", b"5", b"COPY", b"AUTH2", b"u", b"p", b"KEYS",
            b"AUTH",
        ]);
        assert_eq!(
            migrate[7..],
            [
                b"AUTH2".to_vec(),
                r.clone(),
                r.clone(),
                b"KEYS".to_vec(),
                b"AUTH".to_vec()
            ]
        );
        let migrate = kept(&[b"MIGRATE", b"h", b"1", b"k", b"0", b"5", b"AUTH", b"pw"]);
        assert_eq!(migrate[6..], [b"AUTH".to_vec(), r]);
    }

    #[test]
    fn merged_logs_are_newest_first() {
        let entry = |id| Entry {
            id,
            unix_s: 0,
            amount: 0,
            argv: Vec::new(),
            peer: "".into(),
            name: Box::default(),
        };
        let mut a = ShardLogs::default();
        let mut b = ShardLogs::default();
        for id in [0, 2, 5] {
            a.push(LogKind::Slow, entry(id), 10);
        }
        for id in [1, 3, 4] {
            b.push(LogKind::Slow, entry(id), 2);
        }
        let ids: Vec<u64> = newest([&a, &b].into_iter(), LogKind::Slow, 4)
            .iter()
            .map(|e| e.id)
            .collect();
        assert_eq!(ids, [5, 4, 3, 2]);
    }
}
