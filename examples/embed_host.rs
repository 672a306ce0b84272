//! The smallest complete embedding of loopx in a Rust agent host: open a store, build an engine
//! with the host's executor and validator, and obey the decisions until the goal is over.
//!
//! Run it with `cargo run -p loopx-examples --bin embed-host`.

use std::error::Error;
use std::path::PathBuf;
use std::sync::Arc;

use loopx_kernel::ids::path_component;
use loopx_kernel::prelude::*;
use loopx_kernel::{Continuation, ReplanReason, Transition};
use loopx_provider::clock::SystemClock;
use loopx_store::SqliteStore;

/// The host's own agent: here it writes a file per todo (a real host calls its model and tools).
struct Writer(PathBuf);

#[async_trait]
impl Executor for Writer {
    async fn run(&self, turn: &TurnRequest) -> Result<TurnReport, TurnError> {
        // A todo id may hold `/` and `..`: one encoded name, never a raw join.
        let path = self.0.join(path_component(turn.todo.as_str()));
        std::fs::write(&path, &turn.title).map_err(|e| TurnError::Failed(e.to_string()))?;
        // More work may follow in this goal: the completion says so, and closure stays open.
        let done = Transition::Complete {
            continuation: Continuation::GoalStillActive,
        };
        Ok(TurnReport::new(done, format!("wrote {}", path.display())))
    }
}

/// An independent check of the executor's work: the file is there.
struct FileExists(PathBuf, Actor);

#[async_trait]
impl Validator for FileExists {
    fn actor(&self) -> Actor {
        self.1.clone()
    }

    async fn validate(&self, turn: &TurnRequest, _: &TurnReport) -> Result<Validation, TurnError> {
        if self.0.join(path_component(turn.todo.as_str())).exists() {
            Ok(Validation::passed("the note is there"))
        } else {
            Ok(Validation::failed("no note was written"))
        }
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn Error>> {
    let dir = tempfile::tempdir()?;
    let store = Arc::new(SqliteStore::create(dir.path().join("loopx.db"))?);
    let clock = Arc::new(SystemClock);

    // Someone (a person, a planner) creates the goal and its first todos.
    let spec = GoalSpec::builder("notes", "write two notes", "olivia")
        .agent("host-agent")
        .declared_identity()
        .build()?;
    let goal = store.goal(&spec.id);
    goal.create(&spec, clock.now()).await?;
    let owner = Actor::Person(spec.owner.clone());
    for name in ["first-note", "second-note"] {
        let todo = NewTodo::advance(name.parse()?, format!("the {name}"));
        goal.submit(&owner, clock.now(), &Command::AddTodo { todo })
            .await?;
    }

    // The host: one engine for its agent, run until the host must act.
    let checker = Actor::Validator("file-check".parse()?);
    let engine = Engine::builder(
        "host-agent".parse()?,
        store.clone(),
        clock.clone(),
        Arc::new(Writer(dir.path().to_owned())),
        Arc::new(FileExists(dir.path().to_owned(), checker)),
    )
    .build();
    let last = engine
        .run(goal.id(), Until::NeedsHost, |step| {
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
        goal.submit(&agent, clock.now(), &close).await?;
    }
    match engine.decision(goal.id()).await? {
        Decision::Terminal { outcome } => println!("terminal ({outcome:?})"),
        other => return Err(format!("expected the goal to be over, got {other:?}").into()),
    }
    Ok(())
}
