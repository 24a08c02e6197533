//! Amazon EKS authentication without the aws CLI: the bearer token `aws eks get-token` prints,
//! built in-process. The token is `k8s-aws-v1.` followed by the unpadded base64url of a presigned
//! STS `GetCallerIdentity` URL whose signature covers the `x-k8s-aws-id` header (the cluster name);
//! EKS calls that URL to learn who we are. Signing is done by AWS's own `aws-sigv4` crate.

use aws_credential_types::Credentials;
use aws_sigv4::http_request::{
    SignableBody, SignableRequest, SignatureLocation, SigningSettings, sign,
};
use aws_sigv4::sign::v4;
use base64::Engine as _;
use std::time::{Duration, SystemTime};

pub const TOKEN_PREFIX: &str = "k8s-aws-v1.";
const CLUSTER_ID_HEADER: &str = "x-k8s-aws-id";
/// What `aws eks get-token` uses; EKS accepts a token for 15 minutes after its signing time
/// whatever the expiry says, which is far longer than one pass.
const URL_EXPIRY: Duration = Duration::from_secs(60);

#[derive(Debug, thiserror::Error)]
pub enum EksError {
    #[error(
        "no AWS credentials: {0} is not set (Lambda sets AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN from the function's role)"
    )]
    MissingCredentials(&'static str),
    #[error(
        "no AWS region: set AWS_REGION (Lambda sets it) or pass --region in the kubeconfig's exec args"
    )]
    MissingRegion,
    #[error("signing the STS GetCallerIdentity request for EKS cluster {cluster:?}: {reason}")]
    Signing { cluster: String, reason: String },
}

/// The function's own credentials, as Lambda provides them in its environment.
#[derive(Clone)]
pub struct AwsCredentials {
    pub access_key_id: String,
    pub secret_access_key: String,
    pub session_token: Option<String>,
}

impl std::fmt::Debug for AwsCredentials {
    // Never print the secret parts.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AwsCredentials")
            .field("access_key_id", &self.access_key_id)
            .finish_non_exhaustive()
    }
}

impl AwsCredentials {
    pub fn from_env(var: impl Fn(&str) -> Option<String>) -> Result<Self, EksError> {
        let required = |name: &'static str| {
            var(name)
                .filter(|v| !v.is_empty())
                .ok_or(EksError::MissingCredentials(name))
        };
        Ok(AwsCredentials {
            access_key_id: required("AWS_ACCESS_KEY_ID")?,
            secret_access_key: required("AWS_SECRET_ACCESS_KEY")?,
            session_token: var("AWS_SESSION_TOKEN").filter(|v| !v.is_empty()),
        })
    }
}

/// The regional STS endpoint, in the partition of the region.
pub fn sts_host(region: &str) -> String {
    if region.starts_with("cn-") {
        format!("sts.{region}.amazonaws.com.cn")
    } else {
        format!("sts.{region}.amazonaws.com")
    }
}

/// The presigned STS URL for `cluster`, signed at `time`.
pub fn presigned_url(
    cluster: &str,
    region: &str,
    creds: &AwsCredentials,
    time: SystemTime,
) -> Result<String, EksError> {
    let url = format!(
        "https://{}/?Action=GetCallerIdentity&Version=2011-06-15",
        sts_host(region)
    );
    let request = Presign {
        url: &url,
        headers: &[(CLUSTER_ID_HEADER, cluster)],
        service: "sts",
        region,
        expires: URL_EXPIRY,
        time,
    };
    request.sign(creds).map_err(|reason| EksError::Signing {
        cluster: cluster.to_string(),
        reason,
    })
}

/// A SigV4 query-string signature (a presigned GET URL) of any AWS request.
pub struct Presign<'a> {
    /// The URL, already percent-encoded.
    pub url: &'a str,
    /// Headers the caller of the URL must send, covered by the signature (besides `host`).
    pub headers: &'a [(&'a str, &'a str)],
    pub service: &'a str,
    pub region: &'a str,
    pub expires: Duration,
    pub time: SystemTime,
}

impl Presign<'_> {
    pub fn sign(&self, creds: &AwsCredentials) -> Result<String, String> {
        let identity = Credentials::new(
            &creds.access_key_id,
            &creds.secret_access_key,
            creds.session_token.clone(),
            None,
            "lambda-environment",
        )
        .into();
        let mut settings = SigningSettings::default();
        settings.signature_location = SignatureLocation::QueryParams;
        settings.expires_in = Some(self.expires);
        let params = v4::SigningParams::builder()
            .identity(&identity)
            .region(self.region)
            .name(self.service)
            .time(self.time)
            .settings(settings)
            .build()
            .map_err(|e| e.to_string())?
            .into();
        let signable = SignableRequest::new(
            "GET",
            self.url,
            self.headers.iter().copied(),
            SignableBody::Bytes(&[]),
        )
        .map_err(|e| e.to_string())?;
        let (instructions, _signature) = sign(signable, &params)
            .map_err(|e| e.to_string())?
            .into_parts();
        let mut request = http::Request::builder()
            .uri(self.url)
            .body(())
            .map_err(|e| e.to_string())?;
        instructions.apply_to_request_http1x(&mut request);
        Ok(request.uri().to_string())
    }
}

/// The bearer token for `cluster`, signed at `time`.
pub fn token(
    cluster: &str,
    region: &str,
    creds: &AwsCredentials,
    time: SystemTime,
) -> Result<String, EksError> {
    let url = presigned_url(cluster, region, creds, time)?;
    Ok(format!(
        "{TOKEN_PREFIX}{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(url)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_china_partition_has_its_own_domain() {
        assert_eq!(sts_host("eu-west-1"), "sts.eu-west-1.amazonaws.com");
        assert_eq!(sts_host("cn-north-1"), "sts.cn-north-1.amazonaws.com.cn");
    }

    #[test]
    fn missing_credentials_are_named() {
        let env = |k: &str| (k == "AWS_ACCESS_KEY_ID").then(|| "AKID".to_string());
        let err = AwsCredentials::from_env(env).unwrap_err().to_string();
        assert!(err.contains("AWS_SECRET_ACCESS_KEY"), "{err}");
    }

    #[test]
    fn debug_output_hides_the_secret() {
        let creds = AwsCredentials {
            access_key_id: "AKID".into(),
            secret_access_key: "very-secret".into(),
            session_token: Some("also-secret".into()),
        };
        let shown = format!("{creds:?}");
        assert!(
            shown.contains("AKID") && !shown.contains("secret\""),
            "{shown}"
        );
        assert!(!shown.contains("very-secret") && !shown.contains("also-secret"));
    }
}
