//! Reading a JSON body (a REST response, a webhook payload) into a type, with an error that
//! says where and what was expected and never quotes the body.
//!
//! serde's own messages quote what they found (`invalid type: string "Bearer ghp_…", expected
//! u64`), and a body can hold anything: a token echoed by a proxy, a secret in a comment. The
//! error here keeps only what the type's definition supplies — the field path, the expected
//! type or variants, the missing field's name — and the position in the body.

use std::fmt::{self, Write as _};

use serde::de::DeserializeOwned;
use serde_path_to_error::Segment;

/// Why a body did not decode. Holds no text of the body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BodyError {
    /// The field path, e.g. `head.sha` or `check_runs[0].id`; empty at the top level. A key
    /// that does not look like a field name is shown as `?`.
    pub path: String,
    /// What was wrong, in the type's terms: `an invalid value, expected u64`, ``missing field
    /// `head` ``, `not JSON`.
    pub problem: String,
    /// The line of the body where decoding stopped (1-based; 0 when unknown).
    pub line: usize,
    /// The column of the body where decoding stopped (1-based; 0 when unknown).
    pub column: usize,
}

impl fmt::Display for BodyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            write!(f, "{}", self.problem)?;
        } else {
            write!(f, "at `{}`: {}", self.path, self.problem)?;
        }
        write!(f, " (line {}, column {})", self.line, self.column)
    }
}

impl std::error::Error for BodyError {}

/// Decodes `body` as a `T`.
///
/// # Errors
/// [`BodyError`] when the body is not JSON or not of `T`'s shape; it names the field path and
/// the expected type, never a value of the body.
pub fn decode<T: DeserializeOwned>(body: &[u8]) -> Result<T, BodyError> {
    let mut input = serde_json::Deserializer::from_slice(body);
    let value = serde_path_to_error::deserialize::<_, T>(&mut input)
        .map_err(|error| body_error(shown_path(error.path()), error.inner()))?;
    input
        .end()
        .map_err(|error| body_error(String::new(), &error))?;
    Ok(value)
}

fn body_error(path: String, error: &serde_json::Error) -> BodyError {
    BodyError {
        path,
        problem: problem(error),
        line: error.line(),
        column: error.column(),
    }
}

/// The path with every key that does not look like a field name replaced by `?`: a map's keys
/// come from the body.
fn shown_path(path: &serde_path_to_error::Path) -> String {
    let mut out = String::new();
    for segment in path {
        match segment {
            Segment::Seq { index } => {
                let _ = write!(out, "[{index}]");
            }
            Segment::Map { key } | Segment::Enum { variant: key } => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(if field_like(key) { key } else { "?" });
            }
            Segment::Unknown => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push('?');
            }
        }
    }
    out
}

/// Lower-case letters, digits and `_`, at most 32 of them, a letter or `_` first: GitHub's
/// field names, and not a token or a free text.
fn field_like(key: &str) -> bool {
    !key.is_empty()
        && key.len() <= 32
        && key.starts_with(|c: char| c.is_ascii_lowercase() || c == '_')
        && key
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

/// What was wrong, from the parts of serde's message that the type supplies. Anything whose
/// message may quote the body says only that the value is invalid.
fn problem(error: &serde_json::Error) -> String {
    use serde_json::error::Category;
    match error.classify() {
        Category::Syntax => "not JSON".to_owned(),
        Category::Eof => "the body ends too early".to_owned(),
        Category::Io => "the body cannot be read".to_owned(),
        Category::Data => data_problem(&error.to_string()),
    }
}

fn data_problem(message: &str) -> String {
    // The messages of serde's own errors: the found value (quoted) comes first, the type's
    // expectation last, after the last ", expected ".
    let quoting = [
        "invalid type: ",
        "invalid value: ",
        "invalid length ",
        "unknown variant `",
        "unknown field `",
    ];
    if quoting.iter().any(|prefix| message.starts_with(prefix)) {
        let what = if message.starts_with("unknown field") {
            "an unknown field"
        } else if message.starts_with("unknown variant") {
            "an unknown variant"
        } else {
            "an invalid value"
        };
        return match message.rfind(", expected ") {
            Some(at) => {
                let expected = strip_position(&message[at + ", expected ".len()..]);
                format!("{what}, expected {expected}")
            }
            None => what.to_owned(),
        };
    }
    // Fields named by the type itself.
    for prefix in ["missing field `", "duplicate field `"] {
        if let Some(rest) = message.strip_prefix(prefix)
            && let Some((name, _)) = rest.split_once('`')
            && field_like(name)
        {
            return format!("{prefix}{name}`");
        }
    }
    // A custom message (an id or a time that did not parse) may quote what it read.
    "an invalid value".to_owned()
}

/// `serde_json` appends ` at line L column C`; the error carries both.
fn strip_position(text: &str) -> &str {
    match text.rfind(" at line ") {
        Some(cut) => &text[..cut],
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    #[allow(dead_code)]
    struct Shape {
        number: u64,
        head: Head,
        #[serde(default)]
        items: Vec<Head>,
    }

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Head {
        sha: String,
        #[serde(default)]
        state: Option<State>,
    }

    #[derive(Debug, serde::Deserialize)]
    #[serde(rename_all = "snake_case")]
    enum State {
        Open,
    }

    const SECRET: &str = "Bearer ghp_SECRET0123456789";

    fn error(body: &str) -> String {
        let error = decode::<Shape>(body.as_bytes()).unwrap_err();
        let shown = format!("{error} {error:?}");
        assert!(
            !shown.contains("SECRET") && !shown.contains("ghp_"),
            "{shown}"
        );
        error.to_string()
    }

    #[test]
    fn errors_name_the_field_and_the_expectation_never_the_value() {
        let s = SECRET;
        assert_eq!(
            error(&format!(r#"{{"number":"{s}","head":{{"sha":"x"}}}}"#)),
            "at `number`: an invalid value, expected u64 (line 1, column 39)"
        );
        assert!(
            error(&format!(r#"{{"number":1,"head":{{"sha":5,"{s}":1}}}}"#))
                .starts_with("at `head.sha`: an invalid value, expected a string")
        );
        assert!(
            error(&format!(r#"{{"number":1,"head":{{"sha":"x","{s}":1}}}}"#))
                .starts_with("at `head.?`: an unknown field, expected ")
        );
        assert!(
            error(&format!(
                r#"{{"number":1,"head":{{"sha":"x","state":"{s}"}}}}"#
            ))
            .starts_with("at `head.state`: an unknown variant, expected `open`")
        );
        assert!(
            error(r#"{"number":1,"head":{"sha":"x"},"items":[{"sha":{}}]}"#)
                .starts_with("at `items[0].sha`: an invalid value, expected a string")
        );
        assert!(error(r#"{"number":1}"#).starts_with("missing field `head`"));
        assert!(
            error(&format!(r#"{{"number":1,"head":{{"sha":"{s}"}}}} {s}"#)).starts_with("not JSON")
        );
        assert!(
            error(&format!(r#"{{"number":1,"head":{{"sha":"{s}"#))
                .contains("the body ends too early")
        );
        assert!(error(&format!("\"{s}\"")).starts_with("an invalid value, expected struct Shape"));
    }

    #[test]
    fn a_valid_body_decodes() {
        let shape: Shape = decode(br#"{"number":1,"head":{"sha":"x","state":"open"}}"#).unwrap();
        assert_eq!(shape.number, 1);
    }
}
