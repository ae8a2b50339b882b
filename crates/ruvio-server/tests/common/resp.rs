//! Talking RESP to a server from a test: commands encoded as multibulk
//! requests, a raw TCP connection that reads whole replies as bytes
//! ([`RawConn`]), frame lengths and a decoded [`Value`] for replies that are
//! compared by shape, and the byte helpers assertion messages use. Apart from
//! the server harness (`mod.rs`, starting and stopping servers) because it is
//! the client side of every test, whatever server it talks to.

use super::IO_TIMEOUT;
use std::fmt::Write as _;
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// A bulk string's RESP bytes, as text.
pub fn bulk(s: &str) -> String {
    format!("${}\r\n{s}\r\n", s.len())
}

/// XREAD's and XREADGROUP's RESP2 reply for one stream and one entry with one
/// field.
pub fn stream_entry_reply(key: &str, id: &str, field: &str, value: &str) -> Vec<u8> {
    format!(
        "*1\r\n*2\r\n{}*1\r\n*2\r\n{}*2\r\n{}{}",
        bulk(key),
        bulk(id),
        bulk(field),
        bulk(value)
    )
    .into_bytes()
}

/// `needle` occurs in `haystack`.
/// Where the records of a log segment end: the space after them is zero-filled
/// (direct writes fill ahead) or absent.
pub fn records_end(log: &[u8]) -> usize {
    log.iter().rposition(|&b| b != 0).map_or(0, |last| last + 1)
}

pub fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// Bytes shown like a Rust byte string literal, for assertion messages.
pub fn show(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() + 2);
    out.push('"');
    for &b in bytes.iter().take(2000) {
        match b {
            b'\r' => out.push_str("\\r"),
            b'\n' => out.push_str("\\n"),
            b'\t' => out.push_str("\\t"),
            b'"' => out.push_str("\\\""),
            b'\\' => out.push_str("\\\\"),
            0x20..=0x7e => out.push(b as char),
            _ => {
                let _ = write!(out, "\\x{b:02x}");
            }
        }
    }
    if bytes.len() > 2000 {
        let _ = write!(out, "...({} bytes)", bytes.len());
    }
    out.push('"');
    out
}

/// One command of a differential sequence: its arguments as bytes.
pub type Cmd = Vec<Vec<u8>>;

/// A [`Cmd`] from string arguments.
pub fn cmd(words: &[&str]) -> Cmd {
    words.iter().map(|w| w.as_bytes().to_vec()).collect()
}

/// A command shown for failure messages and traces, each argument as [`show`] prints it.
pub fn show_cmd(command: &[Vec<u8>]) -> String {
    command
        .iter()
        .map(|a| show(a))
        .collect::<Vec<_>>()
        .join(" ")
}

/// MULTI, each command of `queue`, EXEC on `reference` and on `target`: every
/// reply of each, concatenated, `(reference's, target's)`.
pub fn transaction_on_both<S: AsRef<[u8]>>(
    reference: &mut RawConn,
    target: &mut RawConn,
    queue: &[Vec<S>],
) -> (Vec<u8>, Vec<u8>) {
    let mut replies = (reference.cmd(&["multi"]), target.cmd(&["multi"]));
    for command in queue {
        replies.0.extend(reference.cmd(command));
        replies.1.extend(target.cmd(command));
    }
    replies.0.extend(reference.cmd(&["exec"]));
    replies.1.extend(target.cmd(&["exec"]));
    replies
}

/// Encodes a command as a RESP multibulk request.
pub fn encode<A: AsRef<[u8]>>(args: &[A]) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
    for arg in args {
        let arg = arg.as_ref();
        out.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
        out.extend_from_slice(arg);
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// A plain TCP connection that sends bytes and reads whole RESP replies as raw bytes.
pub struct RawConn {
    stream: TcpStream,
    buf: Vec<u8>,
}

impl RawConn {
    /// Connects to 127.0.0.1:`port` with [`IO_TIMEOUT`] reads.
    pub fn connect(port: u16) -> RawConn {
        let stream = TcpStream::connect(("127.0.0.1", port))
            .unwrap_or_else(|e| panic!("connect to 127.0.0.1:{port}: {e}"));
        RawConn::from_stream(stream)
    }

    /// Connects to `host`:`port` (a node on another network namespace's
    /// address) with [`IO_TIMEOUT`] reads.
    pub fn connect_to(host: &str, port: u16) -> RawConn {
        let stream = TcpStream::connect((host, port))
            .unwrap_or_else(|e| panic!("connect to {host}:{port}: {e}"));
        RawConn::from_stream(stream)
    }

    /// Wraps a connected stream (any address), with [`IO_TIMEOUT`] reads.
    pub fn from_stream(stream: TcpStream) -> RawConn {
        stream
            .set_read_timeout(Some(IO_TIMEOUT))
            .expect("set_read_timeout");
        stream.set_nodelay(true).expect("set_nodelay");
        RawConn {
            stream,
            buf: Vec::new(),
        }
    }

    /// Writes `bytes` in one write.
    pub fn send(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).expect("write to server");
    }

    fn fill(&mut self) -> usize {
        let mut chunk = [0u8; 65536];
        loop {
            match self.stream.read(&mut chunk) {
                Ok(n) => {
                    self.buf.extend_from_slice(&chunk[..n]);
                    return n;
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    panic!("timed out waiting for the server; have {}", show(&self.buf))
                }
                // A reset after the server closed counts as end of stream.
                Err(e) if e.kind() == ErrorKind::ConnectionReset => return 0,
                Err(e) => panic!("read from server: {e}"),
            }
        }
    }

    /// Reads until `needle` arrives; returns every byte up to and including it.
    pub fn read_until(&mut self, needle: &[u8]) -> Vec<u8> {
        loop {
            if let Some(at) = self.buf.windows(needle.len()).position(|w| w == needle) {
                return self.buf.drain(..at + needle.len()).collect();
            }
            if self.fill() == 0 {
                panic!("connection closed before {}", show(needle));
            }
        }
    }

    /// Reads one complete RESP2/RESP3 reply and returns its raw bytes.
    pub fn read_reply(&mut self) -> Vec<u8> {
        loop {
            match frame_len(&self.buf) {
                Ok(Some(len)) => return self.buf.drain(..len).collect(),
                Ok(None) => {
                    if self.fill() == 0 {
                        panic!("connection closed mid-reply; have {}", show(&self.buf));
                    }
                }
                Err(e) => panic!("malformed reply from server ({e}): {}", show(&self.buf)),
            }
        }
    }

    /// One complete reply if it arrives within `within`, else `None` (what
    /// came of it stays for the next read): tells a server that answers from
    /// one that is busy (a shard in DEBUG SLEEP).
    pub fn reply_within(&mut self, within: Duration) -> Option<Vec<u8>> {
        self.stream
            .set_read_timeout(Some(within))
            .expect("set_read_timeout");
        let mut chunk = [0u8; 65536];
        let reply = loop {
            if let Ok(Some(len)) = frame_len(&self.buf) {
                break Some(self.buf.drain(..len).collect());
            }
            match self.stream.read(&mut chunk) {
                Ok(n) if n > 0 => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                _ => break None,
            }
        };
        self.stream
            .set_read_timeout(Some(IO_TIMEOUT))
            .expect("set_read_timeout");
        reply
    }

    /// Sends one command and returns its raw reply.
    pub fn cmd<A: AsRef<[u8]>>(&mut self, args: &[A]) -> Vec<u8> {
        self.send(&encode(args));
        self.read_reply()
    }

    /// Reads exactly `expected.len()` bytes and asserts they are `expected`.
    pub fn expect(&mut self, expected: &[u8]) {
        while self.buf.len() < expected.len() {
            if self.fill() == 0 {
                panic!(
                    "connection closed; expected {}, got {}",
                    show(expected),
                    show(&self.buf)
                );
            }
            if !expected.starts_with(&self.buf[..self.buf.len().min(expected.len())]) {
                break;
            }
        }
        if self.buf.starts_with(expected) {
            self.buf.drain(..expected.len());
            return;
        }
        // Show the whole unexpected reply, not just as many bytes as were expected.
        self.stream
            .set_read_timeout(Some(Duration::from_millis(300)))
            .expect("set_read_timeout");
        let mut chunk = [0u8; 65536];
        while frame_len(&self.buf).ok().flatten().is_none() {
            match self.stream.read(&mut chunk) {
                Ok(n) if n > 0 => self.buf.extend_from_slice(&chunk[..n]),
                _ => break,
            }
        }
        panic!(
            "\nexpected {}\n     got {}",
            show(expected),
            show(&self.buf)
        );
    }

    /// Sends `request` and asserts the reply bytes are exactly `expected`.
    pub fn roundtrip(&mut self, request: &[u8], expected: &[u8]) {
        self.send(request);
        self.expect(expected);
    }

    /// Asserts the server closes the connection with nothing more to read.
    pub fn expect_closed(&mut self) {
        loop {
            if !self.buf.is_empty() {
                panic!("expected the connection to close, got {}", show(&self.buf));
            }
            if self.fill() == 0 {
                return;
            }
        }
    }

    /// Asserts nothing arrives within `wait` (the server is waiting for more input).
    pub fn expect_silence(&mut self, wait: Duration) {
        self.stream
            .set_read_timeout(Some(wait))
            .expect("set_read_timeout");
        let mut chunk = [0u8; 4096];
        let got = match self.stream.read(&mut chunk) {
            Ok(0) => Some(b"<connection closed>".to_vec()),
            Ok(n) => Some(chunk[..n].to_vec()),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => None,
            Err(e) => Some(format!("<error {e}>").into_bytes()),
        };
        self.stream
            .set_read_timeout(Some(IO_TIMEOUT))
            .expect("set_read_timeout");
        if let Some(got) = got {
            panic!("expected no reply yet, got {}", show(&got));
        }
    }

    /// The underlying stream (for half-closes and the like).
    pub fn stream(&mut self) -> &mut TcpStream {
        &mut self.stream
    }
}

fn line_end(buf: &[u8], from: usize) -> Option<usize> {
    buf.get(from..)?
        .windows(2)
        .position(|w| w == b"\r\n")
        .map(|p| from + p)
}

fn parse_int(bytes: &[u8]) -> Result<i64, String> {
    std::str::from_utf8(bytes)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("bad length {}", show(bytes)))
}

/// Length of the complete RESP2/RESP3 frame at the start of `buf`, `None` if more bytes
/// are needed.
pub fn frame_len(buf: &[u8]) -> Result<Option<usize>, String> {
    frame_len_at(buf, 0)
}

fn frame_len_at(buf: &[u8], at: usize) -> Result<Option<usize>, String> {
    let Some(&kind) = buf.get(at) else {
        return Ok(None);
    };
    let Some(eol) = line_end(buf, at + 1) else {
        return Ok(None);
    };
    let header = &buf[at + 1..eol];
    let after = eol + 2;
    match kind {
        b'+' | b'-' | b':' | b'_' | b',' | b'#' | b'(' => Ok(Some(after)),
        b'$' | b'=' | b'!' => {
            let len = parse_int(header)?;
            if len < 0 {
                return Ok(Some(after));
            }
            let end = after + len as usize + 2;
            if buf.len() < end {
                return Ok(None);
            }
            if &buf[end - 2..end] != b"\r\n" {
                return Err("bulk not terminated by CRLF".into());
            }
            Ok(Some(end))
        }
        b'*' | b'~' | b'>' | b'%' | b'|' => {
            let count = parse_int(header)?;
            if count < 0 {
                return Ok(Some(after));
            }
            let elements = if kind == b'%' || kind == b'|' {
                count * 2
            } else {
                count
            };
            let mut pos = after;
            for _ in 0..elements {
                match frame_len_at(buf, pos)? {
                    Some(next) => pos = next,
                    None => return Ok(None),
                }
            }
            if kind == b'|' {
                // An attribute is followed by the reply it annotates.
                return frame_len_at(buf, pos);
            }
            Ok(Some(pos))
        }
        other => Err(format!("unknown RESP type byte {:?}", other as char)),
    }
}

/// A decoded RESP2/RESP3 value, for tests that check structure rather than bytes.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// `+...`
    Simple(String),
    /// `-...`
    Error(String),
    /// `:n`
    Int(i64),
    /// `$n` (RESP2 null bulk is `Nil`)
    Bulk(Vec<u8>),
    /// `$-1`, `*-1`, `_`
    Nil,
    /// `*n`
    Array(Vec<Value>),
    /// `~n`
    Set(Vec<Value>),
    /// `>n`
    Push(Vec<Value>),
    /// `%n`
    Map(Vec<(Value, Value)>),
    /// `,x` kept as text
    Double(String),
    /// `#t` / `#f`
    Bool(bool),
    /// `(n` kept as text
    BigNumber(String),
    /// `=n` format and text
    Verbatim(String, Vec<u8>),
}

impl Value {
    /// Bulk or simple string contents as text.
    pub fn text(&self) -> String {
        match self {
            Value::Simple(s) | Value::Error(s) | Value::Double(s) | Value::BigNumber(s) => {
                s.clone()
            }
            Value::Bulk(b) | Value::Verbatim(_, b) => String::from_utf8_lossy(b).into_owned(),
            Value::Int(n) => n.to_string(),
            other => panic!("not a string: {other:?}"),
        }
    }

    /// Looks `key` up in a map (RESP3) or a flat key/value array (RESP2).
    pub fn get(&self, key: &str) -> Option<&Value> {
        match self {
            Value::Map(pairs) => pairs.iter().find(|(k, _)| k.text() == key).map(|(_, v)| v),
            Value::Array(items) => items
                .chunks(2)
                .find(|pair| pair[0].text() == key)
                .map(|pair| &pair[1]),
            _ => None,
        }
    }
}

/// Decodes one complete frame (as returned by [`RawConn::read_reply`]).
pub fn decode(frame: &[u8]) -> Value {
    let (value, used) = decode_at(frame, 0);
    assert_eq!(
        used,
        frame.len(),
        "trailing bytes after frame {}",
        show(frame)
    );
    value
}

fn decode_at(buf: &[u8], at: usize) -> (Value, usize) {
    let eol = line_end(buf, at + 1).expect("complete frame");
    let header = &buf[at + 1..eol];
    let text = || String::from_utf8_lossy(header).into_owned();
    let after = eol + 2;
    let kind = buf[at];
    match kind {
        b'+' => (Value::Simple(text()), after),
        b'-' => (Value::Error(text()), after),
        b':' => (Value::Int(parse_int(header).expect("integer")), after),
        b'_' => (Value::Nil, after),
        b',' => (Value::Double(text()), after),
        b'#' => (Value::Bool(header == b"t"), after),
        b'(' => (Value::BigNumber(text()), after),
        b'$' | b'=' | b'!' => {
            let len = parse_int(header).expect("length");
            if len < 0 {
                return (Value::Nil, after);
            }
            let body = buf[after..after + len as usize].to_vec();
            let end = after + len as usize + 2;
            match kind {
                b'$' => (Value::Bulk(body), end),
                b'!' => (
                    Value::Error(String::from_utf8_lossy(&body).into_owned()),
                    end,
                ),
                _ => {
                    let format = String::from_utf8_lossy(&body[..3]).into_owned();
                    (Value::Verbatim(format, body[4..].to_vec()), end)
                }
            }
        }
        b'*' | b'~' | b'>' | b'%' | b'|' => {
            let count = parse_int(header).expect("count");
            if count < 0 {
                return (Value::Nil, after);
            }
            let mut pos = after;
            let mut items = Vec::new();
            let elements = if kind == b'%' || kind == b'|' {
                count * 2
            } else {
                count
            };
            for _ in 0..elements {
                let (v, next) = decode_at(buf, pos);
                items.push(v);
                pos = next;
            }
            let value = match kind {
                b'*' => Value::Array(items),
                b'~' => Value::Set(items),
                b'>' => Value::Push(items),
                _ => {
                    let mut pairs = Vec::new();
                    let mut it = items.into_iter();
                    while let (Some(k), Some(v)) = (it.next(), it.next()) {
                        pairs.push((k, v));
                    }
                    Value::Map(pairs)
                }
            };
            if kind == b'|' {
                return decode_at(buf, pos);
            }
            (value, pos)
        }
        other => panic!("unknown RESP type byte {:?}", other as char),
    }
}
