//! The ksearch search engine.

pub mod builtin;
