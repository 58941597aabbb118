//! The election-port codec.
