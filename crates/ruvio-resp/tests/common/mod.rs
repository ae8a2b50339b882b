//! Helpers shared by the integration tests: owned snapshots of parse outcomes, so
//! results of different calls can be compared.

#![allow(dead_code)]

use ruvio_resp::{CommandParser, Limits, Parsed, ProtocolError};

/// One command's arguments, owned.
pub type Argv = Vec<Vec<u8>>;

/// An owned copy of one `parse` answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    Complete { argv: Argv, consumed: usize },
    Incomplete { need_bytes: usize },
    Error(ProtocolError),
}

/// Parse once and copy the answer out of the parser's borrow.
pub fn parse_once(parser: &mut CommandParser, buf: &[u8], limits: &Limits) -> Outcome {
    match parser.parse(buf, limits) {
        Ok(Parsed::Complete { args, consumed }) => Outcome::Complete {
            argv: args.iter().map(<[u8]>::to_vec).collect(),
            consumed,
        },
        Ok(Parsed::Incomplete { need_bytes }) => Outcome::Incomplete { need_bytes },
        Err(e) => Outcome::Error(e),
    }
}

/// Parse with default limits and a fresh parser.
pub fn parse(buf: &[u8]) -> Outcome {
    parse_once(&mut CommandParser::new(), buf, &Limits::default())
}

/// A complete command's arguments, panicking (in the test) on anything else.
pub fn argv(buf: &[u8]) -> (Argv, usize) {
    match parse(buf) {
        Outcome::Complete { argv, consumed } => (argv, consumed),
        other => panic!("expected a complete command from {buf:?}, got {other:?}"),
    }
}

/// The error for `buf` under default limits.
pub fn error(buf: &[u8]) -> ProtocolError {
    error_with(buf, &Limits::default())
}

/// The error for `buf` under `limits`.
pub fn error_with(buf: &[u8], limits: &Limits) -> ProtocolError {
    match parse_once(&mut CommandParser::new(), buf, limits) {
        Outcome::Error(e) => e,
        other => panic!("expected an error from {buf:?}, got {other:?}"),
    }
}

/// `need_bytes` for `buf` under `limits`.
pub fn need_with(buf: &[u8], limits: &Limits) -> usize {
    match parse_once(&mut CommandParser::new(), buf, limits) {
        Outcome::Incomplete { need_bytes } => need_bytes,
        other => panic!("expected incomplete from {buf:?}, got {other:?}"),
    }
}

/// `need_bytes` for `buf` under default limits.
pub fn need(buf: &[u8]) -> usize {
    need_with(buf, &Limits::default())
}

/// Arguments as owned byte strings.
pub fn owned(args: &[&[u8]]) -> Argv {
    args.iter().map(|a| a.to_vec()).collect()
}

/// The multibulk encoding of `argv`.
pub fn encode_multibulk(argv: &[Vec<u8>]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", argv.len()).into_bytes();
    for arg in argv {
        out.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
        out.extend_from_slice(arg);
        out.extend_from_slice(b"\r\n");
    }
    out
}
