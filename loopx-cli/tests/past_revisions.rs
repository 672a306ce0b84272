//! The verbs that read across goals and back in time: `loopx ready` (an agent's ready work on
//! every goal), `loopx status --at-revision N` (the goal as it stood then, replayed from its
//! history) and `loopx log --from N --to M` (a range of it); bad ranges are typed errors naming
//! the head revision, and change nothing.

mod support;

use loopx_store::Retention as _;
use serde_json::{Value, json};
use support::{GOAL, Loopx, at, redact, redact_keys, seed_story};

/// The revision the seed story's gate was opened at (its receipt).
fn gate_opened(steps: &[(String, Value)]) -> u64 {
    let (_, opened) = steps
        .iter()
        .find(|(name, _)| name == "gate_open")
        .expect("the story opens a gate");
    opened["receipt"]["revision"].as_u64().expect("a revision")
}

#[test]
fn status_at_a_past_revision_shows_the_goal_as_it_stood_then() {
    let lx = Loopx::sqlite();
    let steps = seed_story(&lx);
    let head = lx.revision(GOAL);
    let opened = gate_opened(&steps);
    let at_gate = opened.to_string();

    let mut then = lx.ok(&["--goal", GOAL, "status", "--at-revision", &at_gate]);
    let now = lx.ok(&["--goal", GOAL, "status"]);

    let status = &then["status"];
    assert_eq!(status["revision"], opened);
    assert_eq!(status["head_revision"], head);
    assert_eq!(
        status["at"], "2026-11-29T10:14:00.000Z",
        "the gate's commit time"
    );
    assert_eq!(status["gates"][0]["id"], "error-code-name", "{then:#}");
    assert_eq!(status["terminal"], Value::Null, "not over then");
    let open: Vec<&str> = status["board"]["open"]
        .as_array()
        .expect("open todos")
        .iter()
        .filter_map(|t| t["id"].as_str())
        .collect();
    assert_eq!(open, ["update-help", "document-json"]);
    assert_eq!(status["board"]["done"][0]["id"], "change-output-layer");
    // Today the gate is answered and the goal accepted; the current board has no head_revision.
    assert_eq!(now["status"]["gates"], json!([]));
    assert_eq!(now["status"]["terminal"], "accepted", "{now:#}");
    assert!(now["status"].get("head_revision").is_none());
    redact_keys(&mut then);
    insta::assert_json_snapshot!("status_at_the_gate", then);

    // The first revision is the goal as created; the head is the board of today.
    let first = lx.ok(&["--goal", GOAL, "status", "--at-revision", "1"]);
    assert_eq!(first["status"]["board"]["open"], json!([]));
    let at_head = lx.ok(&[
        "--goal",
        GOAL,
        "--now",
        &at(30, "09:50"),
        "status",
        "--at-revision",
        &head.to_string(),
    ]);
    assert_eq!(at_head["status"]["board"], now["status"]["board"]);

    let words = lx.run(&["--goal", GOAL, "status", "--at-revision", &at_gate]);
    assert_eq!(words.code, 0, "{}", words.stderr);
    assert!(words.stdout.contains("error-code-name"), "{}", words.stdout);
    assert!(
        words.stdout.contains(&format!(
            "as it stood at revision {opened} (2026-11-29T10:14:00.000Z); the goal is now at revision {head}"
        )),
        "{}",
        words.stdout
    );
}

#[test]
fn log_prints_a_range_of_revisions() {
    let lx = Loopx::sqlite();
    let steps = seed_story(&lx);
    let opened = gate_opened(&steps);
    let (from, to) = (opened - 1, opened + 1);

    let mut range = lx.ok(&[
        "--goal",
        GOAL,
        "log",
        "--from",
        &from.to_string(),
        "--to",
        &to.to_string(),
    ]);

    let revisions: Vec<u64> = range["events"]
        .as_array()
        .expect("events")
        .iter()
        .filter_map(|e| e["revision"].as_u64())
        .collect();
    assert_eq!(revisions, [from, opened, to]);
    assert_eq!(range["events"][1]["event"]["type"], "gate_opened");
    redact_keys(&mut range);
    // The validator's signature is over its key, new in every run.
    redact(
        &mut range,
        "/events/0/event/verdict/signature",
        "[signature]",
    );
    insta::assert_json_snapshot!("log_around_the_gate", range);

    // --from alone runs to the head; --to alone starts at the first revision; --limit cuts.
    let head = lx.revision(GOAL);
    let tail = lx.ok(&["--goal", GOAL, "log", "--from", &head.to_string()]);
    assert_eq!(tail["events"].as_array().map(Vec::len), Some(1));
    assert_eq!(tail["events"][0]["revision"], head);
    let start = lx.ok(&["--goal", GOAL, "log", "--to", "2"]);
    let start: Vec<u64> = start["events"]
        .as_array()
        .expect("events")
        .iter()
        .filter_map(|e| e["revision"].as_u64())
        .collect();
    assert_eq!(start, [1, 2]);
    let cut = lx.ok(&[
        "--goal", GOAL, "log", "--from", "2", "--to", "9", "--limit", "3",
    ]);
    assert_eq!(cut["events"].as_array().map(Vec::len), Some(3));
    let words = lx.run(&["--goal", GOAL, "log", "--from", "1", "--to", "1"]);
    assert!(words.stdout.contains("goal_created"), "{}", words.stdout);
    assert_eq!(words.stdout.lines().count(), 2, "a header and one event");
}

#[test]
fn a_bad_revision_or_range_is_a_typed_error_naming_the_head() {
    let lx = Loopx::sqlite();
    seed_story(&lx);
    let head = lx.revision(GOAL);
    let beyond = (head + 1).to_string();
    let named = format!("is at revision {head}");
    for (args, code) in [
        (
            vec!["status", "--at-revision", "0"],
            "revision_out_of_range",
        ),
        (
            vec!["status", "--at-revision", beyond.as_str()],
            "revision_out_of_range",
        ),
        (vec!["log", "--from", "0"], "revision_out_of_range"),
        (
            vec!["log", "--from", beyond.as_str()],
            "revision_out_of_range",
        ),
        (
            vec!["log", "--from", "1", "--to", beyond.as_str()],
            "revision_out_of_range",
        ),
        (
            vec!["log", "--from", "5", "--to", "3"],
            "revision_range_reversed",
        ),
    ] {
        let (exit, error) = lx.json(&[&["--goal", GOAL][..], &args].concat());
        assert_eq!(exit, 2, "{args:?}: {error:#}");
        assert_eq!(error["error"]["code"], code, "{args:?}: {error:#}");
        let message = error["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(&named), "{args:?}: {message}");
        assert!(
            error["error"]["hint"]
                .as_str()
                .is_some_and(|h| h.contains(&head.to_string())),
            "{args:?}: {error:#}"
        );
    }
    // A range and --after do not mix.
    let (exit, _) = lx.json(&["--goal", GOAL, "log", "--after", "3", "--to", "5"]);
    assert_eq!(exit, 2);
    assert_eq!(lx.revision(GOAL), head, "nothing changed");
}

/// Compacts `GOAL` in `lx`'s store so that only the events after revision `keep_after` stay
/// kept; the ones before move into its archive.
fn compact(lx: &Loopx, keep_after: u64) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        let store = loopx_store::SqliteStore::open(&lx.store).expect("the store opens");
        let goal: loopx_kernel::GoalId = GOAL.parse().expect("an id");
        let done = store.compact(&goal, keep_after).await.expect("compacts");
        assert_eq!(done.base_revision, keep_after);
    });
}

/// The `verify` check's detail of `doctor --verify`, which must pass.
fn verified(lx: &Loopx) -> String {
    let doctor = lx.ok(&["doctor", "--verify"]);
    let checks = doctor["doctor"]["checks"].as_array().expect("checks");
    let check = checks
        .iter()
        .find(|c| c["check"] == "verify")
        .expect("a verify check");
    assert_eq!(check["ok"], true, "{doctor:#}");
    check["detail"].as_str().expect("a detail").to_owned()
}

#[test]
fn status_and_log_before_a_compaction_read_the_archive_and_verify() {
    let lx = Loopx::sqlite();
    seed_story(&lx);
    let head = lx.revision(GOAL);
    let to = head.to_string();
    let before_9 = lx.ok(&["--goal", GOAL, "status", "--at-revision", "9"]);
    let before_12 = lx.ok(&["--goal", GOAL, "status", "--at-revision", "12"]);
    let log = lx.ok(&["--goal", GOAL, "log", "--from", "1", "--to", &to]);
    let whole = lx.ok(&["--goal", GOAL, "log"]);
    let checked = verified(&lx);

    compact(&lx, 10);

    assert_eq!(
        lx.ok(&["--goal", GOAL, "status", "--at-revision", "9"]),
        before_9,
        "replayed from the archive"
    );
    assert_eq!(
        lx.ok(&["--goal", GOAL, "status", "--at-revision", "12"]),
        before_12,
        "folded onto the base snapshot"
    );
    let at_base = lx.ok(&["--goal", GOAL, "status", "--at-revision", "10"]);
    assert_eq!(at_base["status"]["revision"], 10);
    assert_eq!(
        lx.ok(&["--goal", GOAL, "log", "--from", "1", "--to", &to]),
        log
    );
    assert_eq!(lx.ok(&["--goal", GOAL, "log"]), whole);
    assert_eq!(verified(&lx), checked, "every archived commit re-checked");
    let exported = lx.ok(&["--goal", GOAL, "export"]);
    assert_eq!(
        exported["export"]["events"], whole["events"],
        "every event exported"
    );
    assert_eq!(lx.revision(GOAL), head);
}

#[test]
fn an_archived_event_changed_below_sql_is_found_not_shown() {
    let lx = Loopx::sqlite();
    seed_story(&lx);
    compact(&lx, 10);
    // Below SQL: the damage triggers out of the way, as for a byte flipped on disk.
    let conn = rusqlite::Connection::open(&lx.store).expect("the store opens");
    let triggers: Vec<(String, String)> = conn
        .prepare("SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'archived_events'")
        .expect("a statement")
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .expect("the triggers")
        .collect::<Result<_, _>>()
        .expect("the triggers");
    assert_eq!(triggers.len(), 2);
    for (name, _) in &triggers {
        conn.execute_batch(&format!("DROP TRIGGER {name}"))
            .expect("dropped");
    }
    let changed = conn
        .execute(
            "UPDATE archived_events SET at = at + 1 WHERE goal = ?1 AND revision = 4",
            [GOAL],
        )
        .expect("changed");
    assert_eq!(changed, 1);
    for (_, create) in &triggers {
        conn.execute_batch(create).expect("created again");
    }
    drop(conn);

    let (exit, refused) = lx.json(&["--goal", GOAL, "status", "--at-revision", "5"]);
    assert_ne!(exit, 0, "{refused:#}");
    assert_eq!(refused["error"]["code"], "history_damaged", "{refused:#}");
    let (exit, refused) = lx.json(&["--goal", GOAL, "log", "--from", "1", "--to", "6"]);
    assert_ne!(exit, 0, "{refused:#}");
    assert_eq!(refused["error"]["code"], "history_damaged", "{refused:#}");
    let (exit, doctor) = lx.json(&["doctor", "--verify"]);
    assert_ne!(exit, 0, "{doctor:#}");
    let failed: Vec<&Value> = doctor["doctor"]["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .filter(|c| c["check"] == "verify" && c["ok"] == false)
        .collect();
    assert_eq!(failed.len(), 1, "{doctor:#}");
    assert!(
        failed[0]["detail"]
            .as_str()
            .is_some_and(|d| d.contains("revision 4")),
        "{doctor:#}"
    );
    // The kept history is sound: the goal as it stands now still reads.
    lx.ok(&["--goal", GOAL, "status", "--at-revision", "12"]);
}

#[test]
#[allow(clippy::too_many_lines, reason = "two goals set up, then read")]
fn ready_lists_an_agents_work_across_goals_most_urgent_first() {
    let lx = Loopx::sqlite();
    let t0 = at(29, "10:00");
    lx.ok(&["init"]);
    let create = |goal: &str, agents: &[&str]| {
        let mut args = vec![
            "--goal",
            goal,
            "--as",
            "person:olivia",
            "--now",
            &t0,
            "goal",
            "create",
            "--objective",
            "two goals, one agent",
        ];
        for agent in agents {
            args.extend(["--agent", agent]);
        }
        lx.ok(&args);
    };
    create("alpha", &["agent-a"]);
    create("beta", &["agent-a", "agent-b"]);
    let add = |goal: &str, extra: &[&str]| {
        let base = [
            "--goal",
            goal,
            "--as",
            "person:olivia",
            "--now",
            &t0,
            "todo",
            "add",
        ];
        lx.ok(&[&base[..], extra].concat());
    };
    add(
        "alpha",
        &[
            "--id",
            "a1",
            "--title",
            "first of alpha",
            "--priority",
            "p1",
        ],
    );
    add(
        "alpha",
        &["--id", "a2", "--title", "after a1", "--depends-on", "a1"],
    );
    add(
        "alpha",
        &[
            "--id",
            "a3",
            "--title",
            "later in alpha",
            "--priority",
            "p3",
        ],
    );
    add(
        "beta",
        &[
            "--id",
            "b1",
            "--title",
            "urgent in beta",
            "--priority",
            "p0",
        ],
    );
    add(
        "beta",
        &[
            "--id",
            "b2",
            "--title",
            "for agent-b",
            "--assignee",
            "agent-b",
        ],
    );

    let ready = lx.ok(&["--now", &t0, "ready", "--agent", "agent-a"]);

    assert_eq!(
        ready,
        json!({
            "agent": "agent-a",
            "ready": [
                { "goal": "beta", "todo": "b1" },
                { "goal": "alpha", "todo": "a1" },
                { "goal": "alpha", "todo": "a3" },
            ],
        })
    );
    // The agent defaults to the acting one; another agent sees its own work.
    let acting = lx.ok(&["--as", "agent:agent-a", "--now", &t0, "ready"]);
    assert_eq!(acting, ready);
    let other = lx.ok(&["--now", &t0, "ready", "--agent", "agent-b"]);
    assert_eq!(
        other["ready"],
        json!([{ "goal": "beta", "todo": "b1" }, { "goal": "beta", "todo": "b2" }])
    );
    let table = lx.run(&["--now", &t0, "ready", "--agent", "agent-a"]);
    assert_eq!(table.code, 0, "{}", table.stderr);
    let rows: Vec<&str> = table.stdout.lines().collect();
    assert!(rows[0].starts_with("GOAL"), "{}", table.stdout);
    assert!(
        rows[1].contains("beta") && rows[1].contains("b1") && rows[1].contains("urgent in beta"),
        "{}",
        table.stdout
    );
    let nobody = lx.run(&["--now", &t0, "ready", "--agent", "agent-z"]);
    assert!(
        nobody.stdout.contains("nothing is ready for agent:agent-z"),
        "{}",
        nobody.stdout
    );
    let (code, error) = lx.json(&["--now", &t0, "ready"]);
    assert_eq!(code, 2, "an agent is needed: {error:#}");
    assert_eq!(error["error"]["code"], "agent_missing");
}

/// Days after the seed story's goal was accepted, its owner shortens the retirement horizon
/// to a day and `loopx goal retire` drops the closed todos from the state: the board no longer
/// lists them, while `status --at-revision` of the head before still shows them, `log` shows
/// the `retired` event, and `doctor --verify` re-checks the history with the retirement in it.
/// Retiring again finds nothing and commits nothing.
#[test]
fn goal_retire_drops_closed_work_from_the_state_and_history_keeps_it() {
    let lx = Loopx::sqlite();
    seed_story(&lx);
    let later = "2026-12-05T12:00:00Z";
    let maintainer = ["--goal", GOAL, "--as", "person:maintainer", "--now", later];
    let then = lx.ok(&["--goal", GOAL, "--now", later, "status"]);
    let done = then["status"]["board"]["done"]
        .as_array()
        .expect("done todos")
        .len();
    assert!(done >= 2, "the story completes its todos: {then:#}");
    let nothing_yet = lx.ok(&[&maintainer[..], &["goal", "retire"]].concat());
    assert_eq!(
        nothing_yet["receipt"]["events"], 0,
        "within the default week nothing is inert: {nothing_yet:#}"
    );
    lx.ok(&[&maintainer[..], &["goal", "amend", "--retire-after", "1d"]].concat());
    let before = lx.revision(GOAL);

    let retired = lx.ok(&[&maintainer[..], &["--op", "retire-1", "goal", "retire"]].concat());
    assert_eq!(retired["receipt"]["revision"], before + 1, "{retired:#}");
    let now = lx.ok(&["--goal", GOAL, "--now", later, "status"]);
    assert_eq!(now["status"]["board"]["done"], json!([]), "{now:#}");
    assert_eq!(
        now["status"]["terminal"], "accepted",
        "retiring changes no verdict"
    );
    let past = lx.ok(&[
        "--goal",
        GOAL,
        "status",
        "--at-revision",
        &before.to_string(),
    ]);
    assert_eq!(
        past["status"]["board"]["done"].as_array().map(Vec::len),
        Some(done),
        "{past:#}"
    );
    let log = lx.ok(&["--goal", GOAL, "log", "--from", &(before + 1).to_string()]);
    assert_eq!(log["events"][0]["event"]["type"], "retired", "{log:#}");
    assert_eq!(
        log["events"][0]["event"]["todos"].as_array().map(Vec::len),
        Some(done)
    );

    lx.ok(&[&maintainer[..], &["--op", "retire-2", "goal", "retire"]].concat());
    assert_eq!(lx.revision(GOAL), before + 1, "nothing inert is left");
    let (code, doctor) = lx.json(&["doctor", "--verify"]);
    assert_eq!(code, 0, "{doctor:#}");
}
