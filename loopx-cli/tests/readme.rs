//! The workspace README's command-line walkthrough, run as written: the fenced `sh` block that
//! starts with `turns=` is extracted from README.md at test time and run with bash, in a clean
//! temporary directory holding a copy of `examples/turns`, with the built `loopx` first on
//! `PATH`. It must end at `terminal (accepted)`, so the README can never again describe a path
//! that does not finish.

use std::path::{Path, PathBuf};
use std::process::Command;

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the crate sits in the workspace")
        .to_path_buf()
}

/// The README's walkthrough block: the fenced `sh` block whose first line starts with `turns=`.
fn walkthrough() -> String {
    let readme = std::fs::read_to_string(workspace_root().join("README.md")).expect("README.md");
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    for line in readme.lines() {
        match &mut current {
            None if line.trim_end() == "```sh" => current = Some(String::new()),
            Some(block) if line.trim_end() == "```" => {
                blocks.push(std::mem::take(block));
                current = None;
            }
            Some(block) => {
                block.push_str(line);
                block.push('\n');
            }
            None => {}
        }
    }
    let found: Vec<String> = blocks
        .into_iter()
        .filter(|b| b.starts_with("turns="))
        .collect();
    assert_eq!(found.len(), 1, "README.md has one walkthrough block");
    found.into_iter().next().unwrap_or_default()
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("create the copy");
    for entry in std::fs::read_dir(from).expect("read the directory") {
        let entry = entry.expect("an entry");
        std::fs::copy(entry.path(), to.join(entry.file_name())).expect("copy a file");
    }
}

#[test]
fn the_readme_walkthrough_ends_terminal_accepted() {
    let block = walkthrough();
    let dir = tempfile::tempdir().expect("a temporary directory");
    copy_dir(
        &workspace_root().join("examples/turns"),
        &dir.path().join("examples/turns"),
    );
    // A home of its own: no user's git or loopx settings, a git identity for the first commit.
    let home = dir.path().join("home");
    std::fs::create_dir_all(&home).expect("home");
    std::fs::write(
        home.join(".gitconfig"),
        "[user]\n\tname = reader\n\temail = reader@example.invalid\n[init]\n\tdefaultBranch = main\n",
    )
    .expect("gitconfig");
    let tmp = dir.path().join("tmp");
    std::fs::create_dir_all(&tmp).expect("tmp");
    let bin = Path::new(env!("CARGO_BIN_EXE_loopx"))
        .parent()
        .expect("the binary's directory")
        .to_path_buf();
    let path = std::env::join_paths(std::iter::once(bin).chain(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    )))
    .expect("PATH");
    let script = dir.path().join("walkthrough.sh");
    std::fs::write(&script, &block).expect("the script");

    let output = Command::new("bash")
        .arg("-eu")
        .arg(&script)
        .current_dir(dir.path())
        .env_clear()
        .env("PATH", path)
        .env("HOME", &home)
        .env("TMPDIR", &tmp)
        .env("NO_COLOR", "1")
        .output()
        .expect("bash runs");

    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "the walkthrough failed ({}):\n{block}\nstdout:\n{stdout}\nstderr:\n{stderr}",
        output.status
    );
    assert_eq!(
        stdout.lines().rfind(|l| !l.trim().is_empty()),
        Some("terminal (accepted)"),
        "the walkthrough ends at terminal (accepted):\n{stdout}\nstderr:\n{stderr}"
    );
    assert!(
        !stdout.contains("warning"),
        "the walkthrough leaves no dirty tree:\n{stdout}"
    );
}
