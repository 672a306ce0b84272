//! Login mappings through the real binary: `goal amend --map-login maria=github:maria-gh`
//! shows in `status`, `--unmap-login github:maria-gh` takes it away; a malformed value is a
//! typed usage error and a login that does not read as one a typed refusal, neither changing
//! anything; someone other than the goal's owner is refused.

mod support;

use support::{Loopx, at};

const GOAL: &str = "g";

/// A goal owned by `person:owner`, actors taken at their word (so a stranger's command reaches
/// the kernel's ownership rule), made after `loopx init`.
fn goal() -> Loopx {
    let lx = Loopx::sqlite();
    lx.ok(&["init"]);
    lx.ok(&[
        "--goal",
        GOAL,
        "--as",
        "person:owner",
        "--now",
        &at(29, "10:00"),
        "goal",
        "create",
        "--objective",
        "o",
        "--agent",
        "agent-a",
        "--identity",
        "declared",
    ]);
    lx
}

fn amend(lx: &Loopx, actor: &str, flags: &[&str]) -> support::Run {
    let mut args = vec!["--json", "--goal", GOAL, "--as", actor, "goal", "amend"];
    args.extend_from_slice(flags);
    lx.run(&args)
}

fn status(lx: &Loopx) -> String {
    lx.run(&["--goal", GOAL, "status"]).stdout
}

#[test]
fn a_mapped_login_shows_in_status_and_unmapping_takes_it_away() {
    let lx = goal();
    assert!(!status(&lx).contains("github:maria-gh"), "{}", status(&lx));

    let run = amend(
        &lx,
        "person:owner",
        &["--map-login", "maria=github:maria-gh"],
    );
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let shown = status(&lx);
    assert!(shown.contains("github:maria-gh"), "{shown}");
    assert!(shown.contains("person:maria"), "{shown}");

    let run = amend(&lx, "person:owner", &["--unmap-login", "github:maria-gh"]);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let shown = status(&lx);
    assert!(!shown.contains("github:maria-gh"), "{shown}");
}

#[test]
fn a_bad_value_is_a_typed_error_that_changes_nothing() {
    let lx = goal();
    let revision = lx.revision(GOAL);

    for bad in ["maria", "maria=github", "=github:maria-gh"] {
        let run = amend(&lx, "person:owner", &["--map-login", bad]);
        assert_eq!(run.code, 2, "{bad}: {}", run.stdout);
        assert_eq!(run.json()["error"]["code"], "invalid_login", "{bad}");
    }
    let run = amend(&lx, "person:owner", &["--unmap-login", "maria-gh"]);
    assert_eq!(run.code, 2, "{}", run.stdout);
    assert_eq!(run.json()["error"]["code"], "invalid_login");

    // A value that parses but whose login does not read as one: the kernel's refusal.
    let run = amend(&lx, "person:owner", &["--map-login", "maria=github:@maria"]);
    assert_eq!(run.code, 3, "{}", run.stdout);
    assert_eq!(run.json()["error"]["code"], "login_malformed");

    assert_eq!(lx.revision(GOAL), revision, "a refused mapping wrote");
    assert!(!status(&lx).contains("maria"), "{}", status(&lx));
}

#[test]
fn someone_other_than_the_owner_is_refused() {
    let lx = goal();
    let revision = lx.revision(GOAL);
    let run = amend(
        &lx,
        "person:stranger",
        &["--map-login", "stranger=github:stranger-gh"],
    );
    assert_eq!(run.code, 3, "{}", run.stdout);
    assert_eq!(run.json()["error"]["code"], "not_goal_owner");
    assert_eq!(lx.revision(GOAL), revision, "a refused mapping wrote");
    assert!(!status(&lx).contains("stranger-gh"), "{}", status(&lx));
}
