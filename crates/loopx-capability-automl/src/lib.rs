//! # loopx-capability-automl
//!
//! ML experiments as pure judgement over the kernel: metric contracts, matched baselines, guardrails, promotion gates.
//!
//! This crate is reserved in the workspace so the layout matches the architecture; its
//! implementation lands with its own issue. See the crate README for what belongs here.
#![forbid(unsafe_code)]
