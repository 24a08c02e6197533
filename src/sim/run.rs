//! `promoter simulate`: the real pass, unchanged, through kube's client against the fake API
//! server, with a simulated fleet, a simulated addon-controller and a virtual clock.
//!
//! Passes run once per tick. When a pass and the addon-controller change nothing, the world is at
//! rest until something time-driven happens (a soak ends, a window opens, a deployment finishes, a
//! scripted approval or failure); the clock then jumps to the first tick at or after that moment,
//! which gives the same result as ticking through the quiet minutes, in a fraction of the time.

use super::addon::AddonController;
use super::fleet::Fleet;
use super::timeline::{PromotionTimeline, Stop, TimelineEvent, offset};
use crate::api::{ClusterPromotion, flag_duration};
use crate::fake::promotion_freeze_type;
use crate::fake::{FakeApiServer, cluster_promotion_type, sveltos_cluster_type};
use crate::pass::{HealthEvaluator, PassOptions, Phase, run_pass};
use chrono::{DateTime, Duration, Utc};
use chrono_tz::Tz;
use serde::Serialize;
use serde_json::json;
use std::io::IsTerminal;
use std::sync::{Arc, Mutex};

/// `--approve [PROMOTION/]STAGE@OFFSET`: approve that stage's manual trigger at start + offset.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScriptedApproval {
    pub promotion: Option<String>,
    pub stage: String,
    pub at: Duration,
}

impl ScriptedApproval {
    pub fn parse(s: &str) -> Result<Self, String> {
        let (target, at) = s.rsplit_once('@').unwrap_or((s, "0s"));
        let at = flag_duration::parse(at)?;
        let (promotion, stage) = match target.split_once('/') {
            Some((p, st)) => (Some(p.to_string()), st.to_string()),
            None => (None, target.to_string()),
        };
        if stage.is_empty() {
            return Err(format!(
                "--approve {s:?}: expected [PROMOTION/]STAGE[@OFFSET]"
            ));
        }
        Ok(ScriptedApproval {
            promotion,
            stage,
            at,
        })
    }
}

/// An `--approve` that names no stage of the promotions (a typo) is an error, as an unknown
/// `--fail` cluster is: silently ignored, it would make the rollout wait forever.
fn check_approvals(
    approvals: &[ScriptedApproval],
    promotions: &[ClusterPromotion],
) -> anyhow::Result<()> {
    for a in approvals {
        let candidates: Vec<&ClusterPromotion> = promotions
            .iter()
            .filter(|p| a.promotion.is_none() || p.metadata.name == a.promotion)
            .collect();
        let what = match &a.promotion {
            Some(p) => format!("{p}/{}", a.stage),
            None => a.stage.clone(),
        };
        if candidates.is_empty() {
            let names: Vec<&str> = promotions
                .iter()
                .filter_map(|p| p.metadata.name.as_deref())
                .collect();
            let typed = a.promotion.as_deref().unwrap_or_default();
            anyhow::bail!(
                "--approve {what}: no ClusterPromotion {typed:?} (have: {}){}",
                names.join(", "),
                crate::suggest::did_you_mean(typed, names.iter().copied())
            );
        }
        let stages: Vec<&str> = candidates
            .iter()
            .flat_map(|p| p.spec.stages.iter().map(|s| s.name.as_str()))
            .collect();
        if !stages.contains(&a.stage.as_str()) {
            anyhow::bail!(
                "--approve {what}: no stage {:?} (stages: {}){}",
                a.stage,
                stages.join(", "),
                crate::suggest::did_you_mean(&a.stage, stages.iter().copied())
            );
        }
    }
    Ok(())
}

/// `--fail CLUSTER[@OFFSET][:TEXT]`: the cluster's deployments fail from start + offset on; with
/// TEXT, only deployments whose spec contains it (`staging@1d:3.6.0`: that chart version breaks
/// there, the others deploy, so a rollback to an earlier version succeeds).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScriptedFailure {
    pub cluster: String,
    pub at: Duration,
    pub only: Option<String>,
}

impl ScriptedFailure {
    pub fn parse(s: &str) -> Result<Self, String> {
        let (target, only) = match s.split_once(':') {
            Some((t, text)) if !text.is_empty() => (t, Some(text.to_string())),
            Some(_) => return Err(format!("--fail {s:?}: expected CLUSTER[@OFFSET][:TEXT]")),
            None => (s, None),
        };
        let (cluster, at) = target.rsplit_once('@').unwrap_or((target, "0s"));
        Ok(ScriptedFailure {
            cluster: cluster.to_string(),
            at: flag_duration::parse(at)?,
            only,
        })
    }
}

/// `--freeze FROM..[TO][=REASON]`: a PromotionFreeze of every promotion from start + FROM to start +
/// TO (open-ended without TO), as `promoter freeze create` would place it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScriptedFreeze {
    pub from: Duration,
    pub to: Option<Duration>,
    pub reason: String,
}

impl ScriptedFreeze {
    pub fn parse(s: &str) -> Result<Self, String> {
        let (range, reason) = s.split_once('=').unwrap_or((s, "simulated freeze"));
        let bad = || format!("--freeze {s:?}: expected FROM..[TO][=REASON], e.g. 1d..2d=holidays");
        let (from, to) = range.split_once("..").ok_or_else(bad)?;
        let from = if from.trim().is_empty() {
            Duration::zero()
        } else {
            flag_duration::parse(from).map_err(|e| format!("--freeze {s:?}: {e}"))?
        };
        let to = match to.trim() {
            "" => None,
            t => Some(flag_duration::parse(t).map_err(|e| format!("--freeze {s:?}: {e}"))?),
        };
        if to.is_some_and(|t| t <= from) {
            return Err(format!("--freeze {s:?}: the end must be after the start"));
        }
        if reason.trim().is_empty() {
            return Err(bad());
        }
        Ok(ScriptedFreeze {
            from,
            to,
            reason: reason.trim().to_string(),
        })
    }

    /// The PromotionFreeze object, for a simulation that starts at `start`.
    fn object(&self, index: usize, start: DateTime<Utc>) -> serde_json::Value {
        let time = |d: Duration| crate::api::Timestamp::new(start + d).to_string();
        json!({
            "apiVersion": "promoter.dev/v1alpha1",
            "kind": "PromotionFreeze",
            "metadata": {"name": format!("simulated-freeze-{}", index + 1)},
            "spec": {
                "reason": self.reason,
                "start": time(self.from),
                "end": self.to.map(time),
            }
        })
    }
}

/// `--update FILE@OFFSET`: a new revision of promotions, applied (as `kubectl apply` would) at
/// start + offset.
#[derive(Clone, Debug)]
pub struct ScriptedUpdate {
    pub promotions: Vec<ClusterPromotion>,
    pub at: Duration,
}

/// What the simulation starts from.
#[derive(Clone, Debug, Default)]
pub struct SimWorld {
    /// Promotions as they are to be created (with a status when loaded from a live cluster).
    pub promotions: Vec<ClusterPromotion>,
    pub fleet: Fleet,
    /// Further objects to load as they are: the profiles and summaries of a live cluster.
    pub objects: Vec<(crate::fake::ResourceType, serde_json::Value)>,
}

#[derive(Clone, Debug)]
pub struct SimOptions {
    pub start: DateTime<Utc>,
    pub tick: Duration,
    pub until: Duration,
    pub approvals: Vec<ScriptedApproval>,
    pub failures: Vec<ScriptedFailure>,
    pub updates: Vec<ScriptedUpdate>,
    pub freezes: Vec<ScriptedFreeze>,
    pub default_tz: Tz,
    /// The simulated Sveltos' clock minus the API server's (`--sveltos-clock-skew`): its
    /// `lastAppliedTime`s are stamped by it, `managedFields` by the server.
    pub sveltos_clock_skew: Duration,
    /// Show progress on stderr when it is a terminal.
    pub progress: bool,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SimReport {
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
    pub tick_seconds: i64,
    pub clusters: usize,
    pub fleet_derived: bool,
    pub passes: usize,
    pub promotions: Vec<PromotionTimeline>,
}

fn align(start: DateTime<Utc>, tick: Duration, t: DateTime<Utc>) -> DateTime<Utc> {
    let ticks = ((t - start).num_seconds() as f64 / tick.num_seconds().max(1) as f64).ceil() as i32;
    start + tick * ticks.max(0)
}

/// How postDelayHealthChecks are evaluated in a simulation.
pub enum SimHealth<'a> {
    /// Promoter's engine, against fake servers holding each fleet cluster's objects.
    FleetObjects,
    /// Another evaluator (`plan` assumes the checks pass, as it assumes deployments succeed).
    Evaluator(&'a dyn HealthEvaluator),
}

/// `plan`'s assumption: checks pass.
pub struct AssumeHealthy;

impl HealthEvaluator for AssumeHealthy {
    fn evaluate<'a>(
        &'a self,
        _: &'a ClusterPromotion,
        _: &'a str,
        _: &'a crate::pass::World,
    ) -> futures::future::BoxFuture<'a, crate::pass::HealthVerdict> {
        Box::pin(async { crate::pass::HealthVerdict::Passed })
    }
}

/// Loads an object as it is, status and uid included; its resourceVersion belongs to another server.
fn load(
    server: &FakeApiServer,
    rt: &crate::fake::ResourceType,
    mut obj: serde_json::Value,
) -> anyhow::Result<()> {
    if let Some(m) = obj
        .get_mut("metadata")
        .and_then(serde_json::Value::as_object_mut)
    {
        m.remove("resourceVersion");
    }
    server
        .store()
        .seed(rt, obj)
        .map_err(|e| anyhow::anyhow!("{}", e.message))?;
    Ok(())
}

/// A simulation in progress: the fake API server, its virtual clock, the simulated Sveltos and
/// what is scripted, advanced one pass at a time by [`Simulation::step`]. [`simulate`] runs it to
/// the end; `simulate --dashboard` steps it as its virtual clock plays.
pub struct Simulation<'h> {
    server: FakeApiServer,
    clock: Arc<Mutex<DateTime<Utc>>>,
    addon: AddonController,
    client: kube::Client,
    health: SimHealth<'h>,
    /// Kept alive for the whole simulation: the health checks reach them over loopback.
    _managed: Vec<FakeApiServer>,
    promotions: Vec<ClusterPromotion>,
    timelines: Vec<PromotionTimeline>,
    pending_approvals: Vec<ScriptedApproval>,
    pending_updates: Vec<ScriptedUpdate>,
    opts: SimOptions,
    clusters: usize,
    fleet_derived: bool,
    passes: usize,
    /// The `next_check` of each promotion in the last pass.
    next_checks: Vec<DateTime<Utc>>,
}

/// What one pass of a simulation did.
#[derive(Clone, Debug)]
pub struct Step {
    /// The pass or the simulated Sveltos changed something.
    pub changed: bool,
    /// When something time-driven happens next (a soak ends, a window opens, a deployment
    /// finishes, something scripted), after the step's time; none: nothing will change without
    /// outside help.
    pub next_change: Option<DateTime<Utc>>,
    /// What each promotion's pass decided, in the order of the promotions.
    pub decided: Vec<(Option<String>, Phase, String)>,
}

impl<'h> Simulation<'h> {
    /// Loads the world into a fresh fake API server at `opts.start`.
    pub async fn start(
        world: SimWorld,
        health: SimHealth<'h>,
        opts: &SimOptions,
    ) -> anyhow::Result<Simulation<'h>> {
        let SimWorld {
            promotions,
            fleet,
            objects,
        } = world;
        if opts.tick <= Duration::zero() {
            anyhow::bail!("--tick must be positive");
        }
        let server = FakeApiServer::start_with_sveltos().await?;
        let clock = Arc::new(Mutex::new(opts.start));
        let server_clock = clock.clone();
        server.set_clock(Arc::new(move || {
            *server_clock.lock().unwrap_or_else(|p| p.into_inner())
        }));
        let mut addon = AddonController {
            clock_skew: opts.sveltos_clock_skew,
            // A rollback or a revert redeploys what a cluster ran before at once, as Sveltos does.
            cached_redeploys: true,
            ..AddonController::default()
        };
        if let Some(d) = &fleet.default_deploy_time {
            addon.default_deploy_time = d.to_chrono();
        }
        for c in &fleet.clusters {
            server
                .store()
                .seed(&sveltos_cluster_type(), c.to_sveltos_cluster())
                .map_err(|e| anyhow::anyhow!("cluster {}: {}", c.key(), e.message))?;
            if let Some(d) = &c.deploy_time {
                addon.deploy_time.insert(c.key(), d.to_chrono());
            }
        }
        for f in &opts.failures {
            let key = fleet.find(&f.cluster).map(|c| c.key()).ok_or_else(|| {
                anyhow::anyhow!("--fail: no cluster {:?} in the fleet", f.cluster)
            })?;
            addon.failing.insert(key.clone(), opts.start + f.at);
            if let Some(text) = &f.only {
                addon.failing_only.insert(key, text.clone());
            }
        }
        for (i, f) in opts.freezes.iter().enumerate() {
            let mut obj = f.object(i, opts.start);
            if f.to.is_none()
                && let Some(spec) = obj
                    .get_mut("spec")
                    .and_then(serde_json::Value::as_object_mut)
            {
                spec.remove("end");
            }
            server
                .store()
                .seed(&promotion_freeze_type(), obj)
                .map_err(|e| anyhow::anyhow!("--freeze: {}", e.message))?;
        }
        check_approvals(&opts.approvals, &promotions)?;
        let mut timelines = Vec::new();
        for p in &promotions {
            load(&server, &cluster_promotion_type(), serde_json::to_value(p)?)?;
            let clusters_of = |stage: &str| -> Vec<String> {
                let selector = p
                    .spec
                    .stages
                    .iter()
                    .find(|s| s.name == stage)
                    .and_then(|s| s.cluster_selector.clone())
                    .unwrap_or_default();
                fleet
                    .clusters
                    .iter()
                    .filter(|c| selector.selects(&c.labels).unwrap_or(false))
                    .map(|c| c.key())
                    .collect()
            };
            timelines.push(PromotionTimeline::new(p, clusters_of));
        }
        for (rt, obj) in objects {
            load(&server, &rt, obj)?;
        }
        let client = server.client().await?;
        let has_checks = promotions.iter().flat_map(|p| &p.spec.stages).any(|s| {
            s.trigger
                .as_ref()
                .and_then(|t| t.gates())
                .is_some_and(|g| !g.post_delay_health_checks.is_empty())
        });
        let managed = match (&health, has_checks) {
            (SimHealth::FleetObjects, true) => super::managed::start(&fleet, &server).await?,
            _ => Vec::new(),
        };
        Ok(Simulation {
            server,
            clock,
            addon,
            client,
            health,
            _managed: managed,
            promotions,
            timelines,
            pending_approvals: opts.approvals.clone(),
            pending_updates: opts.updates.clone(),
            opts: opts.clone(),
            clusters: fleet.clusters.len(),
            fleet_derived: fleet.derived,
            passes: 0,
            next_checks: Vec::new(),
        })
    }

    /// The fake API server the simulation runs against (its clock is [`Simulation::now`]).
    pub fn server(&self) -> &FakeApiServer {
        &self.server
    }

    /// A client of the simulated cluster, as a person's kubectl would be (the admin).
    pub fn client(&self) -> &kube::Client {
        &self.client
    }

    pub fn options(&self) -> &SimOptions {
        &self.opts
    }

    /// The virtual time: what the fake API server stamps, and what the passes take as now.
    pub fn now(&self) -> DateTime<Utc> {
        *self.clock.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Moves the virtual clock (between passes; a pass runs at the time it is stepped at).
    pub fn set_now(&self, t: DateTime<Utc>) {
        *self.clock.lock().unwrap_or_else(|p| p.into_inner()) = t;
    }

    /// Whether every promotion has completed and nothing more is scripted.
    pub fn finished(&self) -> bool {
        self.timelines.iter().all(|t| t.complete) && self.pending_updates.is_empty()
    }

    /// The first tick at or after `t`.
    pub fn tick_at_or_after(&self, t: DateTime<Utc>) -> DateTime<Utc> {
        align(self.opts.start, self.opts.tick, t)
    }

    /// One pass at `now`: what is scripted and due (approvals as a user's `kubectl patch`, new
    /// revisions as `kubectl apply`), the real pass through kube's client, then the simulated
    /// Sveltos.
    pub async fn step(&mut self, now: DateTime<Utc>) -> anyhow::Result<Step> {
        let opts = &self.opts;
        self.set_now(now);
        for a in self
            .pending_approvals
            .iter()
            .filter(|a| opts.start + a.at <= now)
        {
            for (p, timeline) in self.promotions.iter().zip(self.timelines.iter_mut()) {
                let name = p.metadata.name.clone().unwrap_or_default();
                if a.promotion.as_ref().is_some_and(|x| *x != name) {
                    continue;
                }
                let Some(idx) = p.spec.stages.iter().position(|s| s.name == a.stage) else {
                    continue;
                };
                if p.spec.stages[idx]
                    .trigger
                    .as_ref()
                    .and_then(|t| t.manual.as_ref())
                    .is_none()
                {
                    continue;
                }
                let mut store = self.server.store();
                if let Ok(current) = store.get(&cluster_promotion_type(), "", &name) {
                    let patch = json!([{"op": "add", "path": format!("/spec/stages/{idx}/trigger/manual/approved"), "value": true}]);
                    if let Ok(patched) = crate::fake::patch::json_patch(&current, &patch)
                        && store
                            .update(&cluster_promotion_type(), "", &name, patched, false)
                            .is_ok()
                    {
                        timeline.approved(opts.start, now, &a.stage);
                    }
                }
            }
        }
        self.pending_approvals.retain(|a| opts.start + a.at > now);
        for update in self
            .pending_updates
            .iter()
            .filter(|u| opts.start + u.at <= now)
        {
            for p in &update.promotions {
                let name = p.metadata.name.clone().unwrap_or_default();
                let mut store = self.server.store();
                let Ok(mut current) = store.get(&cluster_promotion_type(), "", &name) else {
                    continue;
                };
                current["spec"] = serde_json::to_value(&p.spec)?;
                if store
                    .update(&cluster_promotion_type(), "", &name, current, false)
                    .is_ok()
                    && let Some(t) = self.timelines.iter_mut().find(|t| t.name == name)
                {
                    t.new_revision(opts.start, now);
                }
            }
        }
        self.pending_updates.retain(|u| opts.start + u.at > now);

        let revision = self.server.store().revision();
        let pass_opts = PassOptions {
            dry_run: false,
            selector: None,
            default_tz: opts.default_tz,
            now,
            notifications: None,
        };
        let report = match &self.health {
            SimHealth::FleetObjects => {
                run_pass(
                    &self.client,
                    &crate::health::HealthEngine::new(self.client.clone(), now),
                    &pass_opts,
                )
                .await?
            }
            SimHealth::Evaluator(e) => run_pass(&self.client, *e, &pass_opts).await?,
        };
        self.passes += 1;
        for (timeline, p) in self.timelines.iter_mut().zip(&self.promotions) {
            let name = p.metadata.name.clone().unwrap_or_default();
            let stored = self
                .server
                .store()
                .get(&cluster_promotion_type(), "", &name)
                .ok();
            if let Some(current) =
                stored.and_then(|v| serde_json::from_value::<ClusterPromotion>(v).ok())
            {
                timeline.observe(opts.start, now, &current);
            }
        }
        self.addon.reconcile(&self.server, now);
        let changed = self.server.store().revision() != revision;
        self.next_checks = report
            .promotions
            .iter()
            .filter_map(|p| p.next_check)
            .collect();
        let next_change = self
            .next_checks
            .iter()
            .copied()
            .chain(self.addon.next_change(&self.server.store(), now))
            .chain(self.pending_approvals.iter().map(|a| opts.start + a.at))
            .chain(self.pending_updates.iter().map(|u| opts.start + u.at))
            .filter(|t| *t > now)
            .min();
        Ok(Step {
            changed,
            next_change,
            decided: report
                .promotions
                .iter()
                .map(|r| (r.stage.clone(), r.phase, r.summary.clone()))
                .collect(),
        })
    }

    /// Marks every promotion that has not completed as stopped, at `now`, for `why`.
    fn stop(
        &mut self,
        decided: &[(Option<String>, Phase, String)],
        now: DateTime<Utc>,
        until: bool,
    ) {
        for (timeline, (stage, phase, summary)) in self.timelines.iter_mut().zip(decided) {
            if timeline.complete {
                continue;
            }
            let reason = match (until, phase) {
                (false, _) => summary.clone(),
                (true, Phase::Complete) => "complete".to_string(),
                (true, _) => format!(
                    "simulation ended after {} while: {summary}",
                    offset(self.opts.until)
                ),
            };
            timeline.stopped = Some(Stop {
                stage: stage.clone(),
                at: now,
                reason,
            });
        }
    }

    /// The timeline so far, ending at `end`.
    pub fn report(&self, end: DateTime<Utc>) -> SimReport {
        SimReport {
            start: self.opts.start,
            end,
            tick_seconds: self.opts.tick.num_seconds(),
            clusters: self.clusters,
            fleet_derived: self.fleet_derived,
            passes: self.passes,
            promotions: self.timelines.clone(),
        }
    }
}

pub async fn simulate(
    world: SimWorld,
    health: SimHealth<'_>,
    opts: &SimOptions,
) -> anyhow::Result<SimReport> {
    let mut sim = Simulation::start(world, health, opts).await?;
    let deadline = opts.start + opts.until;
    let mut now = opts.start;
    let show_progress = opts.progress && std::io::stderr().is_terminal();
    loop {
        let step = sim.step(now).await?;
        if sim.finished() {
            break;
        }
        if show_progress {
            eprint!("\rsimulating: {} ", offset(now - opts.start));
        }
        let mut next = now + opts.tick;
        if !step.changed {
            match step.next_change {
                Some(t) => next = next.max(sim.tick_at_or_after(t)),
                None => {
                    // At rest for good: nothing will change without outside help.
                    sim.stop(&step.decided, now, false);
                    break;
                }
            }
        }
        if next > deadline {
            sim.stop(&step.decided, now, true);
            break;
        }
        now = next;
    }
    if show_progress {
        eprintln!();
    }
    Ok(sim.report(now))
}

impl SimReport {
    pub fn render_text(&self) -> String {
        let mut out = format!(
            "Simulated {} ClusterPromotion(s) on {} clusters ({}) from {}, one pass per {}s tick ({} passes).\n",
            self.promotions.len(),
            self.clusters,
            if self.fleet_derived {
                "derived from the stage selectors"
            } else {
                "from the fleet file"
            },
            self.start
                .to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            self.tick_seconds,
            self.passes,
        );
        for p in &self.promotions {
            out.push_str(&format!("\n{}\n", p.name));
            let width = p.stages.iter().map(|s| s.name.len()).max().unwrap_or(5);
            for e in &p.events {
                out.push_str(&format!(
                    "  {:>8}  {}  {:width$}  {}\n",
                    offset(Duration::seconds(e.offset_seconds)),
                    e.at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
                    e.stage,
                    e.event
                ));
            }
            match (&p.finished_at, &p.stopped) {
                (Some(t), _) => out.push_str(&format!(
                    "  => complete: {} promoted at {}, {} after the start (ETA)\n",
                    p.stages.last().map(|s| s.name.as_str()).unwrap_or_default(),
                    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
                    offset(Duration::seconds(p.eta_seconds.unwrap_or_default()))
                        .trim_start_matches('+')
                )),
                (None, Some(stop)) => out.push_str(&format!(
                    "  => stopped at stage {} at {}: {}\n",
                    stop.stage.as_deref().unwrap_or("?"),
                    stop.at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
                    stop.reason
                )),
                (None, None) => out.push_str("  => not finished\n"),
            }
        }
        out
    }
}

/// Events of all promotions in time order (for tests and callers that want one stream).
pub fn all_events(report: &SimReport) -> Vec<(&str, &TimelineEvent)> {
    let mut out: Vec<(&str, &TimelineEvent)> = report
        .promotions
        .iter()
        .flat_map(|p| p.events.iter().map(move |e| (p.name.as_str(), e)))
        .collect();
    out.sort_by_key(|(_, e)| e.at);
    out
}
