//! How a waiter on a SQLite store learns that a commit landed, without polling.
//!
//! Every handle of one database file in a process shares one [`Wake`] (found by the file's
//! canonical path): a commit through any of them bumps its counter at once. Commits of other
//! processes write the file's write-ahead log (or its rollback journal); while something waits,
//! the directory of the file is watched with the platform's file notifications (inotify on
//! Linux, `FSEvents` on macOS, `ReadDirectoryChangesW` on Windows, through the `notify` crate),
//! and a change to the log, the journal or the database bumps the counter too. A bump only
//! makes waiters re-read the revisions they watch, so a change that was not a commit (a
//! checkpoint, this process's own write) costs one small read and is never reported.
//!
//! Where no watch can be set up (no such facility, its limits reached), waiters fall back to
//! re-reading every `SqliteOptions::change_poll`, which they also do everywhere as a safety net.

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock, PoisonError, Weak};

use notify::{EventKind, RecommendedWatcher, RecursiveMode, Watcher};
use tokio::sync::watch;

/// The wake of one database file in this process.
pub(super) struct Wake {
    commits: Arc<watch::Sender<u64>>,
    path: PathBuf,
    /// The watch of the file's directory, set up by the first waiter (`None`: none could be).
    files: OnceLock<Option<RecommendedWatcher>>,
}

impl std::fmt::Debug for Wake {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Wake")
            .field("path", &self.path)
            .field("files", &self.files.get().map(Option::is_some))
            .finish_non_exhaustive()
    }
}

/// The wakes of the database files this process has open, by canonical path.
fn wakes() -> &'static Mutex<HashMap<PathBuf, Weak<Wake>>> {
    static WAKES: OnceLock<Mutex<HashMap<PathBuf, Weak<Wake>>>> = OnceLock::new();
    WAKES.get_or_init(|| Mutex::new(HashMap::new()))
}

impl Wake {
    /// The wake every handle of the database at `path` in this process shares.
    pub(super) fn of(path: &Path) -> Arc<Wake> {
        let path = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        let mut wakes = wakes().lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(wake) = wakes.get(&path).and_then(Weak::upgrade) {
            return wake;
        }
        wakes.retain(|_, wake| wake.strong_count() > 0);
        let wake = Arc::new(Wake {
            commits: Arc::new(watch::channel(0).0),
            path: path.clone(),
            files: OnceLock::new(),
        });
        wakes.insert(path, Arc::downgrade(&wake));
        wake
    }

    /// Tells this process's waiters that a commit landed.
    pub(super) fn committed(&self) {
        bump(&self.commits);
    }

    /// A subscription that sees every commit from now on: in this process, and in others
    /// while the file watch works ([`Wake::watches_files`]). Subscribe *before* reading the
    /// revisions, so that a commit between the read and the wait still wakes it.
    pub(super) fn subscribe(&self) -> watch::Receiver<u64> {
        self.files
            .get_or_init(|| watch_files(&self.path, &self.commits));
        self.commits.subscribe()
    }

    /// Whether other processes' commits wake waiters at once (the file watch is set up).
    #[cfg(test)]
    pub(super) fn watches_files(&self) -> bool {
        self.files.get().is_some_and(Option::is_some)
    }
}

fn bump(commits: &watch::Sender<u64>) {
    commits.send_modify(|count| *count = count.wrapping_add(1));
}

/// Watches the directory of `database` for changes to the database, its write-ahead log or
/// its journal, bumping `commits` on each; `None` when the platform cannot.
fn watch_files(database: &Path, commits: &Arc<watch::Sender<u64>>) -> Option<RecommendedWatcher> {
    let directory = database.parent()?.to_path_buf();
    let name = database.file_name()?.to_owned();
    let files: Vec<OsString> = ["", "-wal", "-journal"]
        .iter()
        .map(|suffix| {
            let mut file = name.clone();
            file.push(suffix);
            file
        })
        .collect();
    let commits = Arc::downgrade(commits);
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        let Ok(event) = event else { return };
        if matches!(event.kind, EventKind::Access(_)) {
            return;
        }
        let ours = event.paths.iter().any(|path| {
            path.file_name()
                .is_some_and(|file| files.iter().any(|f| f == file))
        });
        if ours && let Some(commits) = commits.upgrade() {
            bump(&commits);
        }
    })
    .ok()?;
    watcher
        .watch(&directory, RecursiveMode::NonRecursive)
        .ok()?;
    Some(watcher)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every spelling of one file's path finds the same wake, and a commit through it wakes a
    /// subscriber at once: the in-process path, whatever the file watch does.
    #[test]
    fn handles_of_one_file_share_one_wake() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("w.db");
        std::fs::write(&path, b"").unwrap();
        let one = Wake::of(&path);
        let same = Wake::of(&dir.path().join(".").join("w.db"));
        assert!(Arc::ptr_eq(&one, &same));
        let other = dir.path().join("x.db");
        std::fs::write(&other, b"").unwrap();
        assert!(!Arc::ptr_eq(&one, &Wake::of(&other)));
        let commits = same.subscribe();
        assert!(!commits.has_changed().unwrap());
        one.committed();
        assert!(commits.has_changed().unwrap());
    }

    /// A write to the file's write-ahead log, as another process's commit makes, bumps the
    /// wake where the platform reports file changes; a file of another name does not.
    #[test]
    fn a_change_to_the_log_wakes_subscribers() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("w.db");
        std::fs::write(&path, b"").unwrap();
        let wake = Wake::of(&path);
        let mut commits = wake.subscribe();
        #[cfg(target_os = "linux")]
        assert!(wake.watches_files(), "inotify is available on Linux");
        if !wake.watches_files() {
            return;
        }
        std::fs::write(dir.path().join("unrelated.txt"), b"x").unwrap();
        std::thread::sleep(std::time::Duration::from_millis(200));
        assert!(!commits.has_changed().unwrap(), "another file woke it");
        std::fs::write(dir.path().join("w.db-wal"), b"frames").unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !commits.has_changed().unwrap() {
            assert!(
                std::time::Instant::now() < deadline,
                "the log change was not seen"
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let _ = commits.borrow_and_update();
    }
}
