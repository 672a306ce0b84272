//! The kernel's lifecycle invariants as a state-machine property test: random runs of commands
//! from every kind of actor, with time passing, checked step by step against the testkit's
//! reference model and the invariants of the design.
//!
//! Set `PROPTEST_CASES` to run more (or fewer) cases than the default 1024. The kernel's tests
//! always build with the `testkit` feature (a dev-dependency on the crate itself enables it).

use loopx_kernel::GoalState;
use loopx_kernel::testkit::{LifecycleTest, config, failing_run, failing_run_strategy};
use proptest::prelude::*;
use proptest_state_machine::prop_state_machine;

prop_state_machine! {
    #![proptest_config(config(1024))]

    #[test]
    fn lifecycle_matches_the_model_and_keeps_its_invariants(
        sequential 1..40 => LifecycleTest<GoalState>
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// No sequence of failing turns is admitted faster than the retry policy allows, and every
    /// one reaches the replan obligation.
    #[test]
    fn failing_turns_keep_to_the_retry_policy_and_reach_the_obligation(
        run in failing_run_strategy()
    ) {
        let findings = failing_run(&run);
        prop_assert!(findings.is_empty(), "{run:?}: {findings:#?}");
    }
}
