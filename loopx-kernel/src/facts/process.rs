//! Processes: how a command ended, as `loopx observe process` records it (on a stream the
//! caller names).

fact_schema! {
    /// A command's outcome. Its streams are the caller's.
    pub struct ProcessResult, read as ProcessResultRead, kind "process", prefix "" {
        /// How it ended, e.g. `exit 0` or `signal 9`.
        req exit: String,
        /// True for exit code zero.
        req success: bool,
        /// The SHA-256 of its standard output.
        req stdout_sha256: String,
        /// The SHA-256 of its standard error.
        req stderr_sha256: String,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::{Fact, FactSchema};

    #[test]
    fn a_result_round_trips() {
        let result = ProcessResult {
            exit: "exit 1".into(),
            success: false,
            stdout_sha256: "ab".into(),
            stderr_sha256: "cd".into(),
        };
        let read = ProcessResult::read(&result.to_facts());
        assert_eq!(
            (read.exit, read.success),
            (Fact::Known("exit 1".to_owned()), Fact::Known(false))
        );
    }
}
