//! Identity is not taken on first use, and keys sit where independence is real: an import
//! verifies every commit against the goal's registered keys, a person already known to the store
//! keeps their key, and the keys of providers, validators and capabilities are made apart from
//! the key directory agents read.

mod support;

use loopx_kernel::{GoalId, RecordedEvent};
use loopx_store::HistoryChain;
use serde_json::{Value, json};
use support::{Loopx, at};

/// A signed goal `g` whose gate `merge` its owner answered "no: wait for the review" at the
/// revision returned.
fn answered_gate() -> (Loopx, u64) {
    let lx = Loopx::sqlite();
    let t0 = at(29, "10:00");
    lx.ok(&["init", "--as", "person:maintainer"]);
    let on_g = |actor: &str, args: &[&str]| {
        lx.ok(&[&["--goal", "g", "--as", actor, "--now", &t0][..], args].concat())
    };
    on_g(
        "person:maintainer",
        &["goal", "create", "--objective", "o", "--agent", "agent-a"],
    );
    on_g(
        "person:maintainer",
        &["todo", "add", "--id", "t", "--title", "ship"],
    );
    on_g(
        "agent:agent-a",
        &[
            "gate",
            "open",
            "--id",
            "merge",
            "--question",
            "may I merge?",
            "--owner",
            "person:maintainer",
            "--todo",
            "t",
        ],
    );
    let answered = on_g(
        "person:maintainer",
        &[
            "gate",
            "answer",
            "--gate",
            "merge",
            "--answer",
            "no: wait for the review",
        ],
    );
    let revision = answered["receipt"]["revision"]
        .as_u64()
        .expect("a revision");
    (lx, revision)
}

/// The export with its `gate_resolved` answer rewritten and the chain recomputed as an exporter
/// does, so the file passes its trailer check; `strip` also drops every commit line.
fn forged(export: &str, strip: bool) -> String {
    let mut lines: Vec<String> = export
        .lines()
        .filter(|l| !(strip && l.starts_with("{\"commit\"")))
        .map(|l| {
            if l.contains("\"type\":\"gate_resolved\"") {
                l.replace("no: wait for the review", "yes: merge now")
            } else {
                l.to_owned()
            }
        })
        .collect();
    let goal = GoalId::new("g").expect("a goal id");
    let mut chain = HistoryChain::new(&goal);
    for line in lines.iter().filter(|l| l.starts_with("{\"schema\"")) {
        let event: RecordedEvent = serde_json::from_str(line).expect("an event");
        chain.push(&event).expect("no gap");
    }
    let last = lines.pop().expect("the trailer");
    let mut trailer: Value = serde_json::from_str(&last).expect("the trailer");
    trailer["trailer"]["chain"] = json!(chain.head());
    lines.push(trailer.to_string());
    format!("{}\n", lines.join("\n"))
}

#[test]
fn an_import_refuses_a_forged_gate_answer_and_takes_it_only_as_unverified() {
    let (lx, revision) = answered_gate();
    let exported = lx.run(&["--goal", "g", "export"]);
    assert_eq!(exported.code, 0, "{}", exported.stderr);
    assert!(exported.stdout.contains("no: wait for the review"));

    for strip in [false, true] {
        let other = Loopx::sqlite();
        other.ok(&["init"]);
        let file = other.file("forged.jsonl", &forged(&exported.stdout, strip));
        let (code, doc) = other.json(&["import", "--file", &file]);
        assert_eq!(code, 7, "strip {strip}: {doc}");
        assert_eq!(doc["error"]["code"], "history_unverified", "{doc}");
        let message = doc["error"]["message"].as_str().unwrap_or_default();
        // The answer is the forged commit; without commit lines nothing verifies from the first.
        let named = if strip { 1 } else { revision };
        assert!(
            message.contains(&format!("at revision {named}:")),
            "{message}"
        );
        assert!(
            doc["error"]["hint"]
                .as_str()
                .is_some_and(|h| h.contains("--accept-unverified")),
            "{doc}"
        );
        assert_eq!(other.ok(&["goal", "list"])["goals"], json!([]));
    }

    // Accepting it is someone's decision: without an actor, nothing is written.
    let other = Loopx::sqlite();
    other.ok(&["init"]);
    let file = other.file("forged.jsonl", &forged(&exported.stdout, false));
    let (code, doc) = other.json(&["import", "--accept-unverified", "--file", &file]);
    assert_eq!(code, 2, "{doc}");
    assert_eq!(doc["error"]["code"], "actor_missing");
    assert_eq!(other.ok(&["goal", "list"])["goals"], json!([]));
    let imported = other.ok(&[
        "--as",
        "person:ops",
        "import",
        "--accept-unverified",
        "--file",
        &file,
    ]);
    assert_eq!(imported["import"]["unverified"], 1, "{imported}");
    // `status`, its JSON and `goal show` say the history holds an unverified commit.
    let status = other.ok(&["--goal", "g", "status"]);
    let held = &status["status"]["unverified_history"];
    assert_eq!(held["commits"], 1, "{status}");
    assert_eq!(held["first_revision"], revision);
    assert_eq!(held["accepted_by"], json!({"kind": "person", "id": "ops"}));
    let shown = other.ok(&["--goal", "g", "goal", "show"]);
    assert_eq!(shown["goal"]["unverified_history"]["commits"], 1);
    let words = other.run(&["--goal", "g", "status"]);
    assert!(
        words.stdout.contains("1 unverified commit(s)"),
        "{}",
        words.stdout
    );

    // The export as written imports verified, and says nothing of the kind.
    let third = Loopx::sqlite();
    third.ok(&["init"]);
    let file = third.file("g.jsonl", &exported.stdout);
    let imported = third.ok(&["import", "--file", &file]);
    assert_eq!(imported["import"]["unverified"], 0, "{imported}");
    let status = third.ok(&["--goal", "g", "status"]);
    assert!(
        status["status"].get("unverified_history").is_none(),
        "{status}"
    );
}

#[test]
fn a_goal_owned_by_a_person_the_store_knows_by_another_key_is_refused() {
    let lx = Loopx::sqlite();
    let t0 = at(29, "10:00");
    lx.ok(&["init", "--as", "person:maintainer"]);
    let create = |keys: &str, actor: &str, goal: &str, more: &[&str]| {
        let args = [
            &[
                "--keys",
                keys,
                "--as",
                actor,
                "--now",
                &t0,
                "--goal",
                goal,
                "goal",
                "create",
                "--objective",
                "o",
                "--owner",
                "maintainer",
            ][..],
            more,
        ]
        .concat();
        lx.json(&args)
    };
    let own = format!("{}.keys", lx.store);
    assert_eq!(create(&own, "person:maintainer", "g1", &[]).0, 0);
    // The maintainer again, with the key the store knows: fine.
    assert_eq!(create(&own, "person:maintainer", "g2", &[]).0, 0);
    // An agent, from its own key directory, acting as the maintainer: a new key for them.
    let agent_keys = lx.path("agent-keys").display().to_string();
    let (code, doc) = create(&agent_keys, "person:maintainer", "g3", &[]);
    assert_eq!(code, 3, "{doc}");
    assert_eq!(doc["error"]["code"], "owner_key_differs");
    let message = doc["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("person:maintainer"), "{message}");
    assert!(
        message.contains("`g1`") && message.contains("`g2`"),
        "{message}"
    );
    assert!(
        doc["error"]["hint"]
            .as_str()
            .is_some_and(|h| h.contains("--new-owner-key")),
        "{doc}"
    );
    // Nothing changed: no goal, no key made.
    let goals = lx.ok(&["goal", "list"])["goals"].as_array().map(Vec::len);
    assert_eq!(goals, Some(2));
    assert!(!lx.path("agent-keys").exists());
    // Said to be a new key, it is registered.
    let (code, doc) = create(&agent_keys, "person:maintainer", "g3", &["--new-owner-key"]);
    assert_eq!(code, 0, "{doc}");
}

/// The files of a key directory.
fn files(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

#[test]
fn providers_and_validators_keys_are_made_apart_from_the_agents() {
    let lx = Loopx::sqlite();
    let t0 = at(29, "10:00");
    lx.ok(&["init", "--as", "person:maintainer"]);
    lx.ok(&[
        "--goal",
        "g",
        "--as",
        "person:maintainer",
        "--now",
        &t0,
        "goal",
        "create",
        "--objective",
        "fix the PR",
        "--agent",
        "agent-a",
        "--capability",
        "prfix",
        "--repo",
        "acme/cli",
        "--pr",
        "42",
        "--criterion",
        "ci,ci,pr:acme/cli#42,CI passes",
    ]);
    let agents = files(&lx.path("loopx.db.keys"));
    assert_eq!(
        agents,
        vec!["agent=3Aagent-a.key", "person=3Amaintainer.key"],
        "the agents' key directory holds people's and agents' keys only"
    );
    let service = files(&lx.path("loopx.db.service-keys"));
    for held in [
        "provider=3Agithub.key",
        "provider=3Agit.key",
        "validator=3Avalidate=2Eagent-a.key",
        "capability=3Aprfix.key",
    ] {
        assert!(service.iter().any(|f| f == held), "{held}: {service:?}");
    }
    // Sound: no warning.
    assert!(lx.ok(&["doctor"])["doctor"].get("key_warnings").is_none());

    // The agent, with only its own key directory, cannot record CI evidence as the provider.
    let agent_keys = lx.path("loopx.db.keys").display().to_string();
    let (code, doc) = lx.json(&[
        "--service-keys",
        &agent_keys,
        "--goal",
        "g",
        "--as",
        "provider:github",
        "--now",
        &t0,
        "evidence",
        "add",
        "--id",
        "ci-green",
        "--check",
        "ci",
        "--subject",
        "pr:acme/cli#42",
        "--revision",
        "git:abc",
        "--outcome",
        "passed",
        "--summary",
        "CI passed",
    ]);
    assert_eq!(code, 3, "{doc}");
    assert_eq!(doc["error"]["code"], "signature_missing", "{doc}");
    let criteria = lx.ok(&["--goal", "g", "--now", &t0, "goal", "show"]);
    assert_eq!(criteria["goal"]["criteria"][0]["status"], "no_evidence");
}

#[test]
fn doctor_and_status_warn_of_a_service_key_in_the_agents_directory() {
    let lx = Loopx::sqlite();
    let t0 = at(29, "10:00");
    lx.ok(&["init", "--as", "person:maintainer"]);
    lx.ok(&[
        "--goal",
        "g",
        "--as",
        "person:maintainer",
        "--now",
        &t0,
        "goal",
        "create",
        "--objective",
        "o",
        "--agent",
        "agent-a",
    ]);
    // A validator's key made where the agents read theirs (as older versions did).
    let agent_keys = lx.path("loopx.db.keys").display().to_string();
    lx.ok(&["--service-keys", &agent_keys, "key", "new", "validator:ci"]);
    let doctor = lx.ok(&["doctor"]);
    assert_eq!(doctor["doctor"]["ok"], true, "a warning, not damage");
    let warnings = &doctor["doctor"]["key_warnings"];
    assert_eq!(warnings[0]["actor"], "validator:ci", "{doctor}");
    assert!(
        warnings[0]["detail"]
            .as_str()
            .is_some_and(|d| d.contains("can sign as validator:ci")),
        "{doctor}"
    );
    let status = lx.ok(&["--goal", "g", "status"]);
    assert_eq!(status["status"]["key_warnings"][0]["actor"], "validator:ci");
    let words = lx.run(&["--goal", "g", "status"]);
    assert!(
        words
            .stdout
            .contains("warn  the agents' key directory holds the key of validator:ci"),
        "{}",
        words.stdout
    );
}
