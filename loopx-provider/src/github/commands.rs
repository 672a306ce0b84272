//! `/loopx` commands written in a pull request: a gate's owner answers it where the question
//! was delivered, with a line of its own in a comment or a review.
//!
//! ```text
//! /loopx answer <gate> <text…>     resolves the gate with the rest of the line and the lines
//!                                  that follow it, up to the next `/loopx` line
//! /loopx reject <gate> <reason…>   rejects it, the same way
//! ```
//!
//! Inside a fenced code block (closed only by a fence of its own mark, as Markdown reads it)
//! and on a line indented as code, no line is a command. An answer's text is outside text:
//! recorded with its controls and hiding characters neutralised
//! ([`crate::fact::outside_text`]).
//!
//! Parsing is strict and never fails a delivery: a line that starts with `/loopx` but is not
//! one of these (an unknown sub-command, a gate id that does not read as one, no text) is
//! [`Ignored`] with its reason, and every other line is prose. A quoted line (`> /loopx …`)
//! is prose too, so quoting someone's command does not repeat it. Who may answer is not
//! decided here: the provider relays the command with the login that wrote it
//! ([`RelayedAnswer`]), and the kernel accepts it only from the login the goal's owner mapped
//! to the gate's owner.

use loopx_kernel::{GateAnswer, GateId};

/// The command word a line must start with.
pub const PREFIX: &str = "/loopx";

/// An answer to a gate written in a pull request, to relay to the goals that follow it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelayedAnswer {
    /// The gate it names.
    pub gate: GateId,
    /// Resolve with the text, or reject with the reason.
    pub answer: GateAnswer,
    /// The login that wrote it, as the delivery names it.
    pub login: String,
    /// The comment's or review's id, e.g. `comment:1984` or `review:77`.
    pub message: String,
    /// When the comment was written or the review submitted, as GitHub says (`None` when it
    /// did not): a command answers only a gate that was open by then.
    pub written_at: Option<loopx_kernel::Timestamp>,
}

/// A `/loopx` line that is not a command, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ignored {
    /// Why it was not read as a command, naming the commands that exist.
    pub reason: String,
}

/// What the `/loopx` lines of one message came to.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Commands {
    /// The commands read, in order.
    pub answers: Vec<(GateId, GateAnswer)>,
    /// The `/loopx` lines that are not commands.
    pub ignored: Vec<Ignored>,
}

/// How to write a command, for the reasons of ignored lines.
const USAGE: &str = "write `/loopx answer <gate> <text>` or `/loopx reject <gate> <reason>`";

/// Reads the `/loopx` commands of a comment's or review's body. A command's text runs from its
/// line to the next `/loopx` line or the end of the body, every line of it (trailing blank
/// lines dropped). Lines inside a fenced code block (```` ``` ```` or `~~~`) or indented as
/// code are never commands: code that shows a command does not issue it.
pub fn parse(body: &str) -> Commands {
    let mut commands = Commands::default();
    let mut fence: Option<Fence> = None;
    // Whether the last command read takes the lines that follow as more of its text.
    let mut continues = false;
    for line in body.lines() {
        let parsed = outside_code(line, &mut fence).and_then(parse_line);
        match parsed {
            Some(Ok(answer)) => {
                commands.answers.push(answer);
                continues = true;
            }
            Some(Err(reason)) => {
                commands.ignored.push(Ignored { reason });
                continues = false;
            }
            None if continues => {
                if let Some((_, answer)) = commands.answers.last_mut() {
                    let text = answer_text(answer);
                    text.push('\n');
                    text.push_str(line.trim_end());
                }
            }
            None => {}
        }
    }
    for (_, answer) in &mut commands.answers {
        let text = answer_text(answer);
        // Outside text: what a browser typed is recorded with its controls neutralised.
        *text = crate::fact::outside_text(text.trim_end());
    }
    commands
}

/// The line, trimmed, when it is prose and so may be a command; `None` when it is code: inside
/// a fence (which it may close), opening one, or indented as code.
fn outside_code<'l>(line: &'l str, fence: &mut Option<Fence>) -> Option<&'l str> {
    if let Some(open) = *fence {
        if open.closed_by(line) {
            *fence = None;
        }
        return None;
    }
    *fence = Fence::opened_by(line);
    (fence.is_none() && !indented_code(line)).then(|| line.trim())
}

/// A line indented four spaces or a tab or more: Markdown shows it as code (or as the rest of
/// a paragraph), never as a line of its own.
fn indented_code(line: &str) -> bool {
    line.starts_with('\t') || line.starts_with("    ")
}

/// An open fenced code block, as Markdown (`CommonMark`) reads one: a run of at least three
/// backticks or tildes, indented less than four spaces, closed only by a run of the same
/// character at least as long with nothing after it. A fence of the other character inside is
/// part of the code.
#[derive(Debug, Clone, Copy)]
struct Fence {
    mark: char,
    length: usize,
}

impl Fence {
    fn opened_by(line: &str) -> Option<Fence> {
        let text = Fence::unindented(line)?;
        let mark = text.chars().next().filter(|c| matches!(c, '`' | '~'))?;
        let length = text.chars().take_while(|c| *c == mark).count();
        // A backtick fence's info string holds no backtick (it would be inline code).
        let info_ok = mark == '~' || !text[length..].contains('`');
        (length >= 3 && info_ok).then_some(Fence { mark, length })
    }

    fn closed_by(self, line: &str) -> bool {
        Fence::unindented(line).is_some_and(|text| {
            let text = text.trim_end();
            text.chars().all(|c| c == self.mark) && text.chars().count() >= self.length
        })
    }

    /// The line without up to three spaces of indentation; `None` when it is indented more.
    fn unindented(line: &str) -> Option<&str> {
        let text = line.trim_start_matches(' ');
        (line.len() - text.len() < 4).then_some(text)
    }
}

/// The words of an answer or a rejection.
fn answer_text(answer: &mut GateAnswer) -> &mut String {
    match answer {
        GateAnswer::Resolve { answer } => answer,
        GateAnswer::Reject { reason } => reason,
    }
}

/// `None` for prose; a command, or why a `/loopx` line is not one.
fn parse_line(line: &str) -> Option<Result<(GateId, GateAnswer), String>> {
    let rest = line.strip_prefix(PREFIX)?;
    if !(rest.is_empty() || rest.starts_with(char::is_whitespace)) {
        return None; // `/loopxyz` is another word
    }
    let (verb, rest) = split_word(rest.trim_start());
    let (gate, text) = split_word(rest.trim_start());
    let text = text.trim();
    Some(match verb {
        "answer" | "reject" if gate.is_empty() => {
            Err(format!("`/loopx {verb}` names no gate; {USAGE}"))
        }
        "answer" | "reject" => match GateId::new(gate) {
            Err(_) => Err(format!("`{}` is not a gate id; {USAGE}", clip(gate))),
            Ok(_) if text.is_empty() => {
                Err(format!("`/loopx {verb} {gate}` says nothing; {USAGE}"))
            }
            Ok(gate) if verb == "answer" => Ok((
                gate,
                GateAnswer::Resolve {
                    answer: text.to_owned(),
                },
            )),
            Ok(gate) => Ok((
                gate,
                GateAnswer::Reject {
                    reason: text.to_owned(),
                },
            )),
        },
        "" => Err(format!("`/loopx` alone is not a command; {USAGE}")),
        other => Err(format!(
            "`/loopx {}` is not a command; {USAGE}",
            clip(other)
        )),
    })
}

/// The first word of `text` and what follows it.
fn split_word(text: &str) -> (&str, &str) {
    text.split_once(char::is_whitespace).unwrap_or((text, ""))
}

/// A word of the payload, cut short for a reason (never the whole text of a comment).
fn clip(word: &str) -> String {
    word.chars().take(32).filter(|c| !c.is_control()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolve(text: &str) -> GateAnswer {
        GateAnswer::Resolve {
            answer: text.into(),
        }
    }

    #[test]
    fn answers_and_rejections_are_read_line_by_line() {
        let commands = parse(
            "Thanks!\n/loopx answer naming error_code is fine\n  /loopx reject yaml not now  \n",
        );
        assert_eq!(
            commands.answers,
            vec![
                (
                    GateId::new("naming").unwrap(),
                    resolve("error_code is fine")
                ),
                (
                    GateId::new("yaml").unwrap(),
                    GateAnswer::Reject {
                        reason: "not now".into()
                    }
                ),
            ]
        );
        assert!(commands.ignored.is_empty());
    }

    #[test]
    fn prose_and_quotes_are_not_commands() {
        let commands = parse("> /loopx answer naming yes\nuse `/loopx answer naming yes`\n/loopxy");
        assert_eq!(commands, Commands::default());
    }

    #[test]
    fn a_line_that_is_not_a_command_is_ignored_with_its_reason() {
        let commands = parse(
            "/loopx approve naming\n/loopx answer\n/loopx answer naming\n/loopx reject ../x no\n/loopx",
        );
        assert!(commands.answers.is_empty());
        let reasons: Vec<&str> = commands.ignored.iter().map(|i| i.reason.as_str()).collect();
        assert_eq!(reasons.len(), 5, "{reasons:?}");
        assert!(
            reasons[0].contains("`/loopx approve` is not a command"),
            "{reasons:?}"
        );
        assert!(reasons[1].contains("names no gate"), "{reasons:?}");
        assert!(reasons[2].contains("says nothing"), "{reasons:?}");
        assert!(reasons[3].contains("is not a gate id"), "{reasons:?}");
        assert!(
            reasons
                .iter()
                .all(|r| r.contains("/loopx answer <gate> <text>"))
        );
    }

    #[test]
    fn an_answer_keeps_every_line_up_to_the_next_command() {
        // As a browser submits it: CRLF line endings.
        let commands = parse(
            "/loopx answer naming error_code is fine\r\nrename `message` to `detail`\r\n\r\n- and keep `code`\r\n\r\n/loopx reject yaml not now\r\n",
        );
        assert_eq!(
            commands.answers,
            vec![
                (
                    GateId::new("naming").unwrap(),
                    resolve(
                        "error_code is fine\nrename `message` to `detail`\n\n- and keep `code`"
                    )
                ),
                (
                    GateId::new("yaml").unwrap(),
                    GateAnswer::Reject {
                        reason: "not now".into()
                    }
                ),
            ]
        );
    }

    #[test]
    fn a_fence_closes_only_with_its_own_mark_so_a_command_inside_stays_code() {
        let commands = parse(
            "~~~\n```\n/loopx reject naming no\n```\n~~~\n````md\n```\n/loopx reject naming no\n````\n",
        );
        assert_eq!(commands, Commands::default());
    }

    #[test]
    fn an_indented_code_line_is_not_a_command() {
        let commands =
            parse("Example:\n\n    /loopx reject naming no\n\t/loopx answer naming yes\n");
        assert_eq!(commands, Commands::default());
    }

    #[test]
    fn an_answer_is_outside_text_with_its_hiding_characters_neutralised() {
        let commands = parse("/loopx answer naming yes\u{202e} and \u{200b}no\u{1b}[31m");
        assert_eq!(
            commands.answers,
            vec![(
                GateId::new("naming").unwrap(),
                resolve("yes\u{fffd} and \u{fffd}no\u{241b}[31m")
            )]
        );
    }

    #[test]
    fn a_command_inside_a_code_fence_is_not_a_command() {
        let commands = parse(
            "To answer, write:\n```\n/loopx reject naming no\n```\n~~~text\n/loopx answer naming yes\n~~~\n",
        );
        assert_eq!(commands, Commands::default());
        // A fence after an answer is part of its text, and ends nothing.
        let commands = parse("/loopx answer naming yes, as in\n```\n/loopx answer other x\n```");
        assert_eq!(
            commands.answers,
            vec![(
                GateId::new("naming").unwrap(),
                resolve("yes, as in\n```\n/loopx answer other x\n```")
            )]
        );
    }
}
