//! The Lambda `bootstrap`: serves invocations from the Lambda Runtime API, one pass each.

use lambda_runtime::{LambdaEvent, service_fn};
use promoter::logging::{LogFormat, init};
use serde_json::Value;
use std::process::ExitCode;
use std::time::{Duration, SystemTime};

/// Set by Lambda; without them the runtime crate would panic, so say what this binary is instead.
const LAMBDA_ENV: [&str; 4] = [
    "AWS_LAMBDA_RUNTIME_API",
    "AWS_LAMBDA_FUNCTION_NAME",
    "AWS_LAMBDA_FUNCTION_MEMORY_SIZE",
    "AWS_LAMBDA_FUNCTION_VERSION",
];

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

/// Counts allocations so that a health-check worker (this binary, started again) can bound each
/// evaluation's memory; outside a worker the count has no limit.
#[global_allocator]
static ALLOC: promoter::health::limits::CountingAlloc = promoter::health::limits::CountingAlloc;

fn main() -> ExitCode {
    // Health checks run in workers: this same binary, started again with a hidden argument.
    if let Some(code) = promoter::health::worker::serve_if_asked() {
        return code;
    }
    serve()
}

#[tokio::main]
async fn serve() -> ExitCode {
    let missing: Vec<&str> = LAMBDA_ENV
        .into_iter()
        .filter(|v| std::env::var_os(v).is_none())
        .collect();
    if !missing.is_empty() {
        eprintln!(
            "bootstrap is promoter's AWS Lambda entry point and runs only inside Lambda ({} not set); run `promoter step` elsewhere",
            missing.join(", ")
        );
        return ExitCode::from(2);
    }
    // A refused request is the pass's: its hint names the pass's ClusterRole.
    promoter::roles::set_pass_process();
    // JSON lines are what CloudWatch Logs Insights queries best.
    let format = match env("PROMOTER_LOG_FORMAT").as_deref() {
        Some("human") => LogFormat::Human,
        _ => LogFormat::Json,
    };
    init(
        format,
        &env("PROMOTER_LOG_LEVEL").unwrap_or_else(|| "info".into()),
    );
    let handler = service_fn(|event: LambdaEvent<Value>| async move {
        let deadline = SystemTime::UNIX_EPOCH + Duration::from_millis(event.context.deadline);
        promoter_lambda::handler::handle(event.payload, Some(deadline), &env).await
    });
    match lambda_runtime::run(handler).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = %e, "the Lambda runtime stopped");
            ExitCode::FAILURE
        }
    }
}
