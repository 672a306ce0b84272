//! The comment command parser as a property: whatever a comment holds, `/loopx` commands are
//! read without a panic; a command inside code (a fenced block, an indented line) never counts;
//! a command outside code is read with every line of its text, normalised as outside text is.
//!
//! 512 cases by default; run longer with `PROPTEST_CASES=20000 cargo test -p loopx-provider
//! --release --test fuzz_commands`.

use loopx_kernel::GateAnswer;
use loopx_provider::github::commands::parse;
use proptest::prelude::*;

fn config(default_cases: u32) -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default_cases);
    ProptestConfig {
        cases,
        ..ProptestConfig::default()
    }
}

/// Lines a comment is made of: prose, commands (well formed or not), fences, indented code,
/// control characters, CRLF endings.
fn line() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-zA-Z ,.?`]{0,40}",
        "/loopx (answer|reject|approve) [a-z0-9-]{0,12} [a-zA-Z ]{0,20}",
        Just("```".to_owned()),
        Just("~~~".to_owned()),
        Just("````rust".to_owned()),
        "    /loopx answer g[0-9] yes",
        "\t/loopx reject g[0-9] no",
        "[\\x00-\\x1f\\x7f\\u{202e}\\u{200b}]{1,4}",
        Just("\r".to_owned()),
        any::<String>(),
    ]
}

fn body() -> impl Strategy<Value = String> {
    prop::collection::vec(line(), 0..24).prop_map(|lines| lines.join("\n"))
}

proptest! {
    #![proptest_config(config(512))]

    /// Any body is read without a panic, and what it reads is outside text made safe: no
    /// carriage return, no terminal escape, no character that reorders what it says.
    #[test]
    fn any_comment_is_read_and_its_answers_are_safe_text(body in body()) {
        let read = parse(&body);
        for (_, answer) in &read.answers {
            let text = match answer {
                GateAnswer::Resolve { answer } => answer,
                GateAnswer::Reject { reason } => reason,
            };
            prop_assert!(!text.contains('\r') && !text.contains('\u{1b}'), "{text:?}");
            prop_assert!(
                !text.chars().any(loopx_kernel::text::reorders_or_hides),
                "{text:?}"
            );
        }
    }

    /// A command shown in a fenced block is code, never a command, whatever surrounds the
    /// block (a fence is closed only by its own kind of mark).
    #[test]
    fn a_command_inside_a_fence_never_counts(
        before in "[a-zA-Z ]{0,30}",
        inside in prop::collection::vec("/loopx (answer|reject) g[0-9] [a-z ]{1,10}", 1..4),
        fence in prop_oneof![Just("```"), Just("~~~")],
    ) {
        let body = format!("{before}\n{fence}\n{}\n{fence}\nthanks", inside.join("\n"));
        prop_assert!(parse(&body).answers.is_empty(), "{body:?}");
    }

    /// A command outside code answers its gate with every line of its text, line endings as
    /// LF however the browser sent them.
    #[test]
    fn a_command_outside_code_is_read_whole(
        gate in "g[a-z0-9]{0,8}",
        first in "[a-zA-Z][a-zA-Z ]{0,20}[a-zA-Z]",
        more in prop::collection::vec("[a-zA-Z][a-zA-Z ]{0,20}[a-zA-Z]", 0..3),
        crlf in any::<bool>(),
    ) {
        let newline = if crlf { "\r\n" } else { "\n" };
        let text: Vec<String> = std::iter::once(first).chain(more).collect();
        let body = format!("Looked at it.{newline}/loopx answer {gate} {}", text.join(newline));
        let read = parse(&body);
        prop_assert_eq!(read.answers.len(), 1, "{:?}", body);
        let (named, answer) = &read.answers[0];
        prop_assert_eq!(named.as_str(), gate.as_str());
        prop_assert_eq!(
            answer,
            &GateAnswer::Resolve { answer: text.join("\n") }
        );
    }
}
