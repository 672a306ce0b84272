//! Dead letters: the provider facts a goal refused to record — from a delivery or a poll —
//! which the store keeps ([`Store::keep_dead_letter`]) until they are re-applied or dismissed.
//!
//! Re-applying takes the path the fact first took: recorded as its provider (signed with its
//! key when the keyring holds one) under its first operation id, the evidence the goal's
//! capability finds in it recorded, the goal judged. So a fact that committed meanwhile
//! replays and leaves the list, one refused again stays kept (its refusal counted, its reason
//! brought up to date), and one recorded leaves the list.

use std::sync::Arc;

use loopx_kernel::Keyring;
use loopx_kernel::engine::Submission;
use loopx_kernel::prelude::*;
use loopx_kernel::seams::{DeadLetter, StoreError};

use crate::capabilities::Registry;
use crate::github::GoalOutcome;
use crate::judging::Judging;

/// Re-applies dead letters on a store.
#[derive(Clone)]
pub struct Reapplier {
    judging: Judging,
}

impl std::fmt::Debug for Reapplier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reapplier").finish_non_exhaustive()
    }
}

impl Reapplier {
    /// Re-applies on `store` at `clock`'s time, judging with the shipped capabilities
    /// ([`Registry::shipped`]), every command unsigned until a keyring is given.
    pub fn new(store: Arc<dyn Store>, clock: Arc<dyn Clock>) -> Self {
        Reapplier {
            judging: Judging::new(store, clock),
        }
    }

    /// The same, judging with `registry`'s capabilities.
    #[must_use]
    pub fn registry(mut self, registry: Registry) -> Self {
        self.judging.registry = Arc::new(registry);
        self
    }

    /// The same, signing as the actors `keyring` holds keys for (the letter's provider, the
    /// capabilities).
    #[must_use]
    pub fn keyring(mut self, keyring: Keyring) -> Self {
        self.judging.keyring = Arc::new(keyring);
        self
    }

    /// Submits `letter` again as it was first submitted. Recorded (or replayed: it had
    /// committed meanwhile), the letter is dropped; refused again, it stays kept with the new
    /// reason and one more refusal, and the outcome says why.
    ///
    /// # Errors
    /// The store's failure; the letter stays kept.
    pub async fn reapply(&self, letter: &DeadLetter) -> Result<GoalOutcome, StoreError> {
        let record = Submission {
            actor: letter.actor.clone(),
            command: letter.command.clone(),
            operation: letter.operation.clone(),
        };
        let outcome = self
            .judging
            .record_and_judge(&letter.goal, vec![record], &letter.origin)
            .await?;
        if outcome.refused.is_none() {
            self.judging
                .store
                .drop_dead_letter(&letter.goal, &letter.operation)
                .await?;
        }
        Ok(outcome)
    }
}
