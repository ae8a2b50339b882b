//! Running the request parser the way a connection does: command after command
//! from the front of a buffer, on the whole input or on reads that arrive in pieces.

use ruvio_resp::{CommandParser, Limits, Parsed, ProtocolError};

/// One parsed command, owned.
#[derive(Debug, PartialEq, Eq)]
pub struct Command {
    pub args: Vec<Vec<u8>>,
    /// Bytes of input it used.
    pub consumed: usize,
    /// An inline command (anything not starting with `*`).
    pub inline: bool,
}

/// How parsing ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    /// A protocol error (the connection closes).
    Error(ProtocolError),
    /// Waiting for `need_bytes` with `pending` unparsed bytes (only `pending` is
    /// compared: how far ahead the parser asks may differ between the two ways).
    Incomplete { need_bytes: usize, pending: usize },
}

/// Everything one input gives.
#[derive(Debug)]
pub struct Run {
    pub commands: Vec<Command>,
    pub end: Outcome,
}

impl PartialEq for Run {
    fn eq(&self, other: &Run) -> bool {
        let pending = |o: &Outcome| match o {
            Outcome::Error(e) => Err(*e),
            Outcome::Incomplete { pending, .. } => Ok(*pending),
        };
        self.commands == other.commands && pending(&self.end) == pending(&other.end)
    }
}

/// Parse commands from the front of `buf` until it runs out or an error; returns
/// the bytes consumed and how it ended.
fn parse_front(
    parser: &mut CommandParser,
    buf: &[u8],
    limits: &Limits,
    commands: &mut Vec<Command>,
) -> (usize, Outcome) {
    let mut pos = 0;
    loop {
        let rest = &buf[pos..];
        match parser.parse(rest, limits) {
            Ok(Parsed::Complete { args, consumed }) => {
                assert!(
                    consumed > 0 && consumed <= rest.len(),
                    "consumed {consumed} of {}",
                    rest.len()
                );
                commands.push(Command {
                    args: args.iter().map(<[u8]>::to_vec).collect(),
                    consumed,
                    inline: rest[0] != b'*',
                });
                pos += consumed;
            }
            Ok(Parsed::Incomplete { need_bytes }) => {
                let pending = rest.len();
                return (
                    pos,
                    Outcome::Incomplete {
                        need_bytes,
                        pending,
                    },
                );
            }
            Err(e) => return (pos, Outcome::Error(e)),
        }
    }
}

/// The server's prefetch pass: up to [`LOOK_AHEAD_COMMANDS`] commands read ahead
/// (and kept for the parse that reaches them: the run must give the same
/// commands as without).
fn look_ahead(parser: &mut CommandParser, buf: &[u8], limits: &Limits) {
    let mut offset = 0;
    for _ in 0..LOOK_AHEAD_COMMANDS {
        match parser.look_ahead(buf, offset, limits) {
            Ok(Parsed::Complete { consumed, .. }) => offset += consumed,
            _ => return,
        }
    }
}

/// The server's prefetch window (`shard::prefetch::PREFETCH_WINDOW`).
const LOOK_AHEAD_COMMANDS: usize = 16;

/// The commands of `data` parsed at once.
pub fn parse_all(data: &[u8], limits: &Limits) -> Run {
    let mut commands = Vec::new();
    let (_, end) = parse_front(&mut CommandParser::new(), data, limits, &mut commands);
    Run { commands, end }
}

/// The commands of `data` arriving in reads that end at `cuts` (offsets modulo the
/// length, in any order), parsed as the server does: each read is looked ahead
/// over first (the prefetch pass), consumed bytes are dropped, and after
/// `Incomplete` nothing is parsed until `need_bytes` have arrived.
pub fn parse_in_pieces(data: &[u8], cuts: &[u16], limits: &Limits) -> Run {
    let mut ends: Vec<usize> = cuts
        .iter()
        .map(|&c| usize::from(c) % (data.len() + 1))
        .collect();
    ends.push(data.len());
    ends.sort_unstable();
    let mut parser = CommandParser::new();
    let mut commands = Vec::new();
    let mut buffer: Vec<u8> = Vec::new();
    let mut arrived = 0;
    let mut need = 0;
    let mut end = Outcome::Incomplete {
        need_bytes: 1,
        pending: 0,
    };
    for read_end in ends {
        buffer.extend_from_slice(&data[arrived..read_end]);
        arrived = read_end;
        if buffer.len() < need {
            continue;
        }
        look_ahead(&mut parser, &buffer, limits);
        let (used, outcome) = parse_front(&mut parser, &buffer, limits, &mut commands);
        // The server forgets what a look-ahead kept before its input moves.
        parser.forget_ahead();
        buffer.drain(..used);
        if let Outcome::Incomplete { need_bytes, .. } = outcome {
            need = need_bytes;
        }
        let failed = matches!(outcome, Outcome::Error(_));
        end = outcome;
        if failed {
            break;
        }
    }
    if let Outcome::Incomplete { need_bytes, .. } = end {
        end = Outcome::Incomplete {
            need_bytes,
            pending: buffer.len(),
        };
    }
    Run { commands, end }
}

/// `*N\r\n$len\r\narg\r\n...`
/// `args` as an inline request (a line of words, as telnet and `redis-cli
/// --pipe` send them): every argument in double quotes, each byte but a
/// letter or digit as a `\xHH` escape, so any bytes travel (Redis's
/// `sdssplitargs`). `None` when there are no arguments (an inline empty line
/// is no request) or the line would be longer than `line_max`.
pub fn encode_inline<A: AsRef<[u8]>>(args: &[A], line_max: usize) -> Option<Vec<u8>> {
    if args.is_empty() {
        return None;
    }
    let mut out = Vec::new();
    for (i, a) in args.iter().enumerate() {
        if i > 0 {
            out.push(b' ');
        }
        out.push(b'"');
        for &b in a.as_ref() {
            match b.is_ascii_alphanumeric() {
                true => out.push(b),
                false => out.extend_from_slice(format!("\\x{b:02x}").as_bytes()),
            }
        }
        out.push(b'"');
        if out.len() > line_max {
            return None;
        }
    }
    out.extend_from_slice(b"\r\n");
    Some(out)
}

pub fn encode_request<A: AsRef<[u8]>>(args: &[A]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        let a = a.as_ref();
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    out
}
