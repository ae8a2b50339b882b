//! What a heap block costs: the bytes glibc's malloc reserves for a request.
//!
//! Every value and the keyspace count their heap bytes with it (INFO memory, MEMORY
//! USAGE, eviction), so it sits below both: one rule, no value type needing the
//! keyspace to know its own size.

/// glibc's chunk for a request: 8 bytes of header, 16-byte granularity, 32 minimum.
pub fn malloc_chunk_bytes(request: usize) -> usize {
    ((request + 8 + 15) & !15).max(32)
}
