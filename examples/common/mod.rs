//! What the stories share: a goal on the embedded default store (SQLite, one file in a
//! temporary directory), a clock, a runtime, and a timeline that prints what each engine step
//! did and what the kernel decided after it.
//!
//! ```
//! use loopx_examples::{Result, Story};
//! # fn spec() -> Result<loopx_kernel::GoalSpec> {
//! #     Ok(loopx_kernel::GoalSpec {
//! #         id: "demo".try_into()?,
//! #         objective: "a demo".into(),
//! #         owner: "olivia".try_into()?,
//! #         criteria: vec![],
//! #         agents: ["alice".try_into()?].into(),
//! #         budget: loopx_kernel::Limits::UNLIMITED,
//! #         policy: loopx_kernel::Policy::default(),
//! #         grants: std::collections::BTreeMap::default(),
//! #         identity: loopx_kernel::Identity::Declared,
//! #         keys: vec![],
//! #         validators: std::collections::BTreeMap::default(),
//! #         capability: None,
//! #     })
//! # }
//! # fn main() -> Result<()> {
//! let story = Story::manual(spec()?, "2026-11-29T10:00")?;
//! story.say("the goal is created; nothing has happened yet");
//! story.at("10:05")?;
//! # Ok(())
//! # }
//! ```

pub mod github;

use loopx_kernel::submit;
use std::error::Error;
use std::future::Future;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;
use loopx_kernel::ManualClock;
use loopx_kernel::engine::{Engine, StepReport, TurnOutcome, Until};
use loopx_kernel::seams::{
    Clock, Store, TurnError, TurnReport, TurnRequest, Validation, Validator,
};
use loopx_kernel::{
    Actor, AgentId, Command, CriterionStatus, Decision, GateId, GoalId, GoalSpec, GoalState,
    NewEvidence, Observation, OperationId, Question, Refusal, SourceId, Timestamp, VerdictOutcome,
    decide,
};
use loopx_store::{SqliteOptions, SqliteStore, StoreClock};
use tokio::runtime::{Builder, Runtime};

/// Every story's result: any error, with a message that says what went wrong.
pub type Result<T> = std::result::Result<T, Box<dyn Error>>;

/// One goal on a SQLite store of its own, with the clock the story runs on and a timeline.
pub struct Story {
    dir: tempfile::TempDir,
    store: Arc<SqliteStore>,
    runtime: Runtime,
    clock: Arc<dyn Clock>,
    manual: Option<Arc<ManualClock>>,
    day: String,
    goal: GoalId,
    operations: AtomicU64,
}

impl Story {
    /// A story on a clock that moves only when told to ([`Story::at`]), starting at `start`
    /// (`YYYY-MM-DDTHH:MM`, UTC). The goal is created by its owner.
    ///
    /// # Errors
    /// An invalid time, a store that cannot be opened or a goal the kernel refuses.
    pub fn manual(spec: GoalSpec, start: &str) -> Result<Story> {
        let clock = Arc::new(ManualClock::new(minute(start)?));
        let day = start.get(..10).ok_or("a start time is YYYY-MM-DDTHH:MM")?;
        Story::open(spec, clock.clone(), Some(clock), day)
    }

    /// A story on real time (the system clock). The goal is created by its owner.
    ///
    /// # Errors
    /// A store that cannot be opened or a goal the kernel refuses.
    pub fn real_time(spec: GoalSpec) -> Result<Story> {
        Story::open(spec, Arc::new(loopx_provider::clock::SystemClock), None, "")
    }

    fn open(
        spec: GoalSpec,
        clock: Arc<dyn Clock>,
        manual: Option<Arc<ManualClock>>,
        day: &str,
    ) -> Result<Story> {
        let dir = tempfile::tempdir()?;
        // A story on a manual clock moves time by hand: its store is created with a test
        // clock, which follows the times it is given. On real time the store's clock bounds.
        let store_clock = if manual.is_some() {
            StoreClock::Test
        } else {
            StoreClock::System
        };
        let options = SqliteOptions::default().clock(store_clock);
        let store = Arc::new(SqliteStore::create_with(
            dir.path().join("loopx.db"),
            options,
        )?);
        let runtime = Builder::new_current_thread().enable_all().build()?;
        let opened = Story {
            dir,
            store,
            runtime,
            clock,
            manual,
            day: day.to_owned(),
            goal: spec.id.clone(),
            operations: AtomicU64::new(0),
        };
        let owner = Actor::Person(spec.owner.clone());
        opened.submit(&owner, &Command::CreateGoal { spec })?;
        Ok(opened)
    }

    /// The store, as the engine takes it.
    pub fn store(&self) -> Arc<dyn Store> {
        self.store.clone()
    }

    /// The clock, as the engine takes it.
    pub fn clock(&self) -> Arc<dyn Clock> {
        self.clock.clone()
    }

    /// The goal.
    pub fn goal(&self) -> &GoalId {
        &self.goal
    }

    /// The story's temporary directory (removed with the story), for files it writes.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Runs a future on the story's runtime.
    pub fn block_on<F: Future>(&self, future: F) -> F::Output {
        self.runtime.block_on(future)
    }

    /// Moves a manual clock to `hh:mm` of the story's first day.
    ///
    /// # Errors
    /// On real time, or for an invalid time.
    pub fn at(&self, hhmm: &str) -> Result<()> {
        let clock = self.manual.as_ref().ok_or("this story runs on real time")?;
        clock.set(minute(&format!("{}T{hhmm}", self.day))?);
        Ok(())
    }

    /// Prints a line of the timeline.
    pub fn say(&self, text: &str) {
        println!("{}  {text}", hhmm(self.clock.now()));
    }

    /// Prints a detail under the last line.
    pub fn note(&self, text: &str) {
        println!("          {text}");
    }

    /// Commits `command` as `actor` now, and returns the goal as committed.
    ///
    /// # Errors
    /// The kernel's refusal or a store failure.
    pub fn submit(&self, actor: &Actor, command: &Command) -> Result<GoalState> {
        let n = self.operations.fetch_add(1, Ordering::Relaxed);
        let operation = OperationId::new(format!("story-{n}"))?;
        let done = self.block_on(submit(
            &*self.store,
            &self.goal,
            actor,
            self.clock.now(),
            command,
            &operation,
        ))?;
        Ok(done.state)
    }

    /// The goal as stored.
    ///
    /// # Errors
    /// A store failure, or no such goal.
    pub fn state(&self) -> Result<GoalState> {
        let state = self.block_on(self.store.load(&self.goal))?;
        Ok(state.ok_or("the goal is in the store")?)
    }

    /// Runs `engine` until its agent has nothing to do now (`Until::Idle`), printing every
    /// step; returns the last decision.
    ///
    /// # Errors
    /// An engine failure.
    pub fn run(&self, engine: &Engine) -> Result<Decision> {
        let agent = engine.agent().clone();
        let clock = self.clock.clone();
        let last = self.block_on(engine.run(&self.goal, Until::Idle, |report| {
            print_report(&agent, clock.now(), report);
        }))?;
        Ok(last.decision)
    }

    /// Takes one engine step, printing it; returns the decision after it.
    ///
    /// # Errors
    /// An engine failure.
    pub fn step(&self, engine: &Engine) -> Result<Decision> {
        let report = self.block_on(engine.step(&self.goal))?;
        print_report(engine.agent(), self.clock.now(), &report);
        Ok(report.decision)
    }

    /// Prints and returns the kernel's decision for `agent` now, changing nothing.
    ///
    /// # Errors
    /// A store failure.
    pub fn decide(&self, agent: &AgentId) -> Result<Decision> {
        let decision = decide(&self.state()?, agent, self.clock.now());
        self.say(&format!("-> {agent}: {}", describe(&decision)));
        Ok(decision)
    }

    /// Prints where every acceptance criterion stands.
    ///
    /// # Errors
    /// A store failure.
    pub fn criteria(&self) -> Result<Vec<CriterionStatus>> {
        let state = self.state()?;
        let mut all = Vec::new();
        for (id, status) in state.criteria_status(self.clock.now()) {
            let shown = match &status {
                CriterionStatus::Met { evidence } => format!("met by {evidence}"),
                CriterionStatus::Stale { evidence, .. } => format!("stale ({evidence})"),
                CriterionStatus::Failing { evidence } => format!("failing ({evidence})"),
                CriterionStatus::NoEvidence => "no evidence".into(),
                CriterionStatus::UnregisteredValidator {
                    evidence,
                    produced_by,
                } => format!("ignored ({evidence} by {produced_by}, not registered)"),
            };
            self.note(&format!("criterion {id}: {shown}"));
            all.push(status);
        }
        Ok(all)
    }
}

/// Fails the story with `message` unless `holds`.
///
/// # Errors
/// `message`, when the story did not go as told.
pub fn ensure(holds: bool, message: impl Into<String>) -> Result<()> {
    if holds {
        Ok(())
    } else {
        Err(format!("the story went wrong: {}", message.into()).into())
    }
}

/// The goal as it will stand once `observations` are recorded: what a validator judges a
/// turn's report against before the settlement commits them.
///
/// # Errors
/// The kernel's refusal of one of the observations.
pub fn with_observations(
    state: &GoalState,
    observations: &[Observation],
    actor: &Actor,
    now: Timestamp,
) -> std::result::Result<GoalState, Refusal> {
    let mut state = state.clone();
    for observation in observations {
        let command = Command::RecordObservation {
            observation: observation.clone(),
        };
        state.handle(actor, now, &command)?;
    }
    Ok(state)
}

/// One turn as a [`StoryValidator`] sees it.
pub struct Judged<'a> {
    /// The turn.
    pub turn: &'a TurnRequest,
    /// What the executor reported.
    pub report: &'a TurnReport,
    /// The validator's time.
    pub now: Timestamp,
    stored: GoalState,
    actor: Actor,
}

impl Judged<'_> {
    /// The goal as it will stand once the report's observations are recorded: what a
    /// validator judges a turn's report against before the settlement commits them.
    ///
    /// # Errors
    /// The kernel's refusal of one of the observations.
    pub fn goal_after(&self) -> std::result::Result<GoalState, Refusal> {
        with_observations(
            &self.stored,
            &self.report.observations,
            &self.actor,
            self.now,
        )
    }
}

/// What a [`StoryValidator`]'s judge decides about one turn.
pub struct Judgement {
    /// Whether the turn passed.
    pub outcome: VerdictOutcome,
    /// Why, in words.
    pub summary: String,
    /// Evidence recorded with the settlement.
    pub evidence: Vec<NewEvidence>,
}

impl Judgement {
    /// A pass, with no evidence.
    pub fn passed(summary: impl Into<String>) -> Self {
        Judgement {
            outcome: VerdictOutcome::Passed,
            summary: summary.into(),
            evidence: Vec::new(),
        }
    }

    /// A failure, with no evidence.
    pub fn failed(summary: impl Into<String>) -> Self {
        Judgement {
            outcome: VerdictOutcome::Failed,
            summary: summary.into(),
            evidence: Vec::new(),
        }
    }
}

/// The function a [`StoryValidator`] judges each turn with; an error fails the turn.
pub type Judge = Box<dyn Fn(&Judged<'_>) -> std::result::Result<Judgement, String> + Send + Sync>;

/// A story's validator: judges every turn with its [`Judge`], given the turn, its report and
/// the goal as stored when the turn is validated, and records the evidence it returns with
/// the settlement. The verdict is always signed by this validator.
pub struct StoryValidator {
    source: SourceId,
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    judge: Judge,
}

impl StoryValidator {
    /// A validator named `source` over `story`'s store and clock.
    pub fn new(
        source: SourceId,
        story: &Story,
        judge: impl Fn(&Judged<'_>) -> std::result::Result<Judgement, String> + Send + Sync + 'static,
    ) -> Self {
        StoryValidator::over(source, story.store(), story.clock(), judge)
    }

    /// A validator named `source` over `store` and `clock`, for a process that opened the
    /// story's store itself.
    pub fn over(
        source: SourceId,
        store: Arc<dyn Store>,
        clock: Arc<dyn Clock>,
        judge: impl Fn(&Judged<'_>) -> std::result::Result<Judgement, String> + Send + Sync + 'static,
    ) -> Self {
        StoryValidator {
            source,
            store,
            clock,
            judge: Box::new(judge),
        }
    }
}

#[async_trait]
impl Validator for StoryValidator {
    fn actor(&self) -> Actor {
        Actor::Validator(self.source.clone())
    }

    async fn validate(
        &self,
        turn: &TurnRequest,
        report: &TurnReport,
    ) -> std::result::Result<Validation, TurnError> {
        let failed = |e: &dyn std::fmt::Display| TurnError::Failed(e.to_string());
        let stored = self.store.load(&turn.goal).await.map_err(|e| failed(&e))?;
        let judged = Judged {
            turn,
            report,
            now: self.clock.now(),
            stored: stored.ok_or_else(|| failed(&"the goal is gone"))?,
            actor: self.actor(),
        };
        let judgement = (self.judge)(&judged).map_err(TurnError::Failed)?;
        Ok(Validation::new(judgement.outcome, judgement.summary).with_evidence(judgement.evidence))
    }
}

/// A decision in one line.
pub fn describe(decision: &Decision) -> String {
    match decision {
        Decision::Continue(a) if a.pending_gates.is_empty() => {
            format!("continue with `{}`", a.todo)
        }
        Decision::Continue(a) => {
            let gates: Vec<&str> = a.pending_gates.iter().map(GateId::as_str).collect();
            format!(
                "continue with `{}` while `{}` waits",
                a.todo,
                gates.join("`, `")
            )
        }
        Decision::Wait { until: Some(t), .. } => format!("wait until {t}"),
        Decision::Wait { until: None, .. } => "wait for an event".into(),
        Decision::Ask { questions, until } => {
            let asked: Vec<String> = questions.iter().map(question).collect();
            let wake = until.map_or_else(String::new, |t| format!(", wake at {t}"));
            format!("ask {}{wake}", asked.join("; "))
        }
        Decision::Replan { reason } => format!("replan: {}", json(reason)),
        Decision::Repair { issue } => format!("repair: {}", json(issue)),
        Decision::Terminal { outcome } => format!("terminal ({outcome:?})").to_lowercase(),
    }
}

fn question(question: &Question) -> String {
    match question {
        Question::Gate {
            question, owner, ..
        } => format!("{owner}: \"{question}\""),
        Question::Budget { dimension, .. } => format!("the owner for more {dimension}"),
        Question::Overrun { todo, .. } => {
            format!("the owner about a turn on `{todo}` that used more than it reserved")
        }
    }
}

fn json(value: &impl serde::Serialize) -> String {
    serde_json::to_string(value).unwrap_or_default()
}

fn minute(text: &str) -> Result<Timestamp> {
    Ok(Timestamp::parse(&format!("{text}:00Z"))?)
}

fn hhmm(now: Timestamp) -> String {
    now.to_string().get(11..19).unwrap_or_default().to_owned()
}

/// Prints what one engine step of `agent` did at `now`: its turn, the capabilities'
/// proposals and the decision after it.
pub fn print_report(agent: &AgentId, now: Timestamp, report: &StepReport) {
    let indent = "          ";
    for error in &report.provider_errors {
        println!("{indent}provider error: {error}");
    }
    match &report.turn {
        Some(TurnOutcome::Settled {
            todo,
            verdict,
            summary,
            ..
        }) => println!("{indent}{agent}'s turn on `{todo}`: {summary} (verdict: {verdict:?})"),
        Some(TurnOutcome::NotStarted { todo, refusal }) => {
            println!("{indent}no turn on `{todo}`: {}: {refusal}", refusal.code());
        }
        Some(TurnOutcome::LeaseLost { todo, refusal, .. }) => {
            println!(
                "{indent}lease on `{todo}` lost: {}: {refusal}",
                refusal.code()
            );
        }
        Some(TurnOutcome::Unknown { todo, turn }) => {
            println!("{indent}turn `{turn}` on `{todo}`: outcome unknown");
        }
        None => {}
    }
    for proposal in &report.proposals {
        let refused = proposal
            .refused
            .as_ref()
            .map_or_else(String::new, |code| format!(" [refused: {code}]"));
        println!(
            "{indent}{} judged: {}{refused} ({})",
            proposal.capability, proposal.command, proposal.rationale
        );
    }
    println!("{}  -> {agent}: {}", hhmm(now), describe(&report.decision));
}
