//! `client-output-buffer-limit`: a client whose unsent output grows too large is
//! closed, as Redis closes it, so a client that never reads (a stuck subscriber, a
//! pipeline of large GETs) cannot hold the server's memory.
//!
//! Each client class (normal, pubsub, replica) has a hard limit, past which the
//! client is closed at once, and a soft limit with a number of seconds: a client
//! that stays at or over the soft limit longer than that is closed. 0 disables a
//! limit. As in Redis the
//! check runs when output is added to a client (its replies, a Pub/Sub message, a
//! reply that came back from another shard), and the output that counts is every
//! byte not yet sent: replies ready, parked behind held slots, and the part of the
//! send in flight the kernel has not taken. The class is pubsub while the client has
//! a subscription. A closed client's output is dropped, and Redis' log line is
//! written to stderr.

use crate::config::output_limits::{ClassLimit, OutputLimits};
use crate::net::conn::{ClientState, Conn, ReplyQueue};

/// True when a batch of commands has queued more output than the hard limit of
/// the client's class: the batch stops there, so a pipeline of large replies
/// never holds more than about the limit (the full check follows the batch).
pub fn hard_limit_crossed(
    limits: &OutputLimits,
    client: &ClientState,
    replies: &ReplyQueue,
) -> bool {
    let hard = match client.subs.active() {
        true => limits.pubsub.hard,
        false => limits.normal.hard,
    };
    hard != 0 && replies.pending_bytes() as u64 >= hard
}

/// Reply bytes built per origin connection in one forwarded batch.
#[derive(Debug, Default)]
pub struct BuiltOutput {
    /// Made by the first capped reply (its hasher's random state costs a
    /// batch of small replies more than their caps): none while no limit is set.
    per_conn: Option<ahash::AHashMap<(u32, u32), u64>>,
}

/// The reply that stands in for the rest of a forwarded batch's replies to a
/// connection past every class's hard limit: the origin closes that client before
/// anything of it is sent.
const OVER_LIMIT_PLACEHOLDER: &[u8] = b"-ERR output buffer limit\r\n";

/// A shard answering another's batch builds every reply before the origin checks
/// its client's limit: a pipeline of large GETs would be held twice, whole. Once a
/// connection's replies in the batch pass the larger of the normal and pubsub hard
/// limits (both set), its client is over its own and will be closed, so the rest
/// are replaced by a short placeholder. Costs nothing while either limit is 0
/// (Redis' default for normal clients).
#[inline]
pub fn cap_forwarded(
    limits: &OutputLimits,
    built: &mut BuiltOutput,
    conn: (u32, u32),
    reply: &mut Vec<u8>,
) {
    if limits.normal.hard == 0 || limits.pubsub.hard == 0 {
        return;
    }
    let cap = limits.normal.hard.max(limits.pubsub.hard);
    let total = built
        .per_conn
        .get_or_insert_with(Default::default)
        .entry(conn)
        .or_default();
    if *total > cap {
        reply.clear();
        reply.extend_from_slice(OVER_LIMIT_PLACEHOLDER);
    }
    *total += reply.len() as u64;
}

/// Bytes of output the client has not been sent yet.
fn unsent_bytes(conn: &Conn) -> u64 {
    let in_flight = conn.sending.len().saturating_sub(conn.send_offset);
    (conn.replies.pending_bytes() + in_flight) as u64
}

/// Check `conn`'s output against its class's limits after output was added; close
/// it when it is over (`dirty` gets it, so the shard frees it). Returns true when
/// it was closed now. Inlined up to the class's limits: every reply that lands
/// from another shard asks, and a normal client has none by default.
#[inline]
pub fn enforce(
    limits: &OutputLimits,
    now_ms: u64,
    dirty: &mut Vec<(u32, u32)>,
    conn: &mut Conn,
    who: (u32, u32),
) -> bool {
    let limit = match (conn.client.replica.attached, conn.client.subs.active()) {
        (true, _) => limits.replica,
        (false, true) => limits.pubsub,
        (false, false) => limits.normal,
    };
    if (limit.hard == 0 && limit.soft == 0) || conn.client.killed {
        return false;
    }
    enforce_limit(limit, now_ms, dirty, conn, who)
}

/// [`enforce`] for a client whose class has a limit.
#[inline(never)]
fn enforce_limit(
    limit: ClassLimit,
    now_ms: u64,
    dirty: &mut Vec<(u32, u32)>,
    conn: &mut Conn,
    who: (u32, u32),
) -> bool {
    let used = unsent_bytes(conn);
    let over_hard = limit.hard != 0 && used >= limit.hard;
    let over_soft = limit.soft != 0 && used >= limit.soft;
    let soft_expired = match (over_soft, conn.client.obuf_soft_since_ms) {
        (false, _) => {
            conn.client.obuf_soft_since_ms = 0;
            false
        }
        (true, 0) => {
            conn.client.obuf_soft_since_ms = now_ms.max(1);
            false
        }
        // Whole seconds, as Redis counts them.
        (true, since) => now_ms.saturating_sub(since) / 1000 > limit.soft_seconds,
    };
    if !over_hard && !soft_expired {
        return false;
    }
    close_now(now_ms, conn);
    dirty.push(who);
    true
}

/// Drop the client's output and shut its socket: the shard frees it once its
/// operations in flight complete (as for CLIENT KILL).
fn close_now(now_ms: u64, conn: &mut Conn) {
    let seen = crate::net::conn::Described {
        buffers: conn.buffer_use(),
        ..Default::default()
    };
    let c = &mut conn.client;
    eprintln!(
        "ruvio: Client {} scheduled to be closed ASAP for overcoming of output buffer limits.",
        c.describe(now_ms, &seen)
    );
    c.killed = true;
    c.closing = true;
    conn.replies.ready = Vec::new();
    // SAFETY: plain syscall on a descriptor this connection owns; the shard closes
    // it later, once no operation references it.
    unsafe { libc::shutdown(conn.client.fd, libc::SHUT_RDWR) };
}
