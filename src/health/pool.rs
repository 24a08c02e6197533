//! Warm health-check workers (`worker.rs`) and the watchdog around them.
//!
//! A request goes to an idle worker (or a new one); each answer must come within
//! [`TIME_LIMIT`] of the previous one (one evaluation each), else the worker is killed and the
//! check fails with the time limit. A worker that dies (memory limit, stack overflow) is replaced.
//! A script or rule set that hit a hard limit once is not run again in the same pass: it fails
//! everywhere at once, and cannot hold the workers one second per cluster.
//!
//! Where the running program is not a promoter binary (a test harness, a library user), workers
//! cannot be started: evaluations then run in-process on blocking threads, bounded in time only
//! where the interpreter can be interrupted, and a warning says so once.

use super::limits::{MEMORY_LIMIT, MESSAGE_LIMIT, TIME_LIMIT, truncate};
use super::worker::{self, Reply, Request};
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout};
use tokio::sync::{OnceCell, Semaphore};

/// The longest answer line accepted from a worker (its messages are truncated well below).
const MAX_LINE: u64 = 64 * 1024;
/// Starting a worker and reading its greeting.
const START_TIMEOUT: Duration = Duration::from_secs(5);

/// Why the next object of a request is not healthy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Problem {
    /// The script's verdict, with its message.
    Unhealthy(String),
    NoRuleTrue,
    /// The script could not be evaluated (error, budget, limit).
    Error(String),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Every object is healthy.
    Healthy,
    /// The check cannot run at all (does not compile, or hit a hard limit earlier in this pass).
    Invalid(String),
    /// Object `index` is the first that is not healthy.
    Object { index: usize, problem: Problem },
}

struct Worker {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    stderr: Arc<Mutex<Vec<u8>>>,
}

enum Mode {
    Process(PathBuf),
    InProcess,
}

pub struct Pool {
    program: Option<PathBuf>,
    mode: OnceCell<Mode>,
    idle: Mutex<Vec<Worker>>,
    slots: Semaphore,
    /// Requests (by script and rules) that hit a hard limit in this pass, and why.
    poisoned: Mutex<HashMap<u64, String>>,
}

/// Workers at once: evaluations are CPU-bound and short; a few more than the cores keep the checks
/// going while one evaluation runs into its time limit.
pub fn default_workers() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(2)
        .clamp(2, 4)
}

fn key(r: &Request) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    r.script.hash(&mut h);
    r.rules.hash(&mut h);
    h.finish()
}

impl Pool {
    /// `program`: the worker executable; default `PROMOTER_HEALTH_WORKER`, else this program.
    pub fn new(program: Option<PathBuf>, workers: usize) -> Pool {
        Pool {
            program,
            mode: OnceCell::new(),
            idle: Mutex::new(Vec::new()),
            slots: Semaphore::new(workers.max(1)),
            poisoned: Mutex::new(HashMap::new()),
        }
    }

    fn program(&self) -> Option<PathBuf> {
        self.program
            .clone()
            .or_else(|| std::env::var_os("PROMOTER_HEALTH_WORKER").map(PathBuf::from))
            .or_else(|| std::env::current_exe().ok())
    }

    async fn mode(&self) -> &Mode {
        self.mode
            .get_or_init(|| async {
                let Some(program) = self.program() else {
                    tracing::warn!("health checks run in-process: the program's path is unknown");
                    return Mode::InProcess;
                };
                match spawn(&program).await {
                    Ok(w) => {
                        self.release(w);
                        Mode::Process(program)
                    }
                    Err(e) => {
                        tracing::warn!(program = %program.display(), error = %e,
                            "health checks run in-process, without hard limits: this program cannot serve as a health-check worker");
                        Mode::InProcess
                    }
                }
            })
            .await
    }

    /// Whether evaluations run in worker processes (with hard limits).
    pub async fn isolated(&self) -> bool {
        matches!(self.mode().await, Mode::Process(_))
    }

    fn release(&self, w: Worker) {
        if let Ok(mut idle) = self.idle.lock() {
            idle.push(w);
        }
    }

    fn poison(&self, key: u64, why: &str) {
        if let Ok(mut p) = self.poisoned.lock() {
            p.insert(key, why.to_string());
        }
    }

    /// Evaluates one check's script and rules against its objects.
    pub async fn run(&self, request: Request) -> Verdict {
        let key = key(&request);
        if let Some(why) = self.poisoned.lock().ok().and_then(|p| p.get(&key).cloned()) {
            return Verdict::Invalid(format!(
                "{why} (on another cluster, earlier in this pass; not run again until the next pass)"
            ));
        }
        let Ok(_permit) = self.slots.acquire().await else {
            return Verdict::Invalid("the health-check workers are shut down".into());
        };
        let (verdict, limit_hit) = match self.mode().await {
            Mode::InProcess => in_process(request).await,
            Mode::Process(program) => {
                let idle = self.idle.lock().ok().and_then(|mut i| i.pop());
                let worker = match idle {
                    Some(w) => w,
                    None => match spawn(program).await {
                        Ok(w) => w,
                        Err(e) => {
                            return Verdict::Invalid(format!(
                                "the health-check worker could not be started: {e}"
                            ));
                        }
                    },
                };
                let (verdict, worker, limit_hit) = exchange(worker, &request).await;
                if let Some(w) = worker {
                    self.release(w);
                }
                (verdict, limit_hit)
            }
        };
        if let Some(why) = limit_hit {
            self.poison(key, &why);
        }
        verdict
    }
}

async fn spawn(program: &std::path::Path) -> Result<Worker, String> {
    let mut child = tokio::process::Command::new(program)
        .arg(worker::ARG)
        .env_clear()
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("starting {}: {e}", program.display()))?;
    let (Some(stdin), Some(stdout), Some(mut err)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        return Err("the worker's pipes are missing".into());
    };
    // The last few KiB of the worker's stderr tell why it died.
    let stderr = Arc::new(Mutex::new(Vec::new()));
    let sink = stderr.clone();
    tokio::spawn(async move {
        let mut buf = [0u8; 4096];
        while let Ok(n) = err.read(&mut buf).await {
            if n == 0 {
                break;
            }
            if let Ok(mut s) = sink.lock() {
                s.extend_from_slice(&buf[..n]);
                let excess = s.len().saturating_sub(8192);
                s.drain(..excess);
            }
        }
    });
    let mut w = Worker {
        child,
        stdin,
        stdout: BufReader::new(stdout),
        stderr,
    };
    match tokio::time::timeout(START_TIMEOUT, read_reply(&mut w)).await {
        Ok(Ok(Reply::Hello(v))) if v == worker::HELLO => Ok(w),
        Ok(Ok(other)) => Err(format!("unexpected greeting {other:?}")),
        Ok(Err(e)) => Err(e),
        Err(_) => Err(format!("no greeting within {START_TIMEOUT:?}")),
    }
}

async fn read_reply(w: &mut Worker) -> Result<Reply, String> {
    let mut line = Vec::new();
    let n = (&mut w.stdout)
        .take(MAX_LINE)
        .read_until(b'\n', &mut line)
        .await
        .map_err(|e| format!("reading from the worker: {e}"))?;
    if n == 0 {
        return Err("the worker exited".into());
    }
    serde_json::from_slice(&line).map_err(|_| {
        format!(
            "unexpected answer from the worker: {:?}",
            truncate(&String::from_utf8_lossy(&line), 200)
        )
    })
}

/// Why a worker that stopped answering stopped.
async fn death(mut w: Worker) -> String {
    let _ = w.child.start_kill();
    let status = tokio::time::timeout(Duration::from_secs(2), w.child.wait()).await;
    // Let the stderr reader take the last bytes.
    tokio::time::sleep(Duration::from_millis(20)).await;
    let stderr = w
        .stderr
        .lock()
        .map(|s| String::from_utf8_lossy(&s).into_owned())
        .unwrap_or_default();
    if stderr.contains("memory allocation of") {
        format!(
            "memory limit of {} MiB exceeded; the evaluation was stopped",
            MEMORY_LIMIT / (1024 * 1024)
        )
    } else if stderr.contains("overflowed its stack") {
        "the evaluation overflowed its stack and was stopped".into()
    } else {
        let status = match status {
            Ok(Ok(s)) => s.to_string(),
            _ => "unknown status".into(),
        };
        format!(
            "the evaluator stopped ({status}): {}",
            truncate(stderr.trim(), 200)
        )
    }
}

/// What the answers of one request say so far.
#[derive(Default)]
struct Collector {
    healthy: usize,
    verdict: Option<Verdict>,
}

impl Collector {
    /// `true` when the request is finished.
    fn take(&mut self, reply: Reply) -> bool {
        let problem = match reply {
            Reply::Done => return true,
            Reply::Healthy => {
                self.healthy += 1;
                return false;
            }
            Reply::Hello(_) => return false,
            Reply::Invalid(m) => {
                self.verdict = Some(Verdict::Invalid(truncate(&m, MESSAGE_LIMIT + 128)));
                return false;
            }
            Reply::Unhealthy(m) => Problem::Unhealthy(truncate(&m, MESSAGE_LIMIT + 128)),
            Reply::NoRuleTrue => Problem::NoRuleTrue,
            Reply::Error(m) => Problem::Error(truncate(&m, MESSAGE_LIMIT + 128)),
        };
        self.verdict.get_or_insert(Verdict::Object {
            index: self.healthy,
            problem,
        });
        false
    }

    /// The evaluation in progress was stopped for `why`.
    fn stopped(self, why: &str) -> Verdict {
        match self.verdict {
            Some(v) => v,
            None => Verdict::Object {
                index: self.healthy,
                problem: Problem::Error(why.to_string()),
            },
        }
    }

    fn finish(self) -> Verdict {
        self.verdict.unwrap_or(Verdict::Healthy)
    }
}

/// One request to one worker: the verdict, the worker if it may serve again, and the hard limit
/// hit (if any).
async fn exchange(mut w: Worker, request: &Request) -> (Verdict, Option<Worker>, Option<String>) {
    let time_limit = format!(
        "time limit of {} s exceeded; the evaluation was stopped",
        TIME_LIMIT.as_secs()
    );
    let mut line = match serde_json::to_vec(request) {
        Ok(l) => l,
        Err(e) => return (Verdict::Invalid(e.to_string()), Some(w), None),
    };
    line.push(b'\n');
    let mut c = Collector::default();
    let write = async {
        w.stdin.write_all(&line).await?;
        w.stdin.flush().await
    };
    match tokio::time::timeout(TIME_LIMIT, write).await {
        Ok(Ok(())) => {}
        Ok(Err(_)) => {
            let why = death(w).await;
            return (c.stopped(&why), None, Some(why));
        }
        Err(_) => {
            let _ = w.child.start_kill();
            return (c.stopped(&time_limit), None, Some(time_limit));
        }
    }
    loop {
        match tokio::time::timeout(TIME_LIMIT, read_reply(&mut w)).await {
            Ok(Ok(reply)) => {
                if c.take(reply) {
                    return (c.finish(), Some(w), None);
                }
            }
            Ok(Err(_)) => {
                let why = death(w).await;
                return (c.stopped(&why), None, Some(why));
            }
            Err(_) => {
                let _ = w.child.start_kill();
                return (c.stopped(&time_limit), None, Some(time_limit));
            }
        }
    }
}

/// Without a worker program: the same evaluation on a blocking thread (abandoned if it overruns).
async fn in_process(request: Request) -> (Verdict, Option<String>) {
    let objects = request.objects.len().max(1) as u32;
    let task = tokio::task::spawn_blocking(move || {
        let mut replies = Vec::new();
        worker::handle(request, &mut |r| {
            replies.push(r);
            true
        });
        replies
    });
    match tokio::time::timeout(TIME_LIMIT * (objects + 1), task).await {
        Ok(Ok(replies)) => {
            let mut c = Collector::default();
            for r in replies {
                if c.take(r) {
                    break;
                }
            }
            (c.finish(), None)
        }
        Ok(Err(e)) => {
            let why = format!("the evaluation panicked: {e}");
            (Verdict::Invalid(format!("script error: {why}")), Some(why))
        }
        Err(_) => {
            let why = "time limit exceeded".to_string();
            (Verdict::Invalid(format!("script error: {why}")), Some(why))
        }
    }
}
