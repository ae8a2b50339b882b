//! Protected mode as Redis 7: with `protected-mode yes` (the default) and no
//! password, a client from outside the loopback interface gets Redis's `-DENIED`
//! text and is closed, while loopback clients are served; CONFIG SET
//! protected-mode no, or a password, lets it in. The outside client connects from
//! this host's own non-loopback address (traffic that never leaves the host); the
//! DENIED bytes are compared with redis-server's.

mod common;

use common::*;
use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::time::Duration;

/// This host's first non-loopback IPv4 address, if it has one.
fn outside_address() -> Option<IpAddr> {
    let out = std::process::Command::new("hostname")
        .arg("-I")
        .output()
        .ok()?;
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .filter_map(|w| w.parse::<IpAddr>().ok())
        .find(|ip| ip.is_ipv4() && !ip.is_loopback())
}

/// Connect from `from` to `from:port`, send PING, and read what comes back until
/// the server closes or a second passes.
fn ping_from(from: IpAddr, port: u16) -> Vec<u8> {
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    socket.bind(&SocketAddr::new(from, 0).into()).unwrap();
    socket.connect(&SocketAddr::new(from, port).into()).unwrap();
    let mut stream: TcpStream = socket.into();
    stream
        .set_read_timeout(Some(Duration::from_secs(1)))
        .unwrap();
    let _ = stream.write_all(b"PING\r\n");
    let mut got = Vec::new();
    let mut chunk = [0u8; 4096];
    while let Ok(n) = stream.read(&mut chunk) {
        if n == 0 {
            break;
        }
        got.extend_from_slice(&chunk[..n]);
        if got.ends_with(b"+PONG\r\n") {
            break;
        }
    }
    got
}

#[test]
fn outside_clients_are_denied_until_protected_mode_is_off_or_a_password_is_set() {
    let Some(outside) = outside_address() else {
        eprintln!("protected_mode: no non-loopback address on this host; skipped");
        return;
    };
    let denied_by_redis = require_redis_server("protected_mode").map(|_| {
        let redis = Server::redis_with(&["--bind", "0.0.0.0"]);
        ping_from(outside, redis.port())
    });
    for shards in [1, 2] {
        let ruvio = Server::ruvio_with(PortMode::Forward, shards, &["--bind", "0.0.0.0"]);
        let denied = ping_from(outside, ruvio.port());
        assert!(
            denied.starts_with(b"-DENIED Redis is running in protected mode"),
            "{}",
            show(&denied)
        );
        if let Some(theirs) = &denied_by_redis {
            assert_eq!(show(&denied), show(theirs), "Redis's text, byte for byte");
        }
        let mut local = ruvio.raw();
        assert_eq!(local.cmd(&["ping"]), b"+PONG\r\n");
        assert_eq!(
            local.cmd(&["config", "set", "protected-mode", "no"]),
            b"+OK\r\n"
        );
        assert_eq!(ping_from(outside, ruvio.port()), b"+PONG\r\n");
        assert_eq!(
            local.cmd(&["config", "set", "protected-mode", "yes"]),
            b"+OK\r\n"
        );
        assert!(ping_from(outside, ruvio.port()).starts_with(b"-DENIED"));
        // A password: the outside client connects and must authenticate.
        assert_eq!(
            local.cmd(&["config", "set", "requirepass", "secret"]),
            b"+OK\r\n"
        );
        let reply = ping_from(outside, ruvio.port());
        assert_eq!(
            reply,
            b"-NOAUTH Authentication required.\r\n",
            "{}",
            show(&reply)
        );
    }
}
