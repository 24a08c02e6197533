//! `simulate --dashboard`: the simulation played on a virtual clock the page controls (play, pause,
//! speed, the next pass now, a jump to the next change). Passes run at the simulation's ticks as
//! the clock reaches them, exactly as `simulate` runs them.
//!
//! The clock never shows a time whose pass has not run: it runs at the rate asked until the next
//! pass is due, and waits there until that pass has run (every write of a pass is stamped with
//! the pass's own time). So when passes take longer than the time between two of them at the rate
//! asked, the simulation is slower than asked, and says so with the rate it reaches. The page gets
//! the clock after every pass, with where it waits next, and runs its own copy never past that:
//! never ahead of the simulation, and never backwards.

use super::hub::{Clock, ClockView, Hub};
use super::model::Row;
use crate::sim::{Simulation, Step};
use chrono::{DateTime, Duration, Utc};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tokio::sync::{mpsc, oneshot};

/// The simulation's virtual clock: `base`, plus real time since `since` times `rate` while it
/// runs, never past `hold`.
pub struct SimClock {
    state: Mutex<ClockState>,
}

#[derive(Clone)]
struct ClockState {
    base: DateTime<Utc>,
    since: Instant,
    rate: f64,
    running: bool,
    /// The next pass is due then: the clock waits there until it has run.
    hold: Option<DateTime<Utc>>,
    /// The simulation reached its end (`--until`) at this time.
    ended: Option<DateTime<Utc>>,
    /// (real, virtual) as each pass played at the current rate finished: the rate reached.
    samples: VecDeque<(Instant, DateTime<Utc>)>,
}

/// How far back the rate reached is measured.
const MEASURED: std::time::Duration = std::time::Duration::from_secs(5);

impl ClockState {
    fn now(&self) -> DateTime<Utc> {
        if !self.running {
            return self.base;
        }
        let virtual_ms = self.since.elapsed().as_secs_f64() * self.rate * 1000.0;
        let t = self.base + Duration::milliseconds(virtual_ms as i64);
        match self.hold {
            Some(hold) => t.min(hold.max(self.base)),
            None => t,
        }
    }

    /// Takes the clock's time as its new base (before its rate, state or hold changes).
    fn rebase(&mut self) {
        self.base = self.now();
        self.since = Instant::now();
    }

    /// Virtual seconds per real second over the passes of the last few seconds.
    fn reached(&self) -> Option<f64> {
        let (r0, v0) = self.samples.front()?;
        let (r1, v1) = self.samples.back()?;
        let real = r1.duration_since(*r0).as_secs_f64();
        (real >= 1.0).then(|| (*v1 - *v0).num_milliseconds() as f64 / 1000.0 / real)
    }
}

impl SimClock {
    pub fn new(start: DateTime<Utc>, rate: f64, running: bool) -> SimClock {
        SimClock {
            state: Mutex::new(ClockState {
                base: start,
                since: Instant::now(),
                rate,
                running,
                hold: Some(start),
                ended: None,
                samples: VecDeque::new(),
            }),
        }
    }

    /// `simulate --dashboard --speed S`: running at S, or paused at the first speed the page
    /// offers when S is 0 (what Play then plays at).
    pub fn from_speed(start: DateTime<Utc>, speed: f64) -> SimClock {
        if speed > 0.0 {
            SimClock::new(start, speed.clamp(1.0, MAX_RATE), true)
        } else {
            SimClock::new(start, SPEEDS[0], false)
        }
    }

    fn update<T>(&self, f: impl FnOnce(&mut ClockState) -> T) -> T {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        s.rebase();
        f(&mut s)
    }

    /// The pass due at `at` runs now: the clock stands at `at` (forward: it never passed its
    /// hold, and `at` is that hold or later) until [`SimClock::passed`].
    fn arrive(&self, at: DateTime<Utc>) {
        self.update(|s| {
            s.base = s.base.max(at);
            s.hold = Some(s.base);
        });
    }

    /// The pass at the clock's time has run; the clock goes on (if it runs) and waits at `hold`.
    /// `played`: the pass came when the running clock reached it (not a step or jump asked for),
    /// so it counts in the rate reached.
    fn passed(&self, hold: DateTime<Utc>, played: bool) {
        self.update(|s| {
            s.hold = Some(hold);
            if played && s.running {
                s.samples.push_back((s.since, s.base));
                while s.samples.len() > 2
                    && s.samples
                        .front()
                        .is_some_and(|(r, _)| r.elapsed() > MEASURED)
                {
                    s.samples.pop_front();
                }
            } else {
                s.samples.clear();
            }
        });
    }

    fn set_running(&self, running: bool) {
        self.update(|s| {
            if s.running != running {
                s.samples.clear();
            }
            s.running = running && s.ended.is_none();
        });
    }

    fn set_rate(&self, rate: f64) {
        self.update(|s| {
            s.rate = rate;
            s.samples.clear();
        });
    }

    fn end(&self, at: DateTime<Utc>) {
        self.update(|s| {
            s.base = s.base.max(at);
            s.running = false;
            s.ended = Some(at);
            s.samples.clear();
        });
    }

    fn running(&self) -> bool {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).running
    }

    fn ended(&self) -> Option<DateTime<Utc>> {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).ended
    }
}

impl Clock for SimClock {
    fn now(&self) -> DateTime<Utc> {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).now()
    }
    fn rate(&self) -> (f64, bool) {
        let s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        (s.rate, s.running)
    }
    fn view(&self) -> ClockView {
        let s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        ClockView {
            now: s.now(),
            rate: s.rate,
            running: s.running,
            hold: s.hold,
            reached: s.reached(),
            ended: s.ended,
        }
    }
}

/// What the page asks of the clock.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Control {
    Play,
    Pause,
    /// Virtual seconds per real second (1 to 86,400).
    Speed(f64),
    /// The next pass, now.
    Step,
    /// To the next time something changes, and its pass.
    Skip,
}

/// The speeds the page offers (and `--speed`'s default, the first).
pub const SPEEDS: [f64; 4] = [60.0, 600.0, 3600.0, 1.0];

/// The fastest clock: a day per second.
pub const MAX_RATE: f64 = 86_400.0;

/// Sends the page's requests to the simulation's driver.
#[derive(Clone)]
pub struct SimHandle {
    tx: mpsc::Sender<(Control, oneshot::Sender<String>)>,
}

impl SimHandle {
    /// What the driver did, in a sentence for the page.
    pub async fn control(&self, c: Control) -> anyhow::Result<String> {
        let (reply, answer) = oneshot::channel();
        self.tx
            .send((c, reply))
            .await
            .map_err(|_| anyhow::anyhow!("the simulation has stopped"))?;
        answer
            .await
            .map_err(|_| anyhow::anyhow!("the simulation has stopped"))
    }
}

/// How long one "skip to next change" may run passes before it says where it got to.
const SKIP_BUDGET: std::time::Duration = std::time::Duration::from_secs(10);

/// Plays `sim` on `clock`: runs each pass when the clock reaches its tick, and what the page
/// asks. Returns the handle the page's requests go through, and the task.
pub fn drive(
    mut sim: Simulation<'static>,
    clock: Arc<SimClock>,
    hub: Arc<Hub>,
) -> (SimHandle, tokio::task::JoinHandle<()>) {
    let (tx, mut rx) = mpsc::channel::<(Control, oneshot::Sender<String>)>(16);
    // The fake API server stamps what it stores with the virtual time.
    let stamps = clock.clone();
    sim.server().set_clock(Arc::new(move || stamps.now()));
    let task = tokio::spawn(async move {
        let opts = sim.options().clone();
        let end = opts.start + opts.until;
        // Where the clock waits for the pass at `next`: that pass, or the simulation's end.
        let hold = |next: DateTime<Utc>| next.min(end);
        let mut next_tick = opts.start;
        clock.passed(hold(next_tick), false);
        loop {
            if clock.running() && clock.now() >= hold(next_tick) {
                if next_tick > end {
                    clock.end(end);
                    hub.clock_changed();
                    continue;
                }
                pass(
                    &mut sim,
                    &clock,
                    &hub,
                    next_tick,
                    hold(next_tick + opts.tick),
                    true,
                )
                .await;
                next_tick += opts.tick;
                hub.clock_changed();
                continue;
            }
            let wait = if clock.running() {
                let (rate, _) = clock.rate();
                let ahead = (hold(next_tick) - clock.now()).num_milliseconds().max(0) as f64;
                std::time::Duration::from_millis((ahead / rate.max(1e-3)) as u64)
                    .min(std::time::Duration::from_millis(500))
            } else {
                std::time::Duration::from_secs(3600)
            };
            let asked = tokio::select! {
                _ = tokio::time::sleep(wait) => None,
                asked = rx.recv() => match asked {
                    Some(a) => Some(a),
                    None => return,
                },
            };
            let Some((control, reply)) = asked else {
                continue;
            };
            let ended = clock.ended().map(ended_at);
            let said = match (control, ended) {
                (Control::Play | Control::Step | Control::Skip, Some(ended)) => ended,
                (Control::Play, None) => {
                    clock.set_running(true);
                    "playing".to_string()
                }
                (Control::Pause, _) => {
                    clock.set_running(false);
                    "paused".to_string()
                }
                (Control::Speed(rate), _) => {
                    let rate = rate.clamp(1.0, MAX_RATE);
                    clock.set_rate(rate);
                    format!("{} real time", super::hub::rate_text(rate))
                }
                (Control::Step, None) if next_tick > end => {
                    clock.end(end);
                    ended_at(end)
                }
                (Control::Step, None) => {
                    let at = next_tick;
                    pass(&mut sim, &clock, &hub, at, hold(at + opts.tick), false).await;
                    next_tick += opts.tick;
                    format!("ran the pass at {}", stamp(at))
                }
                (Control::Skip, None) => skip(&mut sim, &clock, &hub, &mut next_tick, end).await,
            };
            hub.clock_changed();
            let _ = reply.send(said);
        }
    });
    (SimHandle { tx }, task)
}

/// What "something changes" means to a person looking at the page: a promotion's stage, phase or
/// the end of its wait, or a freeze's phase (not the messages of a deployment in progress).
fn looks(hub: &Hub) -> Vec<String> {
    let s = hub.snapshot();
    let rows = s.rows.values().map(|r| match &*r.value {
        Row::Promotion(r) => format!(
            "{} {} {:?} {:?}",
            r.status.name, r.status.stage, r.status.phase, r.status.until
        ),
        Row::Unreadable { name, error } => format!("{name} {error}"),
    });
    let freezes = s
        .freezes
        .iter()
        .flat_map(|f| f.value.freezes.iter())
        .map(|f| format!("freeze {} {}", f.name, f.phase));
    rows.chain(freezes).collect()
}

/// Runs passes until something a person sees changes, jumping over the time in which nothing
/// can (to the next soak end, window, deadline, deployment, freeze start or end, scripted event),
/// and leaves the clock at the pass where it changed.
async fn skip(
    sim: &mut Simulation<'static>,
    clock: &SimClock,
    hub: &Hub,
    next_tick: &mut DateTime<Utc>,
    end: DateTime<Utc>,
) -> String {
    let tick = sim.options().tick;
    let before = looks(hub);
    let started = Instant::now();
    let first = *next_tick;
    loop {
        let at = *next_tick;
        if at > end {
            clock.end(end);
            return ended_at(end);
        }
        let step = pass(sim, clock, hub, at, (at + tick).min(end), false).await;
        *next_tick = at + tick;
        let jumped = if at == first {
            format!("ran the pass at {}", stamp(at))
        } else {
            format!("jumped to {} and ran its pass", stamp(at))
        };
        if looks(hub) != before {
            return jumped;
        }
        let Some(step) = step else {
            return format!("{jumped}: the pass failed (see the log)");
        };
        if !step.changed {
            // Freezes start and end whether or not a promotion waits for them.
            let freezes = match crate::pass::observe::freezes(sim.client()).await {
                Ok(Some(f)) => crate::freeze::Freezes::new(&f, at).next_change(),
                _ => None,
            };
            match step
                .next_change
                .into_iter()
                .chain(freezes)
                .filter(|t| *t > at)
                .min()
            {
                Some(t) => *next_tick = (*next_tick).max(sim.tick_at_or_after(t)),
                None => {
                    return format!(
                        "nothing will change without outside help (an approval, a resume, a new revision); {jumped}"
                    );
                }
            }
        }
        if started.elapsed() > SKIP_BUDGET {
            return format!("{jumped}; nothing changed yet: skip again to go on");
        }
    }
}

/// What the page is told once the simulation reached its end.
fn ended_at(end: DateTime<Utc>) -> String {
    format!(
        "the simulation has ended: it ran until {} (--until)",
        stamp(end)
    )
}

fn stamp(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// One pass at `at`, the clock standing there while it runs; then the clock goes on (if it runs)
/// and waits at `hold`, and the pages are refreshed. `played`: see [`SimClock::passed`].
async fn pass(
    sim: &mut Simulation<'static>,
    clock: &SimClock,
    hub: &Hub,
    at: DateTime<Utc>,
    hold: DateTime<Utc>,
    played: bool,
) -> Option<Step> {
    clock.arrive(at);
    let step = match sim.step(at).await {
        Ok(step) => Some(step),
        Err(e) => {
            tracing::error!(error = %crate::cli_error::line(e.as_ref()), "a simulated pass failed");
            None
        }
    };
    clock.passed(hold, played);
    hub.simulated_pass(at, sim.options().tick);
    hub.refresh().await;
    step
}
