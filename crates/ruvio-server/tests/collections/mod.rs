//! The parts of differential_collections.rs, one responsibility each: what to send
//! ([`generator`]), when two replies count as equal ([`compare`]), and whether a run
//! reached every reply it should ([`coverage`]). A directory under `tests/` is not a test
//! crate of its own; differential_collections.rs and list_encodings.rs declare it with
//! `mod collections;`.

pub(crate) mod compare;
pub(crate) mod coverage;
pub(crate) mod generator;
