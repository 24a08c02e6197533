//! Notifications: each transition of a promotion (a stage started or completed, waiting for
//! approval, approved, checks failing, failed, rolled back, complete) sent once to the receivers
//! the user configured (a generic webhook, Slack, Microsoft Teams, CloudEvents), although every
//! pass is a short-lived process.
//!
//! Once per transition comes from a transactional outbox on the promotion
//! (`annotations::outbox`): the pass that decides a transition records it in the guarded patch
//! before its status write; it is sent once the status confirms it, after the status write and by
//! later passes until it is delivered or older than `maxAge`. Delivery is at least once: a send
//! whose removal from the outbox was lost is sent again, with the same idempotency key.
//!
//! * `config`: the ConfigMap's rules and the Secret's URLs and tokens;
//! * `transition`: what can be notified;
//! * `body`: what each kind of receiver gets;
//! * `delivery`: which entries are due, and the outbox after sending (pure);
//! * `send`: the sending, bounded in time.

pub mod body;
pub mod config;
pub mod delivery;
pub mod send;
pub mod transition;

pub use config::{Config, Location};
pub use transition::Transition;
