//! ACL LOG: the latest refused commands and failed AUTHs, newest first, as Redis's
//! `addACLLogEntry`: an event like one of the last few (same reason, context,
//! object and user, within a minute) counts into that entry instead of adding
//! one; the list is cut to `acllog-max-len`.

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

/// The log, newest first.
#[derive(Debug, Default)]
pub struct Log {
    entries: VecDeque<Entry>,
}

impl Log {
    /// Record an event (`entry.count` is ignored); keep at most `max_len`.
    pub fn add(&mut self, entry: Entry, max_len: usize) {
        let similar = self.entries.iter().take(GROUPING_SCAN_MAX).position(|e| {
            e.reason == entry.reason
                && e.context == entry.context
                && e.at_ms.abs_diff(entry.at_ms) <= GROUPING_WINDOW_MS
                && e.object == entry.object
                && e.username == entry.username
        });
        match similar.and_then(|i| self.entries.remove(i)) {
            Some(mut e) => {
                e.count += 1;
                e.at_ms = entry.at_ms;
                e.client_info = entry.client_info;
                self.entries.push_front(e);
            }
            None => {
                self.entries.push_front(Entry { count: 1, ..entry });
                self.entries.truncate(max_len);
            }
        }
    }

    pub fn reset(&mut self) {
        self.entries.clear();
    }

    /// The newest `count` entries.
    pub fn newest(&self, count: usize) -> Vec<Entry> {
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
        assert_eq!(log.newest(10)[0].count, 2);
        log.add(event("get", 100_000), 2);
        log.add(event("set", 100_001), 2);
        let newest = log.newest(10);
        assert_eq!(newest.len(), 2);
        assert_eq!(newest[0].object, b"set");
    }
}
