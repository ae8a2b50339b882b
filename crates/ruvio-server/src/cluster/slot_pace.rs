//! How much of its shard's time a whole-slot migration's own work may take
//! (`cluster/slot_migration.rs`; the source reads keys into the stream and
//! later deletes its copies, `shard/slot_export.rs`), by what the shard's
//! clients do: docs/cluster.md, "Whole-slot migration".
//!
//! Why not a fixed time per tick: 1 ms of sending per 10 ms tick and 500
//! deletions per tick left the source's clients 0.45x of their rate in the
//! slowest second of a 1 M-key move (records/migration-rate-2026-12-05-3.json,
//! the deletions' seconds), yet an idle node waited out its ticks. Here the
//! work runs on the loop's turns in slices: while clients are served it gets
//! a fixed share of the time, never more than [`BUSY_SLICE_MAX`] at once (a
//! client at pipeline 1 waits no longer than that behind it), and once no
//! client command ran for [`CLIENTS_IDLE_AFTER`] it works in
//! [`IDLE_SLICE`]s back to back, so an idle node moves at full speed.

use std::time::{Duration, Instant};

/// While clients are served, the migration earns this fraction of the
/// elapsed time (1/8: the source kept 0.8-0.9x of its clients' rate while
/// it sent keys 1 ms per 10 ms tick in the record above).
pub const BUSY_SHARE_DIVISOR: u32 = 8;

/// The least a slice does while clients are served: shorter ones cost more
/// in their start (the loop's checks, a socket write) than they do.
pub const BUSY_SLICE_MIN: Duration = Duration::from_micros(50);

/// The most a slice takes while clients are served: what a client's command
/// may wait behind the migration.
pub const BUSY_SLICE_MAX: Duration = Duration::from_micros(200);

/// A slice while no client is served; a command that then arrives waits
/// no longer than this.
pub const IDLE_SLICE: Duration = Duration::from_millis(1);

/// The most a slice's overrun is paid back from later earnings: a slice
/// whose last batch ran past its end (a DEL of 16 keys, a socket write)
/// took clients' time, which the next slices give back; a shard that was
/// descheduled mid-slice is not made to pay for more than this.
pub const DEBT_MAX: Duration = Duration::from_millis(2);

/// No client command ran for this long: the clients are idle.
pub const CLIENTS_IDLE_AFTER: Duration = Duration::from_millis(2);

/// The shard's budget for its migrations (one per node: its jobs share it).
#[derive(Default)]
pub struct Pace {
    /// When the budget was last counted.
    counted_at: Option<Instant>,
    /// Time earned and not spent yet (at most [`BUSY_SLICE_MAX`]).
    credit: Duration,
    /// Time slices ran past what they had earned, to pay back first (at
    /// most [`DEBT_MAX`]).
    debt: Duration,
    /// The shard's count of commands run as last seen, and when a client's
    /// command was last seen to have run.
    commands: u64,
    clients_seen_at: Option<Instant>,
    /// The last slice had work for all of its time: an idle shard should
    /// go on at once rather than sleep.
    last_slice_full: bool,
}

impl Pace {
    /// The time the migration may work now (`None`: not yet), `commands`
    /// being the shard's count of commands run so far.
    pub fn slice(&mut self, now: Instant, commands: u64) -> Option<Duration> {
        if commands != self.commands {
            self.commands = commands;
            self.clients_seen_at = Some(now);
        }
        let elapsed = self
            .counted_at
            .map_or(Duration::ZERO, |at| now.saturating_duration_since(at));
        self.counted_at = Some(now);
        if self.clients_idle(now) {
            self.credit = Duration::ZERO;
            self.debt = Duration::ZERO;
            return Some(IDLE_SLICE);
        }
        let earned = elapsed / BUSY_SHARE_DIVISOR;
        let repaid = earned.min(self.debt);
        self.debt -= repaid;
        self.credit = (self.credit + (earned - repaid)).min(BUSY_SLICE_MAX);
        (self.credit >= BUSY_SLICE_MIN).then_some(self.credit)
    }

    /// A slice of `slice` took `took` and ran no client command; the
    /// shard's count of commands is `commands` after it (its own DELs
    /// included, which are not clients' work).
    pub fn spent(&mut self, slice: Duration, took: Duration, commands: u64) {
        let overrun = took.saturating_sub(slice);
        self.credit = self.credit.saturating_sub(took);
        self.debt = (self.debt + overrun).min(DEBT_MAX);
        self.commands = commands;
        self.last_slice_full = took >= slice;
    }

    /// The shard's count of commands is `commands` after some of the
    /// migration's own ran outside a slice (the import's START).
    pub fn own_commands(&mut self, commands: u64) {
        self.commands = commands;
    }

    /// No client command ran for [`CLIENTS_IDLE_AFTER`].
    pub fn clients_idle(&self, now: Instant) -> bool {
        self.clients_seen_at
            .is_none_or(|at| now.saturating_duration_since(at) >= CLIENTS_IDLE_AFTER)
    }

    /// The loop should not sleep before the next slice: the clients are
    /// idle and the last slice had work for all of its time (a migration
    /// that waits for its socket, or has nothing left, would only spin).
    pub fn eager(&self, now: Instant) -> bool {
        self.last_slice_full && self.clients_idle(now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    /// A pace whose first slice (clients idle: a whole one) ran `commands`
    /// of the migration's own, and when that slice began.
    fn after_first_slice(commands: u64) -> (Pace, Instant) {
        let t0 = Instant::now();
        let mut pace = Pace::default();
        assert_eq!(pace.slice(t0, 0), Some(IDLE_SLICE));
        pace.spent(IDLE_SLICE, IDLE_SLICE, commands);
        (pace, t0)
    }

    #[test]
    fn idle_clients_get_whole_slices_and_busy_ones_a_share() {
        let us = Duration::from_micros;
        // Nobody served yet: full speed, and no sleep between slices.
        let (mut pace, t0) = after_first_slice(0);
        assert!(pace.eager(t0 + IDLE_SLICE));
        // A client's command ran: the share of the time since.
        let t1 = t0 + MS;
        assert_eq!(pace.slice(t1, 5), Some(MS / BUSY_SHARE_DIVISOR));
        pace.spent(MS / BUSY_SHARE_DIVISOR, MS / BUSY_SHARE_DIVISOR, 5);
        assert!(!pace.eager(t1));
        // Too little earned yet for a slice.
        assert_eq!(pace.slice(t1 + us(200), 6), None);
        // Earning stops at the longest slice, however long the wait.
        let t2 = t1 + 100 * MS;
        assert_eq!(pace.slice(t2, 7), Some(BUSY_SLICE_MAX));
        // A slice that ended early keeps the rest, and the loop sleeps.
        pace.spent(BUSY_SLICE_MAX, BUSY_SLICE_MAX / 2, 7);
        assert!(!pace.eager(t2 + CLIENTS_IDLE_AFTER));
        let rest = BUSY_SLICE_MAX / 2 + (CLIENTS_IDLE_AFTER / 2) / BUSY_SHARE_DIVISOR;
        let t3 = t2 + CLIENTS_IDLE_AFTER / 2;
        assert_eq!(pace.slice(t3, 7), Some(rest.min(BUSY_SLICE_MAX)));
        // No client command since t2 for CLIENTS_IDLE_AFTER: idle again.
        assert_eq!(pace.slice(t2 + CLIENTS_IDLE_AFTER, 7), Some(IDLE_SLICE));
    }

    #[test]
    fn a_slice_that_ran_long_is_paid_back_before_the_next() {
        let us = Duration::from_micros;
        let (mut pace, t0) = after_first_slice(0);
        let t1 = t0 + 100 * MS;
        assert_eq!(pace.slice(t1, 1), Some(BUSY_SLICE_MAX));
        // The slice's last batch ran 400 us past its 200.
        pace.spent(BUSY_SLICE_MAX, us(600), 1);
        // 400 us of debt: the next 3.2 ms of clients' time earns it back
        // before any slice, then the share goes on as before.
        assert_eq!(pace.slice(t1 + us(3200), 2), None);
        assert_eq!(pace.slice(t1 + us(3600), 3), Some(us(50)));
        // A descheduled shard pays back no more than DEBT_MAX.
        pace.spent(us(50), 100 * MS, 3);
        let repaid = DEBT_MAX * BUSY_SHARE_DIVISOR;
        assert_eq!(pace.slice(t1 + us(3600) + repaid, 4), None);
        assert_eq!(
            pace.slice(t1 + us(3600) + repaid + us(400), 5),
            Some(us(50))
        );
    }

    #[test]
    fn the_migrations_own_commands_do_not_count_as_clients() {
        // The slice ran 500 DELs.
        let (mut pace, t0) = after_first_slice(500);
        assert_eq!(pace.slice(t0 + MS, 500), Some(IDLE_SLICE));
    }
}
