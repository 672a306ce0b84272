//! # loopx-capability-research
//!
//! Research as pure judgement over the kernel: hypothesis ledger, evidence graph, dev/holdout separation, per-agent frontiers.
//!
//! This crate is reserved in the workspace so the layout matches the architecture; its
//! implementation lands with its own issue. See the crate README for what belongs here.
#![forbid(unsafe_code)]
