//! Test harness: run a command line against an [`Engine`] the way the server does
//! (RESP request bytes -> parser -> table lookup -> subcommand and arity -> handler) and return
//! the exact reply bytes as a string.

#![allow(dead_code)]

use ruvio_engine::command::{Block, CommandTree, Effects, EventClass, Outcome};
use ruvio_engine::{CmdError, Engine, ExecCtx};
use ruvio_resp::{CommandParser, Limits, Parsed, Protocol, Reply};

/// A fixed "now" so TTL arithmetic in tests is exact.
pub const NOW_MS: u64 = 1_700_000_000_000;

/// An engine plus the connection state the server would keep.
pub struct Harness {
    pub engine: Engine,
    pub db: usize,
    pub now_ms: u64,
    pub no_touch: bool,
    pub proto: Protocol,
    /// What the last command recorded (every `track_*` switch on).
    pub effects: Effects,
    /// The block request of the last command, when it asked to block (its reply
    /// is then empty).
    pub blocked: Option<Block>,
    parser: CommandParser,
}

impl Default for Harness {
    fn default() -> Self {
        Harness {
            engine: Engine::new(16),
            db: 0,
            now_ms: NOW_MS,
            no_touch: false,
            proto: Protocol::Resp2,
            effects: Effects::default(),
            blocked: None,
            parser: CommandParser::default(),
        }
    }
}

impl Harness {
    /// A RESP3 harness.
    pub fn resp3() -> Harness {
        Harness {
            proto: Protocol::Resp3,
            ..Harness::default()
        }
    }

    /// Run one command line (redis-cli quoting) and return the reply bytes as text.
    pub fn run(&mut self, line: &str) -> String {
        let args = split_line(line);
        let refs: Vec<&[u8]> = args.iter().map(|a| a.as_slice()).collect();
        String::from_utf8_lossy(&self.run_args(&refs)).into_owned()
    }

    /// Run one command given as raw arguments; returns the reply bytes.
    pub fn run_args(&mut self, args: &[&[u8]]) -> Vec<u8> {
        let request = encode_request(args);
        let mut out = Vec::new();
        let parsed = self
            .parser
            .parse(&request, &Limits::default())
            .expect("valid request");
        let Parsed::Complete { args, .. } = parsed else {
            panic!("incomplete request")
        };
        let mut reply = Reply::new(&mut out, self.proto);
        // A command refused before it runs (unknown, arity) does not block either.
        self.blocked = None;
        let resolved = match Engine::find_command(args.get(0)) {
            Some(row) if !row.meta.arity_ok(args.len()) => Err(CmdError::WrongArity(row.meta.name)),
            Some(row) => row.resolve(args),
            None => Err(CmdError::unknown_command(args)),
        };
        let cmd = match resolved {
            Ok(cmd) => cmd,
            Err(e) => {
                e.write(&mut reply);
                return out;
            }
        };
        let handler = cmd.handler.expect("a resolved row has a handler");
        let mut ctx = ExecCtx::new(self.db, self.now_ms);
        ctx.no_touch = self.no_touch;
        ctx.effects = Effects::recording(None, true, true, true);
        match handler(&mut self.engine, &mut ctx, args, &mut reply) {
            Ok(Outcome::Done) => {}
            Ok(Outcome::Block(block)) => self.blocked = Some(block),
            Err(e) => e.write(&mut reply),
        }
        self.effects = ctx.effects;
        out
    }
}

impl Harness {
    /// What the write-ahead log would hold for `line` run now: its records as
    /// space-joined text (the records of a no-op are none).
    pub fn log_of(&mut self, line: &str) -> Vec<String> {
        let args = split_line(line);
        let refs: Vec<&[u8]> = args.iter().map(|a| a.as_slice()).collect();
        self.run_args(&refs);
        let request = encode_request(&refs);
        let mut parser = CommandParser::default();
        let Ok(Parsed::Complete { args, .. }) = parser.parse(&request, &Limits::default()) else {
            panic!("incomplete request")
        };
        self.effects
            .log_records(args)
            .iter()
            .map(|record| {
                record
                    .iter()
                    .map(|a| String::from_utf8_lossy(a).into_owned())
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .collect()
    }
}

/// Run `line` on a fresh RESP2 engine context (the brief's `run(&mut engine, ..)`).
pub fn run(engine: &mut Engine, line: &str) -> String {
    let mut h = Harness {
        engine: std::mem::replace(engine, Engine::new(0)),
        ..Harness::default()
    };
    let out = h.run(line);
    *engine = h.engine;
    out
}

/// `*N\r\n$len\r\narg\r\n...`
pub fn encode_request(args: &[&[u8]]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// Split a line like redis-cli: spaces separate, `"..."` quotes with `\n \r \t \\ \" \xHH`.
pub fn split_line(line: &str) -> Vec<Vec<u8>> {
    let bytes = line.as_bytes();
    let mut args = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b' ' {
            i += 1;
            continue;
        }
        let mut arg = Vec::new();
        if bytes[i] == b'"' {
            i += 1;
            while i < bytes.len() && bytes[i] != b'"' {
                if bytes[i] == b'\\' && i + 1 < bytes.len() {
                    i += 1;
                    match bytes[i] {
                        b'n' => arg.push(b'\n'),
                        b'r' => arg.push(b'\r'),
                        b't' => arg.push(b'\t'),
                        b'x' => {
                            let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap();
                            arg.push(u8::from_str_radix(hex, 16).unwrap());
                            i += 2;
                        }
                        c => arg.push(c),
                    }
                } else {
                    arg.push(bytes[i]);
                }
                i += 1;
            }
            i += 1;
        } else {
            while i < bytes.len() && bytes[i] != b' ' {
                arg.push(bytes[i]);
                i += 1;
            }
        }
        args.push(arg);
    }
    args
}

/// Expected bulk string reply.
pub fn bulk(s: &str) -> String {
    format!("${}\r\n{}\r\n", s.len(), s)
}

/// Expected integer reply.
pub fn int(n: i64) -> String {
    format!(":{n}\r\n")
}

/// Expected error reply.
pub fn err(s: &str) -> String {
    format!("-{s}\r\n")
}

pub const OK: &str = "+OK\r\n";
pub const NIL: &str = "$-1\r\n";
pub const NIL3: &str = "_\r\n";
pub const WRONGTYPE: &str =
    "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n";
pub const NOT_INT: &str = "-ERR value is not an integer or out of range\r\n";
pub const SYNTAX: &str = "-ERR syntax error\r\n";

/// A connection to a running server (Redis, or Ruvio) at `RUVIO_COMPARE_PORT`, for
/// the ignored tests that compare the engine's replies with a real server's.
pub struct RealServer {
    writer: std::net::TcpStream,
    reader: std::io::BufReader<std::net::TcpStream>,
}

impl RealServer {
    /// Connects to `RUVIO_COMPARE_PORT` on this host; `None` when it is not set.
    pub fn from_env() -> Option<RealServer> {
        let port = std::env::var("RUVIO_COMPARE_PORT").ok()?;
        let port: u16 = port.parse().expect("RUVIO_COMPARE_PORT is a port");
        let stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        Some(RealServer {
            writer: stream.try_clone().unwrap(),
            reader: std::io::BufReader::new(stream),
        })
    }

    /// Sends `args` as one request and reads its whole reply.
    pub fn call(&mut self, args: &[Vec<u8>]) -> Vec<u8> {
        use std::io::Write;
        let refs: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
        self.writer.write_all(&encode_request(&refs)).unwrap();
        let mut out = Vec::new();
        read_reply(&mut self.reader, &mut out);
        out
    }
}

/// Appends one whole reply (bulk strings, arrays and RESP3 maps nested to any
/// depth; other types are one line) from `r` to `out`.
fn read_reply(r: &mut impl std::io::BufRead, out: &mut Vec<u8>) {
    let start = out.len();
    r.read_until(b'\n', out).unwrap();
    let line = out[start..].to_vec();
    let n: i64 = std::str::from_utf8(&line[1..line.len() - 2])
        .unwrap_or("0")
        .parse()
        .unwrap_or(0);
    match line[0] {
        b'$' if n >= 0 => {
            let mut body = vec![0; n as usize + 2];
            r.read_exact(&mut body).unwrap();
            out.extend_from_slice(&body);
        }
        b'*' if n > 0 => (0..n).for_each(|_| read_reply(r, out)),
        b'%' if n > 0 => (0..2 * n).for_each(|_| read_reply(r, out)),
        _ => {}
    }
}

/// The comparison tests' random source: `rand(n)` is in `0..n`, from a xorshift
/// seeded by `RUVIO_COMPARE_SEED` (a fixed seed without it), so a run replays.
pub fn compare_rand() -> impl FnMut(u64) -> u64 {
    let mut seed = std::env::var("RUVIO_COMPARE_SEED")
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
        .unwrap_or(0x9e37_79b9_7f4a_7c15)
        | 1;
    move |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n.max(1)
    }
}

/// An array reply of bulk strings, as RESP text.
pub fn arr(items: &[&str]) -> String {
    let mut out = format!("*{}\r\n", items.len());
    for i in items {
        out.push_str(&bulk(i));
    }
    out
}

/// The keyspace events the last command fired: (class, name).
pub fn events(h: &Harness) -> Vec<(EventClass, &'static str)> {
    h.effects
        .events()
        .map(|(e, _, _)| (e.class, e.name))
        .collect()
}
