//! Signed commands through the real binary: a goal is signed by default; a command without a
//! signature, with another key's, or from an actor whose key the owner never registered is
//! refused (exit 3, the kernel's code) and changes nothing; the refusal's own instructions
//! (`loopx key new`, `loopx goal amend --register-key ACTOR=KEY`) fix it as written; key files
//! others may read are refused; `loopx run` cannot act for an agent without its key.

mod support;

use std::os::unix::fs::PermissionsExt as _;

use support::Loopx;

const GOAL: &str = "g";

fn signed_goal() -> Loopx {
    Loopx::signed_goal(GOAL)
}

fn add_todo(lx: &Loopx, actor: &str, id: &str, env: &[(&str, &str)]) -> support::Run {
    lx.run_env(
        &[
            "--json", "--goal", GOAL, "--as", actor, "todo", "add", "--id", id, "--title", id,
        ],
        env,
    )
}

#[test]
fn a_goal_is_signed_by_default_and_says_so() {
    let lx = signed_goal();
    let status = lx.ok(&["--goal", GOAL, "status"]);
    assert_eq!(status["status"]["identity"], "signed");
    let human = lx.run(&["--goal", GOAL, "status"]).stdout;
    assert!(human.contains("identity: signed"), "{human}");
    // The owner's and the agent's keys are registered, and their files are private.
    let show = lx.ok(&["--goal", GOAL, "goal", "show"]);
    let actors: Vec<&str> = show["goal"]["keys"]
        .as_array()
        .expect("keys")
        .iter()
        .filter_map(|k| k["actor"].as_str())
        .collect();
    assert!(
        actors.contains(&"person:owner") && actors.contains(&"agent:agent-a"),
        "{actors:?}"
    );
    for entry in std::fs::read_dir(lx.path("loopx.db.keys")).expect("the key directory") {
        let entry = entry.expect("an entry");
        let mode = entry.metadata().expect("stat").permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{:?}", entry.file_name());
    }
    // A signed agent acts.
    let run = add_todo(&lx, "agent:agent-a", "t1", &[]);
    assert_eq!(run.code, 0, "{}", run.stdout);
}

#[test]
fn an_unsigned_command_is_refused_and_its_hint_fixes_it_as_written() {
    let lx = signed_goal();
    let revision = lx.revision(GOAL);

    // No key at all: refused before anything else, nothing written.
    let run = add_todo(&lx, "agent:agent-b", "t1", &[]);
    assert_eq!(run.code, 3, "{}", run.stdout);
    let error = run.json();
    assert_eq!(error["error"]["code"], "signature_missing");
    let hint = error["error"]["hint"].as_str().unwrap_or_default();
    assert!(hint.contains("loopx key new agent:agent-b"), "{hint}");
    assert!(
        hint.contains("loopx goal amend --register-key agent:agent-b=KEY"),
        "{hint}"
    );
    assert_eq!(lx.revision(GOAL), revision, "a refused command wrote");

    // A key, not yet registered by the owner.
    let made = lx.ok(&["key", "new", "agent:agent-b"]);
    let key = made["key"]["public"]
        .as_str()
        .expect("a public key")
        .to_owned();
    let run = add_todo(&lx, "agent:agent-b", "t1", &[]);
    assert_eq!(run.code, 3, "{}", run.stdout);
    assert_eq!(run.json()["error"]["code"], "key_unregistered");
    assert_eq!(lx.revision(GOAL), revision, "a refused command wrote");

    // The owner registers it exactly as the hint says (and the agent).
    let register = format!("agent:agent-b={key}");
    lx.ok(&[
        "--goal",
        GOAL,
        "--as",
        "person:owner",
        "goal",
        "amend",
        "--register-key",
        &register,
        "--register-agent",
        "agent-b",
    ]);
    let run = add_todo(&lx, "agent:agent-b", "t1", &[]);
    assert_eq!(run.code, 0, "{}", run.stdout);

    // Revoked, it no longer signs for the goal.
    lx.ok(&[
        "--goal",
        GOAL,
        "--as",
        "person:owner",
        "goal",
        "amend",
        "--revoke-key",
        &register,
    ]);
    let run = add_todo(&lx, "agent:agent-b", "t2", &[]);
    assert_eq!(run.code, 3, "{}", run.stdout);
    assert_eq!(run.json()["error"]["code"], "key_unregistered");
}

#[test]
fn a_command_signed_with_another_key_is_refused() {
    let lx = signed_goal();
    let revision = lx.revision(GOAL);
    // Another key of agent-a's, in a key directory of its own: the goal does not know it.
    let elsewhere = lx.path("elsewhere");
    let other = lx.ok(&[
        "--keys",
        elsewhere.to_str().expect("a path"),
        "key",
        "new",
        "agent:agent-a",
    ]);
    let file = other["key"]["file"].as_str().expect("a file").to_owned();
    let run = add_todo(&lx, "agent:agent-a", "t1", &[("LOOPX_KEY", &file)]);
    assert_eq!(run.code, 3, "{}", run.stdout);
    assert_eq!(run.json()["error"]["code"], "signature_invalid");
    assert_eq!(lx.revision(GOAL), revision, "a refused command wrote");
    // LOOPX_KEY must hold the acting actor's key.
    let run = add_todo(&lx, "agent:agent-b", "t1", &[("LOOPX_KEY", &file)]);
    assert_eq!(run.code, 2, "{}", run.stdout);
    assert_eq!(run.json()["error"]["code"], "key_other_actor");
}

#[test]
fn a_key_file_others_may_read_is_refused_and_its_secret_never_shown() {
    let lx = signed_goal();
    let file = lx.path("loopx.db.keys/agent=3Aagent-a.key");
    let text = std::fs::read_to_string(&file).expect("the key file");
    let secret = text
        .lines()
        .find_map(|l| l.strip_prefix("secret: "))
        .expect("a secret line")
        .to_owned();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let revision = lx.revision(GOAL);
    let run = add_todo(&lx, "agent:agent-a", "t1", &[]);
    assert_eq!(run.code, 7, "{}", run.stdout);
    assert_eq!(run.json()["error"]["code"], "key_unprotected");
    assert!(!run.stdout.contains(&secret) && !run.stderr.contains(&secret));
    assert_eq!(lx.revision(GOAL), revision, "a refused command wrote");
    // `key new` never overwrites a key.
    let again = lx.run(&["--json", "key", "new", "agent:agent-a"]);
    assert_eq!(again.code, 1, "{}", again.stdout);
    assert_eq!(again.json()["error"]["code"], "key_exists");
}

#[test]
fn a_declared_goal_takes_actors_at_their_word_and_says_so() {
    let lx = Loopx::sqlite();
    lx.ok(&["init"]);
    lx.ok(&[
        "--goal",
        GOAL,
        "--as",
        "person:owner",
        "goal",
        "create",
        "--objective",
        "an experiment",
        "--agent",
        "agent-a",
        "--identity",
        "declared",
    ]);
    let status = lx.ok(&["--goal", GOAL, "status"]);
    assert_eq!(status["status"]["identity"], "declared");
    let human = lx.run(&["--goal", GOAL, "status"]).stdout;
    assert!(human.contains("identity: declared"), "{human}");
    // Any actor, no key: accepted.
    let run = add_todo(
        &lx,
        "agent:agent-a",
        "t1",
        &[("LOOPX_KEYS", lx.path("empty").to_str().expect("a path"))],
    );
    assert_eq!(run.code, 0, "{}", run.stdout);
}

#[test]
fn run_cannot_act_for_an_agent_without_its_registered_key() {
    let lx = signed_goal();
    lx.ok(&[
        "--goal",
        GOAL,
        "--as",
        "person:owner",
        "todo",
        "add",
        "--id",
        "w",
        "--title",
        "w",
    ]);
    let repo = lx.path("repo");
    std::fs::create_dir_all(&repo).expect("repo");
    let git = |args: &[&str]| {
        let status = std::process::Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@example.invalid"])
            .args(args)
            .current_dir(&repo)
            .status()
            .expect("git");
        assert!(status.success(), "git {args:?}");
    };
    git(&["init", "-q"]);
    git(&["commit", "-q", "--allow-empty", "-m", "start"]);
    let empty = lx.path("no-keys");
    let revision = lx.revision(GOAL);
    let run = lx.run(&[
        "--json",
        "--goal",
        GOAL,
        "--as",
        "agent:agent-a",
        "--keys",
        empty.to_str().expect("a path"),
        // `provider:git`'s key sits in the service's key directory: none there either.
        "--service-keys",
        empty.to_str().expect("a path"),
        "run",
        "--workspace",
        repo.to_str().expect("a path"),
        "--exec",
        "true",
        "--validate",
        "true",
        "--check",
        "tests",
        "--subject",
        "repo:demo",
    ]);
    assert_eq!(run.code, 3, "{}\n{}", run.stdout, run.stderr);
    assert_eq!(run.json()["error"]["code"], "signature_missing");
    // Nothing of the agent's entered the goal (the head observation is refused too).
    assert_eq!(
        lx.revision(GOAL),
        revision,
        "a command without a key was recorded"
    );
}
