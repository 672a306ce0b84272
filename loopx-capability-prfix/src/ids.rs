//! Stable ids derived from domain facts, so repeated judgements propose the same things.

use loopx_kernel::ids::bounded_to;

/// The longest line prefix: room is left for the `/<what>@<short sha>` every id adds to it.
const MAX_LINE: usize = 80;

/// The id prefix of everything the capability proposes for one pull request or issue line:
/// the observation key itself when short, cut with a digest of the whole otherwise, so every id
/// built on it stays within the kernel's limit and the prefix still finds them all.
pub fn line(key: &str) -> String {
    bounded_to(key, MAX_LINE)
}

/// The first 12 digits of a sha: enough to tell heads apart in ids.
pub fn short(sha: &str) -> &str {
    sha.get(..12).unwrap_or(sha)
}

#[cfg(test)]
mod tests {

    use super::*;

    #[test]
    fn lines_are_bounded_and_stable() {
        let long = format!("pr:{}#1", "x".repeat(120));
        assert_eq!(line(&long), line(&long));
        assert!(line(&long).len() <= MAX_LINE);
        assert_ne!(line(&long), line(&format!("pr:{}#2", "x".repeat(120))));
        assert_eq!(line("pr:a/b#1"), "pr:a/b#1");
        assert_eq!(short("ec26c3e57ca3a959ca5aad62"), "ec26c3e57ca3");
    }
}
