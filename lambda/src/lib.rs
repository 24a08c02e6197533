//! promoter as an AWS Lambda function: one reconciliation pass per invocation.

pub mod cluster;
pub mod eks;
pub mod emulator;
pub mod handler;

/// Every environment variable the function reads (besides the AWS_* ones Lambda sets), in the
/// order they are documented in lambda/README.md.
pub const SETTINGS: &[&str] = &[
    "PROMOTER_KUBECONFIG_DATA",
    "PROMOTER_KUBECONFIG",
    "KUBECONFIG",
    "PROMOTER_EKS_CLUSTER",
    "PROMOTER_EKS_ENDPOINT",
    "PROMOTER_EKS_CA_DATA",
    "PROMOTER_CONTEXT",
    "PROMOTER_TIMEZONE",
    "PROMOTER_LOG_LEVEL",
    "PROMOTER_LOG_FORMAT",
];
