//! Exit codes, after sysexits(3) and flock(1).

/// A usage error: bad arguments, key, TTL, duration or URL.
pub(crate) const USAGE: u8 = 64;
/// The backend failed: refused, authentication, TLS, protocol, timeout.
pub(crate) const BACKEND: u8 = 69;
/// The lock was lost while the command ran.
pub(crate) const LOST: u8 = 70;
/// The lock was not obtained within `--wait` (override with `--conflict-exit-code`).
pub(crate) const CONFLICT: u8 = 75;
/// The command was found but could not be executed.
pub(crate) const CANNOT_EXECUTE: u8 = 126;
/// The command was not found.
pub(crate) const NOT_FOUND: u8 = 127;

/// The exit code for a library error.
pub(crate) fn for_error(error: &lockwise::Error) -> u8 {
    match error {
        e if e.is_invalid_input() => USAGE,
        lockwise::Error::LockLost { .. } => LOST,
        lockwise::Error::WaitTimeout { .. } => CONFLICT,
        _ => BACKEND,
    }
}
