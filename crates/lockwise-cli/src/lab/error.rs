//! The error that stops a scenario.

/// An error that stops a scenario (an actor failed or went silent, a server went away).
#[derive(Debug)]
pub(super) struct LabError(pub(super) String);

impl std::fmt::Display for LabError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl<E: std::error::Error> From<E> for LabError {
    fn from(e: E) -> Self {
        LabError(e.to_string())
    }
}

pub(super) type LabResult<T> = Result<T, LabError>;
