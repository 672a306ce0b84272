//! Signing keys outside the kernel: generating them, keeping them in files, finding an actor's.
//!
//! The kernel verifies signatures and signs with a key it is handed
//! ([`loopx_kernel::SecretKey`]); it never generates a key or reads a file. This module does
//! both, for hosts and the CLI:
//!
//! - [`generate`] draws a new ed25519 key from the operating system's random source.
//! - A **key file** holds one actor's key as text (see [`KeyFile`] for the format). A private key
//!   file is created with mode `0600` in one step (written under a temporary name, linked into
//!   place, never overwriting), and one whose mode lets anyone but its owner read it is refused
//!   when read: a key others could read signs for anyone.
//! - A **key directory** ([`KeyDir`]) holds one key file per actor, each named by
//!   [`loopx_kernel::ids::path_component`] of the actor (`agent:agent-a` is
//!   `agent=3Aagent-a.key`), never by the raw id. It is created with mode `0700`.
//! - [`find`] looks up an actor's key: the file `LOOPX_KEY` names (one key file, which must be
//!   that actor's), else the actor's file in the key directory.
//!
//! No secret appears in an error, a log line or a `Debug` output: errors name the file and the
//! problem, never its content.
//!
//! Where a key lives decides whether independence is real: a key the agent's OS user can read
//! is a key the agent can sign with. A validator's key belongs where the agent cannot read it
//! (CI's secrets, another OS user's key directory). So the keys of the service's own actors —
//! providers, validators, capabilities ([`is_service_actor`]) — belong in a key directory of
//! their own, apart from the one people and agents sign from, and [`KeyDir::actors`] lets a
//! host say when an agent's key directory holds one.

use std::fmt;
use std::os::unix::fs::{DirBuilderExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};

use loopx_kernel::{Actor, AgentId, PersonId, PublicKey, SecretKey, Signer as _, SourceId};

use crate::files::FileError;

/// The environment variable naming one key file to sign with.
pub const KEY_ENV: &str = "LOOPX_KEY";

/// The first line of every key file.
const MAGIC: &str = "loopx-key v1";

/// Why a key was not generated, written or read. Never holds key material.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    /// The operating system's random source failed.
    #[error("cannot draw a random key: {0}")]
    Random(String),
    /// A file or directory could not be read or written.
    #[error("cannot {action} `{path}`: {source}")]
    Io {
        /// What was being done.
        action: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// A key file already exists where a new one was to be written.
    #[error("`{path}` already exists; a key is never overwritten")]
    Exists {
        /// The file.
        path: PathBuf,
    },
    /// A private key file others than its owner may read.
    #[error("`{path}` has mode {mode:o}: a private key file must be readable by its owner only")]
    TooOpen {
        /// The file.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// A key file that is not in the documented format (the line is named, never quoted).
    #[error("`{path}` is not a loopx key file: {problem}")]
    Malformed {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        problem: String,
    },
    /// The key file holds another actor's key than the one asked for.
    #[error("`{path}` holds the key of `{holds}`, not of `{wanted}`")]
    OtherActor {
        /// The file.
        path: PathBuf,
        /// The actor asked for.
        wanted: Actor,
        /// The actor the file names.
        holds: Actor,
    },
    /// No key for the actor was found.
    #[error("no key for `{actor}` in `{dir}` (and `LOOPX_KEY` is not set)")]
    NotFound {
        /// The actor.
        actor: Actor,
        /// The key directory looked in.
        dir: PathBuf,
    },
}

/// A new ed25519 key: 32 bytes from the operating system's random source as its seed.
///
/// # Errors
/// [`KeyError::Random`] when the random source fails.
pub fn generate() -> Result<SecretKey, KeyError> {
    let mut seed = [0u8; 32];
    getrandom::fill(&mut seed).map_err(|error| KeyError::Random(error.to_string()))?;
    let key = SecretKey::from_seed(seed);
    seed.fill(0);
    Ok(key)
}

/// One actor's key, as a key file holds it.
///
/// The format is UTF-8 text, one `name: value` line each after the first:
///
/// ```text
/// loopx-key v1
/// actor: agent:agent-a
/// public: ed25519:<64 hexadecimal digits>
/// secret: <64 hexadecimal digits, the ed25519 seed>
/// ```
///
/// `public` must be the key `secret` derives (a file whose lines disagree is refused). Its
/// `Debug` shows the actor and the public key only.
#[derive(Clone)]
pub struct KeyFile {
    /// Whose key it is.
    pub actor: Actor,
    /// The key.
    pub secret: SecretKey,
}

impl fmt::Debug for KeyFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyFile")
            .field("actor", &self.actor)
            .field("public", &self.secret.public_key())
            .finish_non_exhaustive()
    }
}

impl KeyFile {
    /// The public key.
    pub fn public_key(&self) -> PublicKey {
        self.secret.public_key()
    }

    fn render(&self) -> String {
        format!(
            "{MAGIC}\nactor: {}\npublic: {}\nsecret: {}\n",
            self.actor,
            self.public_key(),
            loopx_kernel::ids::hex(&self.secret.seed())
        )
    }

    fn parse(path: &Path, text: &str) -> Result<KeyFile, KeyError> {
        let malformed = |problem: &str| KeyError::Malformed {
            path: path.to_owned(),
            problem: problem.to_owned(),
        };
        let mut lines = text.lines();
        if lines.next() != Some(MAGIC) {
            return Err(malformed("the first line must be `loopx-key v1`"));
        }
        let (mut actor, mut public, mut secret) = (None, None, None);
        for line in lines.filter(|l| !l.trim().is_empty()) {
            let Some((name, value)) = line.split_once(": ") else {
                return Err(malformed("a line is not `name: value`"));
            };
            let slot = match name {
                "actor" => &mut actor,
                "public" => &mut public,
                "secret" => &mut secret,
                _ => return Err(malformed("a line names no known field")),
            };
            if slot.replace(value.trim()).is_some() {
                return Err(malformed("a field appears twice"));
            }
        }
        let actor = parse_actor(actor.ok_or_else(|| malformed("no `actor` line"))?)
            .ok_or_else(|| malformed("`actor` is not KIND:NAME"))?;
        let public = PublicKey::parse(public.ok_or_else(|| malformed("no `public` line"))?)
            .map_err(|_| malformed("`public` is not `ed25519:` and 64 hexadecimal digits"))?;
        let mut seed = unhex32(secret.ok_or_else(|| malformed("no `secret` line"))?)
            .ok_or_else(|| malformed("`secret` is not 64 hexadecimal digits"))?;
        let secret = SecretKey::from_seed(seed);
        seed.fill(0);
        if secret.public_key() != public {
            return Err(malformed("`public` is not the key `secret` derives"));
        }
        Ok(KeyFile { actor, secret })
    }

    /// Writes the key to `path` as a new file of mode `0600`: written and synced under a
    /// temporary name in the same directory, then linked into place, so the file appears
    /// complete or not at all and is never readable by others, not even for an instant.
    ///
    /// # Errors
    /// [`KeyError::Exists`] when `path` exists (a key is never overwritten), [`KeyError::Io`]
    /// otherwise.
    pub fn write(&self, path: &Path) -> Result<(), KeyError> {
        crate::files::create(path, self.render().as_bytes(), 0o600).map_err(|error| match error {
            FileError::Exists { .. } => KeyError::Exists {
                path: path.to_owned(),
            },
            FileError::Io { action, source, .. } => KeyError::Io {
                action,
                path: path.to_owned(),
                source,
            },
            other => KeyError::Io {
                action: "write",
                path: path.to_owned(),
                source: std::io::Error::other(other.to_string()),
            },
        })
    }

    /// Reads a key file, refusing one whose mode lets others than its owner read or write it.
    ///
    /// # Errors
    /// [`KeyError::TooOpen`], [`KeyError::Malformed`] or [`KeyError::Io`].
    pub fn read(path: &Path) -> Result<KeyFile, KeyError> {
        let io = |action, source| KeyError::Io {
            action,
            path: path.to_owned(),
            source,
        };
        let file = std::fs::File::open(path).map_err(|e| io("open", e))?;
        let mode = file
            .metadata()
            .map_err(|e| io("stat", e))?
            .permissions()
            .mode()
            & 0o777;
        if mode & 0o077 != 0 {
            return Err(KeyError::TooOpen {
                path: path.to_owned(),
                mode,
            });
        }
        let mut text = String::new();
        std::io::Read::read_to_string(&mut &file, &mut text).map_err(|e| io("read", e))?;
        let parsed = KeyFile::parse(path, &text);
        // The text held the seed: wipe it rather than leave it to the allocator.
        let mut bytes = text.into_bytes();
        bytes.fill(0);
        parsed
    }
}

/// Parses `KIND:NAME` (`agent`, `person`, `validator`, `provider`, `capability`).
pub fn parse_actor(text: &str) -> Option<Actor> {
    let (kind, name) = text.split_once(':')?;
    Some(match kind {
        "agent" => Actor::Agent(AgentId::new(name).ok()?),
        "person" => Actor::Person(PersonId::new(name).ok()?),
        "validator" => Actor::Validator(SourceId::new(name).ok()?),
        "provider" => Actor::Provider(SourceId::new(name).ok()?),
        "capability" => Actor::Capability(SourceId::new(name).ok()?),
        _ => return None,
    })
}

fn unhex32(text: &str) -> Option<[u8; 32]> {
    let digits = text.as_bytes();
    if digits.len() != 64 {
        return None;
    }
    let value = |d: u8| match d {
        b'0'..=b'9' => Some(d - b'0'),
        b'a'..=b'f' => Some(d - b'a' + 10),
        _ => None,
    };
    let mut out = [0u8; 32];
    for (byte, pair) in out.iter_mut().zip(digits.chunks_exact(2)) {
        *byte = value(pair[0])? << 4 | value(pair[1])?;
    }
    Some(out)
}

/// Whether `actor` is one of the service's own actors — a provider, a validator or a
/// capability — whose key belongs in the service's key directory, never in the one an agent
/// reads (an agent holding it could record facts, verdicts or judgements in its name).
pub fn is_service_actor(actor: &Actor) -> bool {
    matches!(
        actor,
        Actor::Provider(_) | Actor::Validator(_) | Actor::Capability(_)
    )
}

/// The actor a key file's name says it holds (`agent=3Aagent-a.key`), read from the name
/// alone; `None` for a name no actor's file has.
fn actor_of_file_name(name: &str) -> Option<Actor> {
    let encoded = name.strip_suffix(".key")?.as_bytes();
    let mut bytes = Vec::with_capacity(encoded.len());
    let mut at = 0;
    while let Some(&byte) = encoded.get(at) {
        if byte == b'=' {
            let pair = std::str::from_utf8(encoded.get(at + 1..at + 3)?).ok()?;
            bytes.push(u8::from_str_radix(pair, 16).ok()?);
            at += 3;
        } else {
            bytes.push(byte);
            at += 1;
        }
    }
    parse_actor(std::str::from_utf8(&bytes).ok()?)
}

/// A directory of key files, one per actor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyDir {
    path: PathBuf,
}

impl KeyDir {
    /// The key directory at `path` (nothing is created until a key is written).
    pub fn new(path: impl Into<PathBuf>) -> KeyDir {
        KeyDir { path: path.into() }
    }

    /// Its path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Where `actor`'s key file is: its [`path_component`](loopx_kernel::ids::path_component)
    /// and `.key`.
    pub fn file_of(&self, actor: &Actor) -> PathBuf {
        self.path.join(format!(
            "{}.key",
            loopx_kernel::ids::path_component(&actor.to_string())
        ))
    }

    /// Generates a key for `actor` and writes its file (the directory is created with mode
    /// `0700` when missing).
    ///
    /// # Errors
    /// [`KeyError::Exists`] when the actor has a key here already; [`KeyError::Io`] or
    /// [`KeyError::Random`] otherwise.
    pub fn create(&self, actor: &Actor) -> Result<KeyFile, KeyError> {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.path)
            .map_err(|source| KeyError::Io {
                action: "create the key directory",
                path: self.path.clone(),
                source,
            })?;
        let key = KeyFile {
            actor: actor.clone(),
            secret: generate()?,
        };
        key.write(&self.file_of(actor))?;
        Ok(key)
    }

    /// The actors whose key files the directory holds, by their file names (no file is read,
    /// so no secret is touched); empty when the directory does not exist.
    ///
    /// # Errors
    /// [`KeyError::Io`] when the directory exists but cannot be listed.
    pub fn actors(&self) -> Result<Vec<Actor>, KeyError> {
        let entries = match std::fs::read_dir(&self.path) {
            Ok(entries) => entries,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(source) => {
                return Err(KeyError::Io {
                    action: "list the key directory",
                    path: self.path.clone(),
                    source,
                });
            }
        };
        let mut actors: Vec<Actor> = entries
            .filter_map(Result::ok)
            .filter_map(|entry| actor_of_file_name(entry.file_name().to_str()?))
            .collect();
        actors.sort_by_key(ToString::to_string);
        Ok(actors)
    }

    /// `actor`'s key, if the directory holds one.
    ///
    /// # Errors
    /// As [`KeyFile::read`] for a file that exists, and [`KeyError::OtherActor`] for a file
    /// that names another actor.
    pub fn get(&self, actor: &Actor) -> Result<Option<KeyFile>, KeyError> {
        let path = self.file_of(actor);
        if !path.exists() {
            return Ok(None);
        }
        let key = KeyFile::read(&path)?;
        if &key.actor != actor {
            return Err(KeyError::OtherActor {
                path,
                wanted: actor.clone(),
                holds: key.actor,
            });
        }
        Ok(Some(key))
    }
}

/// `actor`'s key: the file `LOOPX_KEY` names when it is set (it must hold `actor`'s key),
/// otherwise the actor's file in `dir`. `None` when neither has one.
///
/// # Errors
/// As [`KeyFile::read`] and [`KeyDir::get`]; [`KeyError::OtherActor`] when `LOOPX_KEY` names
/// another actor's key.
pub fn find(dir: &KeyDir, actor: &Actor) -> Result<Option<KeyFile>, KeyError> {
    find_with(dir, actor, std::env::var_os(KEY_ENV).map(PathBuf::from))
}

/// [`find`] with the `LOOPX_KEY` value given rather than read from the environment.
///
/// # Errors
/// As [`find`].
pub fn find_with(
    dir: &KeyDir,
    actor: &Actor,
    key_file: Option<PathBuf>,
) -> Result<Option<KeyFile>, KeyError> {
    if let Some(path) = key_file.filter(|p| !p.as_os_str().is_empty()) {
        let key = KeyFile::read(&path)?;
        if &key.actor != actor {
            return Err(KeyError::OtherActor {
                path,
                wanted: actor.clone(),
                holds: key.actor,
            });
        }
        return Ok(Some(key));
    }
    dir.get(actor)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn agent(name: &str) -> Actor {
        Actor::Agent(AgentId::new(name).expect("an agent id"))
    }

    #[test]
    fn a_key_file_is_private_round_trips_and_is_never_overwritten() {
        let dir = tempfile::tempdir().expect("a directory");
        let keys = KeyDir::new(dir.path().join("keys"));
        let made = keys.create(&agent("agent-a")).expect("a key");
        let path = keys.file_of(&agent("agent-a"));
        assert_eq!(
            path.file_name().and_then(|n| n.to_str()),
            Some("agent=3Aagent-a.key")
        );
        let file_mode = std::fs::metadata(&path).expect("stat").permissions().mode() & 0o777;
        assert_eq!(file_mode, 0o600);
        let dir_mode = std::fs::metadata(keys.path())
            .expect("stat")
            .permissions()
            .mode()
            & 0o777;
        assert_eq!(dir_mode, 0o700);
        let read = keys.get(&agent("agent-a")).expect("read").expect("found");
        assert_eq!(read.public_key(), made.public_key());
        assert!(matches!(
            keys.create(&agent("agent-a")),
            Err(KeyError::Exists { .. })
        ));
        assert_eq!(
            keys.get(&agent("agent-b")).expect("read").map(|k| k.actor),
            None
        );
        // No temporary file is left behind.
        let names: Vec<_> = std::fs::read_dir(keys.path())
            .expect("list")
            .map(|e| e.expect("entry").file_name())
            .collect();
        assert_eq!(names.len(), 1, "{names:?}");
    }

    #[test]
    fn a_key_file_others_may_read_is_refused_and_no_secret_is_ever_shown() {
        let dir = tempfile::tempdir().expect("a directory");
        let keys = KeyDir::new(dir.path());
        let made = keys.create(&agent("agent-a")).expect("a key");
        let secret = loopx_kernel::ids::hex(&made.secret.seed());
        let path = keys.file_of(&agent("agent-a"));
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        let error = keys.get(&agent("agent-a")).expect_err("too open");
        assert!(
            matches!(error, KeyError::TooOpen { mode: 0o644, .. }),
            "{error}"
        );
        for shown in [error.to_string(), format!("{error:?}"), format!("{made:?}")] {
            assert!(!shown.contains(&secret), "{shown}");
        }
        // A malformed file: its content is never quoted.
        let bad = dir.path().join("bad.key");
        std::fs::write(&bad, format!("{MAGIC}\nsecret: {secret}zz\n")).expect("write");
        std::fs::set_permissions(&bad, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        let error = KeyFile::read(&bad).expect_err("malformed");
        assert!(!error.to_string().contains(&secret), "{error}");
    }

    #[test]
    fn lookup_prefers_the_named_file_and_it_must_be_the_actors() {
        let dir = tempfile::tempdir().expect("a directory");
        let keys = KeyDir::new(dir.path().join("keys"));
        let own = keys.create(&agent("agent-a")).expect("a key");
        let other = KeyDir::new(dir.path().join("other"));
        let elsewhere = other.create(&agent("agent-a")).expect("a key");
        let found = find_with(
            &keys,
            &agent("agent-a"),
            Some(other.file_of(&agent("agent-a"))),
        )
        .expect("found")
        .expect("a key");
        assert_eq!(found.public_key(), elsewhere.public_key());
        assert_ne!(found.public_key(), own.public_key());
        let wrong = find_with(
            &keys,
            &agent("agent-b"),
            Some(other.file_of(&agent("agent-a"))),
        );
        assert!(matches!(wrong, Err(KeyError::OtherActor { .. })));
        let fallback = find_with(&keys, &agent("agent-a"), None)
            .expect("found")
            .expect("a key");
        assert_eq!(fallback.public_key(), own.public_key());
    }

    #[test]
    fn a_directory_names_the_actors_it_holds_keys_of_by_file_name() {
        let dir = tempfile::tempdir().expect("a directory");
        let keys = KeyDir::new(dir.path().join("keys"));
        assert_eq!(keys.actors().expect("listed"), Vec::<Actor>::new());
        let github = parse_actor("provider:github").expect("an actor");
        for actor in [agent("agent-a"), github.clone()] {
            keys.create(&actor).expect("a key");
        }
        std::fs::write(keys.path().join("notes.txt"), "").expect("write");
        let held = keys.actors().expect("listed");
        assert_eq!(held, vec![agent("agent-a"), github]);
        let service: Vec<_> = held.iter().filter(|a| is_service_actor(a)).collect();
        assert_eq!(service.len(), 1);
    }

    #[test]
    fn a_file_whose_public_line_is_not_its_secrets_key_is_refused() {
        let dir = tempfile::tempdir().expect("a directory");
        let a = KeyFile {
            actor: agent("agent-a"),
            secret: SecretKey::from_seed([1; 32]),
        };
        let b = SecretKey::from_seed([2; 32]);
        let text = a
            .render()
            .replace(&a.public_key().to_string(), &b.public_key().to_string());
        let path = dir.path().join("a.key");
        std::fs::write(&path, text).expect("write");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        assert!(matches!(
            KeyFile::read(&path),
            Err(KeyError::Malformed { .. })
        ));
    }
}
