//! The TLS port on the shard's ring: its listener, and where a TLS connection's
//! bytes differ from a plain one's (the session itself: [`crate::net::tls`]).
//!
//! A TLS connection is a plain connection whose receive lands in its session's
//! ciphertext buffer ([`Shard::tls_recv_buffer`]) and is decrypted into `input`
//! before the batch runs ([`Shard::tls_received`]), and whose ready replies are
//! encrypted into `sending` as a send starts ([`Shard::tls_fill_sending`]); the
//! handshake rides on the same two steps. Listening follows the plain port:
//! every shard on `tls-port` (SO_REUSEPORT) in forward mode, shard i on
//! `tls-port + i` in per-shard mode. With TLS off there is no listener and a
//! plain connection pays one `Option` test per receive and send.

use super::{token, Shard, OP_TLS_ACCEPT};
use crate::config::{Config, PortMode};
use crate::net::tls::{SessionCaches, Sessions, TlsSettings, CIPHER_IN_BYTES};
use io_uring::{cqueue, opcode, types};
use std::os::fd::AsRawFd;

/// The shard's TLS listener (the settings its sessions start from are the
/// core's, `ShardCore::tls_settings`, which CONFIG SET reloads).
pub struct TlsPort {
    listener: socket2::Socket,
    /// The last accept failed: accept again at the next tick.
    accept_failed: bool,
}

impl TlsPort {
    /// Shard `id`'s TLS port when `tls-port` is set (its certificate and key
    /// loaded now, so a bad file stops the start with its name).
    pub fn open(
        cfg: &Config,
        id: usize,
        caches: &SessionCaches,
    ) -> std::io::Result<Option<(TlsPort, TlsSettings)>> {
        let Some(port) = cfg.tls_port(id) else {
            return Ok(None);
        };
        let settings = TlsSettings::load(&cfg.tls_files(), caches, Sessions::Current)
            .map_err(|why| std::io::Error::new(std::io::ErrorKind::InvalidInput, why))?;
        let shared = cfg.shards > 1 && cfg.port_mode == PortMode::Forward;
        let listener = crate::net::socket::listen(&cfg.bind, port, shared).map_err(|e| {
            std::io::Error::new(e.kind(), format!("tls-port {}:{port}: {e}", cfg.bind))
        })?;
        let port = TlsPort {
            listener,
            accept_failed: false,
        };
        Ok(Some((port, settings)))
    }
}

impl Shard {
    /// Start accepting on the TLS listener (if TLS is on).
    pub(super) fn arm_tls_accept(&mut self) {
        let Some(port) = self.tls.as_ref() else {
            return;
        };
        let fd = port.listener.as_raw_fd();
        self.push(
            opcode::AcceptMulti::new(types::Fd(fd))
                .flags(libc::SOCK_CLOEXEC)
                .build()
                .user_data(token(OP_TLS_ACCEPT, 0, 0)),
        );
    }

    /// A connection accepted on the TLS port: a plain connection with a session.
    pub(super) fn tls_accepted(&mut self, result: i32, flags: u32) {
        if result >= 0 {
            let session = self.core.tls_settings.as_ref().map(|s| s.session());
            match session {
                Some(Ok(session)) => {
                    if let Some((index, gen)) =
                        self.accepted_with(result, Some(Box::new(session)), None)
                    {
                        self.core.dirty.push((index, gen));
                    }
                }
                Some(Err(why)) => {
                    crate::serverlog::log(
                        crate::serverlog::Level::Warning,
                        &format!("TLS session not started: {why}"),
                    );
                    // SAFETY: closing the descriptor accept just gave us.
                    unsafe { libc::close(result) };
                }
                None => {}
            }
        } else if let Some(port) = self.tls.as_mut() {
            port.accept_failed = true;
        }
        let failed = self.tls.as_ref().is_some_and(|p| p.accept_failed);
        if !cqueue::more(flags) && !failed {
            self.arm_tls_accept();
        }
    }

    /// The tick: accept again after a failed accept.
    pub(super) fn tls_tick(&mut self) {
        if let Some(port) = self.tls.as_mut().filter(|p| p.accept_failed) {
            port.accept_failed = false;
            self.arm_tls_accept();
        }
    }

    /// Where a TLS connection's receive writes: the spare capacity of its
    /// session's ciphertext buffer (pointer, length).
    pub(super) fn tls_recv_buffer(session: &mut crate::net::tls::TlsConn) -> (*mut u8, u32) {
        let buf = &mut session.cipher_in;
        if buf.capacity() - buf.len() < CIPHER_IN_BYTES {
            buf.reserve(CIPHER_IN_BYTES);
        }
        let spare = buf.capacity() - buf.len();
        let ptr = buf.as_mut_ptr().wrapping_add(buf.len());
        (ptr, spare.min(u32::MAX as usize) as u32)
    }

    /// A TLS connection received `bytes` of ciphertext: decrypt them into its
    /// input. A failed session closes the connection (logged, as Redis logs a
    /// failed handshake), the shard goes on.
    pub(super) fn tls_received(&mut self, index: u32, gen: u32, bytes: usize) {
        let Some(conn) = self.conns.get_mut(index, gen) else {
            return;
        };
        let Some(session) = conn.tls.as_mut() else {
            return;
        };
        // SAFETY: the kernel wrote `bytes` into the spare capacity we lent it.
        unsafe { session.cipher_in.set_len(session.cipher_in.len() + bytes) };
        if let Err(failed) = session.decrypt(&mut conn.input) {
            crate::serverlog::log(
                crate::serverlog::Level::Notice,
                &format!(
                    "Error accepting a client connection: {} (conn: fd={})",
                    failed.0, conn.client.fd
                ),
            );
            conn.client.closing = true;
            conn.client.killed = true;
        }
        // The handshake's answer (or an alert) goes out with the next send.
        if session_wants_write(conn) {
            self.core.dirty.push((index, gen));
        }
    }

    /// A send is starting on a TLS connection whose ciphertext is all sent:
    /// encrypt the ready replies (and any record the session has) into `sending`.
    pub(super) fn tls_fill_sending(conn: &mut crate::net::conn::Conn) {
        let Some(session) = conn.tls.as_mut() else {
            return;
        };
        let plain = std::mem::take(&mut conn.replies.ready);
        if plain.is_empty() && !session.wants_write() {
            conn.replies.ready = plain;
            return;
        }
        if session.encrypt(&plain, &mut conn.sending).is_err() {
            conn.client.closing = true;
            conn.client.killed = true;
        }
        // Keep the plain buffer's allocation for the next replies.
        let mut plain = plain;
        plain.clear();
        conn.replies.ready = plain;
    }
}

fn session_wants_write(conn: &crate::net::conn::Conn) -> bool {
    conn.tls.as_ref().is_some_and(|s| s.wants_write())
}
