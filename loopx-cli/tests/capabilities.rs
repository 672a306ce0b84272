//! Goals bound to capabilities through the real binary: `goal create --capability prfix --repo
//! acme/cli --pr 42`, then `loopx run` against a loopback stand-in of GitHub's REST API. While
//! the check at the pull request's head is queued, the capability waits on a quiet monitor;
//! once the stand-in reports it failed, the next run's poll makes the monitor the capability's
//! fix todo, which the agent works and which stays its next step.

mod support;

#[path = "../../loopx-provider/tests/support/github.rs"]
mod github;

use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use support::{Loopx, git};

const GOAL: &str = "fix-42";
const HEAD: &str = "0123456789abcdef0123456789abcdef01234567";
const MONITOR: &str = "pr:acme/cli#42/await-checks@0123456789ab";
const FIX: &str = "pr:acme/cli#42/ci-fix@0123456789ab";
const TOKEN: &str = "ghp_capability_test_token_never_shown_42";
const TOKEN_VAR: &str = "LOOPX_TEST_GITHUB_TOKEN";

/// The turn: note the todo it was handed outside the checkout (so the tree stays clean), and
/// keep the todo open, as an agent that has looked at the failure and not yet fixed it would.
const TURN: &str = r#"echo "$LOOPX_TODO" >> ../worked.txt
echo '{"transition":{"kind":"keep_open"},"summary":"read the failing build"}'
"#;

/// How the check run at the head stands, as the stand-in reports it.
#[derive(Clone, Copy)]
enum Check {
    Queued,
    Failed,
}

/// GitHub's REST API for `acme/cli#42` on loopback, the stand-in the provider's tests serve,
/// on a runtime of its own; `check` says how its one check run stands.
struct StandIn {
    server: github::Server,
    check: Arc<Mutex<Check>>,
    _runtime: tokio::runtime::Runtime,
}

impl StandIn {
    fn start() -> StandIn {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("a runtime");
        let check = Arc::new(Mutex::new(Check::Queued));
        let server = runtime.block_on(github::serve(answers(Arc::clone(&check))));
        StandIn {
            server,
            check,
            _runtime: runtime,
        }
    }

    fn set(&self, check: Check) {
        *self.check.lock().expect("check") = check;
    }

    /// Each request's path and `Authorization` header, in order.
    fn seen(&self) -> Vec<(String, Option<String>)> {
        self.server
            .seen
            .lock()
            .expect("seen")
            .iter()
            .map(|s| (s.path.clone(), s.headers.get("authorization").cloned()))
            .collect()
    }
}

fn answers(check: Arc<Mutex<Check>>) -> github::Handler {
    Arc::new(move |seen: &github::Seen| {
        let path = seen.path.split('?').next().unwrap_or_default();
        let body = match path {
            "/repos/acme/cli/pulls/42" => json!({
                "number": 42, "state": "open", "title": "json output", "draft": false,
                "merged": false, "mergeable_state": "clean",
                "created_at": "2026-11-29T09:00:00Z", "updated_at": "2026-11-29T09:30:00Z",
                "head": { "ref": "json-output", "sha": HEAD },
                "base": { "ref": "main", "sha": "fedcba9876543210fedcba9876543210fedcba98" },
                "user": { "login": "agent-a" },
            }),
            "/repos/acme/cli/pulls/42/reviews" => json!([]),
            p if p == format!("/repos/acme/cli/commits/{HEAD}/check-runs") => {
                let run = match *check.lock().expect("check") {
                    Check::Queued => json!({ "status": "queued", "conclusion": null }),
                    Check::Failed => json!({
                        "status": "completed", "conclusion": "failure",
                        "completed_at": "2026-11-29T09:40:00Z",
                    }),
                };
                let mut run = run.as_object().cloned().unwrap_or_default();
                for (name, value) in [
                    ("id", json!(7)),
                    ("name", json!("build")),
                    ("head_sha", json!(HEAD)),
                    ("started_at", json!("2026-11-29T09:31:00Z")),
                    ("app", json!({ "slug": "ci" })),
                    ("pull_requests", json!([{ "number": 42 }])),
                ] {
                    run.insert(name.to_owned(), value);
                }
                json!({ "total_count": 1, "check_runs": [run] })
            }
            p if p == format!("/repos/acme/cli/commits/{HEAD}/status") => {
                json!({ "state": "pending", "sha": HEAD, "total_count": 0, "statuses": [] })
            }
            _ => {
                return github::Reply {
                    status: 404,
                    ..github::ok(r#"{"message": "Not Found"}"#)
                };
            }
        };
        github::ok(&body.to_string())
    })
}

/// A store, and a checkout `repo` holding the turn script.
fn setup(lx: &Loopx) {
    lx.ok(&["init"]);
    let repo = lx.path("repo");
    std::fs::create_dir_all(&repo).expect("repo dir");
    std::fs::write(repo.join("turn.sh"), TURN).expect("turn script");
    git(&repo, &["init", "-q"]);
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-q", "-m", "start"]);
}

fn create(lx: &Loopx, extra: &[&str]) -> support::Run {
    let args = [
        &[
            "--json",
            "--goal",
            GOAL,
            "--as",
            "person:olivia",
            "goal",
            "create",
            "--objective",
            "CI of acme/cli#42 is green",
            "--agent",
            "agent-a",
        ][..],
        extra,
    ]
    .concat();
    lx.run(&args)
}

/// One `loopx run` step of `agent-a` against the stand-in, the token in its variable.
fn step(lx: &Loopx, standin: &StandIn) -> (i32, Value) {
    let run = lx.run_env(
        &[
            "--json",
            "--goal",
            GOAL,
            "run",
            "--agent",
            "agent-a",
            "--exec",
            "sh turn.sh",
            "--validate",
            "true",
            "--subject",
            "repo:acme/cli",
            "--workspace",
            "repo",
            "--github-api",
            &standin.server.base,
            "--github-token-env",
            TOKEN_VAR,
            "--max-steps",
            "1",
        ],
        &[(TOKEN_VAR, TOKEN)],
    );
    assert!(
        !run.stdout.contains(TOKEN) && !run.stderr.contains(TOKEN),
        "the token is never shown"
    );
    (run.code, run.json())
}

fn todos(lx: &Loopx) -> Vec<Value> {
    let listed = lx.ok(&["--goal", GOAL, "todo", "list"]);
    listed["todos"].as_array().cloned().unwrap_or_default()
}

fn todo<'a>(todos: &'a [Value], id: &str) -> &'a Value {
    todos
        .iter()
        .find(|t| t["id"] == id)
        .unwrap_or_else(|| panic!("no todo `{id}` in {todos:#?}"))
}

/// The accepted proposals of a run's steps, as (command, target).
fn accepted(run: &Value) -> Vec<(String, String)> {
    run["steps"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|s| s["proposals"].as_array().cloned().unwrap_or_default())
        .filter(|p| p.get("refused").is_none() && p["capability"] == "prfix")
        .map(|p| {
            (
                p["command"].as_str().unwrap_or_default().to_owned(),
                p["target"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

#[test]
fn a_failing_check_at_the_head_becomes_the_fix_todo_of_a_goal_bound_to_prfix() {
    story(&Loopx::sqlite());
}

#[test]
fn a_failing_check_at_the_head_becomes_the_fix_todo_on_postgres() {
    story(&Loopx::with_store(
        loopx_store::test_cluster::cluster().database(),
    ));
}

#[allow(clippy::too_many_lines, reason = "one story, told in order")]
fn story(lx: &Loopx) {
    setup(lx);
    let standin = StandIn::start();

    // The goal declares its capability and the pull request it is about; on a signed goal the
    // capability's and the GitHub provider's keys are made and registered with it.
    let created = create(
        lx,
        &["--capability", "prfix", "--repo", "acme/cli", "--pr", "42"],
    );
    assert_eq!(created.code, 0, "{}{}", created.stdout, created.stderr);
    let created = created.json();
    // It follows its pull request from now on: the first delivery about it reaches the goal.
    let binding = json!({
        "name": "prfix",
        "config": { "pulls": ["acme/cli#42"] },
        "follows": ["pr:acme/cli#42"],
    });
    assert_eq!(created["goal"]["capability"], binding);
    let registered: Vec<&str> = created["goal"]["keys"]
        .as_array()
        .expect("keys")
        .iter()
        .filter_map(|k| k["actor"].as_str())
        .collect();
    for actor in ["capability:prfix", "provider:github"] {
        assert!(registered.contains(&actor), "{actor} in {registered:?}");
    }
    let shown = lx.ok(&["--goal", GOAL, "goal", "show"]);
    assert_eq!(shown["goal"]["capability"], binding);
    let status = lx.ok(&["--goal", GOAL, "status"]);
    assert_eq!(status["status"]["capability"], binding);
    let words = lx.run(&["--goal", GOAL, "status"]);
    assert!(
        words
            .stdout
            .contains(r#"capability: prfix {"pulls":["acme/cli#42"]}"#),
        "{}",
        words.stdout
    );

    // The check at the head is queued: the capability waits on a quiet monitor.
    let (code, first) = step(lx, &standin);
    assert_eq!(code, 10, "run stops at `wait`: {first:#}");
    let observed: Vec<&str> = first["steps"][0]["observed"]
        .as_array()
        .expect("observed")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(observed.contains(&"pr:acme/cli#42"), "{observed:?}");
    assert!(observed.contains(&"ci:acme/cli#42"), "{observed:?}");
    assert!(
        accepted(&first).contains(&("add_todo".to_owned(), MONITOR.to_owned())),
        "{first:#}"
    );
    assert_eq!(first["decision"]["kind"], "wait");
    let listed = todos(lx);
    let monitor = todo(&listed, MONITOR);
    assert_eq!(monitor["class"]["kind"], "monitor");
    assert_eq!(
        monitor["created_by"],
        json!({ "kind": "capability", "id": "prfix" })
    );
    assert!(
        !listed.iter().any(|t| t["id"] == FIX),
        "no fix before CI fails"
    );

    // The stand-in reports the check failed at the head: the next run's poll sees it, the
    // capability supersedes the monitor with its fix, and the agent is handed the fix.
    standin.set(Check::Failed);
    let (code, second) = step(lx, &standin);
    assert_eq!(code, 14, "one step, stopped with work to do: {second:#}");
    assert!(
        accepted(&second).contains(&("supersede".to_owned(), MONITOR.to_owned())),
        "{second:#}"
    );
    assert_eq!(
        second["steps"][0]["turn"]["outcome"], "settled",
        "{second:#}"
    );
    assert_eq!(second["steps"][0]["turn"]["todo"], FIX);
    let worked = std::fs::read_to_string(lx.path("worked.txt")).expect("the turn ran");
    assert_eq!(worked.lines().collect::<Vec<_>>(), [FIX]);

    let listed = todos(lx);
    let fix = todo(&listed, FIX);
    assert_eq!(fix["priority"], "P0");
    assert_eq!(fix["status"], "open");
    assert_eq!(
        fix["created_by"],
        json!({ "kind": "capability", "id": "prfix" })
    );
    assert_eq!(todo(&listed, MONITOR)["status"], "superseded");
    let next = lx.ok(&["--goal", GOAL, "--as", "agent:agent-a", "next"]);
    assert_eq!(next["decision"]["kind"], "continue", "{next:#}");
    assert_eq!(next["decision"]["todo"], FIX);

    // Every poll went to the stand-in with the token from its variable, and only there.
    let seen = standin.seen();
    assert!(
        seen.iter().any(
            |(path, _)| path.starts_with(&format!("/repos/acme/cli/commits/{HEAD}/check-runs"))
        ),
        "{seen:?}"
    );
    let bearer = format!("Bearer {TOKEN}");
    assert!(
        seen.iter()
            .all(|(_, auth)| auth.as_deref() == Some(bearer.as_str())),
        "{seen:?}"
    );
}

#[test]
fn a_binding_is_checked_before_anything_is_written() {
    let lx = Loopx::sqlite();
    setup(&lx);

    let unknown = create(&lx, &["--capability", "triage"]);
    assert_eq!(unknown.code, 2, "{}{}", unknown.stdout, unknown.stderr);
    let error = &unknown.json()["error"];
    assert_eq!(error["code"], "capability_unknown");
    assert_eq!(
        error["message"],
        "no capability named `triage` is registered; known: automl, prfix, research"
    );

    let config = lx.json_file("prfix.json", &json!({ "required_approvals": "two" }));
    let malformed = create(
        &lx,
        &["--capability", "prfix", "--capability-config", &config],
    );
    assert_eq!(
        malformed.code, 7,
        "{}{}",
        malformed.stdout, malformed.stderr
    );
    let error = &malformed.json()["error"];
    assert_eq!(error["code"], "capability_config_invalid");
    let message = error["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with(
            "the configuration of capability `prfix` is malformed at `required_approvals`:"
        ),
        "{message}"
    );

    let bad_pull = create(
        &lx,
        &["--capability", "prfix", "--repo", "acme", "--pr", "42"],
    );
    assert_eq!(bad_pull.code, 7, "{}{}", bad_pull.stdout, bad_pull.stderr);
    assert!(
        bad_pull.json()["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("pull request `acme#42` is not written owner/name#number"),
        "{}",
        bad_pull.stdout
    );

    let elsewhere = create(
        &lx,
        &[
            "--capability",
            "research",
            "--repo",
            "acme/cli",
            "--pr",
            "1",
        ],
    );
    assert_eq!(
        elsewhere.code, 2,
        "{}{}",
        elsewhere.stdout, elsewhere.stderr
    );
    assert_eq!(elsewhere.json()["error"]["code"], "capability_flag_invalid");

    let goals = lx.ok(&["goal", "list"]);
    assert_eq!(goals["goals"], json!([]), "nothing was written");
}

#[test]
fn the_owner_rebinds_and_unbinds_the_goal() {
    let lx = Loopx::sqlite();
    setup(&lx);
    let created = create(
        &lx,
        &["--capability", "prfix", "--repo", "acme/cli", "--pr", "42"],
    );
    assert_eq!(created.code, 0, "{}{}", created.stdout, created.stderr);
    let owner = ["--goal", GOAL, "--as", "person:olivia"];

    let config = lx.json_file("research.json", &json!({ "decider": "olivia" }));
    lx.ok(&[
        &owner[..],
        &[
            "goal",
            "amend",
            "--capability",
            "research",
            "--capability-config",
            &config,
        ],
    ]
    .concat());
    let shown = lx.ok(&["--goal", GOAL, "goal", "show"]);
    assert_eq!(
        shown["goal"]["capability"],
        json!({ "name": "research", "config": { "decider": "olivia" } })
    );
    let keys: Vec<&str> = shown["goal"]["keys"]
        .as_array()
        .expect("keys")
        .iter()
        .filter_map(|k| k["actor"].as_str())
        .collect();
    assert!(keys.contains(&"capability:research"), "{keys:?}");

    lx.ok(&[&owner[..], &["goal", "amend", "--no-capability"]].concat());
    let shown = lx.ok(&["--goal", GOAL, "goal", "show"]);
    assert!(shown["goal"].get("capability").is_none(), "{shown:#}");

    // Anyone but the owner is refused, and the goal stays as it was.
    let refused = lx.run(&[
        "--json",
        "--goal",
        GOAL,
        "--as",
        "agent:agent-a",
        "goal",
        "amend",
        "--capability",
        "prfix",
    ]);
    assert_ne!(refused.code, 0, "{}{}", refused.stdout, refused.stderr);
    let shown = lx.ok(&["--goal", GOAL, "goal", "show"]);
    assert!(shown["goal"].get("capability").is_none(), "{shown:#}");
}
