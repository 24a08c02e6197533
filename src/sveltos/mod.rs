//! How Sveltos itself stores and reads what promoter writes.

pub mod normal_form;
pub mod redeploy;
