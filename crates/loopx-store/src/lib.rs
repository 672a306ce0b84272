//! # loopx-store
//!
//! Durable stores of the kernel's `Store` trait: SQLite (embedded default), PostgreSQL (fleets) and memory.
//!
//! This crate is reserved in the workspace so the layout matches the architecture; its
//! implementation lands with its own issue. See the crate README for what belongs here.
#![forbid(unsafe_code)]
