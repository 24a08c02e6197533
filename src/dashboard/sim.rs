//! `simulate --dashboard`: the simulation played on a virtual clock the page controls (play, pause,
//! speed, the next pass now, a jump to the next change). Passes run at the simulation's ticks as
//! the clock reaches them, exactly as `simulate` runs them; the clock stands still while a pass
//! runs, so every write of a pass is stamped with the pass's own time.

use super::hub::{Clock, Hub};
use crate::sim::{Simulation, Step};
use chrono::{DateTime, Duration, Utc};
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tokio::sync::{mpsc, oneshot};

/// The simulation's virtual clock: `base`, plus real time since `since` times `rate` while it
/// runs.
pub struct SimClock {
    state: Mutex<ClockState>,
}

#[derive(Clone, Copy)]
struct ClockState {
    base: DateTime<Utc>,
    since: Instant,
    rate: f64,
    running: bool,
}

impl ClockState {
    fn now(&self) -> DateTime<Utc> {
        if !self.running {
            return self.base;
        }
        let virtual_ms = self.since.elapsed().as_secs_f64() * self.rate * 1000.0;
        self.base + Duration::milliseconds(virtual_ms as i64)
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
            }),
        }
    }

    fn update(&self, f: impl FnOnce(&mut ClockState)) {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let now = s.now();
        s.base = now;
        s.since = Instant::now();
        f(&mut s);
    }

    /// Stops the clock at `t` (a pass runs at `t`).
    fn hold_at(&self, t: DateTime<Utc>) -> bool {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let was = s.running;
        s.base = t;
        s.running = false;
        was
    }

    fn release(&self, running: bool) {
        self.update(|s| s.running = running);
    }

    fn running(&self) -> bool {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).running
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
        let deadline = opts.start + opts.until;
        let mut next_tick = opts.start;
        loop {
            let running = clock.running();
            if running && clock.now() >= next_tick {
                if next_tick > deadline {
                    clock.release(false);
                    hub.clock_changed();
                    continue;
                }
                pass(&mut sim, &clock, &hub, next_tick, true).await;
                next_tick += opts.tick;
                continue;
            }
            let wait = if running {
                let (rate, _) = clock.rate();
                let ahead = (next_tick - clock.now()).num_milliseconds().max(0) as f64;
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
            let said = match control {
                Control::Play => {
                    clock.release(true);
                    "playing".to_string()
                }
                Control::Pause => {
                    clock.release(false);
                    "paused".to_string()
                }
                Control::Speed(rate) => {
                    let rate = rate.clamp(1.0, 86_400.0);
                    clock.update(|s| s.rate = rate);
                    format!("{rate}× real time")
                }
                Control::Step => {
                    let running = clock.running();
                    pass(&mut sim, &clock, &hub, next_tick, running).await;
                    next_tick += opts.tick;
                    format!("ran the pass at {}", stamp(next_tick - opts.tick))
                }
                Control::Skip => {
                    // The next pass first: someone may have acted since the last one.
                    let running = clock.running();
                    let at = next_tick;
                    let step = pass(&mut sim, &clock, &hub, at, running).await;
                    next_tick = at + opts.tick;
                    match &step {
                        Some(step) if step.changed => format!("ran the pass at {}", stamp(at)),
                        Some(Step {
                            next_change: Some(t),
                            ..
                        }) => {
                            let t = sim.tick_at_or_after(*t).max(next_tick);
                            pass(&mut sim, &clock, &hub, t, running).await;
                            next_tick = t + opts.tick;
                            format!("jumped to {} and ran its pass", stamp(t))
                        }
                        _ => "nothing will change without outside help (an approval, a resume, a new revision)".to_string(),
                    }
                }
            };
            hub.clock_changed();
            let _ = reply.send(said);
        }
    });
    (SimHandle { tx }, task)
}

fn stamp(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// One pass at `at` with the clock held there; the clock runs again (if it did) from `at`.
async fn pass(
    sim: &mut Simulation<'static>,
    clock: &SimClock,
    hub: &Hub,
    at: DateTime<Utc>,
    running: bool,
) -> Option<Step> {
    clock.hold_at(at);
    let step = match sim.step(at).await {
        Ok(step) => Some(step),
        Err(e) => {
            tracing::error!(error = %crate::cli_error::line(e.as_ref()), "a simulated pass failed");
            None
        }
    };
    clock.release(running);
    hub.refresh().await;
    step
}
