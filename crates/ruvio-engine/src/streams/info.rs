//! XINFO STREAM [FULL [COUNT n]], XINFO GROUPS, XINFO CONSUMERS, XINFO HELP:
//! Redis 7.2's `xinfoCommand` replies, maps in RESP3 and flat arrays in RESP2.
//!
//! 7.2 added one thing to 7.0's: a consumer's `active-time`, the last time it
//! was given an entry to own (XREADGROUP `>` without NOACK, XCLAIM,
//! XAUTOCLAIM; -1 before that), beside `seen-time`, the last time a command
//! named it. XINFO CONSUMERS shows it as `inactive` (ms since, or -1) after
//! `idle`; XINFO STREAM FULL's consumers as `active-time` after `seen-time`.
//! XINFO GROUPS and XINFO STREAM are 7.0's.
//!
//! `radix-tree-nodes` is the node count of the radix tree Redis would hold for
//! the same node keys ([`rax_nodes`]), computed on demand: O(nodes), which XINFO
//! can afford and appends should not pay for.

use ruvio_resp::{Args, Reply};

use super::group_commands::error_with;
use super::groups::{Group, ENTRIES_READ_UNKNOWN, NEVER_ACTIVE};
use super::id::StreamId;
use super::{reply_entry, stream_at, StreamValue};
use crate::command::{reply_help, CmdResult, ExecCtx, Outcome::Done};
use crate::error::CmdError;
use crate::Engine;

/// Entries (and pending entries) XINFO STREAM FULL shows without COUNT.
const FULL_COUNT_DEFAULT: usize = 10;

const XINFO_HELP: &[&str] = &[
    "CONSUMERS <key> <groupname>",
    "    Show consumers of <groupname>.",
    "GROUPS <key>",
    "    Show the stream consumer groups.",
    "STREAM <key> [FULL [COUNT <count>]",
    "    Show information about the stream.",
];

/// `XINFO HELP`.
pub(super) fn xinfo_help(
    _e: &mut Engine,
    _ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    reply_help(r, args.get(0), XINFO_HELP);
    Ok(Done)
}

/// The stream at `args[2]`, or `ERR no such key` / WRONGTYPE.
fn info_stream<'e>(
    e: &'e mut Engine,
    ctx: &ExecCtx,
    args: Args<'_>,
) -> Result<&'e StreamValue, CmdError> {
    let at = e.lookup_read(ctx, args.get(2)).ok_or(CmdError::NoSuchKey)?;
    stream_at(e, ctx.db, at)
}

/// `unknown subcommand or wrong number of arguments for '<sub>'. Try XINFO HELP.`
fn subcommand_syntax(args: Args<'_>) -> CmdError {
    let sub = args.get(1);
    let sub = &sub[..sub.len().min(128)];
    error_with(&[
        b"ERR unknown subcommand or wrong number of arguments for '",
        sub,
        b"'. Try XINFO HELP.",
    ])
}

/// An entries-read counter: an integer, or null when unknown.
fn reply_entries_read(r: &mut Reply<'_>, read: i64) {
    match read {
        ENTRIES_READ_UNKNOWN => r.null(),
        n => r.int(n),
    }
}

fn reply_lag(r: &mut Reply<'_>, s: &StreamValue, g: &Group) {
    match s.lag(g.last_id, g.entries_read) {
        Some(lag) => r.int(lag),
        None => r.null(),
    }
}

/// `XINFO CONSUMERS key group`: each consumer's name, pending count, idle ms
/// (since seen) and inactive ms (since active, -1 when never).
pub(super) fn xinfo_consumers(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    let now = ctx.now_ms as i64;
    let s = info_stream(e, ctx, args)?;
    let (key, group) = (args.get(2), args.get(3));
    let Some(g) = s.groups().get(group) else {
        return Err(error_with(&[
            b"NOGROUP No such consumer group '",
            group,
            b"' for key name '",
            key,
            b"'",
        ]));
    };
    r.array(g.consumers.len());
    for (name, c) in &g.consumers {
        r.map(4);
        r.bulk(b"name");
        r.bulk(name);
        r.bulk(b"pending");
        r.int(c.pel.len() as i64);
        r.bulk(b"idle");
        r.int((now - c.seen_ms).max(0));
        r.bulk(b"inactive");
        r.int(match c.active_ms {
            NEVER_ACTIVE => NEVER_ACTIVE,
            active => now - active,
        });
    }
    Ok(Done)
}

/// `XINFO GROUPS key`.
pub(super) fn xinfo_groups(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    let s = info_stream(e, ctx, args)?;
    r.array(s.groups().len());
    for (name, g) in s.groups().iter() {
        r.map(6);
        r.bulk(b"name");
        r.bulk(name);
        r.bulk(b"consumers");
        r.int(g.consumers.len() as i64);
        r.bulk(b"pending");
        r.int(g.pel.len() as i64);
        r.bulk(b"last-delivered-id");
        r.bulk(&g.last_id.format());
        r.bulk(b"entries-read");
        reply_entries_read(r, g.entries_read);
        r.bulk(b"lag");
        reply_lag(r, s, g);
    }
    Ok(Done)
}

/// `XINFO STREAM key [FULL [COUNT count]]`.
pub(super) fn xinfo_stream(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    let s = info_stream(e, ctx, args)?;
    let mut full = None;
    if args.len() > 3 {
        if !args.get(3).eq_ignore_ascii_case(b"full") {
            return Err(subcommand_syntax(args));
        }
        let mut count = FULL_COUNT_DEFAULT;
        if args.len() > 4 {
            if args.len() != 6 || !args.get(4).eq_ignore_ascii_case(b"count") {
                return Err(subcommand_syntax(args));
            }
            count = match crate::args::int_arg(args.get(5))? {
                0 => usize::MAX,
                n if n < 0 => FULL_COUNT_DEFAULT,
                n => n as usize,
            };
        }
        full = Some(count);
    }
    r.map(if full.is_some() { 9 } else { 10 });
    r.bulk(b"length");
    r.int(s.len() as i64);
    r.bulk(b"radix-tree-keys");
    r.int(s.node_count() as i64);
    r.bulk(b"radix-tree-nodes");
    r.int(rax_nodes(s) as i64);
    r.bulk(b"last-generated-id");
    r.bulk(&s.last_id().format());
    r.bulk(b"max-deleted-entry-id");
    r.bulk(&s.max_deleted_id().format());
    r.bulk(b"entries-added");
    r.int(s.entries_added() as i64);
    r.bulk(b"recorded-first-entry-id");
    r.bulk(&s.recorded_first_id().format());
    match full {
        None => reply_summary(r, s),
        Some(count) => reply_full(r, s, count),
    }
    Ok(Done)
}

/// The rest of the plain XINFO STREAM: group count, first and last entries.
fn reply_summary(r: &mut Reply<'_>, s: &StreamValue) {
    r.bulk(b"groups");
    r.int(s.groups().len() as i64);
    r.bulk(b"first-entry");
    match s.range(StreamId::MIN, StreamId::MAX).next() {
        Some(entry) => reply_entry(r, &entry),
        None => r.null(),
    }
    r.bulk(b"last-entry");
    match s.range_rev(StreamId::MIN, StreamId::MAX).next() {
        Some(entry) => reply_entry(r, &entry),
        None => r.null(),
    }
}

/// The rest of XINFO STREAM FULL: entries, then every group with its pending
/// entries and consumers, each list cut at `count`.
fn reply_full(r: &mut Reply<'_>, s: &StreamValue, count: usize) {
    r.bulk(b"entries");
    let shown = s.range(StreamId::MIN, StreamId::MAX).take(count);
    r.array(shown.count());
    s.range(StreamId::MIN, StreamId::MAX)
        .take(count)
        .for_each(|entry| reply_entry(r, &entry));
    r.bulk(b"groups");
    r.array(s.groups().len());
    for (name, g) in s.groups().iter() {
        r.map(7);
        r.bulk(b"name");
        r.bulk(name);
        r.bulk(b"last-delivered-id");
        r.bulk(&g.last_id.format());
        r.bulk(b"entries-read");
        reply_entries_read(r, g.entries_read);
        r.bulk(b"lag");
        reply_lag(r, s, g);
        r.bulk(b"pel-count");
        r.int(g.pel.len() as i64);
        r.bulk(b"pending");
        r.array(g.pel.len().min(count));
        for (id, nack) in g.pel.iter().take(count) {
            r.array(4);
            r.bulk(&id.format());
            r.bulk(&nack.consumer);
            r.int(nack.delivery_ms);
            r.int(nack.delivery_count as i64);
        }
        r.bulk(b"consumers");
        r.array(g.consumers.len());
        for (cname, c) in &g.consumers {
            r.map(5);
            r.bulk(b"name");
            r.bulk(cname);
            r.bulk(b"seen-time");
            r.int(c.seen_ms);
            r.bulk(b"active-time");
            r.int(c.active_ms);
            r.bulk(b"pel-count");
            r.int(c.pel.len() as i64);
            r.bulk(b"pending");
            r.array(c.pel.len().min(count));
            for id in c.pel.iter().take(count) {
                let nack = &g.pel[id];
                r.array(3);
                r.bulk(&id.format());
                r.int(nack.delivery_ms);
                r.int(nack.delivery_count as i64);
            }
        }
    }
}

/// The number of nodes in Redis's radix tree (`rax`) keyed by the stream's node
/// IDs as 16 big-endian bytes: a chain of single-child steps is one compressed
/// node, a fork one node holding its edges, a key's end one node.
pub(super) fn rax_nodes(s: &StreamValue) -> usize {
    let keys: Vec<[u8; 16]> = s.node_keys().map(rax_key).collect();
    match keys.len() {
        0 => 1,
        _ => subtree_nodes(&keys, 0),
    }
}

fn rax_key(id: StreamId) -> [u8; 16] {
    let mut k = [0u8; 16];
    k[..8].copy_from_slice(&id.ms.to_be_bytes());
    k[8..].copy_from_slice(&id.seq.to_be_bytes());
    k
}

/// Nodes below (and including) the node reached after `depth` bytes, for sorted
/// distinct `keys` sharing those bytes.
fn subtree_nodes(keys: &[[u8; 16]], depth: usize) -> usize {
    if depth == 16 {
        return 1;
    }
    if keys.len() == 1 {
        // A compressed node holding the rest, then the key's node.
        return 2;
    }
    let (first, last) = (&keys[0], &keys[keys.len() - 1]);
    let common = (depth..16).take_while(|&i| first[i] == last[i]).count();
    let chain = usize::from(common > 0);
    chain + fork_nodes(keys, depth + common)
}

/// A fork at `depth`: one node, plus each child's subtree.
fn fork_nodes(keys: &[[u8; 16]], depth: usize) -> usize {
    let mut total = 1;
    let mut from = 0;
    while from < keys.len() {
        let byte = keys[from][depth];
        let to = from + keys[from..].iter().take_while(|k| k[depth] == byte).count();
        total += subtree_nodes(&keys[from..to], depth + 1);
        from = to;
    }
    total
}
