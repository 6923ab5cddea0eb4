//! Exit codes, after sysexits(3) and flock(1).

/// `lockwise doctor`: a check failed.
pub(crate) const FAILED_CHECK: u8 = 1;
/// A usage error: bad arguments, key, TTL, duration or URL; a queue store not migrated.
pub(crate) const USAGE: u8 = 64;
/// The input data is bad: a line of `queue enqueue --jsonl` that is not a valid job
/// (sysexits' EX_DATAERR).
pub(crate) const DATA: u8 = 65;
/// What a command names does not exist: `queue retry` of an id that is no dead job (sysexits'
/// EX_NOINPUT).
pub(crate) const NO_SUCH_JOB: u8 = 66;
/// The backend failed: refused, authentication, TLS, protocol, timeout.
pub(crate) const BACKEND: u8 = 69;
/// The lock was lost while the command ran.
pub(crate) const LOST: u8 = 70;
/// Standard output could not be written: the reader went away (`| head`) or the disk is
/// full (sysexits' EX_IOERR). What the command did to the store stands.
pub(crate) const OUTPUT: u8 = 74;
/// The lock was not obtained within `--wait` (override with `--conflict-exit-code`); a
/// partition member's id is in use by a live member.
pub(crate) const CONFLICT: u8 = 75;
/// The command was found but could not be executed.
pub(crate) const CANNOT_EXECUTE: u8 = 126;
/// The command was not found.
pub(crate) const NOT_FOUND: u8 = 127;

/// The exit code for a library error.
pub(crate) fn for_error(error: &lockwise::Error) -> u8 {
    match error {
        e if e.is_invalid_input() => USAGE,
        // A --schema that names no queue (or a missing `migrate`): no retry fixes it.
        lockwise::Error::NotMigrated { .. } => USAGE,
        lockwise::Error::LockLost { .. } => LOST,
        lockwise::Error::WaitTimeout { .. } | lockwise::Error::MemberIdInUse { .. } => CONFLICT,
        _ => BACKEND,
    }
}

/// A failure that ends a command with `code` after `message` is printed to stderr.
pub(crate) struct Failure {
    pub(crate) code: u8,
    pub(crate) message: String,
}

impl Failure {
    /// A usage error (exit 64).
    pub(crate) fn usage(message: impl Into<String>) -> Self {
        Failure {
            code: USAGE,
            message: message.into(),
        }
    }

    /// Prints the message as `lockwise: …` and returns the exit code. A stderr that is
    /// gone too (`lockwise lab 2>&1 | head`) leaves the exit code to tell.
    pub(crate) fn report(self) -> u8 {
        use std::io::Write;
        let _ = writeln!(std::io::stderr(), "lockwise: {}", self.message);
        self.code
    }
}

impl From<lockwise::Error> for Failure {
    fn from(e: lockwise::Error) -> Self {
        let message = match &e {
            // The library's message names its own call too; here only the command helps.
            lockwise::Error::NotMigrated { store, outdated } => format!(
                "the queue's {store} {}: run `lockwise queue migrate` with the same --url and \
                 --schema first",
                if *outdated {
                    "needs a migration"
                } else {
                    "does not exist"
                }
            ),
            e => e.to_string(),
        };
        Failure {
            code: for_error(&e),
            message,
        }
    }
}

impl From<lockwise_bench::Error> for Failure {
    /// What lockwise said keeps its own exit code; the tooling's own failures are a usage
    /// error (a bad URL or option) or a backend failure.
    fn from(e: lockwise_bench::Error) -> Self {
        match e {
            lockwise_bench::Error::Lockwise(e) => e.into(),
            e => Failure {
                code: if e.is_invalid_input() { USAGE } else { BACKEND },
                message: e.to_string(),
            },
        }
    }
}

/// Writes `text` and a newline to standard output and flushes it. A reader that went away
/// (`lockwise queue enqueue --jsonl < jobs | head -1`) is a failure of its own (exit
/// [`OUTPUT`]), not a panic, and `done` says what had already happened in the store.
pub(crate) fn print_line(text: &str, done: &str) -> Result<(), Failure> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    writeln!(out, "{text}")
        .and_then(|()| out.flush())
        .map_err(|e| Failure {
            code: OUTPUT,
            message: format!("cannot write to standard output ({e}); {done}"),
        })
}

/// `writeln!` into a `String`, the text a command prints at its end with [`print_line`]:
/// writing into memory cannot fail, so a closed stdout is met in one place.
macro_rules! outln {
    ($out:expr) => {
        $out.push('\n')
    };
    ($out:expr, $($arg:tt)*) => {{
        use std::fmt::Write as _;
        // A `String` accepts every write; the result is only for a `Display` that fails.
        let _ = writeln!($out, $($arg)*);
    }};
}
pub(crate) use outln;
