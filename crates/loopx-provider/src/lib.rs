//! # loopx-provider
//!
//! Providers: process runner, git, GitHub REST and webhooks, experiment metrics — each a bounded external call returning typed observations.
//!
//! This crate is reserved in the workspace so the layout matches the architecture; its
//! implementation lands with its own issue. See the crate README for what belongs here.
#![forbid(unsafe_code)]
