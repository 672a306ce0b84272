//! A [`Validator`] over a command: its verdict becomes evidence bound to the git revision of the
//! workspace it ran in.
//!
//! The validator reads the workspace's head before running the command and again after it; the
//! evidence is bound to `git:<sha>` only when both reads agree and the tree was clean, otherwise
//! to `git:<sha>+dirty` (a revision no clean observation ever matches, so evidence established
//! on uncommitted changes never satisfies a criterion at a commit). A passing verdict needs exit
//! code zero within the timeout; an exit code proves only that the process exited, which is why
//! the evidence records which command ran, on which revision, and the digest of what it printed.
//! A failing check's summary also carries what it printed — the tails of its standard error and
//! output, bounded to the kernel's text limit, with the values of secret environment variables
//! masked ([`ProcessOutput::told`]) — so whoever acts next can tell why it failed.

use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use loopx_kernel::seams::{Clock, TurnError, TurnReport, TurnRequest, Validation, Validator};
use loopx_kernel::{
    Actor, CheckId, EvidenceId, Lineage, NewEvidence, Outcome, Revision, SourceId, Subject,
    VerdictOutcome,
};

use crate::fact::{bounded_id, id_component};
use crate::git::Git;
use crate::process::{CommandSpec, Exit, ProcessOutput};

/// Runs a command in a workspace and judges a turn by its exit.
pub struct CommandValidator {
    source: SourceId,
    check: CheckId,
    subject: Subject,
    workspace: PathBuf,
    command: CommandSpec,
    git: Git,
    clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for CommandValidator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CommandValidator")
            .field("source", &self.source)
            .field("check", &self.check)
            .field("subject", &self.subject)
            .field("workspace", &self.workspace)
            .field("command", &self.command.display())
            .finish_non_exhaustive()
    }
}

/// What one validation run established, before it becomes a [`Validation`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandVerdict {
    /// The revision the command ran at.
    pub revision: Revision,
    /// The process outcome.
    pub output: ProcessOutput,
}

impl CommandValidator {
    /// A validator named `source` establishing `check` about `subject` by running `command` in
    /// the git workspace at `workspace` (the command's working directory is set to it).
    pub fn new(
        source: SourceId,
        check: CheckId,
        subject: Subject,
        workspace: impl Into<PathBuf>,
        command: CommandSpec,
        clock: Arc<dyn Clock>,
    ) -> Self {
        let workspace = workspace.into();
        CommandValidator {
            source,
            check,
            subject,
            command: command.current_dir(&workspace),
            workspace,
            git: Git::new(),
            clock,
        }
    }

    /// Uses `git` to read the workspace.
    #[must_use]
    pub fn with_git(mut self, git: Git) -> Self {
        self.git = git;
        self
    }

    /// Reads the revision, runs the command, reads the revision again.
    ///
    /// # Errors
    /// [`TurnError::Failed`] when the workspace cannot be read or the command cannot start.
    pub async fn run(&self) -> Result<CommandVerdict, TurnError> {
        let failed = |e: &dyn std::fmt::Display| TurnError::Failed(e.to_string());
        let before = self
            .git
            .status(&self.workspace)
            .await
            .map_err(|e| failed(&e))?;
        let output = self.command.run().await.map_err(|e| failed(&e))?;
        let after = self
            .git
            .status(&self.workspace)
            .await
            .map_err(|e| failed(&e))?;
        let head = after
            .head
            .clone()
            .ok_or_else(|| TurnError::Failed("the workspace has no commit yet".to_owned()))?;
        let clean = before.head == after.head && !before.dirty() && !after.dirty();
        let text = if clean {
            format!("git:{}", id_component(&head))
        } else {
            format!("git:{}+dirty", id_component(&head))
        };
        let revision = Revision::new(bounded_id(&text)).map_err(|e| failed(&e))?;
        Ok(CommandVerdict { revision, output })
    }
}

#[async_trait]
impl Validator for CommandValidator {
    fn actor(&self) -> Actor {
        Actor::Validator(self.source.clone())
    }

    async fn validate(
        &self,
        turn: &TurnRequest,
        _report: &TurnReport,
    ) -> Result<Validation, TurnError> {
        let verdict = self.run().await?;
        let id = EvidenceId::new(bounded_id(&format!(
            "{}.{}",
            turn.turn,
            id_component(self.check.as_str())
        )))
        .map_err(|e| TurnError::Failed(e.to_string()))?;
        let evidence = self.evidence(id, &verdict);
        let outcome = if verdict.output.exit.success() {
            VerdictOutcome::Passed
        } else {
            VerdictOutcome::Failed
        };
        Ok(Validation::new(outcome, evidence.summary.clone()).with_evidence([evidence]))
    }
}

impl CommandValidator {
    /// The evidence `verdict` establishes, as `id`: of the check about the subject, at the
    /// revision the command ran at, passing exactly when it exited zero. Its summary names the
    /// command, the exit, the time and what it printed; a failing one also carries the tails of
    /// its output, bounded and redacted ([`ProcessOutput::explained`]).
    pub fn evidence(&self, id: EvidenceId, verdict: &CommandVerdict) -> NewEvidence {
        let CommandVerdict { revision, output } = verdict;
        let passed = output.exit.success();
        let summary = format!(
            "`{}` {} after {} ms at {}; stdout sha256 {}, {} bytes{}",
            self.command.display().chars().take(200).collect::<String>(),
            output.exit,
            output.duration.as_millis(),
            revision,
            &output.stdout.sha256[..16],
            output.stdout.total_bytes,
            if output.exit == Exit::TimedOut {
                "; the process group was killed"
            } else {
                ""
            },
        );
        // A failing check says why, in its own words: what it printed, bounded and redacted.
        let summary = if passed {
            summary
        } else {
            output.explained(summary, &self.command)
        };
        NewEvidence {
            id,
            check: self.check.clone(),
            subject: self.subject.clone(),
            revision: revision.clone(),
            outcome: if passed { Outcome::Pass } else { Outcome::Fail },
            summary,
            observed_at: self.clock.now(),
            ttl: None,
            inputs: Lineage::default(),
        }
    }
}

/// Several validators judging one turn together: it passes only when every one passes, fails
/// when any fails, and is progress otherwise; the evidence of all of them is kept. Each
/// validator still runs on its own (one criterion, one command), so a goal with two criteria
/// gets two pieces of evidence from one settlement.
pub struct AllOf {
    source: SourceId,
    validators: Vec<Arc<dyn Validator>>,
}

impl AllOf {
    /// The validators, judging as `source`.
    pub fn new(source: SourceId, validators: Vec<Arc<dyn Validator>>) -> Self {
        AllOf { source, validators }
    }
}

#[async_trait]
impl Validator for AllOf {
    fn actor(&self) -> Actor {
        Actor::Validator(self.source.clone())
    }

    async fn validate(
        &self,
        turn: &TurnRequest,
        report: &TurnReport,
    ) -> Result<Validation, TurnError> {
        let mut outcomes = Vec::new();
        let mut evidence = Vec::new();
        let mut summaries = Vec::new();
        for validator in &self.validators {
            let validation = validator.validate(turn, report).await?;
            outcomes.push(validation.outcome);
            summaries.push(validation.summary);
            evidence.extend(validation.evidence);
        }
        let outcome = if outcomes.contains(&VerdictOutcome::Failed) {
            VerdictOutcome::Failed
        } else if outcomes.iter().all(|o| *o == VerdictOutcome::Passed) {
            VerdictOutcome::Passed
        } else {
            VerdictOutcome::Progress
        };
        Ok(Validation::new(outcome, summaries.join("; ")).with_evidence(evidence))
    }
}
