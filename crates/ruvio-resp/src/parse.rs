//! Request parsing: RESP multibulk (`*N\r\n$len\r\n...`) and inline commands.
//!
//! TODO(helper-resp): implement. The public API below is fixed; the server uses it.

/// Limits enforced before any allocation sized from the wire.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Largest bulk string accepted (`proto-max-bulk-len`, Redis: 512 MiB).
    pub bulk_bytes_max: usize,
    /// Largest multibulk element count (Redis: 1024*1024*1024 - 1... see Redis: `> INT_MAX` and for
    /// unauthenticated clients 10; we use Redis' authenticated limit).
    pub multibulk_len_max: usize,
    /// Largest inline command line (Redis: PROTO_INLINE_MAX_SIZE, 64 KiB).
    pub inline_bytes_max: usize,
}

impl Default for Limits {
    fn default() -> Self {
        todo!()
    }
}

/// Outcome of one parse attempt.
#[derive(Debug)]
pub enum Parsed<'a> {
    /// A whole command; `consumed` bytes of the input belong to it.
    /// An empty `Args` is possible (an empty inline line or `*0\r\n`): the caller skips it.
    Complete { args: Args<'a>, consumed: usize },
    /// Not enough bytes yet. `need_bytes` is a lower bound on the total buffer length
    /// before a retry can make progress (lets the caller avoid re-parsing a large
    /// bulk string on every small read).
    Incomplete { need_bytes: usize },
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

impl ProtocolError {
    /// The whole error line Redis sends (without the leading `-` and trailing CRLF),
    /// e.g. `ERR Protocol error: invalid multibulk length`.
    pub fn message(&self) -> String {
        todo!()
    }
}

/// Reusable parser state (scratch space for inline unescaping and argument spans).
#[derive(Default, Debug)]
pub struct CommandParser {
    spans: Vec<(u32, u32)>,
    scratch: Vec<u8>,
}

impl CommandParser {
    /// Parse one command from the front of `buf`.
    pub fn parse<'a>(
        &'a mut self,
        buf: &'a [u8],
        limits: &Limits,
    ) -> Result<Parsed<'a>, ProtocolError> {
        let _ = (buf, limits, &self.spans, &self.scratch);
        todo!()
    }
}

/// The arguments of one command (argv[0] is the command name). Cheap to copy.
#[derive(Clone, Copy, Debug)]
pub struct Args<'a> {
    base: &'a [u8],
    spans: &'a [(u32, u32)],
}

impl<'a> Args<'a> {
    /// Number of arguments including the command name.
    pub fn len(&self) -> usize {
        self.spans.len()
    }
    /// True when there are no arguments at all.
    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }
    /// Argument `i`; panics when out of range (arity is checked before handlers run).
    pub fn get(&self, i: usize) -> &'a [u8] {
        let (s, e) = self.spans[i];
        &self.base[s as usize..e as usize]
    }
    /// Iterate over all arguments.
    pub fn iter(&self) -> ArgsIter<'a> {
        ArgsIter { args: *self, next: 0 }
    }
}

/// Iterator over [`Args`].
#[derive(Clone, Debug)]
pub struct ArgsIter<'a> {
    args: Args<'a>,
    next: usize,
}

impl<'a> Iterator for ArgsIter<'a> {
    type Item = &'a [u8];
    fn next(&mut self) -> Option<&'a [u8]> {
        (self.next < self.args.len()).then(|| {
            self.next += 1;
            self.args.get(self.next - 1)
        })
    }
}
