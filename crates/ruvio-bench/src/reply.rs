//! Reading replies: a resumable scanner for the hot path and a small decoder for setup.
//!
//! The load generator never needs the content of a reply, only where it ends and
//! whether it is an error. [`ReplyScanner`] finds reply boundaries without
//! allocating and without ever needing a whole reply in memory: a large bulk
//! string is skipped as it streams in, and the scanner remembers how many values
//! the current reply still owes across reads. [`decode`] builds a [`Value`] tree
//! for the few setup replies whose content matters (CLUSTER SLOTS).

/// Longest header line (type byte, length or simple string, CRLF) the scanner
/// accepts before calling the stream broken. Simple strings and errors from real
/// servers are far shorter; the limit must stay below the load loop's read
/// buffer so a line always fits in it.
pub const LINE_BYTES_MAX: usize = 16 * 1024;

/// Deepest aggregate nesting the decoder follows; setup replies nest 3 deep.
const DECODE_DEPTH_MAX: usize = 32;

/// The stream does not look like RESP; the connection cannot be trusted any more.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProtocolError(pub String);

/// Where the scanner is inside the current reply between reads.
#[derive(Debug, Default, Clone)]
pub struct ReplyScanner {
    /// Values the current reply still needs; 0 between replies.
    need: u64,
    /// Bytes of a bulk body (including its CRLF) still to skip.
    skip: usize,
    /// The value being scanned is a RESP3 push (`>`), not a reply.
    in_push: bool,
    /// Push frames seen (client-side caching's invalidations) and not yet taken.
    pushes: u64,
}

/// What a complete value header told the scanner.
enum Header {
    /// A value with nothing after its line (simple, integer, null, double...).
    Done,
    /// A bulk body of this many bytes plus CRLF follows.
    Body(usize),
    /// An aggregate owing this many more values.
    Children(u64),
}

impl ReplyScanner {
    /// A scanner positioned between replies.
    pub fn new() -> Self {
        Self::default()
    }

    /// True when no reply is partly scanned.
    #[cfg(test)]
    pub fn is_idle(&self) -> bool {
        self.need == 0 && self.skip == 0
    }

    /// Push frames (RESP3 `>`, e.g. tracking's invalidations) seen since the
    /// last call.
    pub fn take_pushes(&mut self) -> u64 {
        std::mem::take(&mut self.pushes)
    }

    /// Consume every complete value in `buf`, calling `on_reply` once per finished
    /// top-level reply with the error line when that reply is an error. A
    /// top-level push frame is not a reply: it is skipped and counted
    /// ([`ReplyScanner::take_pushes`]), wherever it falls between replies.
    ///
    /// Returns the number of bytes consumed. Bytes after that offset are the start
    /// of an incomplete value: the caller keeps them and appends the next read.
    pub fn scan(
        &mut self,
        buf: &[u8],
        mut on_reply: impl FnMut(Option<&[u8]>),
    ) -> Result<usize, ProtocolError> {
        let mut pos = 0;
        loop {
            if self.skip > 0 {
                let take = self.skip.min(buf.len() - pos);
                pos += take;
                self.skip -= take;
                if self.skip > 0 {
                    return Ok(pos);
                }
                if self.need == 0 {
                    self.finish(None, &mut on_reply);
                }
            }
            if pos >= buf.len() {
                return Ok(pos);
            }
            let top = self.need == 0;
            if top {
                self.need = 1;
            }
            let Some(line_end) = find_lf(&buf[pos..]) else {
                if buf.len() - pos > LINE_BYTES_MAX {
                    return Err(ProtocolError("reply line too long".into()));
                }
                if top {
                    self.need = 0;
                }
                return Ok(pos);
            };
            let line = &buf[pos..pos + line_end + 1];
            let header = parse_header(line)?;
            if top {
                self.in_push = line[0] == b'>';
            }
            pos += line.len();
            match header {
                Header::Done => self.need -= 1,
                Header::Body(len) => {
                    self.need -= 1;
                    self.skip = len + 2;
                    continue;
                }
                Header::Children(n) => self.need = self.need - 1 + n,
            }
            if self.need == 0 {
                let error = (top && line[0] == b'-').then(|| trim_line(&line[1..]));
                self.finish(error, &mut on_reply);
            }
        }
    }

    /// A top-level value ended: a reply, or a push to count.
    fn finish(&mut self, error: Option<&[u8]>, on_reply: &mut impl FnMut(Option<&[u8]>)) {
        if std::mem::take(&mut self.in_push) {
            self.pushes += 1;
        } else {
            on_reply(error);
        }
    }
}

/// Offset of the first `\n` in `buf`.
#[inline]
fn find_lf(buf: &[u8]) -> Option<usize> {
    buf.iter().position(|&b| b == b'\n')
}

/// The line without its trailing CRLF (or bare LF).
fn trim_line(line: &[u8]) -> &[u8] {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    line.strip_suffix(b"\r").unwrap_or(line)
}

/// Classify one header line (type byte through LF).
fn parse_header(line: &[u8]) -> Result<Header, ProtocolError> {
    let body = trim_line(&line[1..]);
    match line[0] {
        b'+' | b'-' | b':' | b',' | b'#' | b'(' | b'_' => Ok(Header::Done),
        b'$' | b'=' | b'!' => match parse_len(body)? {
            None => Ok(Header::Done),
            Some(n) => Ok(Header::Body(n)),
        },
        b'*' | b'~' | b'>' => Ok(Header::Children(parse_len(body)?.unwrap_or(0) as u64)),
        b'%' => Ok(Header::Children(2 * parse_len(body)?.unwrap_or(0) as u64)),
        // An attribute map precedes the value it annotates: its pairs and that value.
        b'|' => Ok(Header::Children(
            2 * parse_len(body)?.unwrap_or(0) as u64 + 1,
        )),
        other => Err(ProtocolError(format!(
            "unexpected reply type byte 0x{other:02x}"
        ))),
    }
}

/// A length field: `Some(n)`, or `None` for -1 (null).
fn parse_len(digits: &[u8]) -> Result<Option<usize>, ProtocolError> {
    if digits == b"-1" {
        return Ok(None);
    }
    if digits.is_empty() || digits.len() > 19 {
        return Err(ProtocolError("bad length in reply".into()));
    }
    let mut n: usize = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return Err(ProtocolError("bad length in reply".into()));
        }
        n = n * 10 + (d - b'0') as usize;
    }
    Ok(Some(n))
}

/// A decoded reply, for setup commands whose content matters.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// Simple string, bulk string, verbatim string, double or big number text.
    Bytes(Vec<u8>),
    /// Integer.
    Int(i64),
    /// Error reply text.
    Error(String),
    /// Array, set, push or map (flattened key, value, ...).
    Array(Vec<Value>),
    /// Null of any kind.
    Nil,
}

impl Value {
    /// The integer inside an Int, or parsed from Bytes.
    pub fn as_int(&self) -> Option<i64> {
        match self {
            Value::Int(n) => Some(*n),
            Value::Bytes(b) => std::str::from_utf8(b).ok()?.parse().ok(),
            _ => None,
        }
    }
}

/// Decode one complete reply at the start of `buf`: `Ok(Some((value, used)))`,
/// `Ok(None)` when more bytes are needed.
pub fn decode(buf: &[u8]) -> Result<Option<(Value, usize)>, ProtocolError> {
    decode_at(buf, 0)
}

fn decode_at(buf: &[u8], depth: usize) -> Result<Option<(Value, usize)>, ProtocolError> {
    if depth > DECODE_DEPTH_MAX {
        return Err(ProtocolError("reply nested too deep".into()));
    }
    let Some(line_end) = find_lf(buf) else {
        return Ok(None);
    };
    let line = &buf[..line_end + 1];
    let text = trim_line(&line[1..]);
    let mut used = line.len();
    let value = match parse_header(line)? {
        Header::Done => match line[0] {
            b'-' => Value::Error(String::from_utf8_lossy(text).into_owned()),
            b':' => Value::Int(parse_int(text)?),
            // `_`, or a `$-1` / `*-1` style null length.
            b'_' | b'$' | b'=' | b'!' => Value::Nil,
            _ => Value::Bytes(text.to_vec()),
        },
        Header::Body(n) => {
            if buf.len() < used + n + 2 {
                return Ok(None);
            }
            let body = buf[used..used + n].to_vec();
            used += n + 2;
            if line[0] == b'!' {
                Value::Error(String::from_utf8_lossy(&body).into_owned())
            } else {
                Value::Bytes(body)
            }
        }
        Header::Children(_) if text == b"-1" => Value::Nil,
        Header::Children(n) => {
            let mut items = Vec::with_capacity((n as usize).min(1024));
            for _ in 0..n {
                let Some((v, u)) = decode_at(&buf[used..], depth + 1)? else {
                    return Ok(None);
                };
                items.push(v);
                used += u;
            }
            Value::Array(items)
        }
    };
    Ok(Some((value, used)))
}

fn parse_int(text: &[u8]) -> Result<i64, ProtocolError> {
    std::str::from_utf8(text)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| ProtocolError("bad integer reply".into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feed `stream` in chunks of `chunk` bytes as a socket would, keeping the
    /// unconsumed tail; return the replies seen and their error lines.
    fn scan_chunks(stream: &[u8], chunk: usize) -> (usize, Vec<String>) {
        let mut scanner = ReplyScanner::new();
        let mut pending: Vec<u8> = Vec::new();
        let (mut replies, mut errors) = (0, Vec::new());
        for piece in stream.chunks(chunk) {
            pending.extend_from_slice(piece);
            let used = scanner
                .scan(&pending, |err| {
                    replies += 1;
                    if let Some(e) = err {
                        errors.push(String::from_utf8_lossy(e).into_owned());
                    }
                })
                .unwrap();
            pending.drain(..used);
        }
        assert!(pending.is_empty() && scanner.is_idle());
        (replies, errors)
    }

    #[test]
    fn pushes_between_replies_are_counted_not_replies() {
        let stream: &[u8] = b"$3\r\nabc\r\n>2\r\n$10\r\ninvalidate\r\n*1\r\n$5\r\nkey:1\r\n\
            _\r\n>2\r\n$10\r\ninvalidate\r\n_\r\n-ERR x\r\n";
        for chunk in 1..stream.len() {
            let mut scanner = ReplyScanner::new();
            let mut pending: Vec<u8> = Vec::new();
            let mut replies = Vec::new();
            for piece in stream.chunks(chunk) {
                pending.extend_from_slice(piece);
                let used = scanner
                    .scan(&pending, |err| replies.push(err.map(<[u8]>::to_vec)))
                    .unwrap();
                pending.drain(..used);
            }
            assert_eq!(
                replies,
                vec![None, None, Some(b"ERR x".to_vec())],
                "chunk {chunk}"
            );
            assert_eq!(scanner.take_pushes(), 2, "chunk {chunk}");
            assert_eq!(scanner.take_pushes(), 0);
        }
    }

    /// Eleven replies: the map holds `+b _` and the 3-array ends with `*-1`.
    const MIXED: &[u8] = b"+OK\r\n$5\r\nhello\r\n$-1\r\n:42\r\n-ERR wrong\r\n\
        *3\r\n$1\r\na\r\n*2\r\n:1\r\n-ERR nested\r\n*-1\r\n*0\r\n\
        %2\r\n+a\r\n:1\r\n+b\r\n_\r\n,1.5\r\n#t\r\n$0\r\n\r\n";

    #[test]
    fn counts_every_reply_at_any_split() {
        for chunk in 1..MIXED.len() + 1 {
            let (replies, errors) = scan_chunks(MIXED, chunk);
            assert_eq!(replies, 11, "chunk {chunk}");
            assert_eq!(errors, vec!["ERR wrong".to_string()], "chunk {chunk}");
        }
    }

    #[test]
    fn skips_large_bulk_without_buffering_it() {
        let mut stream = b"$100000\r\n".to_vec();
        stream.extend(std::iter::repeat_n(b'x', 100_000));
        stream.extend_from_slice(b"\r\n+OK\r\n");
        assert_eq!(scan_chunks(&stream, 4096).0, 2);
    }

    #[test]
    fn rejects_garbage() {
        let mut s = ReplyScanner::new();
        assert!(s.scan(b"?what\r\n", |_| {}).is_err());
        assert!(s.scan(b"$abc\r\n", |_| {}).is_err());
    }

    #[test]
    fn decodes_cluster_slots_shape() {
        let reply = b"*1\r\n*3\r\n:0\r\n:16383\r\n*3\r\n$9\r\n127.0.0.1\r\n:7000\r\n$2\r\nid\r\n";
        let (v, used) = decode(reply).unwrap().unwrap();
        assert_eq!(used, reply.len());
        let Value::Array(ranges) = v else { panic!() };
        let Value::Array(r) = &ranges[0] else {
            panic!()
        };
        assert_eq!(r[1].as_int(), Some(16383));
        assert!(decode(&reply[..reply.len() - 3]).unwrap().is_none());
    }

    #[test]
    fn decodes_errors_and_nulls() {
        assert_eq!(
            decode(b"-ERR x\r\n").unwrap().unwrap().0,
            Value::Error("ERR x".into())
        );
        assert_eq!(decode(b"$-1\r\n").unwrap().unwrap().0, Value::Nil);
        assert_eq!(decode(b"*-1\r\n").unwrap().unwrap().0, Value::Nil);
    }
}
