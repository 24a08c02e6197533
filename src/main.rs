//! The `promoter` binary: everything is in [`cli`].

mod cli;

use std::process::ExitCode;

/// Counts allocations so that a health-check worker (this binary, started again) can bound each
/// evaluation's memory; outside a worker the count has no limit.
#[global_allocator]
static ALLOC: promoter::health::limits::CountingAlloc = promoter::health::limits::CountingAlloc;

fn main() -> ExitCode {
    if let Some(code) = promoter::health::worker::serve_if_asked() {
        return code;
    }
    cli::main()
}
