//! Stable ids derived from domain facts, so that every judgement of the same facts proposes
//! the same todos, gates and obligations (and the kernel's proposal builder skips the ones the
//! goal already holds).

/// `<kind>:<experiment>#<digest of parts>`, kept within the kernel's id length (see
/// [`loopx_kernel::ids::stable_id`]): equal arguments give equal ids, distinct parts distinct ones.
pub fn scoped_id(kind: &str, experiment: &str, parts: &[&str]) -> String {
    loopx_kernel::ids::stable_id(&format!("{kind}:{experiment}"), parts)
}
