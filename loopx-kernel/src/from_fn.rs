//! Seams from closures, as tower's `service_fn` makes a service: a host whose turn or check is
//! a function writes the function, not a type and a trait implementation.

use std::future::Future;
use std::sync::Arc;

use async_trait::async_trait;

use crate::actor::Actor;
use crate::ids::{IntoId, InvalidId, SourceId};
use crate::seams::{Executor, TurnError, TurnReport, TurnRequest, Validation, Validator};

/// An [`Executor`] that runs `turn` for each turn. It keeps no journal of its own, so a turn
/// found in flight after a crash is recovered as [`Recovery::Unknown`](crate::seams::Recovery):
/// re-run only when its todo is idempotent, repaired otherwise.
pub fn executor_fn<F, Fut>(turn: F) -> Arc<dyn Executor>
where
    F: Fn(TurnRequest) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<TurnReport, TurnError>> + Send + 'static,
{
    Arc::new(ExecutorFn(turn))
}

/// A [`Validator`] named `source` that judges each turn with `check`.
///
/// # Errors
/// [`InvalidId`] when `source` is not a valid source id.
pub fn validator_fn<F, Fut>(
    source: impl IntoId<SourceId>,
    check: F,
) -> Result<Arc<dyn Validator>, InvalidId>
where
    F: Fn(TurnRequest, TurnReport) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Validation, TurnError>> + Send + 'static,
{
    let actor = Actor::Validator(source.into_id()?);
    Ok(Arc::new(ValidatorFn { actor, check }))
}

struct ExecutorFn<F>(F);

#[async_trait]
impl<F, Fut> Executor for ExecutorFn<F>
where
    F: Fn(TurnRequest) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<TurnReport, TurnError>> + Send + 'static,
{
    async fn run(&self, turn: &TurnRequest) -> Result<TurnReport, TurnError> {
        (self.0)(turn.clone()).await
    }
}

struct ValidatorFn<F> {
    actor: Actor,
    check: F,
}

#[async_trait]
impl<F, Fut> Validator for ValidatorFn<F>
where
    F: Fn(TurnRequest, TurnReport) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Validation, TurnError>> + Send + 'static,
{
    fn actor(&self) -> Actor {
        self.actor.clone()
    }

    async fn validate(
        &self,
        turn: &TurnRequest,
        report: &TurnReport,
    ) -> Result<Validation, TurnError> {
        (self.check)(turn.clone(), report.clone()).await
    }
}
