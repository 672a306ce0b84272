//! Near matches for a mistyped id: the known id closest by edit distance, when it is close.

/// The candidate nearest to `typed` by edit distance (a swap of two neighbours counts as one
/// edit), if it is within a third of the longer one's length (at least one edit) and not `typed`
/// itself.
pub fn near<'a>(typed: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<String> {
    candidates
        .into_iter()
        .filter(|c| *c != typed)
        .map(|c| (strsim::osa_distance(typed, c), c))
        .filter(|(distance, c)| *distance <= (typed.len().max(c.len()) / 3).max(1))
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, c)| c.to_owned())
}

#[cfg(test)]
mod tests {
    use super::near;

    #[test]
    fn a_near_id_is_suggested_and_a_far_one_is_not() {
        let known = ["agent-a", "reviewer"];
        assert_eq!(near("agnet-a", known).as_deref(), Some("agent-a"));
        assert_eq!(near("agent-b", known).as_deref(), Some("agent-a"));
        assert_eq!(near("somebody-else", known), None);
        assert_eq!(near("agent-a", known), None, "no suggestion of itself");
    }
}
