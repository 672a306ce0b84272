//! `loopx run` as people expect it, with real processes and real git: SIGINT and SIGTERM stop
//! the executor's whole process group and leave the turn as `run --help` says; `--tee` shows
//! the executor's output while its turn still runs; an executor given after `--` gets its words
//! exactly as they were given.

mod support;

use std::io::{BufRead as _, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use support::{Loopx, git, signal};

const GOAL: &str = "demo";

/// The turn. With `hang` present it leaves its pid, its child's and its grandchild's in `pids/`
/// and stands still until killed; otherwise it appends a line to `work.txt`, commits it and
/// reports the todo complete with nothing to follow.
const TURN: &str = r#"
if [ -e ../hang ]; then
  echo $$ > ../pids/turn.tmp && mv ../pids/turn.tmp ../pids/turn
  sh -c 'sleep 300 & echo $! > ../pids/grandchild.tmp; mv ../pids/grandchild.tmp ../pids/grandchild; echo $$ > ../pids/child.tmp; mv ../pids/child.tmp ../pids/child; wait' &
  wait
fi
echo "$LOOPX_TODO $LOOPX_TURN" >> work.txt
git add work.txt && git -c user.name=a -c user.email=a@example.com commit -q -m "$LOOPX_TODO"
echo '{"transition":{"kind":"complete","continuation":{"kind":"no_follow_up"}},"summary":"done"}'
"#;

/// The validator: the work file exists at the committed head.
const CHECK: &str = "git diff --quiet HEAD && test -s work.txt\n";

/// A SQLite store, a goal with one criterion on `repo:demo` and the todo `edit` (with
/// `todo_flags`), and a git repository `repo` holding `turn.sh` and `check.sh`.
fn setup(todo_flags: &[&str]) -> Loopx {
    let lx = Loopx::sqlite();
    lx.ok(&["init"]);
    let owner = ["--goal", GOAL, "--as", "person:olivia"];
    lx.ok(&[
        &owner[..],
        &[
            "goal",
            "create",
            "--objective",
            "write the work file",
            "--criterion",
            "work-done,validate,repo:demo,the work file is committed",
            "--agent",
            "agent-a",
        ],
    ]
    .concat());
    lx.ok(&[
        &owner[..],
        &["todo", "add", "--id", "edit", "--title", "append a line"],
        todo_flags,
    ]
    .concat());
    let repo = lx.path("repo");
    std::fs::create_dir_all(&repo).expect("repo dir");
    std::fs::create_dir_all(lx.path("pids")).expect("pids dir");
    std::fs::write(repo.join("turn.sh"), TURN).expect("turn script");
    std::fs::write(repo.join("check.sh"), CHECK).expect("check script");
    git(&repo, &["init", "-q"]);
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-q", "-m", "start"]);
    lx
}

/// `loopx --store … <args>` started in the scratch directory, its output piped.
fn start(lx: &Loopx, args: &[&str]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_loopx"))
        .arg("--store")
        .arg(&lx.store)
        .args(args)
        .current_dir(lx.dir.path())
        .env_remove("LOOPX_STORE")
        .env_remove("LOOPX_ACTOR")
        .env_remove("LOOPX_GOAL")
        .env_remove("LOOPX_KEY")
        .env_remove("LOOPX_KEYS")
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("loopx starts")
}

const RUN: [&str; 11] = [
    "--goal",
    GOAL,
    "run",
    "--agent",
    "agent-a",
    "--validate",
    "sh check.sh",
    "--subject",
    "repo:demo",
    "--workspace",
    "repo",
];

/// `RUN` with the executor given as `--exec 'sh turn.sh'`, and `extra` flags.
fn run_args<'a>(extra: &[&'a str]) -> Vec<&'a str> {
    [&RUN[..], &["--exec", "sh turn.sh"], extra].concat()
}

/// Waits up to `limit` for `done` to hold.
fn eventually(limit: Duration, mut done: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if done() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    done()
}

/// The pid written in `pids/<name>`, once it is there.
fn pid(lx: &Loopx, name: &str) -> u32 {
    let path = lx.path("pids").join(name);
    let mut text = String::new();
    let found = eventually(Duration::from_secs(30), || {
        text = std::fs::read_to_string(&path).unwrap_or_default();
        !text.trim().is_empty()
    });
    assert!(found, "the turn never wrote `{name}`");
    text.trim().parse().expect("a pid")
}

/// Whether `pid` still runs: it has a `/proc` entry that is not a zombie (a killed process
/// whose parent has not reaped it yet runs no more).
fn alive(pid: u32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The state follows the command name, which is parenthesised: `pid (comm) S …`.
    let state = stat.rsplit(')').next().map_or("", str::trim_start);
    !stat.is_empty() && !state.starts_with('Z') && !state.starts_with('X')
}

/// Kills what a failed test left behind, when it is dropped.
struct Leftovers(Vec<u32>);

impl Drop for Leftovers {
    fn drop(&mut self) {
        for pid in &self.0 {
            let _ = Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .stderr(Stdio::null())
                .status();
        }
    }
}

/// Waits for `child` to exit (at most a minute); its exit code, stdout and stderr.
fn exited(mut child: Child) -> (i32, String, String) {
    let gone = eventually(Duration::from_secs(60), || {
        child.try_wait().ok().flatten().is_some()
    });
    if !gone {
        let _ = child.kill();
    }
    let output = child.wait_with_output().expect("loopx is reaped");
    assert!(gone, "loopx did not exit after the signal");
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// Starts `loopx run --json` with `hang` present, waits until its turn, the turn's child and
/// grandchild run, and interrupts it with `name`. Its exit code and JSON document, once every
/// process of the turn is gone.
fn interrupt_mid_turn(lx: &Loopx, name: &str) -> (i32, Value) {
    std::fs::write(lx.path("hang"), "").expect("marker");
    let run = start(lx, &[&["--json"][..], &run_args(&[])].concat());
    let pids = [pid(lx, "turn"), pid(lx, "child"), pid(lx, "grandchild")];
    let _leftovers = Leftovers(pids.to_vec());
    assert!(pids.iter().all(|p| alive(*p)), "the turn runs: {pids:?}");

    signal(run.id(), name);
    let (code, stdout, stderr) = exited(run);

    let gone = eventually(Duration::from_secs(10), || !pids.iter().any(|p| alive(*p)));
    assert!(
        gone,
        "SIG{name}: the turn's processes outlived the run: {:?}",
        pids.iter().filter(|p| alive(**p)).collect::<Vec<_>>()
    );
    std::fs::remove_file(lx.path("hang")).expect("marker removed");
    for file in ["turn", "child", "grandchild"] {
        std::fs::remove_file(lx.path("pids").join(file)).expect("pid file removed");
    }
    let document: Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("one JSON document ({e}):\n{stdout}\nstderr:\n{stderr}"));
    (code, document)
}

/// What `loopx next` says the agent's lease stands at.
fn lease_step(lx: &Loopx) -> Value {
    lx.ok(&["--goal", GOAL, "next", "--agent", "agent-a"])["decision"]["lease"].clone()
}

#[test]
fn sigint_stops_the_executors_process_group_and_the_next_run_resumes_the_turn() {
    let lx = setup(&["--idempotent"]);

    let (code, out) = interrupt_mid_turn(&lx, "INT");

    assert_eq!(code, 130, "SIGINT exits 130: {out:#}");
    let error = &out["error"];
    assert_eq!(error["code"], "interrupted", "{out:#}");
    assert_eq!(error["details"]["signal"], "SIGINT");
    let in_flight = &error["details"]["in_flight"];
    assert_eq!(in_flight["todo"], "edit", "{out:#}");
    let message = error["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("stays begun under agent:agent-a's lease"),
        "{message}"
    );
    assert!(
        error["hint"]
            .as_str()
            .is_some_and(|h| h.contains("run `loopx run` again")),
        "{out:#}"
    );
    // As documented: the turn stays begun under the agent's lease, which the next run resumes.
    let lease = lease_step(&lx);
    assert_eq!(lease["step"], "resume", "{lease:#}");
    assert_eq!(lease["turn"], in_flight["turn"]);
    assert_eq!(lease["epoch"], in_flight["epoch"]);

    let resumed = lx.ok(&run_args(&[]));

    let turn = &resumed["steps"][0]["turn"];
    assert_eq!(turn["outcome"], "settled", "{resumed:#}");
    assert_eq!(turn["resumed"], true);
    assert_eq!(turn["turn"], in_flight["turn"], "the same turn, taken over");
    assert_eq!(resumed["decision"]["kind"], "terminal", "{resumed:#}");
    let work = std::fs::read_to_string(lx.path("repo/work.txt")).expect("the work file");
    assert_eq!(
        work.lines().count(),
        1,
        "the interrupted turn wrote nothing"
    );
}

#[test]
fn sigterm_stops_the_executors_process_group_and_leaves_an_unsafe_turn_to_repair() {
    let lx = setup(&[]);

    let (code, out) = interrupt_mid_turn(&lx, "TERM");

    assert_eq!(code, 143, "SIGTERM exits 143: {out:#}");
    assert_eq!(out["error"]["code"], "interrupted");
    assert_eq!(out["error"]["details"]["signal"], "SIGTERM");
    let turn = out["error"]["details"]["in_flight"]["turn"].clone();
    assert_eq!(lease_step(&lx)["step"], "resume");

    // The todo is not safe to repeat: the next run takes the turn over and stops at `repair`,
    // whose fix is the verb the interruption's hint names.
    let (code, again) = lx.json(&run_args(&[]));

    assert_eq!(code, 13, "{again:#}");
    assert_eq!(again["steps"][0]["turn"]["outcome"], "unknown", "{again:#}");
    let issue = &again["decision"]["issue"];
    assert_eq!(issue["issue"], "outcome_unknown", "{again:#}");
    assert_eq!(issue["turn"], turn);
    assert_eq!(issue["fix"]["verb"], "resolve-outcome");
    assert!(
        !lx.path("repo/work.txt").exists(),
        "nothing re-ran the turn"
    );
}

#[test]
fn sigint_between_turns_leaves_nothing_in_flight() {
    let lx = setup(&[]);
    // Deferred for a day: `run --wait` waits, and is interrupted while it waits.
    lx.ok(&[
        "--goal",
        GOAL,
        "--as",
        "person:olivia",
        "todo",
        "defer",
        "--todo",
        "edit",
        "--until-time",
        "2099-01-01T00:00:00Z",
    ]);
    let run = start(&lx, &[&["--json"][..], &run_args(&["--wait"])].concat());
    // The first step is done once the head is observed; then `run` waits.
    let observed = eventually(Duration::from_secs(30), || {
        lx.ok(&["--goal", GOAL, "log"])["events"]
            .as_array()
            .is_some_and(|events| {
                events
                    .iter()
                    .any(|e| e["event"]["type"] == "observation_recorded")
            })
    });
    assert!(observed, "the run never stepped");

    signal(run.id(), "INT");
    let (code, stdout, _) = exited(run);

    assert_eq!(code, 130, "{stdout}");
    let out: Value = serde_json::from_str(&stdout).expect("one JSON document");
    assert_eq!(out["error"]["details"]["in_flight"], Value::Null, "{out:#}");
    assert!(
        out["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("between turns")),
        "{out:#}"
    );
}

/// The executor prints a line, then stands still until `release` exists.
const CHATTY: &str = r#"
echo "first line from the turn"
echo "a line on standard error" >&2
while [ ! -e ../release ]; do sleep 0.05; done
echo "$LOOPX_TODO" >> work.txt
git add work.txt && git -c user.name=a -c user.email=a@example.com commit -q -m "$LOOPX_TODO"
echo '{"transition":{"kind":"complete","continuation":{"kind":"no_follow_up"}},"summary":"done"}'
"#;

#[test]
fn tee_shows_the_executors_output_while_its_turn_runs() {
    let lx = setup(&[]);
    std::fs::write(lx.path("repo/turn.sh"), CHATTY).expect("turn script");
    git(&lx.path("repo"), &["commit", "-q", "-am", "a chatty turn"]);
    let mut run = start(&lx, &run_args(&["--tee"]));
    let stdout = run.stdout.take().expect("stdout");
    let (lines, seen) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if lines.send(line).is_err() {
                break;
            }
        }
    });

    let first = seen.recv_timeout(Duration::from_secs(30));

    // The turn is still waiting for `release`: the line came while it ran.
    assert!(!lx.path("release").exists());
    assert_eq!(first.as_deref(), Ok("first line from the turn"));
    std::fs::write(lx.path("release"), "").expect("release the turn");
    let (code, _, stderr) = exited(run);
    reader.join().expect("the reader ends");
    let rest: Vec<String> = seen.try_iter().collect();
    assert_eq!(code, 0, "{rest:?}\n{stderr}");
    assert!(
        stderr.contains("a line on standard error"),
        "standard error goes to standard error: {stderr}"
    );
    assert!(
        rest.iter()
            .any(|l| l.starts_with("step   1") && l.contains("settled")),
        "the progress follows: {rest:?}"
    );
}

#[test]
fn tee_with_json_leaves_standard_output_to_the_document() {
    let lx = setup(&[]);
    std::fs::write(lx.path("repo/turn.sh"), CHATTY).expect("turn script");
    git(&lx.path("repo"), &["commit", "-q", "-am", "a chatty turn"]);
    std::fs::write(lx.path("release"), "").expect("nothing to wait for");

    let run = lx.run(&[&["--json"][..], &run_args(&["--tee"])].concat());

    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.json()["decision"]["kind"], "terminal");
    assert!(
        run.stderr.contains("first line from the turn")
            && run.stderr.contains("a line on standard error"),
        "{}",
        run.stderr
    );
}

#[test]
fn without_tee_the_executors_output_is_not_shown() {
    let lx = setup(&[]);
    std::fs::write(lx.path("repo/turn.sh"), CHATTY).expect("turn script");
    git(&lx.path("repo"), &["commit", "-q", "-am", "a chatty turn"]);
    std::fs::write(lx.path("release"), "").expect("nothing to wait for");

    let run = lx.run(&run_args(&[]));

    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        !run.stdout.contains("first line from the turn"),
        "{}",
        run.stdout
    );
    assert!(
        !run.stderr.contains("a line on standard error"),
        "{}",
        run.stderr
    );
}

/// Words no shell would leave alone: spaces, both quotes, a variable, a glob, a backslash.
const WORDS: [&str; 6] = [
    "two words",
    "it's",
    r#"say "hi""#,
    "$HOME",
    "*",
    r"back\slash",
];

#[test]
fn an_executor_after_the_double_dash_gets_its_words_as_they_are() {
    let lx = setup(&[]);
    let record = lx.path("args.txt");
    let script = format!("printf '%s\\n' \"$@\" > '{}'", record.display());
    let mut args: Vec<&str> = [&RUN[..], &["--", "sh", "-c", &script, "turn"]].concat();
    args.extend(WORDS);

    let run = lx.run(&args);

    assert!(
        run.code == 0 || run.code >= 10,
        "run stopped at a decision: {}\n{}",
        run.stdout,
        run.stderr
    );
    let got = std::fs::read_to_string(&record).expect("the executor ran");
    assert_eq!(got.lines().collect::<Vec<_>>(), WORDS);
}

#[test]
fn the_executor_is_given_one_way_only() {
    let lx = setup(&[]);
    let both = [&RUN[..], &["--exec", "sh turn.sh", "--", "sh", "turn.sh"]].concat();
    let neither = RUN.to_vec();
    for (args, what) in [(both, "cannot be used with"), (neither, "--exec")] {
        let (code, error) = lx.json(&args);
        assert_eq!(code, 2, "{error:#}");
        assert_eq!(error["error"]["code"], "usage");
        assert!(
            error["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains(what)),
            "{error:#}"
        );
    }
    assert!(!lx.path("repo/work.txt").exists(), "nothing ran");
}
