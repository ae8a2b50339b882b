//! The arguments of a parsed command: [`Args`], spans into the bytes the parser
//! read (zero copy; an inline command's, into its scratch space), [`OwnedArgs`]
//! for arguments that outlive those bytes, and [`ArgsBatch`], many commands'
//! arguments in two buffers (requests forwarded between shards travel so).
//! Apart from the parser (`parse.rs`) because they are what the rest of the
//! server handles; the parser only builds them.

/// The arguments of one command (`argv[0]` is the command name). Cheap to copy.
#[derive(Clone, Copy, Debug)]
pub struct Args<'a> {
    pub(crate) base: &'a [u8],
    pub(crate) spans: &'a [(u32, u32)],
    /// The parser read these arguments as a multibulk at the front of `base`
    /// (what [`Args::as_multibulk`] may give back).
    pub(crate) multibulk: bool,
}

// `#[inline]`: called from the other crates on every command (an ACL key
// check paid a call per key without it, scripts/instr_ab.py).
impl<'a> Args<'a> {
    /// Number of arguments including the command name.
    #[inline]
    pub fn len(&self) -> usize {
        self.spans.len()
    }
    /// True when there are no arguments at all.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }
    /// Argument `i`; panics when out of range (arity is checked before handlers run).
    #[inline]
    pub fn get(&self, i: usize) -> &'a [u8] {
        let (s, e) = self.spans[i];
        &self.base[s as usize..e as usize]
    }
    /// The arguments from index `from` on (`COMMAND GETKEYS`'s embedded command).
    pub fn tail(&self, from: usize) -> Args<'a> {
        Args {
            base: self.base,
            spans: &self.spans[from.min(self.spans.len())..],
            multibulk: false,
        }
    }
    /// The arguments as the canonical RESP array they were parsed from
    /// (`*<n>\r\n$<len>\r\n<arg>\r\n...`), borrowed from the request's
    /// buffer: `None` for an inline request, for arguments gathered anywhere
    /// else (laid end to end, with no room for the headers), and for a request
    /// whose bytes Redis skips unchecked held anything but `\r\n`. What lets
    /// the replication stream copy a request whole instead of encoding its
    /// arguments again.
    ///
    /// The parser put every header and payload where a canonical encoding
    /// does (its digits take no sign, leading zero or `+`: [`crate::string2ll`]), so
    /// only the skipped bytes are looked at: the one after the count's `\r`,
    /// and each argument's one before and two after its payload. Looked at
    /// here rather than as the parser reads them: each request is parsed
    /// twice (the prefetch's look-ahead, then its run), and only a replicated
    /// write asks.
    pub fn as_multibulk(&self) -> Option<&'a [u8]> {
        if !self.multibulk {
            return None;
        }
        let &(_, last_end) = self.spans.last()?;
        let count_cr = 1 + decimal_digits(self.spans.len());
        let mut crlf = self.base.get(count_cr + 1) == Some(&b'\n');
        for &(start, end) in self.spans {
            let (before, end) = ((start as usize).checked_sub(1)?, end as usize);
            crlf &= (self.base.get(before) == Some(&b'\n'))
                & (self.base.get(end..end + 2) == Some(b"\r\n"));
        }
        crlf.then(|| &self.base[..last_end as usize + 2])
    }
    /// Bytes of every argument together (CLIENT LIST's `argv-mem`).
    pub fn byte_len(&self) -> usize {
        self.spans.iter().map(|&(s, e)| (e - s) as usize).sum()
    }
    /// Iterate over all arguments.
    pub fn iter(&self) -> ArgsIter<'a> {
        ArgsIter {
            args: *self,
            next: 0,
        }
    }
}

impl<'a> IntoIterator for Args<'a> {
    type Item = &'a [u8];
    type IntoIter = ArgsIter<'a>;
    fn into_iter(self) -> ArgsIter<'a> {
        self.iter()
    }
}

/// How many decimal digits `n` takes.
fn decimal_digits(mut n: usize) -> usize {
    let mut digits = 1;
    while n >= 10 {
        n /= 10;
        digits += 1;
    }
    digits
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
    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = self.args.len() - self.next;
        (left, Some(left))
    }
}

impl ExactSizeIterator for ArgsIter<'_> {}

/// A command's arguments owned in one buffer: what a blocked command keeps to run
/// again later, and what travels between shards instead of re-encoded RESP.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OwnedArgs {
    base: Vec<u8>,
    spans: Vec<(u32, u32)>,
}

impl OwnedArgs {
    /// Copy `args` (one allocation for the bytes, one for the spans).
    pub fn from_args(args: Args<'_>) -> OwnedArgs {
        let bytes = args.iter().map(<[u8]>::len).sum();
        let mut owned = OwnedArgs {
            base: Vec::with_capacity(bytes),
            spans: Vec::with_capacity(args.len()),
        };
        for arg in args.iter() {
            owned.push(arg);
        }
        owned
    }

    /// Borrow as [`Args`].
    pub fn args(&self) -> Args<'_> {
        Args {
            base: &self.base,
            spans: &self.spans,
            multibulk: false,
        }
    }

    /// Append one argument (arguments come from a parsed request or a script's
    /// call, bounded far below 4 GiB in total).
    pub fn push(&mut self, arg: &[u8]) {
        let start = self.base.len();
        self.base.extend_from_slice(arg);
        self.spans.push((start as u32, self.base.len() as u32));
    }

    /// The bytes the argument buffer holds room for.
    pub fn capacity(&self) -> usize {
        self.base.capacity()
    }

    /// Forget every argument, keeping the buffers.
    pub fn clear(&mut self) {
        self.base.clear();
        self.spans.clear();
    }
}

/// Many commands' arguments in one buffer: what one message between shards
/// carries (the commands parsed once, on the shard that received them).
///
/// A command is laid in as its arguments end to end ([`push`](Self::push)), or
/// as the canonical request it was parsed from ([`push_request`](Self::push_request)):
/// then the shard that runs it can still hand its bytes to the replication
/// stream whole ([`Args::as_multibulk`]) instead of encoding every argument
/// again.
///
/// A command pushed as its request has one more span in front of its
/// arguments': `(where its request starts, REQUEST_MARK)`, and its arguments'
/// spans count from that start. In the spans rather than in a vector of its
/// own: a batch travels inline in every message between shards, and a larger
/// message is a larger copy at each move (clippy's `result_large_err` too).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ArgsBatch {
    args: OwnedArgs,
    /// Index into `args.spans` where each command ends.
    ends: Vec<u32>,
}

/// The end of a span that is no argument but says where a request pushed
/// whole starts (no argument ends there: the bytes stay far below 4 GiB).
const REQUEST_MARK: u32 = u32::MAX;

impl ArgsBatch {
    /// An empty batch with room for as many commands, arguments and bytes as
    /// this one holds (bytes at most `bytes_max`): the next batch between the
    /// same two shards starts at its likely size instead of growing through
    /// doublings (the mesh's outbox, `mesh::forward`).
    pub fn empty_like(&self, bytes_max: usize) -> ArgsBatch {
        ArgsBatch {
            args: OwnedArgs {
                base: Vec::with_capacity(self.args.base.len().min(bytes_max)),
                spans: Vec::with_capacity(self.args.spans.len()),
            },
            ends: Vec::with_capacity(self.ends.len()),
        }
    }

    /// The bytes the arguments' buffer holds room for.
    pub fn capacity_bytes(&self) -> usize {
        self.args.capacity()
    }

    /// Empty, keeping the buffers (a batch sent back for reuse, `mesh::forward`).
    pub fn clear(&mut self) {
        self.args.clear();
        self.ends.clear();
    }

    /// Append one command.
    pub fn push<'a>(&mut self, args: impl IntoIterator<Item = &'a [u8]>) {
        for arg in args {
            self.args.push(arg);
        }
        self.ends.push(self.args.spans.len() as u32);
    }

    /// Append one command as the canonical request it was parsed from, when
    /// it was one (else as [`push`](Self::push)): one copy of its bytes, some
    /// longer than its arguments alone, which the shard that runs it gives
    /// the replication stream as they are.
    pub fn push_request(&mut self, args: Args<'_>) {
        let Some(request) = args.as_multibulk() else {
            self.push(args);
            return;
        };
        let start = self.args.base.len();
        self.args.spans.push((start as u32, REQUEST_MARK));
        self.args.base.extend_from_slice(request);
        self.args.spans.extend_from_slice(args.spans);
        self.ends.push(self.args.spans.len() as u32);
    }

    /// Number of commands.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// True when the batch holds no command.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// Arguments of every command together (and one for each command
    /// pushed as its request).
    pub fn arg_count(&self) -> usize {
        self.args.spans.len()
    }

    /// Bytes of every argument together (with the headers of the commands
    /// pushed as requests).
    pub fn arg_bytes(&self) -> usize {
        self.args.base.len()
    }

    /// Command `i` (in the order pushed), if there is one.
    pub fn get(&self, i: usize) -> Option<Args<'_>> {
        let end = *self.ends.get(i)?;
        let start = i.checked_sub(1).map_or(0, |p| self.ends[p]);
        Some(self.command(start, end))
    }

    /// The commands in the order pushed.
    pub fn iter(&self) -> impl Iterator<Item = Args<'_>> {
        let starts = std::iter::once(0).chain(self.ends.iter().copied());
        let ends = self.ends.iter().zip(starts);
        ends.map(|(&end, start)| self.command(start, end))
    }

    /// The command whose spans are `args.spans[start..end]`.
    #[inline]
    fn command(&self, start: u32, end: u32) -> Args<'_> {
        let spans = &self.args.spans[start as usize..end as usize];
        match spans.split_first() {
            Some((&(at, REQUEST_MARK), arguments)) => Args {
                base: &self.args.base[at as usize..],
                spans: arguments,
                multibulk: true,
            },
            _ => Args {
                base: &self.args.base,
                spans,
                multibulk: false,
            },
        }
    }
}

impl<'a> FromIterator<&'a [u8]> for OwnedArgs {
    fn from_iter<I: IntoIterator<Item = &'a [u8]>>(iter: I) -> OwnedArgs {
        let mut owned = OwnedArgs::default();
        for arg in iter {
            owned.push(arg);
        }
        owned
    }
}
