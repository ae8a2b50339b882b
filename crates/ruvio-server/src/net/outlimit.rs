//! `client-output-buffer-limit`: a client whose unsent output grows too large is
//! closed, as Redis closes it, so a client that never reads (a stuck subscriber, a
//! pipeline of large GETs) cannot hold the server's memory.
//!
//! Each client class (normal, pubsub, replica: a replica class is accepted and
//! kept, Ruvio has no replicas) has a hard limit, past which the client is closed at
//! once, and a soft limit with a number of seconds: a client that stays at or over
//! the soft limit longer than that is closed. 0 disables a limit. As in Redis the
//! check runs when output is added to a client (its replies, a Pub/Sub message, a
//! reply that came back from another shard), and the output that counts is every
//! byte not yet sent: replies ready, parked behind held slots, and the part of the
//! send in flight the kernel has not taken. The class is pubsub while the client has
//! a subscription. A closed client's output is dropped, and Redis' log line is
//! written to stderr.

use crate::net::conn::{ClientState, Conn, ReplyQueue};

/// One class's limits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClassLimit {
    pub hard: u64,
    pub soft: u64,
    pub soft_seconds: u64,
}

/// The limits of every class, Redis' defaults unless configured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OutputLimits {
    pub normal: ClassLimit,
    pub replica: ClassLimit,
    pub pubsub: ClassLimit,
}

impl Default for OutputLimits {
    fn default() -> OutputLimits {
        OutputLimits {
            normal: ClassLimit::default(),
            replica: ClassLimit {
                hard: 256 << 20,
                soft: 64 << 20,
                soft_seconds: 60,
            },
            pubsub: ClassLimit {
                hard: 32 << 20,
                soft: 8 << 20,
                soft_seconds: 60,
            },
        }
    }
}

/// Why a value was refused, in Redis' words.
pub const WRONG_ARGUMENT_COUNT: &str = "Wrong number of arguments in buffer limit configuration.";
pub const INVALID_CLASS: &str = "Invalid client class specified in buffer limit configuration.";
pub const INVALID_LIMIT: &str =
    "Error in hard, soft or soft_seconds setting in buffer limit configuration.";

impl OutputLimits {
    /// These limits with `value` applied: groups of `<class> <hard> <soft>
    /// <seconds>`; the classes not named keep their limits.
    pub fn updated(&self, value: &str) -> Result<OutputLimits, &'static str> {
        let words: Vec<&str> = value.split_whitespace().collect();
        if !words.len().is_multiple_of(4) {
            return Err(WRONG_ARGUMENT_COUNT);
        }
        let mut limits = *self;
        for group in words.chunks(4) {
            let class = match group[0].to_ascii_lowercase().as_str() {
                "normal" => &mut limits.normal,
                "slave" | "replica" => &mut limits.replica,
                "pubsub" => &mut limits.pubsub,
                _ => return Err(INVALID_CLASS),
            };
            let size = |v: &str| crate::config::parse_memory(v).map(|n| n as u64);
            let seconds = group[3].parse::<u64>().ok();
            match (size(group[1]), size(group[2]), seconds) {
                (Some(hard), Some(soft), Some(soft_seconds)) => {
                    *class = ClassLimit {
                        hard,
                        soft,
                        soft_seconds,
                    }
                }
                _ => return Err(INVALID_LIMIT),
            }
        }
        Ok(limits)
    }

    /// CONFIG GET's form: every class, in bytes, the replica class named `slave`.
    pub fn render(&self) -> String {
        [
            ("normal", self.normal),
            ("slave", self.replica),
            ("pubsub", self.pubsub),
        ]
        .iter()
        .map(|(name, l)| format!("{name} {} {} {}", l.hard, l.soft, l.soft_seconds))
        .collect::<Vec<_>>()
        .join(" ")
    }
}

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
    per_conn: ahash::AHashMap<(u32, u32), u64>,
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
    let total = built.per_conn.entry(conn).or_default();
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
/// it was closed now.
pub fn enforce(
    limits: &OutputLimits,
    now_ms: u64,
    dirty: &mut Vec<(u32, u32)>,
    conn: &mut Conn,
    who: (u32, u32),
) -> bool {
    let limit = match conn.client.subs.active() {
        true => limits.pubsub,
        false => limits.normal,
    };
    if (limit.hard == 0 && limit.soft == 0) || conn.client.killed {
        return false;
    }
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
    let c = &mut conn.client;
    eprintln!(
        "ruvio: Client {} scheduled to be closed ASAP for overcoming of output buffer limits.",
        c.describe(now_ms)
    );
    c.killed = true;
    c.closing = true;
    conn.replies.ready = Vec::new();
    // SAFETY: plain syscall on a descriptor this connection owns; the shard closes
    // it later, once no operation references it.
    unsafe { libc::shutdown(conn.client.fd, libc::SHUT_RDWR) };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_render_as_redis() {
        let defaults = OutputLimits::default();
        assert_eq!(
            defaults.render(),
            "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60"
        );
        let set = defaults.updated("normal 1mb 2kb 3").unwrap();
        assert_eq!(
            set.render(),
            "normal 1048576 2048 3 slave 268435456 67108864 60 pubsub 33554432 8388608 60"
        );
        let set = set.updated("replica 1gb 2 3 PUBSUB 1 1 1").unwrap();
        assert_eq!(
            set.render(),
            "normal 1048576 2048 3 slave 1073741824 2 3 pubsub 1 1 1"
        );
        assert_eq!(set.updated("").unwrap(), set);
        assert_eq!(set.updated("normal 1 2"), Err(WRONG_ARGUMENT_COUNT));
        assert_eq!(set.updated("master 1 2 3"), Err(INVALID_CLASS));
        assert_eq!(set.updated("normal x 2 3"), Err(INVALID_LIMIT));
        assert_eq!(set.updated("normal 1 2 -3"), Err(INVALID_LIMIT));
    }
}
