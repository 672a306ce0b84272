//! A learning-rate sweep run as real processes. The agent plans four training runs; the engine
//! hands each experiment todo to the cluster executor, which launches the toy trainer through
//! the process runner (an argument vector, a timeout, an empty environment) as a journalled
//! `CommandExecutor` turn, then reports how the job ended and what the metrics provider read
//! from the metrics file it wrote. The automl capability classifies every run against the
//! baseline and proposes what follows:
//!
//! the baseline → a candidate that beats it → its holdout run (with the baseline's), whose
//! validator records the holdout evidence → an out-of-memory run, retried and never counted as
//! a regression → a regressed run and the replan it forces → the promotion gate, waiting on a
//! person.
//!
//! Run it with `cargo run -p loopx-examples --bin automl`.

#[path = "toy_trainer.rs"]
#[allow(dead_code)] // its `main` is the toy-trainer binary's
mod toy_trainer;

use loopx_kernel::ids::sha256_hex;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use async_trait::async_trait;
use loopx_capability_automl::{
    AutoMl, Direction, ExperimentContract, Guardrails, holdout_evidence,
};
use loopx_examples::{Judged, Judgement, Result, Story, StoryValidator, ensure};
use loopx_kernel::engine::Engine;
use loopx_kernel::facts::metrics::{self, ExitReason, RunState, RunStatus};
use loopx_kernel::facts::{FactValue, Split};
use loopx_kernel::seams::{Clock, Executor, TurnError, TurnReport, TurnRequest};
use loopx_kernel::{
    Actor, AgentId, Amounts, Command, Continuation, Decision, GoalId, GoalSpec, Limits, NewTodo,
    Observation, PersonId, PlanChange, Policy, Question, SourceId, TodoId, Transition,
};
use loopx_provider::executor::CommandExecutor;
use loopx_provider::fact::FactBuilder;
use loopx_provider::metrics::{MetricsProvider, RunRevision};
use loopx_provider::process::CommandSpec;

/// The commit of the training code (the toy trainer does not change in this story).
const CODE: &str = "7a1c0de";
const DATASET: &str = "digits-v1";
const STEPS: u64 = 200;

/// One configuration of the sweep.
struct Config {
    name: &'static str,
    lr: f64,
    seed: u64,
    batch: u64,
    plan: &'static str,
}

const SWEEP: [Config; 4] = [
    Config {
        name: "base",
        lr: 0.01,
        seed: 1,
        batch: 64,
        plan: "the baseline: lr 0.01",
    },
    Config {
        name: "exp-a",
        lr: 0.05,
        seed: 1,
        batch: 64,
        plan: "lr 0.05",
    },
    Config {
        name: "exp-b",
        lr: 0.01,
        seed: 2,
        batch: 256,
        plan: "the baseline's lr with a batch of 256",
    },
    Config {
        name: "exp-c",
        lr: 0.5,
        seed: 1,
        batch: 64,
        plan: "lr 0.5",
    },
];

fn config(experiment: &str) -> Option<&'static Config> {
    let name = experiment.strip_suffix("@holdout").unwrap_or(experiment);
    SWEEP.iter().find(|c| c.name == name)
}

/// The experiments a todo runs: `train:<e>` and `retry:<e>#…` run `<e>`; the capability's
/// `holdout:<e>#…` runs `<e>` and the baseline on the holdout split.
fn jobs(todo: &TodoId) -> Vec<String> {
    let (kind, rest) = todo.as_str().split_once(':').unwrap_or_default();
    let experiment = rest.split('#').next().unwrap_or_default();
    match kind {
        "train" | "retry" => vec![experiment.to_owned()],
        "holdout" => vec![format!("{experiment}@holdout"), "base@holdout".to_owned()],
        _ => Vec::new(),
    }
}

/// The run's revision: the code, a hash of the configuration, the dataset. The split is not
/// part of it: a holdout run evaluates the same revision as its dev run.
fn revision(config: &Config) -> RunRevision {
    let text = format!(
        "lr={} seed={} batch={} steps={STEPS}",
        config.lr, config.seed, config.batch
    );
    RunRevision {
        code_sha: CODE.into(),
        config_hash: sha256_hex(text.as_bytes())[..12].to_owned(),
        dataset: DATASET.into(),
    }
}

/// The executor: launches the trainer for each job of a todo, then reads how the job ended
/// (the job watcher's `run:<e>` status) and its metrics file (the metrics provider). The first
/// attempt of any job lands on a shared node with 512 MB free, a retry on a dedicated one.
struct Cluster {
    dir: PathBuf,
    trainer: PathBuf,
    clock: Arc<dyn Clock>,
    attempts: Mutex<BTreeMap<String, u32>>,
}

impl Cluster {
    async fn launch(
        &self,
        turn: &TurnRequest,
        experiment: &str,
    ) -> std::result::Result<Vec<Observation>, TurnError> {
        let failed = |e: &dyn std::fmt::Display| TurnError::Failed(format!("{experiment}: {e}"));
        let config = config(experiment).ok_or_else(|| failed(&"not in the sweep"))?;
        let attempt = {
            let mut attempts = self.attempts.lock().unwrap_or_else(PoisonError::into_inner);
            let n = attempts.entry(experiment.to_owned()).or_insert(0);
            *n += 1;
            *n
        };
        let split = if experiment.ends_with("@holdout") {
            "holdout"
        } else {
            "dev"
        };
        let memory = if attempt == 1 { "512" } else { "4096" };
        let run_dir = self.dir.join(format!("{experiment}-{attempt}"));
        std::fs::create_dir_all(&run_dir).map_err(|e| failed(&e))?;
        let metrics = run_dir.join("metrics.jsonl");
        let mut command = CommandSpec::new(&self.trainer);
        if self.trainer.file_stem().is_some_and(|s| s != "toy-trainer") {
            command = command.arg("toy-trainer");
        }
        let command = command
            .args([
                "--lr",
                &config.lr.to_string(),
                "--seed",
                &config.seed.to_string(),
            ])
            .args(["--dataset", DATASET, "--split", split])
            .args(["--steps", &STEPS.to_string()])
            .args(["--batch", &config.batch.to_string(), "--memory-mb", memory])
            .arg("--out")
            .arg(&metrics)
            .timeout(loopx_kernel::Duration::seconds(30));
        let started = Instant::now();
        let ran = CommandExecutor::new(command, run_dir.join("journal"))
            .run(turn)
            .await;
        let seconds = started.elapsed().as_secs_f64();
        let run = revision(config);
        // A job that ends badly is this turn's observation, not its failure: the capability
        // judges it (and retries an out-of-memory run on a bigger node).
        let (state, reason) = match ran {
            Ok(_) => (RunState::Finished, None),
            // 137 is the exit of a job killed for memory.
            Err(TurnError::Exited { code: 137, .. }) => (RunState::Failed, Some(ExitReason::Oom)),
            Err(TurnError::Exited { .. } | TurnError::Killed { .. }) => {
                (RunState::Failed, Some(ExitReason::Crash))
            }
            Err(error) => return Err(error),
        };
        #[allow(clippy::cast_precision_loss)] // small numbers
        let cost = (STEPS * config.batch) as f64 / 1000.0;
        let summary = format!(
            "{experiment} {state}{} (attempt {attempt}, {memory} MB node)",
            reason
                .as_ref()
                .map_or_else(String::new, |r| format!(": {}", r.encode()))
        );
        let status = FactBuilder::new(
            &RunStatus::key(experiment),
            &metrics::subject(experiment),
            &run.revision(),
        )
        .summary(summary)
        .facts(&RunStatus {
            state,
            exit_reason: reason,
            split: if split == "holdout" {
                Split::Holdout
            } else {
                Split::Dev
            },
            dataset: DATASET.to_owned(),
            eval_window: "2026-11".to_owned(),
            budget: format!("steps={STEPS}"),
            cost,
            // Milliseconds are enough for a wall-clock time.
            wall_time_secs: (seconds * 1000.0).round() / 1000.0,
            attempt,
        })
        .build(self.clock.now())
        .map_err(|e| failed(&e))?;
        let provider = MetricsProvider::new(
            SourceId::new("metrics").map_err(|e| failed(&e))?,
            &metrics,
            experiment,
            run,
            self.clock.clone(),
        );
        let mut observations = vec![status];
        observations.extend(provider.read().await.map_err(|e| failed(&e))?);
        Ok(observations)
    }
}

#[async_trait]
impl Executor for Cluster {
    async fn run(&self, turn: &TurnRequest) -> std::result::Result<TurnReport, TurnError> {
        let mut observations = Vec::new();
        let mut ran = Vec::new();
        for experiment in jobs(&turn.todo) {
            let seen = self.launch(turn, &experiment).await?;
            ran.extend(
                seen.iter()
                    .filter(|o| o.key.as_str().starts_with("run:"))
                    .map(|o| o.summary.clone()),
            );
            ran.extend(
                seen.iter()
                    .filter(|o| o.key.as_str().ends_with("/accuracy"))
                    .map(|o| o.summary.clone()),
            );
            observations.extend(seen);
        }
        if ran.is_empty() {
            return Err(TurnError::Failed(format!("no job runs `{}`", turn.todo)));
        }
        Ok(TurnReport {
            effects: Vec::new(),
            transition: Transition::Complete {
                continuation: Continuation::GoalStillActive,
            },
            observations,
            usage: Amounts::ONE_TURN,
            summary: ran.join("; "),
            usage_problem: None,
        })
    }
}

/// The validator: a job must have reported how it ended; a holdout turn is judged by the
/// holdout evidence built from both holdout runs, which it records with the settlement.
fn referee(
    turn: &Judged<'_>,
    contract: &ExperimentContract,
) -> std::result::Result<Judgement, String> {
    let reported = jobs(&turn.turn.todo).iter().all(|e| {
        turn.report
            .observations
            .iter()
            .any(|o| o.key.as_str() == format!("run:{e}"))
    });
    if !reported {
        return Ok(Judgement::failed("a job did not report how it ended"));
    }
    let Some(experiment) = turn
        .turn
        .todo
        .as_str()
        .strip_prefix("holdout:")
        .and_then(|rest| rest.split('#').next())
    else {
        return Ok(Judgement::passed("every job reported its end"));
    };
    let state = turn.goal_after().map_err(|e| e.to_string())?;
    Ok(
        match holdout_evidence(contract, &state, experiment, turn.now) {
            Ok(evidence) => Judgement {
                summary: evidence.summary.clone(),
                evidence: vec![evidence],
                ..Judgement::passed("")
            },
            Err(why) => Judgement::failed(why.to_string()),
        },
    )
}

fn contract() -> Result<ExperimentContract> {
    let guardrails = Guardrails::default()
        .with_cost_cap(100.0)
        .with_time_cap_secs(600.0);
    Ok(
        ExperimentContract::new("accuracy", Direction::HigherIsBetter, "base")
            .with_min_effect(0.01)
            .with_guardrails(guardrails)
            .with_approver(PersonId::new("olivia")?),
    )
}

fn spec(agent: &AgentId) -> Result<GoalSpec> {
    Ok(GoalSpec {
        id: GoalId::new("lr-sweep")?,
        objective: "find a learning rate that beats the baseline's accuracy on digits-v1".into(),
        owner: PersonId::new("olivia")?,
        criteria: Vec::new(),
        agents: [agent.clone()].into(),
        budget: Limits {
            turns: Some(20),
            ..Limits::UNLIMITED
        },
        policy: Policy::default(),
        grants: BTreeMap::new(),
        identity: loopx_kernel::Identity::Declared,
        keys: Vec::new(),
        validators: std::collections::BTreeMap::new(),
        capability: None,
    })
}

/// The trainer: the toy-trainer binary next to this one when it was built, else this binary
/// playing it (`automl toy-trainer …`), so one `cargo run` is enough.
fn trainer() -> Result<PathBuf> {
    let me = std::env::current_exe()?;
    let sibling = me.with_file_name(format!("toy-trainer{}", std::env::consts::EXE_SUFFIX));
    Ok(if sibling.exists() { sibling } else { me })
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("toy-trainer") {
        let code = toy_trainer::train(&args[1..])?;
        std::process::exit(code);
    }
    let agent = AgentId::new("agent-a")?;
    let story = Story::real_time(spec(&agent)?)?;
    let contract = contract()?;
    let engine = Engine::builder(
        agent.clone(),
        story.store(),
        story.clock(),
        Arc::new(Cluster {
            dir: story.dir().join("runs"),
            trainer: trainer()?,
            clock: story.clock(),
            attempts: Mutex::new(BTreeMap::new()),
        }),
        Arc::new(StoryValidator::new(
            SourceId::new("holdout-referee")?,
            &story,
            {
                let contract = contract.clone();
                move |turn| referee(turn, &contract)
            },
        )),
    )
    .capability(Arc::new(AutoMl::new(SourceId::new("automl")?, contract)?))
    .build();

    story.say("goal: beat the baseline's accuracy on digits-v1 (min effect 0.01, olivia promotes)");
    let me = Actor::Agent(agent.clone());
    for config in &SWEEP {
        let todo = NewTodo::advance(
            TodoId::new(format!("train:{}", config.name))?,
            format!("train {}: {}", config.name, config.plan),
        );
        story.submit(&me, &Command::AddTodo { todo })?;
    }
    let mut long = NewTodo::advance(
        TodoId::new("train:exp-c-long")?,
        "train exp-c for 1000 steps if its short run holds up",
    );
    long.depends_on = [TodoId::new("train:exp-c")?].into();
    story.submit(&me, &Command::AddTodo { todo: long })?;
    story.say("the agent plans the sweep: base, exp-a, exp-b, exp-c, then a long run of exp-c");
    let stopped = story.run(&engine)?;
    let Decision::Replan { .. } = stopped else {
        return Err(format!(
            "the regressed run should force a replan, not {}",
            stopped.kind()
        )
        .into());
    };

    let state = story.state()?;
    let regressed = state
        .obligations
        .keys()
        .find(|o| o.as_str().starts_with("regressed:"))
        .ok_or("a regression obligation was raised")?
        .clone();
    ensure(
        regressed.as_str().starts_with("regressed:exp-c"),
        "only exp-c regressed",
    )?;
    ensure(
        state
            .todos
            .values()
            .any(|t| t.id.as_str().starts_with("retry:exp-b")),
        "the out-of-memory run was retried",
    )?;
    story.say("the agent answers the replan: exp-c regressed, so its long run is dropped");
    let discharge = Command::Discharge {
        obligation: regressed,
        changes: vec![PlanChange::Supersede {
            todo: TodoId::new("train:exp-c-long")?,
            reason: "exp-c regressed against the baseline: lr 0.5 is out of the sweep".into(),
            replacement: None,
        }],
    };
    story.submit(&me, &discharge)?;
    let decision = story.decide(&agent)?;
    let asks_olivia = match &decision {
        Decision::Ask { questions, .. } => questions.iter().any(|q| {
            matches!(q, Question::Gate { gate, .. } if gate.as_str().starts_with("promote:exp-a"))
        }),
        _ => false,
    };
    ensure(
        asks_olivia,
        format!(
            "the promotion of exp-a waits on olivia, not {}",
            decision.kind()
        ),
    )?;
    story.say("the promotion of exp-a waits on olivia; the agent has nothing else to do");
    Ok(())
}
