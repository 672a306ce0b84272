//! Git: the `git:<sha>` revisions facts are bound to, and a working tree's state as the git
//! provider observes it (on a stream the caller names).

use crate::facts::Fact;
use crate::ids::id_component;

/// The prefix of a git revision: `git:<sha>`.
pub const REVISION_PREFIX: &str = "git:";

/// The revision `git:<sha>` of a commit, the sha encoded for the id alphabet.
pub fn revision(sha: &str) -> String {
    format!("{REVISION_PREFIX}{}", id_component(sha))
}

/// The exact commit a revision is bound to: `git:<sha>` with a hexadecimal sha (see [`is_sha`]);
/// `None` for any other revision.
pub fn sha_of_revision(revision: &str) -> Option<&str> {
    revision
        .strip_prefix(REVISION_PREFIX)
        .filter(|sha| is_sha(sha))
}

/// True for 7 to 64 hexadecimal digits.
pub fn is_sha(text: &str) -> bool {
    (7..=64).contains(&text.len()) && text.chars().all(|c| c.is_ascii_hexdigit())
}

fact_schema! {
    /// A working tree: its head, branch and state, at revision `git:<head>`. The caller chooses
    /// the stream (e.g. `git-head:acme/cli`).
    pub struct GitHead, read as GitHeadRead, kind "git_head", prefix "" {
        /// The head commit.
        req head: String,
        /// The branch, or `(detached)`.
        req branch: String,
        /// Anything changed, conflicted or untracked.
        req dirty: bool,
        /// Changed entries.
        req changed: u64,
        /// Untracked entries.
        req untracked: u64,
        /// Conflicted entries.
        req unmerged: u64,
        /// The working tree's top level directory.
        req top_level: String,
        /// The repository's common git directory (shared by its worktrees).
        req common_dir: String,
    }
}

impl GitHeadRead {
    /// The head, when it is a sha.
    pub fn sha(&self) -> Option<&str> {
        match &self.head {
            Fact::Known(head) if is_sha(head) => Some(head),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::FactSchema;

    #[test]
    fn revisions_bind_only_hex_shas() {
        assert_eq!(revision("ec26c3e5"), "git:ec26c3e5");
        assert_eq!(sha_of_revision("git:ec26c3e5"), Some("ec26c3e5"));
        assert_eq!(sha_of_revision("git:main"), None);
        assert_eq!(sha_of_revision("content:ab12cd34"), None);
    }

    #[test]
    fn a_head_round_trips() {
        let head = GitHead {
            head: "ec26c3e5".into(),
            branch: "main".into(),
            dirty: true,
            changed: 2,
            untracked: 1,
            unmerged: 0,
            top_level: "/w".into(),
            common_dir: "/w/.git".into(),
        };
        let read = GitHead::read(&head.to_facts());
        assert_eq!(read.sha(), Some("ec26c3e5"));
        assert_eq!(read.dirty, Fact::Known(true));
        assert_eq!(read.changed, Fact::Known(2));
        assert_eq!(GitHead::dirty, "dirty");
    }
}
