//! Resident memory per key for the seed benchmark's string shapes, measured the way
//! the issue measures servers: RSS after loading minus RSS before, divided by the
//! number of keys. One shape per run, since freed memory is not always returned.
//!
//! `cargo run --release -p ruvio-engine --example memory_probe -- [16|128|ttl] [keys]`

use ruvio_engine::{Engine, ExecCtx};
use ruvio_resp::{CommandParser, Limits, Parsed, Protocol, Reply};

fn rss_bytes() -> usize {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: usize = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    pages * 4096
}

fn main() {
    let mut argv = std::env::args().skip(1);
    let shape = argv.next().unwrap_or_else(|| "16".into());
    let keys: usize = argv.next().and_then(|n| n.parse().ok()).unwrap_or(100_000);
    let (value_bytes, ttl) = match shape.as_str() {
        "128" => (128, false),
        "ttl" => (16, true),
        _ => (16, false),
    };
    let value: Vec<u8> = (0..value_bytes).map(|i| b'a' + (i % 26) as u8).collect();
    let mut engine = Engine::new(16);
    let mut parser = CommandParser::default();
    let mut out = Vec::with_capacity(64);
    let mut request = Vec::with_capacity(256);
    let set = Engine::find_command(b"SET")
        .and_then(|row| row.handler)
        .expect("SET row");
    let before = rss_bytes();
    for i in 0..keys {
        let key = format!("key:{i:012}");
        request.clear();
        let mut args: Vec<&[u8]> = vec![b"SET", key.as_bytes(), &value];
        if ttl {
            args.extend_from_slice(&[b"EX", b"100000"]);
        }
        request.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
        for a in &args {
            request.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            request.extend_from_slice(a);
            request.extend_from_slice(b"\r\n");
        }
        let Ok(Parsed::Complete { args, .. }) = parser.parse(&request, &Limits::default()) else {
            panic!("parse")
        };
        out.clear();
        let mut reply = Reply::new(&mut out, Protocol::Resp2);
        let mut ctx = ExecCtx::new(0, 1_700_000_000_000);
        set(&mut engine, &mut ctx, args, &mut reply).expect("SET succeeds");
    }
    let after = rss_bytes();
    println!(
        "shape {shape}: {keys} keys, RSS {:.1} bytes/key, engine estimate {:.1} bytes/key",
        (after - before) as f64 / keys as f64,
        engine.used_memory_bytes() as f64 / keys as f64
    );
}
