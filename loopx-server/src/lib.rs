//! loopx as a service: the parts of the control plane that face the outside world over a
//! transport — agent runtimes' MCP tools, GitHub's deliveries, the schedules that poll watches
//! when they fall due, and the board — written over the kernel's seams so that an embedding host
//! mounts them in its own server and `loopx serve` runs them as one process.
//!
//! Nothing here decides: every change still goes through the kernel's one write path
//! (`GoalHandle::submit`), signed by the actor it is made for.

pub mod board;
pub mod bounds;
pub mod capabilities;
pub mod dead_letters;
pub mod gates;
pub mod github;
mod judging;
pub mod mcp;
pub mod notices;
pub mod schedule;
pub mod service;
pub mod site;
pub mod telemetry;
pub mod views;

pub use bounds::{Bounds, serve_with};
pub use service::{Service, serve, shutdown_signal};
pub use site::Site;

/// The crate README's example, compiled as a doctest so it cannot rot.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
