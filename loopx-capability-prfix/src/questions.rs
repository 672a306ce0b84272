//! A reviewer's question in a pull request becomes the agent's todo, so that it cannot be
//! dropped: a comment on the pull request, a comment on its diff, or a review left
//! `commented` or `changes_requested` with words in it, written by anyone but the pull
//! request's author (the agent's GitHub login), is a question until the author answers it.
//!
//! | asked in | answered by the author's |
//! |---|---|
//! | a comment on the pull request (`comment:` stream) | comment on the pull request after it |
//! | a comment on the diff (`review-comment:`) | reply in the same thread after it |
//! | a review's body (`review:`) | comment on the pull request, or on its diff, after it |
//!
//! A deleted question needs no answer. Comments that carry a `/loopx` command (a gate's owner
//! answering it) and loopx's own comments (which carry its hidden effect marker) are not
//! questions. "After" is GitHub's own order of the two (`updated_at`, a review's
//! `submitted_at`), read from the observations, so a restarted engine judges the same.

use loopx_kernel::facts::github::{IssueComment, Review, ReviewComment, Thread};
use loopx_kernel::facts::{Fact, FactSchema};
use loopx_kernel::ids::bounded_id;
use loopx_kernel::{GoalState, Observation, Timestamp, TodoId};

use crate::ids;

/// The hidden marker loopx's own pull-request comments carry (the outbox's read-back key).
const EFFECT_MARKER: &str = "<!-- loopx-effect:";

/// The longest first line a todo's title quotes.
const MAX_QUOTE: usize = 120;

/// One question asked in a pull request, and whether it still waits for its answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Question {
    /// The todo that carries it, one per comment or review.
    pub id: TodoId,
    /// Where it was asked, in words: `comment 1984`, `review comment 7`, `review 77`.
    pub place: String,
    /// Who asked.
    pub who: String,
    /// GitHub's `author_association` of who asked, in lower case, when GitHub said it.
    pub association: Option<String>,
    /// The first line of what they wrote.
    pub quote: String,
    /// Why it no longer waits (`None` while it does).
    pub settled: Option<&'static str>,
}

/// The id prefix of every question todo of the pull request; no other line of the
/// capability's starts with it.
pub(crate) fn line(thread: &Thread) -> String {
    ids::line(&thread.key("question:"))
}

/// When GitHub says the observed object was last written: its own order, else when it was
/// observed.
fn when(observation: &Observation) -> Timestamp {
    observation
        .order
        .map_or(observation.observed_at, |order| order.at)
}

/// Whether `body` is a question someone could answer: words, no `/loopx` command, not
/// loopx's own comment.
fn asks(body: &str) -> bool {
    !body.trim().is_empty()
        && !body.contains(EFFECT_MARKER)
        && !body
            .lines()
            .any(|line| line.trim_start().starts_with("/loopx"))
}

fn quote(body: &str) -> String {
    let line = body
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("");
    let mut quote: String = line
        .chars()
        // Outside text quoted into a question: nothing that reorders or hides what it says.
        .filter(|c| !c.is_control() && !loopx_kernel::text::reorders_or_hides(*c))
        .take(MAX_QUOTE)
        .collect();
    if line.chars().count() > MAX_QUOTE {
        quote.push('…');
    }
    quote
}

/// A comment of the pull request, read from its stream.
struct Comment {
    id: u64,
    author: String,
    association: Option<String>,
    body: String,
    deleted: bool,
    in_reply_to: Option<u64>,
    at: Timestamp,
}

fn known<T: Clone>(fact: &Fact<T>) -> Option<T> {
    fact.known().cloned()
}

fn issue_comments(state: &GoalState, thread: &Thread) -> Vec<Comment> {
    state
        .observations_with_prefix(&IssueComment::streams(thread))
        .filter_map(|o| {
            let facts = IssueComment::read(&o.facts);
            let on_this_pull = known(&facts.number) == Some(thread.number)
                && known(&facts.on_pull_request) == Some(true);
            on_this_pull.then_some(())?;
            Some(Comment {
                id: IssueComment::id_of(o.key.as_str())?,
                author: known(&facts.author)?,
                association: known(&facts.association),
                body: known(&facts.body).unwrap_or_default(),
                deleted: known(&facts.deleted) == Some(true),
                in_reply_to: None,
                at: when(o),
            })
        })
        .collect()
}

fn review_comments(state: &GoalState, thread: &Thread) -> Vec<Comment> {
    state
        .observations_with_prefix(&ReviewComment::streams(thread))
        .filter_map(|o| {
            let facts = ReviewComment::read(&o.facts);
            (known(&facts.pull) == Some(thread.number)).then_some(())?;
            Some(Comment {
                id: ReviewComment::id_of(o.key.as_str())?,
                author: known(&facts.author)?,
                association: known(&facts.association),
                body: known(&facts.body).unwrap_or_default(),
                deleted: known(&facts.deleted) == Some(true),
                in_reply_to: known(&facts.in_reply_to),
                at: when(o),
            })
        })
        .collect()
}

fn todo_id(thread: &Thread, what: &str, id: u64) -> Option<TodoId> {
    TodoId::new(bounded_id(&format!("{}/{what}-{id}", line(thread)))).ok()
}

/// Every question asked in the pull request `thread` whose author is `author`, with whether
/// it still waits for the author's answer.
pub(crate) fn questions(state: &GoalState, thread: &Thread, author: &str) -> Vec<Question> {
    let comments = issue_comments(state, thread);
    let diff = review_comments(state, thread);
    let by_author = |c: &&Comment| c.author.eq_ignore_ascii_case(author) && !c.deleted;
    let replied_after = |at: Timestamp| comments.iter().filter(by_author).any(|c| c.at > at);
    let mut out = Vec::new();
    let mut ask = |asked: Asked<'_>, deleted: bool, answered: bool| {
        let Some(id) = todo_id(thread, asked.what, asked.id) else {
            return;
        };
        let settled = if deleted {
            Some("the question was deleted")
        } else if answered {
            Some("the author answered it")
        } else {
            None
        };
        out.push(Question {
            id,
            place: format!("{} {}", asked.what.replace('-', " "), asked.id),
            who: asked.who.to_owned(),
            association: asked.association.cloned(),
            quote: quote(asked.body),
            settled,
        });
    };
    let others = |c: &&Comment| !c.author.eq_ignore_ascii_case(author);
    for c in comments.iter().filter(others) {
        if c.deleted || asks(&c.body) {
            ask(Asked::comment("comment", c), c.deleted, replied_after(c.at));
        }
    }
    for c in diff.iter().filter(others) {
        if c.deleted || asks(&c.body) {
            let thread_of = |reply: &Comment| {
                reply.in_reply_to == Some(c.id)
                    || (c.in_reply_to.is_some() && reply.in_reply_to == c.in_reply_to)
            };
            let answered = diff
                .iter()
                .filter(by_author)
                .any(|r| thread_of(r) && r.at > c.at);
            ask(Asked::comment("review-comment", c), c.deleted, answered);
        }
    }
    for o in state.observations_with_prefix(&Review::streams(thread)) {
        let facts = Review::read(&o.facts);
        let (Some(who), Some(state_name), Some(id)) = (
            known(&facts.reviewer),
            known(&facts.state),
            known(&facts.review_id),
        ) else {
            continue;
        };
        let body = known(&facts.body).unwrap_or_default();
        let asking = matches!(state_name.as_str(), "commented" | "changes_requested");
        if who.eq_ignore_ascii_case(author) || !asking || !asks(&body) {
            continue;
        }
        let at = when(o);
        let answered = replied_after(at) || diff.iter().filter(by_author).any(|r| r.at > at);
        let association = known(&facts.association);
        let asked = Asked {
            what: "review",
            id,
            who: &who,
            association: association.as_ref(),
            body: &body,
        };
        ask(asked, false, answered);
    }
    out
}

/// What was asked, where and by whom, as read from one observation.
struct Asked<'a> {
    /// `comment`, `review-comment` or `review`.
    what: &'static str,
    id: u64,
    who: &'a str,
    association: Option<&'a String>,
    body: &'a str,
}

impl<'a> Asked<'a> {
    fn comment(what: &'static str, c: &'a Comment) -> Asked<'a> {
        Asked {
            what,
            id: c.id,
            who: &c.author,
            association: c.association.as_ref(),
            body: &c.body,
        }
    }
}

/// Whether `question`'s author speaks for the repository: one of its owners, members or
/// collaborators (GitHub's `author_association`), or a login the goal's owner mapped to a
/// person. Anyone else is a stranger whose words wait for the owner.
pub(crate) fn trusted(state: &GoalState, question: &Question) -> bool {
    let member = question
        .association
        .as_deref()
        .is_some_and(|a| matches!(a, "owner" | "member" | "collaborator"));
    let mapped = state
        .logins
        .iter()
        .filter(|(provider, _)| provider.as_str() == "github")
        .any(|(_, logins)| logins.contains_key(&question.who.to_ascii_lowercase()));
    member || mapped
}

#[cfg(test)]
mod tests {
    use super::{asks, quote};

    #[test]
    fn commands_and_loopx_comments_are_not_questions() {
        assert!(asks("Why `error_code` and not `code`?"));
        assert!(!asks("/loopx answer naming yes"));
        assert!(!asks(
            "Gate `naming` waits.\n<!-- loopx-effect:abc epoch:1 -->"
        ));
        assert!(!asks("  \n"));
    }

    #[test]
    fn a_question_is_quoted_by_its_first_line() {
        assert_eq!(quote("\n  Why error_code?  \nmore"), "Why error_code?");
        assert_eq!(quote(&"x".repeat(130)).chars().count(), 121);
    }
}
