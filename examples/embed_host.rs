//! The smallest complete embedding of loopx in a Rust agent host: open a store, build an engine
//! with the host's executor and validator, and obey the decisions until the goal is over.
//!
//! Run it with `cargo run -p loopx-examples --bin embed-host`.

use std::error::Error;
use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use loopx_kernel::engine::{Engine, Until};
use loopx_kernel::seams::{
    Clock, Executor, TurnError, TurnReport, TurnRequest, Validation, Validator,
};
use loopx_kernel::{
    Actor, Command, Continuation, Decision, GoalSpec, Limits, NewTodo, Policy, ReplanReason,
    Transition, Verdict, VerdictOutcome, submit,
};
use loopx_provider::clock::SystemClock;
use loopx_store::SqliteStore;

/// The host's own agent: here it writes a file per todo (a real host calls its model and tools).
struct Writer(PathBuf);

#[async_trait]
impl Executor for Writer {
    async fn run(&self, turn: &TurnRequest) -> Result<TurnReport, TurnError> {
        let path = self.0.join(turn.todo.as_str());
        std::fs::write(&path, &turn.title).map_err(|e| TurnError::Failed(e.to_string()))?;
        Ok(TurnReport {
            transition: Transition::Complete {
                continuation: Continuation::GoalStillActive,
            },
            observations: vec![],
            usage: loopx_kernel::Amounts::ZERO,
            summary: format!("wrote {}", path.display()),
        })
    }
}

/// An independent check of the executor's work: the file is there.
struct FileExists(PathBuf);

#[async_trait]
impl Validator for FileExists {
    fn actor(&self) -> Actor {
        Actor::Validator("file-check".try_into().expect("a valid id"))
    }

    async fn validate(&self, turn: &TurnRequest, _: &TurnReport) -> Result<Validation, TurnError> {
        let found = self.0.join(turn.todo.as_str()).exists();
        let outcome = if found {
            VerdictOutcome::Passed
        } else {
            VerdictOutcome::Failed
        };
        let verdict = Verdict {
            validator: self.actor(),
            outcome,
            summary: String::new(),
        };
        Ok(Validation {
            verdict,
            evidence: vec![],
        })
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn Error>> {
    let dir = tempfile::tempdir()?;
    let store = Arc::new(SqliteStore::open(dir.path().join("loopx.db"))?);

    // Someone (a person, a planner) creates the goal and its first todos.
    let spec = GoalSpec {
        id: "notes".try_into()?,
        objective: "write two notes".into(),
        owner: "olivia".try_into()?,
        criteria: vec![],
        agents: ["host-agent".try_into()?].into(),
        budget: Limits::UNLIMITED,
        policy: Policy::default(),
        grants: std::collections::BTreeMap::default(),
    };
    let (owner, now) = (Actor::Person("olivia".try_into()?), SystemClock.now());
    let goal = spec.id.clone();
    submit(
        &*store,
        &goal,
        &owner,
        now,
        &Command::CreateGoal { spec },
        &"create".try_into()?,
    )
    .await?;
    for name in ["first-note", "second-note"] {
        let todo = NewTodo::advance(name.try_into()?, format!("the {name}"));
        submit(
            &*store,
            &goal,
            &owner,
            now,
            &Command::AddTodo { todo },
            &format!("add-{name}").try_into()?,
        )
        .await?;
    }

    // The host: one engine for its agent, run until the host must act.
    let engine = Engine::builder(
        "host-agent".try_into()?,
        store.clone(),
        Arc::new(SystemClock),
        Arc::new(Writer(dir.path().to_owned())),
        Arc::new(FileExists(dir.path().to_owned())),
    )
    .build();
    let last = engine
        .run(&goal, Until::NeedsHost, |step| {
            println!("{}", step.decision.kind());
        })
        .await?;

    // `replan` and `repair` are the host's to act on: here all work is done and nobody has
    // said so yet, so the agent declares closure and asks again.
    if let Decision::Replan {
        reason: ReplanReason::ClosureIntentMissing,
    } = last.decision
    {
        let close = Command::DeclareClosure {
            reason: "both notes are written".into(),
        };
        let agent = Actor::Agent(engine.agent().clone());
        submit(
            &*store,
            &goal,
            &agent,
            SystemClock.now(),
            &close,
            &"close".try_into()?,
        )
        .await?;
    }
    match engine.decision(&goal).await? {
        Decision::Terminal { outcome } => println!("terminal ({outcome:?})"),
        other => return Err(format!("expected the goal to be over, got {other:?}").into()),
    }
    Ok(())
}
