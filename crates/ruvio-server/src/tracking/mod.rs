//! Client-side caching (not built yet; issue "Client-side caching: CLIENT TRACKING").
//!
//! Will own: the keys each tracking connection read, remembered on the shard that
//! owns each key; BCAST prefixes; invalidation messages sent to the reading
//! connection's shard over the mesh and written as RESP3 pushes or to a REDIRECT
//! target. It will sit above `mesh` (invalidations cross shards) and below `shard`,
//! which feeds it the keys every command read and wrote.
