//! The outbox through the command line: an operator sees a pending effect in `status` and
//! `effect list`, `next` sends its holder to repair once its lease is gone, and `effect
//! resolve` records it — refused (exit 3, a typed code) for an agent without a grant, accepted
//! from the goal owner.

mod support;

use std::collections::BTreeMap;

use loopx_kernel::{Actor, Command, EffectIntent, GoalId, StoreExt as _, Timestamp};
use loopx_store::SqliteStore;
use support::{Loopx, at};

const GOAL: &str = "cli-json";

fn args<'a>(who: &'a str, now: &'a str, rest: &[&'a str]) -> Vec<&'a str> {
    let mut all = vec!["--goal", GOAL, "--as", who, "--now", now];
    all.extend_from_slice(rest);
    all
}

/// A goal whose todo `edit` agent-a holds (epoch 1) with turn `t1` begun, and an effect of
/// that turn intended (by the engine's write path, as an engine does).
fn pending() -> Loopx {
    let lx = Loopx::sqlite();
    lx.ok(&["init"]);
    let ten = at(29, "10:00");
    lx.ok(&args(
        "person:maintainer",
        &ten,
        &[
            "goal",
            "create",
            "--objective",
            "add --format json",
            "--agent",
            "agent-a",
            "--agent",
            "agent-b",
        ],
    ));
    lx.ok(&args(
        "person:maintainer",
        &ten,
        &[
            "todo",
            "add",
            "--id",
            "edit",
            "--title",
            "change the output",
        ],
    ));
    lx.ok(&args("agent:agent-a", &ten, &["claim", "--todo", "edit"]));
    lx.ok(&args(
        "agent:agent-a",
        &ten,
        &["begin", "--todo", "edit", "--epoch", "1", "--turn", "t1"],
    ));
    let params: BTreeMap<String, String> = [("repo", "acme/cli"), ("number", "12")]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
    let effect = EffectIntent::new(
        "t1-e1-x0".parse().expect("id"),
        "github.comment",
        "acme/cli#12",
        "cli-json/t1/0",
        params,
    );
    let command = Command::IntendEffect {
        todo: "edit".parse().expect("id"),
        epoch: 1,
        effect,
    };
    let store = SqliteStore::open(&lx.store).expect("the store");
    let goal: GoalId = GOAL.parse().expect("id");
    let actor = Actor::Agent("agent-a".parse().expect("id"));
    let now = Timestamp::parse(&ten).expect("time");
    // Signed with the agent's key from the store's key directory, as its engine would.
    let key = loopx_provider::keys::KeyDir::new(format!("{}.keys", lx.store))
        .get(&actor)
        .expect("the key directory reads")
        .expect("the agent's key");
    tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a runtime")
        .block_on(store.goal(&goal).signed_by(&key.secret).submit_operation(
            &actor,
            now,
            &command,
            &"intend".parse().expect("id"),
        ))
        .expect("the intent commits");
    lx
}

#[test]
fn an_operator_sees_a_pending_effect_and_resolves_it_once_its_lease_is_gone() {
    let lx = pending();
    let ten = at(29, "10:01");
    let listed = lx.ok(&args("person:maintainer", &ten, &["effect", "list"]));
    assert_eq!(listed["pending"][0]["effect"], "t1-e1-x0");
    assert_eq!(listed["pending"][0]["live"], true);
    let status = lx.ok(&args("person:maintainer", &ten, &["status"]));
    assert_eq!(
        status["status"]["pending_effects"][0]["target"],
        "acme/cli#12"
    );
    let words = lx.run(&args("person:maintainer", &ten, &["status"]));
    assert!(words.stdout.contains("PENDING EFFECT"), "{}", words.stdout);

    // While the lease is live only its holder may record it.
    let (code, refused) = lx.json(&args(
        "person:maintainer",
        &ten,
        &[
            "effect",
            "resolve",
            "--effect",
            "t1-e1-x0",
            "--outcome",
            "absent",
        ],
    ));
    assert_eq!(code, 3, "{refused}");
    assert_eq!(refused["error"]["code"], "not_lease_holder");

    // The lease expires: the holder is sent to repair, with the verb that records it.
    let later = at(29, "11:00");
    let next = lx.ok(&args("agent:agent-a", &later, &["next"]));
    assert_eq!(next["decision"]["kind"], "repair", "{next}");
    assert_eq!(next["decision"]["issue"]["issue"], "effect_unresolved");
    assert_eq!(next["decision"]["issue"]["fix"]["verb"], "effect resolve");
    let listed = lx.ok(&args("person:maintainer", &later, &["effect", "list"]));
    assert_eq!(listed["pending"][0]["live"], false);

    // Another agent without a grant may not; the owner may, once.
    let (code, refused) = lx.json(&args(
        "agent:agent-b",
        &later,
        &[
            "effect",
            "resolve",
            "--effect",
            "t1-e1-x0",
            "--outcome",
            "absent",
        ],
    ));
    assert_eq!(code, 3, "{refused}");
    assert_eq!(refused["error"]["code"], "grant_required");
    let resolved = lx.ok(&args(
        "person:maintainer",
        &later,
        &[
            "effect",
            "resolve",
            "--effect",
            "t1-e1-x0",
            "--outcome",
            "absent",
            "--note",
            "no such comment on acme/cli#12",
        ],
    ));
    assert_eq!(resolved["pending"], false);
    let (code, again) = lx.json(&args(
        "person:maintainer",
        &later,
        &[
            "effect",
            "resolve",
            "--effect",
            "t1-e1-x0",
            "--outcome",
            "performed",
        ],
    ));
    assert_eq!(code, 3, "{again}");
    assert_eq!(again["error"]["code"], "no_visible_change");
    let status = lx.ok(&args("person:maintainer", &later, &["status"]));
    assert!(status["status"].get("pending_effects").is_none());
}
