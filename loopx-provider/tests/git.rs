//! The git reader against real repositories in temporary directories.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use loopx_kernel::ManualClock;
use loopx_kernel::seams::{ObserveRequest, Provider};
use loopx_kernel::{ObservationKey, SourceId, Timestamp};
use loopx_provider::git::{Git, GitError, GitProvider};

mod support;
use support::sh_git;

fn repo() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = std::fs::canonicalize(dir.path())
        .expect("canonical")
        .join("repo");
    std::fs::create_dir(&root).expect("mkdir");
    sh_git(&root, &["init", "-q"]);
    (dir, root)
}

fn commit(root: &Path, file: &str, text: &str, message: &str) -> String {
    std::fs::write(root.join(file), text).expect("write");
    sh_git(root, &["add", file]);
    sh_git(root, &["commit", "-q", "-m", message]);
    sh_git(root, &["rev-parse", "HEAD"])
}

#[tokio::test]
async fn an_empty_repository_has_a_branch_and_no_head() {
    let (_dir, root) = repo();
    let status = Git::new().status(&root).await.expect("status");
    assert_eq!(status.head, None);
    assert_eq!(status.branch.as_deref(), Some("main"));
    assert!(!status.dirty());
    let head = Git::new().head(&root).await;
    assert!(
        matches!(head, Err(GitError::UnknownRevision { .. })),
        "{head:?}"
    );
}

#[tokio::test]
async fn head_branch_and_dirty_state_follow_the_tree() {
    let (_dir, root) = repo();
    commit(&root, "b.txt", "b\n", "first");
    let sha = commit(&root, "a.txt", "one\n", "second");
    let git = Git::new();
    let clean = git.status(&root).await.expect("status");
    assert_eq!(clean.head.as_deref(), Some(sha.as_str()));
    assert_eq!(clean.branch.as_deref(), Some("main"));
    assert!(!clean.dirty());

    std::fs::write(root.join("new file.txt"), "x").expect("write");
    let untracked = git.status(&root).await.expect("status");
    assert_eq!((untracked.untracked, untracked.changed), (1, 0));
    assert_eq!(untracked.paths, ["new file.txt"]);
    assert!(untracked.dirty());

    std::fs::remove_file(root.join("new file.txt")).expect("remove");
    std::fs::write(root.join("a.txt"), "two\n").expect("write");
    sh_git(&root, &["mv", "b.txt", "renamed.txt"]);
    let changed = git.status(&root).await.expect("status");
    assert_eq!(changed.untracked, 0);
    assert_eq!(
        changed.changed, 2,
        "a modification and a staged rename: {changed:?}"
    );
    assert_eq!(changed.paths, ["a.txt", "renamed.txt"], "{changed:?}");
    assert_eq!(git.head(&root).await.expect("head"), sha);
}

#[tokio::test]
async fn a_detached_head_has_no_branch() {
    let (_dir, root) = repo();
    let first = commit(&root, "a.txt", "1", "first");
    commit(&root, "a.txt", "2", "second");
    sh_git(&root, &["checkout", "-q", &first]);
    let status = Git::new().status(&root).await.expect("status");
    assert_eq!(status.branch, None);
    assert_eq!(status.head.as_deref(), Some(first.as_str()));
}

#[tokio::test]
async fn worktrees_share_the_common_dir_and_differ_in_top_level() {
    let (dir, root) = repo();
    let sha = commit(&root, "a.txt", "1", "first");
    let second = std::fs::canonicalize(dir.path())
        .expect("canonical")
        .join("second");
    sh_git(
        &root,
        &[
            "worktree",
            "add",
            "-q",
            "-b",
            "side",
            second.to_str().expect("utf-8"),
        ],
    );
    let git = Git::new();

    let main = git.workspace(&root).await.expect("workspace");
    let side = git.workspace(&second).await.expect("workspace");
    assert_eq!(main.top_level, root.to_string_lossy());
    assert_eq!(side.top_level, second.to_string_lossy());
    assert_eq!(main.common_dir, root.join(".git").to_string_lossy());
    assert_eq!(
        side.common_dir, main.common_dir,
        "one clone, one common dir"
    );

    // From a subdirectory the identity is the same checkout.
    std::fs::create_dir(root.join("sub")).expect("mkdir");
    assert_eq!(
        git.workspace(&root.join("sub")).await.expect("workspace"),
        main
    );

    let side_status = git.status(&second).await.expect("status");
    assert_eq!(side_status.branch.as_deref(), Some("side"));
    assert_eq!(side_status.head.as_deref(), Some(sha.as_str()));
}

#[tokio::test]
async fn commit_metadata_is_read_in_machine_format() {
    let (_dir, root) = repo();
    let first = commit(&root, "a.txt", "1", "first commit");
    let second = commit(&root, "a.txt", "2", "second: with a colon");
    let git = Git::new();
    let info = git.commit(&root, "HEAD").await.expect("commit");
    assert_eq!(info.sha, second);
    assert_eq!(info.parents, vec![first.clone()]);
    assert_eq!(info.subject, "second: with a colon");
    assert_eq!(info.author_name, "Test");
    assert_eq!(info.author_email, "test@example.com");
    assert!(info.author_date.contains('T'), "{}", info.author_date);
    let root_commit = git.commit(&root, &first).await.expect("commit");
    assert!(root_commit.parents.is_empty());

    let unknown = git.commit(&root, "no-such-branch").await;
    assert!(
        matches!(unknown, Err(GitError::UnknownRevision { .. })),
        "{unknown:?}"
    );
    let option = git.commit(&root, "--output=/tmp/x").await;
    assert!(
        matches!(option, Err(GitError::UnknownRevision { .. })),
        "{option:?}"
    );
}

#[tokio::test]
async fn not_a_repository_and_missing_git_are_typed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let status = Git::new().status(dir.path()).await;
    assert!(
        matches!(status, Err(GitError::NotARepository { .. })),
        "{status:?}"
    );
    let nowhere = Git::new().status(&dir.path().join("absent")).await;
    assert!(
        matches!(nowhere, Err(GitError::NotARepository { .. })),
        "{nowhere:?}"
    );

    let missing = Git::new()
        .with_program("/nonexistent/git")
        .status(dir.path())
        .await;
    assert_eq!(missing, Err(GitError::GitMissing));
}

#[tokio::test]
async fn the_git_provider_observes_an_unchanged_tree_with_the_same_fingerprint() {
    let (_dir, root) = repo();
    let sha = commit(&root, "a.txt", "1", "first");
    let clock = Arc::new(ManualClock::new(Timestamp::from_millis(1_000)));
    let provider = GitProvider::new(
        SourceId::new("git").expect("id"),
        Git::new(),
        &root,
        "repo:acme/cli",
        clock.clone(),
    );
    let request = ObserveRequest {
        key: ObservationKey::new("tree:acme/cli").expect("id"),
        known: None,
        etag: None,
    };
    let first = provider.observe(&request).await.expect("observe");
    clock.advance(loopx_kernel::Duration::minutes(5));
    let again = provider.observe(&request).await.expect("observe");
    assert_eq!(first[0].revision.as_str(), format!("git:{sha}"));
    assert_eq!(
        first[0].facts.get("dirty").map(String::as_str),
        Some("false")
    );
    assert_eq!(first[0].fingerprint, again[0].fingerprint);
    assert_ne!(first[0].observed_at, again[0].observed_at);

    std::fs::write(root.join("b.txt"), "x").expect("write");
    let dirty = provider.observe(&request).await.expect("observe");
    assert_ne!(dirty[0].fingerprint, first[0].fingerprint);
    let moved = commit(&root, "b.txt", "x", "second");
    let next = provider.observe(&request).await.expect("observe");
    assert_eq!(next[0].revision.as_str(), format!("git:{moved}"));
}
