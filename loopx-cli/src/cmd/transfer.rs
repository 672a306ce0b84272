//! `loopx export|import`: a goal's recorded events as JSON lines, one event per line, each
//! commit's events after a line saying what the commit was made from (its operation, digest,
//! command and signature), ending with a trailer line that says how many events the file holds,
//! the revision it reaches and the history's chained digest (`loopx_store::HistoryChain`), so
//! that an import refuses a file cut short or changed, and verifies every commit against the
//! goal's registered keys before it takes the history.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::PathBuf;

use clap::Args;
use loopx_kernel::seams::{AppendRequest, Authorship, Commit, StoreError};
use loopx_kernel::{
    Event, GoalId, GoalState, OperationId, RecordedEvent, SCHEMA_VERSION, check_invariants,
};
use loopx_provider::files::{self, FileError, Mode};
use loopx_store::{HistoryChain, RecordedCommit, Verification};
use serde_json::json;
use sha2::{Digest as _, Sha256};

use crate::context::{Ctx, read_text};
use crate::error::{CliError, Exit};

/// Flags of `loopx export`.
#[derive(Debug, Args)]
pub struct ExportArgs {
    /// Write the JSON lines to this file instead of standard output.
    #[arg(long)]
    out: Option<PathBuf>,
}

/// Flags of `loopx import`.
#[derive(Debug, Args)]
pub struct ImportArgs {
    /// The JSON lines to import (`-` or absent: standard input).
    #[arg(long)]
    file: Option<PathBuf>,
    /// Take a history whose commits do not all verify against the goal's registered keys (an
    /// export of an older loopx, or one changed after it was written), as the acting actor's
    /// decision: the looser policy. The goal then says it holds unverified commits.
    #[arg(long)]
    accept_unverified: bool,
}

fn lines(events: &[RecordedEvent]) -> Result<String, CliError> {
    let mut text = String::new();
    for event in events {
        let line = serde_json::to_string(event)
            .map_err(|e| CliError::new(Exit::Other, "encode_failed", e.to_string(), ""))?;
        text.push_str(&line);
        text.push('\n');
    }
    Ok(text)
}

/// The format a trailer names: v3 files hold a commit line before each commit's events.
const FORMAT: &str = "loopx.export.v3";

/// The format before commit lines: its histories carry nothing to verify them by.
const FORMAT_V2: &str = "loopx.export.v2";

/// What one commit was made from, as an export writes it before the commit's events.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct CommitRecord {
    /// The operation id it was committed under.
    operation: OperationId,
    /// The digest its receipt keeps.
    digest: String,
    /// The revision it produced.
    revision: u64,
    /// How many events it holds (the lines after this one).
    events: u64,
    /// The command and its signature, when the store kept them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    authorship: Option<Authorship>,
}

/// A commit line as written: `{"commit": {…}}`.
#[derive(serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct CommitLine {
    commit: CommitRecord,
}

/// The last line of an export.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Trailer {
    /// Always [`FORMAT`].
    format: String,
    /// The goal.
    goal: GoalId,
    /// How many events the file holds (one line each): revisions 1 to `revision`.
    events: u64,
    /// The revision the history reaches.
    revision: u64,
    /// The chained digest of the history (`HistoryChain::head`).
    chain: String,
}

/// The trailer line as written: `{"trailer": {…}}`.
#[derive(serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct TrailerLine {
    trailer: Trailer,
}

/// The trailer of `events` of `goal`, which must hold revisions 1 to the last without a gap;
/// a gap is a damaged history, never a shorter one.
fn trailer(goal: &GoalId, events: &[RecordedEvent]) -> Result<Trailer, CliError> {
    let mut chain = HistoryChain::new(goal);
    for event in events {
        chain
            .push(event)
            .map_err(|revision| StoreError::HistoryDamaged {
                goal: goal.clone(),
                revision,
                detail: "an event is missing from its history".into(),
            })?;
    }
    Ok(Trailer {
        format: FORMAT.into(),
        goal: goal.clone(),
        events: chain.events(),
        revision: chain.revision(),
        chain: chain.head(),
    })
}

pub async fn export(ctx: &Ctx, args: &ExportArgs) -> Result<Exit, CliError> {
    let goal = ctx.goal()?;
    let backend = ctx.open().await?;
    let state = ctx.load(&backend, &goal).await?;
    let mut events: Vec<RecordedEvent> = Vec::new();
    loop {
        let after = events.last().map_or(0, |e| e.revision);
        let page = loopx_store::history(backend.retention(), &goal, after, 1000).await?;
        if page.is_empty() {
            break;
        }
        events.extend(page);
    }
    if let Some(first) = events.first().filter(|e| e.revision != 1) {
        // Only a compaction that deleted events (before the store kept an archive) explains a
        // later start (the store checked the events against that origin); anything else is
        // damage.
        let base = backend.retention().archive_origin(&goal).await?;
        if base.is_none_or(|base| base.state.revision + 1 != first.revision) {
            return Err(StoreError::HistoryDamaged {
                goal: goal.clone(),
                revision: 1,
                detail: format!(
                    "its history starts at revision {} without a compaction",
                    first.revision
                ),
            }
            .into());
        }
        return Err(CliError::new(
            Exit::Other,
            "history_compacted",
            format!(
                "the history of goal `{goal}` before revision {} was compacted; an export needs every event",
                first.revision
            ),
            "export before compacting, or keep the store itself as the backup",
        ));
    }
    if events.last().map(|e| e.revision) != Some(state.revision) {
        return Err(CliError::new(
            Exit::Conflict,
            "conflict",
            format!("goal `{goal}` moved while it was being exported"),
            "run the export again",
        ));
    }
    let trailer = trailer(&goal, &events)?;
    let commits = commits_of(&backend, &goal).await?;
    let mut text = export_lines(&commits, &events)?;
    let line = serde_json::to_string(&TrailerLine {
        trailer: trailer.clone(),
    })
    .map_err(|e| CliError::new(Exit::Other, "encode_failed", e.to_string(), ""))?;
    text.push_str(&line);
    text.push('\n');
    match &args.out {
        Some(path) => {
            // Owner-only like the store it copies, and never through a link.
            files::replace(path, text.as_bytes(), Mode::Exactly(0o600)).map_err(|error| {
                let hint = match error {
                    FileError::Link { .. } => "name the file itself, not a link to it",
                    _ => "check the path and its permissions",
                };
                CliError::new(Exit::Other, "write_failed", error.to_string(), hint)
            })?;
            let value = json!({
                "export": { "goal": goal, "revision": state.revision, "events": events.len(), "chain": trailer.chain, "file": path }
            });
            ctx.out.emit(&value, |_| {
                format!(
                    "exported {} events of goal `{goal}` to {}",
                    events.len(),
                    path.display()
                )
            });
        }
        None if ctx.out.json => {
            let value = json!({
                "export": { "goal": goal, "revision": state.revision, "commits": commits, "events": events, "trailer": trailer }
            });
            crate::output::Output::document(&value);
        }
        None => {
            let mut stdout = std::io::stdout().lock();
            let _ = stdout.write_all(text.as_bytes());
        }
    }
    Ok(Exit::Ok)
}

/// What each commit of `goal` that holds events was made from, in revision order.
async fn commits_of(
    backend: &crate::store::Backend,
    goal: &GoalId,
) -> Result<Vec<CommitRecord>, CliError> {
    let mut commits = Vec::new();
    let mut after = 0;
    loop {
        let page = backend.retention().operations(goal, after, 1000).await?;
        let Some(last) = page.last() else { break };
        after = last.receipt.revision;
        let full = page.len() == 1000;
        commits.extend(
            page.into_iter()
                .filter(|o| o.receipt.events > 0)
                .map(|o| CommitRecord {
                    operation: o.receipt.operation,
                    digest: o.receipt.digest,
                    revision: o.receipt.revision,
                    events: o.receipt.events,
                    authorship: o.authorship,
                }),
        );
        if !full {
            break;
        }
    }
    Ok(commits)
}

/// The export's lines: each commit's line, then its events.
fn export_lines(commits: &[CommitRecord], events: &[RecordedEvent]) -> Result<String, CliError> {
    let encode =
        |e: serde_json::Error| CliError::new(Exit::Other, "encode_failed", e.to_string(), "");
    let mut text = String::new();
    let mut next = 0usize;
    for commit in commits {
        let count = usize::try_from(commit.events).unwrap_or(usize::MAX);
        let Some(held) = events.get(next..next.saturating_add(count)) else {
            break;
        };
        next += count;
        let line = serde_json::to_string(&CommitLine {
            commit: commit.clone(),
        })
        .map_err(encode)?;
        text.push_str(&line);
        text.push('\n');
        text.push_str(&lines(held)?);
    }
    // Events no receipt covers (none in a sound store) go without a commit line: unverifiable.
    text.push_str(&lines(events.get(next..).unwrap_or_default())?);
    Ok(text)
}

fn digest(events: &[RecordedEvent]) -> Result<String, CliError> {
    let mut hasher = Sha256::new();
    hasher.update(b"loopx.import.v1\n");
    hasher.update(lines(events)?.as_bytes());
    let mut out = String::with_capacity(64);
    for byte in hasher.finalize() {
        let _ = write!(out, "{byte:02x}");
    }
    Ok(out)
}

fn invalid(message: String) -> CliError {
    CliError::input(
        "invalid_history",
        message,
        "import the unmodified output of `loopx export`; nothing was written",
    )
}

fn trailer_error(code: &str, message: String) -> CliError {
    CliError::input(
        code,
        message,
        "import a complete, unmodified file written by `loopx export` of this version (exports \
         written before the trailer existed are refused: export the goal again); nothing was written",
    )
}

/// Checks the file's trailer against the events it holds: a file without one (cut short at a
/// line boundary, or written before trailers existed) or with one that does not match is
/// refused.
fn check_trailer(
    trailer: Option<Trailer>,
    goal: &GoalId,
    events: &[RecordedEvent],
) -> Result<(), CliError> {
    let Some(trailer) = trailer else {
        return Err(trailer_error(
            "export_trailer_missing",
            "the file ends without the trailer line `loopx export` writes: it was cut short, or written by an older loopx".into(),
        ));
    };
    let expected = self::trailer(goal, events)?;
    if trailer.format != FORMAT && trailer.format != FORMAT_V2 {
        return Err(trailer_error(
            "export_trailer_mismatch",
            format!(
                "the trailer names format `{}`; this loopx reads `{FORMAT}`",
                trailer.format
            ),
        ));
    }
    if trailer != expected {
        return Err(trailer_error(
            "export_trailer_mismatch",
            format!(
                "the trailer says goal `{}`, {} events up to revision {} with chain {}; the file holds goal `{}`, {} events up to revision {} with chain {}",
                trailer.goal,
                trailer.events,
                trailer.revision,
                trailer.chain,
                expected.goal,
                expected.events,
                expected.revision,
                expected.chain
            ),
        ));
    }
    Ok(())
}

/// A file's history, parsed and checked: its events, the state they replay to, and what each
/// commit was made from with the index of its first event.
struct Parsed {
    events: Vec<RecordedEvent>,
    state: GoalState,
    commits: Vec<(usize, CommitRecord)>,
}

/// Parses and validates JSON lines completely, before the store is touched: every line a
/// recorded event or a commit line, the history replaying, its state satisfying the kernel's
/// invariants, and the last line a trailer that matches them.
fn parse_history(text: &str, now: loopx_kernel::Timestamp) -> Result<Parsed, CliError> {
    let mut events = Vec::new();
    let mut commits = Vec::new();
    let mut trailer = None;
    for (n, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        if trailer.is_some() {
            return Err(trailer_error(
                "export_trailer_mismatch",
                format!(
                    "line {} follows the trailer, which must be the last line",
                    n + 1
                ),
            ));
        }
        if line.trim_start().starts_with("{\"trailer\"") {
            let parsed: TrailerLine = serde_json::from_str(line).map_err(|error| {
                trailer_error(
                    "export_trailer_mismatch",
                    format!("line {} is not a valid trailer: {error}", n + 1),
                )
            })?;
            trailer = Some(parsed.trailer);
            continue;
        }
        if line.trim_start().starts_with("{\"commit\"") {
            let parsed: CommitLine = serde_json::from_str(line).map_err(|error| {
                invalid(format!(
                    "line {} is not a valid commit line: {error}",
                    n + 1
                ))
            })?;
            commits.push((events.len(), parsed.commit));
            continue;
        }
        let event: RecordedEvent = serde_json::from_str(line).map_err(|error| {
            CliError::input(
                "invalid_json",
                format!("line {} is not a recorded event: {error}", n + 1),
                "import the unmodified output of `loopx export`; nothing was written",
            )
        })?;
        events.push(event);
    }
    let state = GoalState::replay(&events)
        .map_err(|error| invalid(format!("the history does not replay: {error}")))?;
    if let Some(v) = check_invariants(&state, now).first() {
        return Err(invalid(format!(
            "the history replays to a state that breaks `{}`: {}",
            v.rule, v.detail
        )));
    }
    check_trailer(trailer, &state.spec.id, &events)?;
    Ok(Parsed {
        events,
        state,
        commits,
    })
}

/// The file's commits over its events: each commit line's events, which must follow it
/// exactly and cover every event.
fn commits(parsed: &Parsed) -> Result<Vec<RecordedCommit<'_>>, CliError> {
    let events = parsed.events.as_slice();
    let mut out = Vec::new();
    let mut next = 0usize;
    for (start, commit) in &parsed.commits {
        let count = usize::try_from(commit.events).unwrap_or(usize::MAX);
        let held = events
            .get(*start..start.saturating_add(count))
            .filter(|held| {
                *start == next && held.last().map(|e| e.revision) == Some(commit.revision)
            });
        let Some(held) = held else {
            return Err(invalid(format!(
                "the commit line of revision {} is not followed by its {} events",
                commit.revision, commit.events
            )));
        };
        next = start + count;
        out.push(RecordedCommit {
            operation: &commit.operation,
            digest: &commit.digest,
            revision: commit.revision,
            authorship: commit.authorship.as_ref(),
            events: held,
        });
    }
    if next != events.len() {
        return Err(invalid(format!(
            "the events after revision {} have no commit line",
            events.get(next.wrapping_sub(1)).map_or(0, |e| e.revision)
        )));
    }
    Ok(out)
}

/// Verifies every commit of the file against the keys its history registers. A history that
/// does not all verify is refused, naming the first commit that does not, unless `accept`.
fn verify(parsed: &Parsed, accept: bool) -> Result<Verification, CliError> {
    let goal = &parsed.state.spec.id;
    let outcome = if parsed.commits.is_empty() {
        // An export from before commit lines: its one history carries nothing to verify.
        Verification {
            unverifiable: 1,
            first_unverifiable: parsed.events.first().map(|e| e.revision),
            ..Verification::default()
        }
    } else {
        loopx_store::verify_commits(goal, None, commits(parsed)?, None)?
    };
    match outcome.first_unproven() {
        Some((revision, problem)) if !accept => Err(CliError::input(
            "history_unverified",
            format!(
                "the history of goal `{goal}` does not verify at revision {revision}: {problem} ({} of {} commits verified)",
                outcome.verified,
                outcome.verified + outcome.unverifiable + outcome.findings.len() as u64
            ),
            "import an unmodified export written by this version of loopx; to take the history as it is, unproven, pass --accept-unverified (the goal then says so); nothing was written",
        )),
        _ => Ok(outcome),
    }
}

/// The event that ends an import of unverified commits: who accepted them, and which.
fn accepted(
    ctx: &Ctx,
    events: &[RecordedEvent],
    outcome: &Verification,
) -> Result<Option<RecordedEvent>, CliError> {
    let Some((first, _)) = outcome.first_unproven() else {
        return Ok(None);
    };
    let Some(last) = events.last() else {
        return Ok(None);
    };
    Ok(Some(RecordedEvent {
        schema: SCHEMA_VERSION,
        revision: last.revision + 1,
        at: ctx.now.max(last.at),
        actor: ctx.actor()?,
        event: Event::HistoryImported {
            verified: outcome.verified,
            unverified: outcome.unverifiable + outcome.findings.len() as u64,
            first_unverified: first,
        },
    }))
}

pub async fn import(ctx: &Ctx, args: &ImportArgs) -> Result<Exit, CliError> {
    let path = args.file.clone().unwrap_or_else(|| PathBuf::from("-"));
    let text = read_text(&path)?;
    let parsed = parse_history(&text, ctx.now)?;
    let outcome = verify(&parsed, args.accept_unverified)?;
    let Parsed {
        mut events, state, ..
    } = parsed;
    let goal = state.spec.id.clone();
    if let Some(named) = ctx.goal_opt()?
        && named != goal
    {
        return Err(CliError::input(
            "goal_mismatch",
            format!("the history is of goal `{goal}`, not `{named}`"),
            "drop --goal, or import the right file",
        ));
    }
    let digest = digest(&events)?;
    let marker = accepted(ctx, &events, &outcome)?;
    let imported = events.len();
    let operation = match ctx.operation_given()? {
        Some(op) => op,
        None => OperationId::new(format!("import-{}", digest.get(..24).unwrap_or(&digest)))?,
    };
    let backend = ctx.open().await?;
    let store = backend.store();
    let replayed = match store.receipt(&goal, &operation).await? {
        Some(receipt) if receipt.digest == digest => Some(receipt),
        Some(_) => {
            return Err(StoreError::OperationConflict { operation }.into());
        }
        None => None,
    };
    let (receipt, was_replayed) = if let Some(receipt) = replayed {
        (receipt, true)
    } else {
        if store.load(&goal).await?.is_some() {
            return Err(CliError::new(
                Exit::Conflict,
                "goal_exists",
                format!("goal `{goal}` already exists in this store; import never overwrites"),
                "import into another store, or remove the goal's store first",
            ));
        }
        events.extend(marker);
        let request = AppendRequest {
            goal: goal.clone(),
            expected_revision: 0,
            operation,
            digest,
            at: events.last().map_or(ctx.now, |e| e.at),
            events: events.clone(),
            authorship: None,
            clock_skew: loopx_kernel::DEFAULT_CLOCK_SKEW,
        };
        // Folded by the kernel: a history that does not fold is refused before it is written.
        let commit = Commit::fold(None, request)?;
        match store.append(commit).await {
            Ok(appended) => {
                let committed = appended.is_committed();
                (appended.into_receipt(), !committed)
            }
            Err(StoreError::Conflict { .. }) => {
                return Err(CliError::new(
                    Exit::Conflict,
                    "goal_exists",
                    format!(
                        "goal `{goal}` was created in this store meanwhile; import never overwrites"
                    ),
                    "import into another store",
                ));
            }
            Err(error) => return Err(error.into()),
        }
    };
    let value = json!({
        "import": {
            "goal": goal,
            "events": imported,
            "revision": receipt.revision,
            "receipt": receipt,
            "replayed": was_replayed,
            "verified": outcome.verified,
            "unverified": outcome.unverifiable + outcome.findings.len() as u64,
        }
    });
    ctx.out.emit(&value, |_| {
        let mut text = format!(
            "imported goal `{goal}`: {imported} events, revision {}",
            receipt.revision
        );
        if outcome.first_unproven().is_some() {
            text.push_str(" — accepted with unverified commits: `loopx status` says so");
        }
        text
    });
    Ok(Exit::Ok)
}
