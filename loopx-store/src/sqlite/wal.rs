//! Reading the write-ahead log before SQLite does, to tell a torn tail from damage in the
//! middle of committed frames.
//!
//! SQLite's recovery keeps the frames up to the last commit frame before the first frame that
//! does not verify, and drops the rest without a word; the first checkpoint then makes that
//! permanent. A crash leaves at most the last, unacknowledged transaction half written (with
//! `synchronous=FULL` every acknowledged commit was synced before it returned, and a header is
//! synced before the frames that follow it), so after a torn tail no frame of the current log
//! verifies. A frame that verifies against its predecessor's checksum, carries the log's salts
//! and commits a transaction *after* the first broken frame was written before the damage
//! happened: it is a commit SQLite would drop, and that is reported instead.
//!
//! What the format cannot tell apart: damage inside the last committed transaction (no commit
//! frame follows it) looks exactly like a torn tail, and that transaction is dropped silently.

use std::fs::File;
use std::io::{BufReader, ErrorKind, Read};
use std::path::{Path, PathBuf};

use loopx_kernel::seams::StoreError;

const HEADER: usize = 32;
const FRAME_HEADER: usize = 24;
const MAGIC_LE: u32 = 0x377f_0682;
const MAGIC_BE: u32 = 0x377f_0683;
const VERSION: u32 = 3_007_000;

/// What a scan of a store's write-ahead log found: committed transactions that SQLite would
/// drop because a frame before them is damaged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WalDamage {
    /// The log file.
    pub log: PathBuf,
    /// The first frame (counted from 1) that does not verify; 0 when the log's header is
    /// damaged, which drops every frame.
    pub broken_frame: u64,
    /// The complete frames the log holds.
    pub frames: u64,
    /// The frames SQLite would keep: those up to the last commit before the damage.
    pub kept_frames: u64,
    /// The commit frames after the damage that verify on their own: each one is a committed
    /// transaction SQLite would drop.
    pub lost_commits: u64,
}

impl std::fmt::Display for WalDamage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let at = if self.broken_frame == 0 {
            "its header".to_owned()
        } else {
            format!("frame {} of {}", self.broken_frame, self.frames)
        };
        write!(
            f,
            "the write-ahead log `{}` is damaged at {at}: {} committed transaction(s) after the damage would be dropped (SQLite keeps only the first {} frame(s))",
            self.log.display(),
            self.lost_commits,
            self.kept_frames,
        )
    }
}

/// The `-wal` file next to the database `path`.
pub(super) fn log_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push("-wal");
    name.into()
}

fn word(bytes: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
}

/// SQLite's WAL checksum: over 32-bit words read in the log's byte order, two at a time,
/// continuing from `(s1, s2)`.
fn checksum(big_endian: bool, (mut s1, mut s2): (u32, u32), data: &[u8]) -> (u32, u32) {
    for pair in data.chunks_exact(8) {
        let read = |b: &[u8]| {
            let b = [b[0], b[1], b[2], b[3]];
            if big_endian {
                u32::from_be_bytes(b)
            } else {
                u32::from_le_bytes(b)
            }
        };
        s1 = s1.wrapping_add(read(&pair[..4])).wrapping_add(s2);
        s2 = s2.wrapping_add(read(&pair[4..])).wrapping_add(s1);
    }
    (s1, s2)
}

/// Scans the log of the database at `path` once. `page_size` is the database's, used when the
/// log's own header is damaged. `None`: no log, or nothing committed would be dropped.
pub(super) fn scan(path: &Path, page_size: u32) -> Result<Option<WalDamage>, StoreError> {
    let log = log_path(path);
    let unreadable = |error: std::io::Error| StoreError::Unavailable {
        detail: format!("cannot read `{}`: {error}", log.display()),
    };
    let file = match File::open(&log) {
        Ok(file) => file,
        Err(error) if error.kind() == ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(unreadable(error)),
    };
    let mut reader = BufReader::with_capacity(1 << 16, file);
    let mut header = [0_u8; HEADER];
    match reader.read_exact(&mut header) {
        Ok(()) => {}
        // Shorter than a header: SQLite treats it as an empty log, and so does a new writer.
        Err(error) if error.kind() == ErrorKind::UnexpectedEof => return Ok(None),
        Err(error) => return Err(unreadable(error)),
    }
    let magic = word(&header, 0);
    let big_endian = magic & 1 == 1;
    let stored = (word(&header, 24), word(&header, 28));
    let header_page = word(&header, 8);
    let header_valid = (magic == MAGIC_LE || magic == MAGIC_BE)
        && word(&header, 4) == VERSION
        && header_page.is_power_of_two()
        && (512..=65_536).contains(&header_page)
        && checksum(big_endian, (0, 0), &header[..24]) == stored;
    let page = if header_valid { header_page } else { page_size };
    let Ok(page) = usize::try_from(page) else {
        return Ok(None);
    };
    // With a damaged header the salts of the first frame stand in for the header's.
    let mut salts = header_valid.then(|| (word(&header, 16), word(&header, 20)));

    let mut frame = vec![0_u8; FRAME_HEADER + page];
    let mut previous = stored;
    let mut frames = 0_u64;
    let mut kept_frames = 0_u64;
    let mut broken: Option<u64> = (!header_valid).then_some(0);
    let mut lost_commits = 0_u64;
    loop {
        match reader.read_exact(&mut frame) {
            Ok(()) => {}
            Err(error) if error.kind() == ErrorKind::UnexpectedEof => break,
            Err(error) => return Err(unreadable(error)),
        }
        frames += 1;
        let frame_salts = (word(&frame, 8), word(&frame, 12));
        let frame_sum = (word(&frame, 16), word(&frame, 20));
        let salts_match = *salts.get_or_insert(frame_salts) == frame_salts;
        let sum = checksum(
            big_endian,
            checksum(big_endian, previous, &frame[..8]),
            &frame[FRAME_HEADER..],
        );
        // In the intact prefix `previous` is the running checksum, so this is SQLite's own
        // test; past a break it tests the frame against its predecessor alone.
        let verifies = salts_match && word(&frame, 0) != 0 && sum == frame_sum;
        let commits = word(&frame, 4) != 0;
        match broken {
            None if verifies => {
                if commits {
                    kept_frames = frames;
                }
            }
            None => broken = Some(frames),
            Some(_) => {
                if verifies && commits {
                    lost_commits += 1;
                }
            }
        }
        previous = frame_sum;
    }
    Ok(match broken {
        Some(broken_frame) if lost_commits > 0 => Some(WalDamage {
            log,
            broken_frame,
            frames,
            kept_frames,
            lost_commits,
        }),
        _ => None,
    })
}

/// Scans the log until two scans agree: a log another process is writing right now can read
/// as broken mid-frame once, but not twice in the same place. A log that keeps changing is in
/// use, and its writers' shared index (not a recovery) is what a new connection reads.
pub(super) fn settled_scan(path: &Path, page_size: u32) -> Result<Option<WalDamage>, StoreError> {
    let mut last = scan(path, page_size)?;
    for _ in 0..5 {
        if last.is_none() {
            return Ok(None);
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
        let again = scan(path, page_size)?;
        if again == last {
            return Ok(again);
        }
        last = again;
    }
    Ok(None)
}
