//! Reading RESP replies back: the server forwards a command to the shard that owns
//! its key and gets encoded reply bytes in return. To release replies in order, and
//! to merge the parts of a command split across shards (sum the counts of a DEL,
//! concatenate the arrays of an MGET), it has to find where one reply ends and read
//! an integer or an array header. That is all this module does; it never builds a
//! tree of values.
//!
//! These readers are strict (every line must end in CRLF, lengths and counts must be
//! `string2ll` numbers) because their input is our own encoder's output: anything
//! else is a bug to surface, not a client to accommodate. They walk nested
//! aggregates with a counter, not recursion, so deep nesting cannot overflow the
//! stack, and they never panic.

use crate::parse::string2ll;

/// The bytes are not a RESP2/RESP3 reply (bad type byte, bad number, a line not
/// ended by CRLF, a bulk payload not followed by CRLF).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MalformedReply;

impl std::fmt::Display for MalformedReply {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("malformed RESP reply")
    }
}

impl std::error::Error for MalformedReply {}

/// Length of the first complete RESP2/RESP3 reply in `buf`: `Ok(Some(n))` when
/// `buf[..n]` is one whole reply (an aggregate with all its elements; an attribute
/// `|` together with the value it annotates), `Ok(None)` when more bytes are needed,
/// `Err` when the bytes cannot be a reply.
pub fn scan_reply(buf: &[u8]) -> Result<Option<usize>, MalformedReply> {
    let mut pos = 0;
    // Values still to read; aggregates add their elements.
    let mut pending: u64 = 1;
    while pending > 0 {
        let Some(line) = reply_line(buf, pos)? else {
            return Ok(None);
        };
        pending -= 1;
        pos = line.next;
        match line.kind {
            b'+' | b'-' | b',' | b'(' => {}
            b':' => {
                string2ll(line.body).ok_or(MalformedReply)?;
            }
            b'_' if line.body.is_empty() => {}
            b'#' if matches!(line.body, b"t" | b"f") => {}
            b'$' if line.body == b"-1" => {}
            b'$' | b'!' | b'=' => match bulk_end(buf, pos, line.body)? {
                Some(end) => pos = end,
                None => return Ok(None),
            },
            b'*' if line.body == b"-1" => {}
            b'*' | b'~' | b'>' => pending = add_elements(pending, line.body, 1, 0)?,
            b'%' => pending = add_elements(pending, line.body, 2, 0)?,
            // The attribute's pairs, then the value it annotates.
            b'|' => pending = add_elements(pending, line.body, 2, 1)?,
            _ => return Err(MalformedReply),
        }
    }
    Ok(Some(pos))
}

/// Length of the first complete RESP2/RESP3 reply in `buf`, or `None` if `buf`
/// holds only part of one or does not start with a valid reply (see [`scan_reply`]
/// to tell the two apart). Use it to split a stream of replies into whole ones.
pub fn reply_len(buf: &[u8]) -> Option<usize> {
    scan_reply(buf).ok().flatten()
}

/// The value of an integer reply: `buf` must be exactly one `:<n>\r\n` (cut it out
/// with [`reply_len`] first). `None` for anything else, including an error reply.
pub fn parse_int_reply(buf: &[u8]) -> Option<i64> {
    let digits = buf.strip_prefix(b":")?.strip_suffix(b"\r\n")?;
    string2ll(digits)
}

/// The element count and the encoded elements of an array reply: `buf` must be
/// exactly one `*<n>\r\n` followed by its `n` complete elements. The element bytes
/// can be copied after a new header to concatenate arrays (MGET across shards).
/// `None` for anything else, including a null array `*-1` and RESP3 sets or pushes.
pub fn array_body(buf: &[u8]) -> Option<(usize, &[u8])> {
    let line = reply_line(buf, 0).ok().flatten()?;
    if line.kind != b'*' {
        return None;
    }
    let count = usize::try_from(string2ll(line.body)?).ok()?;
    (reply_len(buf)? == buf.len()).then(|| (count, &buf[line.next..]))
}

/// One reply line: its type byte, the text between the type byte and CRLF, and
/// where the next item starts.
struct ReplyLine<'a> {
    kind: u8,
    body: &'a [u8],
    next: usize,
}

/// The line at `pos`: `Ok(None)` if its CRLF has not arrived.
fn reply_line(buf: &[u8], pos: usize) -> Result<Option<ReplyLine<'_>>, MalformedReply> {
    let Some((&kind, rest)) = buf.get(pos..).and_then(<[u8]>::split_first) else {
        return Ok(None);
    };
    let Some(end) = rest.iter().position(|&b| b == b'\r' || b == b'\n') else {
        return Ok(None);
    };
    match rest.get(end..end + 2) {
        Some(b"\r\n") => Ok(Some(ReplyLine {
            kind,
            body: &rest[..end],
            next: pos + end + 3,
        })),
        Some(_) => Err(MalformedReply),
        None if rest[end] == b'\r' => Ok(None),
        None => Err(MalformedReply),
    }
}

/// End of a bulk payload of length `digits` starting at `start`, after its CRLF;
/// `Ok(None)` if it has not all arrived.
fn bulk_end(buf: &[u8], start: usize, digits: &[u8]) -> Result<Option<usize>, MalformedReply> {
    let len = count(digits)?;
    let end = start.checked_add(len).ok_or(MalformedReply)?;
    let after = end.checked_add(2).ok_or(MalformedReply)?;
    match buf.get(end..after) {
        Some(b"\r\n") => Ok(Some(after)),
        Some(_) => Err(MalformedReply),
        None => Ok(None),
    }
}

/// `pending` plus `per` elements for each of the `digits` entries, plus `extra`.
fn add_elements(pending: u64, digits: &[u8], per: u64, extra: u64) -> Result<u64, MalformedReply> {
    let n = u64::try_from(count(digits)?).map_err(|_| MalformedReply)?;
    n.checked_mul(per)
        .and_then(|n| n.checked_add(extra))
        .and_then(|n| n.checked_add(pending))
        .ok_or(MalformedReply)
}

/// A non-negative length or count.
fn count(digits: &[u8]) -> Result<usize, MalformedReply> {
    string2ll(digits)
        .and_then(|n| usize::try_from(n).ok())
        .ok_or(MalformedReply)
}
