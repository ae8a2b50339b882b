//! Reply encoding, RESP2 and RESP3, straight into the connection's output buffer.
//!
//! TODO(helper-resp): implement. The public API below is fixed.

/// The protocol a connection speaks (HELLO 2|3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Protocol {
    #[default]
    Resp2,
    Resp3,
}

/// Encodes replies into `out`. Aggregate headers (`array`, `map`, `set`, `push`) are
/// written first and then their elements, as Redis does.
pub struct Reply<'a> {
    pub out: &'a mut Vec<u8>,
    pub proto: Protocol,
}

impl<'a> Reply<'a> {
    pub fn new(out: &'a mut Vec<u8>, proto: Protocol) -> Self {
        Reply { out, proto }
    }
    /// `+OK`
    pub fn ok(&mut self) {
        todo!()
    }
    /// `+text` (text must not contain CR or LF)
    pub fn simple(&mut self, text: &str) {
        let _ = text;
        todo!()
    }
    /// `-line`: `line` is the whole error text including its code, e.g. `ERR syntax error`.
    pub fn error(&mut self, line: &str) {
        let _ = line;
        todo!()
    }
    /// `:n`
    pub fn int(&mut self, n: i64) {
        let _ = n;
        todo!()
    }
    /// `$len\r\nbytes\r\n`
    pub fn bulk(&mut self, bytes: &[u8]) {
        let _ = bytes;
        todo!()
    }
    /// A bulk string holding the decimal form of `n` (as Redis replies to GET on an int-encoded value).
    pub fn bulk_int(&mut self, n: i64) {
        let _ = n;
        todo!()
    }
    /// Null bulk: RESP2 `$-1`, RESP3 `_`.
    pub fn null(&mut self) {
        todo!()
    }
    /// Null array: RESP2 `*-1`, RESP3 `_`.
    pub fn null_array(&mut self) {
        todo!()
    }
    /// `*n`
    pub fn array(&mut self, n: usize) {
        let _ = n;
        todo!()
    }
    /// RESP3 `%n` (n pairs); RESP2 `*2n`.
    pub fn map(&mut self, n: usize) {
        let _ = n;
        todo!()
    }
    /// RESP3 `~n`; RESP2 `*n`.
    pub fn set(&mut self, n: usize) {
        let _ = n;
        todo!()
    }
    /// RESP3 `>n`; RESP2 `*n`.
    pub fn push(&mut self, n: usize) {
        let _ = n;
        todo!()
    }
    /// RESP3 `,d` (`inf`, `-inf`, `nan`); RESP2 a bulk string. Formatting as Redis 7.0's
    /// addReplyDouble (`%.17g`).
    pub fn double(&mut self, d: f64) {
        let _ = d;
        todo!()
    }
    /// RESP3 `#t`/`#f`; RESP2 `:1`/`:0`.
    pub fn boolean(&mut self, b: bool) {
        let _ = b;
        todo!()
    }
    /// RESP3 `=len\r\nfmt:text`; RESP2 a bulk string of `text`. `fmt` is 3 bytes (`txt`).
    pub fn verbatim(&mut self, fmt: &str, text: &[u8]) {
        let _ = (fmt, text);
        todo!()
    }
    /// Bytes already encoded as RESP (e.g. a reply that came back from another shard).
    pub fn raw(&mut self, encoded: &[u8]) {
        self.out.extend_from_slice(encoded);
    }
}
