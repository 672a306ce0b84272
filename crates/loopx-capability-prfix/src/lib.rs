//! # loopx-capability-prfix
//!
//! Issue and pull-request fixing as pure judgement over the kernel: routes, PR lifecycle precedence, exact-head CI evidence.
//!
//! This crate is reserved in the workspace so the layout matches the architecture; its
//! implementation lands with its own issue. See the crate README for what belongs here.
#![forbid(unsafe_code)]
