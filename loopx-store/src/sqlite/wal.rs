//! Reading the write-ahead log before SQLite does, to tell a crash's leftovers from damage to
//! committed frames.
//!
//! SQLite's recovery reads the log from its header: a frame counts while its salts are the
//! header's and its checksum continues the cumulative checksum of every frame before it; the
//! last such frame that marks a commit ends the log, and everything after the first frame that
//! fails is dropped without a word (the first checkpoint then makes that permanent).
//!
//! A crash leaves frames after that point that are no one's committed work:
//! - the last transaction of a killed writer, half written;
//! - a killed writer's whole transaction that never reached the shared index (the writer died
//!   between writing its commit frame and publishing it), later partly overwritten by another
//!   writer that started again where the index ended, and possibly killed in turn;
//! - frames of an earlier generation of the log (other salts) past the end of the current one.
//!
//! Each of those is either unverifiable or a transaction whose own frames do not all chain: a
//! writer that overwrote some of them chained its frames to a different history. A transaction
//! a writer published, by contrast, had its frames synced (`synchronous=FULL`) and was never
//! overwritten, since later writers start after it. So a commit frame past the first broken
//! frame proves committed work only when its *whole* transaction verifies — every frame from
//! the one after the previous commit frame up to it carries the log's salts and continues its
//! predecessor's checksum. Such a transaction is one SQLite would drop, and that is reported
//! as damage instead of dropped.
//!
//! What the format cannot tell apart: damage inside the last committed transaction (no whole
//! transaction follows it) looks exactly like a torn tail, and that transaction is dropped
//! silently.

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
    /// The transactions after the damage that verify whole, each frame against its
    /// predecessor: each one is a committed transaction SQLite would drop.
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
    // Past the break: whether every frame of the transaction read so far verifies.
    let mut whole = true;
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
            None => {
                broken = Some(frames);
                whole = false;
            }
            Some(_) => {
                whole &= verifies;
                if whole && commits {
                    lost_commits += 1;
                }
            }
        }
        if commits {
            // The next frame begins a transaction of its own.
            whole = true;
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

#[cfg(test)]
mod tests {
    //! Logs built frame by frame the way SQLite writes them, so that each crash leftover and
    //! each kind of damage is a case of its own.

    use super::*;

    const PAGE: usize = 512;
    const SALTS: (u32, u32) = (7, 11);

    /// A write-ahead log under construction: a little-endian header, then frames.
    struct Log {
        bytes: Vec<u8>,
    }

    /// One writer's view of the log: the checksum it continues from.
    #[derive(Clone, Copy)]
    struct Writer {
        sum: (u32, u32),
        salts: (u32, u32),
    }

    fn put(bytes: &mut [u8], at: usize, value: u32) {
        bytes[at..at + 4].copy_from_slice(&value.to_be_bytes());
    }

    impl Log {
        fn new() -> (Log, Writer) {
            let mut header = vec![0_u8; HEADER];
            put(&mut header, 0, MAGIC_LE);
            put(&mut header, 4, VERSION);
            put(&mut header, 8, u32::try_from(PAGE).unwrap());
            put(&mut header, 16, SALTS.0);
            put(&mut header, 20, SALTS.1);
            let sum = checksum(false, (0, 0), &header[..24]);
            put(&mut header, 24, sum.0);
            put(&mut header, 28, sum.1);
            let writer = Writer { sum, salts: SALTS };
            (Log { bytes: header }, writer)
        }

        fn offset(frame: usize) -> usize {
            HEADER + (frame - 1) * (FRAME_HEADER + PAGE)
        }

        /// Writes frame number `at` (from 1) as `writer` would, continuing its checksum.
        fn write(&mut self, writer: &mut Writer, at: usize, fill: u8, commits: bool) {
            let mut frame = vec![fill; FRAME_HEADER + PAGE];
            put(&mut frame, 0, u32::try_from(at).unwrap());
            put(&mut frame, 4, u32::from(commits) * 100);
            put(&mut frame, 8, writer.salts.0);
            put(&mut frame, 12, writer.salts.1);
            let sum = checksum(
                false,
                checksum(false, writer.sum, &frame[..8]),
                &frame[FRAME_HEADER..],
            );
            put(&mut frame, 16, sum.0);
            put(&mut frame, 20, sum.1);
            writer.sum = sum;
            let start = Log::offset(at);
            if self.bytes.len() < start + frame.len() {
                self.bytes.resize(start + frame.len(), 0);
            }
            self.bytes[start..start + frame.len()].copy_from_slice(&frame);
        }

        /// Writes a transaction of `pages` frames from frame `from`, the last one committing.
        fn transaction(&mut self, writer: &mut Writer, from: usize, pages: usize, fill: u8) {
            for at in from..from + pages {
                self.write(writer, at, fill, at == from + pages - 1);
            }
        }

        /// What a writer killed between a frame's header and its page leaves: the header of
        /// its frame `at` over the page that was there.
        fn header_only(&mut self, writer: &mut Writer, at: usize, fill: u8, commits: bool) {
            let start = Log::offset(at);
            let old = self.bytes[start + FRAME_HEADER..start + FRAME_HEADER + PAGE].to_vec();
            self.write(writer, at, fill, commits);
            self.bytes[start + FRAME_HEADER..start + FRAME_HEADER + PAGE].copy_from_slice(&old);
        }

        fn scan(&self) -> Option<WalDamage> {
            let dir = tempfile::tempdir().unwrap();
            let db = dir.path().join("store.db");
            std::fs::write(log_path(&db), &self.bytes).unwrap();
            scan(&db, u32::try_from(PAGE).unwrap()).unwrap()
        }
    }

    /// Three published transactions: frames 1–2, 3–5 and 6.
    fn published() -> (Log, Writer) {
        let (mut log, mut writer) = Log::new();
        log.transaction(&mut writer, 1, 2, 1);
        log.transaction(&mut writer, 3, 3, 2);
        log.transaction(&mut writer, 6, 1, 3);
        (log, writer)
    }

    #[test]
    fn an_intact_log_and_a_torn_tail_are_sound() {
        let (mut log, mut writer) = published();
        assert_eq!(log.scan(), None);
        // The last transaction half written: its frames verify, no commit frame follows.
        log.write(&mut writer, 7, 4, false);
        log.bytes.truncate(log.bytes.len() - PAGE / 2);
        assert_eq!(log.scan(), None);
    }

    #[test]
    fn an_unpublished_transaction_partly_overwritten_by_later_writers_is_no_damage() {
        // A writer killed after its commit frame but before publishing it: frames 7–10.
        let (mut log, writer) = published();
        let mut killed = writer;
        log.transaction(&mut killed, 7, 4, 4);
        // The next writer starts again at frame 7 and is killed after frame 7's header.
        let mut next = writer;
        log.header_only(&mut next, 7, 5, false);
        assert_eq!(log.scan(), None, "frames 8–10 chain among themselves");
        // Another writer overwrites frames 7–8 whole and commits, and a third is killed after
        // the header of frame 9, a commit of its own.
        let mut whole = writer;
        log.transaction(&mut whole, 7, 2, 6);
        let mut third = whole;
        log.header_only(&mut third, 9, 7, true);
        assert_eq!(log.scan(), None);
    }

    #[test]
    fn frames_of_an_earlier_generation_are_no_damage() {
        let (mut log, _) = published();
        // The log restarted with new salts and one transaction over frames 1–2; frames 3–6
        // still hold the old generation.
        let restarted = Writer {
            sum: checksum(false, (0, 0), &log.bytes[..24]),
            salts: (SALTS.0 + 1, 99),
        };
        put(&mut log.bytes, 16, restarted.salts.0);
        put(&mut log.bytes, 20, restarted.salts.1);
        let sum = checksum(false, (0, 0), &log.bytes[..24]);
        put(&mut log.bytes, 24, sum.0);
        put(&mut log.bytes, 28, sum.1);
        let mut writer = Writer { sum, ..restarted };
        log.transaction(&mut writer, 1, 2, 9);
        assert_eq!(log.scan(), None);
    }

    #[test]
    fn a_flipped_byte_in_a_committed_frame_is_damage() {
        let (mut log, _) = published();
        let at = Log::offset(4) + FRAME_HEADER + 100;
        log.bytes[at] ^= 0x40;
        let damage = log.scan().expect("damage before a committed transaction");
        assert_eq!(
            (damage.broken_frame, damage.kept_frames, damage.lost_commits),
            (4, 2, 1)
        );
        // In the last committed transaction it looks like a torn tail.
        let (mut log, _) = published();
        log.bytes[Log::offset(6) + FRAME_HEADER + 100] ^= 0x40;
        assert_eq!(log.scan(), None);
    }

    #[test]
    fn a_damaged_header_drops_every_commit() {
        let (mut log, _) = published();
        log.bytes[17] ^= 0x01;
        let damage = log.scan().expect("a damaged header");
        assert_eq!((damage.broken_frame, damage.lost_commits), (0, 3));
    }
}
