//! The load loop: connections spread over threads, one epoll loop per thread.
//!
//! Closed loop (maximum throughput): each connection keeps one pipeline of `P`
//! requests in flight, writes the whole pipeline with one `write`, and sends the
//! next as soon as the last reply of the previous one arrives. Latency of a
//! request is from the moment its pipeline was written to the moment the read
//! that completed its reply returned.
//!
//! Open loop (target rate): each connection has a schedule of intended send
//! times at `clients / rate` apart. Latency is measured from the intended time,
//! not the actual one, so a stalled server is charged for every request it
//! delayed (no coordinated omission). `P` caps the requests in flight per
//! connection; requests that are due while the cap is reached wait in the
//! schedule and their waiting counts.
//!
//! Per request the hot path copies a pre-encoded template, stamps its key
//! digits, and records one histogram value; nothing is allocated.

use std::io::{self, ErrorKind};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

use crate::keys::{KeyOrder, KeyPicker, Space};
use crate::poll::{process_cpu, Poller};
use crate::reply::ReplyScanner;
use crate::template::Template;
use crate::transport::{Connector, Transport};

/// Read buffer per connection. Replies are streamed through it (large bulks are
/// skipped as they arrive), so it only bounds how much one `read` can take.
const READ_BUFFER_BYTES: usize = 64 * 1024;
const _: () = assert!(
    crate::reply::LINE_BYTES_MAX < READ_BUFFER_BYTES,
    "a reply line must fit"
);

/// Highest latency the histograms track: one hour, in nanoseconds.
const LATENCY_NS_MAX: u64 = 3_600_000_000_000;

/// Significant digits kept by the histograms (0.1% resolution).
const LATENCY_SIGFIGS: u8 = 3;

/// Upper bound on the wait between open-loop schedule checks, so a thread with
/// only far-future work still notices the run's deadline promptly.
const IDLE_WAIT_MAX: Duration = Duration::from_millis(50);

/// Where one group of connections sends its requests.
#[derive(Debug, Clone)]
pub struct Target {
    /// Host to connect to.
    pub host: String,
    /// Port to connect to.
    pub port: u16,
    /// Key numbers this target accepts.
    pub space: Space,
    /// The phase's command compiled for this target (hash tag, value bytes).
    pub template: Template,
}

/// How much work a phase does.
#[derive(Debug, Clone, Copy)]
pub enum Amount {
    /// This many requests in total, shared by all connections (fast ones do more).
    Requests(u64),
    /// Each connection walks its stride of its target's key space exactly once:
    /// the preload, which must write every key.
    EveryKeyOnce,
    /// As many as fit in this time.
    Duration(Duration),
}

/// One measured (or preload) phase: one command against every target.
#[derive(Debug, Clone)]
pub struct Phase {
    /// Name shown in reports.
    pub name: String,
    /// Targets; connection `i` uses target `i % targets.len()`.
    pub targets: Vec<Target>,
    /// How much to do.
    pub amount: Amount,
    /// Random or sequential key numbers.
    pub order: KeyOrder,
    /// Open-loop total rate in requests per second; `None` is closed loop.
    pub rate: Option<f64>,
    /// Every key placeholder of one request takes the same number (cluster routing
    /// checked that number's key against the target's slots).
    pub one_key_per_request: bool,
}

/// Connections, threads and pipelining shared by all phases.
#[derive(Debug, Clone)]
pub struct Shape {
    /// Connections in total.
    pub clients: usize,
    /// Threads; connection `i` runs on thread `i % threads`.
    pub threads: usize,
    /// Requests per pipeline (closed loop) or in flight per connection (open loop).
    pub pipeline: usize,
    /// CPUs to pin threads to (thread `i` on `cpus[i % len]`); empty means no pinning.
    pub cpus: Vec<usize>,
    /// Seed for the key streams, so two runs can draw the same keys.
    pub seed: u64,
    /// How each connection is opened (plain or TLS, tracking or not).
    pub connector: Arc<Connector>,
}

/// What a phase measured.
pub struct PhaseResult {
    /// Replies received.
    pub requests: u64,
    /// From the start signal to the last reply.
    pub elapsed: Duration,
    /// Error replies among them.
    pub errors: u64,
    /// Text of the first error reply.
    pub first_error: Option<String>,
    /// Push frames received between replies (with `--tracking`: invalidations).
    pub invalidations: u64,
    /// Latency of every request in nanoseconds.
    pub latency_ns: Histogram<u64>,
    /// CPU the generator used for the phase (all threads).
    pub cpu: Duration,
}

/// Run one phase and merge every thread's result.
pub fn run_phase(shape: &Shape, phase: &Phase) -> Result<PhaseResult, String> {
    let threads = shape.threads.clamp(1, shape.clients.max(1));
    let budget = Arc::new(AtomicU64::new(match phase.amount {
        Amount::Requests(n) => n,
        _ => u64::MAX,
    }));
    let barrier = Arc::new(Barrier::new(threads + 1));
    let cpu_before = process_cpu();
    let (start, results) = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let (budget, barrier) = (budget.clone(), barrier.clone());
                scope.spawn(move || run_thread(shape, phase, t, threads, &budget, &barrier))
            })
            .collect();
        barrier.wait();
        let start = Instant::now();
        (
            start,
            handles
                .into_iter()
                .map(|h| h.join().expect("load thread panicked"))
                .collect::<Vec<_>>(),
        )
    });
    let cpu = process_cpu().saturating_sub(cpu_before);
    merge(start, results, cpu)
}

/// One thread's outcome.
struct ThreadResult {
    requests: u64,
    errors: u64,
    first_error: Option<String>,
    invalidations: u64,
    latency_ns: Histogram<u64>,
    finished: Instant,
}

fn merge(
    start: Instant,
    results: Vec<Result<ThreadResult, String>>,
    cpu: Duration,
) -> Result<PhaseResult, String> {
    let mut latency_ns = new_histogram();
    let (mut requests, mut errors, mut first_error, mut invalidations) = (0, 0, None, 0);
    let mut end = start;
    for r in results {
        let r = r?;
        requests += r.requests;
        errors += r.errors;
        invalidations += r.invalidations;
        first_error = first_error.or(r.first_error);
        latency_ns.add(&r.latency_ns).map_err(|e| e.to_string())?;
        end = end.max(r.finished);
    }
    Ok(PhaseResult {
        requests,
        elapsed: end - start,
        errors,
        first_error,
        invalidations,
        latency_ns,
        cpu,
    })
}

fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, LATENCY_NS_MAX, LATENCY_SIGFIGS).expect("valid histogram bounds")
}

/// One connection's state.
struct Conn {
    transport: Transport,
    target: usize,
    picker: KeyPicker,
    /// Requests this connection may still send when it has its own quota.
    quota: Option<u64>,
    out: Vec<u8>,
    out_pos: usize,
    watching_write: bool,
    inbuf: Box<[u8]>,
    in_len: usize,
    scanner: ReplyScanner,
    /// Send (closed loop) or intended (open loop) time of each request in flight,
    /// as nanoseconds since the thread's epoch; a ring of `pipeline` entries.
    sent_ns: Vec<u64>,
    head: usize,
    inflight: usize,
    /// Replies received so far for the oldest request in flight (a transaction
    /// is answered by several).
    partial: usize,
    /// Next intended send time (open loop).
    due_ns: u64,
    /// No more requests will be issued.
    exhausted: bool,
    /// Exhausted, drained and flushed: the loop no longer waits for it.
    done: bool,
}

impl Conn {
    fn is_finished(&self) -> bool {
        self.exhausted && self.inflight == 0 && self.out_pos == self.out.len()
    }
}

/// Per-thread counters that replies update.
struct Tally {
    requests: u64,
    errors: u64,
    first_error: Option<String>,
    invalidations: u64,
    latency_ns: Histogram<u64>,
}

/// Everything a thread's loop needs besides its connections.
struct Ctx<'a> {
    phase: &'a Phase,
    pipeline: usize,
    budget: &'a AtomicU64,
    epoch: Instant,
    deadline: Option<Instant>,
    interval_ns: u64,
}

fn run_thread(
    shape: &Shape,
    phase: &Phase,
    thread: usize,
    threads: usize,
    budget: &AtomicU64,
    barrier: &Barrier,
) -> Result<ThreadResult, String> {
    if !shape.cpus.is_empty() {
        let id = shape.cpus[thread % shape.cpus.len()];
        core_affinity::set_for_current(core_affinity::CoreId { id });
    }
    let conns = connect_all(shape, phase, thread, threads);
    barrier.wait();
    let mut conns = conns?;
    let epoch = Instant::now();
    let ctx = Ctx {
        phase,
        pipeline: shape.pipeline.max(1),
        budget,
        epoch,
        deadline: match phase.amount {
            Amount::Duration(d) => Some(epoch + d),
            _ => None,
        },
        interval_ns: phase
            .rate
            .map_or(0, |r| (shape.clients as f64 * 1e9 / r.max(1e-9)) as u64),
    };
    let mut tally = Tally {
        requests: 0,
        errors: 0,
        first_error: None,
        invalidations: 0,
        latency_ns: new_histogram(),
    };
    event_loop(&ctx, &mut conns, &mut tally).map_err(|e| format!("{}: {e}", phase.name))?;
    Ok(ThreadResult {
        requests: tally.requests,
        errors: tally.errors,
        first_error: tally.first_error,
        invalidations: tally.invalidations,
        latency_ns: tally.latency_ns,
        finished: Instant::now(),
    })
}

/// Open this thread's connections: global connection `i` belongs to thread
/// `i % threads` and to target `i % targets`.
fn connect_all(
    shape: &Shape,
    phase: &Phase,
    thread: usize,
    threads: usize,
) -> Result<Vec<Conn>, String> {
    let targets = phase.targets.len();
    let mut conns = Vec::new();
    for i in (thread..shape.clients).step_by(threads) {
        let t = i % targets;
        let target = &phase.targets[t];
        // Connections of one target are t, t+targets, ...: this one's rank among them.
        let (rank, peers) = (
            (i / targets) as u64,
            (shape.clients - t).div_ceil(targets) as u64,
        );
        let transport = shape.connector.connect(&target.host, target.port)?;
        let quota = match phase.amount {
            Amount::EveryKeyOnce => Some(stride_len(space_len(&target.space), rank, peers)),
            _ => None,
        };
        let pipeline = shape.pipeline.max(1);
        conns.push(Conn {
            transport,
            target: t,
            picker: KeyPicker::new(
                phase.order,
                target.space.clone(),
                rank,
                peers,
                shape.seed ^ i as u64,
            ),
            quota,
            out: Vec::with_capacity(pipeline * target.template.len()),
            out_pos: 0,
            watching_write: false,
            inbuf: vec![0u8; READ_BUFFER_BYTES].into_boxed_slice(),
            in_len: 0,
            scanner: ReplyScanner::new(),
            sent_ns: vec![0; pipeline],
            head: 0,
            inflight: 0,
            partial: 0,
            // Spread open-loop connections over one interval so they do not fire together.
            due_ns: 0,
            exhausted: false,
            done: false,
        });
    }
    Ok(conns)
}

fn space_len(space: &Space) -> u64 {
    match space {
        Space::Range(n) => *n,
        Space::Owned(v) => v.len() as u64,
    }
}

/// How many of `rank, rank+peers, ...` are below `len`.
fn stride_len(len: u64, rank: u64, peers: u64) -> u64 {
    if rank >= len {
        0
    } else {
        (len - rank).div_ceil(peers.max(1))
    }
}

fn event_loop(ctx: &Ctx, conns: &mut [Conn], tally: &mut Tally) -> io::Result<()> {
    let mut poller = Poller::new()?;
    let spread = conns.len().max(1) as u64;
    for (token, c) in conns.iter_mut().enumerate() {
        poller.register(c.transport.fd(), token, false)?;
        c.due_ns = ctx.interval_ns * token as u64 / spread;
    }
    let open = ctx.phase.rate.is_some();
    for (token, c) in conns.iter_mut().enumerate() {
        issue(ctx, &poller, c, token, now_ns(ctx))?;
    }
    let mut live = conns.len();
    let mut ready: Vec<(usize, bool, bool)> = Vec::with_capacity(crate::poll::EVENTS_MAX);
    for c in conns.iter_mut() {
        live -= retire(c);
    }
    while live > 0 {
        let timeout = if open {
            open_loop_timeout(ctx, conns)
        } else {
            None
        };
        ready.clear();
        poller.wait(timeout, |ev| {
            ready.push((ev.token, ev.readable, ev.writable))
        })?;
        for &(token, readable, writable) in &ready {
            let c = &mut conns[token];
            if writable {
                flush(&poller, c, token)?;
            }
            if readable {
                receive(ctx, c, tally)?;
            }
            if !open && c.inflight == 0 {
                issue(ctx, &poller, c, token, now_ns(ctx))?;
            }
            live -= retire(c);
        }
        if open {
            let now = now_ns(ctx);
            for (token, c) in conns.iter_mut().enumerate() {
                issue(ctx, &poller, c, token, now)?;
                live -= retire(c);
            }
        }
    }
    Ok(())
}

/// Mark a connection done the first time it has nothing left to do; returns 1 then.
fn retire(c: &mut Conn) -> usize {
    if !c.done && c.is_finished() {
        c.done = true;
        1
    } else {
        0
    }
}

#[inline]
fn now_ns(ctx: &Ctx) -> u64 {
    ctx.epoch.elapsed().as_nanos() as u64
}

/// Time until the earliest connection that can send is due.
fn open_loop_timeout(ctx: &Ctx, conns: &[Conn]) -> Option<Duration> {
    let now = now_ns(ctx);
    let next = conns
        .iter()
        .filter(|c| !c.exhausted && c.inflight < ctx.pipeline)
        .map(|c| c.due_ns)
        .min();
    Some(match next {
        Some(due) => Duration::from_nanos(due.saturating_sub(now)).min(IDLE_WAIT_MAX),
        None => IDLE_WAIT_MAX,
    })
}

/// Claim up to `want` requests from the connection's quota or the shared budget.
fn claim(ctx: &Ctx, c: &mut Conn, want: u64, now: u64) -> u64 {
    if let Some(deadline) = ctx.deadline {
        if ctx.epoch + Duration::from_nanos(now) >= deadline {
            return 0;
        }
    }
    if let Some(q) = c.quota.as_mut() {
        let got = want.min(*q);
        *q -= got;
        return got;
    }
    if matches!(ctx.phase.amount, Amount::Duration(_)) {
        return want;
    }
    let mut left = ctx.budget.load(Ordering::Relaxed);
    loop {
        let got = want.min(left);
        if got == 0 {
            return 0;
        }
        match ctx.budget.compare_exchange_weak(
            left,
            left - got,
            Ordering::Relaxed,
            Ordering::Relaxed,
        ) {
            Ok(_) => return got,
            Err(now_left) => left = now_left,
        }
    }
}

/// Append requests and write them: a full pipeline in closed loop, every due
/// request that fits in open loop.
fn issue(ctx: &Ctx, poller: &Poller, c: &mut Conn, token: usize, now: u64) -> io::Result<()> {
    if c.exhausted {
        return Ok(());
    }
    let room = (ctx.pipeline - c.inflight) as u64;
    let want = match ctx.phase.rate {
        None if c.inflight == 0 => room,
        None => 0,
        Some(_) if c.due_ns > now => 0,
        Some(_) => room.min((now - c.due_ns) / ctx.interval_ns.max(1) + 1),
    };
    if want == 0 {
        return Ok(());
    }
    let got = claim(ctx, c, want, now);
    if got == 0 {
        c.exhausted = true;
        return Ok(());
    }
    let template = &ctx.phase.targets[c.target].template;
    if c.out_pos == c.out.len() {
        c.out.clear();
        c.out_pos = 0;
    }
    for _ in 0..got {
        if ctx.phase.one_key_per_request {
            let key = c.picker.pick();
            template.stamp_into(&mut c.out, |_| key);
        } else {
            let picker = &mut c.picker;
            template.stamp_into(&mut c.out, |_| picker.pick());
        }
        let slot = (c.head + c.inflight) % ctx.pipeline;
        c.sent_ns[slot] = if ctx.phase.rate.is_some() {
            c.due_ns
        } else {
            now
        };
        c.due_ns += ctx.interval_ns;
        c.inflight += 1;
    }
    flush(poller, c, token)
}

/// Write what is pending; watch for writability only while something is left
/// (requests, or TLS records the socket had no room for).
fn flush(poller: &Poller, c: &mut Conn, token: usize) -> io::Result<()> {
    c.transport.flush_records()?;
    while c.out_pos < c.out.len() {
        match c.transport.write(&c.out[c.out_pos..]) {
            Ok(0) => {
                return Err(io::Error::new(
                    ErrorKind::WriteZero,
                    "server stopped reading",
                ))
            }
            Ok(n) => c.out_pos += n,
            Err(e) if e.kind() == ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    let pending = c.out_pos < c.out.len() || c.transport.wants_write();
    if pending != c.watching_write {
        poller.reregister(c.transport.fd(), token, pending)?;
        c.watching_write = pending;
    }
    Ok(())
}

/// Read what arrived, account every completed reply, keep a partial tail.
fn receive(ctx: &Ctx, c: &mut Conn, tally: &mut Tally) -> io::Result<()> {
    loop {
        let n = match c.transport.read(&mut c.inbuf[c.in_len..]) {
            Ok(0) => {
                return Err(io::Error::new(
                    ErrorKind::UnexpectedEof,
                    "server closed the connection",
                ))
            }
            Ok(n) => n,
            Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(()),
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        c.in_len += n;
        let now = now_ns(ctx);
        let filled = c.in_len == c.inbuf.len();
        let replies = ctx.phase.targets[c.target].template.replies;
        let Conn {
            scanner,
            inbuf,
            in_len,
            sent_ns,
            head,
            inflight,
            partial,
            ..
        } = c;
        let used = scanner
            .scan(&inbuf[..*in_len], |error| {
                *partial += 1;
                if *partial < replies {
                    if error.is_some() {
                        tally.errors += 1;
                    }
                    return;
                }
                *partial = 0;
                let sent = sent_ns[*head];
                *head = (*head + 1) % sent_ns.len();
                *inflight = inflight.saturating_sub(1);
                tally.requests += 1;
                tally
                    .latency_ns
                    .saturating_record(now.saturating_sub(sent).max(1));
                if let Some(text) = error {
                    tally.errors += 1;
                    if tally.first_error.is_none() {
                        tally.first_error = Some(String::from_utf8_lossy(text).into_owned());
                    }
                }
            })
            .map_err(|e| io::Error::new(ErrorKind::InvalidData, e.0))?;
        tally.invalidations += scanner.take_pushes();
        inbuf.copy_within(used..*in_len, 0);
        *in_len -= used;
        if !filled {
            return Ok(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strides_cover_the_space() {
        let total: u64 = (0..3).map(|r| stride_len(10, r, 3)).sum();
        assert_eq!(total, 10);
        assert_eq!(stride_len(2, 5, 8), 0);
    }
}
