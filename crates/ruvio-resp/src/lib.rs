//! RESP wire format for Ruvio: request parsing (multibulk and inline) and reply
//! encoding for RESP2 and RESP3.
//!
//! This crate knows nothing of sockets or the keyspace. The server hands it the
//! bytes it has read; the parser answers one of three things: a complete command
//! and the bytes it used, "incomplete" (a cheap value, not an error), or a typed
//! protocol error whose text is exactly what Redis sends before closing.
//!
//! Arguments are spans into the caller's read buffer (zero copy); only inline
//! commands with quotes are unescaped into the parser's scratch buffer.

mod parse;
mod reply;

pub use parse::{Args, ArgsIter, CommandParser, Limits, Parsed, ProtocolError};
pub use reply::{Protocol, Reply};
