//! Reply encoding, RESP2 and RESP3, straight into the connection's output buffer.
//!
//! Each method appends one RESP item; aggregates are a header followed by their
//! elements, written by further calls, as Redis's `addReply*` functions do. Types
//! RESP2 lacks degrade the way Redis degrades them (a map becomes a flat array, a
//! boolean an integer, a double a bulk string), so command code writes one reply
//! and the connection's protocol decides the bytes.

use crate::double::g17;

/// The protocol a connection speaks (HELLO 2|3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Protocol {
    /// RESP2, what every connection starts with.
    #[default]
    Resp2,
    /// RESP3, after `HELLO 3`.
    Resp3,
}

/// Encodes replies into `out`. Aggregate headers (`array`, `map`, `set`, `push`) are
/// written first and then their elements, as Redis does.
pub struct Reply<'a> {
    /// The connection's output buffer; replies are appended.
    pub out: &'a mut Vec<u8>,
    /// Decides how RESP3-only types are written.
    pub proto: Protocol,
}

impl<'a> Reply<'a> {
    /// An encoder appending to `out` in protocol `proto`.
    pub fn new(out: &'a mut Vec<u8>, proto: Protocol) -> Self {
        Reply { out, proto }
    }
    /// `+OK`
    pub fn ok(&mut self) {
        self.out.extend_from_slice(b"+OK\r\n");
    }
    /// `+text` (text must not contain CR or LF; any that slip in become spaces so the
    /// reply stays one line)
    pub fn simple(&mut self, text: &str) {
        self.line(b'+', text.as_bytes());
    }
    /// `-line`: `line` is the whole error text including its code, e.g. `ERR syntax error`.
    /// A leading `-` in `line` is not doubled; written as [`error_bytes`](Self::error_bytes).
    pub fn error(&mut self, line: &str) {
        let line = line.strip_prefix('-').unwrap_or(line);
        self.error_bytes(line.as_bytes());
    }
    /// `-line` as Redis's `addReplyErrorFormat` writes the line it formatted:
    /// CR and LF at its end dropped, any other turned into a space, so the
    /// reply stays one line whatever client bytes it quotes.
    pub fn error_bytes(&mut self, line: &[u8]) {
        let end = line
            .iter()
            .rposition(|&b| b != b'\r' && b != b'\n')
            .map_or(0, |last| last + 1);
        self.line(b'-', &line[..end]);
    }
    /// `:n`
    pub fn int(&mut self, n: i64) {
        self.header(b':', n);
    }
    /// `$len\r\nbytes\r\n`
    pub fn bulk(&mut self, bytes: &[u8]) {
        put_bulk(self.out, bytes);
    }
    /// A bulk string holding the decimal form of `n` (as Redis replies to GET on an int-encoded value).
    pub fn bulk_int(&mut self, n: i64) {
        let mut digits = itoa::Buffer::new();
        self.bulk(digits.format(n).as_bytes());
    }
    /// Null bulk: RESP2 `$-1`, RESP3 `_`.
    pub fn null(&mut self) {
        self.out.extend_from_slice(match self.proto {
            Protocol::Resp2 => b"$-1\r\n",
            Protocol::Resp3 => b"_\r\n",
        });
    }
    /// Null array: RESP2 `*-1`, RESP3 `_`.
    pub fn null_array(&mut self) {
        self.out.extend_from_slice(match self.proto {
            Protocol::Resp2 => b"*-1\r\n",
            Protocol::Resp3 => b"_\r\n",
        });
    }
    /// `*n`
    pub fn array(&mut self, n: usize) {
        self.header_len(b'*', n);
    }
    /// RESP3 `%n` (n pairs); RESP2 `*2n`.
    pub fn map(&mut self, n: usize) {
        match self.proto {
            Protocol::Resp2 => self.header_len(b'*', n.saturating_mul(2)),
            Protocol::Resp3 => self.header_len(b'%', n),
        }
    }
    /// RESP3 `~n`; RESP2 `*n`.
    pub fn set(&mut self, n: usize) {
        self.aggregate(b'~', n);
    }
    /// RESP3 `>n`; RESP2 `*n`.
    pub fn push(&mut self, n: usize) {
        self.aggregate(b'>', n);
    }
    /// RESP3 `,d` (`inf`, `-inf`, `nan`); RESP2 a bulk string. Formatting as Redis 7.0's
    /// addReplyDouble (`%.17g`, see [`crate::format_double_g17`]).
    pub fn double(&mut self, d: f64) {
        let text = g17(d);
        match self.proto {
            Protocol::Resp2 => self.bulk(text.as_bytes()),
            Protocol::Resp3 => self.clean_line(b',', text.as_bytes()),
        }
    }
    /// RESP3 `#t`/`#f`; RESP2 `:1`/`:0`.
    pub fn boolean(&mut self, b: bool) {
        self.out.extend_from_slice(match (self.proto, b) {
            (Protocol::Resp2, true) => b":1\r\n",
            (Protocol::Resp2, false) => b":0\r\n",
            (Protocol::Resp3, true) => b"#t\r\n",
            (Protocol::Resp3, false) => b"#f\r\n",
        });
    }
    /// RESP3 `=len\r\nfmt:text`; RESP2 a bulk string of `text`. `fmt` is 3 bytes (`txt`);
    /// like Redis, a shorter one is padded with spaces and a longer one cut.
    pub fn verbatim(&mut self, fmt: &str, text: &[u8]) {
        if self.proto == Protocol::Resp2 {
            return self.bulk(text);
        }
        let mut format = [b' '; VERBATIM_FORMAT_BYTES];
        for (slot, &b) in format.iter_mut().zip(fmt.as_bytes()) {
            *slot = b;
        }
        self.header_len(b'=', text.len().saturating_add(VERBATIM_FORMAT_BYTES + 1));
        self.out.extend_from_slice(&format);
        self.out.push(b':');
        self.out.extend_from_slice(text);
        self.out.extend_from_slice(b"\r\n");
    }
    /// Bytes already encoded as RESP (e.g. a reply that came back from another shard).
    pub fn raw(&mut self, encoded: &[u8]) {
        self.out.extend_from_slice(encoded);
    }

    /// A set or push header: its own type in RESP3, a plain array in RESP2.
    fn aggregate(&mut self, resp3_prefix: u8, n: usize) {
        match self.proto {
            Protocol::Resp2 => self.header_len(b'*', n),
            Protocol::Resp3 => self.header_len(resp3_prefix, n),
        }
    }

    /// `<prefix><n>\r\n` for a signed number.
    fn header(&mut self, prefix: u8, n: i64) {
        let mut digits = itoa::Buffer::new();
        self.clean_line(prefix, digits.format(n).as_bytes());
    }

    /// `<prefix><n>\r\n` for a length or count.
    fn header_len(&mut self, prefix: u8, n: usize) {
        put_len_line(self.out, prefix, n);
    }

    /// `<prefix><text>\r\n`, with any CR or LF in `text` turned into a space.
    fn line(&mut self, prefix: u8, text: &[u8]) {
        self.out.push(prefix);
        let start = self.out.len();
        self.out.extend_from_slice(text);
        for b in &mut self.out[start..] {
            if matches!(*b, b'\r' | b'\n') {
                *b = b' ';
            }
        }
        self.out.extend_from_slice(b"\r\n");
    }

    /// `<prefix><text>\r\n` for text made here (digits), known to hold no CR or LF.
    fn clean_line(&mut self, prefix: u8, text: &[u8]) {
        self.out.push(prefix);
        self.out.extend_from_slice(text);
        self.out.extend_from_slice(b"\r\n");
    }
}

/// The most bytes a bulk string adds besides its content: `$`, 20 digits, two CRLFs.
const BULK_FRAME_BYTES_MAX: usize = 1 + 20 + 2 + 2;

/// Appends the bulk string `$<len>\r\n<bytes>\r\n` to `out`: a reply's, and a
/// command's argument where the server writes commands (the replication
/// stream). One reservation, and the length of a value under 1,000 bytes (most
/// keys and values) written as fixed-size stores rather than through a formatter
/// and a copy of its digits: replies and the replication stream write one per
/// value and argument, so these few instructions are paid per request.
#[inline]
pub fn put_bulk(out: &mut Vec<u8>, bytes: &[u8]) {
    out.reserve(bytes.len() + BULK_FRAME_BYTES_MAX);
    put_len_line(out, b'$', bytes.len());
    out.extend_from_slice(bytes);
    out.extend_from_slice(b"\r\n");
}

/// `<prefix><n>\r\n`: a bulk string's or an aggregate's header.
#[inline]
fn put_len_line(out: &mut Vec<u8>, prefix: u8, n: usize) {
    let digit = |d: usize| b'0' + d as u8;
    match n {
        0..=9 => out.extend_from_slice(&[prefix, digit(n), b'\r', b'\n']),
        10..=99 => out.extend_from_slice(&[prefix, digit(n / 10), digit(n % 10), b'\r', b'\n']),
        100..=999 => out.extend_from_slice(&[
            prefix,
            digit(n / 100),
            digit(n / 10 % 10),
            digit(n % 10),
            b'\r',
            b'\n',
        ]),
        _ => {
            let mut digits = itoa::Buffer::new();
            out.push(prefix);
            out.extend_from_slice(digits.format(n).as_bytes());
            out.extend_from_slice(b"\r\n");
        }
    }
}

/// The format tag of a RESP3 verbatim string (`txt`, `mkd`) is exactly three bytes.
const VERBATIM_FORMAT_BYTES: usize = 3;
