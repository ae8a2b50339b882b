//! A redis-rs `ClusterClient` INCRing counters without pause while a test moves
//! slots and kills nodes under it (tests/cluster_client_failover.rs,
//! tests/cluster_forward_client_failover.rs: issue 35 asks that cluster
//! clients keep working through a reshard and a failover). It counts every
//! acknowledged INCR per counter, so the test can check at the end that each
//! counter holds at least what was acknowledged, and since a mark, so it can
//! check that the keys of moved or failed-over slots took writes afterwards.

use redis::cluster::ClusterClient;
use redis::Commands;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// What the writer thread and the test share.
struct Shared {
    acked: Vec<AtomicUsize>,
    acked_since_mark: Vec<AtomicUsize>,
    stop: AtomicBool,
    /// Asked by the test: the writer sends nothing until it is cleared.
    pause: AtomicBool,
    /// Set by the writer while paused with no INCR in flight.
    idle: AtomicBool,
}

/// The writer thread and its counts; stopped when dropped (a failing test
/// does not leave it running against killed nodes).
pub struct CounterWriter {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

/// The name of counter `i`.
pub fn counter(i: usize) -> String {
    format!("counter:{i}")
}

/// Counter `i`'s hash slot.
pub fn counter_slot(i: usize) -> u16 {
    super::key_slot(counter(i).as_bytes())
}

impl CounterWriter {
    /// A thread INCRing `counters` counters round robin through a
    /// `ClusterClient` started from `urls`. On an error it drops its
    /// connection and takes a new one (which reads the slot map again), as an
    /// application would, beside the client's own retries.
    pub fn start(urls: Vec<String>, counters: usize) -> CounterWriter {
        let shared = Arc::new(Shared {
            acked: (0..counters).map(|_| AtomicUsize::new(0)).collect(),
            acked_since_mark: (0..counters).map(|_| AtomicUsize::new(0)).collect(),
            stop: AtomicBool::new(false),
            pause: AtomicBool::new(false),
            idle: AtomicBool::new(false),
        });
        let thread = {
            let shared = shared.clone();
            std::thread::spawn(move || write_until_stopped(urls, &shared))
        };
        CounterWriter {
            shared,
            thread: Some(thread),
        }
    }

    /// Acknowledged INCRs of every counter.
    pub fn acked_total(&self) -> usize {
        self.shared
            .acked
            .iter()
            .map(|a| a.load(Ordering::SeqCst))
            .sum()
    }

    /// Starts counting afresh what [`Self::acked_since_mark`] reports.
    pub fn mark(&self) {
        for a in &self.shared.acked_since_mark {
            a.store(0, Ordering::SeqCst);
        }
    }

    /// Acknowledged INCRs since the last mark, per counter.
    pub fn acked_since_mark(&self) -> Vec<usize> {
        let since = &self.shared.acked_since_mark;
        since.iter().map(|a| a.load(Ordering::SeqCst)).collect()
    }

    /// Holds the writes; returns once no INCR is in flight.
    pub fn pause(&self) {
        self.shared.pause.store(true, Ordering::SeqCst);
        super::replication::wait_for("the writer paused", || {
            self.shared.idle.load(Ordering::SeqCst)
        });
    }

    pub fn resume(&self) {
        self.shared.pause.store(false, Ordering::SeqCst);
    }

    /// Stops the thread; the acknowledged INCRs per counter.
    pub fn stop(mut self) -> Vec<usize> {
        self.join();
        let acked = &self.shared.acked;
        acked.iter().map(|a| a.load(Ordering::SeqCst)).collect()
    }

    fn join(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            thread.join().expect("the writer thread");
        }
    }
}

impl Drop for CounterWriter {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            // A panic of the writer is already reported by the test's own
            // failure (or by `stop`).
            let _ = thread.join();
        }
    }
}

fn write_until_stopped(urls: Vec<String>, shared: &Shared) {
    let client = ClusterClient::builder(urls)
        .connection_timeout(Duration::from_secs(1))
        .response_timeout(Duration::from_secs(1))
        .retries(2)
        .build()
        .expect("ClusterClient");
    let counters = shared.acked.len();
    let mut conn = None;
    let mut i = 0;
    while !shared.stop.load(Ordering::SeqCst) {
        if shared.pause.load(Ordering::SeqCst) {
            shared.idle.store(true, Ordering::SeqCst);
            std::thread::sleep(Duration::from_millis(5));
            continue;
        }
        shared.idle.store(false, Ordering::SeqCst);
        let c = match conn.as_mut() {
            Some(c) => c,
            None => match client.get_connection() {
                Ok(c) => conn.insert(c),
                Err(_) => {
                    std::thread::sleep(Duration::from_millis(100));
                    continue;
                }
            },
        };
        let n = i % counters;
        match c.incr::<_, _, i64>(counter(n), 1) {
            Ok(_) => {
                shared.acked[n].fetch_add(1, Ordering::SeqCst);
                shared.acked_since_mark[n].fetch_add(1, Ordering::SeqCst);
            }
            // The failover's errors: a new connection refreshes the slot map
            // as well as the client's own retries do.
            Err(_) => {
                conn = None;
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        i += 1;
    }
}

/// Every counter read through a new `ClusterClient` started from `ports`
/// holds at least its acknowledged INCRs (one that failed may still have
/// been applied, and the client's retries may apply one twice).
pub fn every_acknowledged_incr_present(ports: &[u16], acked: &[usize]) {
    let urls: Vec<String> = ports
        .iter()
        .map(|p| format!("redis://127.0.0.1:{p}/"))
        .collect();
    let mut check = ClusterClient::new(urls).unwrap().get_connection().unwrap();
    for (i, &acked) in acked.iter().enumerate() {
        let value: Option<usize> = check.get(counter(i)).unwrap();
        let value = value.unwrap_or(0);
        assert!(
            value >= acked,
            "{} (slot {}): {value} < {acked} acknowledged",
            counter(i),
            counter_slot(i)
        );
    }
}
