//! Where an exploration starts: the fresh store, or the state after a scripted prefix
//! ([`Start`]). A prefix is replayed as a trace is (every step's invariants checked); the
//! explorer's traces begin with it, so that they replay from the fresh store.

use super::ghost;
use super::setup::{Bounds, Start};
use super::state::{State, Step};

/// The first revision rolled out by one path of the world's actors, each pass run to its end:
/// dev deployed (its soak ends within the step), staging approved by hand, deployed, prod
/// reached in its window and deployed, and the completion recorded a tick later.
const COMPLETED: [Actor; 12] = [
    Actor::Pass,
    deploy(0),
    Actor::Pass,
    Actor::Do(Step::Approve {
        promotion: 0,
        stage: 1,
        command: false,
    }),
    Actor::Do(Step::Tick),
    Actor::Pass,
    deploy(1),
    Actor::Pass,
    deploy(2),
    Actor::Pass,
    Actor::Do(Step::Tick),
    Actor::Pass,
];

/// Sveltos deploys p0's profile of `stage` (with `clusters=2`, on both of dev's clusters in one
/// step: one path of the two the explorer takes one cluster at a time).
const fn deploy(stage: u8) -> Actor {
    Actor::Do(Step::Deploy {
        promotion: 0,
        stage,
    })
}

/// One step of a script: a whole pass (pass 0, from its observation to its last write), or one
/// step of another actor.
#[derive(Clone, Copy)]
enum Actor {
    Pass,
    Do(Step),
}

/// The steps from the fresh store to where `bounds` start, and the state there.
pub fn prefix(bounds: &Bounds) -> anyhow::Result<(Vec<Step>, State)> {
    let mut state = State::initial(bounds)?;
    let mut steps = Vec::new();
    let script: &[Actor] = match bounds.start {
        Start::Fresh => return Ok((steps, state)),
        Start::Completed => &COMPLETED,
    };
    for actor in script {
        match *actor {
            Actor::Do(step) => take(bounds, &mut state, &mut steps, step)?,
            Actor::Pass => {
                take(bounds, &mut state, &mut steps, Step::Observe(0))?;
                while let Some(step) = state
                    .candidates(bounds)
                    .into_iter()
                    .find(|s| matches!(s, Step::Observe(0) | Step::Prepare(0) | Step::Write(0)))
                    .filter(|_| !state.quiet())
                {
                    take(bounds, &mut state, &mut steps, step)?;
                }
            }
        }
    }
    if !state.complete(bounds) {
        anyhow::bail!(
            "the start {:?} is not complete after {} steps: {:?}",
            bounds.start,
            steps.len(),
            steps
        );
    }
    Ok((steps, state))
}

fn take(
    bounds: &Bounds,
    state: &mut State,
    steps: &mut Vec<Step>,
    step: Step,
) -> anyhow::Result<()> {
    let Some(mut next) = state
        .apply(step, bounds)
        .map_err(|e| anyhow::anyhow!("{}: {}", step.describe(), e.0))?
    else {
        anyhow::bail!("the start's step {} changes nothing", step.describe());
    };
    let violations = ghost::update(state, step, &mut next, bounds);
    steps.push(step);
    if !violations.is_empty() {
        anyhow::bail!("the start's steps break invariants: {violations:?} after {steps:?}");
    }
    *state = next;
    Ok(())
}
