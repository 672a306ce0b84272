//! The seed's story, for real: a goal "add `--format json` to a CLI" on a git repository made
//! in a temporary directory, worked by the engine over the embedded default store (SQLite).
//!
//! Every agent step runs in its own operating-system process that opens the store afresh, so
//! nothing survives between steps but the store and the executor's journal. Turns are real
//! processes that edit files and commit; two real validator commands establish evidence at the
//! commit they ran on; the maintainer is asked whether `error_code` may be a stable field while
//! independent work goes on; one agent process is killed with SIGKILL in the middle of a turn,
//! and a fresh process derives the same next step and finishes that turn under the same id.
//! The goal ends `terminal (accepted)`.
//!
//! Run it with `cargo run -p loopx-examples --bin quickstart`; with `-- --keep DIR` the store,
//! the repository and the journal stay in DIR to look at with `loopx` afterwards.
//!
//! The binary plays three parts, chosen by its first argument: no argument is the story (the
//! operator); `agent-step DIR` is one engine step of the agent; `turn` is the executor command
//! the engine runs inside the repository for one turn.

use std::error::Error;
use std::path::{Path, PathBuf};
use std::process::{Child, Command as Process, Stdio};
use std::sync::Arc;
use std::time::Duration as StdDuration;

use loopx_kernel::engine::{Engine, EngineOptions};
use loopx_kernel::seams::{Clock, Store, Validator};
use loopx_kernel::{
    Actor, AgentId, Command, Criterion, Decision, DecisionScope, Duration, GateAnswer, GateScope,
    GoalId, GoalSpec, GoalState, LeaseStep, Limits, NewGate, NewTodo, ObservationKey, PersonId,
    Policy, SourceId, WriteSet, decide, submit,
};
use loopx_provider::clock::SystemClock;
use loopx_provider::executor::CommandExecutor;
use loopx_provider::git::{Git, GitProvider};
use loopx_provider::process::CommandSpec;
use loopx_provider::validator::{AllOf, CommandValidator};
use loopx_store::SqliteStore;

type Result<T> = std::result::Result<T, Box<dyn Error>>;

const GOAL: &str = "cli-json-output";
const AGENT: &str = "agent-a";
const MAINTAINER: &str = "maintainer";
const REPO: &str = "repo:acme/cli";
const HEAD: &str = "git:acme/cli";
const QUESTION: &str = "is `error_code` acceptable as a stable field?";

fn main() {
    let mut args = std::env::args().skip(1);
    let outcome = match args.next().as_deref() {
        None => story(None),
        Some("--keep") => match args.next() {
            Some(dir) => story(Some(Path::new(&dir))),
            None => Err("usage: quickstart --keep DIR (a new or empty directory)".into()),
        },
        Some("agent-step") => match args.next() {
            Some(dir) => agent_step(Path::new(&dir)),
            None => Err("usage: quickstart agent-step DIR".into()),
        },
        Some("turn") => turn(),
        Some(other) => Err(format!("unknown part `{other}`").into()),
    };
    if let Err(error) = outcome {
        eprintln!("quickstart: {error}");
        std::process::exit(1);
    }
}

// ----- the operator's story ----------------------------------------------------------------

/// The story in a temporary directory, removed at the end; or in `keep` (a new or empty
/// directory), left there to look at with `loopx`.
fn story(keep: Option<&Path>) -> Result<()> {
    let temporary = tempfile::tempdir()?;
    let dir = match keep {
        Some(kept) => {
            std::fs::create_dir_all(kept)?;
            if std::fs::read_dir(kept)?.next().is_some() {
                return Err(format!(
                    "`{}` is not empty; give a new or empty directory",
                    kept.display()
                )
                .into());
            }
            kept.canonicalize()?
        }
        None => temporary.path().to_path_buf(),
    };
    told(&dir)?;
    match keep {
        Some(_) => println!(
            "\nkept in {dir}: look at it with `loopx --store {db} status --goal {GOAL}`, `… log --goal {GOAL}`, or the board: `loopx --store {db} serve`",
            dir = dir.display(),
            db = dir.join("loopx.db").display(),
        ),
        None => println!(
            "\n(the store was in a temporary directory, removed now; `quickstart --keep DIR` keeps it to look at)"
        ),
    }
    Ok(())
}

/// The story, told in `dir`.
fn told(dir: &Path) -> Result<()> {
    let repo = dir.join("cli");
    create_repository(&repo)?;
    let runtime = runtime()?;
    let store = SqliteStore::create(dir.join("loopx.db"))?;
    let goal = GoalId::new(GOAL)?;
    let agent = AgentId::new(AGENT)?;
    runtime.block_on(plan(&store, &goal))?;
    say(
        "plan",
        "goal with two criteria, three todos, and a question for the maintainer",
    );
    show_next(&runtime, &store, &goal, &agent)?;

    let report = step(dir, &[])?;
    say(
        "turn",
        &format!("{} (the JSON output, committed)", outcome(&report)),
    );

    // The next turn hangs; kill its agent process mid-turn, executor and all.
    let mut child = spawn_step(dir, &[("QUICKSTART_HANG", "1")])?;
    let turn_pid = wait_for_file(&dir.join("turn.pid"))?;
    kill(&mut child, &turn_pid)?;
    say(
        "crash",
        "agent process killed with SIGKILL in the middle of a turn",
    );
    let resumed = show_next(&runtime, &store, &goal, &agent)?;
    let Decision::Continue(assignment) = &resumed else {
        return Err(format!("expected to resume the interrupted turn, got {resumed:?}").into());
    };
    let LeaseStep::Resume { turn, .. } = &assignment.lease else {
        return Err("the fresh process should resume the prepared turn".into());
    };
    say(
        "recover",
        &format!("a fresh process derives the same next step: resume turn {turn}"),
    );
    let report = step(dir, &[])?;
    say(
        "turn",
        &format!("{} (finished under the same turn id)", outcome(&report)),
    );

    let answer = Command::AnswerGate {
        gate: "stable-fields".try_into()?,
        answer: GateAnswer::Resolve {
            answer: "yes: `error_code` is stable".into(),
        },
    };
    let maintainer = Actor::Person(PersonId::new(MAINTAINER)?);
    let now = SystemClock.now();
    runtime.block_on(submit(
        &store,
        &goal,
        &maintainer,
        now,
        &answer,
        &"answer-1".try_into()?,
    ))?;
    say(
        "answer",
        "the maintainer answers: yes, `error_code` is stable",
    );

    let report = step(dir, &[])?;
    say("turn", &format!("{} (error_code added)", outcome(&report)));
    let last = step(dir, &[])?;
    say("decide", &describe(&last.decision));

    let state = load(&runtime, &store, &goal)?;
    check_accepted(&last.decision, &state)?;
    println!(
        "\nthe goal is terminal (accepted) after {} charged turns",
        state.ledger.spent.turns
    );
    Ok(())
}

/// The goal, its todos and the agent's question, committed by the people and the agent.
async fn plan(store: &SqliteStore, goal: &GoalId) -> Result<()> {
    let maintainer = Actor::Person(PersonId::new(MAINTAINER)?);
    let agent = Actor::Agent(AgentId::new(AGENT)?);
    let now = SystemClock.now();
    let spec = GoalSpec {
        id: goal.clone(),
        objective: "add --format json to the CLI without changing the default output".into(),
        owner: PersonId::new(MAINTAINER)?,
        criteria: vec![
            criterion(
                "text-unchanged",
                "default text output unchanged",
                "tests.text",
            )?,
            criterion(
                "json-schema-tested",
                "the JSON schema has tests",
                "tests.json",
            )?,
        ],
        agents: [AgentId::new(AGENT)?].into(),
        budget: Limits {
            turns: Some(10),
            ..Limits::UNLIMITED
        },
        policy: Policy::default(),
        grants: std::collections::BTreeMap::default(),
        identity: loopx_kernel::Identity::Declared,
        keys: Vec::new(),
        validators: std::collections::BTreeMap::new(),
        capability: None,
    };
    let mut commands = vec![
        (maintainer.clone(), Command::CreateGoal { spec }),
        (
            maintainer.clone(),
            add(todo(
                "json-output",
                "add --format json",
                &["greet.sh", "tests"],
            )?),
        ),
        (
            maintainer.clone(),
            add(todo("docs", "document the flag", &["README"])?.idempotent()),
        ),
    ];
    let mut error_code = todo(
        "error-code",
        "add error_code to the JSON",
        &["greet.sh", "tests"],
    )?;
    error_code.requires_decisions = [DecisionScope::new("stable-fields")?].into();
    commands.push((maintainer, add(error_code)));
    commands.push((
        agent,
        Command::OpenGate {
            gate: NewGate {
                id: "stable-fields".try_into()?,
                question: QUESTION.into(),
                owner: Actor::Person(PersonId::new(MAINTAINER)?),
                scope: GateScope {
                    decisions: [DecisionScope::new("stable-fields")?].into(),
                    ..GateScope::default()
                },
                deadline: None,
                on_expiry: loopx_kernel::ExpiryPolicy::KeepAsking,
            },
        },
    ));
    for (n, (actor, command)) in commands.into_iter().enumerate() {
        let op = format!("plan-{n}").try_into()?;
        submit(store, goal, &actor, now, &command, &op).await?;
    }
    Ok(())
}

fn criterion(id: &str, text: &str, check: &str) -> Result<Criterion> {
    Ok(Criterion {
        id: id.try_into()?,
        text: text.into(),
        check: check.try_into()?,
        subject: REPO.try_into()?,
    })
}

fn todo(id: &str, title: &str, writes: &[&str]) -> Result<NewTodo> {
    let mut todo = NewTodo::advance(id.try_into()?, title);
    todo.writes = Some(WriteSet {
        repository: "acme/cli".into(),
        scopes: writes.iter().map(|s| (*s).to_owned()).collect(),
    });
    Ok(todo)
}

fn add(todo: NewTodo) -> Command {
    Command::AddTodo { todo }
}

fn check_accepted(decision: &Decision, state: &GoalState) -> Result<()> {
    if decision.kind() != "terminal" || state.abandoned.is_some() {
        return Err(format!("expected terminal (accepted), got {decision:?}").into());
    }
    // Three todos, three charged turns: the killed turn was finished once, not twice.
    if state.ledger.spent.turns != 3 {
        return Err(format!("expected 3 charged turns, got {}", state.ledger.spent.turns).into());
    }
    Ok(())
}

// ----- one agent step, in its own process ------------------------------------------------

fn agent_step(dir: &Path) -> Result<()> {
    let runtime = runtime()?;
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(dir.join("loopx.db"))?);
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let repo = dir.join("cli");
    let turn = CommandSpec::new(std::env::current_exe()?)
        .arg("turn")
        .current_dir(&repo)
        .allow_env("PATH")
        .allow_env("QUICKSTART_HANG")
        .env("QUICKSTART_DIR", dir);
    let executor = Arc::new(CommandExecutor::new(turn, dir.join("journal")));
    let check = |name: &str, script: &str| -> Result<Arc<dyn Validator>> {
        let command = CommandSpec::new("sh").arg(script).allow_env("PATH");
        Ok(Arc::new(CommandValidator::new(
            SourceId::new(name)?,
            name.try_into()?,
            REPO.try_into()?,
            &repo,
            command,
            clock.clone(),
        )))
    };
    let validator = Arc::new(AllOf::new(
        SourceId::new("tests")?,
        vec![
            check("tests.text", "tests/text.sh")?,
            check("tests.json", "tests/json.sh")?,
        ],
    ));
    let git = Arc::new(GitProvider::new(
        SourceId::new("git")?,
        Git::new(),
        &repo,
        REPO,
        clock.clone(),
    ));
    let options = EngineOptions {
        workspace: Some(runtime.block_on(Git::new().workspace(&repo))?),
        ..EngineOptions::default()
    };
    let engine = Engine::builder(AgentId::new(AGENT)?, store, clock, executor, validator)
        .watch(git, ObservationKey::new(HEAD)?, Duration::ZERO)
        .options(options)
        .build();
    let report = runtime.block_on(engine.step(&GoalId::new(GOAL)?))?;
    println!("{}", serde_json::to_string(&report)?);
    Ok(())
}

// ----- one turn: the executor command, run inside the repository ---------------------------

fn turn() -> Result<()> {
    let todo = std::env::var("LOOPX_TODO")?;
    match todo.as_str() {
        "json-output" => {
            write("greet.sh", GREET_WITH_JSON)?;
            write("tests/json.sh", JSON_TEST)?;
            commit("Add --format json")?;
        }
        "docs" => {
            if std::env::var_os("QUICKSTART_HANG").is_some() {
                // Stand still until the operator kills us, leaving our pid for it.
                let dir = std::env::var("QUICKSTART_DIR")?;
                std::fs::write(
                    Path::new(&dir).join("turn.pid"),
                    std::process::id().to_string(),
                )?;
                std::thread::sleep(StdDuration::from_secs(60));
            }
            write("README", "greet.sh [--format json]\n")?;
            commit("Document --format json")?;
        }
        "error-code" => {
            write("greet.sh", GREET_WITH_ERROR_CODE)?;
            write("tests/json.sh", JSON_TEST_WITH_ERROR_CODE)?;
            commit("Add error_code to the JSON output")?;
            // The last todo: nothing follows, so the goal may close once the evidence holds.
            println!(
                r#"{{"transition":{{"kind":"complete","continuation":{{"kind":"no_follow_up"}}}},"summary":"error_code added"}}"#
            );
        }
        other => return Err(format!("no script for todo `{other}`").into()),
    }
    Ok(())
}

fn write(path: &str, text: &str) -> Result<()> {
    if let Some(parent) = Path::new(path).parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::write(path, text)?;
    Ok(())
}

fn commit(message: &str) -> Result<()> {
    git(Path::new("."), &["add", "-A"])?;
    git(Path::new("."), &["commit", "-q", "-m", message])
}

// ----- the repository ---------------------------------------------------------------------

const GREET: &str = "#!/bin/sh\necho 'hello, world'\n";
const GREET_WITH_JSON: &str = "#!/bin/sh\nif [ \"$1 $2\" = '--format json' ]; then\n  echo '{\"greeting\":\"hello, world\"}'\nelse\n  echo 'hello, world'\nfi\n";
const GREET_WITH_ERROR_CODE: &str = "#!/bin/sh\nif [ \"$1 $2\" = '--format json' ]; then\n  echo '{\"greeting\":\"hello, world\",\"error_code\":null}'\nelse\n  echo 'hello, world'\nfi\n";
const TEXT_TEST: &str = "#!/bin/sh\n[ \"$(sh greet.sh)\" = 'hello, world' ]\n";
const JSON_TEST: &str =
    "#!/bin/sh\n[ \"$(sh greet.sh --format json)\" = '{\"greeting\":\"hello, world\"}' ]\n";
const JSON_TEST_WITH_ERROR_CODE: &str = "#!/bin/sh\n[ \"$(sh greet.sh --format json)\" = '{\"greeting\":\"hello, world\",\"error_code\":null}' ]\n";
const NO_JSON_YET: &str = "#!/bin/sh\necho 'no JSON output yet' >&2\nexit 1\n";

fn create_repository(repo: &Path) -> Result<()> {
    std::fs::create_dir_all(repo.join("tests"))?;
    std::fs::write(repo.join("greet.sh"), GREET)?;
    std::fs::write(repo.join("tests/text.sh"), TEXT_TEST)?;
    std::fs::write(repo.join("tests/json.sh"), NO_JSON_YET)?;
    git(repo, &["init", "-q", "-b", "main"])?;
    git(repo, &["add", "-A"])?;
    git(repo, &["commit", "-q", "-m", "A CLI that greets"])
}

fn git(dir: &Path, args: &[&str]) -> Result<()> {
    let status = Process::new("git")
        .arg("-C")
        .arg(dir)
        .args([
            "-c",
            "user.name=agent-a",
            "-c",
            "user.email=agent-a@example.com",
        ])
        .args(args)
        .status()?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("git {} failed: {status}", args.join(" ")).into())
    }
}

// ----- plumbing ---------------------------------------------------------------------------

fn runtime() -> Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?)
}

fn spawn_step(dir: &Path, env: &[(&str, &str)]) -> Result<Child> {
    let mut command = Process::new(std::env::current_exe()?);
    command.arg("agent-step").arg(dir).stdout(Stdio::piped());
    for (name, value) in env {
        command.env(name, value);
    }
    Ok(command.spawn()?)
}

/// What the story reads of a step report that an agent process printed as JSON.
#[derive(serde::Deserialize)]
struct Seen {
    decision: Decision,
    #[serde(default)]
    turn: Option<serde_json::Value>,
}

/// Runs one agent step in a fresh process and reads its report.
fn step(dir: &Path, env: &[(&str, &str)]) -> Result<Seen> {
    let output = spawn_step(dir, env)?.wait_with_output()?;
    if !output.status.success() {
        return Err(format!("the agent step failed: {}", output.status).into());
    }
    let text = String::from_utf8(output.stdout)?;
    let line = text
        .lines()
        .last()
        .ok_or("the agent step printed nothing")?;
    Ok(serde_json::from_str(line)?)
}

fn wait_for_file(path: &PathBuf) -> Result<String> {
    for _ in 0..600 {
        if let Ok(text) = std::fs::read_to_string(path)
            && !text.is_empty()
        {
            return Ok(text);
        }
        std::thread::sleep(StdDuration::from_millis(50));
    }
    Err(format!("{} never appeared", path.display()).into())
}

fn kill(child: &mut Child, turn_pid: &str) -> Result<()> {
    Process::new("kill")
        .args(["-KILL", turn_pid.trim()])
        .status()?;
    child.kill()?;
    child.wait()?;
    Ok(())
}

fn load(
    runtime: &tokio::runtime::Runtime,
    store: &SqliteStore,
    goal: &GoalId,
) -> Result<GoalState> {
    runtime
        .block_on(store.load(goal))?
        .ok_or_else(|| "the goal is gone".into())
}

fn show_next(
    runtime: &tokio::runtime::Runtime,
    store: &SqliteStore,
    goal: &GoalId,
    agent: &AgentId,
) -> Result<Decision> {
    let state = load(runtime, store, goal)?;
    let decision = decide(&state, agent, SystemClock.now());
    say("next", &describe(&decision));
    Ok(decision)
}

fn describe(decision: &Decision) -> String {
    match decision {
        Decision::Continue(a) if a.pending_gates.is_empty() => {
            format!("continue with `{}`", a.todo)
        }
        Decision::Continue(a) => format!(
            "continue with `{}` while {} waits for the maintainer",
            a.todo,
            a.pending_gates
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Decision::Terminal { outcome } => format!("terminal ({outcome:?})").to_lowercase(),
        other => other.kind().to_owned(),
    }
}

fn outcome(report: &Seen) -> String {
    match &report.turn {
        Some(v) => Some(v)
            .and_then(|v| {
                Some(format!(
                    "{} `{}`",
                    v.get("outcome")?.as_str()?,
                    v.get("todo")?.as_str()?
                ))
            })
            .unwrap_or_else(|| "a turn".into()),
        None => "no turn".into(),
    }
}

fn say(what: &str, text: &str) {
    println!("{what:>8}  {text}");
}
