//! LOADING (docs/durability.md): while the shards load their snapshots and logs at
//! start, the port already answers, with `-LOADING Redis is loading the dataset in
//! memory` to commands Redis refuses then and `loading:1` in INFO; then every key
//! is there. The debug build's `RUVIO_REPLAY_DELAY_US` slows the replay so the
//! test can watch.

mod common;

use common::*;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const KEYS: usize = 2000;

fn ask(port: u16, command: &[&str]) -> Option<Vec<u8>> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    stream.write_all(&encode(command)).ok()?;
    let mut reply = Vec::new();
    let mut chunk = [0u8; 65536];
    loop {
        let n = stream.read(&mut chunk).ok()?;
        if n == 0 {
            return None;
        }
        reply.extend_from_slice(&chunk[..n]);
        if let Ok(Some(len)) = frame_len(&reply) {
            reply.truncate(len);
            return Some(reply);
        }
    }
}

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn commands_get_loading_until_every_shard_loaded() {
    let dir = std::env::temp_dir().join(format!("ruvio-loading-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let dir_arg = dir.to_str().unwrap();
    let server = Server::ruvio_with(
        PortMode::Forward,
        2,
        &["--dir", dir_arg, "--durability", "everysec", "--save", ""],
    );
    let mut c = server.raw();
    for i in 0..KEYS {
        assert_eq!(c.cmd(&["SET", &format!("k{i}"), "v"]), b"+OK\r\n");
    }
    std::thread::sleep(Duration::from_millis(1600));
    drop(server);
    let port = free_ports(1, false);
    // About 1000 records per shard at 2 ms each: two seconds of loading.
    let child = Command::new(ruvio_bin())
        .args(["--bind", "127.0.0.1", "--port", &port.to_string()])
        .args([
            "--shards",
            "2",
            "--durability",
            "everysec",
            "--dir",
            dir_arg,
        ])
        .env("RUVIO_REPLAY_DELAY_US", "2000")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let _child = Killed(child);
    let deadline = Instant::now() + Duration::from_secs(30);
    let first = loop {
        if let Some(reply) = ask(port, &["PING"]) {
            break reply;
        }
        assert!(Instant::now() < deadline, "the port never answered");
        std::thread::sleep(Duration::from_millis(10));
    };
    assert_eq!(
        first,
        b"-LOADING Redis is loading the dataset in memory\r\n".to_vec()
    );
    assert_eq!(
        ask(port, &["GET", "k1"]).unwrap(),
        b"-LOADING Redis is loading the dataset in memory\r\n".to_vec()
    );
    let info = ask(port, &["INFO", "persistence"]).unwrap();
    assert!(contains(&info, b"loading:1\r\n"), "{}", show(&info));
    while ask(port, &["PING"]).unwrap() != b"+PONG\r\n" {
        assert!(Instant::now() < deadline, "loading never ended");
        std::thread::sleep(Duration::from_millis(20));
    }
    let info = ask(port, &["INFO", "persistence"]).unwrap();
    assert!(contains(&info, b"loading:0\r\n"), "{}", show(&info));
    assert_eq!(
        ask(port, &["DBSIZE"]).unwrap(),
        format!(":{KEYS}\r\n").into_bytes()
    );
    assert_eq!(
        ask(port, &["GET", "k1999"]).unwrap(),
        b"$1\r\nv\r\n".to_vec()
    );
    let _ = std::fs::remove_dir_all(&dir);
}
