//! Outgoing TCP connections made without blocking the shard's loop: the
//! cluster bus's links to other nodes (`cluster/bus/links.rs`) and a replica's
//! link to its master (`replication/link.rs`) start a connect and look on
//! their next step whether it finished. On the ground floor because both
//! subsystems need exactly this and neither may reach the other.

use socket2::{Domain, SockAddr, Socket, Type};
use std::net::SocketAddr;
use std::os::fd::AsRawFd;

/// A non-blocking socket whose connect to `address` has started (or already
/// finished, on loopback); ask [`connect_finished`] when it is done.
pub fn start_connect(address: SocketAddr) -> std::io::Result<Socket> {
    let socket = Socket::new(Domain::for_address(address), Type::STREAM.cloexec(), None)?;
    socket.set_nonblocking(true)?;
    let _ = socket.set_tcp_nodelay(true);
    match socket.connect(&SockAddr::from(address)) {
        Ok(()) => Ok(socket),
        Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => Ok(socket),
        Err(e) => Err(e),
    }
}

/// Whether the non-blocking connect of `socket` finished (an error if it
/// failed). Never waits.
pub fn connect_finished(socket: &Socket) -> std::io::Result<bool> {
    let mut poll = libc::pollfd {
        fd: socket.as_raw_fd(),
        events: libc::POLLOUT,
        revents: 0,
    };
    // SAFETY: one pollfd on a descriptor the caller owns; a timeout of 0.
    let ready = unsafe { libc::poll(&mut poll, 1, 0) };
    if ready <= 0 {
        return Ok(false);
    }
    match socket.take_error()? {
        None => Ok(true),
        Some(e) => Err(e),
    }
}
