//! Memory: the bytes the process has allocated, counted by the global allocator as
//! they are allocated ([`alloc`]), and the `maxmemory` limit that evicts keys or
//! refuses growing writes when that count passes it ([`limit`]).
//!
//! Shaped so because INFO's `used_memory` and the limit must agree with what the
//! allocator really handed out, whatever shard allocated it: the count is kept
//! below everything, the limit's enforcement runs on each shard's own keyspace.

pub mod alloc;
pub mod limit;
