//! The metrics endpoint's HTTP/1.1: one connection's request parsing, routing and
//! response bytes, without sockets (the shard drives the socket on its own ring:
//! `shard/metrics.rs`).
//!
//! Why hand-written: the endpoint answers `GET` (and `HEAD`) of two paths and
//! nothing else, so a request is a request line and headers, never a body; a
//! general HTTP crate would bring its own runtime and buffers to a shard that has
//! its own ring. What it does handle: keep-alive (HTTP/1.1's default, HTTP/1.0's
//! `Connection: keep-alive`), `Connection: close`, pipelined requests one after the
//! other, and every way a request can be wrong: each gets a 4xx answer and the
//! connection closes, the shard goes on.
//!
//! Bounded: a request's head is at most [`REQUEST_BYTES_MAX`] (the buffer is that
//! size, allocated once per connection: a client cannot size it), a request must
//! arrive whole within [`REQUEST_MS_MAX`] and an idle connection closes after
//! [`IDLE_MS_MAX`] (a slow or silent client holds nothing for long), and at most
//! [`CONNECTIONS_MAX`] connections are open at once.

use std::os::fd::RawFd;

/// Bytes of one request's head (request line and headers). Prometheus sends about
/// 250, browsers under 2000; an oversized head is answered 431.
pub const REQUEST_BYTES_MAX: usize = 8192;
/// Open HTTP connections: scrapers and a few browser tabs; more are closed at once.
pub const CONNECTIONS_MAX: usize = 32;
/// A request must arrive whole within this long of its first byte.
pub const REQUEST_MS_MAX: u64 = 5_000;
/// A connection idle this long (no request, no reply bytes taken) is closed.
/// Longer than Prometheus' default scrape interval (60 s would be 1 minute of a
/// held slot per dead client; scrapers reconnect cheaply).
pub const IDLE_MS_MAX: u64 = 30_000;

const _: () = assert!(REQUEST_BYTES_MAX >= 1024, "room for any real client's head");

/// What a request asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// `/`: the live page.
    Page,
    /// `/metrics`: the Prometheus text.
    Metrics,
    NotFound,
}

/// A request that parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request {
    pub route: Route,
    /// `HEAD`: the headers alone.
    pub head_only: bool,
    pub keep_alive: bool,
}

/// What the bytes at hand hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Parsed {
    /// Not a whole head yet.
    Incomplete,
    /// A request and the bytes its head took.
    Request(Request, usize),
    /// A bad request: the status line to answer with before closing.
    Bad(&'static str),
}

const BAD_REQUEST: &str = "400 Bad Request";
const TOO_LARGE: &str = "431 Request Header Fields Too Large";
const NOT_ALLOWED: &str = "405 Method Not Allowed";
const BAD_VERSION: &str = "505 HTTP Version Not Supported";

/// Where the head at the start of `buf` ends: its length without the blank line,
/// and the bytes it takes with it. Lines end in CRLF or, as RFC 9112 lets a
/// server accept, a bare LF (a request typed into netcat).
fn head_end(buf: &[u8]) -> Option<(usize, usize)> {
    let mut line_start = 0;
    for (i, &b) in buf.iter().enumerate() {
        if b != b'\n' {
            continue;
        }
        let line = &buf[line_start..i];
        if line_start > 0 && (line.is_empty() || line == b"\r") {
            return Some((line_start, i + 1));
        }
        line_start = i + 1;
    }
    None
}

/// Parse the request at the start of `buf`.
pub fn parse(buf: &[u8]) -> Parsed {
    let Some((head_len, used)) = head_end(buf) else {
        if buf.len() >= REQUEST_BYTES_MAX {
            return Parsed::Bad(TOO_LARGE);
        }
        return Parsed::Incomplete;
    };
    if used > REQUEST_BYTES_MAX {
        return Parsed::Bad(TOO_LARGE);
    }
    let Ok(head) = std::str::from_utf8(&buf[..head_len]) else {
        return Parsed::Bad(BAD_REQUEST);
    };
    let mut lines = head.lines();
    let mut parts = lines.next().unwrap_or_default().split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Parsed::Bad(BAD_REQUEST);
    };
    let http10 = match version {
        "HTTP/1.1" => false,
        "HTTP/1.0" => true,
        v if v.starts_with("HTTP/") => return Parsed::Bad(BAD_VERSION),
        _ => return Parsed::Bad(BAD_REQUEST),
    };
    // The absolute form (`http://host/metrics`) names the same path.
    let target = match target.split_once("://") {
        Some((_, rest)) => rest.find('/').map_or("/", |slash| &rest[slash..]),
        None => target,
    };
    if !target.starts_with('/') {
        return Parsed::Bad(BAD_REQUEST);
    }
    let mut keep_alive = !http10;
    for line in lines {
        let Some((name, value)) = line.split_once(':') else {
            return Parsed::Bad(BAD_REQUEST);
        };
        if name.is_empty() || name.contains(|c: char| c.is_ascii_whitespace()) {
            return Parsed::Bad(BAD_REQUEST);
        }
        let value = value.trim();
        if name.eq_ignore_ascii_case("connection") {
            for token in value.split(',').map(str::trim) {
                if token.eq_ignore_ascii_case("close") {
                    keep_alive = false;
                } else if token.eq_ignore_ascii_case("keep-alive") {
                    keep_alive = true;
                }
            }
        } else if name.eq_ignore_ascii_case("transfer-encoding")
            || (name.eq_ignore_ascii_case("content-length") && value != "0")
        {
            // A body this server would not read: refused rather than mistaken
            // for the next request.
            return Parsed::Bad(BAD_REQUEST);
        }
    }
    let head_only = match method {
        "GET" => false,
        "HEAD" => true,
        _ => return Parsed::Bad(NOT_ALLOWED),
    };
    let path = target.split('?').next().unwrap_or_default();
    let route = match path {
        "/" | "/index.html" => Route::Page,
        "/metrics" => Route::Metrics,
        _ => Route::NotFound,
    };
    let request = Request {
        route,
        head_only,
        keep_alive,
    };
    Parsed::Request(request, used)
}

/// Append a whole response to `out`.
pub fn write_response(
    out: &mut Vec<u8>,
    status: &str,
    content_type: &str,
    body: &[u8],
    head_only: bool,
    keep_alive: bool,
) {
    use std::io::Write;
    let connection = if keep_alive { "keep-alive" } else { "close" };
    let _ = write!(
        out,
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nCache-Control: no-store\r\nConnection: {connection}\r\n",
        body.len()
    );
    if status == NOT_ALLOWED {
        out.extend_from_slice(b"Allow: GET, HEAD\r\n");
    }
    out.extend_from_slice(b"\r\n");
    if !head_only {
        out.extend_from_slice(body);
    }
}

/// The media type of the Prometheus text format, version 0.0.4.
pub const METRICS_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// What the connection does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Read more of a request into [`HttpConn::spare`].
    Receive,
    /// Send [`HttpConn::unsent`].
    Send,
    /// Close the socket.
    Close,
}

/// One HTTP connection's state. At most one socket operation is in flight for it
/// (a receive or a send), so its buffers stay put until that operation completes.
#[derive(Debug)]
pub struct HttpConn {
    pub fd: RawFd,
    input: Vec<u8>,
    output: Vec<u8>,
    sent: usize,
    close_after_send: bool,
    /// When the request now arriving began (`None`: no partial request).
    request_started_ms: Option<u64>,
    last_active_ms: u64,
    /// The socket was shut down (a deadline passed): its operation ends, then it closes.
    pub shut: bool,
}

impl HttpConn {
    pub fn new(fd: RawFd, now_ms: u64) -> HttpConn {
        HttpConn {
            fd,
            input: Vec::with_capacity(REQUEST_BYTES_MAX),
            output: Vec::new(),
            sent: 0,
            close_after_send: false,
            request_started_ms: None,
            last_active_ms: now_ms,
            shut: false,
        }
    }

    /// Room for the next receive (never empty while [`Step::Receive`] is asked:
    /// a full buffer without a whole head is a bad request).
    pub fn spare(&mut self) -> (*mut u8, usize) {
        let len = self.input.len();
        let room = REQUEST_BYTES_MAX - len;
        (self.input.as_mut_ptr().wrapping_add(len), room)
    }

    /// The reply bytes not sent yet.
    pub fn unsent(&self) -> &[u8] {
        &self.output[self.sent..]
    }

    /// A receive put `n` bytes into [`spare`](Self::spare); answer what is whole.
    pub fn received(
        &mut self,
        n: usize,
        now_ms: u64,
        metrics: &mut impl FnMut() -> String,
    ) -> Step {
        let room = REQUEST_BYTES_MAX - self.input.len();
        assert!(n <= room, "a receive wrote past the spare room");
        // SAFETY: the kernel wrote `n` bytes into the spare capacity we lent it.
        unsafe { self.input.set_len(self.input.len() + n) };
        self.last_active_ms = now_ms;
        self.request_started_ms.get_or_insert(now_ms);
        self.answer(metrics)
    }

    /// A send took `n` bytes of [`unsent`](Self::unsent).
    pub fn sent(&mut self, n: usize, now_ms: u64, metrics: &mut impl FnMut() -> String) -> Step {
        self.sent += n;
        self.last_active_ms = now_ms;
        if self.sent < self.output.len() {
            return Step::Send;
        }
        self.output.clear();
        self.sent = 0;
        if self.close_after_send {
            return Step::Close;
        }
        if !self.input.is_empty() {
            // The next request may have arrived with the last one (pipelining).
            self.request_started_ms = Some(now_ms);
        }
        self.answer(metrics)
    }

    /// Answer the request at the head of the input, if it is whole.
    fn answer(&mut self, metrics: &mut impl FnMut() -> String) -> Step {
        match parse(&self.input) {
            Parsed::Incomplete => Step::Receive,
            Parsed::Bad(status) => {
                let body = format!("{status}\n");
                write_response(
                    &mut self.output,
                    status,
                    "text/plain",
                    body.as_bytes(),
                    false,
                    false,
                );
                self.close_after_send = true;
                self.input.clear();
                Step::Send
            }
            Parsed::Request(request, used) => {
                self.input.drain(..used);
                self.request_started_ms = None;
                let (head, keep) = (request.head_only, request.keep_alive);
                match request.route {
                    Route::Metrics => {
                        let text = metrics();
                        write_response(
                            &mut self.output,
                            "200 OK",
                            METRICS_TYPE,
                            text.as_bytes(),
                            head,
                            keep,
                        );
                    }
                    Route::Page => {
                        let page = super::page::PAGE_HTML.as_bytes();
                        write_response(
                            &mut self.output,
                            "200 OK",
                            "text/html; charset=utf-8",
                            page,
                            head,
                            keep,
                        );
                    }
                    Route::NotFound => {
                        write_response(
                            &mut self.output,
                            "404 Not Found",
                            "text/plain",
                            b"404 Not Found\n",
                            head,
                            keep,
                        );
                    }
                }
                self.close_after_send = !keep;
                Step::Send
            }
        }
    }

    /// A deadline passed: a request too slow to arrive, or the connection idle.
    pub fn expired(&self, now_ms: u64) -> bool {
        match self.request_started_ms {
            Some(started) => now_ms.saturating_sub(started) > REQUEST_MS_MAX,
            None => now_ms.saturating_sub(self.last_active_ms) > IDLE_MS_MAX,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(text: &str) -> Parsed {
        parse(text.as_bytes())
    }

    #[test]
    fn routes_and_keep_alive() {
        let text = "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";
        let want = Request {
            route: Route::Metrics,
            head_only: false,
            keep_alive: true,
        };
        assert_eq!(request(text), Parsed::Request(want, text.len()));
        let pipelined = format!("{text}GET / HTTP/1.1\r\n");
        assert_eq!(request(&pipelined), Parsed::Request(want, text.len()));
        let Parsed::Request(r, _) = request("HEAD /?x=1 HTTP/1.0\r\n\r\n") else {
            panic!()
        };
        assert_eq!(
            (r.route, r.head_only, r.keep_alive),
            (Route::Page, true, false)
        );
        let Parsed::Request(r, _) = request("GET /nope HTTP/1.1\r\nConnection: Close\r\n\r\n")
        else {
            panic!()
        };
        assert_eq!((r.route, r.keep_alive), (Route::NotFound, false));
        let Parsed::Request(r, _) = request("GET / HTTP/1.0\r\nconnection: keep-alive\r\n\r\n")
        else {
            panic!()
        };
        assert!(r.keep_alive);
        let absolute_lf = "GET http://h:1/metrics?x HTTP/1.1\nA: b\n\nX";
        let Parsed::Request(r, used) = request(absolute_lf) else {
            panic!()
        };
        assert_eq!((r.route, used), (Route::Metrics, absolute_lf.len() - 1));
    }

    #[test]
    fn bad_requests_get_their_status() {
        assert_eq!(request("GET /metrics HTTP/1.1\r\n"), Parsed::Incomplete);
        assert_eq!(request("garbage\r\n\r\n"), Parsed::Bad(BAD_REQUEST));
        assert_eq!(request("GET  / HTTP/1.1\r\n\r\n"), Parsed::Bad(BAD_REQUEST));
        assert_eq!(request("POST / HTTP/1.1\r\n\r\n"), Parsed::Bad(NOT_ALLOWED));
        assert_eq!(request("GET / HTTP/2.0\r\n\r\n"), Parsed::Bad(BAD_VERSION));
        assert_eq!(request("GET x HTTP/1.1\r\n\r\n"), Parsed::Bad(BAD_REQUEST));
        assert_eq!(
            request("GET / HTTP/1.1\r\nNoColon\r\n\r\n"),
            Parsed::Bad(BAD_REQUEST)
        );
        assert_eq!(
            request("GET / HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello"),
            Parsed::Bad(BAD_REQUEST)
        );
        assert_eq!(
            parse(b"GET / HTTP/1.1\r\nX: \xff\r\n\r\n"),
            Parsed::Bad(BAD_REQUEST)
        );
        let huge = format!("GET / HTTP/1.1\r\nX: {}", "a".repeat(REQUEST_BYTES_MAX));
        assert_eq!(request(&huge), Parsed::Bad(TOO_LARGE));
    }

    /// Feed `bytes` to a connection as one receive.
    fn feed(conn: &mut HttpConn, bytes: &[u8], now: u64) -> Step {
        let (ptr, room) = conn.spare();
        assert!(bytes.len() <= room);
        // SAFETY: `ptr` points at `room` spare bytes of the connection's buffer.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), ptr, bytes.len()) };
        conn.received(bytes.len(), now, &mut || "m 1\n".to_string())
    }

    #[test]
    fn pipelined_requests_are_answered_in_turn() {
        let mut conn = HttpConn::new(-1, 0);
        let two = b"GET /metrics HTTP/1.1\r\n\r\nGET /x HTTP/1.1\r\nConnection: close\r\n\r\n";
        assert_eq!(feed(&mut conn, two, 1), Step::Send);
        let first = String::from_utf8(conn.unsent().to_vec()).unwrap();
        assert!(first.starts_with("HTTP/1.1 200 OK\r\n"), "{first}");
        assert!(first.ends_with(
            "Content-Length: 4\r\nCache-Control: no-store\r\nConnection: keep-alive\r\n\r\nm 1\n"
        ));
        let n = conn.unsent().len();
        assert_eq!(conn.sent(n - 3, 2, &mut String::new), Step::Send);
        assert_eq!(conn.sent(3, 2, &mut String::new), Step::Send);
        assert!(conn.unsent().starts_with(b"HTTP/1.1 404 Not Found\r\n"));
        let n = conn.unsent().len();
        assert_eq!(conn.sent(n, 3, &mut String::new), Step::Close);
    }

    #[test]
    fn a_split_request_waits_and_deadlines_hold() {
        let mut conn = HttpConn::new(-1, 0);
        assert!(!conn.expired(IDLE_MS_MAX));
        assert!(conn.expired(IDLE_MS_MAX + 1));
        assert_eq!(feed(&mut conn, b"GET / HT", 10), Step::Receive);
        assert!(conn.expired(10 + REQUEST_MS_MAX + 1));
        assert_eq!(feed(&mut conn, b"TP/1.1\r\n\r\n", 20), Step::Send);
        assert!(conn.unsent().ends_with(b"</html>\n"));
        assert!(!conn.expired(20 + REQUEST_MS_MAX + 1));
    }

    #[test]
    fn garbage_is_answered_and_closed() {
        let mut conn = HttpConn::new(-1, 0);
        assert_eq!(feed(&mut conn, b"\x00\x01\r\n\r\n", 1), Step::Send);
        assert!(conn.unsent().starts_with(b"HTTP/1.1 400 Bad Request\r\n"));
        let n = conn.unsent().len();
        assert_eq!(conn.sent(n, 1, &mut String::new), Step::Close);
        let mut conn = HttpConn::new(-1, 0);
        assert_eq!(feed(&mut conn, &[b'a'; REQUEST_BYTES_MAX], 1), Step::Send);
        assert!(conn.unsent().starts_with(b"HTTP/1.1 431 "));
    }
}
