//! The exit codes of the `promoter` commands, in one place: the commands return these, and the
//! book's reference (`promoter reference`) lists them, so what a CI job or a CronJob gates on is
//! said once. `status --exit-code` maps a phase to its code ([`crate::pass::Phase::exit_code`]).

/// The command did its work.
pub const SUCCESS: u8 = 0;
/// The command could not run: bad flags or arguments, an unreachable or refusing API server, an
/// unreadable file.
pub const CANNOT_RUN: u8 = 1;
/// The command ran and found something that needs attention (see [`EXIT_CODES`] per command).
pub const ATTENTION: u8 = 2;

/// What one exit code of some commands means.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExitCodeDoc {
    pub code: u8,
    /// The commands it applies to.
    pub commands: &'static str,
    pub meaning: &'static str,
}

/// Every exit code a command returns, but `status --exit-code`'s phases.
pub const EXIT_CODES: &[ExitCodeDoc] = &[
    ExitCodeDoc {
        code: SUCCESS,
        commands: "every command",
        meaning: "it did its work; for `step`, also when promotions are failing, failed, blocked or rolled back: they wait for a person, not for the stepper (unless `--fail-on promotions`)",
    },
    ExitCodeDoc {
        code: CANNOT_RUN,
        commands: "every command",
        meaning: "it could not run: a usage error, an unreachable or unauthorized API server, a file that cannot be read",
    },
    ExitCodeDoc {
        code: ATTENTION,
        commands: "`step`",
        meaning: "the pass ran, but a read or write it needed for some promotion failed after its retries (the stepper needs attention); with `--fail-on promotions`, also while any promotion is in error (`Failing`, `Failed`, `Blocked`, `RollingBack`, `RolledBack`, `RollbackFailed`)",
    },
    ExitCodeDoc {
        code: ATTENTION,
        commands: "`simulate`, `plan`",
        meaning: "some promotion did not complete within the simulated time",
    },
    ExitCodeDoc {
        code: ATTENTION,
        commands: "`lint`",
        meaning: "some document has an error (warnings alone exit 0)",
    },
    ExitCodeDoc {
        code: ATTENTION,
        commands: "`doctor`",
        meaning: "a check failed",
    },
];
