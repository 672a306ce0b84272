//! `loopx doctor`: checks the store without changing it: SQLite's integrity check, no rows
//! without their goal row, every goal's history replays to exactly the state the store loads,
//! its index rows (goal row, registered agents, frontier rows, snapshot bookkeeping) match what
//! the replayed history gives, and the kernel's invariants hold on that state. With
//! `--verify`, also every commit against what it was made from (store schema 7): its command
//! against the receipt's digest, its signature against the keys registered at that revision,
//! and its events against the kernel's re-execution of the command.

use std::fmt::Write as _;

use loopx_kernel::{GoalId, GoalState, RecordedEvent, check_invariants};
use loopx_store::RowDamage;
use serde_json::{Value, json};

use crate::context::Ctx;
use crate::error::{CliError, Exit};
use crate::output::Style;
use crate::store::{self, Backend};

/// How many events are read per page.
const PAGE: usize = 1000;

struct Check {
    name: &'static str,
    goal: Option<GoalId>,
    ok: bool,
    detail: String,
    /// The kind of damage a failed `rows` check found (`RowDamage::code`).
    kind: Option<&'static str>,
}

impl Check {
    fn json(&self) -> Value {
        let mut value =
            json!({ "check": self.name, "goal": self.goal, "ok": self.ok, "detail": self.detail });
        if let (Some(kind), Some(map)) = (self.kind, value.as_object_mut()) {
            map.insert("kind".into(), json!(kind));
        }
        value
    }

    fn ok(name: &'static str, goal: Option<&GoalId>, detail: String) -> Check {
        Check {
            name,
            goal: goal.cloned(),
            ok: true,
            detail,
            kind: None,
        }
    }

    fn failed(name: &'static str, goal: Option<&GoalId>, detail: String) -> Check {
        Check {
            name,
            goal: goal.cloned(),
            ok: false,
            detail,
            kind: None,
        }
    }

    fn damage(damage: &RowDamage) -> Check {
        Check {
            name: "rows",
            goal: Some(damage.goal().clone()),
            ok: false,
            detail: damage.to_string(),
            kind: Some(damage.code()),
        }
    }
}

/// Flags of `loopx doctor`.
#[derive(Debug, clap::Args)]
pub struct DoctorArgs {
    /// Also re-check every commit against its recorded command and signature: a row edited in
    /// the database (an event's payload with its chain recomputed, or a stored command) is
    /// named by goal and revision. Commits from before store schema 7 keep no command and are
    /// reported as unverifiable, not as damage.
    #[arg(long)]
    verify: bool,
}

pub async fn run(ctx: &Ctx, args: &DoctorArgs) -> Result<Exit, CliError> {
    // Opening refuses a damaged or newer file before anything is written to it.
    let backend = store::open(ctx.location(), false).await?;
    let mut checks = Vec::new();
    if let Backend::Sqlite(sqlite) = &backend {
        checks.push(match sqlite.integrity_check().await {
            Ok(()) => Check::ok("integrity", None, "PRAGMA integrity_check: ok".into()),
            Err(error) => Check::failed("integrity", None, error.to_string()),
        });
    }
    match backend.retention().orphans().await {
        Ok(orphans) => checks.extend(orphans.iter().map(Check::damage)),
        Err(error) => checks.push(Check::failed("rows", None, error.to_string())),
    }
    // The goals as stored, checked before anything lists them: a listing recomputes stale
    // index rows, which would hide a changed one.
    let stored = match backend.retention().stored_goals().await {
        Ok(stored) => stored,
        Err(error) => {
            checks.push(Check::failed("goals", None, error.to_string()));
            Vec::new()
        }
    };
    let mut goal_checks = Vec::new();
    for goal in &stored {
        check_goal(ctx, &backend, goal, &mut goal_checks).await;
        if args.verify {
            verify_goal(&backend, goal, &mut goal_checks).await;
        }
    }
    checks.push(match backend.store().goals(ctx.now).await {
        Ok(goals) => Check::ok("goals", None, format!("{} goal(s) listed", goals.len())),
        Err(error) => Check::failed("goals", None, error.to_string()),
    });
    checks.extend(goal_checks);
    let ok = checks.iter().all(|c| c.ok);
    let mut value = json!({
        "doctor": {
            "ok": ok,
            "backend": backend.kind(),
            "store": backend.describe(),
            "clock": backend.clock().name(),
            "retention": backend.retention().policy(),
            "checks": checks.iter().map(Check::json).collect::<Vec<_>>(),
        }
    });
    // Keys out of place weaken who a signature proves, but damage nothing: warned, not failed.
    let warnings = crate::cmd::key::misplaced_warnings(ctx);
    if let (false, Some(doctor)) = (warnings.is_empty(), value["doctor"].as_object_mut()) {
        doctor.insert("key_warnings".into(), json!(warnings));
    }
    ctx.out.emit(&value, |out| {
        let mut text = crate::cmd::key::misplaced_text(&warnings);
        for check in &checks {
            let mark = if check.ok {
                out.paint(Style::Good, "ok  ")
            } else {
                out.paint(Style::Bad, "FAIL")
            };
            let goal = check
                .goal
                .as_ref()
                .map_or_else(String::new, |g| format!(" [{g}]"));
            let _ = writeln!(text, "{mark}  {}{goal}: {}", check.name, check.detail);
        }
        let policy = backend.retention().policy();
        if policy.is_on() {
            let _ = writeln!(
                text,
                "note  retention: every {} revisions a goal's history beyond its last {} events moves to its archive (still read by `log` and `status --at-revision`, checked by `doctor --verify`)",
                policy.every, policy.keep_events
            );
        } else {
            text.push_str("note  retention: off (goals are compacted only on request)
");
        }
        if backend.clock() == loopx_store::StoreClock::Test {
            text.push_str(
                "note  the store runs on a test clock: commit times follow --now, unbounded by any clock (tests and scripts only)\n",
            );
        }
        if ok {
            text.push_str("the store is sound\n");
        } else {
            text.push_str(
                "the store is damaged; nothing was changed. Restore it from a backup, or export the sound goals with `loopx export` and import them into a new store\n",
            );
        }
        text
    });
    Ok(if ok { Exit::Ok } else { Exit::Store })
}

/// `--verify`: one `verify` check per goal, failed once per commit that does not agree with
/// what it was made from.
async fn verify_goal(backend: &Backend, goal: &GoalId, checks: &mut Vec<Check>) {
    match loopx_store::verify_history(backend.retention(), goal).await {
        Ok(found) if found.findings.is_empty() => {
            let mut detail = format!(
                "{} commit(s) re-checked against their commands and signatures",
                found.verified
            );
            if found.unverifiable > 0 {
                let _ = write!(
                    detail,
                    "; {} unverifiable (recorded before store schema 7 or imported: no command kept)",
                    found.unverifiable
                );
            }
            checks.push(Check::ok("verify", Some(goal), detail));
        }
        Ok(found) => checks.extend(found.findings.iter().map(|finding| Check {
            name: "verify",
            goal: Some(goal.clone()),
            ok: false,
            detail: format!("revision {}: {}", finding.revision, finding.problem),
            kind: Some("commit_altered"),
        })),
        Err(error) => checks.push(Check::failed("verify", Some(goal), error.to_string())),
    }
}

async fn all_events(backend: &Backend, goal: &GoalId) -> Result<Vec<RecordedEvent>, CliError> {
    let mut events: Vec<RecordedEvent> = Vec::new();
    loop {
        let after = events.last().map_or(0, |e| e.revision);
        let page = backend.store().events(goal, after, PAGE).await?;
        if page.is_empty() {
            return Ok(events);
        }
        events.extend(page);
    }
}

/// The goal's state rebuilt from its base snapshot (after a compaction) and its events.
pub async fn rebuild(backend: &Backend, goal: &GoalId) -> Result<Option<GoalState>, String> {
    let events = all_events(backend, goal).await.map_err(|e| e.message)?;
    let first = events.first().map_or(1, |e| e.revision);
    let mut state = if first > 1 {
        let base = backend
            .retention()
            .base(goal)
            .await
            .map_err(|e| e.to_string())?
            .ok_or_else(|| {
                format!("history starts at revision {first} and there is no base snapshot")
            })?;
        Some(base.into_state().map_err(|e| e.to_string())?)
    } else {
        None
    };
    for event in &events {
        match &mut state {
            None => state = Some(GoalState::genesis(event).map_err(|e| e.to_string())?),
            Some(state) => state.apply(event).map_err(|e| e.to_string())?,
        }
    }
    Ok(state)
}

async fn check_goal(ctx: &Ctx, backend: &Backend, goal: &GoalId, checks: &mut Vec<Check>) {
    let fail = |check: &'static str, detail: String| Check::failed(check, Some(goal), detail);
    // A load that fails still has its history replayed: that names the damaged row.
    let loaded = match backend.store().load(goal).await {
        Ok(Some(state)) => Some(state),
        Ok(None) => {
            checks.push(fail("load", "listed but cannot be loaded".into()));
            None
        }
        Err(error) => {
            checks.push(fail("load", error.to_string()));
            None
        }
    };
    let replayed = match rebuild(backend, goal).await {
        Ok(Some(replayed)) => Some(replayed),
        Ok(None) => {
            checks.push(fail("replay", "the goal has no recorded events".into()));
            None
        }
        Err(detail) => {
            checks.push(fail("replay", detail));
            None
        }
    };
    let (Some(loaded), Some(replayed)) = (loaded, replayed) else {
        return;
    };
    if replayed == loaded {
        checks.push(Check::ok(
            "replay",
            Some(goal),
            format!(
                "history replays to the stored state at revision {}",
                loaded.revision
            ),
        ));
    } else {
        checks.push(fail(
            "replay",
            format!(
                "replaying the history gives revision {} but the store loads revision {}, or their contents differ",
                replayed.revision, loaded.revision
            ),
        ));
    }
    match backend.retention().check_rows(&replayed, ctx.now).await {
        Ok(damage) if damage.is_empty() => checks.push(Check::ok(
            "rows",
            Some(goal),
            "the goal row, agents and frontier rows match the history".into(),
        )),
        Ok(damage) => checks.extend(damage.iter().map(Check::damage)),
        Err(error) => checks.push(fail("rows", error.to_string())),
    }
    let violations = check_invariants(&loaded, ctx.now);
    if violations.is_empty() {
        checks.push(Check::ok(
            "invariants",
            Some(goal),
            "the kernel's invariants hold".into(),
        ));
    } else {
        let shown: Vec<String> = violations
            .iter()
            .map(|v| format!("{}: {}", v.rule, v.detail))
            .collect();
        checks.push(fail("invariants", shown.join("; ")));
    }
}
