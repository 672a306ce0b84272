//! Stable ids derived from domain facts, so repeated judgements propose the same things.

use loopx_kernel::MAX_ID_LEN;

/// Keeps text within the kernel's id length: shorter text is returned unchanged; longer text
/// keeps a prefix and ends with `=` and a 16-digit digest of the whole, so distinct texts stay
/// distinct.
pub fn bounded(text: &str) -> String {
    if text.len() <= MAX_ID_LEN {
        return text.to_owned();
    }
    let mut cut = MAX_ID_LEN - 17;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}={:016x}", &text[..cut], fnv1a(text.as_bytes()))
}

/// The id prefix of everything the capability proposes for one pull request or issue line:
/// the observation key itself when short, a digest of it otherwise, so every id built on it
/// stays within the kernel's limit and the prefix still finds them all.
pub fn line(key: &str) -> String {
    if key.len() <= 80 {
        key.to_owned()
    } else {
        format!("line={:016x}", fnv1a(key.as_bytes()))
    }
}

/// The first 12 digits of a sha: enough to tell heads apart in ids.
pub fn short(sha: &str) -> &str {
    sha.get(..12).unwrap_or(sha)
}

/// FNV-1a: a stable, dependency-free digest for ids (not a security boundary).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_text_is_cut_with_a_digest_and_stays_distinct() {
        let a = bounded(&"a".repeat(300));
        let b = bounded(&format!("{}b", "a".repeat(299)));
        assert_eq!(a.len(), MAX_ID_LEN);
        assert_ne!(a, b);
        assert_eq!(bounded("pr:a/b#1"), "pr:a/b#1");
    }

    #[test]
    fn lines_are_short_and_stable() {
        let long = format!("pr:{}#1", "x".repeat(120));
        assert_eq!(line(&long), line(&long));
        assert!(line(&long).len() < 30);
        assert_eq!(line("pr:a/b#1"), "pr:a/b#1");
        assert_eq!(short("ec26c3e57ca3a959ca5aad62"), "ec26c3e57ca3");
    }
}
