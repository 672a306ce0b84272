//! The board end to end in headless Chromium: `tests/browser/board.mjs`, driven by Playwright
//! (`playwright-core`, pinned in `tests/browser/package.json`), against the board of the seed
//! story's store served on loopback. The script opens the board at the story's three moments,
//! answers the gate from the inbox as the maintainer and sees the agent's decision change live,
//! checks that a person who does not own the gate gets no form and that a forged post is
//! refused, and saves a screenshot of each page (into `docs/`, shown in the README, with
//! `LOOPX_SCREENSHOTS=docs`).
//!
//! It needs `node` and Chromium (`CHROMIUM`, else `/usr/bin/chromium`): `.ci/run` installs
//! Debian's `chromium` and `npm ci`s the script's folder; without `node_modules` this test runs
//! `npm ci` itself. Without node or Chromium it fails, saying which is missing.

#[allow(dead_code, reason = "each test tells part of the story")]
#[path = "support/story.rs"]
mod story;
#[allow(dead_code, reason = "the shared support serves several tests")]
mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};

use axum::http::StatusCode;
use axum::routing::post;
use loopx_server::Service;
use story::{MAINTAINER_TOKEN, REVIEWER_TOKEN, Story};

fn browser_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join("browser")
}

fn chromium() -> PathBuf {
    let path = std::env::var_os("CHROMIUM")
        .filter(|p| !p.is_empty())
        .map_or_else(|| PathBuf::from("/usr/bin/chromium"), PathBuf::from);
    assert!(
        path.exists(),
        "no Chromium at {}: install Debian's `chromium` (apt-get install -y chromium) or set CHROMIUM",
        path.display()
    );
    path
}

/// `npm ci` in the script's folder unless its pinned packages are already installed.
fn installed() {
    let dir = browser_dir();
    if dir.join("node_modules").join("playwright-core").exists() {
        return;
    }
    let status = Command::new("npm")
        .args(["ci", "--no-audit", "--no-fund"])
        .current_dir(&dir)
        .status()
        .expect("npm runs (the browser test needs node and npm)");
    assert!(status.success(), "npm ci in {} failed", dir.display());
}

/// The story's board, with `POST /story/next` moving the story on: to stale evidence first,
/// then (once the maintainer answered) to the accepted goal.
async fn serve(story: Arc<Story>) -> String {
    let clock: Arc<dyn loopx_kernel::seams::Clock> = story.clock.clone();
    let step = Arc::new(Mutex::new(0u32));
    let story_for_route = Arc::clone(&story);
    let next = post(move || {
        let (story, step) = (Arc::clone(&story_for_route), Arc::clone(&step));
        async move {
            let current = {
                let mut step = step.lock().expect("the step");
                *step += 1;
                *step
            };
            match current {
                1 => story.to_stale().await,
                2 => story.finish().await,
                _ => return StatusCode::CONFLICT,
            }
            StatusCode::NO_CONTENT
        }
    });
    let router = Service::new(story.store.clone(), clock.clone())
        .mount(loopx_server::board::router(
            story.store.clone(),
            clock,
            story.tokens(),
            &loopx_server::Site::default(),
        ))
        .mount(axum::Router::new().route("/story/next", next))
        .router();
    support::on_loopback(router).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_board_in_chromium_follows_the_story_and_answers_the_gate() {
    let chromium = chromium();
    installed();
    let story = Arc::new(Story::gate_open().await);
    let base = serve(Arc::clone(&story)).await;
    // The committed screenshots are made with LOOPX_SCREENSHOTS=docs; any other run keeps its own.
    let shots = if std::env::var_os("LOOPX_SCREENSHOTS").is_some_and(|v| v == "docs") {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("..")
            .join("docs")
    } else {
        Path::new(env!("CARGO_TARGET_TMPDIR")).join("board-screenshots")
    };
    std::fs::create_dir_all(&shots).expect("the screenshots' folder");
    let mut node = Command::new("node");
    node.arg(browser_dir().join("board.mjs"))
        .env("BOARD", &base)
        .env("CHROMIUM", &chromium)
        .env("SHOTS", &shots)
        .env("MAINTAINER_TOKEN", MAINTAINER_TOKEN)
        .env("REVIEWER_TOKEN", REVIEWER_TOKEN);
    // The script runs while this runtime's other worker serves the board it drives.
    let output = tokio::task::spawn_blocking(move || node.output())
        .await
        .expect("the script's thread")
        .expect("node runs (the browser test needs node)");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "the browser script failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report: serde_json::Value = serde_json::from_str(stdout.trim()).expect("one JSON line");
    let passed = report["passed"].as_array().expect("the checks that passed");
    assert_eq!(passed.len(), 16, "{passed:?}");
    for name in [
        "inbox: no form for someone else's gate",
        "inbox: a forged post is refused",
        "goal: the waiting agent's decision changed, live",
        "goal: the timeline's newest commit with its actor, command and receipt",
        "goals: accepted",
    ] {
        assert!(
            passed.iter().any(|p| p == name),
            "{name} not checked: {passed:?}"
        );
    }
    let state = story.state().await;
    let accepted = loopx_kernel::terminal(&state, state.last_commit());
    assert_eq!(
        accepted,
        Some(loopx_kernel::TerminalOutcome::Accepted),
        "the story ended accepted"
    );
    for shot in [
        "board-goals",
        "board-goal-stale",
        "board-inbox",
        "board-goals-accepted",
        "board-goal-accepted",
    ] {
        assert!(
            shots.join(format!("{shot}.png")).exists(),
            "{shot}.png saved"
        );
    }
}
