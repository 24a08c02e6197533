//! The health-check worker: the promoter binary (or the Lambda `bootstrap`) started again with the
//! hidden first argument [`ARG`]. It reads one [`Request`] per line on stdin (one check, on one
//! cluster, against the objects it fetched), evaluates the script and rules against each object,
//! and answers one [`Reply`] per line on stdout. It never does I/O for the script, holds no
//! credentials (its environment is empty), and runs under the limits of `limits.rs`; the parent
//! (`pool.rs`) kills it when an evaluation overruns.

use super::limits::{self, MEMORY_LIMIT, MESSAGE_LIMIT, truncate};
use super::{cel, lua};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::io::{BufRead, Write};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// The hidden first argument that makes a promoter binary a worker.
pub const ARG: &str = "__health-worker";
/// The first line a worker writes: the parent checks it before trusting the program.
pub const HELLO: &str = "promoter-health-worker/1";

/// Set in a worker process only: the memory limit is then enforced (never in the parent).
static IN_WORKER: AtomicBool = AtomicBool::new(false);

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Request {
    pub script: Option<String>,
    /// `evaluateCEL` rules, (name, rule).
    pub rules: Vec<(String, String)>,
    pub metrics: BTreeMap<String, f64>,
    /// Objects named by the script's literal `getResource` calls, fetched beforehand.
    pub resources: Vec<(lua::ResourceRef, Value)>,
    /// The objects to evaluate against (`None`: a metric-only check, run once without an object).
    pub objects: Vec<Option<Value>>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Reply {
    Hello(String),
    /// The script or a rule does not compile: the whole check fails (no object is evaluated).
    Invalid(String),
    /// The next object is healthy.
    Healthy,
    /// The next object is not healthy, with the script's message; no further object is evaluated.
    Unhealthy(String),
    /// The next object satisfies no `evaluateCEL` rule; no further object is evaluated.
    NoRuleTrue,
    /// The next object could not be evaluated (runtime error, budget); no further object is.
    Error(String),
    /// The request is finished and the interpreter released (its finalizers, if any, have run).
    Done,
}

/// Serves as a worker if this process was started as one; the exit code then.
/// Call it first thing in `main`, before any runtime or logger is started.
pub fn serve_if_asked() -> Option<ExitCode> {
    if std::env::args_os().nth(1).as_deref() != Some(std::ffi::OsStr::new(ARG)) {
        return None;
    }
    Some(serve())
}

fn write_reply(out: &mut impl Write, reply: &Reply) -> bool {
    let Ok(mut line) = serde_json::to_vec(reply) else {
        return false;
    };
    line.push(b'\n');
    out.write_all(&line).and_then(|()| out.flush()).is_ok()
}

/// The evaluating thread's stack: parsers recurse per nesting level, and the length and nesting
/// limits of rules are sized against this (a stack overflow still only ends this worker).
const STACK: usize = 64 * 1024 * 1024;

fn serve() -> ExitCode {
    IN_WORKER.store(true, Ordering::Relaxed);
    let thread = std::thread::Builder::new()
        .name("health-worker".into())
        .stack_size(STACK)
        .spawn(|| {
            // After the thread exists, so that its stack is inside the address-space ceiling.
            limits::harden_process();
            serve_requests()
        });
    match thread.map(|t| t.join()) {
        Ok(Ok(code)) => code,
        _ => ExitCode::FAILURE,
    }
}

fn serve_requests() -> ExitCode {
    let stdin = std::io::stdin();
    let mut stdout = std::io::stdout().lock();
    if !write_reply(&mut stdout, &Reply::Hello(HELLO.into())) {
        return ExitCode::FAILURE;
    }
    for line in stdin.lock().lines() {
        let Ok(line) = line else { break };
        let request = serde_json::from_str::<Request>(&line);
        drop(line);
        match request {
            Ok(request) => handle(request, &mut |r| write_reply(&mut stdout, &r)),
            Err(e) => {
                let ok = write_reply(
                    &mut stdout,
                    &Reply::Invalid(format!("malformed request to the health-check worker: {e}")),
                ) && write_reply(&mut stdout, &Reply::Done);
                if !ok {
                    break;
                }
            }
        }
    }
    ExitCode::SUCCESS
}

fn limit_memory() {
    if IN_WORKER.load(Ordering::Relaxed) {
        limits::limit_from_now(MEMORY_LIMIT);
    }
}

/// Evaluates one request, calling `reply` for each answer (it returns false to stop), ending with
/// [`Reply::Done`] once everything of the request has been released.
pub fn handle(request: Request, reply: &mut dyn FnMut(Reply) -> bool) {
    limit_memory();
    evaluate(request, reply);
    limits::unlimited();
    reply(Reply::Done);
}

fn evaluate(request: Request, reply: &mut dyn FnMut(Reply) -> bool) {
    let msg = |s: String| truncate(&s, MESSAGE_LIMIT);
    // CEL first: a typo in a rule is reported whatever the script says.
    let programs = if request.rules.is_empty() {
        Vec::new()
    } else {
        match cel::compile(&request.rules) {
            Ok(p) => p,
            Err(e) => {
                reply(Reply::Invalid(msg(e)));
                return;
            }
        }
    };
    let evaluator = match &request.script {
        Some(script) => {
            let resources = Arc::new(request.resources.iter().cloned().collect());
            match lua::Evaluator::new(script, &request.metrics, resources) {
                Ok(e) => Some(e),
                Err(e) => {
                    reply(Reply::Invalid(msg(e)));
                    return;
                }
            }
        }
        None => None,
    };
    for obj in &request.objects {
        limit_memory();
        if let Some(evaluator) = &evaluator {
            match evaluator.evaluate(obj.as_ref()) {
                Err(e) => {
                    reply(Reply::Error(msg(e)));
                    return;
                }
                Ok(o) if !o.healthy => {
                    reply(Reply::Unhealthy(msg(o.message)));
                    return;
                }
                Ok(_) => {}
            }
        }
        if let Some(obj) = obj.as_ref().filter(|_| !programs.is_empty()) {
            match cel::evaluate(&programs, obj) {
                Ok(Some(_)) => {}
                Ok(None) => {
                    reply(Reply::NoRuleTrue);
                    return;
                }
                Err(e) => {
                    reply(Reply::Error(msg(e)));
                    return;
                }
            }
        }
        if !reply(Reply::Healthy) {
            return;
        }
    }
}
