//! The `zkfle` command line.

/// Runs the command line and returns the process exit status.
pub fn run() -> i32 {
    0
}
