//! Whether a runtime will actually run loopx's hooks, read from the runtime's own
//! configuration files. A hook written is not a hook run: Codex loads a project's hooks only in
//! a project a person trusted, and runs each hook only once a person trusted its exact
//! definition (a hash kept in its `config.toml`), skipping it without a word otherwise. loopx
//! never grants that trust; it says what is missing and how the person grants it.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use loopx_provider::files;
use serde_json::{Map, Value, json};
use sha2::{Digest as _, Sha256};
use toml_edit::{Document, Item, TableLike};

use super::{Runtime, is_ours};
use crate::error::CliError;

/// Every `source` each runtime sends its `SessionStart` hook with.
pub(super) fn session_sources(runtime: Runtime) -> &'static [&'static str] {
    match runtime {
        Runtime::Claude => &["startup", "resume", "clear", "compact"],
        Runtime::Codex => &["startup", "resume", "clear", "compact", "fork"],
    }
}

/// What `hooks status` finds for one runtime's hook file.
#[derive(Debug)]
pub(super) struct Report {
    runtime: Runtime,
    path: PathBuf,
    hooks: Vec<Value>,
    /// What stops the runtime from running loopx's hooks, each with how to fix it.
    pub(super) needs: Vec<String>,
    /// What does not stop them but should change.
    pub(super) notes: Vec<String>,
}

impl Report {
    /// Whether the runtime will run both of loopx's hooks.
    pub(super) fn runs(&self) -> bool {
        self.needs.is_empty()
    }

    pub(super) fn to_json(&self) -> Value {
        json!({
            "runtime": runtime_name(self.runtime),
            "path": self.path.display().to_string(),
            "runs": self.runs(),
            "hooks": self.hooks,
            "needs": self.needs,
            "notes": self.notes,
        })
    }

    pub(super) fn to_text(&self) -> String {
        let name = runtime_name(self.runtime);
        let mut text = if self.runs() {
            format!("{name}: runs loopx's hooks ({})\n", self.path.display())
        } else {
            format!(
                "{name}: does NOT run loopx's hooks ({})\n",
                self.path.display()
            )
        };
        for line in self.needs.iter().chain(&self.notes) {
            let _ = writeln!(text, "  - {line}");
        }
        text
    }
}

pub(super) fn runtime_name(runtime: Runtime) -> &'static str {
    match runtime {
        Runtime::Claude => "claude",
        Runtime::Codex => "codex",
    }
}

/// One of loopx's handlers found in a hook file: its event, the indexes of its matcher group
/// and of itself in that group, the group's matcher and the handler.
struct Found<'a> {
    event: &'static str,
    group: usize,
    index: usize,
    matcher: Option<&'a str>,
    handler: &'a Map<String, Value>,
}

/// The report for `config`, the hook file at `path` (as it is, or as an install would write
/// it); `project` is the project directory for a project's file, `None` for the user's.
pub(super) fn report(
    runtime: Runtime,
    path: &Path,
    config: &Map<String, Value>,
    project: Option<&Path>,
) -> Result<Report, CliError> {
    let mut report = Report {
        runtime,
        path: path.to_path_buf(),
        hooks: Vec::new(),
        needs: Vec::new(),
        notes: Vec::new(),
    };
    let found = ours(config);
    for event in ["SessionStart", "Stop"] {
        if !found.iter().any(|f| f.event == event) {
            report.needs.push(format!(
                "loopx's {event} hook is not in {}: install it (`loopx --as agent:NAME hooks install {}`)",
                path.display(),
                runtime_name(runtime)
            ));
        }
    }
    for start in found.iter().filter(|f| f.event == "SessionStart") {
        let missed = missed_sources(runtime, start.matcher);
        if !missed.is_empty() {
            report.needs.push(format!(
                "the SessionStart matcher `{}` misses {}: install again for one that covers every session start",
                start.matcher.unwrap_or_default(),
                missed.join(", ")
            ));
        }
    }
    match runtime {
        Runtime::Claude => claude(config, path, &found, &mut report),
        Runtime::Codex => codex(path, project, &found, &mut report)?,
    }
    Ok(report)
}

/// loopx's handlers in a hook file, in Codex's order (events, groups, handlers).
fn ours(config: &Map<String, Value>) -> Vec<Found<'_>> {
    let mut found = Vec::new();
    for event in ["SessionStart", "Stop"] {
        let groups = config
            .get("hooks")
            .and_then(|h| h.get(event))
            .and_then(Value::as_array);
        for (group, entry) in groups.into_iter().flatten().enumerate() {
            let handlers = entry.get("hooks").and_then(Value::as_array);
            for (index, handler) in handlers.into_iter().flatten().enumerate() {
                if let (true, Some(handler)) = (is_ours(handler), handler.as_object()) {
                    found.push(Found {
                        event,
                        group,
                        index,
                        matcher: entry.get("matcher").and_then(Value::as_str),
                        handler,
                    });
                }
            }
        }
    }
    found
}

/// The session sources a `SessionStart` matcher lets through none of: an absent, empty or `*`
/// matcher matches all; otherwise its `|`-separated names are compared.
fn missed_sources(runtime: Runtime, matcher: Option<&str>) -> Vec<&'static str> {
    let Some(matcher) = matcher.filter(|m| !m.is_empty() && *m != "*") else {
        return Vec::new();
    };
    let names: Vec<&str> = matcher.split('|').collect();
    session_sources(runtime)
        .iter()
        .copied()
        .filter(|source| !names.contains(source))
        .collect()
}

/// Claude Code runs the hooks of its settings files unless `disableAllHooks` is set.
fn claude(config: &Map<String, Value>, path: &Path, found: &[Found<'_>], report: &mut Report) {
    for f in found {
        report.hooks.push(json!({ "event": f.event }));
    }
    if config.get("disableAllHooks") == Some(&Value::Bool(true)) {
        report.needs.push(format!(
            "`disableAllHooks` is true in {}: remove it",
            path.display()
        ));
    }
    report.notes.push(
        "Claude Code reads its hooks when a session starts: a session already running keeps the ones it read."
            .to_owned(),
    );
}

/// Codex: its hooks feature, the project's trust and each hook's trust, from
/// `$CODEX_HOME/config.toml` (`~/.codex/config.toml`).
fn codex(
    path: &Path,
    project: Option<&Path>,
    found: &[Found<'_>],
    report: &mut Report,
) -> Result<(), CliError> {
    let home = codex_home()?;
    let config_file = home.join("config.toml");
    let text = read_toml(&config_file)?;
    let doc = Document::parse(text.clone()).map_err(|error| {
        CliError::input(
            "codex_config_malformed",
            format!("{} is not valid TOML: {error}", config_file.display()),
            "fix the file; Codex refuses it too",
        )
    })?;
    let root = doc.as_table();
    features(root, &config_file, report);
    if let Some(project) = project {
        project_trust(root, project, &config_file, report);
    }
    hook_trust(root, path, found, &config_file, report);
    Ok(())
}

/// Codex's home: `CODEX_HOME`, else `~/.codex`.
pub(super) fn codex_home() -> Result<PathBuf, CliError> {
    if let Some(home) = std::env::var_os("CODEX_HOME").filter(|h| !h.is_empty()) {
        return Ok(PathBuf::from(home));
    }
    std::env::var_os("HOME")
        .map(|home| PathBuf::from(home).join(".codex"))
        .ok_or_else(|| {
            CliError::usage(
                "home_unknown",
                "neither CODEX_HOME nor HOME is set, so Codex's configuration cannot be found",
                "set CODEX_HOME or HOME",
            )
        })
}

/// The most a runtime's TOML configuration may hold.
const MAX_TOML: u64 = 4 << 20;

/// The file's text; empty when there is none. Never read through a link.
fn read_toml(path: &Path) -> Result<String, CliError> {
    let bytes = files::read(path, MAX_TOML)
        .map_err(|e| super::file_refused(path, e, false))?
        .unwrap_or_default();
    String::from_utf8(bytes).map_err(|_| {
        CliError::input(
            "codex_config_malformed",
            format!("{} is not UTF-8 text", path.display()),
            "fix the file; Codex refuses it too",
        )
    })
}

fn table(item: Option<&Item>) -> Option<&dyn TableLike> {
    item.and_then(Item::as_table_like)
}

/// `[features] hooks = false` turns every hook off; `codex_hooks` is its deprecated name.
fn features(root: &toml_edit::Table, config_file: &Path, report: &mut Report) {
    let Some(features) = table(root.get("features")) else {
        return;
    };
    let off = |name| features.get(name).and_then(Item::as_bool) == Some(false);
    if off("hooks") || off("codex_hooks") {
        report.needs.push(format!(
            "Codex's hooks are turned off in {}: remove `hooks = false` (and `codex_hooks`) from its [features]",
            config_file.display()
        ));
    }
    if features.contains_key("codex_hooks") {
        report.notes.push(format!(
            "`codex_hooks` in the [features] of {} is deprecated (Codex reports an error for it): remove it; hooks are on by default",
            config_file.display()
        ));
    }
}

/// A project's hooks load only in a trusted project: the nearest `[projects."DIR"]` entry for
/// the project or a folder above it says.
fn project_trust(root: &toml_edit::Table, project: &Path, config_file: &Path, report: &mut Report) {
    let project = std::path::absolute(project).unwrap_or_else(|_| project.to_path_buf());
    let projects = table(root.get("projects"));
    let level = project.ancestors().find_map(|dir| {
        table(projects?.get(&dir.display().to_string()))?
            .get("trust_level")
            .and_then(Item::as_str)
    });
    if level != Some("trusted") {
        report.needs.push(format!(
            "Codex loads a project's hooks only in a project a person trusted, and {} is {}: run `codex exec --trust` once in it (or trust it when Codex asks), or add `[projects.\"{}\"]` with `trust_level = \"trusted\"` to {}",
            project.display(),
            level.map_or_else(|| "not trusted".to_owned(), |l| format!("`{l}`")),
            project.display(),
            config_file.display()
        ));
    }
}

/// Each hook runs only once a person trusted its exact definition: its `trusted_hash` under
/// `[hooks.state."KEY"]` must be the hash of the hook as it is now.
fn hook_trust(
    root: &toml_edit::Table,
    path: &Path,
    found: &[Found<'_>],
    config_file: &Path,
    report: &mut Report,
) {
    let file = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let states = table(root.get("hooks")).and_then(|h| table(h.get("state")));
    let mut untrusted = Vec::new();
    for f in found {
        let label = event_label(f.event);
        let key = format!("{}:{label}:{}:{}", file.display(), f.group, f.index);
        let hash = codex_hash(label, f.matcher, f.handler);
        let state = states.and_then(|s| table(s.get(&key)));
        let enabled = state.and_then(|s| s.get("enabled")).and_then(Item::as_bool);
        let trusted = state
            .and_then(|s| s.get("trusted_hash"))
            .and_then(Item::as_str);
        let trust = match (enabled, trusted) {
            (Some(false), _) => "disabled",
            (_, Some(t)) if t == hash => "trusted",
            (_, Some(_)) => "modified",
            (_, None) => "untrusted",
        };
        if trust != "trusted" {
            untrusted.push(format!("{}: {trust}", f.event));
        }
        report
            .hooks
            .push(json!({ "event": f.event, "key": key, "hash": hash, "trust": trust }));
    }
    if !untrusted.is_empty() {
        report.needs.push(format!(
            "Codex runs a hook only once a person trusted its exact command, and not all of loopx's are ({}): review and trust them with /hooks in Codex (kept under [hooks.state] in {}); installing again with other flags changes the command, which needs trusting again. Automation that vets its hooks itself can run `codex exec --dangerously-bypass-hook-trust`",
            untrusted.join(", "),
            config_file.display()
        ));
    }
}

/// Codex's name of an event in a hook's key and hash.
fn event_label(event: &str) -> &'static str {
    match event {
        "SessionStart" => "session_start",
        _ => "stop",
    }
}

/// The hash Codex trusts a command hook by: SHA-256 of the compact JSON, keys sorted, of the
/// event's label, the group's matcher (none for `Stop`, which takes no matcher) and the one
/// handler normalised (its timeout defaulted to 600 and at least 1, `async` false unless set,
/// absent fields left out). Checked against hashes the real Codex reported (tests below).
fn codex_hash(label: &str, matcher: Option<&str>, handler: &Map<String, Value>) -> String {
    let timeout = handler
        .get("timeout")
        .or_else(|| handler.get("timeoutSec"))
        .and_then(Value::as_u64)
        .unwrap_or(600)
        .max(1);
    let mut normal = json!({
        "type": "command",
        "command": handler.get("command").cloned().unwrap_or(Value::Null),
        "timeout": timeout,
        "async": handler.get("async").and_then(Value::as_bool).unwrap_or(false),
    });
    for optional in ["statusMessage", "additionalContextLimit"] {
        if let Some(value) = handler.get(optional).filter(|v| !v.is_null()) {
            normal[optional] = value.clone();
        }
    }
    let mut identity = json!({ "event_name": label, "hooks": [normal] });
    if let Some(matcher) = matcher.filter(|_| label == "session_start") {
        identity["matcher"] = Value::from(matcher);
    }
    let bytes = serde_json::to_vec(&sorted(identity)).unwrap_or_default();
    let digest = Sha256::digest(bytes);
    digest
        .iter()
        .fold(String::from("sha256:"), |mut hex, byte| {
            let _ = write!(hex, "{byte:02x}");
            hex
        })
}

/// The value with every object's keys in order, whatever order the map keeps.
fn sorted(value: Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(String, Value)> = map.into_iter().collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            Value::Object(entries.into_iter().map(|(k, v)| (k, sorted(v))).collect())
        }
        Value::Array(items) => Value::Array(items.into_iter().map(sorted).collect()),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn handler(command: &str) -> Map<String, Value> {
        json!({ "type": "command", "command": command, "timeout": 30 })
            .as_object()
            .cloned()
            .unwrap_or_default()
    }

    /// The hashes Codex 0.171.0 itself reported (`codex app-server`, `hooks/list`,
    /// `currentHash`) for these two hooks of a project's `hooks.json`.
    #[test]
    fn the_hash_is_the_one_codex_reports() {
        assert_eq!(
            codex_hash(
                "session_start",
                Some("startup|resume|clear|compact|fork"),
                &handler("/bin/echo hi")
            ),
            "sha256:17eeb1b737532488abd1c591a2fcb594b1778e71501a35c4a830688963ff479d"
        );
        assert_eq!(
            codex_hash("stop", None, &handler("/bin/echo bye")),
            "sha256:889716714c36e904a15f2274cf64b691f7ca1bee31d33d49ce2c03e159bf6b5b"
        );
        // Another command is another hash: trust given to one is not trust in the other.
        assert_ne!(
            codex_hash("stop", None, &handler("/bin/echo bye")),
            codex_hash("stop", None, &handler("/bin/echo bye --goal g"))
        );
    }

    #[test]
    fn a_matcher_that_misses_a_source_is_named() {
        assert_eq!(
            missed_sources(Runtime::Codex, Some("startup|resume|clear")),
            ["compact", "fork"]
        );
        assert!(
            missed_sources(Runtime::Codex, Some("startup|resume|clear|compact|fork")).is_empty()
        );
        assert!(missed_sources(Runtime::Codex, None).is_empty());
        assert!(missed_sources(Runtime::Claude, Some("startup|resume|clear|compact")).is_empty());
    }
}
