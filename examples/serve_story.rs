//! The seed's night and its next morning, with loopx as a service beside GitHub: the world
//! reaches the goal on its own.
//!
//! A stand-in for GitHub runs on loopback (the REST shapes loopx's client reads; every change
//! sent as a signed webhook delivery). The host runs loopx's service (`Service` with the
//! webhook route, the gate notices posted through the GitHub client) and agent-a's engine,
//! which waits on the store between steps. The goal is signed: every command carries its
//! actor's signature, and the CI check's evidence counts only from `provider:github`.
//!
//! 10:16 CI starts and the agent waits; the maintainer's gate is posted once in the pull
//! request. At night CI goes green: the delivery is recorded, its evidence meets the criterion,
//! and the waiting engine wakes (the latency is printed). The maintainer asks about field
//! naming in the pull request: it becomes the agent's todo, and the agent answers there. In the
//! morning someone else's `/loopx answer` is refused; the maintainer's answers the gate, the
//! agent applies the decision, the maintainer approves and merges, and the goal ends
//! `terminal (accepted)`.
//!
//! Run it with `cargo run -p loopx-examples --bin serve-story` (SQLite in a temporary
//! directory), or `-- --postgres URL` against a PostgreSQL database. It checks itself and exits
//! non-zero when a step does not hold.

use std::sync::Arc;
use std::time::{Duration as StdDuration, Instant};

use loopx_capability_prfix::PrFixConfig;
use loopx_examples::github::{Delivered, GitHub, NUMBER, REPO};
use loopx_examples::{Result, describe, ensure};
use loopx_kernel::engine::{Engine, EngineOptions, TurnOutcome};
use loopx_kernel::prelude::*;
use loopx_kernel::seams::Provider;
use loopx_kernel::{
    Actor, Amendment, CapabilityBinding, Command, Criterion, CriterionId, CriterionStatus,
    DecisionScope, ExpiryPolicy, GateId, GateScope, GateStatus, Identity, Keyring, NewGate,
    NewTodo, PersonId, RegisteredKey, SecretKey, Signer, SourceId, TodoId, Workspace,
};
use loopx_provider::clock::SystemClock;
use loopx_provider::github::rest::{GitHubClient, Token};
use loopx_provider::github::webhook::WebhookVerifier;
use loopx_server::capabilities::Registry;
use loopx_server::github::Deliveries;
use loopx_server::{Service, serve};
use loopx_store::SqliteStore;
use tokio::sync::mpsc;

const GOAL: &str = "cli-json-output";
const GATE: &str = "json-contract";
const CHECK: &str = "test";
/// The head the agent pushed at 10:14.
const HEAD: &str = "abc1234d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b";
/// The webhook's shared secret, made up for the story.
const SECRET: &str = "a-made-up-webhook-secret";
/// GitHub logins: the agent's bot (the pull request's author), the maintainer, someone else,
/// and loopx's service.
const AGENT_LOGIN: &str = "agent-bot";
const MAINTAINER_LOGIN: &str = "maria-gh";
const OTHER_LOGIN: &str = "mallory-gh";
const LOOPX_LOGIN: &str = "loopx-bot";
/// How long the story waits for the engine to reach a step before it fails.
const PATIENCE: StdDuration = StdDuration::from_secs(30);

/// Who is who, each with the key their commands are signed with. The keys come from fixed
/// seeds so the story replays; a real host makes them with `loopx key new`.
struct Cast {
    olivia: (Actor, Arc<SecretKey>),
    agent: (Actor, Arc<SecretKey>),
    tests: (Actor, Arc<SecretKey>),
    github: (Actor, Arc<SecretKey>),
    prfix: (Actor, Arc<SecretKey>),
}

impl Cast {
    fn new() -> Result<Cast> {
        let key = |seed: u8| Arc::new(SecretKey::from_seed([seed; 32]));
        Ok(Cast {
            olivia: (Actor::Person(PersonId::new("olivia")?), key(1)),
            agent: (Actor::Agent("agent-a".parse()?), key(2)),
            tests: (Actor::Validator(SourceId::new("local-tests")?), key(3)),
            github: (Actor::Provider(SourceId::new("github")?), key(4)),
            prfix: (Actor::Capability(SourceId::new("prfix")?), key(5)),
        })
    }

    fn all(&self) -> [&(Actor, Arc<SecretKey>); 5] {
        [
            &self.olivia,
            &self.agent,
            &self.tests,
            &self.github,
            &self.prfix,
        ]
    }
}

/// The keys of `who`, for an engine or the service to sign with.
fn keyring(who: &[&(Actor, Arc<SecretKey>)]) -> Keyring {
    who.iter().fold(Keyring::new(), |ring, (actor, key)| {
        ring.with(actor.clone(), key.clone())
    })
}

/// What the host's engine loop tells the story: a step began, and how it ended.
struct Beat {
    began: Instant,
    decision: Decision,
    settled: Option<TodoId>,
}

/// A step, or why the engine stopped.
type Told = std::result::Result<Beat, String>;

fn say(when: &str, text: &str) {
    println!("{when:>11}  {text}");
}

fn main() -> Result<()> {
    let mut args = std::env::args().skip(1);
    let postgres = match (args.next().as_deref(), args.next()) {
        (None, _) => None,
        (Some("--postgres"), Some(url)) => Some(url),
        _ => return Err("usage: serve-story [--postgres URL]".into()),
    };
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?
        .block_on(story(postgres))
}

async fn story(postgres: Option<String>) -> Result<()> {
    let dir = tempfile::tempdir()?;
    let store: Arc<dyn Store> = match &postgres {
        Some(url) => Arc::new(loopx_store::PostgresStore::connect(url).await?),
        None => Arc::new(SqliteStore::create(dir.path().join("loopx.db"))?),
    };
    let backend = if postgres.is_some() {
        "PostgreSQL"
    } else {
        "SQLite"
    };
    let cast = Cast::new()?;
    let github = GitHub::start(
        AGENT_LOGIN,
        HEAD,
        &[("ghp_agent", AGENT_LOGIN), ("ghp_loopx", LOOPX_LOGIN)],
    )
    .await?;
    let client = Arc::new(GitHubClient::new(
        SourceId::new("github")?,
        github.api(),
        Some(Token::new("ghp_loopx")),
        Duration::seconds(10),
        Arc::new(SystemClock),
    )?);

    say(
        "10:14",
        "agent-a pushed abc1234 and opened Codertocat/Hello-World#2",
    );
    let spec = create(&*store, &cast).await?;
    say(
        "10:16",
        &format!("olivia's goal `{GOAL}` follows the pull request, on {backend}"),
    );
    plan(&*store, &cast).await?;
    say(
        "10:16",
        "agent-a plans: confirm the JSON contract, once maria answers gate `json-contract`",
    );

    let service = service(&store, &cast, &client).await?;
    github.hook(&format!("{service}/github/webhook"), SECRET);
    expect_recorded(&github.open_pull().await?)?;
    expect_recorded(&github.queue_check(CHECK).await?)?;
    github.settled().await;
    say("10:16", "CI starts: check `test` is queued at the head");

    let started = Instant::now();
    let mut beats = agent(&store, &cast, &spec, &client, &github)?;
    let first = next_beat(&mut beats, started, "its first step", |_| true).await?;
    say("10:17", &format!("agent-a: {}", describe(&first.decision)));
    ensure(
        !matches!(first.decision, Decision::Continue(_)),
        "with CI pending and the contract waiting on maria, agent-a has nothing to run",
    )?;
    notices(&github, GATE, 1)?;
    say(
        "10:17",
        "gate `json-contract` is posted once in the pull request; you close the window",
    );

    night(&store, &github, &mut beats).await?;
    morning(&store, &github, &mut beats, &cast).await?;
    println!();
    say(
        "",
        &format!("every step above ran through loopx's service on {backend}"),
    );
    Ok(())
}

/// The goal, signed, bound to prfix for the pull request (following it from the start), its
/// one criterion on the check `ci/test` with `provider:github` its only validator; maria's
/// GitHub login mapped by olivia.
async fn create(store: &dyn Store, cast: &Cast) -> Result<GoalSpec> {
    let config = PrFixConfig {
        pulls: [format!("{REPO}#{NUMBER}")].into(),
        required_checks: [CHECK.to_owned()].into(),
        merge_owner: Some(PersonId::new("maria")?),
        // Deliveries arrive first: the monitors poll rarely.
        monitor_cadence: Duration::hours(6),
        ..PrFixConfig::default()
    };
    let binding = CapabilityBinding::new("prfix", serde_json::to_value(config)?)?;
    let binding = Registry::shipped().follow(&binding)?;
    let check = format!("ci/{CHECK}");
    let mut spec = GoalSpec::builder(
        GOAL,
        "add --format json to the CLI; the maintainer confirms the JSON contract",
        "olivia",
    )
    .agent("agent-a")
    .budget(Limits::turns(12))
    .criterion(Criterion::new(
        "tests-green",
        "the tests pass at the pull request's head",
        check.as_str(),
        format!("pr:{REPO}#{NUMBER}").as_str(),
    )?)
    .bound(binding)
    .build()?;
    spec.identity = Identity::Signed;
    spec.keys = cast
        .all()
        .iter()
        .map(|(actor, key)| RegisteredKey {
            actor: actor.clone(),
            key: key.public_key(),
        })
        .collect();
    spec.validators = [(check.parse()?, [cast.github.0.clone()].into())].into();
    run(
        store,
        &cast.olivia,
        &Command::CreateGoal { spec: spec.clone() },
    )
    .await?;
    let map = Command::AmendGoal {
        expected_revision: 0,
        amendments: vec![Amendment::MapLogin {
            person: PersonId::new("maria")?,
            provider: SourceId::new("github")?,
            login: MAINTAINER_LOGIN.into(),
        }],
    };
    run(store, &cast.olivia, &map).await?;
    Ok(spec)
}

/// agent-a's plan: the contract's confirmation, held until maria decides on `api:error_code`.
async fn plan(store: &dyn Store, cast: &Cast) -> Result<()> {
    let scope: DecisionScope = "api:error_code".parse()?;
    let mut confirm = NewTodo::advance(
        "confirm-json-contract".parse()?,
        "pin the JSON fields maria confirms in the schema test",
    );
    confirm.requires_decisions = [scope.clone()].into();
    run(store, &cast.agent, &Command::AddTodo { todo: confirm }).await?;
    let gate = NewGate {
        id: GATE.parse()?,
        question: "Is `error_code` acceptable as a stable field of the JSON output?".into(),
        owner: Actor::Person(PersonId::new("maria")?),
        scope: GateScope {
            decisions: [scope].into(),
            ..GateScope::default()
        },
        deadline: None,
        on_expiry: ExpiryPolicy::KeepAsking,
    };
    run(store, &cast.agent, &Command::OpenGate { gate }).await?;
    Ok(())
}

async fn run(
    store: &dyn Store,
    (who, key): &(Actor, Arc<SecretKey>),
    command: &Command,
) -> Result<()> {
    store
        .goal(&GOAL.parse()?)
        .signed_by(&**key)
        .submit(who, SystemClock.now(), command)
        .await?;
    Ok(())
}

/// loopx's service on a free loopback port: the webhook route, signing as `provider:github`
/// and `capability:prfix`, noticing gates through the GitHub client. Its base URL.
async fn service(
    store: &Arc<dyn Store>,
    cast: &Cast,
    client: &Arc<GitHubClient>,
) -> Result<String> {
    let deliveries = Deliveries::new(
        Arc::clone(store),
        Arc::new(SystemClock),
        WebhookVerifier::new(SECRET),
    )
    .keyring(keyring(&[&cast.github, &cast.prfix]))
    .notifier(client.clone());
    let router = Service::new(Arc::clone(store), Arc::new(SystemClock))
        .mount(deliveries.router())
        .router();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let base = format!("http://{}", listener.local_addr()?);
    tokio::spawn(serve(listener, router, std::future::pending()));
    Ok(base)
}

/// agent-a's engine, stepping and waiting on the store as `loopx run` does, on a task of its
/// own; each step it begins and ends is told to the story. Its turns: answer a question in the
/// pull request (a comment, as the agent's GitHub login), or do the planned work.
fn agent(
    store: &Arc<dyn Store>,
    cast: &Cast,
    spec: &GoalSpec,
    client: &Arc<GitHubClient>,
    github: &GitHub,
) -> Result<mpsc::UnboundedReceiver<Told>> {
    let comments = format!("{}/repos/{REPO}/issues/{NUMBER}/comments", github.api());
    let executor = executor_fn(move |turn: TurnRequest| {
        let comments = comments.clone();
        async move {
            if !turn.todo.as_str().starts_with("question:") {
                return Ok(TurnReport::complete(format!("done: {}", turn.title)));
            }
            let reply = "@maria-gh `error_code`, to match the exit codes' names; \
                         I asked you to confirm it in gate `json-contract`.";
            let posted = reqwest::Client::new()
                .post(&comments)
                .bearer_auth("ghp_agent")
                .json(&serde_json::json!({ "body": reply }))
                .send()
                .await
                .map_err(|e| TurnError::Failed(format!("the reply was not posted: {e}")))?;
            if !posted.status().is_success() {
                return Err(TurnError::Failed(format!(
                    "GitHub answered the reply with {}",
                    posted.status()
                )));
            }
            Ok(TurnReport::complete(
                "answered the question in the pull request",
            ))
        }
    });
    let tests = validator_fn("local-tests", |_, _| async {
        Ok(Validation::passed("the JSON schema tests pass"))
    })?;
    let builder = Engine::builder(
        "agent-a".parse()?,
        Arc::clone(store),
        Arc::new(SystemClock),
        executor,
        tests,
    )
    .keyring(keyring(&[&cast.agent, &cast.tests, &cast.github]))
    .options(EngineOptions {
        workspace: Some(Workspace {
            top_level: "/src/hello-world".into(),
            common_dir: "/src/hello-world/.git".into(),
        }),
        max_wait: Duration::seconds(60),
        ..EngineOptions::default()
    });
    let providers: Vec<Arc<dyn Provider>> = vec![client.clone()];
    let engine = Registry::shipped()
        .wire(builder, spec, &providers, Duration::hours(6))?
        .build();
    let (told, beats) = mpsc::unbounded_channel();
    let goal = spec.id.clone();
    tokio::spawn(async move {
        loop {
            let began = Instant::now();
            let report = match engine.step(&goal).await {
                Ok(report) => report,
                Err(error) => {
                    let _ = told.send(Err(format!("a step failed: {error}")));
                    return;
                }
            };
            let settled = match &report.turn {
                Some(TurnOutcome::Settled { todo, .. }) => Some(todo.clone()),
                _ => None,
            };
            let done = matches!(report.decision, Decision::Terminal { .. });
            let beat = Beat {
                began,
                decision: report.decision.clone(),
                settled,
            };
            if told.send(Ok(beat)).is_err() || done {
                return;
            }
            if let Err(error) = engine.wait(&report).await {
                let _ = told.send(Err(format!("waiting failed: {error}")));
                return;
            }
        }
    });
    Ok(beats)
}

/// The first step that began after `after` and satisfies `wanted`, within [`PATIENCE`].
async fn next_beat(
    beats: &mut mpsc::UnboundedReceiver<Told>,
    after: Instant,
    what: &str,
    wanted: impl Fn(&Beat) -> bool,
) -> Result<Beat> {
    let outcome = tokio::time::timeout(PATIENCE, async {
        while let Some(told) = beats.recv().await {
            match told {
                Ok(beat) if beat.began >= after && wanted(&beat) => return Ok(beat),
                Ok(_) => {}
                Err(why) => return Err(why),
            }
        }
        Err("it stopped".to_owned())
    })
    .await;
    match outcome {
        Ok(Ok(beat)) => Ok(beat),
        Ok(Err(why)) => Err(format!("agent-a's engine stopped before {what}: {why}").into()),
        Err(_) => Err(format!("agent-a's engine did not reach {what} in {PATIENCE:?}").into()),
    }
}

/// The delivery was taken and recorded.
fn expect_recorded(delivered: &Delivered) -> Result<()> {
    ensure(
        delivered.status == 200 && delivered.answer["outcome"] == "recorded",
        format!(
            "delivery `{}` is recorded, not {} {}",
            delivered.event, delivered.status, delivered.answer
        ),
    )
}

/// Exactly `count` comments by loopx's service name gate `gate`.
fn notices(github: &GitHub, gate: &str, count: usize) -> Result<()> {
    let marker = format!("gate `{gate}`");
    let posted = github
        .comments()
        .iter()
        .filter(|c| c.login == LOOPX_LOGIN && c.body.contains(&marker))
        .count();
    ensure(
        posted == count,
        format!("gate `{gate}` is noticed {count} time(s) in the pull request, not {posted}"),
    )
}

async fn state(store: &Arc<dyn Store>) -> Result<GoalState> {
    Ok(store.goal(&GOAL.parse()?).state().await?)
}

/// The night: CI goes green and the waiting engine wakes; maria's question becomes agent-a's
/// todo, and agent-a answers it in the pull request.
async fn night(
    store: &Arc<dyn Store>,
    github: &GitHub,
    beats: &mut mpsc::UnboundedReceiver<Told>,
) -> Result<()> {
    let sent = Instant::now();
    expect_recorded(&github.complete_check(CHECK, "success").await?)?;
    let woke = next_beat(beats, sent, "a step after CI", |_| true).await?;
    let latency = woke.began.duration_since(sent);
    say("23:40", "CI goes green: check `test` succeeds at the head");
    say(
        "23:40",
        &format!(
            "the waiting engine woke {:.1} ms after the delivery was sent: {}",
            latency.as_secs_f64() * 1000.0,
            describe(&woke.decision)
        ),
    );
    let goal = state(store).await?;
    let criterion: CriterionId = "tests-green".parse()?;
    ensure(
        matches!(
            goal.criterion_status(&criterion, SystemClock.now()),
            Some(CriterionStatus::Met { .. })
        ),
        "CI at the head meets the criterion",
    )?;
    ensure(
        goal.evidence.values().any(|e| {
            e.produced_by.to_string() == "provider:github" && e.revision.as_str().ends_with(HEAD)
        }),
        "the evidence is GitHub's, at the head",
    )?;
    say(
        "23:40",
        "criterion tests-green: met, on provider:github's evidence at abc1234",
    );

    let asked = Instant::now();
    let question = github
        .comment(
            MAINTAINER_LOGIN,
            "Why `error_code` and not `code`? The other tools here say `code`.",
        )
        .await?;
    expect_recorded(&question)?;
    // Looked for among all todos: the waiting engine may have answered it already.
    let todo = state(store)
        .await?
        .todos
        .values()
        .find(|t| t.id.as_str().starts_with("question:"))
        .map(|t| t.id.clone())
        .ok_or("maria's question is agent-a's todo")?;
    say(
        "23:52",
        &format!("maria asks about field naming in the pull request: todo `{todo}`"),
    );
    let answered = next_beat(beats, asked, "the question answered", |b| {
        b.settled.as_ref() == Some(&todo)
    })
    .await?;
    github.settled().await;
    let replied = github
        .comments()
        .iter()
        .any(|c| c.login == AGENT_LOGIN && c.body.starts_with("@maria-gh"));
    ensure(replied, "agent-a's reply is in the pull request")?;
    ensure(
        state(store).await?.pending_todos().all(|t| t.id != todo),
        "the question is closed",
    )?;
    say(
        "23:53",
        &format!(
            "agent-a answers in the pull request; then: {}",
            describe(&answered.decision)
        ),
    );
    Ok(())
}

/// The next morning: someone else's answer is refused, maria's answers the gate, agent-a
/// applies it, maria approves and merges, and agent-a declares the goal closed.
async fn morning(
    store: &Arc<dyn Store>,
    github: &GitHub,
    beats: &mut mpsc::UnboundedReceiver<Told>,
    cast: &Cast,
) -> Result<()> {
    let gate: GateId = GATE.parse()?;
    let other = github
        .comment(OTHER_LOGIN, "/loopx answer json-contract yes, call it code")
        .await?;
    ensure(
        other.answer["answers"][0]["refused"] == "relay_not_gate_owner",
        format!("someone else's answer is refused: {}", other.answer),
    )?;
    ensure(
        matches!(
            state(store).await?.gates.get(&gate).map(|g| &g.status),
            Some(GateStatus::Pending)
        ),
        "the gate still waits on maria",
    )?;
    say(
        "09:30",
        "mallory-gh comments `/loopx answer json-contract …`: refused (relay_not_gate_owner)",
    );

    let answered = Instant::now();
    let maria = github
        .comment(
            MAINTAINER_LOGIN,
            "/loopx answer json-contract yes, keep `error_code`",
        )
        .await?;
    ensure(
        maria.answer["answers"][0]["outcome"] == "answered",
        format!("maria's answer answers the gate: {}", maria.answer),
    )?;
    say(
        "09:31",
        "maria comments `/loopx answer json-contract yes, keep error_code`: answered",
    );
    let confirm: TodoId = "confirm-json-contract".parse()?;
    let applied = next_beat(beats, answered, "the contract confirmed", |b| {
        b.settled.as_ref() == Some(&confirm)
    })
    .await?;
    say(
        "09:33",
        &format!(
            "agent-a pins the confirmed fields; then: {}",
            describe(&applied.decision)
        ),
    );
    notices(github, GATE, 1)?;

    expect_recorded(&github.approve(MAINTAINER_LOGIN, "").await?)?;
    let merge_gate = state(store)
        .await?
        .gates
        .keys()
        .find(|g| g.as_str().contains("merge-gate"))
        .cloned()
        .ok_or("green and approved at the head opens the merge gate")?;
    notices(github, merge_gate.as_str(), 1)?;
    say(
        "09:40",
        &format!("maria approves; the merge gate `{merge_gate}` is posted once"),
    );
    let merged = Instant::now();
    expect_recorded(&github.merge().await?)?;
    github.settled().await;
    say("09:41", "maria merges the pull request");
    run(
        &**store,
        &cast.agent,
        &Command::DeclareClosure {
            reason: "merged with the tests green at its head and the JSON contract confirmed"
                .into(),
        },
    )
    .await?;
    let end = next_beat(beats, merged, "the end", |b| {
        matches!(b.decision, Decision::Terminal { .. })
    })
    .await?;
    say(
        "09:41",
        &format!(
            "agent-a declares the goal closed: {}",
            describe(&end.decision)
        ),
    );
    ensure(
        describe(&end.decision).contains("accepted"),
        "the goal is accepted",
    )
}
