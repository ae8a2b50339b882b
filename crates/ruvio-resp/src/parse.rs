//! Request parsing: RESP multibulk (`*N\r\n$len\r\n...`) and inline commands.
//!
//! Why it is shaped this way:
//!
//! - **Resumes where it stopped.** `parse` looks at the front of the caller's buffer
//!   and answers complete / incomplete / error. An incomplete multibulk keeps its
//!   progress (the arguments already read and where the next one starts), as Redis
//!   keeps `multibulklen`/`bulklen`: a 100k-argument command trickled in small reads
//!   costs one pass over its arguments, not one per read. The contract that makes
//!   this safe: after `Incomplete`, the next call gets the same command's bytes at
//!   the front of its buffer (more may have arrived, the buffer may have moved or
//!   been compacted), or the caller calls [`CommandParser::reset`] first.
//!   [`CommandParser::peek`] parses without reading or keeping that state, for
//!   look-ahead passes over commands behind the front. `Incomplete` also carries
//!   `need_bytes`, a lower bound on the buffer length before another attempt can
//!   change the answer (for a bulk whose header has arrived, that is the end of its
//!   payload: a 100 MB value is looked at once, not on every read).
//! - **Redis's exact decisions.** Which bytes are accepted, which error is raised
//!   and when, follow Redis 7.0's `processMultibulkBuffer` / `processInlineBuffer`
//!   and `sdssplitargs`, including their leniencies: the byte after a header's `\r`
//!   and the two bytes after a bulk payload are skipped unchecked, exactly as Redis
//!   does. Numbers are read with Redis's `string2ll` rules (no `+`, no leading
//!   zeros, at most 20 characters).
//! - **Decisions depend only on a prefix.** Once a prefix of the input gives a
//!   complete command or an error, every longer input gives the same answer. This
//!   makes the answer independent of how the bytes were split into reads.
//!
//! Where Ruvio deliberately differs from Redis (all on malformed input only):
//!
//! - Redis finds line ends with `strchr`, which stops at a NUL byte, so a header or
//!   inline line containing NUL stalls the connection until the 64 KiB limit. Here
//!   NUL is an ordinary byte: the header is judged as Redis would judge it without
//!   the stall (for example `invalid bulk length`), and inside an inline line NUL is
//!   part of a token.
//! - A header line is looked for only within `inline_bytes_max + 1` bytes of its
//!   start, and an inline line may be at most `inline_bytes_max` bytes even when its
//!   newline has already arrived. Redis only checks the size while the line end is
//!   missing, so its answer depends on how the bytes were split into reads; ours
//!   does not, and the inline scratch buffer stays bounded.
//!
//! Offsets are stored as `u32` to halve the span table. The parser checks every
//! offset and reports a command that would end beyond 4 GiB from the start of the
//! buffer as `invalid bulk length` rather than wrapping. The server keeps its query
//! buffer far below that (Redis's `client-query-buffer-limit` is 1 GiB), so this
//! never triggers in practice; it exists so no input can cause a panic.

use crate::args::Args;
use std::collections::VecDeque;
use std::fmt;

/// Default for [`Limits::bulk_bytes_max`]: Redis's `proto-max-bulk-len` default
/// (512 MiB), the largest string value Redis accepts.
pub const BULK_BYTES_MAX: usize = 512 * 1024 * 1024;

/// Default for [`Limits::multibulk_len_max`]: 2^30 arguments. Redis 7.0 accepts up to
/// `INT_MAX`; the real bound is the query buffer, since every argument takes at least
/// six bytes of input, and spans are only stored for arguments that have arrived.
pub const MULTIBULK_LEN_MAX: usize = 1024 * 1024 * 1024;

/// Default for [`Limits::inline_bytes_max`]: Redis's `PROTO_INLINE_MAX_SIZE` (64 KiB).
/// It bounds an inline line, and also how far the parser looks for the end of a
/// `*count` or `$len` header, so garbage is rejected after at most 64 KiB.
pub const INLINE_BYTES_MAX: usize = 64 * 1024;

/// Redis rejects a multibulk count above `INT_MAX` whatever else is configured.
const MULTIBULK_COUNT_REDIS_MAX: i64 = i32::MAX as i64;

/// Offsets are stored as `u32`; no argument may end beyond this offset.
const SPAN_OFFSET_MAX: usize = u32::MAX as usize;

/// Capacity of the span table kept between commands. A command with more arguments
/// grows the table; the next parse gives the excess back so one huge MSET does not
/// pin memory for the life of the connection. 4096 spans are 32 KiB.
const SPANS_RETAINED_MAX: usize = 4096;

/// Spans a parser keeps room for between look-aheads: a window of 16 commands
/// of up to 4 arguments (512 bytes). More is given back when forgotten: 10,000
/// connections that each once looked ahead at an MGET of 1,000 keys kept 80 MB
/// (tests/tracking_memory.rs).
const AHEAD_SPANS_RETAINED_MAX: usize = 64;

/// Redis's `string2ll` refuses strings of `LONG_STR_SIZE` (21) characters or more.
const INTEGER_CHARS_MAX: usize = 20;

// The defaults must be representable in the u32 span table and in Redis's int count.
const _: () = assert!(BULK_BYTES_MAX < SPAN_OFFSET_MAX);
const _: () = assert!(INLINE_BYTES_MAX < SPAN_OFFSET_MAX);
const _: () = assert!(MULTIBULK_LEN_MAX as i64 <= MULTIBULK_COUNT_REDIS_MAX);

/// Limits enforced before any allocation sized from the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Largest bulk string accepted (`proto-max-bulk-len`, Redis: 512 MiB).
    pub bulk_bytes_max: usize,
    /// Largest multibulk element count. Redis 7.0 refuses counts above `INT_MAX`;
    /// that check is always applied as well. Default [`MULTIBULK_LEN_MAX`] (2^30).
    pub multibulk_len_max: usize,
    /// Largest inline command line, and how far a `*`/`$` header line may run before
    /// its end must appear (Redis: `PROTO_INLINE_MAX_SIZE`, 64 KiB).
    pub inline_bytes_max: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            bulk_bytes_max: BULK_BYTES_MAX,
            multibulk_len_max: MULTIBULK_LEN_MAX,
            inline_bytes_max: INLINE_BYTES_MAX,
        }
    }
}

/// Outcome of one parse attempt.
#[derive(Debug)]
pub enum Parsed<'a> {
    /// A whole command; `consumed` bytes of the input belong to it.
    /// An empty `Args` is possible (an empty inline line or `*0\r\n`): the caller skips it.
    Complete {
        /// The command's arguments, borrowing the input or the parser's scratch.
        args: Args<'a>,
        /// Bytes of the input this command used; drop them before the next call.
        consumed: usize,
    },
    /// Not enough bytes yet. `need_bytes` is a lower bound on the total buffer length
    /// before a retry can make progress (lets the caller avoid re-parsing a large
    /// bulk string on every small read). Always greater than the current length.
    Incomplete {
        /// Lower bound on the buffer length before parsing again is useful.
        need_bytes: usize,
    },
}

/// A protocol error: Redis replies with `-ERR Protocol error: ...` and closes the connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProtocolError {
    /// `invalid multibulk length`
    InvalidMultibulkLength,
    /// `invalid bulk length`
    InvalidBulkLength,
    /// `expected '$', got 'X'`
    ExpectedDollar(u8),
    /// `unbalanced quotes in request`
    UnbalancedQuotes,
    /// `too big inline request`
    TooBigInlineRequest,
    /// `too big mbulk count string`
    TooBigMbulkCountString,
    /// `too big bulk count string`
    TooBigBulkCountString,
}

/// What Redis puts before every protocol error text.
const PROTOCOL_ERROR_PREFIX: &[u8] = b"ERR Protocol error: ";

impl ProtocolError {
    /// The whole error line Redis sends (without the leading `-` and trailing CRLF),
    /// e.g. `ERR Protocol error: invalid multibulk length`.
    ///
    /// For [`ProtocolError::ExpectedDollar`] with a byte that is not ASCII the text
    /// holds U+FFFD instead of the raw byte; [`ProtocolError::write_reply`] writes
    /// the exact bytes Redis would.
    pub fn message(&self) -> String {
        let mut line = Vec::with_capacity(64);
        self.write_line(&mut line);
        String::from_utf8_lossy(&line).into_owned()
    }

    /// Append the complete error reply, `-ERR Protocol error: ...\r\n`, byte for byte
    /// as Redis sends it (the same in RESP2 and RESP3).
    pub fn write_reply(&self, out: &mut Vec<u8>) {
        out.push(b'-');
        self.write_line(out);
        out.extend_from_slice(b"\r\n");
    }

    /// The line without `-` and CRLF, as raw bytes.
    fn write_line(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(PROTOCOL_ERROR_PREFIX);
        let detail: &[u8] = match self {
            ProtocolError::InvalidMultibulkLength => b"invalid multibulk length",
            ProtocolError::InvalidBulkLength => b"invalid bulk length",
            ProtocolError::ExpectedDollar(got) => return write_expected_dollar(*got, out),
            ProtocolError::UnbalancedQuotes => b"unbalanced quotes in request",
            ProtocolError::TooBigInlineRequest => b"too big inline request",
            ProtocolError::TooBigMbulkCountString => b"too big mbulk count string",
            ProtocolError::TooBigBulkCountString => b"too big bulk count string",
        };
        out.extend_from_slice(detail);
    }
}

/// Redis formats this one with `%c` through `addReplyErrorFormat`, which turns CR and
/// LF into spaces (so the reply stays one line) and, building the text with a C
/// string, cuts it at a NUL byte.
fn write_expected_dollar(got: u8, out: &mut Vec<u8>) {
    out.extend_from_slice(b"expected '$', got '");
    match got {
        0 => return,
        b'\r' | b'\n' => out.push(b' '),
        other => out.push(other),
    }
    out.push(b'\'');
}

impl fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message())
    }
}

impl std::error::Error for ProtocolError {}

/// Reusable parser state (scratch space for inline unescaping and argument spans,
/// and the progress of an incomplete multibulk at the front of the buffer).
///
/// Keep one per connection: in steady state `parse` allocates nothing.
#[derive(Default, Debug)]
pub struct CommandParser {
    spans: Vec<(u32, u32)>,
    scratch: Vec<u8>,
    /// An incomplete multibulk's progress: its arguments so far are in `spans`.
    partial: Option<Partial>,
    /// The commands a [`look_ahead`](Self::look_ahead) read, oldest first, for
    /// the [`parse`](Self::parse) calls that reach them.
    ahead: VecDeque<Ahead>,
    /// Their arguments (spans relative to each command's first byte).
    ahead_spans: Vec<(u32, u32)>,
}

/// A command read by a look-ahead.
#[derive(Debug, Clone, Copy)]
struct Ahead {
    /// The address of its first byte when it was read: a `parse` of the bytes
    /// at that address takes it, a `parse` anywhere else forgets every one.
    at: usize,
    consumed: usize,
    /// Its arguments in `ahead_spans`; `None` for an inline command (its
    /// arguments, unescaped, live in the scratch space), parsed again.
    spans: Option<(u32, u32)>,
}

/// How far an incomplete multibulk at the front of the buffer has been read.
#[derive(Debug)]
struct Partial {
    /// Arguments the header announced.
    count: usize,
    /// Where the next `$len` header starts.
    next: usize,
    /// The arguments read so far (spans of the buffer).
    spans: Vec<(u32, u32)>,
}

/// Internal answer of the two parsers; the arguments are in the parser's spans.
enum Progress {
    Complete {
        consumed: usize,
    },
    Incomplete {
        need_bytes: usize,
        /// A multibulk whose header has been read: `(count, next header offset)`.
        resume_at: Option<(usize, usize)>,
    },
}

impl CommandParser {
    /// A parser with empty buffers (same as `Default`).
    pub fn new() -> Self {
        Self::default()
    }

    /// Parse one command from the front of `buf`.
    ///
    /// A buffer starting with `*` is a multibulk request, anything else an inline
    /// one, as in Redis. On `Complete` the caller drops `consumed` bytes and calls
    /// again for the next pipelined command; on an error it sends
    /// [`ProtocolError::write_reply`] and closes the connection.
    ///
    /// After `Incomplete`, call again with the same command at the front of `buf`
    /// (see the module doc) or [`reset`](Self::reset) first.
    ///
    /// A command a [`look_ahead`](Self::look_ahead) read at this very address
    /// is answered from what it kept, without reading it again.
    pub fn parse<'a>(
        &'a mut self,
        buf: &'a [u8],
        limits: &Limits,
    ) -> Result<Parsed<'a>, ProtocolError> {
        if let Some(front) = self.ahead.pop_front() {
            let here = front.at == buf.as_ptr() as usize && front.consumed <= buf.len();
            match (here, front.spans) {
                (true, Some((start, end))) => {
                    let spans = &self.ahead_spans[start as usize..end as usize];
                    let args = Args {
                        base: buf,
                        spans,
                        multibulk: true,
                    };
                    let consumed = front.consumed;
                    return Ok(Parsed::Complete { args, consumed });
                }
                (true, None) => {}
                (false, _) => self.forget_ahead(),
            }
        } else if !self.ahead_spans.is_empty() {
            self.forget_ahead();
        }
        let resume = self.partial.take().filter(|p| p.next <= buf.len());
        self.parse_from(buf, limits, resume, true)
    }

    /// Parse the command at `offset` of `buf`, whose front is the front of the
    /// caller's unread bytes, and keep it for the [`parse`](Self::parse) that
    /// reaches it: a look-ahead over a pipeline (the server's prefetch pass)
    /// reads each command once, not again when it runs. Commands are looked at
    /// in order from offset 0, which forgets what an earlier look-ahead kept;
    /// at 0 it answers as `parse` (an incomplete multibulk's progress is kept),
    /// further on as [`peek`](Self::peek). What is kept is valid while those
    /// bytes stay where they are: a caller that moves or replaces them first
    /// calls [`forget_ahead`](Self::forget_ahead) (a `parse` elsewhere than
    /// the next kept command also forgets them all).
    pub fn look_ahead<'a>(
        &'a mut self,
        buf: &'a [u8],
        offset: usize,
        limits: &Limits,
    ) -> Result<Parsed<'a>, ProtocolError> {
        let command = &buf[offset..];
        let at = command.as_ptr() as usize;
        // At the front: what was kept is forgotten, an incomplete multibulk's
        // progress used. Further on: kept only right behind the last kept one.
        let (follows, (progress, inline)) = match offset {
            0 => {
                self.forget_ahead();
                let resume = self.partial.take().filter(|p| p.next <= buf.len());
                (true, self.read(buf, limits, resume, true)?)
            }
            _ => {
                let follows = self.ahead.back().is_some_and(|a| a.at + a.consumed == at);
                (follows, self.read(command, limits, None, false)?)
            }
        };
        if let (true, Progress::Complete { consumed }) = (follows, &progress) {
            let spans = (!inline).then(|| {
                let start = self.ahead_spans.len() as u32;
                self.ahead_spans.extend_from_slice(&self.spans);
                (start, self.ahead_spans.len() as u32)
            });
            self.ahead.push_back(Ahead {
                at,
                consumed: *consumed,
                spans,
            });
        }
        Ok(self.answer(command, progress, inline))
    }

    /// Forget what look-aheads kept (the caller moved or replaced its bytes).
    pub fn forget_ahead(&mut self) {
        self.ahead.clear();
        self.ahead_spans.clear();
        if self.ahead_spans.capacity() > AHEAD_SPANS_RETAINED_MAX {
            // Room for a window of big commands (an MGET of 1,000 keys) is not
            // kept by every connection that once sent one.
            self.ahead_spans = Vec::new();
        }
    }

    /// Parse one command from the front of `buf` without using or keeping the
    /// progress of an incomplete multibulk: for look-ahead over commands that are
    /// not at the front of the connection's input. Answers as [`parse`](Self::parse).
    pub fn peek<'a>(
        &'a mut self,
        buf: &'a [u8],
        limits: &Limits,
    ) -> Result<Parsed<'a>, ProtocolError> {
        self.parse_from(buf, limits, None, false)
    }

    /// Forget an incomplete multibulk's progress (the caller dropped or replaced
    /// the bytes at the front of its buffer).
    pub fn reset(&mut self) {
        self.partial = None;
        self.forget_ahead();
    }

    fn parse_from<'a>(
        &'a mut self,
        buf: &'a [u8],
        limits: &Limits,
        resume: Option<Partial>,
        remember: bool,
    ) -> Result<Parsed<'a>, ProtocolError> {
        let (progress, inline) = self.read(buf, limits, resume, remember)?;
        Ok(self.answer(buf, progress, inline))
    }

    /// Read one command at the front of `buf` into the spans (or the scratch
    /// space, inline): how far it got, and whether it was inline.
    fn read(
        &mut self,
        buf: &[u8],
        limits: &Limits,
        resume: Option<Partial>,
        remember: bool,
    ) -> Result<(Progress, bool), ProtocolError> {
        let resume = match resume {
            Some(partial) => {
                // Continue the kept arguments (moved, not copied).
                self.spans = partial.spans;
                Some((partial.count, partial.next))
            }
            None => {
                self.spans.clear();
                self.spans.shrink_to(SPANS_RETAINED_MAX);
                None
            }
        };
        let inline = match buf.first() {
            None => {
                return Ok((
                    Progress::Incomplete {
                        need_bytes: 1,
                        resume_at: None,
                    },
                    false,
                ))
            }
            Some(b'*') => false,
            Some(_) => true,
        };
        let progress = if inline {
            parse_inline(buf, limits, &mut self.spans, &mut self.scratch)?
        } else {
            parse_multibulk(buf, limits, &mut self.spans, resume)?
        };
        if let (
            Progress::Incomplete {
                resume_at: Some((count, next)),
                ..
            },
            true,
        ) = (&progress, remember)
        {
            self.partial = Some(Partial {
                count: *count,
                next: *next,
                spans: std::mem::take(&mut self.spans),
            });
        }
        Ok((progress, inline))
    }

    /// What [`read`](Self::read) found, as the callers' answer.
    fn answer<'a>(&'a self, buf: &'a [u8], progress: Progress, inline: bool) -> Parsed<'a> {
        match progress {
            Progress::Incomplete { need_bytes, .. } => Parsed::Incomplete { need_bytes },
            Progress::Complete { consumed } => {
                let base = if inline { &self.scratch[..] } else { buf };
                let args = Args {
                    base,
                    spans: &self.spans,
                    multibulk: !inline,
                };
                Parsed::Complete { args, consumed }
            }
        }
    }
}

/// A `*count` or `$len` header line found at some offset.
enum Header {
    /// The digits (or whatever stands there) end at `cr`; the next item starts at `next`.
    Complete {
        cr: usize,
        next: usize,
    },
    Incomplete {
        need_bytes: usize,
    },
    /// No `\r` within `inline_bytes_max + 1` bytes of the start.
    TooBig,
}

/// Find the header line starting at `start` (which is inside `buf`), the way Redis
/// does: the first `\r`, and one more byte after it that is skipped unchecked.
fn find_header(buf: &[u8], start: usize, limits: &Limits) -> Header {
    // The size check fires once this many bytes have arrived without a `\r`.
    let too_big_at = start
        .saturating_add(limits.inline_bytes_max)
        .saturating_add(1);
    let window_end = too_big_at.min(buf.len());
    match buf[start..window_end].iter().position(|&b| b == b'\r') {
        Some(offset) => {
            let cr = start + offset;
            if cr + 1 < buf.len() {
                Header::Complete { cr, next: cr + 2 }
            } else {
                Header::Incomplete { need_bytes: cr + 2 }
            }
        }
        None if buf.len() - start > limits.inline_bytes_max => Header::TooBig,
        // A `\r` plus one byte could complete the line, or the size check could
        // fire, whichever comes first (here `too_big_at > buf.len()`).
        None => Header::Incomplete {
            need_bytes: (buf.len() + 2).min(too_big_at),
        },
    }
}

/// `*count\r\n` then `count` times `$len\r\n<len bytes>\r\n`, or the rest of one
/// whose header and first `spans.len()` arguments were read before (`resume`:
/// the count and where the next argument starts).
fn parse_multibulk(
    buf: &[u8],
    limits: &Limits,
    spans: &mut Vec<(u32, u32)>,
    resume: Option<(usize, usize)>,
) -> Result<Progress, ProtocolError> {
    let (count, mut pos) = match resume {
        Some(progress) => progress,
        None => match short_header(buf, 0, b'*', limits) {
            Some((count, next)) if count <= limits.multibulk_len_max => (count, next),
            _ => match find_header(buf, 0, limits) {
                Header::Complete { cr, next } => (multibulk_count(&buf[1..cr], limits)?, next),
                Header::Incomplete { need_bytes } => {
                    return Ok(Progress::Incomplete {
                        need_bytes,
                        resume_at: None,
                    })
                }
                Header::TooBig => return Err(ProtocolError::TooBigMbulkCountString),
            },
        },
    };
    while spans.len() < count {
        match parse_bulk(buf, pos, limits)? {
            Bulk::Complete { start, end, next } => {
                spans.push((start, end));
                pos = next;
            }
            Bulk::Incomplete { need_bytes } => {
                return Ok(Progress::Incomplete {
                    need_bytes,
                    resume_at: Some((count, pos)),
                })
            }
        }
    }
    Ok(Progress::Complete { consumed: pos })
}

/// The element count of a multibulk header; zero for a count `<= 0` (an empty
/// command, which Redis consumes and skips).
fn multibulk_count(digits: &[u8], limits: &Limits) -> Result<usize, ProtocolError> {
    let count = string2ll(digits).ok_or(ProtocolError::InvalidMultibulkLength)?;
    if count > MULTIBULK_COUNT_REDIS_MAX {
        return Err(ProtocolError::InvalidMultibulkLength);
    }
    let count = usize::try_from(count).unwrap_or(0);
    if count > limits.multibulk_len_max {
        return Err(ProtocolError::InvalidMultibulkLength);
    }
    Ok(count)
}

/// One bulk string: its payload span and where the next item starts.
enum Bulk {
    Complete { start: u32, end: u32, next: usize },
    Incomplete { need_bytes: usize },
}

/// `$len\r\n<len bytes>\r\n` at `pos` (which may be the end of `buf`).
fn parse_bulk(buf: &[u8], pos: usize, limits: &Limits) -> Result<Bulk, ProtocolError> {
    let (len, start) = match short_header(buf, pos, b'$', limits) {
        Some((len, next)) if len <= limits.bulk_bytes_max => (len, next),
        _ => match find_header(buf, pos, limits) {
            Header::Complete { cr, next } => {
                if buf[pos] != b'$' {
                    return Err(ProtocolError::ExpectedDollar(buf[pos]));
                }
                (bulk_len(&buf[pos + 1..cr], limits)?, next)
            }
            Header::Incomplete { need_bytes } => return Ok(Bulk::Incomplete { need_bytes }),
            Header::TooBig => return Err(ProtocolError::TooBigBulkCountString),
        },
    };
    // Payload, then two bytes Redis skips without looking at them.
    let end = start.checked_add(len).filter(|&end| end <= SPAN_OFFSET_MAX);
    let next = end.and_then(|end| end.checked_add(2));
    let (Some(end), Some(next)) = (end, next) else {
        return Err(ProtocolError::InvalidBulkLength);
    };
    if buf.len() < next {
        return Ok(Bulk::Incomplete { need_bytes: next });
    }
    // Cannot fail: start <= end <= SPAN_OFFSET_MAX.
    let span = (u32::try_from(start), u32::try_from(end));
    let (Ok(start), Ok(end)) = span else {
        return Err(ProtocolError::InvalidBulkLength);
    };
    Ok(Bulk::Complete { start, end, next })
}

/// Digits a [`short_header`] reads at most: every bulk of up to 9,999 bytes and
/// every count of up to 9,999 arguments, nearly every header a client sends.
const SHORT_HEADER_DIGITS_MAX: usize = 4;

/// The usual header at `pos`: `marker` (`*` or `$`), 1 to
/// [`SHORT_HEADER_DIGITS_MAX`] digits as `string2ll` reads them (no sign, no
/// leading zero), `\r`, and the byte after it, skipped unchecked as Redis does:
/// its number and where the next item starts, without [`find_header`]'s scan
/// and the number's second pass (reading every header twice so took some 10 %
/// of a GET's instructions: docs/runtime.md). `None` for anything else, incomplete lines included: the general path
/// decides them, so replies and errors are the same either way.
#[inline(always)]
fn short_header(buf: &[u8], pos: usize, marker: u8, limits: &Limits) -> Option<(usize, usize)> {
    let line = buf.get(pos..)?;
    if line.first() != Some(&marker) {
        return None;
    }
    let mut number = 0;
    for (i, &b) in line.iter().enumerate().skip(1) {
        match b {
            // A second digit after a leading zero: string2ll refuses it.
            b'0'..=b'9' if i <= SHORT_HEADER_DIGITS_MAX && !(i == 2 && line[1] == b'0') => {
                number = number * 10 + usize::from(b - b'0');
            }
            // The general path finds `\r` only within `inline_bytes_max`.
            b'\r' if i >= 2 && i - 1 < limits.inline_bytes_max => {
                return (line.len() > i + 1).then_some((number, pos + i + 2));
            }
            _ => return None,
        }
    }
    None
}

/// The length in a bulk header: a `string2ll` number in `0..=bulk_bytes_max`.
fn bulk_len(digits: &[u8], limits: &Limits) -> Result<usize, ProtocolError> {
    string2ll(digits)
        .and_then(|len| usize::try_from(len).ok())
        .filter(|&len| len <= limits.bulk_bytes_max)
        .ok_or(ProtocolError::InvalidBulkLength)
}

/// An inline command: one line up to `\n` (a `\r` before it is dropped), split into
/// arguments like `sdssplitargs`. Arguments are unescaped into `scratch`.
fn parse_inline(
    buf: &[u8],
    limits: &Limits,
    spans: &mut Vec<(u32, u32)>,
    scratch: &mut Vec<u8>,
) -> Result<Progress, ProtocolError> {
    let window_end = limits.inline_bytes_max.saturating_add(1).min(buf.len());
    let Some(newline) = buf[..window_end].iter().position(|&b| b == b'\n') else {
        if buf.len() > limits.inline_bytes_max {
            return Err(ProtocolError::TooBigInlineRequest);
        }
        return Ok(Progress::Incomplete {
            need_bytes: buf.len() + 1,
            resume_at: None,
        });
    };
    let line_end = match newline.checked_sub(1) {
        Some(before) if buf[before] == b'\r' => before,
        _ => newline,
    };
    let line = &buf[..line_end];
    if line.len() > SPAN_OFFSET_MAX {
        return Err(ProtocolError::TooBigInlineRequest);
    }
    split_args(line, spans, scratch)?;
    Ok(Progress::Complete {
        consumed: newline + 1,
    })
}

/// C's `isspace` in the "C" locale: what `sdssplitargs` skips between arguments.
fn is_c_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// Split an inline line into arguments as Redis's `sdssplitargs` does.
/// `line` is at most `SPAN_OFFSET_MAX` bytes, and the unescaped text is never longer.
fn split_args(
    line: &[u8],
    spans: &mut Vec<(u32, u32)>,
    scratch: &mut Vec<u8>,
) -> Result<(), ProtocolError> {
    scratch.clear();
    let mut pos = 0;
    loop {
        while line.get(pos).is_some_and(|&b| is_c_space(b)) {
            pos += 1;
        }
        if pos >= line.len() {
            return Ok(());
        }
        let start = scratch.len();
        pos = read_token(line, pos, scratch)?;
        // The scratch text is no longer than `line`, which the caller bounded.
        let span = (u32::try_from(start), u32::try_from(scratch.len()));
        let (Ok(start), Ok(end)) = span else {
            return Err(ProtocolError::TooBigInlineRequest);
        };
        spans.push((start, end));
    }
}

/// Where `read_token` is inside a token.
#[derive(Clone, Copy)]
enum Quoting {
    Bare,
    Double,
    Single,
}

/// Read one token starting at `pos` (a non-space byte) into `out`; return the
/// position after it. Quotes may open mid-token (`a"b c"` is `ab c`), a closing
/// quote must be followed by a space or the end of the line.
fn read_token(line: &[u8], mut pos: usize, out: &mut Vec<u8>) -> Result<usize, ProtocolError> {
    let mut quoting = Quoting::Bare;
    loop {
        let byte = line.get(pos).copied();
        match (quoting, byte) {
            (Quoting::Bare, None | Some(b' ' | b'\n' | b'\r' | b'\t')) => return Ok(pos),
            (Quoting::Bare, Some(b'"')) => quoting = Quoting::Double,
            (Quoting::Bare, Some(b'\'')) => quoting = Quoting::Single,
            (Quoting::Double | Quoting::Single, None) => {
                return Err(ProtocolError::UnbalancedQuotes)
            }
            (Quoting::Double, Some(b'\\')) if pos + 1 < line.len() => {
                let (byte, used) = unescape(&line[pos + 1..]);
                out.push(byte);
                pos += used;
            }
            (Quoting::Double, Some(b'"')) | (Quoting::Single, Some(b'\'')) => {
                return close_quote(line, pos)
            }
            (Quoting::Single, Some(b'\\')) if line.get(pos + 1) == Some(&b'\'') => {
                out.push(b'\'');
                pos += 1;
            }
            (_, Some(other)) => out.push(other),
        }
        pos += 1;
    }
}

/// A closing quote at `pos` must be followed by a space or the end of the line.
fn close_quote(line: &[u8], pos: usize) -> Result<usize, ProtocolError> {
    match line.get(pos + 1) {
        Some(&next) if !is_c_space(next) => Err(ProtocolError::UnbalancedQuotes),
        _ => Ok(pos + 1),
    }
}

/// The escape after a backslash inside double quotes (`rest` is non-empty and starts
/// after the backslash): `\xHH`, `\n \r \t \b \a`, or any other byte standing for
/// itself. Returns the byte and how many bytes of `rest` it used.
fn unescape(rest: &[u8]) -> (u8, usize) {
    if let [b'x', high, low, ..] = rest {
        if let (Some(high), Some(low)) = (hex_value(*high), hex_value(*low)) {
            return (high * 16 + low, 3);
        }
    }
    let byte = match rest.first().copied().unwrap_or(b'\\') {
        b'n' => b'\n',
        b'r' => b'\r',
        b't' => b'\t',
        b'b' => 0x08,
        b'a' => 0x07,
        other => other,
    };
    (byte, 1)
}

fn hex_value(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// Redis's `string2ll`: an optional `-`, then `0` alone or a digit 1-9 followed by
/// digits; nothing else (no `+`, no spaces, no leading zeros, no `-0`), at most 20
/// characters, and the value must fit an `i64`.
pub fn string2ll(s: &[u8]) -> Option<i64> {
    if s.is_empty() || s.len() > INTEGER_CHARS_MAX {
        return None;
    }
    if s == b"0" {
        return Some(0);
    }
    let (negative, digits) = match s {
        [b'-', rest @ ..] => (true, rest),
        _ => (false, s),
    };
    match digits.first() {
        Some(b'1'..=b'9') => {}
        _ => return None,
    }
    let mut magnitude: u64 = 0;
    for &b in digits {
        let digit = b.checked_sub(b'0').filter(|d| *d <= 9)?;
        magnitude = magnitude.checked_mul(10)?.checked_add(u64::from(digit))?;
    }
    if negative {
        0i64.checked_sub_unsigned(magnitude)
    } else {
        i64::try_from(magnitude).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::{bulk_len, find_header, multibulk_count, short_header, string2ll, Header, Limits};
    use proptest::prelude::*;

    /// The general path's reading of a header at 0: its number and where the
    /// next item starts, when it reads one at all.
    fn general(line: &[u8], marker: u8, limits: &Limits) -> Option<(usize, usize)> {
        let Header::Complete { cr, next } = find_header(line, 0, limits) else {
            return None;
        };
        let digits = &line[1..cr];
        let number = match marker {
            b'$' => bulk_len(digits, limits).ok()?,
            _ => multibulk_count(digits, limits).ok()?,
        };
        (line[0] == marker).then_some((number, next))
    }

    proptest! {
        /// Wherever the short path reads a header, the general one reads the
        /// same (and anything else is left to it).
        #[test]
        fn short_headers_read_as_the_general_path(
            first in proptest::sample::select(b"*$x".to_vec()),
            digits in proptest::collection::vec(
                proptest::sample::select(b"0123456789-+".to_vec()), 0..7),
            tail in proptest::collection::vec(
                proptest::sample::select(b"\r\nx".to_vec()), 0..3),
            dollar in any::<bool>(),
            inline_bytes_max in 1usize..8,
        ) {
            let limits = Limits { inline_bytes_max, ..Limits::default() };
            let marker = if dollar { b'$' } else { b'*' };
            let line = [&[first][..], &digits, &tail].concat();
            let short = short_header(&line, 0, marker, &limits);
            if short.is_some() {
                prop_assert_eq!(short, general(&line, marker, &limits), "{:?}", line);
            }
        }
    }

    #[test]
    fn short_headers_cover_the_usual_ones() {
        let limits = Limits::default();
        assert_eq!(short_header(b"$3\r\nGET", 0, b'$', &limits), Some((3, 4)));
        assert_eq!(
            short_header(b"*1234\r\n", 0, b'*', &limits),
            Some((1234, 7))
        );
        assert_eq!(short_header(b"$0\r\n", 0, b'$', &limits), Some((0, 4)));
        for left in [
            &b"$01\r\n"[..],
            b"$12345\r\n",
            b"$-1\r\n",
            b"$3\r",
            b"$\r\n",
            b"*3\r\n",
        ] {
            assert_eq!(short_header(left, 0, b'$', &limits), None, "{left:?}");
        }
    }

    #[test]
    fn string2ll_follows_redis() {
        assert_eq!(string2ll(b"0"), Some(0));
        assert_eq!(string2ll(b"7"), Some(7));
        assert_eq!(string2ll(b"-1"), Some(-1));
        assert_eq!(string2ll(b"9223372036854775807"), Some(i64::MAX));
        assert_eq!(string2ll(b"-9223372036854775808"), Some(i64::MIN));
        for bad in [
            &b""[..],
            b"-",
            b"-0",
            b"00",
            b"01",
            b"+1",
            b" 1",
            b"1 ",
            b"1x",
            b"9223372036854775808",
            b"-9223372036854775809",
            b"18446744073709551616",
            b"000000000000000000001",
        ] {
            assert_eq!(string2ll(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
    }
}
