//! The seed story through the CLI against a real PostgreSQL server: a throwaway cluster
//! started by `loopx_store::test_cluster` (or `LOOPX_TEST_POSTGRES_URL`). Without one the test
//! fails and says what to install; it never skips.

mod support;

use support::{Loopx, budget_goal, seed_story};

#[test]
fn the_seed_story_runs_on_postgres_exactly_as_on_sqlite() {
    let url = loopx_store::test_cluster::cluster().database();
    let postgres = seed_story(&Loopx::with_store(url.clone()));
    let sqlite = seed_story(&Loopx::sqlite());
    assert_eq!(postgres.len(), sqlite.len());
    for ((name, pg), (_, lite)) in postgres.iter().zip(&sqlite) {
        match name.as_str() {
            "init" => assert_eq!(pg["init"]["backend"], "postgres"),
            // SQLite adds its integrity check; the goal checks are the same.
            "doctor" => assert_eq!(pg["doctor"]["ok"], true, "{pg}"),
            _ => assert_eq!(
                pg, lite,
                "step {name} differs between PostgreSQL and SQLite"
            ),
        }
    }
    let last = &postgres
        .iter()
        .find(|(n, _)| n == "next_terminal")
        .expect("a step")
        .1;
    assert_eq!(last["decision"]["outcome"], "accepted");
    // The URL's password (if any) never appears in output.
    let init = &postgres[0].1;
    assert!(!init.to_string().contains("postgres://"), "{init}");
}

#[test]
fn a_budget_that_runs_out_decides_alike_on_postgres() {
    let url = loopx_store::test_cluster::cluster().database();
    let postgres = budget_goal(&Loopx::with_store(url), "asks", "ask");
    let sqlite = budget_goal(&Loopx::sqlite(), "asks", "ask");
    assert_eq!(postgres["decision"]["kind"], "ask");
    assert_eq!(postgres, sqlite);
}
