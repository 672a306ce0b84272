//! `loopx doctor --verify` finds a row edited directly in the database — an event's payload
//! changed by an editor who also took the damage trigger out of the way and recomputed the
//! chain, or a stored command changed — and names its goal and revision, on SQLite and on
//! PostgreSQL; the untouched store passes.

mod support;

use serde_json::Value;
use sha2::{Digest as _, Sha256};
use support::{Loopx, at};

const GOAL: &str = "g";
const TITLE: &str = "\"title\":\"the work\"";
const FORGED: &str = "\"title\":\"other work\"";

/// A signed goal with two todos: revision 2 adds `the work` (the owner's commit).
fn history(lx: &Loopx) {
    lx.ok(&["init"]);
    let owner = [
        "--goal",
        GOAL,
        "--as",
        "person:owner",
        "--now",
        &at(29, "10:00"),
    ];
    lx.ok(&[
        &owner[..],
        &["goal", "create", "--objective", "o", "--agent", "agent-a"],
    ]
    .concat());
    lx.ok(&[
        &owner[..],
        &["todo", "add", "--id", "a", "--title", "the work"],
    ]
    .concat());
    let agent = [
        "--goal",
        GOAL,
        "--as",
        "agent:agent-a",
        "--now",
        &at(29, "10:01"),
    ];
    lx.ok(&[&agent[..], &["todo", "add", "--id", "b", "--title", "more"]].concat());
}

/// The `verify` checks of `doctor --verify`, and its exit code.
fn verify(lx: &Loopx) -> (i32, Vec<Value>) {
    let (code, doc) = lx.json(&["doctor", "--verify"]);
    let checks = doc["doctor"]["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .filter(|c| c["check"] == "verify")
        .cloned()
        .collect();
    (code, checks)
}

fn assert_untouched_passes(lx: &Loopx) {
    let (code, checks) = verify(lx);
    assert_eq!(code, 0, "{checks:#?}");
    assert_eq!(checks.len(), 1, "{checks:#?}");
    assert_eq!(checks[0]["ok"], true);
    assert!(
        checks[0]["detail"]
            .as_str()
            .is_some_and(|d| d.starts_with("3 commit(s) re-checked")),
        "{checks:#?}"
    );
}

fn assert_names_revision_2(lx: &Loopx, what: &str) {
    let (code, checks) = verify(lx);
    assert_eq!(code, 6, "{what}: {checks:#?}");
    let failed: Vec<&Value> = checks.iter().filter(|c| c["ok"] == false).collect();
    assert_eq!(failed.len(), 1, "{what}: {checks:#?}");
    assert_eq!(failed[0]["goal"], GOAL);
    assert_eq!(failed[0]["kind"], "commit_altered");
    let detail = failed[0]["detail"].as_str().unwrap_or_default();
    assert!(detail.starts_with("revision 2:"), "{what}: {detail}");
}

/// The chain step of an event row, as the store computes it.
fn link(head: &[u8], revision: i64, at: i64, json: &str) -> Vec<u8> {
    let mut hasher = Sha256::new();
    hasher.update(head);
    hasher.update(format!("\n{revision}\n{at}\n{json}").as_bytes());
    hasher.finalize().to_vec()
}

fn unhex(text: &str) -> Vec<u8> {
    (0..text.len() / 2)
        .map(|i| u8::from_str_radix(&text[2 * i..2 * i + 2], 16).expect("hex"))
        .collect()
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes.iter().fold(String::new(), |mut text, b| {
        let _ = write!(text, "{b:02x}");
        text
    })
}

/// Changes revision 2's payload in the SQLite file as a careful editor would: the damage
/// trigger dropped, the chain of every row from there, the snapshots' and the goal row's
/// recomputed.
fn forge_event_sqlite(lx: &Loopx) {
    let conn = rusqlite::Connection::open(lx.path("loopx.db")).expect("open the store");
    conn.execute_batch(&format!(
        "DROP TRIGGER events_changed_outside_loopx;
         UPDATE events SET json = replace(json, '{TITLE}', '{FORGED}') WHERE goal = '{GOAL}' AND revision = 2;"
    ))
    .expect("edit the row");
    let mut head: Vec<u8> = unhex(
        &conn
            .query_row(
                "SELECT chain FROM events WHERE goal = ?1 AND revision = 1",
                [GOAL],
                |r| r.get::<_, String>(0),
            )
            .expect("revision 1's chain"),
    );
    let rows: Vec<(i64, i64, String)> = conn
        .prepare("SELECT revision, at, json FROM events WHERE goal = ?1 AND revision >= 2 ORDER BY revision")
        .expect("select")
        .query_map([GOAL], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .expect("rows")
        .collect::<Result<_, _>>()
        .expect("rows");
    for (revision, at, json) in rows {
        head = link(&head, revision, at, &json);
        for table in ["events", "snapshots"] {
            conn.execute(
                &format!("UPDATE {table} SET chain = ?1 WHERE goal = ?2 AND revision = ?3"),
                rusqlite::params![hex(&head), GOAL, revision],
            )
            .expect("rechain");
        }
    }
    conn.execute(
        "UPDATE goals SET chain = ?1 WHERE goal = ?2",
        rusqlite::params![hex(&head), GOAL],
    )
    .expect("rechain the goal row");
}

#[test]
fn sqlite_doctor_verify_names_an_event_edited_with_its_chain_recomputed() {
    let lx = Loopx::sqlite();
    history(&lx);
    assert_untouched_passes(&lx);
    forge_event_sqlite(&lx);
    // The chain agrees with the rows: only re-executing the command finds the change.
    assert_names_revision_2(&lx, "an edited event");
}

#[test]
fn sqlite_doctor_verify_names_a_stored_command_changed() {
    let lx = Loopx::sqlite();
    history(&lx);
    let conn = rusqlite::Connection::open(lx.path("loopx.db")).expect("open the store");
    let changed = conn
        .execute(
            &format!(
                "UPDATE events SET authorship = replace(authorship, '{TITLE}', '{FORGED}') WHERE goal = '{GOAL}' AND revision = 2"
            ),
            [],
        )
        .expect("edit the command");
    assert_eq!(changed, 1, "revision 2 keeps its command");
    drop(conn);
    assert_names_revision_2(&lx, "a changed command");
}

#[test]
fn sqlite_commits_without_authorship_are_unverifiable_not_damage() {
    let lx = Loopx::sqlite();
    history(&lx);
    // As a store migrated from schema 5 holds them.
    let conn = rusqlite::Connection::open(lx.path("loopx.db")).expect("open the store");
    conn.execute("UPDATE events SET authorship = NULL", [])
        .expect("forget the commands");
    drop(conn);
    let (code, checks) = verify(&lx);
    assert_eq!(code, 0, "{checks:#?}");
    let detail = checks[0]["detail"].as_str().unwrap_or_default();
    assert!(
        detail.starts_with("0 commit(s) re-checked") && detail.contains("3 unverifiable"),
        "{detail}"
    );
}

#[test]
fn postgres_doctor_verify_names_an_event_edited_with_its_chain_recomputed() {
    let url = loopx_store::test_cluster::cluster().database();
    let lx = Loopx::with_store(url.clone());
    history(&lx);
    assert_untouched_passes(&lx);
    let forge = format!(
        "ALTER TABLE events DISABLE TRIGGER events_changed_outside_loopx;
         UPDATE events SET json = replace(json, '{TITLE}', '{FORGED}') WHERE goal = '{GOAL}' AND revision = 2;
         DO $$
         DECLARE e RECORD; h BYTEA;
         BEGIN
             SELECT decode(chain, 'hex') INTO h FROM events WHERE goal = '{GOAL}' AND revision = 1;
             FOR e IN SELECT revision, at, json FROM events WHERE goal = '{GOAL}' AND revision >= 2 ORDER BY revision LOOP
                 h := sha256(h || convert_to(E'\\n' || e.revision::text || E'\\n' || e.at::text || E'\\n' || e.json, 'UTF8'));
                 UPDATE events SET chain = encode(h, 'hex') WHERE goal = '{GOAL}' AND revision = e.revision;
                 UPDATE snapshots SET chain = encode(h, 'hex') WHERE goal = '{GOAL}' AND revision = e.revision;
             END LOOP;
             UPDATE goals SET chain = encode(h, 'hex') WHERE goal = '{GOAL}';
         END
         $$;
         ALTER TABLE events ENABLE TRIGGER events_changed_outside_loopx;"
    );
    loopx_store::test_cluster::Cluster::execute(&url, &forge).expect("edit the row");
    assert_names_revision_2(&lx, "an edited event on PostgreSQL");
}
