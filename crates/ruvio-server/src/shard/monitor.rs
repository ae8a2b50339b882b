//! Handing MONITOR's lines to the connections that asked for them: this shard's
//! monitors get the lines fed on its thread at once, the other shards' monitors
//! through the mesh (the lines themselves and which commands make them:
//! [`crate::observability::monitor`]).

use crate::net::conn::{Conn, ReplyQueue};
use crate::net::slab::Slab;
use crate::observability::monitor;
use crate::shard::ShardCore;

/// The connection running a command now, out of the slab while it runs: it gets
/// its lines after its reply.
pub struct Running<'a> {
    pub who: (u32, u32),
    pub replies: &'a mut ReplyQueue,
}

/// Hand the lines fed on this thread to every monitor of the server.
pub fn hand_out(core: &mut ShardCore, conns: &mut Slab<Conn>, running: Option<Running<'_>>) {
    if !monitor::has_pending() {
        return;
    }
    let lines = monitor::take_pending();
    let watching: Vec<usize> = core.shared.monitors.shards_watching(core.id).collect();
    for to in watching {
        core.outbox.monitor_lines(to, &lines);
    }
    deliver_here(core, conns, &lines, running);
}

/// Give `lines` to this shard's monitors.
pub fn deliver_here(
    core: &mut ShardCore,
    conns: &mut Slab<Conn>,
    lines: &[u8],
    mut running: Option<Running<'_>>,
) {
    let ShardCore {
        monitors,
        dirty,
        cfg,
        now_ms,
        ..
    } = core;
    let limits = &cfg.client_output_buffer_limit;
    monitors
        .local
        .retain(|&who| match conns.get_mut(who.0, who.1) {
            Some(conn) => {
                if conn.client.monitor && !conn.client.killed {
                    conn.replies.sink().extend_from_slice(lines);
                    dirty.push(who);
                    crate::net::outlimit::enforce(limits, *now_ms, dirty, conn, who);
                }
                conn.client.monitor
            }
            None => match running.as_mut() {
                Some(r) if r.who == who => {
                    r.replies.sink().extend_from_slice(lines);
                    true
                }
                // Closed: `close` detached it.
                _ => true,
            },
        });
}
