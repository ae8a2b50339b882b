//! Redis' `long double` rules (INCRBYFLOAT): see [`soft`].

mod soft;

pub use soft::{sum_small_decimals, LongDouble};
