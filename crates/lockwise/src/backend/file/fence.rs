//! The fencing counter of a key: tokens that strictly increase on every grant, across crashes
//! and reboots, with one `fsync` per [`RESERVED`] grants instead of two per grant.
//!
//! Two files, written under the key's `flock`:
//!
//! - `<sha256>.fence` holds a **ceiling**: no token above it was ever issued. It is replaced
//!   durably (write, `fsync`, rename, `fsync` of the directory) *before* a token above the
//!   old ceiling is issued, and it only ever grows. So whatever a power loss leaves on disk,
//!   the ceiling there is at least every token issued before it.
//! - `<sha256>.issued` holds the last token issued, with the boot it was issued in and the
//!   ceiling it was issued under, in a record of fixed length overwritten in place by one
//!   `pwrite` (no rename: replacing a file on ext4 costs more than the whole rest of a grant)
//!   and without `fsync`. A power loss may leave it old, torn, empty or missing, but a power
//!   loss is a reboot, and a record that does not name this boot is never trusted (a torn
//!   one can only name a boot from before). Within one boot the page cache is the truth for
//!   every process (a process killed at any point leaves either the old record or the new
//!   one: one small write), so a record of this boot under the current ceiling is the last
//!   token issued.
//!
//! The next token is one above the record when it can be trusted, and one above the ceiling
//! when it cannot (a reboot, a lost or unreadable record, a ceiling written by a version of
//! lockwise that keeps no record, which only ever raises it); a token above the ceiling
//! first raises it by [`RESERVED`]. Tokens still strictly increase, and may skip up to
//! `RESERVED - 1` values after a reboot. Without a boot id (`/proc` unreadable), no record
//! is trusted: every grant raises the ceiling durably, as before the record existed.
//!
//! A version of lockwise that wrote the last token itself to `.fence` (durably, on every
//! grant) and this one share a directory safely: for both, `.fence` is an upper bound of the
//! tokens issued; the old one's writes change the ceiling, so this one stops trusting its
//! record and goes above the ceiling.

use std::fs::{self, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use super::Paths;
use super::lease_file::{boot_id, replace};

pub(super) const FENCE_HEADER: &str = "lockwise-fence 1";
const ISSUED_HEADER: &str = "lockwise-issued 1";

/// How far one durable write of the ceiling reaches: the grants that need no `fsync` after
/// it, and the most values a reboot can skip.
pub(super) const RESERVED: u64 = 64;

/// Issues the next fencing token of the key whose files are `paths`: above `at_least` (a
/// token seen in the key's lease) and every token issued before. Call it under the key's
/// `flock`. The token is issued once this returns: its ceiling is on disk, and its record is
/// written.
pub(super) fn issue(paths: &Paths, at_least: u64) -> io::Result<u64> {
    let mut ceiling = read_fence(&paths.fence)?;
    // Without a boot id there is no record to trust (nor to write).
    let mut record = trusted_boot()
        .map(|boot| {
            let mut file = OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(issued_path(paths))?;
            let mut text = String::new();
            // An unreadable record (not UTF-8: torn) is one not to trust, not an error.
            let read = file.read_to_string(&mut text).map(|_| ());
            io::Result::Ok((file, boot, read.map(|()| text)))
        })
        .transpose()?;
    let last = match &record {
        Some((_, boot, Ok(text))) => parse_issued(text, boot, ceiling),
        _ => None,
    };
    let fence = last
        .unwrap_or(ceiling)
        .max(at_least)
        .checked_add(1)
        .ok_or_else(|| io::Error::other("fencing counter exhausted"))?;
    if fence > ceiling {
        // Reserve only where a record will say what was issued: otherwise every grant goes
        // above the ceiling, and reserving would only make tokens skip.
        ceiling = match record {
            Some(_) => fence.saturating_add(RESERVED - 1),
            None => fence,
        };
        replace(
            paths,
            &paths.fence,
            &format!("{FENCE_HEADER}\n{ceiling}\n"),
            true,
        )?;
    }
    if let Some((file, boot, read)) = &mut record {
        let text = encode(boot, ceiling, fence);
        file.write_all_at(text.as_bytes(), 0)?;
        if !matches!(read, Ok(old) if old.len() <= text.len()) {
            // Whatever was there beyond a record's length goes (none of ours is longer).
            file.set_len(text.len() as u64)?;
        }
    }
    Ok(fence)
}

/// The `.issued` file of a key.
pub(super) fn issued_path(paths: &Paths) -> PathBuf {
    paths.dir.join(format!("{}.issued", paths.stem))
}

/// This boot's id, when there is one to tell boots apart by.
fn trusted_boot() -> Option<&'static str> {
    Some(boot_id()).filter(|id| *id != "unknown")
}

/// The record of `last`, issued in `boot` under `ceiling`: of fixed width, so that a record
/// never leaves the end of a longer one behind it.
fn encode(boot: &str, ceiling: u64, last: u64) -> String {
    format!("{ISSUED_HEADER}\nboot {boot}\nceiling {ceiling:020}\nlast {last:020}\n")
}

/// The last token issued, from the record `text`, if it was written in `boot` (this one) under
/// `ceiling` (see the module's documentation); `None` when it cannot be trusted.
fn parse_issued(text: &str, boot: &str, ceiling: u64) -> Option<u64> {
    let mut lines = text.lines();
    let mut field = |name: &str| lines.next()?.strip_prefix(name)?.strip_prefix(' ');
    if field("lockwise-issued")? != "1" || field("boot")? != boot {
        return None;
    }
    let recorded: u64 = field("ceiling")?.parse().ok()?;
    let last: u64 = field("last")?.parse().ok()?;
    // Byte for byte what this boot writes: nothing torn, nothing left over.
    (recorded == ceiling && last <= ceiling && text == encode(boot, recorded, last)).then_some(last)
}

/// The ceiling in the `.fence` file at `path`: 0 when there is none yet; an error when it
/// cannot be read, never a guess (restarting the counter would reissue tokens).
pub(super) fn read_fence(path: &Path) -> io::Result<u64> {
    match fs::read_to_string(path) {
        Ok(text) => {
            let mut lines = text.lines();
            match (lines.next(), lines.next().and_then(|n| n.parse().ok())) {
                (Some(FENCE_HEADER), Some(n)) => Ok(n),
                _ => Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("corrupt fencing counter {}", path.display()),
                )),
            }
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(0),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths(dir: &Path) -> Paths {
        let stem = "k".to_owned();
        Paths {
            dir: dir.to_owned(),
            lock: dir.join("k.lock"),
            lease: dir.join("k.lease"),
            held: dir.join("k.held"),
            fence: dir.join("k.fence"),
            stem,
        }
    }

    fn tempdir() -> io::Result<tempfile::TempDir> {
        tempfile::tempdir()
    }

    /// Within a boot, tokens count up one by one with one durable write per `RESERVED`.
    #[test]
    fn tokens_count_up_and_the_ceiling_moves_once_per_reservation() -> io::Result<()> {
        let dir = tempdir()?;
        let p = paths(dir.path());
        let tokens: Vec<u64> = (0..RESERVED + 2)
            .map(|_| issue(&p, 0))
            .collect::<io::Result<_>>()?;
        assert_eq!(tokens, (1..=RESERVED + 2).collect::<Vec<_>>());
        assert_eq!(read_fence(&p.fence)?, 2 * RESERVED, "raised twice");
        Ok(())
    }

    /// What a power loss can leave of the record (nothing, an empty file, a record of the
    /// boot before, a torn one) makes the next token go above the ceiling on disk, so above
    /// every token issued before.
    #[test]
    fn an_untrusted_record_goes_above_the_ceiling() -> io::Result<()> {
        let dir = tempdir()?;
        let p = paths(dir.path());
        for _ in 0..5 {
            issue(&p, 0)?;
        }
        let record = fs::read_to_string(issued_path(&p))?;
        assert!(
            record.ends_with("\nlast 00000000000000000005\n"),
            "{record}"
        );
        for damage in [
            None,
            Some(String::new()),
            Some(record.replace(boot_id(), "another-boot")),
            Some(record[..record.len() - 4].to_owned()),
            Some(format!("{record}x")),
        ] {
            match &damage {
                Some(text) => fs::write(issued_path(&p), text)?,
                None => fs::remove_file(issued_path(&p))?,
            }
            let ceiling = read_fence(&p.fence)?;
            assert!(ceiling >= 5);
            assert_eq!(issue(&p, 0)?, ceiling + 1, "after {damage:?}");
            assert_eq!(
                read_fence(&p.fence)?,
                ceiling + RESERVED,
                "raised before issuing"
            );
            // The record is whole again: the next grant trusts it.
            assert_eq!(issue(&p, 0)?, ceiling + 2, "after {damage:?}");
            assert_eq!(read_fence(&p.fence)?, ceiling + RESERVED);
        }
        Ok(())
    }

    /// A version that writes its token to `.fence` itself changes the ceiling: the record
    /// of this version is not trusted any more, and its next token is above that one.
    #[test]
    fn a_ceiling_written_by_an_older_version_is_respected() -> io::Result<()> {
        let dir = tempdir()?;
        let p = paths(dir.path());
        assert_eq!(issue(&p, 0)?, 1);
        // The old version: reads the ceiling (RESERVED), issues one above, writes it back.
        fs::write(&p.fence, format!("{FENCE_HEADER}\n{}\n", RESERVED + 1))?;
        assert_eq!(issue(&p, 0)?, RESERVED + 2);
        // A lease's token above the record is gone past too.
        assert_eq!(issue(&p, 1_000)?, 1_001);
        assert!(read_fence(&p.fence)? >= 1_001);
        Ok(())
    }

    #[test]
    fn a_corrupt_ceiling_is_an_error_not_a_restart() -> io::Result<()> {
        let dir = tempdir()?;
        let p = paths(dir.path());
        fs::write(&p.fence, "lockwise-fence 1\nnot a number\n")?;
        assert_eq!(
            issue(&p, 0).map_err(|e| e.kind()),
            Err(io::ErrorKind::InvalidData)
        );
        Ok(())
    }
}
