//! A damaged history is found, never absorbed: event rows deleted or overwritten below a
//! snapshot, index rows changed, a goal row removed, an export cut short. Every verb that
//! touches the damaged goal answers a store error (exit 6) and writes nothing; `doctor` reports
//! each damage typed; `import` refuses an export without its trailer.

mod support;

use rusqlite::Connection;
use serde_json::{Value, json};
use support::{Loopx, at};

/// Todos added to goal `g` after its creation: its revision ends past the default snapshot
/// interval (100 events), so a load reads a snapshot and none of the early rows.
const TODOS: usize = 104;

/// A store with goal `g` (revision `TODOS + 1`, a snapshot at 100) and a small sound goal `h`.
fn store_past_a_snapshot() -> Loopx {
    let lx = Loopx::sqlite();
    let t0 = at(29, "10:00");
    lx.ok(&["init"]);
    for goal in ["g", "h"] {
        lx.ok(&[
            "--goal",
            goal,
            "--as",
            "person:owner",
            "--now",
            &t0,
            "goal",
            "create",
            "--objective",
            "o",
            "--agent",
            "agent-a",
        ]);
    }
    let agent = ["--goal", "g", "--as", "agent:agent-a", "--now", &t0];
    for i in 0..TODOS {
        let id = format!("t{i}");
        lx.ok(&[&agent[..], &["todo", "add", "--id", &id, "--title", &id]].concat());
    }
    let snapshots: i64 = sql(&lx)
        .query_row(
            "SELECT count(*) FROM snapshots WHERE goal = 'g' AND revision >= 100",
            [],
            |r| r.get(0),
        )
        .expect("count snapshots");
    assert_eq!(snapshots, 1, "goal g has a snapshot past revision 100");
    lx
}

fn sql(lx: &Loopx) -> Connection {
    Connection::open(lx.path("loopx.db")).expect("open the store")
}

/// Every event row, in order.
fn event_rows(lx: &Loopx) -> Vec<(String, i64, String)> {
    let conn = sql(lx);
    let mut statement = conn
        .prepare("SELECT goal, revision, json FROM events ORDER BY goal, revision")
        .expect("query events");
    statement
        .query_map([], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))
        .expect("rows")
        .collect::<Result<Vec<_>, _>>()
        .expect("rows")
}

/// Runs `args` on goal `g` with `--json`; the exit code and the document.
fn on_g(lx: &Loopx, args: &[&str]) -> (i32, Value) {
    let t1 = at(29, "11:00");
    lx.json(
        &[
            &["--goal", "g", "--as", "agent:agent-a", "--now", &t1][..],
            args,
        ]
        .concat(),
    )
}

fn assert_damaged(what: &str, (code, doc): &(i32, Value), revision: u64) {
    assert_eq!(*code, 6, "{what}: {doc}");
    assert_eq!(doc["error"]["code"], "history_damaged", "{what}: {doc}");
    let message = doc["error"]["message"].as_str().unwrap_or("");
    assert!(
        message.contains(&format!("goal `g` is damaged at revision {revision}")),
        "{what}: {message}"
    );
}

#[test]
fn a_damaged_history_below_a_snapshot_is_refused_by_every_verb() {
    let damages = [
        (7, "DELETE FROM events WHERE goal = 'g' AND revision = 7"),
        (
            5,
            "UPDATE events SET json = 'not json' WHERE goal = 'g' AND revision = 5",
        ),
    ];
    for (revision, damage) in damages {
        let lx = store_past_a_snapshot();
        sql(&lx).execute_batch(damage).expect("damage the history");
        let before = event_rows(&lx);
        assert_damaged(damage, &on_g(&lx, &["status"]), revision);
        assert_damaged(
            damage,
            &on_g(&lx, &["next", "--agent", "agent-a"]),
            revision,
        );
        assert_damaged(
            damage,
            &on_g(&lx, &["todo", "add", "--id", "late", "--title", "late"]),
            revision,
        );
        let out = lx.path("g.jsonl");
        let out_arg = out.display().to_string();
        assert_damaged(damage, &on_g(&lx, &["export", "--out", &out_arg]), revision);
        assert!(!out.exists(), "{damage}: an export was written");
        let exported = lx.run(&["--goal", "g", "export"]);
        assert_eq!(exported.code, 6, "{damage}: {}", exported.stderr);
        assert!(exported.stdout.is_empty(), "{damage}: {}", exported.stdout);
        assert_eq!(event_rows(&lx), before, "{damage}: the events changed");
        let (code, doc) = lx.json(&["doctor"]);
        assert_eq!(code, 6, "{damage}: {doc}");
        assert_eq!(doc["doctor"]["ok"], false, "{damage}: {doc}");
        // The sound goal next to it works.
        let t1 = at(29, "11:00");
        lx.ok(&[
            "--goal",
            "h",
            "--as",
            "agent:agent-a",
            "--now",
            &t1,
            "todo",
            "add",
            "--id",
            "x",
            "--title",
            "x",
        ]);
    }
}

/// The failed checks of a doctor report, as (check, goal, kind).
fn failed(doc: &Value) -> Vec<(String, String, String)> {
    doc["doctor"]["checks"]
        .as_array()
        .map(|checks| {
            checks
                .iter()
                .filter(|c| c["ok"] == false)
                .map(|c| {
                    let text = |v: &Value| v.as_str().unwrap_or("").to_owned();
                    (text(&c["check"]), text(&c["goal"]), text(&c["kind"]))
                })
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn doctor_checks_the_index_rows_against_the_history() {
    let lx = store_past_a_snapshot();
    let now = at(29, "11:00");
    let (code, doc) = lx.json(&["--now", &now, "doctor"]);
    assert_eq!(code, 0, "{doc}");
    assert_eq!(failed(&doc), vec![]);

    // A standing changed by hand: the listing believes it, the doctor does not.
    sql(&lx)
        .execute_batch("UPDATE goals SET status = 'accepted' WHERE goal = 'g'")
        .expect("change the standing");
    let list = lx.ok(&["--now", &now, "goal", "list"]);
    assert!(list.to_string().contains("accepted"), "{list}");
    let (code, doc) = lx.json(&["--now", &now, "doctor"]);
    assert_eq!(code, 6, "{doc}");
    assert_eq!(
        failed(&doc),
        vec![("rows".into(), "g".into(), "goal_row_mismatch".into())],
        "{doc}"
    );
    let text = doc.to_string();
    assert!(text.contains("status"), "{text}");

    // Rows whose window has passed are checked as they are, before a listing recomputes
    // them: a lease that expires at 10:30 ends the window of h's rows.
    let t0 = at(29, "10:00");
    let agent_h = ["--goal", "h", "--as", "agent:agent-a", "--now", &t0];
    lx.ok(&[&agent_h[..], &["todo", "add", "--id", "y", "--title", "y"]].concat());
    lx.ok(&[&agent_h[..], &["claim", "--todo", "y", "--ttl", "30m"]].concat());
    sql(&lx)
        .execute_batch("UPDATE goals SET status = 'abandoned' WHERE goal = 'h'")
        .expect("change the standing");
    let later = at(29, "12:00");
    let (code, doc) = lx.json(&["--now", &later, "doctor"]);
    assert_eq!(code, 6, "{doc}");
    let found = failed(&doc);
    assert!(
        found.contains(&("rows".into(), "h".into(), "goal_row_mismatch".into())),
        "{doc}"
    );

    // The goal row removed: its events are orphaned, reported as such, and the goal answers a
    // store error, not "no such goal".
    sql(&lx)
        .execute_batch("DELETE FROM goals WHERE goal = 'g'")
        .expect("remove the goal row");
    let (code, doc) = lx.json(&["--now", &now, "doctor"]);
    assert_eq!(code, 6, "{doc}");
    assert!(
        failed(&doc).contains(&("rows".into(), "g".into(), "orphaned_rows".into())),
        "{doc}"
    );
    let status = on_g(&lx, &["status"]);
    assert_damaged("a removed goal row", &status, 0);
    let before = event_rows(&lx);
    assert_damaged(
        "a write to a removed goal row",
        &on_g(&lx, &["todo", "add", "--id", "late", "--title", "late"]),
        0,
    );
    assert_eq!(event_rows(&lx), before);
}

/// Drops the damage triggers, runs `damage`, and creates them again: damage below SQL, as a
/// flipped bit on disk would do it.
fn damage_unseen(lx: &Loopx, damage: &str) {
    let conn = sql(lx);
    let triggers: Vec<(String, String)> = conn
        .prepare("SELECT name, sql FROM sqlite_master WHERE type = 'trigger'")
        .expect("triggers")
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .expect("triggers")
        .collect::<Result<_, _>>()
        .expect("triggers");
    assert!(!triggers.is_empty());
    for (name, _) in &triggers {
        conn.execute_batch(&format!("DROP TRIGGER {name}"))
            .expect("drop a trigger");
    }
    conn.execute_batch(damage).expect("damage");
    for (_, create) in &triggers {
        conn.execute_batch(create).expect("create a trigger");
    }
}

#[test]
fn export_never_writes_a_history_with_a_gap() {
    for (revision, damage) in [
        (1, "DELETE FROM events WHERE goal = 'g' AND revision = 1"),
        (7, "DELETE FROM events WHERE goal = 'g' AND revision = 7"),
        (
            3,
            "UPDATE events SET revision = 1000 WHERE goal = 'g' AND revision = 3",
        ),
    ] {
        let lx = store_past_a_snapshot();
        damage_unseen(&lx, damage);
        let exported = lx.run(&["--goal", "g", "export"]);
        assert_eq!(exported.code, 6, "{damage}: {}", exported.stderr);
        assert!(exported.stdout.is_empty(), "{damage}: {}", exported.stdout);
        let (code, doc) = lx.json(&["--goal", "g", "export"]);
        assert_damaged(damage, &(code, doc), revision);
        let (code, doc) = lx.json(&["--goal", "g", "doctor"]);
        assert_eq!(code, 6, "{damage}: {doc}");
    }
}

#[test]
fn import_refuses_an_export_cut_short_or_changed() {
    let lx = Loopx::sqlite();
    let t0 = at(29, "10:00");
    lx.ok(&["init"]);
    lx.ok(&[
        "--goal",
        "g",
        "--as",
        "person:owner",
        "--now",
        &t0,
        "goal",
        "create",
        "--objective",
        "o",
        "--agent",
        "agent-a",
    ]);
    for id in ["a", "b", "c"] {
        lx.ok(&[
            "--goal",
            "g",
            "--as",
            "agent:agent-a",
            "--now",
            &t0,
            "todo",
            "add",
            "--id",
            id,
            "--title",
            id,
        ]);
    }
    let exported = lx.run(&["--goal", "g", "export"]);
    assert_eq!(exported.code, 0, "{}", exported.stderr);
    let lines: Vec<&str> = exported.stdout.lines().collect();
    // Each commit's line (what it was made from) before its event, then the trailer.
    assert_eq!(lines.len(), 9, "four commits, four events and the trailer");
    let trailer: Value = serde_json::from_str(lines[8]).expect("the trailer is JSON");
    assert_eq!(trailer["trailer"]["format"], "loopx.export.v3");
    assert_eq!(trailer["trailer"]["events"], 4);
    assert_eq!(trailer["trailer"]["revision"], 4);
    assert_eq!(trailer["trailer"]["goal"], "g");
    assert_eq!(trailer["trailer"]["chain"].as_str().map(str::len), Some(64));
    let events: Vec<&str> = lines[..8].iter().copied().skip(1).step_by(2).collect();

    let join = |lines: &[&str]| format!("{}\n", lines.join("\n"));
    let changed_chain = lines[8].replace(
        trailer["trailer"]["chain"].as_str().unwrap_or(""),
        &"0".repeat(64),
    );
    let cases = [
        // Cut at a line boundary: a shorter history that replays, without its trailer.
        ("cut", join(&lines[..6]), "export_trailer_missing"),
        // Written before trailers existed: the events alone.
        ("old", join(&events), "export_trailer_missing"),
        // The last event dropped, the trailer kept.
        (
            "short",
            join(&[&lines[..6], &lines[8..]].concat()),
            "export_trailer_mismatch",
        ),
        // The chain changed.
        (
            "chain",
            join(&[&lines[..8], &[changed_chain.as_str()][..]].concat()),
            "export_trailer_mismatch",
        ),
        // Something after the trailer.
        (
            "after",
            join(&[&lines[..], &[lines[7]][..]].concat()),
            "export_trailer_mismatch",
        ),
    ];
    for (name, text, code) in cases {
        let other = Loopx::sqlite();
        other.ok(&["init"]);
        let file = other.file("g.jsonl", &text);
        let (exit, doc) = other.json(&["import", "--file", &file]);
        assert_eq!(exit, 7, "{name}: {doc}");
        assert_eq!(doc["error"]["code"], code, "{name}: {doc}");
        assert!(
            doc["error"]["hint"]
                .as_str()
                .is_some_and(|h| h.contains("export the goal again")),
            "{name}: {doc}"
        );
        assert_eq!(other.ok(&["goal", "list"])["goals"], json!([]), "{name}");
    }

    // The whole file imports.
    let other = Loopx::sqlite();
    other.ok(&["init"]);
    let file = other.file("g.jsonl", &exported.stdout);
    let imported = other.ok(&["import", "--file", &file]);
    assert_eq!(imported["import"]["revision"], 4);
    // Exported again from the new store, it holds the same events and trailer; the store kept
    // them as the one commit of the import, which keeps no command to verify it by.
    let again = other.run(&["--goal", "g", "export"]);
    let events = |text: &str| -> Vec<String> {
        text.lines()
            .filter(|l| !l.starts_with("{\"commit\""))
            .map(str::to_owned)
            .collect()
    };
    assert_eq!(events(&again.stdout), events(&exported.stdout));
}

/// A goal `g` with the todos `a`, `flipme` (revision 3) and `c`, every process closed, so that
/// the log is checkpointed into the store file.
fn three_todos_on_disk() -> Loopx {
    let lx = Loopx::sqlite();
    let t0 = at(29, "10:00");
    lx.ok(&["init"]);
    lx.ok(&[
        "--goal",
        "g",
        "--as",
        "person:owner",
        "--now",
        &t0,
        "goal",
        "create",
        "--objective",
        "o",
        "--agent",
        "agent-a",
    ]);
    for id in ["a", "flipme", "c"] {
        lx.ok(&[
            "--goal",
            "g",
            "--as",
            "agent:agent-a",
            "--now",
            &t0,
            "todo",
            "add",
            "--id",
            id,
            "--title",
            id,
        ]);
    }
    lx
}

/// Sets byte `offset` of the JSON `"title":"flipme"` in the store file to `byte`: a change
/// below SQL, which no trigger sees.
fn change_title_json_on_disk(lx: &Loopx, offset: usize, byte: u8) {
    let path = lx.path("loopx.db");
    let mut bytes = std::fs::read(&path).expect("the store file");
    let needle = b"\"title\":\"flipme\"";
    let found: Vec<usize> = bytes
        .windows(needle.len())
        .enumerate()
        .filter(|(_, w)| w == needle)
        .map(|(i, _)| i)
        .collect();
    // The event's JSON, then the command its commit kept (the row's last column, schema 7).
    assert_eq!(
        found.len(),
        2,
        "the row's JSON and its command are in the file once each"
    );
    bytes[found[0] + offset] = byte;
    std::fs::write(&path, &bytes).expect("change a byte");
}

#[test]
fn a_flipped_byte_in_an_event_row_is_a_store_error_for_export_and_doctor() {
    let lx = three_todos_on_disk();
    // One byte of the event row that adds `flipme` changes (`:` to a space): it no longer decodes.
    change_title_json_on_disk(&lx, 7, b' ');
    let exported = lx.run(&["--goal", "g", "export"]);
    assert_eq!(exported.code, 6, "{}", exported.stderr);
    assert!(exported.stdout.is_empty(), "{}", exported.stdout);
    let (code, doc) = lx.json(&["--goal", "g", "export"]);
    assert_eq!(code, 6, "{doc}");
    assert_eq!(doc["error"]["code"], "store_corrupt", "{doc}");
    assert!(
        doc["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("event 3 of goal `g`")),
        "{doc}"
    );
    let (code, doc) = lx.json(&["doctor"]);
    assert_eq!(code, 6, "{doc}");
    assert_eq!(doc["doctor"]["ok"], false, "{doc}");
}

#[test]
fn a_title_changed_on_disk_that_still_folds_is_history_damage_for_every_read() {
    let lx = three_todos_on_disk();
    // One letter of the title `flipme` (revision 3) changes below SQL, where no trigger sees
    // it: the row still decodes and folds, into another title.
    change_title_json_on_disk(&lx, 14, b'f');
    for verb in [
        &["--goal", "g", "export"][..],
        &["--goal", "g", "todo", "list"],
    ] {
        let (code, doc) = lx.json(verb);
        assert_eq!(code, 6, "{verb:?}: {doc}");
        assert_eq!(doc["error"]["code"], "history_damaged", "{verb:?}: {doc}");
        assert!(
            doc["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("damaged at revision 3")),
            "{verb:?}: {doc}"
        );
        assert!(!doc.to_string().contains("flipmf"), "{verb:?}: {doc}");
    }
    let (code, doc) = lx.json(&["doctor"]);
    assert_eq!(code, 6, "{doc}");
    assert_eq!(doc["doctor"]["ok"], false, "{doc}");
    let checks = doc["doctor"]["checks"].as_array().expect("the checks");
    for name in ["load", "replay"] {
        assert!(
            checks.iter().any(|c| c["check"] == name
                && c["ok"] == false
                && c["detail"]
                    .as_str()
                    .is_some_and(|d| d.contains("damaged at revision 3"))),
            "{name}: {doc}"
        );
    }
}

/// An export holds the whole history, so it is written owner-only like the store (whatever the
/// mode of a file it replaces), and never through a link.
#[test]
fn export_writes_a_file_only_its_owner_reads_and_never_through_a_link() {
    use std::os::unix::fs::PermissionsExt as _;
    let lx = Loopx::sqlite();
    lx.ok(&["init"]);
    lx.ok(&[
        "--goal",
        "g",
        "--as",
        "person:owner",
        "--now",
        &at(29, "10:00"),
        "goal",
        "create",
        "--objective",
        "o",
        "--agent",
        "agent-a",
    ]);
    let out = lx.path("g.jsonl");
    std::fs::write(&out, "old").expect("written");
    std::fs::set_permissions(&out, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let out_arg = out.display().to_string();
    lx.ok(&["--goal", "g", "export", "--out", &out_arg]);
    let mode = std::fs::metadata(&out).expect("stat").permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);

    let outside = lx.path("outside.txt");
    std::fs::write(&outside, "keep").expect("written");
    let link = lx.path("link.jsonl");
    std::os::unix::fs::symlink(&outside, &link).expect("a link");
    let (code, refused) = lx.json(&[
        "--goal",
        "g",
        "export",
        "--out",
        &link.display().to_string(),
    ]);
    assert_eq!(code, 1, "{refused}");
    assert_eq!(refused["error"]["code"], "write_failed");
    assert_eq!(std::fs::read_to_string(&outside).expect("read"), "keep");
}
