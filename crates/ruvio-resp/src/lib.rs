//! RESP wire format for Ruvio: request parsing (multibulk and inline) and reply
//! encoding for RESP2 and RESP3.
//!
//! This crate knows nothing of sockets or the keyspace. The server hands it the
//! bytes it has read; the parser answers one of three things: a complete command
//! and the bytes it used, "incomplete" (a cheap value, not an error), or a typed
//! protocol error whose text is exactly what Redis sends before closing.
//!
//! Arguments are spans into the caller's read buffer (zero copy); only inline
//! commands are unescaped into the parser's scratch buffer.
//!
//! Replies are encoded with [`Reply`]; replies that travel between shards as bytes
//! are split and merged with [`reply_len`], [`parse_int_reply`] and [`array_body`].
//! Doubles use [`format_double_g17`], Redis 7.0's `%.17g`.

#![warn(missing_docs)]

mod args;
mod double;
mod parse;
mod reply;
mod scan;

pub use args::{Args, ArgsBatch, ArgsIter, OwnedArgs};
pub use double::format_double_g17;
pub use parse::{
    string2ll, CommandParser, Limits, Parsed, ProtocolError, BULK_BYTES_MAX, INLINE_BYTES_MAX,
    MULTIBULK_LEN_MAX,
};
pub use reply::{put_bulk, Protocol, Reply};
pub use scan::{array_body, parse_int_reply, reply_len, scan_reply, MalformedReply};
