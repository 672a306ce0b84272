//! GitHub: typed domain facts shared by webhooks and the REST client, and their observations.
//!
//! Webhook payloads and REST responses use the same object shapes, so both are read into the
//! same types here and turned into observations by the same code: a pull request seen through a
//! webhook and through a poll fingerprints alike.
//!
//! Observation conventions (repository `owner/name`, external text encoded with
//! [`id_component`](crate::fact::id_component)); each kind's facts, key prefix and key builder
//! are its schema in [`loopx_kernel::facts::github`], the definition capabilities read with:
//!
//! | fact | key | subject | revision |
//! |---|---|---|---|
//! | pull request | `pr:<repo>#<n>` | `pr:<repo>#<n>` | `git:<head sha>` |
//! | CI roll-up (REST) | `ci:<repo>#<n>` | `pr:<repo>#<n>` | `git:<head sha>` |
//! | review | `review:<repo>#<n>/<login>` | same as key | `git:<reviewed sha>` |
//! | check run | `check:<repo>@<sha>/<name>` | `commit:<repo>@<sha>` | `git:<sha>` |
//! | check suite | `suite:<repo>@<sha>/<app>` | `commit:<repo>@<sha>` | `git:<sha>` |
//! | commit status | `status:<repo>@<sha>/<context>` | `commit:<repo>@<sha>` | `git:<sha>` |
//! | issue | `issue:<repo>#<n>` | same as key | `content:<digest of its facts>` |
//! | comment | `comment:<repo>/<id>` | same as key | `content:<digest of its body>` |
//! | push | `ref:<repo>:<ref>` | same as key | `git:<after>` |
//! | review comment | `review-comment:<repo>/<id>` | same as key | `content:<digest of its body>` |
//! | review thread (webhook) | `review-thread:<repo>#<n>/<node id>` | same as key | `thread:resolved` or `thread:unresolved` |
//! | review threads (GraphQL) | `threads:<repo>#<n>` | same as key | `git:<head sha>` |
//! | workflow run | `workflow:<repo>@<sha>/<workflow>` | `commit:<repo>@<sha>` | `git:<sha>` |
//! | workflow job | `job:<repo>@<sha>/<workflow>/<job>` | `commit:<repo>@<sha>` | `git:<sha>` |
//!
//! Only pull-request observations move the revision of a `pr:` subject, and always to the
//! exact head sha, so evidence bound to an older head becomes stale by the kernel's rule. A
//! review or check of an older commit never moves the pull request backwards.
//!
//! GitHub does not deliver in order. Every observation carries the object's own place in
//! GitHub's order ([`GitHubEvent::order`]: its `updated_at`, a check run's `completed_at` or
//! `started_at` and then its status), and the kernel records no observation older than the one
//! its stream holds: a late `opened` after `closed` changes nothing.

pub mod body;
pub mod commands;
pub mod rest;
pub mod webhook;

use std::collections::BTreeMap;

use loopx_kernel::facts::git;
use loopx_kernel::facts::github::{self as facts, Commit, Thread};
use loopx_kernel::{InvalidId, Observation, SourceOrder, Timestamp};
use serde::{Deserialize, Serialize};

use crate::fact::{FactBuilder, sha256_hex};

/// A user or bot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct User {
    /// The login.
    pub login: String,
}

/// A branch tip: name and sha.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BranchTip {
    /// The branch name.
    #[serde(rename = "ref")]
    pub name: String,
    /// The commit sha.
    pub sha: String,
}

/// A pull request, as webhooks and `GET /repos/{o}/{r}/pulls/{n}` send it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PullRequest {
    /// Its number.
    pub number: u64,
    /// `open` or `closed`.
    pub state: String,
    /// Its title.
    #[serde(default)]
    pub title: String,
    /// Draft or ready.
    #[serde(default)]
    pub draft: bool,
    /// Merged (absent in some list responses).
    #[serde(default)]
    pub merged: Option<bool>,
    /// When it merged.
    #[serde(default)]
    pub merged_at: Option<String>,
    /// GitHub's mergeability summary (`clean`, `dirty`, `blocked`, `unknown`…).
    #[serde(default)]
    pub mergeable_state: Option<String>,
    /// The head branch and its exact sha.
    pub head: BranchTip,
    /// The base branch.
    pub base: BranchTip,
    /// Commits on the pull request.
    #[serde(default)]
    pub commits: Option<u64>,
    /// The author.
    #[serde(default)]
    pub user: Option<User>,
    /// When GitHub last changed it: its place in GitHub's order.
    #[serde(default)]
    pub updated_at: Option<String>,
}

impl PullRequest {
    /// Open, draft, merged or closed.
    pub fn status(&self) -> PullState {
        if self.merged == Some(true) || self.merged_at.is_some() {
            PullState::Merged
        } else if self.state == "closed" {
            PullState::Closed
        } else if self.draft {
            PullState::Draft
        } else {
            PullState::Open
        }
    }
}

/// A pull request review.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Review {
    /// Its id.
    pub id: u64,
    /// The reviewer.
    #[serde(default)]
    pub user: Option<User>,
    /// `APPROVED`, `CHANGES_REQUESTED`, `COMMENTED`, `DISMISSED`, `PENDING` (any case).
    pub state: String,
    /// The commit reviewed.
    #[serde(default)]
    pub commit_id: Option<String>,
    /// When it was submitted.
    #[serde(default)]
    pub submitted_at: Option<String>,
    /// What the reviewer wrote with it (`None` when nothing).
    #[serde(default)]
    pub body: Option<String>,
    /// The author's association with the repository (`OWNER`, `MEMBER`, `COLLABORATOR`,
    /// `CONTRIBUTOR`, `FIRST_TIME_CONTRIBUTOR`, `FIRST_TIMER`, `MANNEQUIN`, `NONE`).
    #[serde(default)]
    pub author_association: Option<String>,
}

impl Review {
    /// The state in lower case: `approved`, `changes_requested`, `commented`, `dismissed`,
    /// `pending`.
    pub fn normalized_state(&self) -> String {
        self.state.to_ascii_lowercase()
    }
}

/// A pull request reference inside a check payload.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PullRef {
    /// The pull request number.
    pub number: u64,
}

/// A GitHub App, as named in check payloads.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct App {
    /// Its slug.
    #[serde(default)]
    pub slug: Option<String>,
    /// Its name.
    #[serde(default)]
    pub name: Option<String>,
}

/// A check run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckRun {
    /// Its id.
    pub id: u64,
    /// Its name.
    pub name: String,
    /// The commit it checks.
    pub head_sha: String,
    /// `queued`, `in_progress`, `completed`…
    pub status: String,
    /// Set once completed: `success`, `failure`, `neutral`, `cancelled`, `skipped`,
    /// `timed_out`, `action_required`, `stale`.
    #[serde(default)]
    pub conclusion: Option<String>,
    /// The app that runs it.
    #[serde(default)]
    pub app: Option<App>,
    /// Pull requests whose head is this commit.
    #[serde(default)]
    pub pull_requests: Vec<PullRef>,
    /// When it started (GitHub sets it when the run is created).
    #[serde(default)]
    pub started_at: Option<String>,
    /// When it completed.
    #[serde(default)]
    pub completed_at: Option<String>,
}

/// A check suite.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckSuite {
    /// Its id.
    pub id: u64,
    /// The commit it checks.
    pub head_sha: String,
    /// The branch, when known.
    #[serde(default)]
    pub head_branch: Option<String>,
    /// `queued`, `in_progress`, `completed`…
    #[serde(default)]
    pub status: Option<String>,
    /// Set once completed.
    #[serde(default)]
    pub conclusion: Option<String>,
    /// The app that runs it.
    #[serde(default)]
    pub app: Option<App>,
    /// Pull requests whose head is this commit.
    #[serde(default)]
    pub pull_requests: Vec<PullRef>,
    /// When GitHub last changed it.
    #[serde(default)]
    pub updated_at: Option<String>,
}

/// A commit status (the older statuses API).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommitStatus {
    /// Its context, e.g. `ci/build`.
    pub context: String,
    /// `pending`, `success`, `failure`, `error`.
    pub state: String,
    /// Its description.
    #[serde(default)]
    pub description: Option<String>,
    /// When it was last set.
    #[serde(default)]
    pub updated_at: Option<String>,
}

/// A label.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Label {
    /// Its name.
    pub name: String,
}

/// An issue (pull requests are issues too).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Issue {
    /// Its number.
    pub number: u64,
    /// `open` or `closed` (some deliveries, such as `pinned`, leave it out: `unknown`).
    #[serde(default = "unknown")]
    pub state: String,
    /// Its title.
    #[serde(default)]
    pub title: String,
    /// Its labels.
    #[serde(default)]
    pub labels: Vec<Label>,
    /// Its assignees.
    #[serde(default)]
    pub assignees: Vec<User>,
    /// Locked for comments.
    #[serde(default)]
    pub locked: bool,
    /// Present when the issue is a pull request.
    #[serde(default)]
    pub pull_request: Option<serde_json::Value>,
    /// When GitHub last changed it.
    #[serde(default)]
    pub updated_at: Option<String>,
}

fn unknown() -> String {
    "unknown".to_owned()
}

/// An issue or pull request comment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Comment {
    /// Its id.
    pub id: u64,
    /// The author.
    #[serde(default)]
    pub user: Option<User>,
    /// Its text.
    #[serde(default)]
    pub body: Option<String>,
    /// When it was written.
    #[serde(default)]
    pub created_at: Option<String>,
    /// When it was last edited (its creation time until then).
    #[serde(default)]
    pub updated_at: Option<String>,
    /// The author's association with the repository (`OWNER`, `MEMBER`, `COLLABORATOR`,
    /// `CONTRIBUTOR`, `FIRST_TIME_CONTRIBUTOR`, `FIRST_TIMER`, `MANNEQUIN`, `NONE`).
    #[serde(default)]
    pub author_association: Option<String>,
}

/// A comment on a pull request's diff.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReviewComment {
    /// Its id.
    pub id: u64,
    /// The author.
    #[serde(default)]
    pub user: Option<User>,
    /// Its text.
    #[serde(default)]
    pub body: Option<String>,
    /// The file it comments on.
    #[serde(default)]
    pub path: String,
    /// The commit it comments on.
    #[serde(default)]
    pub commit_id: Option<String>,
    /// The comment it answers.
    #[serde(default)]
    pub in_reply_to_id: Option<u64>,
    /// When it was last edited (its creation time until then).
    #[serde(default)]
    pub updated_at: Option<String>,
    /// The author's association with the repository (`OWNER`, `MEMBER`, `COLLABORATOR`,
    /// `CONTRIBUTOR`, `FIRST_TIME_CONTRIBUTOR`, `FIRST_TIMER`, `MANNEQUIN`, `NONE`).
    #[serde(default)]
    pub author_association: Option<String>,
}

/// A review thread of a pull request, as `pull_request_review_thread` deliveries carry it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReviewThread {
    /// Its GraphQL node id.
    pub node_id: String,
    /// Its comments (the delivery's copy).
    #[serde(default)]
    pub comments: Vec<ReviewComment>,
}

/// A GitHub Actions workflow run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkflowRun {
    /// Its id.
    pub id: u64,
    /// The workflow's name.
    #[serde(default)]
    pub name: Option<String>,
    /// The commit it runs on.
    pub head_sha: String,
    /// `requested`, `queued`, `in_progress`, `completed`…
    pub status: String,
    /// Set once completed.
    #[serde(default)]
    pub conclusion: Option<String>,
    /// What triggered it.
    #[serde(default)]
    pub event: Option<String>,
    /// Which attempt (1 for the first).
    #[serde(default)]
    pub run_attempt: Option<u64>,
    /// Pull requests whose head is this commit.
    #[serde(default)]
    pub pull_requests: Vec<PullRef>,
    /// When GitHub last changed it.
    #[serde(default)]
    pub updated_at: Option<String>,
}

/// One job of a workflow run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkflowJob {
    /// Its id.
    pub id: u64,
    /// Its name.
    pub name: String,
    /// The workflow's name.
    #[serde(default)]
    pub workflow_name: Option<String>,
    /// The commit it runs on.
    pub head_sha: String,
    /// `queued`, `waiting`, `in_progress`, `completed`…
    pub status: String,
    /// Set once completed.
    #[serde(default)]
    pub conclusion: Option<String>,
    /// Which attempt of its run.
    #[serde(default)]
    pub run_attempt: Option<u64>,
    /// When it started.
    #[serde(default)]
    pub started_at: Option<String>,
    /// When it completed.
    #[serde(default)]
    pub completed_at: Option<String>,
}

/// A push to a ref.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Push {
    /// The full ref, e.g. `refs/heads/main`.
    #[serde(rename = "ref")]
    pub git_ref: String,
    /// The sha before.
    pub before: String,
    /// The sha after (all zeros when deleted).
    pub after: String,
    /// The ref was created.
    #[serde(default)]
    pub created: bool,
    /// The ref was deleted.
    #[serde(default)]
    pub deleted: bool,
    /// The push was forced.
    #[serde(default)]
    pub forced: bool,
    /// When the repository was pushed to, in seconds since the Unix epoch (the delivery's
    /// `repository.pushed_at`): its place in GitHub's order.
    #[serde(default)]
    pub pushed_at: Option<i64>,
}

/// The roll-up of every check and status on one commit: the verdict the observations record,
/// defined once with their schema.
pub use loopx_kernel::facts::github::{CiVerdict, PullState};

/// One check or status inside a roll-up, reduced to its verdict.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CiItem {
    /// `check:<name>` or `status:<context>`.
    pub name: String,
    /// Its verdict.
    pub verdict: CiVerdict,
}

/// The verdict of one check run: pending until completed, then by conclusion.
pub fn check_run_verdict(run: &CheckRun) -> CiVerdict {
    run_verdict(&run.status, run.conclusion.as_deref())
}

/// The verdict of a run of any kind (check run, workflow run, job) from its status and
/// conclusion: pending until completed, then passing for `success`, `neutral` and `skipped`
/// and failing for any other conclusion.
pub fn run_verdict(status: &str, conclusion: Option<&str>) -> CiVerdict {
    if status != "completed" {
        return CiVerdict::Pending;
    }
    match conclusion {
        Some("success" | "neutral" | "skipped") => CiVerdict::Passing,
        None => CiVerdict::Pending,
        Some(_) => CiVerdict::Failing,
    }
}

/// A GitHub time (RFC 3339, `Z` or an offset); `None` when absent or unreadable, so an odd
/// time leaves a fact unordered rather than refused.
fn github_time(text: Option<&str>) -> Option<Timestamp> {
    text.and_then(|t| Timestamp::parse(t).ok())
}

/// Where a run's status stands among the states GitHub stamps with the same time: waiting
/// ones first, then in progress, then completed.
fn status_step(status: &str) -> u32 {
    match status {
        "completed" => 2,
        "in_progress" => 1,
        _ => 0,
    }
}

/// The order of a run (check run, job): by when it completed, or else started, then by its
/// status. A re-run starts after the run it repeats completed, so it orders after it.
fn run_order(status: &str, started: Option<&str>, completed: Option<&str>) -> Option<SourceOrder> {
    let at = github_time(completed).or_else(|| github_time(started))?;
    Some(SourceOrder {
        at,
        step: status_step(status),
    })
}

/// The order of an object stamped with `updated_at`, then by `status` when it has one.
fn updated_order(updated_at: Option<&str>, status: Option<&str>) -> Option<SourceOrder> {
    Some(SourceOrder {
        at: github_time(updated_at)?,
        step: status.map_or(0, status_step),
    })
}

/// The verdict of one commit status.
pub fn status_verdict(state: &str) -> CiVerdict {
    match state {
        "success" => CiVerdict::Passing,
        "pending" => CiVerdict::Pending,
        _ => CiVerdict::Failing,
    }
}

/// Rolls items up: any failing → failing; else any pending → pending; else passing; nothing
/// at all → none.
pub fn roll_up(items: &[CiItem]) -> CiVerdict {
    if items.is_empty() {
        CiVerdict::None
    } else if items.iter().any(|i| i.verdict == CiVerdict::Failing) {
        CiVerdict::Failing
    } else if items.iter().any(|i| i.verdict == CiVerdict::Pending) {
        CiVerdict::Pending
    } else {
        CiVerdict::Passing
    }
}

/// The CI state of a pull request's exact head commit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CiRollup {
    /// The repository, `owner/name`.
    pub repo: String,
    /// The pull request.
    pub number: u64,
    /// The exact head sha the checks were read for.
    pub sha: String,
    /// The roll-up.
    pub verdict: CiVerdict,
    /// Each item, sorted by name.
    pub items: Vec<CiItem>,
}

/// A typed GitHub fact, from a webhook or the REST client.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum GitHubEvent {
    /// A pull request's state.
    PullRequest {
        /// `owner/name`.
        repo: String,
        /// The webhook action, when it came from one.
        action: Option<String>,
        /// The pull request.
        pull: PullRequest,
    },
    /// A review on a pull request.
    Review {
        /// `owner/name`.
        repo: String,
        /// The webhook action (`submitted`, `edited`, `dismissed`), when it came from one.
        action: Option<String>,
        /// The pull request number.
        number: u64,
        /// The review.
        review: Review,
    },
    /// A check run.
    CheckRun {
        /// `owner/name`.
        repo: String,
        /// The check run.
        run: CheckRun,
    },
    /// A check suite.
    CheckSuite {
        /// `owner/name`.
        repo: String,
        /// The suite.
        suite: CheckSuite,
    },
    /// A commit status.
    Status {
        /// `owner/name`.
        repo: String,
        /// The commit.
        sha: String,
        /// The status.
        status: CommitStatus,
    },
    /// An issue's state.
    Issue {
        /// `owner/name`.
        repo: String,
        /// The issue.
        issue: Issue,
    },
    /// A comment on an issue or pull request.
    IssueComment {
        /// `owner/name`.
        repo: String,
        /// The webhook action (`created`, `edited`, `deleted`).
        action: Option<String>,
        /// The issue or pull request number.
        number: u64,
        /// True when commenting on a pull request.
        on_pull_request: bool,
        /// The comment.
        comment: Comment,
    },
    /// A push.
    Push {
        /// `owner/name`.
        repo: String,
        /// The push.
        push: Push,
    },
    /// The CI roll-up of a pull request's head.
    Ci(CiRollup),
    /// A comment on a pull request's diff.
    ReviewComment {
        /// `owner/name`.
        repo: String,
        /// The webhook action (`created`, `edited`, `deleted`).
        action: Option<String>,
        /// The pull request number.
        number: u64,
        /// The comment.
        comment: ReviewComment,
    },
    /// A review thread resolved or unresolved.
    ReviewThread {
        /// `owner/name`.
        repo: String,
        /// The pull request number.
        number: u64,
        /// Resolved (`resolved`) or not (`unresolved`).
        resolved: bool,
        /// The thread.
        thread: ReviewThread,
    },
    /// A workflow run.
    WorkflowRun {
        /// `owner/name`.
        repo: String,
        /// The run.
        run: WorkflowRun,
    },
    /// A job of a workflow run.
    WorkflowJob {
        /// `owner/name`.
        repo: String,
        /// The job.
        job: WorkflowJob,
    },
}

fn login(user: Option<&User>) -> &str {
    user.map_or("ghost", |u| u.login.as_str())
}

fn short(sha: &str) -> &str {
    sha.get(..7).unwrap_or(sha)
}

fn pulls(refs: &[PullRef]) -> Vec<u64> {
    let mut numbers: Vec<u64> = refs.iter().map(|p| p.number).collect();
    numbers.sort_unstable();
    numbers
}

fn app_name(app: Option<&App>) -> String {
    app.and_then(|a| a.slug.clone().or_else(|| a.name.clone()))
        .unwrap_or_else(|| "unknown".to_owned())
}

impl GitHubEvent {
    /// The `/loopx` commands the fact carries ([`commands`]), with the login that wrote them:
    /// those of a comment on a pull request when it is created (an edit or a deletion answers
    /// nothing; a new comment does), and those of a review's body unless it is dismissed or
    /// pending. Every other fact carries none. Lines that start with `/loopx` but are not
    /// commands come back as [`commands::Ignored`], with their reasons.
    pub fn commands(&self) -> (Vec<commands::RelayedAnswer>, Vec<commands::Ignored>) {
        let (user, body, message, written) = match self {
            GitHubEvent::IssueComment {
                action,
                on_pull_request: true,
                comment,
                ..
            } if action.as_deref().is_none_or(|a| a == "created") => (
                comment.user.as_ref(),
                comment.body.as_deref(),
                format!("comment:{}", comment.id),
                comment.created_at.as_deref(),
            ),
            // As its author submitted it: an edit, even by the author, never relays.
            GitHubEvent::Review { review, action, .. }
                if action.as_deref().is_none_or(|a| a == "submitted")
                    && !matches!(review.normalized_state().as_str(), "dismissed" | "pending") =>
            {
                (
                    review.user.as_ref(),
                    review.body.as_deref(),
                    format!("review:{}", review.id),
                    review.submitted_at.as_deref(),
                )
            }
            _ => return (Vec::new(), Vec::new()),
        };
        let (Some(user), Some(body)) = (user, body) else {
            return (Vec::new(), Vec::new());
        };
        let read = commands::parse(body);
        let answers = read
            .answers
            .into_iter()
            .map(|(gate, answer)| commands::RelayedAnswer {
                gate,
                answer,
                login: user.login.clone(),
                message: message.clone(),
                written_at: github_time(written),
            })
            .collect();
        (answers, read.ignored)
    }

    /// The fact's place in GitHub's own order, from the object's own times (see
    /// [`SourceOrder`]): a pull request, issue, comment, suite, status or workflow run by its
    /// `updated_at`, a review by its `submitted_at`, a check run or job by its `completed_at`
    /// or else `started_at`, then its status, a push by the repository's `pushed_at`. `None`
    /// for a CI roll-up (a poll's own reading) and a review thread (its delivery carries no
    /// time of the resolution), and when GitHub sent no readable time.
    pub fn order(&self) -> Option<SourceOrder> {
        match self {
            GitHubEvent::PullRequest { pull, .. } => {
                updated_order(pull.updated_at.as_deref(), None)
            }
            GitHubEvent::Review { review, .. } => {
                updated_order(review.submitted_at.as_deref(), None)
            }
            GitHubEvent::CheckRun { run, .. } => run_order(
                &run.status,
                run.started_at.as_deref(),
                run.completed_at.as_deref(),
            ),
            GitHubEvent::CheckSuite { suite, .. } => {
                updated_order(suite.updated_at.as_deref(), suite.status.as_deref())
            }
            GitHubEvent::Status { status, .. } => updated_order(status.updated_at.as_deref(), None),
            GitHubEvent::Issue { issue, .. } => updated_order(issue.updated_at.as_deref(), None),
            GitHubEvent::IssueComment { comment, .. } => {
                updated_order(comment.updated_at.as_deref(), None)
            }
            GitHubEvent::ReviewComment { comment, .. } => {
                updated_order(comment.updated_at.as_deref(), None)
            }
            GitHubEvent::Push { push, .. } => push
                .pushed_at
                .and_then(|seconds| seconds.checked_mul(1000))
                .map(|millis| SourceOrder::at(Timestamp::from_millis(millis))),
            GitHubEvent::WorkflowRun { run, .. } => {
                updated_order(run.updated_at.as_deref(), Some(&run.status))
            }
            GitHubEvent::WorkflowJob { job, .. } => run_order(
                &job.status,
                job.started_at.as_deref(),
                job.completed_at.as_deref(),
            ),
            GitHubEvent::Ci(_) | GitHubEvent::ReviewThread { .. } => None,
        }
    }

    /// The pull requests (or issues) the fact concerns, as their `pr:<repo>#<n>` subjects: the
    /// one it is about, or each pull request GitHub lists on a check run, suite or workflow run
    /// (none for a fork's, which GitHub does not list, nor for a status, job or push). With the
    /// observation's own subject, these are where a host routes the fact: a goal that follows a
    /// pull request hears of the checks at its head before it has recorded any of them.
    pub fn threads(&self) -> Vec<String> {
        let key = |repo: &str, number: u64| facts::PullRequest::key(&Thread::new(repo, number));
        let listed = |repo: &str, refs: &[PullRef]| -> Vec<String> {
            pulls(refs).into_iter().map(|n| key(repo, n)).collect()
        };
        match self {
            GitHubEvent::PullRequest { repo, pull, .. } => vec![key(repo, pull.number)],
            GitHubEvent::Review { repo, number, .. }
            | GitHubEvent::IssueComment { repo, number, .. }
            | GitHubEvent::ReviewComment { repo, number, .. }
            | GitHubEvent::ReviewThread { repo, number, .. } => vec![key(repo, *number)],
            GitHubEvent::Issue { repo, issue } => vec![key(repo, issue.number)],
            GitHubEvent::CheckRun { repo, run } => listed(repo, &run.pull_requests),
            GitHubEvent::CheckSuite { repo, suite } => listed(repo, &suite.pull_requests),
            GitHubEvent::WorkflowRun { repo, run } => listed(repo, &run.pull_requests),
            GitHubEvent::Ci(_)
            | GitHubEvent::Status { .. }
            | GitHubEvent::WorkflowJob { .. }
            | GitHubEvent::Push { .. } => Vec::new(),
        }
    }

    /// The fact as a kernel observation (see the module table for keys, subjects and
    /// revisions), observed at `observed_at`, carrying its [`order`](Self::order).
    ///
    /// # Errors
    /// [`InvalidId`] only if an encoded id still fails the kernel's checks, which the encoding
    /// rules out; callers treat it as a malformed payload.
    #[allow(clippy::too_many_lines)] // one arm per event kind, each a flat list of facts
    pub fn observation(&self, observed_at: Timestamp) -> Result<Observation, InvalidId> {
        let builder = match self {
            GitHubEvent::PullRequest { repo, pull, .. } => {
                let key = facts::PullRequest::key(&Thread::new(repo, pull.number));
                FactBuilder::new(&key, &key, &git::revision(&pull.head.sha))
                    .summary(format!(
                        "{repo}#{} {} at {}: {}",
                        pull.number,
                        pull.status(),
                        short(&pull.head.sha),
                        pull.title
                    ))
                    .facts(&facts::PullRequest {
                        status: pull.status(),
                        draft: pull.draft,
                        head_sha: pull.head.sha.clone(),
                        head_ref: pull.head.name.clone(),
                        base_ref: pull.base.name.clone(),
                        title: pull.title.clone(),
                        author: login(pull.user.as_ref()).to_owned(),
                        mergeable_state: pull.mergeable_state.clone(),
                        commits: pull.commits,
                    })
            }
            GitHubEvent::Review {
                repo,
                number,
                review,
                ..
            } => {
                let who = login(review.user.as_ref());
                let key = facts::Review::key(&Thread::new(repo, *number), who);
                let sha = review.commit_id.as_deref().unwrap_or("unknown");
                FactBuilder::new(&key, &key, &git::revision(sha))
                    .summary(format!(
                        "{who} {} {repo}#{number} at {}",
                        review.normalized_state(),
                        short(sha)
                    ))
                    .facts(&facts::Review {
                        reviewer: who.to_owned(),
                        state: review.normalized_state(),
                        commit_id: sha.to_owned(),
                        pull: *number,
                        review_id: Some(review.id),
                        body: review.body.clone().filter(|b| !b.trim().is_empty()),
                        association: association(review.author_association.as_deref()),
                    })
            }
            GitHubEvent::CheckRun { repo, run } => {
                let commit = Commit::new(repo, &run.head_sha);
                FactBuilder::new(
                    &facts::CheckRun::key(&commit, &run.name),
                    &commit.subject(),
                    &commit.revision(),
                )
                .summary(format!(
                    "check `{}` {} at {}",
                    run.name,
                    check_run_verdict(run),
                    short(&run.head_sha)
                ))
                .facts(&facts::CheckRun {
                    name: run.name.clone(),
                    status: run.status.clone(),
                    conclusion: run.conclusion.as_deref().unwrap_or("none").to_owned(),
                    verdict: check_run_verdict(run),
                    app: app_name(run.app.as_ref()),
                    pulls: pulls(&run.pull_requests),
                })
            }
            GitHubEvent::CheckSuite { repo, suite } => {
                let commit = Commit::new(repo, &suite.head_sha);
                let app = app_name(suite.app.as_ref());
                FactBuilder::new(
                    &facts::CheckSuite::key(&commit, &app),
                    &commit.subject(),
                    &commit.revision(),
                )
                .summary(format!(
                    "check suite of {app} {} at {}",
                    suite.conclusion.as_deref().unwrap_or("pending"),
                    short(&suite.head_sha)
                ))
                .facts(&facts::CheckSuite {
                    app: app.clone(),
                    status: suite.status.as_deref().unwrap_or("unknown").to_owned(),
                    conclusion: suite.conclusion.as_deref().unwrap_or("none").to_owned(),
                    head_branch: suite.head_branch.clone(),
                    pulls: pulls(&suite.pull_requests),
                })
            }
            GitHubEvent::Status { repo, sha, status } => {
                let commit = Commit::new(repo, sha);
                FactBuilder::new(
                    &facts::CommitStatus::key(&commit, &status.context),
                    &commit.subject(),
                    &commit.revision(),
                )
                .summary(format!(
                    "status `{}` {} at {}",
                    status.context,
                    status.state,
                    short(sha)
                ))
                .facts(&facts::CommitStatus {
                    context: status.context.clone(),
                    state: status.state.clone(),
                    verdict: status_verdict(&status.state),
                    description: status.description.clone(),
                })
            }
            GitHubEvent::Issue { repo, issue } => {
                let key = facts::Issue::key(&Thread::new(repo, issue.number));
                let mut labels: Vec<String> = issue.labels.iter().map(|l| l.name.clone()).collect();
                labels.sort_unstable();
                let mut assignees: Vec<String> =
                    issue.assignees.iter().map(|u| u.login.clone()).collect();
                assignees.sort_unstable();
                let fact = facts::Issue {
                    state: issue.state.clone(),
                    title: issue.title.clone(),
                    labels,
                    assignees,
                    locked: issue.locked,
                    pull_request: issue.pull_request.is_some(),
                };
                // The revision digests the issue's content: every fact but what it is.
                let content = FactBuilder::new("", "", "")
                    .facts(&fact)
                    .without(facts::Issue::pull_request);
                let revision = format!("content:{}", &content.fingerprint()[7..23]);
                FactBuilder::new(&key, &key, &revision)
                    .summary(format!(
                        "{repo}#{} {}: {}",
                        issue.number, issue.state, issue.title
                    ))
                    .facts(&fact)
            }
            GitHubEvent::IssueComment {
                repo,
                action,
                number,
                on_pull_request,
                comment,
            } => {
                let key = facts::IssueComment::key(repo, comment.id);
                let deleted = action.as_deref() == Some("deleted");
                let body = if deleted {
                    ""
                } else {
                    comment.body.as_deref().unwrap_or("")
                };
                let digest = sha256_hex(body.as_bytes());
                let who = login(comment.user.as_ref());
                FactBuilder::new(&key, &key, &format!("content:{}", &digest[..16]))
                    .summary(format!(
                        "{who} commented on {repo}#{number}{}",
                        if deleted { " (deleted)" } else { "" }
                    ))
                    .facts(&facts::IssueComment {
                        author: who.to_owned(),
                        number: *number,
                        on_pull_request: *on_pull_request,
                        deleted,
                        body: body.to_owned(),
                        body_sha256: digest,
                        body_bytes: body.len() as u64,
                        association: association(comment.author_association.as_deref()),
                    })
            }
            GitHubEvent::Push { repo, push } => {
                let key = facts::Push::key(repo, &push.git_ref);
                FactBuilder::new(&key, &key, &git::revision(&push.after))
                    .summary(format!(
                        "push to {} on {repo}: {} -> {}{}",
                        push.git_ref,
                        short(&push.before),
                        short(&push.after),
                        if push.forced { " (forced)" } else { "" }
                    ))
                    .facts(&facts::Push {
                        git_ref: push.git_ref.clone(),
                        before: push.before.clone(),
                        after: push.after.clone(),
                        created: push.created,
                        deleted: push.deleted,
                        forced: push.forced,
                    })
            }
            GitHubEvent::Ci(rollup) => {
                let thread = Thread::new(&rollup.repo, rollup.number);
                FactBuilder::new(
                    &facts::CiRollup::key(&thread),
                    &facts::PullRequest::key(&thread),
                    &git::revision(&rollup.sha),
                )
                .summary(format!(
                    "CI {} for {}#{} at {} ({} checks and statuses)",
                    rollup.verdict,
                    rollup.repo,
                    rollup.number,
                    short(&rollup.sha),
                    rollup.items.len()
                ))
                .facts(&facts::CiRollup {
                    verdict: rollup.verdict,
                    head_sha: rollup.sha.clone(),
                    items: rollup.items.len() as u64,
                    item: rollup
                        .items
                        .iter()
                        .map(|item| (item.name.clone(), item.verdict))
                        .collect::<BTreeMap<_, _>>(),
                })
            }
            GitHubEvent::ReviewComment {
                repo,
                action,
                number,
                comment,
            } => review_comment(repo, action.as_deref(), *number, comment),
            GitHubEvent::ReviewThread {
                repo,
                number,
                resolved,
                thread,
            } => review_thread(repo, *number, *resolved, thread),
            GitHubEvent::WorkflowRun { repo, run } => workflow_run(repo, run),
            GitHubEvent::WorkflowJob { repo, job } => workflow_job(repo, job),
        };
        builder.order(self.order()).build(observed_at)
    }
}

/// A comment's body as recorded: empty once deleted.
fn recorded_body<'a>(action: Option<&str>, body: Option<&'a str>) -> (bool, &'a str) {
    let deleted = action == Some("deleted");
    (deleted, if deleted { "" } else { body.unwrap_or("") })
}

fn review_comment(
    repo: &str,
    action: Option<&str>,
    number: u64,
    comment: &ReviewComment,
) -> FactBuilder {
    let key = facts::ReviewComment::key(repo, comment.id);
    let (deleted, body) = recorded_body(action, comment.body.as_deref());
    let digest = sha256_hex(body.as_bytes());
    let who = login(comment.user.as_ref());
    FactBuilder::new(&key, &key, &format!("content:{}", &digest[..16]))
        .summary(format!(
            "{who} commented on {} in {repo}#{number}{}",
            comment.path,
            if deleted { " (deleted)" } else { "" }
        ))
        .facts(&facts::ReviewComment {
            author: who.to_owned(),
            pull: number,
            path: comment.path.clone(),
            commit_id: comment.commit_id.as_deref().unwrap_or("unknown").to_owned(),
            in_reply_to: comment.in_reply_to_id,
            deleted,
            body: body.to_owned(),
            body_sha256: digest,
            body_bytes: body.len() as u64,
            association: association(comment.author_association.as_deref()),
        })
}

/// GitHub's `author_association`, in lower case; `None` when GitHub did not say, or said
/// something that is not one word of letters and underscores.
fn association(said: Option<&str>) -> Option<String> {
    said.filter(|a| {
        !a.is_empty() && a.len() <= 32 && a.bytes().all(|b| b.is_ascii_alphabetic() || b == b'_')
    })
    .map(str::to_ascii_lowercase)
}

fn review_thread(repo: &str, number: u64, resolved: bool, thread: &ReviewThread) -> FactBuilder {
    let key = facts::ReviewThread::key(&Thread::new(repo, number), &thread.node_id);
    let path = thread.comments.first().map(|c| c.path.clone());
    let state = if resolved { "resolved" } else { "unresolved" };
    FactBuilder::new(&key, &key, &format!("thread:{state}"))
        .summary(format!(
            "a review thread of {repo}#{number} {state} ({} comments)",
            thread.comments.len()
        ))
        .facts(&facts::ReviewThread {
            pull: number,
            resolved,
            comments: thread.comments.len() as u64,
            path,
        })
}

fn workflow_run(repo: &str, run: &WorkflowRun) -> FactBuilder {
    let commit = Commit::new(repo, &run.head_sha);
    let name = run
        .name
        .clone()
        .unwrap_or_else(|| format!("run {}", run.id));
    let verdict = run_verdict(&run.status, run.conclusion.as_deref());
    FactBuilder::new(
        &facts::WorkflowRun::key(&commit, &name),
        &commit.subject(),
        &commit.revision(),
    )
    .summary(format!(
        "workflow `{name}` {verdict} at {}",
        short(&run.head_sha)
    ))
    .facts(&facts::WorkflowRun {
        name,
        status: run.status.clone(),
        conclusion: run.conclusion.as_deref().unwrap_or("none").to_owned(),
        verdict,
        event: run.event.as_deref().unwrap_or("unknown").to_owned(),
        attempt: run.run_attempt.unwrap_or(1),
        pulls: pulls(&run.pull_requests),
    })
}

fn workflow_job(repo: &str, job: &WorkflowJob) -> FactBuilder {
    let commit = Commit::new(repo, &job.head_sha);
    let workflow = job.workflow_name.as_deref().unwrap_or("unknown");
    let verdict = run_verdict(&job.status, job.conclusion.as_deref());
    FactBuilder::new(
        &facts::WorkflowJob::key(&commit, workflow, &job.name),
        &commit.subject(),
        &commit.revision(),
    )
    .summary(format!(
        "job `{}` of `{workflow}` {verdict} at {}",
        job.name,
        short(&job.head_sha)
    ))
    .facts(&facts::WorkflowJob {
        name: job.name.clone(),
        workflow: workflow.to_owned(),
        status: job.status.clone(),
        conclusion: job.conclusion.as_deref().unwrap_or("none").to_owned(),
        verdict,
        attempt: job.run_attempt.unwrap_or(1),
    })
}
