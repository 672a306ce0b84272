//! An embedded host wires each goal's capability from its spec through the registry: a goal
//! bound to `prfix` has its pull request polled through the real GitHub REST client against a
//! loopback stand-in, and a failing check at the head becomes the capability's fix todo, which
//! the engine hands the host's agent; a goal bound to a capability the host registered itself
//! is judged by it.

#[path = "../../loopx-provider/tests/support/github.rs"]
mod github;

use std::sync::{Arc, Mutex};

use github::{Reply, Seen, ok};
use loopx_kernel::engine::TurnOutcome;
use loopx_kernel::prelude::*;
use loopx_kernel::seams::Provider;
use loopx_kernel::{Criterion, CriterionStatus, ObservationKey, Workspace};
use loopx_provider::clock::SystemClock;
use loopx_provider::github::rest::GitHubClient;
use loopx_server::capabilities::{Bound, ConfigProblem, GITHUB_PROVIDER, Registry};
use loopx_store::MemoryStore;
use serde_json::json;

const HEAD: &str = "0123456789abcdef0123456789abcdef01234567";

/// GitHub's REST answers for `acme/cli#42` at `HEAD`, its one check run concluded as given.
fn rest(conclusion: &'static str) -> github::Handler {
    Arc::new(move |seen: &Seen| {
        let path = seen.path.split('?').next().unwrap_or_default();
        let body = match path {
            "/repos/acme/cli/pulls/42" => json!({
                "number": 42, "state": "open", "title": "json output", "draft": false,
                "merged": false, "mergeable_state": "clean",
                "created_at": "2026-11-29T09:00:00Z", "updated_at": "2026-11-29T09:30:00Z",
                "head": { "ref": "json", "sha": HEAD },
                "base": { "ref": "main", "sha": "fedcba9876543210fedcba9876543210fedcba98" },
                "user": { "login": "agent-a" },
            }),
            "/repos/acme/cli/pulls/42/reviews" => json!([]),
            p if p == format!("/repos/acme/cli/commits/{HEAD}/check-runs") => json!({
                "total_count": 1,
                "check_runs": [{
                    "id": 7, "name": "build", "head_sha": HEAD, "status": "completed",
                    "conclusion": conclusion,
                    "started_at": "2026-11-29T09:31:00Z", "completed_at": "2026-11-29T09:40:00Z",
                    "app": { "slug": "ci" }, "pull_requests": [{ "number": 42 }],
                }],
            }),
            p if p == format!("/repos/acme/cli/commits/{HEAD}/status") => {
                json!({ "state": "pending", "sha": HEAD, "total_count": 0, "statuses": [] })
            }
            _ => {
                return Reply {
                    status: 404,
                    ..ok(r#"{"message": "Not Found"}"#)
                };
            }
        };
        ok(&body.to_string())
    })
}

/// The host's GitHub provider: the REST client against the stand-in at `base`.
fn github_provider(base: &str) -> Vec<Arc<dyn Provider>> {
    let client = GitHubClient::new(
        SourceId::new(GITHUB_PROVIDER).expect("a valid id"),
        base,
        None,
        Duration::seconds(10),
        Arc::new(SystemClock),
    )
    .expect("a client");
    vec![Arc::new(client)]
}

/// The host's own capability: it asks for one todo, titled by its configuration.
struct Greeter {
    source: SourceId,
    title: String,
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct GreeterConfig {
    title: String,
}

impl Capability for Greeter {
    fn source(&self) -> &SourceId {
        &self.source
    }

    fn judge(&self, state: &GoalState, _: &AgentId, _: Timestamp) -> Vec<Proposal> {
        let id: TodoId = "greet".parse().expect("a valid id");
        if state.todos.get(&id).is_some() {
            return Vec::new();
        }
        vec![Proposal {
            command: Command::AddTodo {
                todo: NewTodo::advance(id, self.title.clone()),
            },
            rationale: "every goal greets once".into(),
        }]
    }
}

fn registry() -> Registry {
    Registry::shipped().with_config("greeter", |name: &SourceId, config: GreeterConfig| {
        if config.title.trim().is_empty() {
            return Err(ConfigProblem::Refused("title must not be blank".into()));
        }
        Ok(Bound::new(Greeter {
            source: name.clone(),
            title: config.title,
        }))
    })
}

/// The todos the host's agent was handed, in order.
type Worked = Arc<Mutex<Vec<String>>>;

/// The engine of `agent-a` for `spec`, its capability wired from the spec by the registry.
fn engine(
    store: Arc<dyn Store>,
    spec: &GoalSpec,
    providers: &[Arc<dyn Provider>],
    worked: &Worked,
) -> Engine {
    let log = Arc::clone(worked);
    let agent = executor_fn(move |turn| {
        let log = Arc::clone(&log);
        async move {
            log.lock().expect("log").push(turn.todo.to_string());
            Ok(TurnReport::complete(turn.title))
        }
    });
    let check = validator_fn("tests", |_, _| async {
        Ok(Validation::passed("tests pass"))
    })
    .expect("a valid validator id");
    let builder = Engine::builder(
        "agent-a".parse().expect("a valid id"),
        store,
        Arc::new(SystemClock),
        agent,
        check,
    );
    // The checkout the agent works in: a fix writes the repository, and the workspace guard
    // hands writing todos only to an agent that says where it writes.
    let options = EngineOptions {
        workspace: Some(Workspace {
            top_level: "/src/acme-cli".into(),
            common_dir: "/src/acme-cli/.git".into(),
        }),
        ..EngineOptions::default()
    };
    registry()
        .wire(builder.options(options), spec, providers, Duration::ZERO)
        .expect("the goal's capability wires")
        .build()
}

fn bound_spec(id: &str, capability: &str, config: serde_json::Value) -> GoalSpec {
    GoalSpec::builder(id, "CI of acme/cli#42 is green", "olivia")
        .agent("agent-a")
        .budget(Limits::turns(10))
        .declared_identity()
        .capability(capability, config)
        .build()
        .expect("valid ids")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_check_at_the_head_becomes_the_fix_todo_the_agent_is_handed() {
    let server = github::serve(rest("failure")).await;
    let providers = github_provider(&server.base);
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let spec = bound_spec("fix-42", "prfix", json!({ "pulls": ["acme/cli#42"] }));
    store
        .goal(&spec.id)
        .create(&spec, SystemClock.now())
        .await
        .expect("created");
    let worked = Worked::default();

    let step = engine(store.clone(), &spec, &providers, &worked)
        .step(&spec.id)
        .await
        .expect("a step");

    let fix = "pr:acme/cli#42/ci-fix@0123456789ab";
    let observed: Vec<&str> = step.observed.iter().map(ObservationKey::as_str).collect();
    assert!(observed.contains(&"pr:acme/cli#42"), "{observed:?}");
    assert!(observed.contains(&"ci:acme/cli#42"), "{observed:?}");
    let accepted: Vec<(&str, Option<&str>)> = step
        .proposals
        .iter()
        .filter(|p| p.refused.is_none() && p.capability.as_str() == "prfix")
        .map(|p| (p.command.as_str(), p.target.as_deref()))
        .collect();
    assert!(
        accepted.contains(&("add_todo", Some(fix))),
        "prfix proposed the fix: {accepted:?}"
    );
    assert!(
        matches!(&step.turn, Some(TurnOutcome::Settled { todo, .. }) if todo.as_str() == fix),
        "{:?}",
        step.turn
    );
    assert_eq!(*worked.lock().expect("log"), [fix]);
    let state = store.goal(&spec.id).state().await.expect("the goal");
    let todo = state
        .todos
        .get(&fix.parse().expect("a valid id"))
        .expect("the fix todo");
    assert_eq!(todo.priority, loopx_kernel::Priority::P0);
    assert_eq!(
        todo.created_by,
        Actor::Capability(SourceId::new("prfix").expect("a valid id"))
    );
    let seen: Vec<String> = server
        .seen
        .lock()
        .expect("seen")
        .iter()
        .map(|s| s.path.clone())
        .collect();
    assert!(
        seen.iter()
            .any(|p| p.starts_with(&format!("/repos/acme/cli/commits/{HEAD}/check-runs"))),
        "the checks were read at the head: {seen:?}"
    );
}

/// The engine records what the bound capability's evidence rule finds in the facts it polls,
/// as the provider: CI passing at the head, read by the engine's own poll with no service and
/// no delivery, meets the criterion on the roll-up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ci_passing_at_the_head_of_a_poll_is_the_providers_evidence() {
    let server = github::serve(rest("success")).await;
    let providers = github_provider(&server.base);
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let mut spec = bound_spec("green-42", "prfix", json!({ "pulls": ["acme/cli#42"] }));
    spec.criteria.push(
        Criterion::new(
            "green",
            "CI passes at the head",
            "ci/rollup",
            "pr:acme/cli#42",
        )
        .expect("ids"),
    );
    store
        .goal(&spec.id)
        .create(&spec, SystemClock.now())
        .await
        .expect("created");

    engine(store.clone(), &spec, &providers, &Worked::default())
        .step(&spec.id)
        .await
        .expect("a step");

    let state = store.goal(&spec.id).state().await.expect("the goal");
    let evidence: Vec<(String, String)> = state
        .evidence
        .values()
        .map(|e| (e.produced_by.to_string(), e.revision.to_string()))
        .collect();
    assert_eq!(
        evidence,
        [("provider:github".to_owned(), format!("git:{HEAD}"))]
    );
    assert!(matches!(
        state.criterion_status(&"green".parse().expect("an id"), SystemClock.now()),
        Some(CriterionStatus::Met { .. })
    ));
}

#[tokio::test]
async fn a_capability_the_host_registered_judges_the_goal_bound_to_it() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let spec = bound_spec("greet", "greeter", json!({ "title": "say hello" }));
    store
        .goal(&spec.id)
        .create(&spec, SystemClock.now())
        .await
        .expect("created");
    let worked = Worked::default();

    let step = engine(store.clone(), &spec, &[], &worked)
        .step(&spec.id)
        .await
        .expect("a step");

    let proposed: Vec<(&str, &str)> = step
        .proposals
        .iter()
        .map(|p| (p.capability.as_str(), p.command.as_str()))
        .collect();
    assert_eq!(proposed, [("greeter", "add_todo")]);
    assert!(step.proposals.iter().all(|p| p.refused.is_none()));
    assert_eq!(*worked.lock().expect("log"), ["greet"]);

    // The host's registry refuses what its capability refuses, before any engine runs.
    let blank = bound_spec("blank", "greeter", json!({ "title": " " }));
    let error = registry()
        .wire(
            Engine::builder(
                "agent-a".parse().expect("a valid id"),
                store.clone(),
                Arc::new(SystemClock),
                executor_fn(|turn| async move { Ok(TurnReport::complete(turn.title)) }),
                validator_fn("tests", |_, _| async { Ok(Validation::passed("ok")) })
                    .expect("a valid id"),
            ),
            &blank,
            &[],
            Duration::ZERO,
        )
        .err()
        .expect("refused");
    assert_eq!(
        error.to_string(),
        "capability `greeter` refused its configuration: title must not be blank"
    );
}

#[tokio::test]
async fn a_goal_watching_through_a_provider_the_host_lacks_is_refused_by_name() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let spec = bound_spec("fix-42", "prfix", json!({ "pulls": ["acme/cli#42"] }));
    let builder = Engine::builder(
        "agent-a".parse().expect("a valid id"),
        store,
        Arc::new(SystemClock),
        executor_fn(|turn| async move { Ok(TurnReport::complete(turn.title)) }),
        validator_fn("tests", |_, _| async { Ok(Validation::passed("ok")) }).expect("an id"),
    );
    let error = registry()
        .wire(builder, &spec, &[], Duration::ZERO)
        .err()
        .expect("refused");
    assert_eq!(
        error.to_string(),
        "capability `prfix` asks for `pr:acme/cli#42` to be polled through provider `github`, which this host does not have"
    );
}
