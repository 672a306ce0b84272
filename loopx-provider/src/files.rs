//! Files written where someone else may have put things first: a repository's `.claude/`, an
//! export's directory, a key directory. One writer for all of them, so every such write has
//! the same guarantees:
//!
//! - **No link is followed.** The bytes go to a new temporary file beside the target, opened
//!   with `O_CREAT | O_EXCL | O_NOFOLLOW` under a random name, so no name planted in advance —
//!   a symbolic link included — is ever opened. A target that is itself a symbolic link is
//!   refused ([`FileError::Link`]) rather than resolved: where it points is the repository's
//!   choice, not the person's who runs loopx.
//! - **Never half.** The temporary file is synced and then moved into place — renamed over the
//!   target by [`replace`] (a rename replaces a name, never what a link points to), hard-linked
//!   by [`create`] (which never replaces anything) — and the directory synced: a crash leaves
//!   the old file or the new one.
//! - **The mode is chosen, not inherited from the umask.** [`Mode::Keep`] keeps the mode of
//!   the file replaced; [`Mode::Exactly`] sets one (`0600` for what only its owner may read).
//!
//! [`read`] is the matching reader: a regular file only, never through a link, and bounded.

use std::io::{Read as _, Write as _};
use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};

/// The mode a written file gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// The mode of the file it replaces; this one when there is none.
    Keep(u32),
    /// Always this one (e.g. `0o600` for a file only its owner may read).
    Exactly(u32),
}

/// Why a file was not written or read. Names the file, never its content.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// The path is a symbolic link, which loopx never writes or reads through.
    #[error("`{path}` is a symbolic link; loopx does not read or write files through links")]
    Link {
        /// The link.
        path: PathBuf,
    },
    /// The path exists and is not a regular file (a directory, a FIFO, a device).
    #[error("`{path}` is not a regular file")]
    NotAFile {
        /// The path.
        path: PathBuf,
    },
    /// [`create`] found the path taken.
    #[error("`{path}` already exists")]
    Exists {
        /// The path.
        path: PathBuf,
    },
    /// [`read`] found more than its limit.
    #[error("`{path}` is larger than {limit} bytes")]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// The most read.
        limit: u64,
    },
    /// The operating system refused.
    #[error("cannot {action} `{path}`: {source}")]
    Io {
        /// What was being done.
        action: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },
}

/// Writes `bytes` to `path`, replacing the file there, with the mode `mode` says.
///
/// # Errors
/// [`FileError::Link`] or [`FileError::NotAFile`] when `path` is a link or not a regular file
/// (nothing is written), [`FileError::Io`] otherwise.
pub fn replace(path: &Path, bytes: &[u8], mode: Mode) -> Result<(), FileError> {
    let mode = match (mode, existing(path)?) {
        (Mode::Keep(_), Some(current)) => current,
        (Mode::Keep(mode) | Mode::Exactly(mode), _) => mode,
    };
    let temporary = temporary(path, bytes, mode)?;
    let moved = std::fs::rename(&temporary, path);
    if moved.is_err() {
        let _ = std::fs::remove_file(&temporary);
    }
    moved.map_err(|source| io("write", path, source))?;
    sync_dir(path)
}

/// Writes `bytes` to `path` as a new file of mode `mode`, never replacing anything there.
///
/// # Errors
/// [`FileError::Exists`] when `path` exists (a link too), [`FileError::Io`] otherwise.
pub fn create(path: &Path, bytes: &[u8], mode: u32) -> Result<(), FileError> {
    let temporary = temporary(path, bytes, mode)?;
    // A hard link never replaces an existing name, unlike a rename.
    let linked = std::fs::hard_link(&temporary, path);
    let _ = std::fs::remove_file(&temporary);
    match linked {
        Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {
            return Err(FileError::Exists {
                path: path.to_owned(),
            });
        }
        other => other.map_err(|source| io("write", path, source))?,
    }
    sync_dir(path)
}

/// The bytes of the regular file at `path`, or `None` when there is none.
///
/// # Errors
/// [`FileError::Link`], [`FileError::NotAFile`], [`FileError::TooLarge`] past `limit` bytes,
/// [`FileError::Io`].
pub fn read(path: &Path, limit: u64) -> Result<Option<Vec<u8>>, FileError> {
    if existing(path)?.is_none() {
        return Ok(None);
    }
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(no_follow())
        .open(path)
        .map_err(|source| io("open", path, source))?;
    let mut bytes = Vec::new();
    file.take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(|source| io("read", path, source))?;
    if bytes.len() as u64 > limit {
        return Err(FileError::TooLarge {
            path: path.to_owned(),
            limit,
        });
    }
    Ok(Some(bytes))
}

/// Creates the directory `dir` (and its parents) unless it exists; refuses one that is a link.
///
/// # Errors
/// [`FileError::Link`] for a link, [`FileError::NotAFile`] for a path that is no directory,
/// [`FileError::Io`].
pub fn ensure_dir(dir: &Path) -> Result<(), FileError> {
    match std::fs::symlink_metadata(dir) {
        Ok(meta) if meta.file_type().is_symlink() => Err(FileError::Link {
            path: dir.to_owned(),
        }),
        Ok(meta) if meta.is_dir() => Ok(()),
        Ok(_) => Err(FileError::NotAFile {
            path: dir.to_owned(),
        }),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            std::fs::create_dir_all(dir).map_err(|source| io("create", dir, source))
        }
        Err(source) => Err(io("inspect", dir, source)),
    }
}

/// The permission bits of the regular file at `path`, `None` when there is none; a link or
/// another kind of file is refused.
fn existing(path: &Path) -> Result<Option<u32>, FileError> {
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_symlink() => Err(FileError::Link {
            path: path.to_owned(),
        }),
        Ok(meta) if meta.is_file() => Ok(Some(meta.permissions().mode() & 0o777)),
        Ok(_) => Err(FileError::NotAFile {
            path: path.to_owned(),
        }),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(io("inspect", path, source)),
    }
}

/// A new, synced file of mode `mode` holding `bytes`, beside `path` under a random name.
fn temporary(path: &Path, bytes: &[u8], mode: u32) -> Result<PathBuf, FileError> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut tag = [0u8; 8];
    getrandom::fill(&mut tag).map_err(|error| {
        io(
            "name a temporary file for",
            path,
            std::io::Error::other(error.to_string()),
        )
    })?;
    let temporary = directory(path).join(format!(".{name}.{}.tmp", loopx_kernel::ids::hex(&tag)));
    let written = (|| {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .custom_flags(no_follow())
            .mode(0o600)
            .open(&temporary)?;
        file.write_all(bytes)?;
        // Exactly `mode`, whatever the umask took from the mode the file was opened with.
        file.set_permissions(std::fs::Permissions::from_mode(mode))?;
        file.sync_all()
    })();
    match written {
        Ok(()) => Ok(temporary),
        Err(source) => {
            let _ = std::fs::remove_file(&temporary);
            Err(io("write", path, source))
        }
    }
}

fn sync_dir(path: &Path) -> Result<(), FileError> {
    let dir = directory(path);
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|source| io("sync the directory of", path, source))
}

fn directory(path: &Path) -> &Path {
    path.parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
}

fn no_follow() -> i32 {
    rustix::fs::OFlags::NOFOLLOW.bits().cast_signed()
}

fn io(action: &'static str, path: &Path, source: std::io::Error) -> FileError {
    FileError::Io {
        action,
        path: path.to_owned(),
        source,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode_of(path: &Path) -> u32 {
        std::fs::metadata(path).expect("stat").permissions().mode() & 0o777
    }

    #[test]
    fn replace_keeps_the_mode_of_the_file_it_replaces_or_sets_the_one_asked() {
        let dir = tempfile::tempdir().expect("a directory");
        let path = dir.path().join("settings.json");
        replace(&path, b"one", Mode::Keep(0o644)).expect("written");
        assert_eq!(mode_of(&path), 0o644);
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).expect("chmod");
        replace(&path, b"two", Mode::Keep(0o644)).expect("written");
        assert_eq!(
            (std::fs::read(&path).expect("read"), mode_of(&path)),
            (b"two".to_vec(), 0o640)
        );
        replace(&path, b"three", Mode::Exactly(0o600)).expect("written");
        assert_eq!(mode_of(&path), 0o600);
        let names: Vec<_> = std::fs::read_dir(dir.path()).expect("list").collect();
        assert_eq!(names.len(), 1, "no temporary file is left behind");
    }

    #[test]
    fn no_write_or_read_goes_through_a_link() {
        let dir = tempfile::tempdir().expect("a directory");
        let outside = dir.path().join("outside");
        std::fs::write(&outside, "keep").expect("written");
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&outside, &link).expect("a link");
        assert!(matches!(
            replace(&link, b"x", Mode::Keep(0o644)),
            Err(FileError::Link { .. })
        ));
        assert!(matches!(
            create(&link, b"x", 0o600),
            Err(FileError::Exists { .. })
        ));
        assert!(matches!(read(&link, 10), Err(FileError::Link { .. })));
        assert!(matches!(ensure_dir(&link), Err(FileError::Link { .. })));
        assert_eq!(std::fs::read_to_string(&outside).expect("read"), "keep");
        assert!(
            std::fs::symlink_metadata(&link)
                .expect("stat")
                .file_type()
                .is_symlink()
        );
    }

    #[test]
    fn read_is_bounded_and_create_never_replaces() {
        let dir = tempfile::tempdir().expect("a directory");
        let path = dir.path().join("file");
        assert!(read(&path, 4).expect("no file").is_none());
        create(&path, b"12345", 0o600).expect("created");
        assert_eq!(mode_of(&path), 0o600);
        assert!(matches!(read(&path, 4), Err(FileError::TooLarge { .. })));
        assert!(matches!(
            create(&path, b"x", 0o600),
            Err(FileError::Exists { .. })
        ));
        assert_eq!(read(&path, 5).expect("read"), Some(b"12345".to_vec()));
    }
}
