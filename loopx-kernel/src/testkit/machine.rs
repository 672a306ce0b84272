//! The state machine: the model drives generation, the system under test handles the same
//! commands, and after every step the two are compared and every invariant is checked.

use std::borrow::Cow;
use std::fmt::Write as _;
use std::marker::PhantomData;

use proptest::prelude::*;
use proptest::test_runner::Config;
use proptest_state_machine::{ReferenceStateMachine, StateMachineTest};

use crate::actor::Actor;
use crate::command::Command;
use crate::event::RecordedEvent;
use crate::execute::{execute, stamp};
use crate::goal::GoalSpec;
use crate::refusal::Refusal;
use crate::state::GoalState;
use crate::time::Timestamp;

use super::checks::{self, Finding};
use super::model::{Expect, LifecycleModel};
use super::roster;
use super::step::Step;
use super::strategy::{spec_strategy, step_strategy};

/// A system under test: one goal that handles commands and reports its state.
///
/// Implement it over a store (append the events with compare-and-set, then reload) or over a
/// host's command path to run the kernel's lifecycle properties against it. The contract is
/// the kernel's: an accepted command returns exactly the events it recorded, stamped with the
/// next revisions; a refused command returns the [`Refusal`] and records nothing.
pub trait LifecycleSut: Sized {
    /// Creates the goal from `spec`, issued by `actor` at `now`, returning the system and the
    /// events recorded (the `goal_created` event first).
    ///
    /// # Errors
    /// The kernel's refusal when the goal may not be created.
    fn create(
        actor: &Actor,
        now: Timestamp,
        spec: &GoalSpec,
    ) -> Result<(Self, Vec<RecordedEvent>), Refusal>;

    /// Handles one command issued by `actor` at `now`.
    ///
    /// # Errors
    /// The refusal when the command is not legal now; nothing may change then.
    fn handle(
        &mut self,
        actor: &Actor,
        now: Timestamp,
        command: &Command,
    ) -> Result<Vec<RecordedEvent>, Refusal>;

    /// The goal's current state, as a reader of the system would load it.
    fn state(&self) -> Cow<'_, GoalState>;
}

impl LifecycleSut for GoalState {
    fn create(
        actor: &Actor,
        now: Timestamp,
        spec: &GoalSpec,
    ) -> Result<(Self, Vec<RecordedEvent>), Refusal> {
        let events = execute(
            None,
            actor,
            now,
            &Command::CreateGoal { spec: spec.clone() },
        )?;
        let recorded = stamp(0, actor, now, events);
        match GoalState::replay(&recorded) {
            Ok(state) => Ok((state, recorded)),
            Err(error) => panic!("kernel bug: a created goal does not fold: {error}"),
        }
    }

    fn handle(
        &mut self,
        actor: &Actor,
        now: Timestamp,
        command: &Command,
    ) -> Result<Vec<RecordedEvent>, Refusal> {
        GoalState::handle(self, actor, now, command)
    }

    fn state(&self) -> Cow<'_, GoalState> {
        Cow::Borrowed(self)
    }
}

/// The system under test together with every event it recorded, in order.
#[derive(Debug)]
pub struct Harness<S> {
    /// The system.
    pub sut: S,
    /// Its complete event log, from `goal_created` on.
    pub log: Vec<RecordedEvent>,
    /// Steps applied so far.
    pub steps: usize,
}

/// The reference state machine over [`LifecycleModel`]: initial goals from [`spec_strategy`],
/// transitions from [`step_strategy`]. Every transition is accepted as a precondition: the model
/// predicts a refusal where a shrunk sequence makes a step illegal.
#[derive(Debug, Clone, Copy)]
pub struct LifecycleMachine;

impl ReferenceStateMachine for LifecycleMachine {
    type State = LifecycleModel;
    type Transition = Step;

    fn init_state() -> BoxedStrategy<LifecycleModel> {
        // A third of the runs are driven hard towards progress, to reach long lifecycles
        // (repeated monitor polls, handoffs, acceptance); the rest mix commands freely.
        (
            spec_strategy(),
            prop_oneof![2 => Just(20_u32), 1 => Just(150_u32)],
        )
            .prop_map(|(spec, drive)| {
                let mut model = LifecycleModel::new(spec, roster::start());
                model.drive = drive;
                model
            })
            .boxed()
    }

    fn transitions(state: &LifecycleModel) -> BoxedStrategy<Step> {
        step_strategy(state)
    }

    fn apply(mut state: LifecycleModel, transition: &Step) -> LifecycleModel {
        state.apply(transition);
        state
    }
}

/// The refusal code a model rule must come with, for the rules that fence sessions: a session
/// racing another of its agent on one turn must be refused for the reason the model names.
fn pinned_code(rule: &str) -> Option<&'static str> {
    match rule {
        "stale epoch" => Some("stale_lease_epoch"),
        "no live lease" => Some("no_live_lease"),
        super::model::EXPIRED_TURN => Some("outcome_unknown"),
        _ => None,
    }
}

/// The lifecycle property test for a system `S`: every step's outcome must match the model's
/// prediction, and after every step the state must match the model and pass [`checks`]. At the
/// end, every prefix of the log must fold into a sound state.
///
/// Any mismatch panics with the findings, so proptest shrinks the run to a minimal one.
#[derive(Debug)]
pub struct LifecycleTest<S>(PhantomData<S>);

fn fail(what: &str, findings: &[Finding]) -> ! {
    let mut text = format!("{} finding(s) {what}:", findings.len());
    for finding in findings {
        let _ = write!(text, "\n  {finding}");
    }
    panic!("{text}");
}

impl<S: LifecycleSut> StateMachineTest for LifecycleTest<S> {
    type SystemUnderTest = Harness<S>;
    type Reference = LifecycleMachine;

    fn init_test(model: &LifecycleModel) -> Harness<S> {
        let owner = Actor::Person(model.spec().owner.clone());
        match S::create(&owner, model.created_at(), model.spec()) {
            Ok((sut, log)) => Harness { sut, log, steps: 0 },
            Err(refusal) => panic!("the generated goal was refused: {refusal}"),
        }
    }

    fn apply(mut harness: Harness<S>, model: &LifecycleModel, step: Step) -> Harness<S> {
        harness.steps += 1;
        let Step::Issue { actor, command } = step else {
            return harness;
        };
        let now = model.now();
        let before = harness.sut.state().into_owned();
        let result = harness.sut.handle(&actor, now, &command);
        let after = harness.sut.state().into_owned();
        let names: Result<Vec<&str>, &Refusal> = result
            .as_ref()
            .map(|events| events.iter().map(|e| e.event.name()).collect());
        let agrees = match (model.expect(), &names) {
            (Expect::Accepted(expected), Ok(names)) => expected == names,
            // Where the model pins the rule to a code, or names it by the kernel's own refusal
            // code (a verdict's signature), the kernel must refuse with exactly that code.
            (Expect::Refused(rule), Err(refusal)) => match pinned_code(rule) {
                Some(code) => code == refusal.code(),
                None => !Refusal::CODES.contains(rule) || refusal.code() == *rule,
            },
            _ => false,
        };
        assert!(
            agrees,
            "step {}: `{}` by {actor:?} at {now}: the model expects {:?}, the system gave {names:?}\ncommand: {command:?}",
            harness.steps,
            command.name(),
            model.expect(),
        );
        let findings = checks::check_step(&before, &after, &actor, now, &command, &result);
        if !findings.is_empty() {
            fail(
                &format!(
                    "in step {} (`{}` by {actor:?})",
                    harness.steps,
                    command.name()
                ),
                &findings,
            );
        }
        if let Ok(events) = result {
            harness.log.extend(events);
        }
        harness
    }

    fn check_invariants(harness: &Harness<S>, model: &LifecycleModel) {
        let state = harness.sut.state();
        let mut findings = model.diff(&state);
        findings.extend(checks::check_state(
            &state,
            &harness.log,
            model.now(),
            &roster::all_agents(),
        ));
        findings.extend(checks::check_budget(&state));
        findings.extend(checks::check_admissible(
            &state,
            model.now(),
            &roster::all_agents(),
        ));
        findings.extend(checks::check_retirement(
            &state,
            &harness.log,
            model.now(),
            &roster::all_agents(),
        ));
        if !findings.is_empty() {
            fail(
                &format!("after step {} at {}", harness.steps, model.now()),
                &findings,
            );
        }
    }

    fn teardown(harness: Harness<S>, _model: LifecycleModel) {
        let findings = checks::check_prefixes(&harness.log);
        if !findings.is_empty() {
            fail("folding prefixes of the log", &findings);
        }
    }
}

/// A proptest configuration running `default_cases` cases, or as many as the `PROPTEST_CASES`
/// environment variable says.
pub fn config(default_cases: u32) -> Config {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default_cases);
    Config {
        cases,
        ..Config::default()
    }
}
