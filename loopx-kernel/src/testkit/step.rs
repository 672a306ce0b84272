//! [`Step`]: one step of a generated run, the vocabulary the generators produce and the
//! model and the machine consume (its own module, so neither depends on the other for it).

use crate::actor::Actor;
use crate::command::Command;
use crate::time::Duration;

/// One step of a generated run.
#[derive(Debug, Clone)]
pub enum Step {
    /// Time passes; nothing is issued. Leases expire, monitors come due, deadlines pass.
    Advance(Duration),
    /// An actor issues a command at the model's current time.
    Issue {
        /// Who issues it.
        actor: Actor,
        /// What.
        command: Box<Command>,
    },
}
