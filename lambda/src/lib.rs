//! promoter as an AWS Lambda function: one reconciliation pass per invocation.

pub mod cluster;
pub mod eks;
pub mod emulator;
pub mod handler;
