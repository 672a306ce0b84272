//! `loopx doctor`: checks the store without changing it: SQLite's integrity check, every
//! goal's history replays to exactly the state the store loads, and the kernel's invariants
//! hold on that state.

use std::fmt::Write as _;

use loopx_kernel::{GoalId, GoalState, RecordedEvent, check_invariants};
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
}

impl Check {
    fn json(&self) -> Value {
        json!({ "check": self.name, "goal": self.goal, "ok": self.ok, "detail": self.detail })
    }
}

pub async fn run(ctx: &Ctx) -> Result<Exit, CliError> {
    // Opening refuses a damaged or newer file before anything is written to it.
    let backend = store::open(ctx.location(), false).await?;
    let mut checks = Vec::new();
    if let Backend::Sqlite(sqlite) = &backend {
        checks.push(match sqlite.integrity_check().await {
            Ok(()) => Check {
                name: "integrity",
                goal: None,
                ok: true,
                detail: "PRAGMA integrity_check: ok".into(),
            },
            Err(error) => Check {
                name: "integrity",
                goal: None,
                ok: false,
                detail: error.to_string(),
            },
        });
    }
    match backend.store().goals(ctx.now).await {
        Ok(goals) => {
            checks.push(Check {
                name: "goals",
                goal: None,
                ok: true,
                detail: format!("{} goal(s) listed", goals.len()),
            });
            for summary in goals {
                check_goal(ctx, &backend, &summary.goal, &mut checks).await;
            }
        }
        Err(error) => checks.push(Check {
            name: "goals",
            goal: None,
            ok: false,
            detail: error.to_string(),
        }),
    }
    let ok = checks.iter().all(|c| c.ok);
    let value = json!({
        "doctor": {
            "ok": ok,
            "backend": backend.kind(),
            "store": backend.describe(),
            "checks": checks.iter().map(Check::json).collect::<Vec<_>>(),
        }
    });
    ctx.out.emit(&value, |out| {
        let mut text = String::new();
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
    let fail = |check: &'static str, detail: String| Check {
        name: check,
        goal: Some(goal.clone()),
        ok: false,
        detail,
    };
    let loaded = match backend.store().load(goal).await {
        Ok(Some(state)) => state,
        Ok(None) => {
            checks.push(fail("load", "listed but cannot be loaded".into()));
            return;
        }
        Err(error) => {
            checks.push(fail("load", error.to_string()));
            return;
        }
    };
    match rebuild(backend, goal).await {
        Ok(Some(replayed)) if replayed == loaded => checks.push(Check {
            name: "replay",
            goal: Some(goal.clone()),
            ok: true,
            detail: format!("history replays to the stored state at revision {}", loaded.revision),
        }),
        Ok(Some(replayed)) => checks.push(fail(
            "replay",
            format!(
                "replaying the history gives revision {} but the store loads revision {}, or their contents differ",
                replayed.revision, loaded.revision
            ),
        )),
        Ok(None) => checks.push(fail("replay", "the goal has no recorded events".into())),
        Err(detail) => checks.push(fail("replay", detail)),
    }
    let violations = check_invariants(&loaded, ctx.now);
    if violations.is_empty() {
        checks.push(Check {
            name: "invariants",
            goal: Some(goal.clone()),
            ok: true,
            detail: "the kernel's invariants hold".into(),
        });
    } else {
        let shown: Vec<String> = violations
            .iter()
            .map(|v| format!("{}: {}", v.rule, v.detail))
            .collect();
        checks.push(fail("invariants", shown.join("; ")));
    }
}
