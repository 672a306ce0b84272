//! `loopx next --agent A`: the kernel's decision for one agent, now.

use std::fmt::Write as _;

use clap::Args;
use loopx_kernel::{AgentId, Decision, Question, decide};
use serde_json::json;

use crate::context::Ctx;
use crate::error::{CliError, Exit};
use crate::output::{Output, Style, compact};

/// Flags of `loopx next`.
#[derive(Debug, Args)]
pub struct NextArgs {
    /// The agent asking.
    #[arg(long)]
    agent: AgentId,
}

pub async fn run(ctx: &Ctx, args: &NextArgs) -> Result<Exit, CliError> {
    let goal = ctx.goal()?;
    let backend = ctx.open().await?;
    let state = ctx.load(&backend, &goal).await?;
    let decision = decide(&state, &args.agent, ctx.now);
    let value = json!({
        "goal": goal,
        "revision": state.revision,
        "decision": decision,
    });
    ctx.out.emit(&value, |out| describe(out, &decision));
    Ok(Exit::Ok)
}

fn describe(out: &Output, decision: &Decision) -> String {
    let kind = out.paint(Style::Bold, decision.kind());
    match decision {
        Decision::Continue(a) => {
            let mut text = format!("{kind}: work on `{}` ({})\n", a.todo, a.title);
            let _ = writeln!(text, "  lease: {}", compact(&a.lease));
            if !a.pending_gates.is_empty() {
                let gates: Vec<String> = a.pending_gates.iter().map(ToString::to_string).collect();
                let _ = writeln!(text, "  still pending elsewhere: {}", gates.join(", "));
            }
            if let Some(note) = &a.handoff {
                let _ = writeln!(text, "  handoff: {}", note.next_action);
            }
            text
        }
        Decision::Wait { until, reasons } => {
            let mut text = match until {
                Some(t) => format!("{kind} until {t}\n"),
                None => format!("{kind} for an event\n"),
            };
            for reason in reasons {
                let _ = writeln!(text, "  {}", compact(reason));
            }
            text
        }
        Decision::Ask { questions, until } => {
            let mut text = format!("{kind}\n");
            for question in questions {
                match question {
                    Question::Gate {
                        gate,
                        question,
                        owner,
                        overdue,
                        ..
                    } => {
                        let late = if *overdue { " (overdue)" } else { "" };
                        let _ = writeln!(text, "  gate {gate} for {owner}{late}: {question}");
                    }
                    Question::Budget {
                        dimension, scope, ..
                    } => {
                        let _ = writeln!(
                            text,
                            "  budget: {dimension} exhausted ({scope}); the owner can raise it with `loopx goal amend`"
                        );
                    }
                }
            }
            if let Some(t) = until {
                let _ = writeln!(text, "  wake at {t}");
            }
            text
        }
        Decision::Replan { reason } => format!("{kind}: {}\n", compact(reason)),
        Decision::Repair { issue } => format!("{kind}: {}\n", compact(issue)),
        Decision::Terminal { outcome } => format!("{kind}: {}\n", compact(outcome)),
    }
}
