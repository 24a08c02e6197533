//! An exhaustive model checker of the gates (issue 25): every interleaving of passes, a person,
//! spec changes, Sveltos and the clock within small bounds, with the book's invariants (docs/src/contributors/invariants.md) checked
//! on every step.
//!
//! # What is real and what is modelled
//!
//! The passes are promoter's own code: listed objects are decoded and made into a `World` as
//! `observe` does ([`observe::world_from_listed`](promoter::pass::observe::world_from_listed)), the
//! decision is [`decide`](promoter::pass::decide), the writes are its
//! [`write_plan`](promoter::pass::write_plan), each request applied by the fake API server's own
//! [`Store`](promoter::fake::Store) (resourceVersion preconditions, JSON-patch `test`, conflicts,
//! the CRDs' schemas) and its answer judged as `act` judges it. The person's approvals and pauses
//! are `promoter approve`/`pause`/`resume`'s own patches (`ops::control`). What is modelled: the
//! order of a pass's steps (as `pass_body`: observe, decide every promotion, then per promotion
//! read unlisted profiles and write), Sveltos (`sveltos`), and the world's timing (`setup`).
//!
//! # The state
//!
//! A [`State`](state::State) is the store, the clock, the passes in flight (what each listed,
//! where it is in its writes), the adversity left (crashes, lost answers, spec changes, …), and
//! the ghost the invariants need (`ghost`). States are deduplicated by a fingerprint that renames
//! resourceVersions, UIDs and timestamps to what the model can observe of them (`canon`), so the
//! clock ticks forever over finitely many states.
//!
//! # The clock and a pass's lists
//!
//! A pass reads its clock once, before its first list (`PassOptions.now`), and judges and stamps
//! everything it lists with that time (a stage seen complete, the start of its soak, a deadline
//! met or missed, a window open). Its list calls take milliseconds to seconds, bounded by the
//! pass deadline (`--deadline`, 40 s by default), far below the model's step of 30 minutes. So
//! the clock does not tick while a pass is between list calls (`observe=lists`): at the clock's
//! granularity a pass's lists are one instant. Were it to tick there, a summary listed a step
//! after the pass's clock would look deployed a step earlier than it was, and a soak would look
//! over a step early: an error of 30 minutes the real pass cannot make. The real error is one
//! pass's listing time (the book's invariants: delays, deadlines and windows are precise to one
//! pass). The clock still ticks between a pass's decision and its writes: harsher than a real
//! pass, whose writes take seconds too, but judged fairly, since the checks judge a pass's
//! windows and freezes by its own clock, and a tick before a write only makes a soak older.
//!
//! # Why an explorer of our own, not `stateright`
//!
//! The liveness property the gates need is "from every reachable state, a completing path exists"
//! (CTL `AG EF complete`): crash loops, a person who never approves and a Sveltos that keeps
//! failing are legitimate infinite paths that never complete, so "eventually complete on every
//! path" (LTL, what `stateright`'s `eventually` properties check, and only on acyclic paths) is
//! the wrong property, and fairness would have to be encoded by hand. `AG EF` needs the whole
//! state graph: the explorer ([`explore`](explore::explore)) stores it (a 128-bit fingerprint per
//! state, parents for shortest traces, edges), then runs a backward reachability from the complete
//! states; every state it does not reach is a counterexample. The same graph gives quiescence (a
//! pass alone stops writing) for free. A state is a clone of the store (objects shared by
//! reference count between states), so breadth-first search is cheap in memory, and it yields the
//! shortest counterexamples.
//!
//! # Completion, judged from the world
//!
//! Neither the liveness target nor the completion invariants read promoter's completion record
//! (`promoter.dev/completed`), so that a bug in that record, or in how the decision reads it, is
//! not hidden from the checks that judge it (issue 33 §1). A promotion is complete
//! ([`State::complete`](state::State::complete)) when the world shows it: the status a person
//! reads says so (the spec's last stage is current and says `Successfully provisioned`, upstream's
//! text, for a run of the current revision and stages), it is not paused, and every stage's
//! profile carries that revision and runs it on every cluster the stage selects (each summary in
//! sync, every feature `Provisioned` with the hash of that spec). A state where a pass has
//! recorded the completion but not written the status yet is not complete. On every status write
//! `ghost` checks that a run reads complete only once every stage ran its revision on all its
//! clusters, and that a run once read complete never reads a stage on its way (provisioning,
//! soaking, checks, awaiting approval, window closed, failing) or another stage again, whatever
//! pauses, resumes, aborts or blocked passes come between. promoter's own record is still checked
//! (never dropped within a run, set only at the last stage): it says which pass passed the last
//! stage, whose clock judges its window, and the status that reads the run complete must show the
//! last stage's deployment at the time a pass found it deployed, or that pass's time when none did
//! before it (its lastSuccessfulAppliedTime), whichever pass writes it (the completing pass's
//! status write may be lost after its record patch; with the next pass's repair removed, the
//! lost-answer bound below reports it in 27 steps). Events are not
//! modelled (`act` emits them after the status write, outside the write plan): that a lost answer
//! loses none is checked by `tests/lost_answers.rs`.
//!
//! Issue 33 asks for liveness to complete *or* to a settled rolled-back or held state. The checked
//! property, a completing path from every state (`AG EF complete`), implies it (`AG EF (complete
//! or settled)`: complete is one of the two targets), and asks more: a settled rolled-back or held
//! state must itself still have a completing path. It has one, because a person's `resume` gives
//! a held or rolled-back revision back and resumes, approvals, Sveltos deployments, passes and
//! ticks are unbounded.
//!
//! # No grace when Sveltos has answered
//!
//! With [`Bounds::api_clock`](setup::Bounds::api_clock) (the store stamps `managedFields` with the
//! model's clock, every write of an epoch in one second), a pass's decision that a stage waits
//! only for the freshness grace while every summary it listed of the stage runs its profile's spec
//! is a violation ([`ghost::decided`]), unless that spec was written, not by a rollback, from a
//! listing that showed a summary of the profile not yet about the spec it carried (then a status
//! of the spec before, with a hash no pass saw, may still come: the grace is the one rule left).
//! Without the API clock every store time is one fixed time long ago and every grace is over, so
//! the check is vacuous there; CI replays the two paths that reported the earlier rules
//! (`a_rollback_answered_in_the_second_of_its_write_never_waits_for_the_grace`,
//! `a_revision_written_while_dev_fails_the_previous_one_never_waits_for_the_grace`).
//!
//! # Bounds
//!
//! [`Bounds`](setup::Bounds): promotions (of three stages: a delay, a manual approval, a window;
//! fewer by `stages=`/`second_stages=`), concurrent passes, whether observing is one step or two
//! list steps, and how many crashes, lost answers, spec changes (new revision, stage reorder,
//! selector change), hand revocations, pauses, aborts and Sveltos failures may happen. Approvals,
//! resumes, Sveltos deployments, passes and clock ticks are unbounded: they are what lets a rollout
//! finish. CI checks [`Bounds::ci`](setup::Bounds::ci) (one promotion, one pass at a time, a crash,
//! a new revision); larger bounds run on demand (docs/src/contributors/benchmarks.md has their sizes and times). A lost
//! answer is of a write the API server applied (`Step::WriteLost`) or never applied
//! (`Step::WriteDropped`: a reset before the server read it, a 504 not committed): the pass gets
//! the same unknown outcome for both, and after a lost status write reads the promotion back, as
//! `act` does, in the same step (a write of another actor between the two is not modelled; the
//! read would then show another status, which `act` takes for a lost answer). CI checks one lost
//! answer over the whole graph of one revision's rollout (`ci,crashes=0,spec_changes=0,lost=1`,
//! states counted in the model-checker page) and on the incident path to a depth (below).
//!
//! Two promotions and two concurrent passes (issue 33 §1) are in CI in bounds cut where they add
//! nothing of their own. Two promotions: the whole graph of p0 of `dev` and `prod` and p1 of `dev`
//! alone, one pass at a time killed once (`stages=dev+prod`, `second_stages=dev`; 13,426 states,
//! liveness included): one pass decides both from one listing and writes both, a crash may fall
//! between them, both promotions' profiles and summaries are in one world, and `dev` runs a profile
//! of each. A stage's gate is the same with one promotion or two (the bounds of one promotion check
//! every gate), and the whole graph with p0's three stages is 20,360 states without a crash, over
//! CI's budget. Two passes listing one by one (`observe=lists`), from the first rollout completed
//! (`start=completed`: the first rollout's interleavings are one pass's), a new revision, to depth
//! 15 (15,883 states, step invariants only): both passes restarting the run, one's view going stale
//! under the other's writes, the conflicts that stop it; its whole graph is out of CI's reach (its
//! levels still grow ×1.6 at depth 15; from a fresh store without faults it is 270,538 states).
//! Issue 24's stale-view race, re-introduced, is reported at depth 12.
//!
//! `clusters=2` ([`Bounds::clusters`](setup::Bounds::clusters)): `dev` (or the stage
//! `clusters_in=` names) selects two clusters and Sveltos reconciles its profile per cluster
//! (`Step::OnCluster`), so one cluster may run the revision while the other runs nothing, the
//! previous one, or has failed; every check that a stage ran a revision asks it of each cluster
//! the stage selects, from the summaries in the store ([`ghost::ran_everywhere`]), and so does a
//! reverse rollback's wait for the stages above. With one cluster per stage "all" and "any" of a
//! stage's clusters look the same. CI checks its whole graph with one deployment failing
//! (`ci,crashes=0,spec_changes=0,failures=1,clusters=2`, 14,575 states); the incident path with
//! `clusters_in=staging` runs on demand, to a depth (docs/src/contributors/benchmarks.md, "Model checker").
//!
//! `budget=N` ([`Bounds::budget`](setup::Bounds::budget), issue 49): the stage of two clusters
//! has the failure budget N (`promoter.dev/failure-budget: dev=N`), and Sveltos may also retry a
//! failed deployment on a cluster (`Outcome::Retrying`: back to `Provisioning`, no failure), so
//! that a cluster counted against the budget can go back to deploying. The ghost counts a stage
//! run once the world runs its revision on all its clusters but at most N, and [`budget`] checks
//! the rest from the writing pass's own listing and the run's record (`promoter.dev/budgeted`):
//! the pass that passes a stage listed at most N of its clusters outside the revision, each named;
//! a cluster is named only while listed failing, and dropped only once listed running the revision
//! or gone from the stage; no decision holds a stage over its budget while at most N of its
//! clusters can count against it in the decision's run. CI checks `budget=1` with two failures and
//! a new revision over the whole graph (`a_failure_budget_of_one_on_two_clusters_is_spent_once_per_run`).
//! With two clusters and a budget of one, a stage cannot pass with both outside (promoter's rule
//! wants the revision running on at least one): what the bound reaches is which cluster is named,
//! for how long, and in which run. The budget's health-check rule (checks skip the budgeted
//! clusters) is not modelled, as health checks are not.
//!
//! # The incident path (issue 33 §1)
//!
//! On demand (`Bounds::parse` overrides, not in [`Bounds::ci`]): progress deadlines with the
//! failure policy `halt` or `rollback` in either order (`policy=`; a deadline of 10m, shorter than
//! a step, so a stage Sveltos does not finish within its step misses it), `promoter rollback`
//! (`rollbacks=`, also `--to-revision`), `resume` of a held or rolled-back revision (unbounded),
//! a PromotionFreeze of `tier=prod` created (`freezes=`), deleted, or expiring with the clock, and
//! `freeze bypass` (`bypasses=`). The commands are their own pure functions (`ops::rollback`,
//! `ops::freeze`, `ops::control`). `ghost` judges them from the world: a profile goes back to an
//! earlier revision only for a rollback asked for the run, only to the last revision every stage
//! ran on all its clusters, in reverse order only once every higher stage runs it everywhere; a
//! rolled-back revision starts again only after a `resume` that says it redeploys it; a run whose
//! status showed a missed deadline neither moves on nor gets its revision on a profile until a
//! person resumes; no stage starts under an active freeze (read by the pass) without a valid
//! bypass. Bounds of their own: `start=completed` ([`Start`](setup::Start): explore from the
//! first rollout completed by one scripted path, [`start`]), `deadline_on=<stage>`, `late=N`
//! (how often Sveltos may be late on a stage with a deadline: without it every resumed run may
//! miss again and the history grows with each miss) and `max_depth=N` (every state within N
//! steps, step invariants only). CI checks the whole graph of a deadline on every stage under
//! the rollback policy with one revision (a miss holds: 35,847 states, liveness), and to a depth
//! the rollback in reverse order after a completed rollout (29 steps; with one lost answer, 24
//! steps) and `promoter rollback`, freezes and bypasses (10 steps); their whole graphs are too
//! large for CI (docs/src/contributors/benchmarks.md).
//! CI also replays the rollback path (`a_missed_deadline_rolls_back_to_the_good_revision`).
//! Not modelled: a rollback's own deadline (set to `none`: its default, 1h, is two steps, which
//! the fingerprint cannot tell apart), deadlines together with pauses (the time held is summed
//! from timestamps older than the horizon), health checks, Cluster API clusters, sharding and
//! notifications.

pub mod budget;
pub mod canon;
pub mod explore;
pub mod ghost;
pub mod memo;
pub mod reference;
pub mod setup;
pub mod start;
pub mod state;
pub mod sveltos;
pub mod trace;

pub use explore::{Report, Violation, explore};
pub use setup::{Bounds, Observe, Policy, SpecChange, Start};
pub use state::{State, Step};
