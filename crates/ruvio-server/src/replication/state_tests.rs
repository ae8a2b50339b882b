//! Unit tests of `state.rs`: a replica on shard links keeps its primary's
//! offset beside its own history, through promotions and link full syncs.

use super::*;

/// A replica on links of both shards, each marked at a server offset.
fn on_links() -> State {
    let state = State::new(2);
    assert!(state.follow("127.0.0.1", 6379));
    state.shard_link_full_sync(0, &"a".repeat(40), 100);
    state.shard_link_full_sync(1, &"b".repeat(40), 200);
    state.shard_link_marked(0, 5000);
    state.shard_link_marked(1, 4000);
    state
}

/// On shard links the server history counts its own bytes while INFO
/// shows the primary's server offset; promoted with single-stream
/// replicas, it goes on with its own history (they continue).
#[test]
fn links_keep_the_primarys_offset_beside_the_own_history() {
    let state = on_links();
    assert!(state.records_applied());
    assert_eq!(state.shown_offset(), 4000, "the least mark");
    assert_eq!(state.offset(), 0, "no bytes of its own history yet");
    // A single-stream replica came: its backlog takes the shards' records.
    state.primary.create_backlog(state.offset(), 1 << 20);
    let ping = b"*1\r\n$4\r\nPING\r\n";
    state.primary.append_stream(ping, state.offset_counter());
    assert_eq!(state.offset(), ping.len() as u64);
    assert_eq!(state.shown_offset(), 4000);
    let own = state.ids().replid;
    assert!(state.promote());
    assert!(!state.records_applied());
    let ids = state.ids();
    assert_eq!(ids.replid2, own);
    assert_eq!(ids.second_offset, ping.len() as i64 + 1);
    assert_eq!(state.shown_offset(), ping.len() as u64);
}

/// Promoted without single-stream replicas, the server history starts
/// at the primary's server offset the links reached.
#[test]
fn a_promotion_without_an_own_history_starts_at_the_links_offset() {
    let state = on_links();
    assert!(state.promote());
    assert_eq!(state.offset(), 4000);
    assert_eq!(state.shown_offset(), 4000);
    assert_eq!(state.ids().second_offset, 4001);
}

/// A link's full sync replaces a shard's data: the own history starts
/// again (a new replid, no backlog).
#[test]
fn a_link_full_sync_ends_the_own_history() {
    let state = on_links();
    state.primary.create_backlog(state.offset(), 1 << 20);
    let own = state.ids().replid;
    state.shard_link_full_sync(1, &"c".repeat(40), 300);
    assert!(!state.primary.active());
    assert_ne!(state.ids().replid, own);
    assert!(state.records_applied());
}
