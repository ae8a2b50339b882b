//! ACL LOG: the latest refused commands and failed AUTHs, newest first, as Redis's
//! `addACLLogEntry`: an event like one of the last few (same reason, context,
//! object and user, within a minute) counts into that entry instead of adding
//! one; the list is cut to `acllog-max-len`.
//!
//! Each entry also carries Redis 7.2's `entry-id` (a counter of entries ever
//! added, never reset by ACL LOG RESET, so a tool polling the log can tell a new
//! entry from one it has seen), `timestamp-created` and `timestamp-last-updated`
//! (Unix milliseconds of its first and latest event).

use std::collections::VecDeque;

/// Entries compared with a new event for grouping (Redis's `toscan`).
const GROUPING_SCAN_MAX: usize = 10;
/// Events further apart than this are separate entries (Redis's
/// `ACL_LOG_GROUPING_MAX_TIME_DELTA`).
const GROUPING_WINDOW_MS: u64 = 60_000;

/// One entry: ACL LOG's seven fields.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub count: u64,
    /// `command`, `key`, `channel` or `auth`.
    pub reason: &'static str,
    /// `toplevel`, `multi` or `lua`.
    pub context: &'static str,
    pub object: Vec<u8>,
    pub username: Vec<u8>,
    /// Unix milliseconds of the last event.
    pub at_ms: u64,
    /// The client's CLIENT LIST line at the last event.
    pub client_info: String,
}

/// An entry as the log keeps it: the event and Redis 7.2's identity fields.
#[derive(Debug, Clone, PartialEq)]
pub struct Logged {
    pub entry: Entry,
    /// The number of entries added before this one (Redis's `entry_id`).
    pub entry_id: u64,
    /// Unix milliseconds of the first event (`entry.at_ms` is the latest's).
    pub created_ms: u64,
}

/// The log, newest first.
#[derive(Debug, Default)]
pub struct Log {
    entries: VecDeque<Logged>,
    /// Entries added so far: the next entry's id.
    added: u64,
}

impl Log {
    /// Record an event (`entry.count` is ignored); keep at most `max_len`.
    pub fn add(&mut self, entry: Entry, max_len: usize) {
        if max_len == 0 {
            // As Redis: nothing is logged, and no id is spent.
            self.entries.clear();
            return;
        }
        let similar = self.entries.iter().take(GROUPING_SCAN_MAX).position(|l| {
            let e = &l.entry;
            e.reason == entry.reason
                && e.context == entry.context
                && e.at_ms.abs_diff(entry.at_ms) <= GROUPING_WINDOW_MS
                && e.object == entry.object
                && e.username == entry.username
        });
        match similar.and_then(|i| self.entries.remove(i)) {
            Some(mut l) => {
                l.entry.count += 1;
                l.entry.at_ms = entry.at_ms;
                l.entry.client_info = entry.client_info;
                self.entries.push_front(l);
            }
            None => {
                let logged = Logged {
                    entry_id: self.added,
                    created_ms: entry.at_ms,
                    entry: Entry { count: 1, ..entry },
                };
                self.added += 1;
                self.entries.push_front(logged);
                self.entries.truncate(max_len);
            }
        }
    }

    pub fn reset(&mut self) {
        self.entries.clear();
    }

    /// The newest `count` entries.
    pub fn newest(&self, count: usize) -> Vec<Logged> {
        self.entries.iter().take(count).cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(object: &str, at_ms: u64) -> Entry {
        Entry {
            count: 0,
            reason: "command",
            context: "toplevel",
            object: object.into(),
            username: b"u".to_vec(),
            at_ms,
            client_info: String::new(),
        }
    }

    #[test]
    fn similar_events_group_and_the_log_is_bounded() {
        let mut log = Log::default();
        log.add(event("get", 0), 2);
        log.add(event("get", 1000), 2);
        assert_eq!(log.newest(10).len(), 1);
        assert_eq!(log.newest(10)[0].entry.count, 2);
        log.add(event("get", 100_000), 2);
        log.add(event("set", 100_001), 2);
        let newest = log.newest(10);
        assert_eq!(newest.len(), 2);
        assert_eq!(newest[0].entry.object, b"set");
    }

    #[test]
    fn ids_count_entries_and_survive_a_reset() {
        let mut log = Log::default();
        log.add(event("get", 5), 10);
        log.add(event("get", 7), 10);
        let first = &log.newest(1)[0];
        assert_eq!(
            (first.entry_id, first.created_ms, first.entry.at_ms),
            (0, 5, 7)
        );
        log.add(event("set", 9), 10);
        assert_eq!(log.newest(1)[0].entry_id, 1);
        log.reset();
        log.add(event("del", 11), 10);
        assert_eq!(log.newest(1)[0].entry_id, 2);
        // acllog-max-len 0 logs nothing and spends no id.
        log.add(event("hset", 12), 0);
        assert!(log.newest(10).is_empty());
        log.add(event("hget", 13), 10);
        assert_eq!(log.newest(1)[0].entry_id, 3);
    }
}
