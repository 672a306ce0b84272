//! Stable ids derived from domain facts, so that every judgement of the same facts proposes
//! the same todos, gates and obligations (and the kernel's proposal builder skips the ones the
//! goal already holds).

use loopx_kernel::MAX_ID_LEN;

/// `<kind>:<experiment>#<digest of parts>`; when that would exceed the kernel's id length, the
/// experiment is folded into the digest: `<kind>:#<digest>`.
pub fn scoped_id(kind: &str, experiment: &str, parts: &[&str]) -> String {
    let digest = digest(parts);
    let id = format!("{kind}:{experiment}#{digest:016x}");
    if id.len() <= MAX_ID_LEN {
        id
    } else {
        let mut all = vec![experiment];
        all.extend_from_slice(parts);
        format!("{kind}:#{:016x}", self::digest(&all))
    }
}

/// FNV-1a over the parts, each followed by a separator byte so `["ab", "c"]` and `["a", "bc"]`
/// differ. A stable name, not a security boundary.
fn digest(parts: &[&str]) -> u64 {
    parts
        .iter()
        .flat_map(|part| part.bytes().chain(std::iter::once(0x1f)))
        .fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
            (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_stable_and_separate_parts() {
        assert_eq!(
            scoped_id("k", "e", &["a", "b"]),
            scoped_id("k", "e", &["a", "b"])
        );
        assert_ne!(
            scoped_id("k", "e", &["ab", "c"]),
            scoped_id("k", "e", &["a", "bc"])
        );
    }

    #[test]
    fn long_experiments_still_fit_the_id_limit() {
        let long = "x".repeat(200);
        let id = scoped_id("retry", &long, &["run:a+b+c"]);
        assert!(id.len() <= MAX_ID_LEN);
        assert!(id.starts_with("retry:#"));
    }
}
