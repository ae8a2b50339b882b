//! Scripts inside MULTI/EXEC in forward mode with 2 shards: a script may use keys it
//! did not declare in the slot of its declared keys (Redis Cluster's rule, and what
//! BullMQ's FlowProducer does in a MULTI). Such keys live on their owner, so EXEC
//! runs a queue with a script in turn (docs/transactions.md) and the script runs on
//! its owner; on keys borrowed to the client's shard it answered the non-local key
//! error when the client was connected to the other shard.

mod common;

use common::*;

const SHARDS: usize = 2;

/// Sets an undeclared key of KEYS[1]'s hash tag and answers it with KEYS[1]'s value.
const SIBLING: &str = "
local sibling = '{' .. ARGV[1] .. '}sibling'
redis.call('set', sibling, ARGV[2])
return {redis.call('incr', KEYS[1]), redis.call('get', sibling)}";

#[test]
fn a_script_in_exec_uses_undeclared_keys_of_its_slot_from_either_shard() {
    let server = Server::forward(SHARDS);
    for (round, client_shard) in [0, 1, 0, 1].into_iter().enumerate() {
        let mut c = conn_on_shard(&server, client_shard);
        for key_shard in 0..SHARDS {
            let tag = key_on_shard("tag", key_shard, SHARDS);
            let key = format!("{{{tag}}}counter");
            let value = format!("v{round}");
            let sibling = format!("{{{tag}}}sibling");
            assert_eq!(c.cmd(&["multi"]), b"+OK\r\n");
            let queued = c.cmd(&["eval", SIBLING, "1", &key, &tag, &value]);
            assert_eq!(queued, b"+QUEUED\r\n");
            assert_eq!(c.cmd(&["get", &sibling]), b"+QUEUED\r\n");
            let reply = c.cmd(&["exec"]);
            let expected = format!(
                "*2\r\n*2\r\n:{}\r\n${}\r\n{value}\r\n${}\r\n{value}\r\n",
                round + 1,
                value.len(),
                value.len()
            );
            assert_eq!(
                show(&reply),
                show(expected.as_bytes()),
                "client on shard {client_shard}, keys on shard {key_shard}"
            );
        }
    }
}
