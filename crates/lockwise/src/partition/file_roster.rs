//! Rosters beside the lease files: `<dir>/<sha256("<group>/roster")>.roster` holding
//! `version N` and the roster text, read and replaced under the `flock` of that name (the file
//! backend's own), written to a temporary file and renamed over the old one.

use std::io::{self, Write as _};
use std::path::Path;

use async_trait::async_trait;

use super::roster::RosterStore;
use crate::backend::file::FileBackend;
use crate::error::Result;

/// Rosters in the file backend's directory.
#[derive(Debug, Clone)]
pub(crate) struct FileRosters(pub(crate) FileBackend);

fn name(group: &str) -> String {
    format!("{group}/roster")
}

fn read(path: &Path) -> io::Result<(u64, Option<String>)> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok((0, None)),
        Err(e) => return Err(e),
    };
    let (first, rest) = text.split_once('\n').unwrap_or((&text, ""));
    let version = first
        .strip_prefix("version ")
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| io::Error::other(format!("{} is not a roster file", path.display())))?;
    Ok((version, Some(rest.to_owned())))
}

#[async_trait]
impl RosterStore for FileRosters {
    async fn load(&self, group: &str) -> Result<(u64, Option<String>)> {
        self.0.with_file(&name(group), "roster", read).await
    }

    async fn swap(&self, group: &str, expected: u64, roster: &str) -> Result<bool> {
        self.0
            .with_file(&name(group), "roster", |path| {
                if read(path)?.0 != expected {
                    return Ok(false);
                }
                let tmp = path.with_extension("roster.tmp");
                let mut file = std::fs::File::create(&tmp)?;
                write!(file, "version {}\n{roster}", expected + 1)?;
                file.sync_all()?;
                std::fs::rename(&tmp, path)?;
                Ok(true)
            })
            .await
    }

    async fn remove(&self, group: &str) -> Result<()> {
        self.0
            .with_file(&name(group), "roster", |path| {
                match std::fs::remove_file(path) {
                    Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
                    _ => Ok(()),
                }
            })
            .await
    }
}
