//! A capability's authority over the todos it created: it may supersede, defer, block,
//! unblock and reassign them even when they are assigned to an agent, as long as no live lease
//! holds them. The refusals (another capability's todo, a live lease, the owner's todo) are in
//! the refusal table.

mod world;

use loopx_kernel::{Command, Duration, NewTodo, ResumeCondition};
use world::{TodoExt, World, capability, tid, todo, ts};

fn planned_for_a(w: &mut World) {
    w.run(
        &capability(),
        Command::AddTodo {
            todo: todo("edit", "change the output layer").assigned("a"),
        },
    );
}

#[test]
fn a_capability_changes_its_own_assigned_todo() {
    let mut w = World::new();
    planned_for_a(&mut w);
    let cap = capability();
    w.run(
        &cap,
        Command::Reassign {
            todo: tid("edit"),
            to: Some(world::agent("b")),
            grant_reason: None,
        },
    );
    w.run(
        &cap,
        Command::Defer {
            todo: tid("edit"),
            until: ResumeCondition::At { at: ts("11:00") },
            grant_reason: None,
        },
    );
    w.run(
        &cap,
        Command::Unblock {
            todo: tid("edit"),
            grant_reason: None,
        },
    );
    w.run(
        &cap,
        Command::Block {
            todo: tid("edit"),
            reason: "waits on the schema".into(),
            grant_reason: None,
        },
    );
    let successor: NewTodo = todo("edit-2", "change the output layer again").assigned("b");
    let events = w.run(
        &cap,
        Command::Supersede {
            todo: tid("edit"),
            reason: "the schema changed".into(),
            replacement: Some(successor),
            grant_reason: None,
        },
    );
    assert_eq!(events.len(), 2);
    // The successor is the capability's too, so it may retire it in turn.
    w.run(
        &cap,
        Command::Supersede {
            todo: tid("edit-2"),
            reason: "no longer needed".into(),
            replacement: None,
            grant_reason: None,
        },
    );
}

#[test]
fn a_lapsed_lease_gives_the_todo_back_to_its_capability() {
    let mut w = World::new();
    planned_for_a(&mut w);
    w.claim_for("a", "edit", Some(Duration::minutes(5)));
    w.at("10:30");
    w.run(
        &capability(),
        Command::Supersede {
            todo: tid("edit"),
            reason: "the pull request was closed".into(),
            replacement: None,
            grant_reason: None,
        },
    );
    assert!(
        w.goal
            .todos
            .get(&tid("edit"))
            .is_some_and(|t| t.status.is_closed())
    );
}
