//! Output: one JSON document with `--json`, otherwise readable text and aligned tables, in
//! colour only when standard output is a terminal and `NO_COLOR` is not set.

use std::io::{IsTerminal as _, Write as _};

use serde_json::Value;

use crate::error::CliError;

/// How this invocation prints.
#[derive(Debug, Clone)]
pub struct Output {
    /// Print exactly one JSON document.
    pub json: bool,
    colour: bool,
}

/// A text style for human output.
#[derive(Debug, Clone, Copy)]
pub enum Style {
    Bold,
    Dim,
    Good,
    Warn,
    Bad,
}

impl Style {
    fn code(self) -> &'static str {
        match self {
            Style::Bold => "1",
            Style::Dim => "2",
            Style::Good => "32",
            Style::Warn => "33",
            Style::Bad => "31",
        }
    }
}

impl Output {
    pub fn new(json: bool) -> Self {
        let no_colour = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        Output {
            json,
            colour: !json && !no_colour && std::io::stdout().is_terminal(),
        }
    }

    /// `text` in `style` when colour is on.
    pub fn paint(&self, style: Style, text: &str) -> String {
        if self.colour {
            format!("\x1b[{}m{text}\x1b[0m", style.code())
        } else {
            text.to_owned()
        }
    }

    /// Prints the JSON document (pretty, one document).
    pub fn document(value: &Value) {
        let text = serde_json::to_string_pretty(value).unwrap_or_else(|_| "null".to_owned());
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{text}");
    }

    /// Prints the JSON document when `--json`, otherwise the human text.
    pub fn emit(&self, value: &Value, human: impl FnOnce(&Output) -> String) {
        if self.json {
            Output::document(value);
        } else {
            let text = human(self);
            let mut out = std::io::stdout().lock();
            let _ = write!(out, "{text}");
            if !text.ends_with('\n') {
                let _ = writeln!(out);
            }
        }
    }

    /// Prints an error: the JSON document on stdout with `--json`, otherwise text on stderr.
    pub fn error(&self, error: &CliError) {
        if self.json {
            Output::document(&error.to_json());
        } else {
            let colour = std::io::stderr().is_terminal()
                && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
            let label = if colour {
                "\x1b[1;31merror\x1b[0m".to_owned()
            } else {
                "error".to_owned()
            };
            let mut err = std::io::stderr().lock();
            let _ = writeln!(err, "{label}[{}]: {}", error.code, error.message);
            if !error.hint.is_empty() {
                let _ = writeln!(err, "  hint: {}", error.hint);
            }
        }
    }
}

/// An aligned text table: a header row and data rows, columns padded to their widest cell.
#[derive(Debug, Default)]
pub struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new(header: &[&str]) -> Self {
        Table {
            header: header.iter().map(|h| (*h).to_owned()).collect(),
            rows: Vec::new(),
        }
    }

    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// Renders the table; the header is bold when colour is on.
    pub fn render(&self, out: &Output) -> String {
        let columns = self.header.len();
        let mut widths: Vec<usize> = self.header.iter().map(|h| h.chars().count()).collect();
        for row in &self.rows {
            for (i, cell) in row.iter().enumerate().take(columns) {
                widths[i] = widths[i].max(cell.chars().count());
            }
        }
        let line = |cells: &[String]| {
            let mut text = String::new();
            for (i, cell) in cells.iter().enumerate().take(columns) {
                if i + 1 == columns {
                    text.push_str(cell);
                } else {
                    let pad = widths[i].saturating_sub(cell.chars().count());
                    text.push_str(cell);
                    text.push_str(&" ".repeat(pad + 2));
                }
            }
            text.trim_end().to_owned()
        };
        let mut text = out.paint(Style::Bold, &line(&self.header));
        text.push('\n');
        for row in &self.rows {
            text.push_str(&line(row));
            text.push('\n');
        }
        text
    }
}

/// The display of an optional value: the value, or `-`.
pub fn or_dash(value: Option<impl ToString>) -> String {
    value.map_or_else(|| "-".to_owned(), |v| v.to_string())
}

/// A JSON value as compact text (for human output of tagged enums).
pub fn compact(value: &impl serde::Serialize) -> String {
    serde_json::to_string(value).unwrap_or_default()
}
