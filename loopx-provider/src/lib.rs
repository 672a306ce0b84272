//! # loopx-provider
//!
//! Providers for loopx: each performs one bounded external call and returns typed,
//! fingerprinted, revision-bound observations; none runs a state machine of its own.
//!
//! - [`process`]: commands from argument vectors, with an environment allow-list, a timeout
//!   that kills the whole process group, and bounded, digested output capture;
//!   [`validator::CommandValidator`] turns a command's verdict into evidence bound to the git
//!   revision it ran at ([`validator::AllOf`] combines several); [`executor::CommandExecutor`]
//!   runs a command as one turn and journals it so a restarted engine can recover the turn.
//! - [`git`]: head, branch, dirty state, worktree identity and commit metadata from
//!   `git -C <dir>` in machine formats; [`git::GitProvider`] observes one working tree.
//! - [`github`]: typed GitHub facts shared by [`github::webhook`] (verified deliveries) and
//!   [`github::rest`] (pull requests, latest reviews, a CI roll-up bound to the exact head sha,
//!   conditional requests, typed rate limits, fenced idempotent effects with readback).
//! - [`metrics`]: experiment metrics bound to the run's revision.
//! - [`layers`]: tower-style wrappers (timeout, retry for reads, fingerprint cache,
//!   record/replay), each an [`Effector`](loopx_kernel::seams::Effector) exactly when the
//!   provider it wraps is one, the ones that wait waiting on a [`Clock`](loopx_kernel::seams::Clock).
//! - [`clock::SystemClock`]: real time for hosts (the kernel never reads a clock).
//! - [`fact`]: how every provider builds an observation and its fingerprint.
//! - [`files`]: the one careful writer for files in places others control: never through a
//!   link, never half, with a chosen mode.
//! - [`keys`]: ed25519 signing keys generated from the OS's random source, private key files
//!   (mode `0600`), a key directory by actor, and an actor's key found from it or `LOOPX_KEY`.
#![forbid(unsafe_code)]

pub mod clock;
pub mod executor;
pub mod fact;
pub mod files;
pub mod git;
pub mod github;
pub mod keys;
pub mod layers;
pub mod metrics;
pub mod process;
pub mod validator;
