//! The explorer: breadth first over every state the model can reach within its bounds, each state
//! once (by [`fingerprint`]), keeping the graph (ids, edges, parents) but not the states; then the
//! properties that need the whole graph: liveness (from every state a completing path exists:
//! backward reachability from the complete states) and quiescence (a pass alone, with nothing else
//! happening, stops writing).

use super::canon::fingerprint;
use super::ghost;
use super::setup::Bounds;
use super::state::{Pass, State, Step};
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{RwLock, mpsc};
use std::time::{Duration, Instant};

/// A broken invariant, with the steps from the initial state that break it.
#[derive(Clone, Debug)]
pub struct Violation {
    pub messages: Vec<String>,
    pub trace: Vec<Step>,
}

#[derive(Debug, Default)]
pub struct Report {
    pub states: usize,
    pub transitions: usize,
    /// States where every promotion is complete.
    pub complete: usize,
    /// The longest shortest path from the initial state.
    pub depth: usize,
    pub elapsed: Duration,
    /// Bytes the graph held at the end (ids, parents, edges), and the largest frontier's states.
    pub graph_bytes: usize,
    pub largest_frontier: usize,
    pub violations: Vec<Violation>,
    /// False when exploration stopped early (a violation, or the state limit).
    pub exhaustive: bool,
    /// States left unexpanded at the depth bound (`Bounds::max_depth`): every state within it
    /// was checked, liveness and quiescence were not.
    pub beyond_depth: usize,
}

impl Report {
    pub fn summary(&self) -> String {
        format!(
            "{} states, {} transitions, depth {}, {} complete states, {:.1} s, graph {} MiB, largest frontier {} states, {} violations{}{}",
            self.states,
            self.transitions,
            self.depth,
            self.complete,
            self.elapsed.as_secs_f64(),
            self.graph_bytes / (1 << 20),
            self.largest_frontier,
            self.violations.len(),
            if self.exhaustive || self.beyond_depth > 0 {
                ""
            } else {
                " (stopped early)"
            },
            if self.beyond_depth > 0 {
                format!(
                    " (depth bound: {} states beyond it unexpanded, liveness not checked)",
                    self.beyond_depth
                )
            } else {
                String::new()
            }
        )
    }
}

/// What one state is, for the properties checked on the graph.
#[derive(Clone, Copy, Default)]
struct Flags {
    complete: bool,
    /// Every pass idle.
    quiet: bool,
    /// Pass 0 idle.
    first_idle: bool,
}

struct Graph {
    ids: HashMap<u128, u32>,
    parent: Vec<(u32, Step)>,
    flags: Vec<Flags>,
    edges: Vec<(u32, u32, Step)>,
}

impl Graph {
    fn trace(&self, mut id: u32) -> Vec<Step> {
        let mut out = Vec::new();
        while id != 0 {
            let (p, s) = self.parent[id as usize];
            out.push(s);
            id = p;
        }
        out.reverse();
        out
    }
}

/// The successors of one state: (step, fingerprint, the state if it may be new, violations).
type Expanded = Vec<(Step, u128, Option<State>, Vec<String>)>;

/// A worker's answer for one chunk of the frontier.
type Chunk = Result<Vec<(u32, Expanded)>, String>;

fn expand(s: &State, bounds: &Bounds, known: &HashMap<u128, u32>) -> Result<Expanded, String> {
    let mut out = Vec::new();
    for step in s.candidates(bounds) {
        let Some(mut next) = s
            .apply(step, bounds)
            .map_err(|e| format!("{}: {}", step.describe(), e.0))?
        else {
            continue;
        };
        let violations = ghost::update(s, step, &mut next, bounds);
        let fp = fingerprint(&next);
        let keep = !known.contains_key(&fp);
        out.push((step, fp, keep.then_some(next), violations));
    }
    Ok(out)
}

fn flags(s: &State, bounds: &Bounds) -> Flags {
    Flags {
        complete: s.complete(bounds),
        quiet: s.quiet(),
        first_idle: matches!(s.passes.first(), Some(Pass::Idle) | None),
    }
}

fn threads() -> usize {
    std::env::var("PROMOTER_MODEL_THREADS")
        .ok()
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| {
            std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1)
        })
        .max(1)
}

/// Explores every state within `bounds`, checks the invariants on every step, then liveness and
/// quiescence. Stops at the first level with a violation.
pub fn explore(bounds: &Bounds) -> anyhow::Result<Report> {
    let started = Instant::now();
    // A scripted start's steps begin every trace, so that traces replay from the fresh store.
    let (prefix, init) = super::start::prefix(bounds)?;
    let mut g = Graph {
        ids: HashMap::new(),
        parent: vec![(0, Step::Tick)],
        flags: vec![flags(&init, bounds)],
        edges: Vec::new(),
    };
    let known: RwLock<HashMap<u128, u32>> = RwLock::new(HashMap::from([(fingerprint(&init), 0)]));
    let mut report = Report::default();
    let workers = threads();
    // Workers live as long as the exploration, so that their memos (`memo`, `canon`) do too.
    std::thread::scope(|scope| -> anyhow::Result<()> {
        let (done_tx, done_rx) = mpsc::channel::<(usize, Chunk)>();
        let mut jobs = Vec::new();
        for _ in 0..workers {
            let (tx, rx) = mpsc::channel::<(usize, Vec<(u32, State)>)>();
            jobs.push(tx);
            let done = done_tx.clone();
            let known = &known;
            scope.spawn(move || {
                for (seq, chunk) in rx {
                    let ids = known.read().unwrap_or_else(|p| p.into_inner());
                    let out = chunk
                        .iter()
                        .map(|(id, s)| Ok((*id, expand(s, bounds, &ids)?)))
                        .collect::<Result<Vec<_>, String>>();
                    drop(ids);
                    drop(chunk);
                    if done.send((seq, out)).is_err() {
                        return;
                    }
                }
            });
        }
        let mut frontier: Vec<(u32, State)> = vec![(0, init)];
        while !frontier.is_empty() {
            if bounds.max_depth.is_some_and(|d| report.depth >= d) {
                report.beyond_depth = frontier.len();
                break;
            }
            report.largest_frontier = report.largest_frontier.max(frontier.len());
            report.depth += 1;
            let mut next_frontier = Vec::new();
            // Batches bound the memory of the successors not yet deduplicated.
            let mut rest = frontier;
            while !rest.is_empty() {
                let tail = rest.split_off(rest.len().min(2048 * workers));
                let batch = std::mem::replace(&mut rest, tail);
                let per = batch.len().div_ceil(workers).max(1);
                let mut sent = 0;
                let mut batch = batch;
                while !batch.is_empty() {
                    let tail = batch.split_off(batch.len().min(per));
                    let chunk = std::mem::replace(&mut batch, tail);
                    jobs[sent % workers]
                        .send((sent, chunk))
                        .map_err(|_| anyhow::anyhow!("a worker stopped"))?;
                    sent += 1;
                }
                let mut results: Vec<(usize, Chunk)> =
                    (0..sent).filter_map(|_| done_rx.recv().ok()).collect();
                if results.len() != sent {
                    anyhow::bail!("a worker stopped");
                }
                results.sort_by_key(|(seq, _)| *seq);
                let mut ids = known.write().unwrap_or_else(|p| p.into_inner());
                for (_, chunk) in results {
                    for (from, expanded) in chunk.map_err(|e| anyhow::anyhow!(e))? {
                        for (step, fp, state, violations) in expanded {
                            let to = match ids.get(&fp) {
                                Some(id) => *id,
                                None => {
                                    let Some(state) = state else {
                                        anyhow::bail!("a state seen as known was not recorded");
                                    };
                                    let id = g.parent.len() as u32;
                                    ids.insert(fp, id);
                                    g.parent.push((from, step));
                                    g.flags.push(flags(&state, bounds));
                                    next_frontier.push((id, state));
                                    id
                                }
                            };
                            g.edges.push((from, to, step));
                            if !violations.is_empty() && report.violations.len() < 8 {
                                let mut trace = prefix.clone();
                                trace.extend(g.trace(from));
                                trace.push(step);
                                report.violations.push(Violation {
                                    messages: violations,
                                    trace,
                                });
                            }
                        }
                    }
                }
                if g.parent.len() > bounds.max_states {
                    anyhow::bail!(
                        "more than {} states: raise the bound max_states or lower the others",
                        bounds.max_states
                    );
                }
            }
            frontier = next_frontier;
            if std::env::var_os("PROMOTER_MODEL_PROGRESS").is_some() {
                eprintln!(
                    "depth {}: {} states, frontier {}, {:.0} s",
                    report.depth,
                    g.parent.len(),
                    frontier.len(),
                    started.elapsed().as_secs_f64()
                );
            }
            if !report.violations.is_empty() {
                break;
            }
        }
        drop(jobs);
        Ok(())
    })?;
    g.ids = known.into_inner().unwrap_or_else(|p| p.into_inner());
    report.states = g.parent.len();
    report.transitions = g.edges.len();
    report.complete = g.flags.iter().filter(|f| f.complete).count();
    report.exhaustive = report.violations.is_empty() && report.beyond_depth == 0;
    if report.exhaustive {
        liveness(&g, &mut report);
        quiescence(&g, &mut report);
        for v in &mut report.violations {
            v.trace.splice(0..0, prefix.iter().copied());
        }
    }
    report.graph_bytes = g.ids.capacity() * 24
        + g.parent.capacity() * std::mem::size_of::<(u32, Step)>()
        + g.edges.capacity() * std::mem::size_of::<(u32, u32, Step)>();
    report.elapsed = started.elapsed();
    Ok(report)
}

/// From every state a complete state is reachable: backward from the complete states over the
/// reversed edges, every state must be reached. (A property of the graph, CTL's AG EF complete:
/// some path completes, not every path; crash loops and a Sveltos that keeps failing are
/// legitimate paths that never complete.)
fn liveness(g: &Graph, report: &mut Report) {
    let n = g.parent.len();
    let mut start = vec![0u32; n + 1];
    for (_, to, _) in &g.edges {
        start[*to as usize + 1] += 1;
    }
    for i in 0..n {
        start[i + 1] += start[i];
    }
    let mut fill = start.clone();
    let mut preds = vec![0u32; g.edges.len()];
    for (from, to, _) in &g.edges {
        preds[fill[*to as usize] as usize] = *from;
        fill[*to as usize] += 1;
    }
    let mut reach = vec![false; n];
    let mut queue: VecDeque<u32> = VecDeque::new();
    for (i, f) in g.flags.iter().enumerate() {
        if f.complete {
            reach[i] = true;
            queue.push_back(i as u32);
        }
    }
    while let Some(s) = queue.pop_front() {
        for p in &preds[start[s as usize] as usize..start[s as usize + 1] as usize] {
            if !reach[*p as usize] {
                reach[*p as usize] = true;
                queue.push_back(*p);
            }
        }
    }
    let stuck: Vec<usize> = (0..n).filter(|i| !reach[*i]).collect();
    if let Some(first) = stuck.first() {
        report.exhaustive = false;
        report.violations.push(Violation {
            messages: vec![format!(
                "liveness: from {} states no path completes the rollouts (the first reached is the last of this trace)",
                stuck.len()
            )],
            trace: g.trace(*first as u32),
        });
    }
}

/// A pass alone (pass 0, no other actor, no fault) over a state where no pass is in flight: pass
/// after pass, it reaches a world over which it writes nothing, and never writes in a cycle.
fn quiescence(g: &Graph, report: &mut Report) {
    let mut out: HashMap<u32, Vec<(Step, u32)>> = HashMap::new();
    for (from, to, step) in &g.edges {
        if step.pass() == Some(0)
            && matches!(step, Step::Observe(_) | Step::Prepare(_) | Step::Write(_))
        {
            out.entry(*from).or_default().push((*step, *to));
        }
    }
    // One whole pass from an idle state: where it ends and how many writes it made.
    let solo = |start: u32| -> Option<(u32, usize)> {
        let mut at = start;
        let mut writes = 0;
        for _ in 0..10_000 {
            let (step, to) = *out.get(&at)?.first()?;
            if matches!(step, Step::Write(_)) {
                writes += 1;
            }
            at = to;
            if g.flags[at as usize].first_idle {
                return Some((at, writes));
            }
        }
        None
    };
    let mut settled: HashSet<u32> = HashSet::new();
    for (id, f) in g.flags.iter().enumerate() {
        if !f.quiet || settled.contains(&(id as u32)) {
            continue;
        }
        let mut chain = vec![id as u32];
        let mut seen: HashSet<u32> = HashSet::from([id as u32]);
        loop {
            let at = *chain.last().unwrap_or(&0);
            if settled.contains(&at) {
                break;
            }
            let Some((next, writes)) = solo(at) else {
                break;
            };
            if writes == 0 {
                break;
            }
            if !seen.insert(next) || !g.flags[next as usize].quiet {
                report.exhaustive = false;
                report.violations.push(Violation {
                    messages: vec![format!(
                        "quiescence: a pass alone keeps writing ({writes} writes in its last pass, {} passes from the end of this trace)",
                        chain.len()
                    )],
                    trace: g.trace(id as u32),
                });
                return;
            }
            chain.push(next);
        }
        settled.extend(chain);
    }
}
