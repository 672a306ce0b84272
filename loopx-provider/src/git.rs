//! Git: head, branch, dirty state, worktree identity and commit metadata, read with
//! `git -C <dir>` in machine formats.
//!
//! Every call runs `git` through the [process runner](crate::process) with an empty environment
//! except `PATH` and `HOME`, plus `GIT_TERMINAL_PROMPT=0` (never wait for credentials) and
//! `LC_ALL=C` (stable messages), a timeout and bounded output. Nothing here writes to a
//! repository.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use async_trait::async_trait;
use loopx_kernel::facts::git::{self, GitHead};
use loopx_kernel::seams::{Clock, ObserveRequest, Provider, ProviderError};
use loopx_kernel::{Observation, SourceId, Workspace};

use crate::fact::FactBuilder;
use crate::process::{CommandSpec, Exit, ProcessError, ProcessOutput};

/// A failure reading a repository.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum GitError {
    /// `git` is not installed (or not on `PATH`).
    #[error("`git` was not found; install git or pass its path")]
    GitMissing,
    /// The directory is not inside a git repository.
    #[error("`{dir}` is not inside a git repository")]
    NotARepository {
        /// The directory.
        dir: PathBuf,
    },
    /// The revision does not name a commit (or the repository has no commit yet).
    #[error("`{rev}` does not name a commit")]
    UnknownRevision {
        /// The revision asked for.
        rev: String,
    },
    /// `git` did not answer in time.
    #[error("`git {command}` timed out")]
    Timeout {
        /// The subcommand.
        command: String,
    },
    /// `git` failed otherwise.
    #[error("`git {command}` failed ({exit}): {stderr}")]
    Failed {
        /// The subcommand.
        command: String,
        /// How it ended.
        exit: Exit,
        /// The tail of its standard error.
        stderr: String,
    },
    /// `git` printed something this reader does not understand.
    #[error("unexpected output from `git {command}`: {detail}")]
    Parse {
        /// The subcommand.
        command: String,
        /// What was wrong.
        detail: String,
    },
    /// The process could not be run.
    #[error(transparent)]
    Process(#[from] ProcessError),
}

/// The state of a working tree, from `git status --porcelain=v2 -z --branch`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct GitStatus {
    /// The commit checked out; `None` before the first commit.
    pub head: Option<String>,
    /// The branch checked out; `None` when the head is detached.
    pub branch: Option<String>,
    /// The upstream branch, when one is set.
    pub upstream: Option<String>,
    /// Commits ahead of and behind the upstream, when known.
    pub ahead_behind: Option<(u64, u64)>,
    /// Tracked files with staged or unstaged changes (renames and copies included).
    pub changed: u64,
    /// Files with unresolved merge conflicts.
    pub unmerged: u64,
    /// Untracked files (ignored files are not counted).
    pub untracked: u64,
    /// The paths of the changed, conflicted and untracked files (an untracked directory as
    /// one path ending in `/`), in git's order; a rename by its new path.
    pub paths: Vec<String>,
}

impl GitStatus {
    /// True when anything is changed, conflicted or untracked.
    pub fn dirty(&self) -> bool {
        self.changed + self.unmerged + self.untracked > 0
    }
}

/// One commit's metadata.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CommitInfo {
    /// Its full sha.
    pub sha: String,
    /// Its parents' shas.
    pub parents: Vec<String>,
    /// Author name.
    pub author_name: String,
    /// Author e-mail.
    pub author_email: String,
    /// Author date, strict ISO 8601.
    pub author_date: String,
    /// Committer date, strict ISO 8601.
    pub committer_date: String,
    /// The subject line.
    pub subject: String,
}

/// Reads repositories with the `git` command line.
#[derive(Debug, Clone)]
pub struct Git {
    program: OsString,
    timeout: loopx_kernel::Duration,
}

impl Default for Git {
    fn default() -> Self {
        Git::new()
    }
}

impl Git {
    /// `git` from `PATH`, with a 30-second timeout per call.
    pub fn new() -> Self {
        Git {
            program: OsString::from("git"),
            timeout: loopx_kernel::Duration::seconds(30),
        }
    }

    /// Uses the `git` at `program` instead.
    #[must_use]
    pub fn with_program(mut self, program: impl Into<OsString>) -> Self {
        self.program = program.into();
        self
    }

    /// Sets the timeout per call.
    #[must_use]
    pub fn with_timeout(mut self, timeout: loopx_kernel::Duration) -> Self {
        self.timeout = timeout;
        self
    }

    async fn git(&self, dir: &Path, args: &[&str]) -> Result<ProcessOutput, GitError> {
        let command = args.first().copied().unwrap_or_default().to_owned();
        let output = CommandSpec::new(&self.program)
            .arg("-C")
            .arg(dir)
            .args(args)
            .allow_env("PATH")
            .allow_env("HOME")
            .env("GIT_TERMINAL_PROMPT", "0")
            .env("LC_ALL", "C")
            .env("GIT_OPTIONAL_LOCKS", "0")
            .timeout(self.timeout)
            .output_limit(4 * 1024 * 1024)
            .run()
            .await
            .map_err(|error| match error {
                ProcessError::NotFound { .. } => GitError::GitMissing,
                other => GitError::Process(other),
            })?;
        match output.exit {
            Exit::Code { code: 0 } => Ok(output),
            Exit::TimedOut => Err(GitError::Timeout { command }),
            exit => {
                let stderr = output.stderr.text().trim().to_owned();
                if stderr.contains("not a git repository") {
                    return Err(GitError::NotARepository {
                        dir: dir.to_owned(),
                    });
                }
                if !dir.is_dir() {
                    return Err(GitError::NotARepository {
                        dir: dir.to_owned(),
                    });
                }
                Err(GitError::Failed {
                    command,
                    exit,
                    stderr,
                })
            }
        }
    }

    fn text(output: &ProcessOutput, command: &str) -> Result<String, GitError> {
        if output.stdout.truncated() {
            return Err(GitError::Parse {
                command: command.to_owned(),
                detail: "output exceeded its bound".to_owned(),
            });
        }
        String::from_utf8(output.stdout.tail.clone()).map_err(|_| GitError::Parse {
            command: command.to_owned(),
            detail: "output is not UTF-8".to_owned(),
        })
    }

    /// The working tree's state.
    ///
    /// # Errors
    /// [`GitError::NotARepository`], [`GitError::GitMissing`], or another [`GitError`].
    pub async fn status(&self, dir: &Path) -> Result<GitStatus, GitError> {
        let output = self
            .git(dir, &["status", "--porcelain=v2", "-z", "--branch"])
            .await?;
        let text = Self::text(&output, "status")?;
        parse_status(&text)
    }

    /// The sha of the commit checked out.
    ///
    /// # Errors
    /// [`GitError::UnknownRevision`] before the first commit, or another [`GitError`].
    pub async fn head(&self, dir: &Path) -> Result<String, GitError> {
        self.status(dir)
            .await?
            .head
            .ok_or_else(|| GitError::UnknownRevision {
                rev: "HEAD".to_owned(),
            })
    }

    /// The worktree's identity: its top level and the common git directory shared by all
    /// worktrees of one clone, both absolute.
    ///
    /// # Errors
    /// [`GitError::NotARepository`], [`GitError::GitMissing`], or another [`GitError`].
    pub async fn workspace(&self, dir: &Path) -> Result<Workspace, GitError> {
        let output = self
            .git(
                dir,
                &[
                    "rev-parse",
                    "--path-format=absolute",
                    "--show-toplevel",
                    "--git-common-dir",
                ],
            )
            .await?;
        let text = Self::text(&output, "rev-parse")?;
        let mut lines = text.lines();
        match (lines.next(), lines.next()) {
            (Some(top), Some(common)) if !top.is_empty() && !common.is_empty() => Ok(Workspace {
                top_level: top.to_owned(),
                common_dir: common.to_owned(),
            }),
            _ => Err(GitError::Parse {
                command: "rev-parse".to_owned(),
                detail: "expected the top level and the common dir".to_owned(),
            }),
        }
    }

    /// The metadata of commit `rev` (a sha, a branch, `HEAD`).
    ///
    /// # Errors
    /// [`GitError::UnknownRevision`] when `rev` names no commit, or another [`GitError`].
    pub async fn commit(&self, dir: &Path, rev: &str) -> Result<CommitInfo, GitError> {
        if rev.starts_with('-') {
            return Err(GitError::UnknownRevision {
                rev: rev.to_owned(),
            });
        }
        let spec = format!("{rev}^{{commit}}");
        let result = self
            .git(
                dir,
                &[
                    "show",
                    "-s",
                    "--no-show-signature",
                    "--format=%H%x00%P%x00%an%x00%ae%x00%aI%x00%cI%x00%s",
                    &spec,
                    "--",
                ],
            )
            .await;
        let output = match result {
            Err(GitError::Failed { .. }) => {
                return Err(GitError::UnknownRevision {
                    rev: rev.to_owned(),
                });
            }
            other => other?,
        };
        let text = Self::text(&output, "show")?;
        let fields: Vec<&str> = text.trim_end_matches('\n').split('\0').collect();
        let [sha, parents, name, email, adate, cdate, subject] = fields.as_slice() else {
            return Err(GitError::Parse {
                command: "show".to_owned(),
                detail: format!("expected 7 fields, got {}", fields.len()),
            });
        };
        Ok(CommitInfo {
            sha: (*sha).to_owned(),
            parents: parents.split_whitespace().map(str::to_owned).collect(),
            author_name: (*name).to_owned(),
            author_email: (*email).to_owned(),
            author_date: (*adate).to_owned(),
            committer_date: (*cdate).to_owned(),
            subject: (*subject).to_owned(),
        })
    }
}

/// Parses `git status --porcelain=v2 -z --branch` output.
///
/// # Errors
/// [`GitError::Parse`] for records this reader does not recognise.
pub fn parse_status(text: &str) -> Result<GitStatus, GitError> {
    let parse_error = |detail: String| GitError::Parse {
        command: "status".to_owned(),
        detail,
    };
    let mut status = GitStatus {
        head: None,
        branch: None,
        upstream: None,
        ahead_behind: None,
        changed: 0,
        unmerged: 0,
        untracked: 0,
        paths: Vec::new(),
    };
    let mut records = text.split('\0');
    while let Some(record) = records.next() {
        if record.is_empty() {
            continue;
        }
        if let Some(header) = record.strip_prefix("# ") {
            let (name, value) = header.split_once(' ').unwrap_or((header, ""));
            match name {
                "branch.oid" if value != "(initial)" => status.head = Some(value.to_owned()),
                "branch.head" if value != "(detached)" => status.branch = Some(value.to_owned()),
                "branch.upstream" => status.upstream = Some(value.to_owned()),
                "branch.ab" => {
                    let mut parts = value.split(' ');
                    let ahead = parts.next().and_then(|a| a.strip_prefix('+'));
                    let behind = parts.next().and_then(|b| b.strip_prefix('-'));
                    if let (Some(a), Some(b)) = (ahead, behind) {
                        let a = a.parse().map_err(|_| parse_error(header.to_owned()))?;
                        let b = b.parse().map_err(|_| parse_error(header.to_owned()))?;
                        status.ahead_behind = Some((a, b));
                    }
                }
                _ => {}
            }
            continue;
        }
        // The path is the last field: after 8 fields for a change, 9 for a rename or copy,
        // 10 for a conflict, 1 for an untracked file.
        let fields = match record.as_bytes().first() {
            Some(b'1') => {
                status.changed += 1;
                9
            }
            Some(b'2') => {
                // A rename or copy is followed by its original path as a separate record.
                status.changed += 1;
                let _ = records.next();
                10
            }
            Some(b'u') => {
                status.unmerged += 1;
                11
            }
            Some(b'?') => {
                status.untracked += 1;
                2
            }
            Some(b'!') => continue,
            _ => return Err(parse_error(format!("unknown record `{record}`"))),
        };
        match record.splitn(fields, ' ').nth(fields - 1) {
            Some(path) => status.paths.push(path.to_owned()),
            None => return Err(parse_error(format!("a record without its path `{record}`"))),
        }
    }
    Ok(status)
}

/// Observes one working tree: stream `key` about subject `subject`, revision `git:<head>`,
/// facts the kernel's [`GitHead`] schema (`head`, `branch`, `dirty`, `changed`, `untracked`,
/// `unmerged`, `top_level`, `common_dir`).
pub struct GitProvider {
    source: SourceId,
    git: Git,
    dir: PathBuf,
    subject: String,
    clock: std::sync::Arc<dyn Clock>,
}

impl std::fmt::Debug for GitProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GitProvider")
            .field("source", &self.source)
            .field("dir", &self.dir)
            .field("subject", &self.subject)
            .finish_non_exhaustive()
    }
}

impl GitProvider {
    /// A provider reading the working tree at `dir`; its observations are about `subject`
    /// (e.g. `repo:acme/cli`) and timed by `clock`.
    pub fn new(
        source: SourceId,
        git: Git,
        dir: impl Into<PathBuf>,
        subject: impl Into<String>,
        clock: std::sync::Arc<dyn Clock>,
    ) -> Self {
        GitProvider {
            source,
            git,
            dir: dir.into(),
            subject: subject.into(),
            clock,
        }
    }

    /// Reads the tree and builds its observation on stream `key`.
    ///
    /// # Errors
    /// A [`GitError`] when the tree cannot be read; [`GitError::UnknownRevision`] before the
    /// first commit.
    pub async fn read(&self, key: &str) -> Result<Observation, GitError> {
        let status = self.git.status(&self.dir).await?;
        let workspace = self.git.workspace(&self.dir).await?;
        let head = status
            .head
            .clone()
            .ok_or_else(|| GitError::UnknownRevision {
                rev: "HEAD".to_owned(),
            })?;
        let branch = status.branch.clone().unwrap_or_else(|| "(detached)".into());
        FactBuilder::new(key, &self.subject, &git::revision(&head))
            .summary(format!(
                "{branch} at {head}{}",
                if status.dirty() { ", dirty" } else { "" }
            ))
            .facts(&GitHead {
                dirty: status.dirty(),
                head,
                branch,
                changed: status.changed,
                untracked: status.untracked,
                unmerged: status.unmerged,
                top_level: workspace.top_level.clone(),
                common_dir: workspace.common_dir.clone(),
            })
            .build(self.clock.now())
            .map_err(|error| GitError::Parse {
                command: "status".to_owned(),
                detail: error.to_string(),
            })
    }
}

impl From<GitError> for ProviderError {
    fn from(error: GitError) -> Self {
        match error {
            GitError::NotARepository { .. } | GitError::UnknownRevision { .. } => {
                ProviderError::Invalid(error.to_string())
            }
            other => ProviderError::Failed(other.to_string()),
        }
    }
}

#[async_trait]
impl Provider for GitProvider {
    fn source(&self) -> &SourceId {
        &self.source
    }

    async fn observe(&self, request: &ObserveRequest) -> Result<Vec<Observation>, ProviderError> {
        Ok(vec![self.read(request.key.as_str()).await?])
    }
}
