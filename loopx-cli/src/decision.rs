//! Decisions in words, as the CLI prints them: the kernel's sentences
//! ([`loopx_kernel::words`]), the decision's kind in bold on a terminal. `--json` prints the
//! decision itself.

use loopx_kernel::Decision;
pub use loopx_kernel::words::{freshness_words, terminal_word};

use crate::output::{Output, Style};

/// The first line of a decision, its kind painted.
pub fn headline(out: &Output, decision: &Decision) -> String {
    paint_kind(out, decision, loopx_kernel::words::headline(decision))
}

/// A decision in full (see [`loopx_kernel::words::describe`]), its kind painted.
pub fn describe(out: &Output, decision: &Decision) -> String {
    paint_kind(out, decision, loopx_kernel::words::describe(decision))
}

fn paint_kind(out: &Output, decision: &Decision, text: String) -> String {
    let kind = decision.kind();
    match text.strip_prefix(kind) {
        Some(rest) => format!("{}{rest}", out.paint(Style::Bold, kind)),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use loopx_kernel::testkit::reasons::every_reason;

    use super::describe;
    use crate::output::Output;

    /// Every reason in words, as `next` prints it: one snapshot per reason.
    #[test]
    fn every_reason_reads_as_a_sentence_with_what_to_do() {
        let out = Output::new(true); // JSON mode: never colour
        for (name, decision) in every_reason() {
            let text = describe(&out, &decision);
            assert!(
                !text.contains('{'),
                "{name}: no JSON in human output:\n{text}"
            );
            assert!(text.contains("loopx "), "{name}: names a verb:\n{text}");
            insta::assert_snapshot!(name, text);
        }
    }
}
