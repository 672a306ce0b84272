//! Damaged stores through the real binary: truncations, byte flips in the database and in its
//! write-ahead log, an empty file, a directory, a future schema, another program's database and
//! a file that is not SQLite, each under every verb, read-only and writing. Each answer is a
//! typed store error (exit 6) that leaves the files byte for byte as they were, or — where the
//! damage lies somewhere no read looks — exactly the undamaged store's answer; never a panic,
//! never a hang. Also: only `init` creates a store, and racing `init`s agree.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

const NOW: &str = "2026-11-29T10:00:00Z";
/// A process that takes longer has hung (generous: CI machines are small and shared).
const TIMEOUT: Duration = Duration::from_secs(60);
/// The title of a todo, found in the file to aim a flip at an event's payload.
const MARKER: &str = "marker-title-for-the-damage-suite";

/// One run of the binary.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Answer {
    code: i32,
    stdout: String,
    stderr: String,
}

impl Answer {
    /// Exit 6 with one of the store's error codes, or `doctor`'s report of damage.
    fn is_store_error(&self) -> bool {
        let doctor_found_damage = serde_json::from_str::<Value>(&self.stdout)
            .is_ok_and(|doc| doc.pointer("/doctor/ok") == Some(&Value::Bool(false)));
        self.code == 6
            && (doctor_found_damage
                || self
                    .error_code()
                    .is_some_and(|code| STORE_CODES.contains(&code.as_str())))
    }

    fn error_code(&self) -> Option<String> {
        serde_json::from_str::<Value>(&self.stdout)
            .ok()?
            .pointer("/error/code")?
            .as_str()
            .map(str::to_owned)
    }
}

/// Runs `loopx --json --store loopx.db --now NOW <args>` in `dir`, killing it after
/// [`TIMEOUT`].
fn loopx(dir: &Path, args: &[&str]) -> Answer {
    let mut child = Command::new(env!("CARGO_BIN_EXE_loopx"))
        .args(["--json", "--store", "loopx.db", "--now", NOW])
        // One key directory, and one of the service's, for every copy of the store (each case
        // runs in a directory beside the template's), so a copy signs with the keys the
        // template's goals registered.
        .args(["--keys", "../keys", "--service-keys", "../service-keys"])
        .args(args)
        .current_dir(dir)
        .env_remove("LOOPX_STORE")
        .env_remove("LOOPX_ACTOR")
        .env_remove("LOOPX_GOAL")
        .env_remove("LOOPX_KEY")
        .env_remove("LOOPX_KEYS")
        .env_remove("LOOPX_SERVICE_KEYS")
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start loopx");
    let drain = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut text = String::new();
            if let Some(mut pipe) = pipe {
                let _ = pipe.read_to_string(&mut text);
            }
            text
        })
    };
    let stdout = drain(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let stderr = drain(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("poll loopx") {
            break status;
        }
        if started.elapsed() > TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            panic!("loopx {args:?} in {} hung", dir.display());
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    Answer {
        code: status.code().unwrap_or(-1),
        stdout: stdout.join().expect("stdout"),
        stderr: stderr.join().expect("stderr"),
    }
}

/// What is at one of the store's paths.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Entry {
    Absent,
    File(Vec<u8>),
    Directory,
}

/// The store's files (the database, its `-wal` and `-shm`) by name.
type Files = BTreeMap<&'static str, Entry>;

fn files(dir: &Path) -> Files {
    ["loopx.db", "loopx.db-wal", "loopx.db-shm"]
        .into_iter()
        .map(|name| {
            let path = dir.join(name);
            let entry = if path.is_dir() {
                Entry::Directory
            } else {
                std::fs::read(&path).map_or(Entry::Absent, Entry::File)
            };
            (name, entry)
        })
        .collect()
}

/// Writes `store` into a new directory, with the scratch files verbs read.
fn materialise(store: &Files, base: &Path) -> tempfile::TempDir {
    let dir = tempfile::tempdir_in(base).expect("a case directory");
    for (name, entry) in store {
        let path = dir.path().join(name);
        match entry {
            Entry::Absent => {}
            Entry::File(bytes) => std::fs::write(path, bytes).expect("write a store file"),
            Entry::Directory => std::fs::create_dir(path).expect("a directory"),
        }
    }
    std::fs::write(dir.path().join("settle.json"), SETTLEMENT).expect("settlement");
    dir
}

const SETTLEMENT: &str = r#"{"todo": "a", "epoch": 1, "turn": "t1",
 "verdict": {"validator": {"kind": "validator", "id": "cargo-test"}, "outcome": "passed", "summary": "ok"},
 "evidence": [], "observations": [],
 "transition": {"kind": "keep_open"},
 "usage": {"turns": 1, "tokens": 10, "wall_ms": 10}}"#;

/// Every verb the suite runs, and whether it writes.
const VERBS: &[(&[&str], bool)] = &[
    (&["--goal", "g", "status"], false),
    (&["--goal", "g", "next", "--agent", "agent-a"], false),
    (&["goal", "list"], false),
    (&["--goal", "g", "goal", "show"], false),
    (&["--goal", "g", "todo", "list"], false),
    (&["--goal", "g", "log"], false),
    (&["--goal", "g", "export"], false),
    (&["doctor"], false),
    (
        &[
            "--goal",
            "g",
            "--as",
            "agent:agent-a",
            "--op",
            "more",
            "todo",
            "add",
            "--id",
            "more",
            "--title",
            "more",
        ],
        true,
    ),
    (
        &[
            "--goal",
            "g",
            "--as",
            "agent:agent-a",
            "--op",
            "settled",
            "settle",
            "--file",
            "settle.json",
        ],
        true,
    ),
    (
        &[
            "--goal",
            "g2",
            "--as",
            "person:owner",
            "--op",
            "second",
            "goal",
            "create",
            "--objective",
            "o",
            "--agent",
            "agent-a",
        ],
        true,
    ),
];

/// What a damaged store may answer, from the strictest to the loosest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    /// A store error (exit 6 with one of the store's codes, or `doctor` reporting damage);
    /// the files unchanged.
    StoreError,
    /// A store error, or exactly the undamaged store's answer: the damage lies where no read
    /// looks (free space, a header field SQLite does not rely on).
    ErrorOrSame,
    /// Damage inside one goal's history that SQLite cannot check (a byte of an event's JSON):
    /// a store error from every verb that reads that history (the chain stored with its rows
    /// no longer links), and the undamaged answer from the verbs that read none of it (the
    /// goal listing reads only index rows; creating another goal reads nothing of it).
    StoreErrorWhereRead,
}

const STORE_CODES: &[&str] = &[
    "store_corrupt",
    "store_unavailable",
    "store_missing",
    "newer_schema",
    "wal_damaged",
    "history_damaged",
];

/// The undamaged store's answer to each verb.
struct Baseline {
    answers: Vec<Answer>,
}

fn baseline(store: &Files, base: &Path) -> Baseline {
    let answers = VERBS
        .iter()
        .map(|(args, _)| {
            let dir = materialise(store, base);
            loopx(dir.path(), args)
        })
        .collect();
    Baseline { answers }
}

/// Runs every verb on a fresh copy of `damaged` and checks each answer against `expect`;
/// prints how many verbs answered with a store error, the undamaged answer, or another one
/// (shown with `--nocapture`: what tightening an expectation would take).
fn check(name: &str, damaged: &Files, expect: Expect, baseline: &Baseline, base: &Path) {
    let mut tally = [0_u32; 3];
    for ((args, writes), undamaged) in VERBS.iter().zip(&baseline.answers) {
        let dir = materialise(damaged, base);
        let before = files(dir.path());
        let answer = loopx(dir.path(), args);
        let after = files(dir.path());
        let what = format!("{name}: loopx {args:?} answered {answer:?}");
        assert!(!answer.stderr.contains("panicked"), "{what}");
        assert_ne!(answer.code, 101, "{what}");
        let store_error = answer.is_store_error();
        let same = answer.code == undamaged.code && answer.stdout == undamaged.stdout;
        tally[if store_error {
            0
        } else if same {
            1
        } else {
            2
        }] += 1;
        if answer.code != 0 || !writes {
            assert!(before == after, "{what}: the store's files changed");
        }
        match expect {
            Expect::StoreError => assert!(store_error, "{what}: expected a store error"),
            Expect::ErrorOrSame => assert!(
                store_error || same,
                "{what}: expected a store error or the undamaged answer {undamaged:?}"
            ),
            Expect::StoreErrorWhereRead if reads_history(args) => {
                assert!(store_error, "{what}: expected a store error");
            }
            Expect::StoreErrorWhereRead => {
                assert!(same, "{what}: expected the undamaged answer {undamaged:?}");
            }
        }
    }
    let [errors, same, other] = tally;
    println!(
        "{name} ({expect:?}): {errors} store errors, {same} undamaged answers, {other} others"
    );
}

/// Whether the verb `args` reads goal `g`'s history: it names the goal, or checks every goal.
fn reads_history(args: &[&str]) -> bool {
    args == ["doctor"] || args.windows(2).any(|w| w == ["--goal", "g"])
}

/// A small store written by the binary: goal `g` with three todos, `a` claimed.
fn populate(dir: &Path) {
    let run = |args: &[&str]| {
        let answer = loopx(dir, args);
        assert_eq!(answer.code, 0, "loopx {args:?}: {answer:?}");
    };
    run(&["init"]);
    let owner = ["--goal", "g", "--as", "person:owner"];
    run(&[
        &owner[..],
        &[
            "--op",
            "create",
            "goal",
            "create",
            "--objective",
            "o",
            "--agent",
            "agent-a",
        ],
    ]
    .concat());
    let agent = ["--goal", "g", "--as", "agent:agent-a"];
    for (id, title) in [("a", "first"), ("b", MARKER), ("c", "third")] {
        let op = format!("add-{id}");
        run(&[
            &agent[..],
            &["--op", &op, "todo", "add", "--id", id, "--title", title],
        ]
        .concat());
    }
    run(&[&agent[..], &["--op", "claim-a", "claim", "--todo", "a"]].concat());
}

fn with(store: &Files, name: &'static str, bytes: Vec<u8>) -> Files {
    let mut damaged = store.clone();
    damaged.insert(name, Entry::File(bytes));
    damaged
}

fn with_main(store: &Files, bytes: Vec<u8>) -> Files {
    with(store, "loopx.db", bytes)
}

fn bytes(store: &Files, name: &str) -> Vec<u8> {
    match &store[name] {
        Entry::File(bytes) => bytes.clone(),
        other => panic!("{name} is {other:?}"),
    }
}

fn flipped(bytes: &[u8], at: usize) -> Vec<u8> {
    let mut bytes = bytes.to_vec();
    bytes[at] ^= 0x55;
    bytes
}

fn page_size(db: &[u8]) -> usize {
    match u16::from_be_bytes([db[16], db[17]]) {
        1 => 65_536,
        size => usize::from(size),
    }
}

/// Offsets inside the unallocated gap of b-tree pages (between the cell pointers and the
/// cells): bytes no read looks at.
fn unallocated(db: &[u8], page: usize) -> Vec<usize> {
    let mut found = Vec::new();
    for number in 1..db.len() / page {
        let start = number * page;
        let header = if number == 1 { start + 100 } else { start };
        let kind = db[header];
        let size = match kind {
            2 | 5 => 12,
            10 | 13 => 8,
            _ => continue,
        };
        let cells = usize::from(u16::from_be_bytes([db[header + 3], db[header + 4]]));
        let content = match usize::from(u16::from_be_bytes([db[header + 5], db[header + 6]])) {
            0 => 65_536,
            at => at,
        };
        let gap_start = header + size + 2 * cells;
        let gap_end = start + content;
        if gap_end > gap_start + 16 {
            found.push(gap_start + (gap_end - gap_start) / 2);
        }
    }
    found
}

/// One damaged store: its name, its files, and what every verb may answer.
type Case = (String, Files, Expect);

/// Damage to the whole file: empty, not SQLite, another program's or an empty SQLite
/// database, a future schema, a directory.
fn whole_file_cases(store: &Files, base: &Path) -> Vec<Case> {
    let mut cases = Vec::new();
    cases.push((
        "zero-length file".into(),
        with_main(store, Vec::new()),
        Expect::StoreError,
    ));
    cases.push((
        "not SQLite".into(),
        with_main(store, b"my notes, not a database\n".repeat(300)),
        Expect::StoreError,
    ));
    for (name, sql) in [
        (
            "another program's database",
            "CREATE TABLE users (name TEXT); INSERT INTO users VALUES ('ann');",
        ),
        ("an empty SQLite database", "PRAGMA user_version = 7;"),
    ] {
        let dir = tempfile::tempdir_in(base).expect("dir");
        let conn = rusqlite::Connection::open(dir.path().join("loopx.db")).expect("sqlite");
        conn.execute_batch(sql).expect("write it");
        drop(conn);
        cases.push((name.into(), files(dir.path()), Expect::StoreError));
    }
    {
        let dir = materialise(store, base);
        let conn = rusqlite::Connection::open(dir.path().join("loopx.db")).expect("sqlite");
        conn.execute("UPDATE schema_version SET version = 99", [])
            .expect("a future schema");
        drop(conn);
        cases.push((
            "a future schema".into(),
            files(dir.path()),
            Expect::StoreError,
        ));
    }
    let mut directory = store.clone();
    directory.insert("loopx.db", Entry::Directory);
    cases.push(("a directory".into(), directory, Expect::StoreError));
    cases
}

/// The file cut short at a bounded set of offsets: inside the header, around page
/// boundaries, halfway, near the end.
fn truncation_cases(store: &Files) -> Vec<Case> {
    let db = bytes(store, "loopx.db");
    let page = page_size(&db);
    let mut cases = Vec::new();
    let mut cuts = vec![
        1,
        16,
        99,
        100,
        page - 1,
        page,
        page + 1,
        db.len() / 2,
        db.len() - page,
        db.len() - 1,
    ];
    cuts.sort_unstable();
    cuts.dedup();
    for cut in cuts.into_iter().filter(|&c| c > 0 && c < db.len()) {
        cases.push((
            format!("truncated to {cut} bytes"),
            with_main(store, db[..cut].to_vec()),
            Expect::StoreError,
        ));
    }

    cases
}

/// One byte flipped at chosen offsets.
fn flip_cases(store: &Files) -> Vec<Case> {
    let db = bytes(store, "loopx.db");
    let page = page_size(&db);
    let mut cases = Vec::new();
    // Byte flips: the header fields SQLite checks (magic, page size, payload fraction, page
    // count, the schema format's low byte), some it does not rely on (the write version, the
    // change counter, the high bytes of the schema format and the text encoding, the user
    // version, reserved space, the version number), b-tree page headers, free space, and an
    // event's payload.
    for at in [0, 16, 17, 21, 28, 47] {
        cases.push((
            format!("header byte {at} flipped"),
            with_main(store, flipped(&db, at)),
            Expect::StoreError,
        ));
    }
    for at in [18, 24, 44, 56, 60, 72, 96] {
        cases.push((
            format!("header byte {at} flipped"),
            with_main(store, flipped(&db, at)),
            Expect::ErrorOrSame,
        ));
    }
    for at in [100, page, 2 * page, 3 * page] {
        cases.push((
            format!("b-tree page header at {at} flipped"),
            with_main(store, flipped(&db, at)),
            Expect::ErrorOrSame,
        ));
    }
    let gaps = unallocated(&db, page);
    assert!(
        !gaps.is_empty(),
        "the store should have free space in its pages"
    );
    for at in gaps.into_iter().take(3) {
        cases.push((
            format!("free space at {at} flipped"),
            with_main(store, flipped(&db, at)),
            Expect::ErrorOrSame,
        ));
    }
    let marker = db
        .windows(MARKER.len())
        .position(|w| w == MARKER.as_bytes())
        .expect("the marker title is stored in the file");
    cases.push((
        format!("an event's payload at {marker} flipped"),
        with_main(store, flipped(&db, marker + 3)),
        Expect::StoreErrorWhereRead,
    ));

    cases
}

#[test]
fn every_verb_refuses_a_damaged_store_with_a_store_error_and_changes_nothing() {
    let base = tempfile::tempdir().expect("a temporary directory");
    let template = base.path().join("template");
    std::fs::create_dir(&template).expect("template dir");
    populate(&template);
    let store = files(&template);
    assert!(
        store["loopx.db-wal"] == Entry::Absent && store["loopx.db-shm"] == Entry::Absent,
        "a store no process has open has no log"
    );
    let baseline = baseline(&store, base.path());
    // The baseline itself: read verbs answer and change nothing, and the answers repeat.
    for ((args, _), answer) in VERBS.iter().zip(&baseline.answers) {
        assert!(!answer.stderr.contains("panicked"), "{args:?}: {answer:?}");
    }
    assert_eq!(baseline.answers[0].code, 0, "{:?}", baseline.answers[0]);
    check(
        "undamaged",
        &store,
        Expect::ErrorOrSame,
        &baseline,
        base.path(),
    );
    let cases: Vec<Case> = [
        whole_file_cases(&store, base.path()),
        truncation_cases(&store),
        flip_cases(&store),
    ]
    .concat();
    // Two workers: the machine is small, and each case spawns a dozen processes.
    let (left, right) = cases.split_at(cases.len() / 2);
    std::thread::scope(|scope| {
        for half in [left, right] {
            let baseline = &baseline;
            let base = base.path();
            scope.spawn(move || {
                for (name, damaged, expect) in half {
                    check(name, damaged, *expect, baseline, base);
                }
            });
        }
    });
}

#[test]
fn only_init_creates_a_store_and_an_empty_file_is_refused() {
    let base = tempfile::tempdir().expect("a temporary directory");
    let dir = base.path();
    std::fs::write(dir.join("loopx.db"), b"").expect("an empty file");
    std::fs::write(dir.join("settle.json"), SETTLEMENT).expect("settlement");
    for (args, _) in VERBS.iter().chain([(&["init"][..], true)].iter()) {
        let answer = loopx(dir, args);
        assert_eq!(answer.code, 6, "{args:?}: {answer:?}");
        assert_eq!(
            answer.error_code().as_deref(),
            Some("store_corrupt"),
            "{args:?}: {answer:?}"
        );
        let len = std::fs::metadata(dir.join("loopx.db"))
            .expect("the file")
            .len();
        assert_eq!(len, 0, "{args:?} wrote to the empty file");
        assert!(!dir.join("loopx.db-wal").exists());
    }
    // A missing store is not created by any verb but `init`.
    std::fs::remove_file(dir.join("loopx.db")).expect("remove it");
    for (args, _) in VERBS {
        let answer = loopx(dir, args);
        assert_eq!(
            (answer.code, answer.error_code().as_deref()),
            (6, Some("store_missing")),
            "{args:?}: {answer:?}"
        );
        assert!(!dir.join("loopx.db").exists(), "{args:?} created the store");
    }
    let answer = loopx(dir, &["init"]);
    assert_eq!(answer.code, 0, "{answer:?}");
    let doc: Value = serde_json::from_str(&answer.stdout).expect("json");
    assert_eq!(doc["init"]["created"], true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.join("loopx.db"))
            .expect("the store")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "the store is owner-only");
    }
    let again: Value = serde_json::from_str(&loopx(dir, &["init"]).stdout).expect("json");
    assert_eq!(again["init"]["created"], false);
}

#[test]
fn racing_inits_and_reads_agree() {
    for round in 0..3 {
        let base = tempfile::tempdir().expect("a temporary directory");
        let dir = base.path().to_path_buf();
        let answers: Vec<(bool, Answer)> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..8)
                .map(|i| {
                    let dir = dir.clone();
                    scope.spawn(move || {
                        let init = i % 2 == 0;
                        let args: &[&str] = if init { &["init"] } else { &["goal", "list"] };
                        (init, loopx(&dir, args))
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("a racer"))
                .collect()
        });
        let mut created = 0;
        for (init, answer) in &answers {
            if *init {
                assert_eq!(answer.code, 0, "round {round}: init: {answer:?}");
                let doc: Value = serde_json::from_str(&answer.stdout).expect("json");
                if doc["init"]["created"] == true {
                    created += 1;
                }
            } else {
                // Before the store appears it is missing; after, it is complete and empty.
                let fine = answer.code == 0
                    || (answer.code == 6
                        && answer.error_code().as_deref() == Some("store_missing"));
                assert!(fine, "round {round}: goal list: {answer:?}");
            }
        }
        assert_eq!(
            created, 1,
            "round {round}: exactly one init creates the store"
        );
        let leftovers: Vec<PathBuf> = std::fs::read_dir(&dir)
            .expect("the directory")
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.to_string_lossy().ends_with(".creating"))
            .collect();
        assert!(leftovers.is_empty(), "{leftovers:?}");
    }
}

fn revision(answer: &Answer) -> Option<u64> {
    serde_json::from_str::<Value>(&answer.stdout)
        .ok()?
        .pointer("/status/revision")?
        .as_u64()
}

/// Where each frame of a write-ahead log starts, and whether it commits a transaction.
fn frames(wal: &[u8]) -> (usize, Vec<(usize, bool)>) {
    let page = usize::try_from(u32::from_be_bytes([wal[8], wal[9], wal[10], wal[11]]))
        .expect("a page size");
    let frame = 24 + page;
    let found = (0..(wal.len() - 32) / frame)
        .map(|i| {
            let at = 32 + i * frame;
            (at, wal[at + 4..at + 8] != [0, 0, 0, 0])
        })
        .collect();
    (page, found)
}

#[test]
fn a_damaged_write_ahead_log_is_reported_before_sqlite_drops_commits() {
    let base = tempfile::tempdir().expect("a temporary directory");
    let template = base.path().join("template");
    std::fs::create_dir(&template).expect("template dir");
    populate(&template);
    // A reader holding the store open keeps the binary's later commits in the log, as a crash
    // of the last process would leave them.
    let reader = rusqlite::Connection::open(template.join("loopx.db")).expect("open");
    let read_revision = || -> u64 {
        let revision: i64 = reader
            .query_row("SELECT revision FROM goals WHERE goal = 'g'", [], |r| {
                r.get(0)
            })
            .expect("the goal's revision");
        u64::try_from(revision).expect("a revision")
    };
    let before_log = read_revision();
    for i in 0..6 {
        let (id, op) = (format!("w{i}"), format!("add-w{i}"));
        let answer = loopx(
            &template,
            &[
                "--goal",
                "g",
                "--as",
                "agent:agent-a",
                "--op",
                &op,
                "todo",
                "add",
                "--id",
                &id,
                "--title",
                &id,
            ],
        );
        assert_eq!(answer.code, 0, "{answer:?}");
    }
    let full = read_revision();
    assert_eq!(full, before_log + 6);
    let mut logged = files(&template);
    drop(reader);
    // After a crash the shared-memory index is rebuilt from the log; leave it out.
    logged.insert("loopx.db-shm", Entry::Absent);
    let wal = bytes(&logged, "loopx.db-wal");
    let (page, all) = frames(&wal);
    let commits = all.iter().filter(|(_, commit)| *commit).count();
    assert!(commits >= 6, "six commits in the log, found {commits}");
    let status = ["--goal", "g", "status"];

    // An intact log: every commit is there.
    let dir = materialise(&logged, base.path());
    assert_eq!(revision(&loopx(dir.path(), &status)), Some(full));

    // A torn tail (the last frame half written) drops the unacknowledged last transaction,
    // silently, as it must.
    let torn = with(
        &logged,
        "loopx.db-wal",
        wal[..wal.len() - page / 2].to_vec(),
    );
    let dir = materialise(&torn, base.path());
    let answer = loopx(dir.path(), &status);
    assert_eq!(revision(&answer), Some(full - 1), "{answer:?}");

    // Damage inside the last committed transaction cannot be told from a torn tail: the log
    // holds nothing after it. It is dropped like one (the README says what a user can do).
    let (last, _) = all.last().copied().expect("a frame");
    let late = with(&logged, "loopx.db-wal", flipped(&wal, last + 24 + 100));
    let dir = materialise(&late, base.path());
    let answer = loopx(dir.path(), &status);
    assert_eq!(revision(&answer), Some(full - 1), "{answer:?}");

    // Damage before committed frames is reported, by every verb, before SQLite sees the log.
    let (first, _) = all[0];
    let early = with(&logged, "loopx.db-wal", flipped(&wal, first + 24 + 100));
    let salt = with(&logged, "loopx.db-wal", flipped(&wal, 17));
    for (name, damaged) in [("a frame", &early), ("the log's header", &salt)] {
        let dir = materialise(damaged, base.path());
        let answer = loopx(dir.path(), &status);
        assert_eq!(
            (answer.code, answer.error_code().as_deref()),
            (6, Some("wal_damaged")),
            "{name}: {answer:?}"
        );
        assert!(answer.stdout.contains("--accept-wal-loss"), "{answer:?}");
        // Only a store error passes `StoreError`; the baseline answers are not consulted.
        let baseline = Baseline {
            answers: VERBS.iter().map(|_| answer.clone()).collect(),
        };
        check(name, damaged, Expect::StoreError, &baseline, base.path());
    }

    // Accepting the loss opens the store without the dropped commits, after keeping the log.
    let dir = materialise(&early, base.path());
    let answer = loopx(dir.path(), &["--accept-wal-loss", "--goal", "g", "status"]);
    assert_eq!(answer.code, 0, "{answer:?}");
    let kept = revision(&answer).expect("a revision");
    assert!(
        kept < full,
        "commits after the damage are gone ({kept} of {full})"
    );
    assert_eq!(
        std::fs::read(dir.path().join("loopx.db-wal.damaged")).expect("the kept log"),
        bytes(&early, "loopx.db-wal")
    );
    // Accepted once, the loss is permanent and the store opens as usual.
    assert_eq!(revision(&loopx(dir.path(), &status)), Some(kept));
}
