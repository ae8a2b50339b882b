//! The check before a command runs (`ACLCheckAllUserCommandPerm`): a bit test of
//! the command's row, then, only for a selector without `allkeys` /
//! `allchannels`, the glob patterns against the command's keys and channels.
//!
//! Keys come from the row's key positions; whether a key is read or written
//! (for `%R~` / `%W~` patterns) from Redis's key specs (COMMAND INFO's flags),
//! looked up only when a selector has such a pattern.

use super::rules::{Selector, User, KEY_ALL, KEY_READ, KEY_WRITE};
use ruvio_engine::command::flags::{NO_AUTH, PUBSUB};
use ruvio_engine::{glob_match, CommandMeta};
use ruvio_resp::Args;

/// Why a command was refused, with the argument that caused it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Denied {
    Command,
    /// The key at this argument position.
    Key(usize),
    /// The channel at this argument position.
    Channel(usize),
}

impl Denied {
    /// Redis's ranking when several selectors refuse: a channel over a key over
    /// the command.
    fn rank(self) -> (u8, usize) {
        match self {
            Denied::Command => (1, 0),
            Denied::Key(i) => (2, i),
            Denied::Channel(i) => (4, i),
        }
    }

    /// The `-NOPERM` line Redis 7.0 answers a client's own command with.
    pub fn noperm_line(self, command: &str) -> Vec<u8> {
        match self {
            Denied::Command => {
                format!("NOPERM this user has no permissions to run the '{command}' command").into_bytes()
            }
            Denied::Key(_) => {
                b"NOPERM this user has no permissions to access one of the keys used as arguments".to_vec()
            }
            Denied::Channel(_) => {
                b"NOPERM this user has no permissions to access one of the channels used as arguments"
                    .to_vec()
            }
        }
    }

    /// The `-NOPERM` line of a command EXEC runs that its user may no longer
    /// run (the rules changed after it was queued).
    pub fn noperm_at_exec_line(self) -> Vec<u8> {
        let reason = match self {
            Denied::Command => "no permission to execute the command or subcommand",
            Denied::Key(_) => "no permission to touch the specified keys",
            Denied::Channel(_) => "no permission to access one of the channels used as arguments",
        };
        format!(
            "NOPERM ACLs rules changed between the moment the transaction was accumulated and \
             the EXEC call. This command is no longer allowed for the following reason: {reason}"
        )
        .into_bytes()
    }

    /// What a script's `redis.call` fails with (`scriptVerifyACL` with
    /// `getAclErrorMessage`'s reasons).
    pub fn script_line(self) -> &'static str {
        match self {
            Denied::Command => {
                "ERR The user executing the script can't run this command or subcommand"
            }
            Denied::Key(_) => {
                "ERR The user executing the script can't access at least one of the keys \
                 mentioned in the command arguments"
            }
            Denied::Channel(_) => {
                "ERR The user executing the script can't publish to the channel mentioned in \
                 the command"
            }
        }
    }

    /// ACL LOG's `reason`.
    pub fn log_reason(self) -> &'static str {
        match self {
            Denied::Command => "command",
            Denied::Key(_) => "key",
            Denied::Channel(_) => "channel",
        }
    }
}

/// What the check reads of one command row, worked out once when the command
/// table is built (`cmd::registry`) or a script first calls the row, instead
/// of per request from the row's flags and key spec.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CheckRow {
    /// The row's catalog bit.
    pub bit: usize,
    /// Which way the check goes.
    shape: Shape,
    /// A [`Shape::Run`]'s keys, `range_positions`' bounds in unsigned
    /// arithmetic: from `first` every `step`, before both `stop` (Redis's
    /// `last` + 1, when not counted from the end) and `argc - back` (`last`
    /// counted from the end: `-back - 1`). No key: an empty run.
    first: usize,
    stop: usize,
    back: usize,
    step: usize,
}

/// How [`check_row`] finds a row's keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Shape {
    /// One run of keys, or none (GET, SET, MGET, MSET, HSET, DEL, PING ...).
    Run,
    /// A key count at `at`, then that many keys (EVAL, EVALSHA, FCALL).
    NumKeys { at: usize },
    /// Any other spec: [`ruvio_engine::KeySpec::positions`].
    Other,
    /// A `no-auth` or Pub/Sub row: the general [`check`] (they need the
    /// row's name and flags).
    General,
}

impl CheckRow {
    /// The row `meta` with catalog bit `bit`.
    pub fn new(meta: &CommandMeta, bit: usize) -> CheckRow {
        use ruvio_engine::command::KeyShape;
        let mut row = CheckRow {
            bit,
            shape: Shape::Run,
            first: 1,
            stop: 0,
            back: 0,
            step: 1,
        };
        match meta.keys.0 {
            // No key (`range_positions`: a range from 0 names none either).
            [] | [KeyShape::Range { first: 0, .. }] => {}
            &[KeyShape::Range { first, last, step }] if first > 0 => {
                row.first = first as usize;
                row.step = step.max(1) as usize;
                if last >= 0 {
                    row.stop = last as usize + 1;
                } else {
                    row.stop = usize::MAX;
                    row.back = last.unsigned_abs() as usize - 1;
                }
            }
            &[KeyShape::NumKeys { at }] => row.shape = Shape::NumKeys { at },
            _ => row.shape = Shape::Other,
        }
        if meta.has(NO_AUTH) || meta.has(PUBSUB) {
            row.shape = Shape::General;
        }
        row
    }
}

/// [`check`] of a row worked out in advance: for a user with one selector
/// without `%R~`/`%W~` patterns that may run the row (nearly every request of a
/// restricted client), the bit, then the keys from the row's precomputed run;
/// any other case goes the general way, out of line. Same answers as
/// [`check`] (`fast_path_answers_as_the_general_check` in `cmd::registry`).
#[inline(always)]
pub fn check_row(
    user: &User,
    row: &CheckRow,
    meta: &CommandMeta,
    args: Args<'_>,
) -> Result<(), Denied> {
    if let [s] = user.selectors.as_slice() {
        if row.shape != Shape::General && !s.keys_by_perm && (s.bit(row.bit) || s.all_commands) {
            if s.all_keys {
                return Ok(());
            }
            return row_keys_ok(s, row, meta, args);
        }
    }
    check_cold(user, row.bit, meta, args)
}

/// The general check, kept out of the request path's code.
#[inline(never)]
fn check_cold(user: &User, bit: usize, meta: &CommandMeta, args: Args<'_>) -> Result<(), Denied> {
    check(user, bit, meta, args)
}

/// The keys of a row of [`Shape::Run`] or [`Shape::NumKeys`] against a
/// selector without `%R~`/`%W~` patterns.
#[inline(always)]
fn row_keys_ok(
    s: &Selector,
    row: &CheckRow,
    meta: &CommandMeta,
    args: Args<'_>,
) -> Result<(), Denied> {
    let argc = args.len();
    let (begin, end, step) = if row.shape == Shape::Run {
        (
            row.first,
            row.stop.min(argc.saturating_sub(row.back)),
            row.step,
        )
    } else if let Shape::NumKeys { at } = row.shape {
        (at + 1, at + 1 + numkeys(args, at), 1)
    } else {
        return other_keys_ok(s, meta, args);
    };
    // Short prefixes only (`~app:*`): each key of 8 bytes or more is one
    // masked word compared with each, the first (most often the only one)
    // held in registers for the whole run.
    let Some((&(word, mask), more)) = s.prefix_words.as_deref().and_then(<[_]>::split_first) else {
        return glob_keys_ok(s, args, (begin, end, step));
    };
    let mut pos = begin;
    while pos < end {
        let key = args.get(pos);
        let ok = match key.first_chunk::<8>() {
            Some(head) => {
                let head = u64::from_le_bytes(*head);
                head & mask == word || more.iter().any(|&(word, mask)| head & mask == word)
            }
            None => glob_key_ok(s, key),
        };
        if !ok {
            return Err(Denied::Key(pos));
        }
        pos += step;
    }
    Ok(())
}

/// A run of keys against the selector's patterns as globs (patterns that are
/// not all short prefixes), out of line.
#[inline(never)]
fn glob_keys_ok(
    s: &Selector,
    args: Args<'_>,
    (begin, end, step): (usize, usize, usize),
) -> Result<(), Denied> {
    let mut pos = begin;
    while pos < end {
        if !glob_key_ok(s, args.get(pos)) {
            return Err(Denied::Key(pos));
        }
        pos += step;
    }
    Ok(())
}

/// The keys of a row of any other spec ([`Shape::Other`]), out of line.
#[inline(never)]
fn other_keys_ok(s: &Selector, meta: &CommandMeta, args: Args<'_>) -> Result<(), Denied> {
    for pos in meta.keys.positions(args) {
        if !plain_key_ok(s, args.get(pos)) {
            return Err(Denied::Key(pos));
        }
    }
    Ok(())
}

/// A key against the selector's patterns as globs (a short key, or patterns
/// that are not all short prefixes), out of the loop's code.
#[inline(never)]
fn glob_key_ok(s: &Selector, key: &[u8]) -> bool {
    s.keys.iter().any(|k| k.matcher.matches(key))
}

/// The key count at `at` as [`ruvio_engine::KeySpec::positions`] reads it (a
/// count that is not a whole number in 1..argc - at names no key), one digit
/// without the general parse (EVALSHA sha 1 key).
#[inline(always)]
fn numkeys(args: Args<'_>, at: usize) -> usize {
    let argc = args.len();
    if at >= argc {
        return 0;
    }
    let count = match args.get(at) {
        &[digit @ b'1'..=b'9'] => (digit - b'0') as usize,
        text => ruvio_resp::string2ll(text)
            .and_then(|n| usize::try_from(n).ok())
            .unwrap_or(0),
    };
    if count > 0 && count < argc - at {
        count
    } else {
        0
    }
}

/// A key against a selector without `%R~`/`%W~` patterns ([`key_ok`]'s first
/// half).
#[inline]
fn plain_key_ok(s: &Selector, key: &[u8]) -> bool {
    if let (Some(words), Some(head)) = (&s.prefix_words, key.first_chunk::<8>()) {
        let head = u64::from_le_bytes(*head);
        return words.iter().any(|&(word, mask)| head & mask == word);
    }
    s.keys.iter().any(|k| k.matcher.matches(key))
}

/// May `user` run the row `bit` (`meta`) with `args`? The request path takes
/// [`check_row`]; MULTI's queueing, EXEC and ACL DRYRUN come here.
#[inline(always)]
pub fn check(user: &User, bit: usize, meta: &CommandMeta, args: Args<'_>) -> Result<(), Denied> {
    // Most users have the root selector alone: its answer is the user's.
    if let [root] = user.selectors.as_slice() {
        return check_selector(root, bit, meta, args);
    }
    let mut worst = Denied::Command;
    for selector in &user.selectors {
        match check_selector(selector, bit, meta, args) {
            Ok(()) => return Ok(()),
            Err(d) if d.rank() > worst.rank() => worst = d,
            Err(_) => {}
        }
    }
    Err(worst)
}

#[inline(always)]
fn check_selector(
    s: &Selector,
    bit: usize,
    meta: &CommandMeta,
    args: Args<'_>,
) -> Result<(), Denied> {
    // The row's bit first: set for almost every command a user runs.
    if !s.all_commands && !s.bit(bit) && !meta.has(NO_AUTH) {
        let arg_at = if meta.name.contains('|') { 2 } else { 1 };
        let allowed = args.len() > arg_at
            && s.firstargs
                .iter()
                .filter(|(b, _)| *b == bit)
                .flat_map(|(_, a)| a)
                .any(|a| a.eq_ignore_ascii_case(args.get(arg_at)));
        if !allowed {
            return Err(Denied::Command);
        }
    }
    // A Pub/Sub row's "keys" are shard channels (SPUBLISH, SSUBSCRIBE: routed
    // by slot, but Redis's key specs mark them `not_key`): checked as channels.
    if !s.all_keys && !meta.keys.is_none() && !meta.has(PUBSUB) {
        // Keys in one range (most commands): no positions list to build.
        // A plain loop: `find`'s closure was left out of line, at a third of
        // the check's cost.
        match meta.keys.single_range(args) {
            Some(range) => {
                for pos in range {
                    if !key_ok(s, meta, args, pos) {
                        return Err(Denied::Key(pos));
                    }
                }
            }
            None => {
                for pos in meta.keys.positions(args) {
                    if !key_ok(s, meta, args, pos) {
                        return Err(Denied::Key(pos));
                    }
                }
            }
        }
    }
    // Only Pub/Sub rows name channels: one flag test for the rest.
    if !s.all_channels && meta.has(PUBSUB) {
        if let Some((one, pattern)) = channel_args(meta.name) {
            let end = if one { 2.min(args.len()) } else { args.len() };
            for pos in 1..end {
                if !channel_ok(s, args.get(pos), pattern) {
                    return Err(Denied::Channel(pos));
                }
            }
        }
    }
    Ok(())
}

/// May selector `s` touch the key at argument `pos`? Only a selector with a
/// `%R~` / `%W~` pattern asks the key specs whether the command reads or writes
/// it ([`Selector::keys_by_perm`]).
#[inline(always)]
fn key_ok(s: &Selector, meta: &CommandMeta, args: Args<'_>, pos: usize) -> bool {
    let key = args.get(pos);
    if !s.keys_by_perm {
        return plain_key_ok(s, key);
    }
    let need = key_needs(meta, args, pos);
    s.keys
        .iter()
        .any(|k| k.perms & need == need && k.matcher.matches(key))
}

/// SORT's BY and GET patterns name keys the command's key positions do not
/// show, so Redis 7.0 allows them only to a user who may read every key (for
/// this call): the error SORT answers otherwise, for the first such option.
pub fn sort_refusal(
    user: &User,
    bit: usize,
    meta: &CommandMeta,
    args: Args<'_>,
) -> Option<&'static str> {
    if meta.name != "sort" && meta.name != "sort_ro" {
        return None;
    }
    let reads_all = user.selectors.iter().any(|s| {
        check_selector(s, bit, meta, args).is_ok()
            && (s.all_keys
                || s.keys
                    .iter()
                    .any(|k| k.pattern == b"*" && k.perms & KEY_READ != 0))
    });
    if reads_all {
        return None;
    }
    // SORT's own walk of its options (`sortCommandGeneric`), up to the first
    // one it would refuse for another reason.
    let mut j = 2;
    while j < args.len() {
        let more = args.len() - j - 1;
        let opt = args.get(j);
        let is = |word: &str| opt.eq_ignore_ascii_case(word.as_bytes());
        if is("asc") || is("desc") || is("alpha") {
            j += 1;
        } else if is("limit") && more >= 2 {
            let int = |i: usize| ruvio_resp::string2ll(args.get(i)).is_some();
            if !int(j + 1) || !int(j + 2) {
                return None;
            }
            j += 3;
        } else if is("store") && more >= 1 && meta.name == "sort" {
            j += 2;
        } else if is("by") && more >= 1 {
            if args.get(j + 1).contains(&b'*') {
                return Some("ERR BY option of SORT denied due to insufficient ACL permissions.");
            }
            j += 2;
        } else if is("get") && more >= 1 {
            return Some("ERR GET option of SORT denied due to insufficient ACL permissions.");
        } else {
            return None;
        }
    }
    None
}

/// Is the channel (or, for PSUBSCRIBE, the literal pattern) allowed?
pub fn channel_ok(s: &Selector, channel: &[u8], pattern: bool) -> bool {
    s.all_channels
        || s.channels.iter().any(|c| {
            if pattern {
                c == channel
            } else {
                glob_match(c, channel)
            }
        })
}

/// Whether a Pub/Sub command names channels it publishes or subscribes to: the
/// first argument only (PUBLISH) or every argument, and whether they are
/// patterns.
fn channel_args(name: &str) -> Option<(bool, bool)> {
    match name {
        "publish" | "spublish" => Some((true, false)),
        "subscribe" | "ssubscribe" => Some((false, false)),
        "psubscribe" => Some((false, true)),
        _ => None,
    }
}

/// What the command does to the key at `pos`, from Redis's key specs:
/// [`KEY_READ`] for access, [`KEY_WRITE`] for insert, delete or update.
fn key_needs(meta: &CommandMeta, args: Args<'_>, pos: usize) -> u8 {
    let Some(docs) = ruvio_engine::command::docs::lookup(meta.name) else {
        return KEY_ALL;
    };
    let mut need = 0;
    for flag in docs.key_flags(meta.name, args, pos) {
        match flag {
            "access" => need |= KEY_READ,
            "insert" | "delete" | "update" => need |= KEY_WRITE,
            _ => {}
        }
    }
    need
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_channel_outranks_a_key_outranks_the_command() {
        assert!(Denied::Channel(1).rank() > Denied::Key(5).rank());
        assert!(Denied::Key(1).rank() > Denied::Command.rank());
        assert!(Denied::Key(2).rank() > Denied::Key(1).rank());
    }
}
