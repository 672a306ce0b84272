//! One route per issue, from its feasibility facts.

use serde::{Deserialize, Serialize};

use crate::facts::{Reproduction, Triage};

/// How an issue is worked. Exactly one per issue at a time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Route {
    /// Reproduced, bounded and validatable: fix it in a pull request.
    FixPr,
    /// Something concrete is known but a fix is not feasible (environment, under-specified,
    /// unbounded scope, no focused validation): answer with a comment only.
    CommentOnly,
    /// Nothing concrete yet: triage it (reproduce, bound the scope, find a validation).
    TriageOnly,
}

impl Route {
    /// The stable name used in todo ids (`fix`, `comment`, `triage`).
    pub fn slug(self) -> &'static str {
        match self {
            Route::FixPr => "fix",
            Route::CommentOnly => "comment",
            Route::TriageOnly => "triage",
        }
    }

    /// The route named by [`Route::slug`], if any.
    pub fn from_slug(slug: &str) -> Option<Route> {
        [Route::FixPr, Route::CommentOnly, Route::TriageOnly]
            .into_iter()
            .find(|r| r.slug() == slug)
    }
}

/// The route the facts call for. A fix needs all of: a reproduction (a product or test bug, or
/// a failing test), a bounded scope (1 to `max_scopes` path prefixes) and a focused validation
/// command. A comment needs something concrete short of that; otherwise the issue is triaged.
pub fn route(triage: &Triage, max_scopes: usize) -> Route {
    let reproduced = triage.failing_test
        || matches!(
            triage.reproduction,
            Reproduction::ProductBug | Reproduction::TestBug
        );
    let bounded = triage
        .scope
        .as_ref()
        .is_some_and(|paths| (1..=max_scopes).contains(&paths.len()));
    let explained = matches!(
        triage.reproduction,
        Reproduction::Environment | Reproduction::UnderSpecified
    );
    if reproduced && bounded && triage.validation.is_some() {
        Route::FixPr
    } else if reproduced || explained {
        Route::CommentOnly
    } else {
        Route::TriageOnly
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn triage(
        reproduction: Reproduction,
        failing_test: bool,
        scopes: usize,
        validated: bool,
    ) -> Triage {
        Triage {
            reproduction,
            failing_test,
            scope: (scopes > 0).then(|| (0..scopes).map(|i| format!("src/{i}")).collect()),
            validation: validated.then(|| "cargo test -p cli parse".to_owned()),
        }
    }

    #[test]
    fn a_fix_needs_reproduction_bounded_scope_and_validation() {
        assert_eq!(
            route(&triage(Reproduction::ProductBug, false, 1, true), 8),
            Route::FixPr
        );
        assert_eq!(
            route(&triage(Reproduction::None, true, 2, true), 8),
            Route::FixPr
        );
        assert_eq!(
            route(&triage(Reproduction::TestBug, false, 1, false), 8),
            Route::CommentOnly
        );
        assert_eq!(
            route(&triage(Reproduction::ProductBug, false, 0, true), 8),
            Route::CommentOnly
        );
        assert_eq!(
            route(&triage(Reproduction::ProductBug, false, 9, true), 8),
            Route::CommentOnly
        );
    }

    #[test]
    fn explanations_without_reproduction_are_comments_and_nothing_is_triage() {
        assert_eq!(
            route(&triage(Reproduction::Environment, false, 1, true), 8),
            Route::CommentOnly
        );
        assert_eq!(
            route(&triage(Reproduction::UnderSpecified, false, 0, false), 8),
            Route::CommentOnly
        );
        assert_eq!(
            route(&triage(Reproduction::None, false, 1, true), 8),
            Route::TriageOnly
        );
    }

    #[test]
    fn slugs_round_trip() {
        for r in [Route::FixPr, Route::CommentOnly, Route::TriageOnly] {
            assert_eq!(Route::from_slug(r.slug()), Some(r));
        }
        assert_eq!(Route::from_slug("merge"), None);
    }
}
