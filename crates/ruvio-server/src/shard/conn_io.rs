//! The loop's work on client connections: receives armed and taken (the input
//! parsed and run, prefetching the keys of the commands ahead), sends started and
//! finished, connections closed, and the dirty list flushed. Apart from `mod.rs`
//! (the loop, accepting, the tick) because it is one connection's path through
//! the ring, from bytes in to replies out.

use super::busy;
use super::dispatch;
use super::prefetch::KeyWindow;
use super::{
    token, untoken, Shard, BUFFER_KEEP_BYTES, INPUT_GROWTH_MIN_BYTES, OP_RECV, OP_SEND,
    RECV_POLL_FIRST,
};
use crate::mesh::forward::{self, Control};
use crate::net::conn::{BlockedOn, Conn, INPUT_CHUNK_BYTES, OUTPUT_PAUSE_BYTES};
use crate::shard::blocking::Waiter;
use io_uring::{opcode, types};

impl Shard {
    pub(super) fn arm_recv(&mut self, index: u32, gen: u32) {
        let Some(conn) = self.conns.get_mut(index, gen) else {
            return;
        };
        if conn.recv_in_flight || conn.shut || conn.client.closing {
            return;
        }
        if let Some(session) = conn.tls.as_mut() {
            let (ptr, len) = Self::tls_recv_buffer(session);
            conn.recv_in_flight = true;
            let entry = match conn.fixed {
                true => opcode::Recv::new(types::Fixed(index), ptr, len).build(),
                false => opcode::Recv::new(types::Fd(conn.client.fd), ptr, len).build(),
            };
            self.push(entry.user_data(token(OP_RECV, gen, index)));
            return;
        }
        let pending = conn.input.len() - conn.input_start;
        // Room for the rest of a declared bulk, but never more than what has arrived
        // (or 1 MiB): a client declaring 512 MB and sending nothing costs little.
        let growth_max = pending.max(INPUT_GROWTH_MIN_BYTES);
        let still_needed = conn.input_need.saturating_sub(pending);
        let want = INPUT_CHUNK_BYTES.max(still_needed.min(growth_max));
        if conn.input.capacity() - conn.input.len() < INPUT_CHUNK_BYTES / 4
            || conn.input.capacity() - conn.input.len() < want.min(1 << 30)
        {
            conn.input.reserve(want);
        }
        let spare = conn.input.capacity() - conn.input.len();
        let ptr = conn.input.as_mut_ptr().wrapping_add(conn.input.len());
        conn.recv_in_flight = true;
        let len = spare.min(u32::MAX as usize) as u32;
        let entry = match conn.fixed {
            true => opcode::Recv::new(types::Fixed(index), ptr, len)
                .ioprio(RECV_POLL_FIRST)
                .build(),
            false => opcode::Recv::new(types::Fd(conn.client.fd), ptr, len)
                .ioprio(RECV_POLL_FIRST)
                .build(),
        };
        self.push(entry.user_data(token(OP_RECV, gen, index)));
    }

    /// Before any received batch runs: account the bytes every receive of this
    /// iteration delivered and note the first keys of each connection's batch
    /// ([`KeyWindow`]). Batches then run in completion order while the prefetch
    /// runs ahead of them (see [`prefetch_ahead`](Self::prefetch_ahead)).
    pub(super) fn take_received(&mut self, completions: &[(u64, i32, u32)]) {
        self.windows.clear();
        self.window_cursor = 0;
        let mut commands = 0;
        for &(data, result, _) in completions {
            let (op, gen, index) = untoken(data);
            if op != OP_RECV || result <= 0 {
                continue;
            }
            let is_tls = match self.conns.get(index, gen) {
                Some(conn) => conn.tls.is_some(),
                None => continue,
            };
            if is_tls {
                self.tls_received(index, gen, result as usize);
            }
            let Some(conn) = self.conns.get_mut(index, gen) else {
                continue;
            };
            if !is_tls {
                // SAFETY: the kernel wrote `result` bytes into the spare capacity we lent it.
                unsafe { conn.input.set_len(conn.input.len() + result as usize) };
            }
            self.core.stats.net_input_bytes += result as u64;
            let pending = &conn.input[conn.input_start..];
            let window = KeyWindow::scan(&self.core, &mut conn.parser, pending);
            conn.prefetched = window.commands;
            commands += window.commands;
            self.windows.push((index, gen, window));
        }
        if commands <= 1 {
            // A lone command gains nothing from prefetching.
            self.windows.clear();
            return;
        }
        self.prefetch_window_entries(0);
        self.prefetch_window_entries(1);
        self.prefetch_window_values(0);
    }

    /// Called as each received batch starts: the entries of the batch two ahead and
    /// the values of the next batch start loading, so a batch's cache misses are in
    /// flight while the batch before it runs.
    pub(super) fn prefetch_ahead(&mut self) {
        let current = self.window_cursor;
        self.window_cursor += 1;
        self.prefetch_window_entries(current + 2);
        self.prefetch_window_values(current + 1);
    }

    fn prefetch_window_entries(&mut self, w: usize) {
        if let Some((index, gen, window)) = self.windows.get_mut(w) {
            if let Some(conn) = self.conns.get(*index, *gen) {
                let pending = &conn.input[conn.input_start..];
                window.prefetch_entries(&self.core, conn.client.db, pending);
            }
        }
    }

    fn prefetch_window_values(&self, w: usize) {
        if let Some((index, gen, window)) = self.windows.get(w) {
            if let Some(conn) = self.conns.get(*index, *gen) {
                let pending = &conn.input[conn.input_start..];
                window.prefetch_values(&self.core, conn.client.db, pending);
            }
        }
    }

    /// Run what unblocked connections received while they waited. Running it may
    /// unblock others (or block again); every round takes the list afresh.
    pub(super) fn resume_unblocked(&mut self) {
        while !self.core.resume.is_empty() {
            for (index, gen) in std::mem::take(&mut self.core.resume) {
                let idle = self.conns.get(index, gen).is_none_or(|c| {
                    (c.input.len() == c.input_start && c.client.exec_rest.is_none()) || c.shut
                });
                if !idle {
                    self.run_input(index, gen);
                }
            }
        }
    }

    pub(super) fn received(&mut self, index: u32, gen: u32, result: i32) {
        let Some(conn) = self.conns.get_mut(index, gen) else {
            return;
        };
        conn.recv_in_flight = false;
        if result <= 0 || conn.shut {
            self.close(index, gen);
            return;
        }
        self.run_input(index, gen);
    }

    /// Parse and run the connection's input, then re-arm its receive. While the
    /// mesh is congested the input waits (see [`crate::mesh::forward::MESH_BACKLOG_MESSAGES_MAX`]).
    pub(super) fn run_input(&mut self, index: u32, gen: u32) {
        if self.input_must_wait() {
            self.deferred.push((index, gen));
            return;
        }
        let Some(mut conn) = self.conns.take(index, gen) else {
            return;
        };
        let importing = conn.client.slot_import;
        if importing && !super::slot_import::begin(&mut self.core, (index, gen)) {
            self.conns.restore(index, conn);
            return;
        }
        // A bug must cost one connection, never the shard: Redis' semantics say no
        // input can panic, and the tests and fuzzers hold us to it; this is the net.
        let run = std::panic::AssertUnwindSafe(|| {
            dispatch::process_input(&mut self.core, &mut self.conns, &mut conn, index)
        });
        let ok = std::panic::catch_unwind(run).unwrap_or_else(|_| {
            conn.replies
                .sink()
                .extend_from_slice(b"-ERR internal error, closing the connection\r\n");
            conn.client.closing = true;
            false
        });
        let core = &mut self.core;
        let limits = &core.cfg.client_output_buffer_limit;
        crate::net::outlimit::enforce(
            limits,
            core.now_ms,
            &mut core.dirty,
            &mut conn,
            (index, gen),
        );
        // The source's connection of a slot import cut short by its pace
        // reads no more until its slice comes (`slot_import`).
        let import_waits = conn.client.slot_import | importing
            && super::slot_import::end(&mut self.core, (index, gen));
        let paused = conn.replies.pending_bytes() + conn.sending.len() > OUTPUT_PAUSE_BYTES
            || conn.replies.is_backed_up(conn.sending.len())
            || import_waits;
        shrink_input(&mut conn);
        self.conns.restore(index, conn);
        self.core.dirty.push((index, gen));
        if ok && !paused {
            self.arm_recv(index, gen);
        }
        if busy::has_leftovers() {
            self.adopt_busy_leftovers();
        }
    }

    pub(super) fn sent(&mut self, index: u32, gen: u32, result: i32) {
        let Some(conn) = self.conns.get_mut(index, gen) else {
            return;
        };
        conn.send_in_flight = false;
        if result < 0 || conn.shut {
            self.close(index, gen);
            return;
        }
        conn.send_offset += result as usize;
        self.core.stats.net_output_bytes += result as u64;
        if conn.send_offset >= conn.sending.len() {
            conn.sending.clear();
            conn.send_offset = 0;
            if conn.sending.capacity() > BUFFER_KEEP_BYTES {
                // A large reply went out: do not keep its buffer for small ones.
                conn.sending = Vec::new();
            }
        }
        self.start_send(index, gen);
        // A paused reader may resume once its backlog is gone: first the commands
        // its last read left waiting, then the next read.
        if let Some(conn) = self.conns.get_mut(index, gen) {
            if !conn.recv_in_flight && conn.sending.is_empty() && !conn.client.closing {
                self.run_input(index, gen);
            }
        }
    }

    /// Connections that stopped reading because their replies backed up go on once
    /// they no longer are: replies awaited from other shards arrived (the fills mark
    /// the connection dirty), perhaps silent ones with nothing to send. This does not
    /// wait for a send to complete: a client that reads only after writing its whole
    /// pipeline would never let one complete.
    pub(super) fn resume_backed_up(&mut self) {
        let marked = self.core.dirty.len();
        for i in 0..marked {
            let (index, gen) = self.core.dirty[i];
            if self.waits_for_its_replies(index, gen) {
                self.run_input(index, gen);
            }
        }
    }

    /// The connection stopped reading because its replies backed up
    /// ([`crate::net::conn::ReplyQueue::is_backed_up`]) and they no longer are.
    fn waits_for_its_replies(&self, index: u32, gen: u32) -> bool {
        let congested = forward::with_mesh(|m| m.congested()).unwrap_or(false);
        self.conns.get(index, gen).is_some_and(|conn| {
            // A receive in flight runs the input when it completes, but the
            // input may be in already (a pipeline read whole, stopped when
            // its awaited replies reached the limit): then run that now.
            let input_waits = conn.input_start < conn.input.len();
            !congested
                && (!conn.recv_in_flight || input_waits)
                && !conn.shut
                && !conn.client.closing
                && !conn.replies.is_backed_up(conn.sending.len())
        })
    }

    /// Start a send of whatever is ready, unless one is in flight; close a finished closing connection.
    fn start_send(&mut self, index: u32, gen: u32) {
        let Some(conn) = self.conns.get_mut(index, gen) else {
            return;
        };
        if conn.send_in_flight || conn.shut {
            return;
        }
        if conn.sending.is_empty() {
            conn.send_offset = 0;
            match conn.tls.is_some() {
                true => Self::tls_fill_sending(conn),
                false => std::mem::swap(&mut conn.sending, &mut conn.replies.ready),
            }
        }
        if conn.sending.is_empty() {
            if conn.client.killed || (conn.client.closing && !conn.replies.is_holding()) {
                self.close(index, gen);
            }
            return;
        }
        let rest = &conn.sending[conn.send_offset..];
        let (ptr, len, fd, fixed) = (
            rest.as_ptr(),
            rest.len().min(u32::MAX as usize) as u32,
            conn.client.fd,
            conn.fixed,
        );
        conn.send_in_flight = true;
        let entry = match fixed {
            true => opcode::Send::new(types::Fixed(index), ptr, len)
                .flags(libc::MSG_NOSIGNAL)
                .build(),
            false => opcode::Send::new(types::Fd(fd), ptr, len)
                .flags(libc::MSG_NOSIGNAL)
                .build(),
        };
        self.push(entry.user_data(token(OP_SEND, gen, index)));
    }

    /// Shut the socket down; the slot is freed once no operation is in flight.
    fn close(&mut self, index: u32, gen: u32) {
        let Some(conn) = self.conns.get_mut(index, gen) else {
            return;
        };
        if !conn.shut {
            conn.shut = true;
            // SAFETY: plain syscall on a descriptor this connection owns.
            unsafe { libc::shutdown(conn.client.fd, libc::SHUT_RDWR) };
            crate::transactions::multi::unwatch(&mut self.core, &mut conn.client);
            self.core.shared.acl.forget_client(conn.client.id);
            let mut subs = std::mem::take(&mut conn.client.subs);
            let monitoring = std::mem::take(&mut conn.client.monitor);
            if let Some(blocked) = conn.client.blocked.take() {
                self.forget_blocked(index, gen, blocked);
            }
            crate::messaging::pubsub::forget_all(
                &self.core.shared.pubsub,
                self.core.id,
                &mut subs,
                (index, gen),
            );
            if monitoring {
                let core = &mut self.core;
                core.monitors
                    .detach(&core.shared.monitors, core.id, (index, gen));
            }
            let broadcast = crate::tracking::broadcasts(&self.core.topo);
            if let Some(conn) = self.conns.get_mut(index, gen) {
                let (tracking, mut to) = self.core.tracking_parts();
                tracking.disconnected(&mut to, broadcast, &mut conn.client);
            }
        }
        let Some(conn) = self.conns.get_mut(index, gen) else {
            return;
        };
        if !conn.recv_in_flight && !conn.send_in_flight {
            let (fd, fixed) = (conn.client.fd, conn.fixed);
            if fixed {
                // The ring's reference must go too, or the socket outlives close().
                let _ = self.ring.submitter().register_files_update(index, &[-1]);
            }
            // SAFETY: no operation references the descriptor any more.
            unsafe { libc::close(fd) };
            let client_id = conn.client.id;
            self.conns.remove(index);
            self.core.shared.client_gone();
            self.core.shared.observatory.client_gone(client_id);
        }
    }

    /// A blocked client went away: its parked command goes too, here or on the
    /// shard it was sent to.
    fn forget_blocked(&mut self, index: u32, gen: u32, blocked: BlockedOn) {
        super::lending::forget(&mut self.core, index, gen);
        match blocked.remote {
            None => crate::shard::exec::drop_waiter(
                &mut self.core,
                |w| matches!(*w, Waiter::Local { index: i, gen: g, .. } if i == index && g == gen),
            ),
            Some(shard) => {
                let from = self.core.id;
                let cancel = Control::Cancel {
                    from,
                    conn: index,
                    gen,
                };
                self.core.outbox.control(shard, cancel);
            }
        }
    }

    /// Start sends for every connection with new replies (or a pending close).
    pub(super) fn flush_dirty(&mut self) {
        let mut dirty = std::mem::take(&mut self.core.dirty);
        for &(index, gen) in &dirty {
            self.start_send(index, gen);
        }
        dirty.clear();
        if self.core.dirty.is_empty() {
            self.core.dirty = dirty;
        }
    }
}

/// Give back an input buffer that a large request grew, once it is consumed and no
/// receive is writing into it.
fn shrink_input(conn: &mut Conn) {
    let consumed = conn.input.len() == conn.input_start;
    if consumed && !conn.recv_in_flight && conn.input.capacity() > BUFFER_KEEP_BYTES {
        conn.input = Vec::with_capacity(INPUT_CHUNK_BYTES);
        conn.input_start = 0;
    }
}
