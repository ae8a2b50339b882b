//! Access control (not built yet; issue "Access control and transport security").
//!
//! Will own: ACL users (passwords, command rules from the command table's
//! categories, key and channel patterns, selectors), the check made before a
//! command runs on every path it can take (a client's own, forwarded, queued in
//! MULTI, called from a script), ACL LOG, and the TLS setup of every port. It will
//! sit below `shard::dispatch` (which calls its check) and above `net` and `config`.
