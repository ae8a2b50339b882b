//! Sockets: the listening socket of a shard and the set-up of accepted ones.

use socket2::{Domain, Protocol, SockAddr, Socket, Type};
use std::net::{IpAddr, SocketAddr};
use std::os::fd::{FromRawFd, IntoRawFd, RawFd};

/// Pending connections the kernel queues per listener (Redis' tcp-backlog is 511).
const LISTEN_BACKLOG: i32 = 1024;

/// Listen on `bind:port`. `shared` sets SO_REUSEPORT so every shard can accept on
/// the same port (forward mode); the kernel spreads connections across them.
pub fn listen(bind: &str, port: u16, shared: bool) -> std::io::Result<Socket> {
    let ip: IpAddr = bind.parse().map_err(|_| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("bind: '{bind}' is not an IP address"),
        )
    })?;
    let addr = SocketAddr::new(ip, port);
    let socket = Socket::new(
        Domain::for_address(addr),
        Type::STREAM.cloexec(),
        Some(Protocol::TCP),
    )?;
    socket.set_reuse_address(true)?;
    if shared {
        socket.set_reuse_port(true)?;
    }
    socket.bind(&SockAddr::from(addr))?;
    socket.listen(LISTEN_BACKLOG)?;
    Ok(socket)
}

/// Configure an accepted connection and describe its two ends (`ip:port`).
pub fn adopt(fd: RawFd) -> (String, String) {
    // SAFETY: `fd` was just returned by accept and is owned by the caller; we lend it
    // to a Socket only to call setsockopt/getpeername and give it back with into_raw_fd.
    let socket = unsafe { Socket::from_raw_fd(fd) };
    let _ = socket.set_tcp_nodelay(true);
    let show = |a: std::io::Result<SockAddr>| {
        a.ok()
            .and_then(|a| a.as_socket())
            .map_or_else(|| "?:0".to_string(), |a| a.to_string())
    };
    let ends = (show(socket.peer_addr()), show(socket.local_addr()));
    let _ = socket.into_raw_fd();
    ends
}

/// Whether `peer` (`ip:port`, as [`adopt`] shows it) is on the loopback
/// interface: 127.0.0.0/8, ::1, or an IPv4 loopback mapped into IPv6.
pub fn is_loopback(peer: &str) -> bool {
    match peer.parse::<SocketAddr>() {
        Ok(SocketAddr::V4(a)) => a.ip().is_loopback(),
        Ok(SocketAddr::V6(a)) => {
            a.ip().is_loopback() || a.ip().to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
        }
        Err(_) => false,
    }
}
