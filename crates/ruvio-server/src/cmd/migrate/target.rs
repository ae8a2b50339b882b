//! MIGRATE's side of the target: the cached connections to the instances keys
//! move to (Redis' `migrate_cached_sockets`) and the blocking exchange over one.
//!
//! Blocking `std::net::TcpStream`s with the call's timeout on every step, as
//! redis-server's `connSyncWrite`/`connSyncReadLine`. What it costs: while a
//! MIGRATE waits for its target, the shard that runs it serves nobody else (its
//! clients, its forwarded requests and its bus links wait, up to the timeout per
//! step); the other shards go on. redis-server stops its whole process for the
//! same time, and `redis-cli --cluster reshard` calls MIGRATE with batches of
//! keys and a timeout of 60 s, so a slot moves at the target's speed either
//! way. An asynchronous client on the shard's ring would free the shard, but it
//! would also let writes to the keys in flight run between the DUMP and the
//! DEL, which MIGRATE's atomicity rules out.
//!
//! Each shard keeps its own cache (a thread-local: a shard is one thread and
//! MIGRATE runs on the shard of its keys), so no lock is taken.

use std::cell::RefCell;
use std::collections::HashMap;
use std::io::{ErrorKind, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

/// A cached connection unused for this long is closed (Redis'
/// `MIGRATE_SOCKET_CACHE_TTL`, 10 s): a resharding tool's next batch finds it
/// open, a target that went away is not held forever.
const IDLE_CLOSE_AFTER: Duration = Duration::from_secs(10);

/// Most cached connections per shard (Redis' `MIGRATE_SOCKET_CACHE_ITEMS`);
/// a new one beyond closes another.
const CACHED_TARGETS_MAX: usize = 64;

/// Longest reply line read from a target: its replies to AUTH, SELECT and
/// RESTORE are one short line each (Redis reads them into 1 KiB buffers); a
/// longer line is not a Redis reply and ends the connection.
const REPLY_LINE_BYTES_MAX: usize = 64 * 1024;

/// Bytes read from the socket at a time.
const READ_CHUNK_BYTES: usize = 4096;

/// One open connection to a target.
struct Target {
    stream: TcpStream,
    /// Bytes read past the last line taken.
    pending: Vec<u8>,
    /// The database the connection has selected, once a MIGRATE succeeded on
    /// it (`None`: unknown, send SELECT).
    db: Option<i64>,
    last_use: Instant,
}

thread_local! {
    /// This shard's connections by `host:port` as the client wrote them.
    static TARGETS: RefCell<HashMap<Vec<u8>, Target>> = RefCell::new(HashMap::new());
}

/// Why an exchange with a target failed: Redis' `-IOERR` texts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IoFailure {
    /// The host did not resolve or the connection did not open in time.
    Connecting,
    /// Writing the request failed (a refused connection fails here too, as
    /// redis-server's non-blocking connect reports it when it writes).
    Writing,
    /// A reply did not come, or the connection closed.
    Reading,
}

impl IoFailure {
    /// The error line without its `-`.
    pub fn line(self) -> &'static [u8] {
        match self {
            IoFailure::Connecting => b"IOERR error or timeout connecting to the client",
            IoFailure::Writing => b"IOERR error or timeout writing to target instance",
            IoFailure::Reading => b"IOERR error or timeout reading to target instance",
        }
    }
}

/// A failed step: what failed, and whether it was the timeout (Redis does not
/// retry after a timeout).
#[derive(Clone, Copy, Debug)]
pub struct StepFailed {
    pub failure: IoFailure,
    pub timed_out: bool,
}

impl StepFailed {
    fn of(failure: IoFailure, e: &std::io::Error) -> StepFailed {
        StepFailed {
            failure,
            timed_out: matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut),
        }
    }
}

/// What one exchange brought back.
pub struct Exchanged {
    /// The first error line the target answered (AUTH's, else SELECT's, else
    /// a RESTORE's), without its `-`.
    pub target_error: Option<Vec<u8>>,
    /// The keys whose RESTORE the target accepted (indexes into the request's
    /// keys), when neither AUTH nor SELECT failed.
    pub accepted: Vec<usize>,
    /// The connection failed reading the reply to key `n` (the replies
    /// before it were read): `Some((n, how))`.
    pub failed_at: Option<(usize, StepFailed)>,
}

/// The request one exchange sends, built once the connection's database is
/// known ([`exchange`]'s `build`).
pub struct Request {
    /// The commands, in RESP.
    pub bytes: Vec<u8>,
    /// It starts with AUTH (one reply line to read first).
    pub auth: bool,
    /// SELECT follows (one more).
    pub select: bool,
    /// RESTOREs after them, one reply line each.
    pub keys: usize,
}

/// Close this shard's connections idle past [`IDLE_CLOSE_AFTER`] (the
/// shard's tick calls it, as Redis' cron calls
/// `migrateCloseTimedoutSockets`).
pub fn close_idle() {
    TARGETS.with(|targets| {
        let mut targets = targets.borrow_mut();
        if !targets.is_empty() {
            targets.retain(|_, t| t.last_use.elapsed() < IDLE_CLOSE_AFTER);
        }
    });
}

/// Run one exchange with the target at `host:port`: take the cached
/// connection (or open one within `timeout`), write the request `build` makes
/// for the database the connection has selected, and read AUTH's, SELECT's and
/// each RESTORE's reply line. A connection that failed is closed (the next
/// call opens a new one); one that succeeded remembers database `db`.
pub fn exchange(
    host: &[u8],
    port: &[u8],
    timeout: Duration,
    db: i64,
    build: impl FnOnce(Option<i64>) -> Request,
) -> Result<Exchanged, StepFailed> {
    let name = [host, b":", port].concat();
    let mut target = take_or_connect(&name, host, port, timeout)?;
    let request = build(target.db);
    match run(&mut target, &request, timeout) {
        Ok(exchanged) => {
            if exchanged.failed_at.is_none() {
                target.db = match exchanged.target_error {
                    None => Some(db),
                    // On error the selected database is no longer known.
                    Some(_) => None,
                };
                target.last_use = Instant::now();
                TARGETS.with(|t| t.borrow_mut().insert(name, target));
            }
            Ok(exchanged)
        }
        // Dropped: closed.
        Err(failed) => Err(failed),
    }
}

/// Write `request` and read its replies.
fn run(target: &mut Target, request: &Request, timeout: Duration) -> Result<Exchanged, StepFailed> {
    let stream = &mut target.stream;
    stream
        .set_write_timeout(Some(timeout))
        .and_then(|_| stream.write_all(&request.bytes))
        .map_err(|e| StepFailed::of(IoFailure::Writing, &e))?;
    let auth = match request.auth {
        true => Some(read_line(target, timeout)?),
        false => None,
    };
    let select = match request.select {
        true => Some(read_line(target, timeout)?),
        false => None,
    };
    let refused = |line: &Option<Vec<u8>>| line.as_ref().is_some_and(|l| l.first() == Some(&b'-'));
    let mut target_error = None;
    if refused(&auth) {
        target_error = auth.as_ref().map(|l| l[1..].to_vec());
    } else if refused(&select) {
        target_error = select.as_ref().map(|l| l[1..].to_vec());
    }
    let before_keys = target_error.is_some();
    let mut accepted = Vec::with_capacity(request.keys);
    let mut failed_at = None;
    for key in 0..request.keys {
        let line = match read_line(target, timeout) {
            Ok(line) => line,
            Err(failed) => {
                failed_at = Some((key, failed));
                break;
            }
        };
        if line.first() == Some(&b'-') {
            target_error.get_or_insert_with(|| line[1..].to_vec());
        } else if !before_keys {
            accepted.push(key);
        }
    }
    Ok(Exchanged {
        target_error,
        accepted,
        failed_at,
    })
}

/// The next reply line (without CR LF), read within `timeout`.
fn read_line(target: &mut Target, timeout: Duration) -> Result<Vec<u8>, StepFailed> {
    let reading = |e: &std::io::Error| StepFailed::of(IoFailure::Reading, e);
    target
        .stream
        .set_read_timeout(Some(timeout))
        .map_err(|e| reading(&e))?;
    loop {
        if let Some(end) = target.pending.iter().position(|&b| b == b'\n') {
            let mut line: Vec<u8> = target.pending.drain(..=end).collect();
            line.pop();
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            return Ok(line);
        }
        if target.pending.len() > REPLY_LINE_BYTES_MAX {
            let e = std::io::Error::new(ErrorKind::InvalidData, "reply line too long");
            return Err(reading(&e));
        }
        let mut chunk = [0u8; READ_CHUNK_BYTES];
        match target.stream.read(&mut chunk) {
            Ok(0) => return Err(reading(&ErrorKind::UnexpectedEof.into())),
            Ok(n) => target.pending.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(reading(&e)),
        }
    }
}

/// The cached connection to `name`, taken out of the cache while it is used,
/// or a new one.
fn take_or_connect(
    name: &[u8],
    host: &[u8],
    port: &[u8],
    timeout: Duration,
) -> Result<Target, StepFailed> {
    let cached = TARGETS.with(|targets| {
        let mut targets = targets.borrow_mut();
        let found = targets.remove(name);
        if found.is_none() && targets.len() >= CACHED_TARGETS_MAX {
            let some = targets.keys().next().cloned();
            if let Some(some) = some {
                targets.remove(&some);
            }
        }
        found
    });
    if let Some(target) = cached {
        return Ok(target);
    }
    let stream = connect(host, port, timeout)?;
    // One request, then its replies: no point waiting to fill packets.
    let _ = stream.set_nodelay(true);
    Ok(Target {
        stream,
        pending: Vec::new(),
        db: None,
        last_use: Instant::now(),
    })
}

/// Open a connection to `host` on `port` (read as C's `atoi`, as Redis does).
fn connect(host: &[u8], port: &[u8], timeout: Duration) -> Result<TcpStream, StepFailed> {
    let connecting = StepFailed {
        failure: IoFailure::Connecting,
        timed_out: false,
    };
    let host = std::str::from_utf8(host).map_err(|_| connecting)?;
    // Redis prints the port with `%d` for getaddrinfo, which takes no
    // negative service; a larger one wraps to 16 bits.
    let port = atoi_port(port);
    if port < 0 {
        return Err(connecting);
    }
    let addrs = (host, port as u16)
        .to_socket_addrs()
        .map_err(|_| connecting)?;
    let mut last = None;
    for addr in addrs {
        match TcpStream::connect_timeout(&addr, timeout) {
            Ok(stream) => return Ok(stream),
            Err(e) => last = Some(e),
        }
    }
    Err(match last {
        Some(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => StepFailed {
            timed_out: true,
            ..connecting
        },
        // Refused or reset: redis-server's non-blocking connect "succeeds" and
        // its first write fails.
        Some(e) => StepFailed::of(IoFailure::Writing, &e),
        None => connecting,
    })
}

/// C's `atoi` of a port argument (an `int`, wrapping as glibc's does):
/// leading blanks and a sign, then digits up to the first other byte.
fn atoi_port(port: &[u8]) -> i32 {
    let text = port.iter().skip_while(|b| b.is_ascii_whitespace());
    let mut text = text.peekable();
    let negative = match text.peek() {
        Some(b'-') => {
            text.next();
            true
        }
        Some(b'+') => {
            text.next();
            false
        }
        _ => false,
    };
    let value = text.take_while(|b| b.is_ascii_digit()).fold(0i32, |n, d| {
        n.wrapping_mul(10).wrapping_add((d - b'0') as i32)
    });
    match negative {
        true => value.wrapping_neg(),
        false => value,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_read_as_atoi() {
        assert_eq!(atoi_port(b"6379"), 6379);
        assert_eq!(atoi_port(b" 6379x"), 6379);
        assert_eq!(atoi_port(b"abc"), 0);
        assert_eq!(atoi_port(b"65537"), 65537);
        assert_eq!(atoi_port(b"-1"), -1);
        assert_eq!(atoi_port(b"99999999999"), 1215752191);
        assert_eq!(atoi_port(b""), 0);
    }
}
