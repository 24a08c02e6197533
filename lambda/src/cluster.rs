//! Reaching the management cluster from Lambda, where there is neither a kubectl nor an aws CLI.
//!
//! The kubeconfig comes, in this order, from `PROMOTER_KUBECONFIG_DATA` (the YAML itself, or its
//! base64), from the file named by `PROMOTER_KUBECONFIG` or `KUBECONFIG`, or is made from
//! `PROMOTER_EKS_CLUSTER` + `PROMOTER_EKS_ENDPOINT` + `PROMOTER_EKS_CA_DATA` (what Terraform's
//! `aws_eks_cluster` outputs). Amazon EKS authentication is done natively: a user whose exec plugin
//! is `aws eks get-token` or `aws-iam-authenticator token` gets the same token built in-process from
//! the function's credentials, and `PROMOTER_EKS_CLUSTER` forces that for the selected user.

use crate::eks::{self, AwsCredentials};
use anyhow::{Context as _, bail};
use base64::Engine as _;
use kube::config::{AuthInfo, KubeConfigOptions, Kubeconfig, NamedAuthInfo};
use std::time::SystemTime;

/// The process environment, or a test's.
pub type Env<'a> = &'a dyn Fn(&str) -> Option<String>;

fn var(env: Env, name: &str) -> Option<String> {
    env(name).filter(|v| !v.trim().is_empty())
}

/// Where the kubeconfig came from, for error messages.
fn load_kubeconfig(env: Env) -> anyhow::Result<(Kubeconfig, String)> {
    if let Some(data) = var(env, "PROMOTER_KUBECONFIG_DATA") {
        let text = decode_inline(&data).context("PROMOTER_KUBECONFIG_DATA")?;
        let kubeconfig =
            Kubeconfig::from_yaml(&text).context("PROMOTER_KUBECONFIG_DATA: not a kubeconfig")?;
        return Ok((kubeconfig, "PROMOTER_KUBECONFIG_DATA".into()));
    }
    for name in ["PROMOTER_KUBECONFIG", "KUBECONFIG"] {
        if let Some(path) = var(env, name) {
            let kubeconfig = Kubeconfig::read_from(&path)
                .with_context(|| format!("{name}: reading kubeconfig {path}"))?;
            return Ok((kubeconfig, format!("kubeconfig {path}")));
        }
    }
    if let Some(cluster) = var(env, "PROMOTER_EKS_CLUSTER") {
        let endpoint = var(env, "PROMOTER_EKS_ENDPOINT").context(
            "PROMOTER_EKS_CLUSTER is set without a kubeconfig: PROMOTER_EKS_ENDPOINT (the cluster's API server URL) is required too",
        )?;
        let ca = var(env, "PROMOTER_EKS_CA_DATA")
            .map(|ca| format!("\n    certificate-authority-data: {ca}"))
            .unwrap_or_default();
        let yaml = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: {cluster}\n  cluster:\n    server: {endpoint}{ca}\nusers:\n- name: {cluster}\n  user: {{}}\ncontexts:\n- name: {cluster}\n  context:\n    cluster: {cluster}\n    user: {cluster}\ncurrent-context: {cluster}\n"
        );
        let kubeconfig =
            Kubeconfig::from_yaml(&yaml).context("PROMOTER_EKS_ENDPOINT / PROMOTER_EKS_CA_DATA")?;
        return Ok((kubeconfig, format!("EKS cluster {cluster}")));
    }
    bail!(
        "no cluster configured: set PROMOTER_KUBECONFIG (a file in the package or a layer), PROMOTER_KUBECONFIG_DATA (the kubeconfig, or its base64), or PROMOTER_EKS_CLUSTER with PROMOTER_EKS_ENDPOINT and PROMOTER_EKS_CA_DATA"
    )
}

/// Inline kubeconfigs are often base64-encoded to survive environment variable tooling.
fn decode_inline(data: &str) -> anyhow::Result<String> {
    let trimmed = data.trim();
    if trimmed.contains('\n') || trimmed.contains(':') {
        return Ok(data.to_string());
    }
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(trimmed)
        .context("neither YAML nor base64")?;
    String::from_utf8(bytes).context("base64 of something that is not text")
}

/// The EKS cluster an exec plugin would get a token for, if it is one promoter can replace.
fn eks_exec_cluster(user: &AuthInfo) -> anyhow::Result<Option<(String, Option<String>)>> {
    let Some(exec) = &user.exec else {
        return Ok(None);
    };
    let command = exec.command.as_deref().unwrap_or_default();
    let program = command.rsplit('/').next().unwrap_or(command);
    let args = exec.args.clone().unwrap_or_default();
    let flag = |names: &[&str]| -> Option<String> {
        args.iter().enumerate().find_map(|(i, a)| {
            names.iter().find_map(|n| {
                if a == n {
                    args.get(i + 1).cloned()
                } else {
                    a.strip_prefix(&format!("{n}=")).map(String::from)
                }
            })
        })
    };
    let has = |word: &str| args.iter().any(|a| a == word);
    match program {
        "aws" if has("eks") && has("get-token") => {
            if flag(&["--role-arn"]).is_some() {
                bail!(
                    "`aws eks get-token --role-arn` is not supported in Lambda: grant the function's own role access to the cluster (an EKS access entry) instead"
                );
            }
            let cluster = flag(&["--cluster-name", "--cluster-id"])
                .context("`aws eks get-token` without --cluster-name")?;
            Ok(Some((cluster, flag(&["--region"]))))
        }
        "aws-iam-authenticator" if has("token") => {
            if flag(&["-r", "--role"]).is_some() {
                bail!(
                    "`aws-iam-authenticator token --role` is not supported in Lambda: grant the function's own role access to the cluster instead"
                );
            }
            let cluster = flag(&["-i", "--cluster-id"])
                .context("`aws-iam-authenticator token` without -i/--cluster-id")?;
            Ok(Some((cluster, flag(&["--region"]))))
        }
        _ => Ok(None),
    }
}

/// Replaces the selected user's EKS exec plugin (or, with `PROMOTER_EKS_CLUSTER`, its credentials)
/// by a native token. Returns the EKS cluster name when it did.
fn authenticate_eks(
    kubeconfig: &mut Kubeconfig,
    context: Option<&str>,
    env: Env,
    now: SystemTime,
) -> anyhow::Result<Option<String>> {
    let context_name = context
        .map(String::from)
        .or_else(|| kubeconfig.current_context.clone())
        .context("the kubeconfig has no current-context and PROMOTER_CONTEXT is not set")?;
    let user_name = kubeconfig
        .contexts
        .iter()
        .find(|c| c.name == context_name)
        .and_then(|c| c.context.as_ref())
        .with_context(|| format!("context {context_name:?} is not in the kubeconfig"))?
        .user
        .clone()
        .unwrap_or_default();
    let position = kubeconfig
        .auth_infos
        .iter()
        .position(|a| a.name == user_name);
    let current = position
        .and_then(|i| kubeconfig.auth_infos[i].auth_info.clone())
        .unwrap_or_default();
    let (cluster, region) = match var(env, "PROMOTER_EKS_CLUSTER") {
        Some(cluster) => (cluster, None),
        None => match eks_exec_cluster(&current)
            .with_context(|| format!("user {user_name:?} of context {context_name:?}"))?
        {
            Some(found) => found,
            None => return Ok(None),
        },
    };
    let region = region
        .or_else(|| var(env, "AWS_REGION"))
        .or_else(|| var(env, "AWS_DEFAULT_REGION"))
        .ok_or(eks::EksError::MissingRegion)?;
    let creds = AwsCredentials::from_env(env)?;
    let token = eks::token(&cluster, &region, &creds, now)?;
    let auth = AuthInfo {
        token: Some(token.into()),
        ..AuthInfo::default()
    };
    match position {
        Some(i) => kubeconfig.auth_infos[i].auth_info = Some(auth),
        None => kubeconfig.auth_infos.push(NamedAuthInfo {
            name: user_name,
            auth_info: Some(auth),
            other: Default::default(),
        }),
    }
    Ok(Some(cluster))
}

/// A kube client for the management cluster, authenticated for this invocation.
pub async fn client(env: Env<'_>, now: SystemTime) -> anyhow::Result<kube::Client> {
    let (mut kubeconfig, origin) = load_kubeconfig(env)?;
    let context = var(env, "PROMOTER_CONTEXT");
    if let Some(cluster) = authenticate_eks(&mut kubeconfig, context.as_deref(), env, now)
        .with_context(|| format!("{origin}: EKS authentication"))?
    {
        tracing::debug!(%cluster, "authenticating to EKS with a token signed in-process");
    }
    let options = KubeConfigOptions {
        context,
        ..Default::default()
    };
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &options)
        .await
        .with_context(|| format!("{origin}: invalid kubeconfig"))?;
    promoter::client::from_config(config).with_context(|| format!("{origin}: building the client"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    const BASE: &str = "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://example.eks.amazonaws.com\ncontexts:\n- name: c\n  context:\n    cluster: c\n    user: u\ncurrent-context: c\n";

    fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> + use<> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k: &str| map.get(k).cloned()
    }

    fn with_user(user: &str) -> Kubeconfig {
        Kubeconfig::from_yaml(&format!("{BASE}users:\n- name: u\n  user:\n{user}")).unwrap()
    }

    fn aws_creds() -> Vec<(&'static str, &'static str)> {
        vec![
            ("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE"),
            (
                "AWS_SECRET_ACCESS_KEY",
                "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
            ),
            ("AWS_REGION", "eu-west-1"),
        ]
    }

    fn token_of(k: &Kubeconfig) -> String {
        use secrecy::ExposeSecret as _;
        let auth = k.auth_infos[0].auth_info.as_ref().unwrap();
        assert!(auth.exec.is_none(), "the exec plugin is replaced");
        auth.token.as_ref().unwrap().expose_secret().to_string()
    }

    fn decoded_url(token: &str) -> String {
        let b64 = token.strip_prefix(eks::TOKEN_PREFIX).unwrap();
        let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(b64)
            .unwrap();
        String::from_utf8(bytes).unwrap()
    }

    #[test]
    fn aws_eks_get_token_is_replaced_by_a_native_token() {
        // What `aws eks update-kubeconfig` writes.
        let mut k = with_user(
            "    exec:\n      apiVersion: client.authentication.k8s.io/v1beta1\n      command: aws\n      args: [--region, us-west-2, eks, get-token, --cluster-name, prod-mgmt, --output, json]\n",
        );
        let env = env_of(&aws_creds());
        let cluster = authenticate_eks(&mut k, None, &env, SystemTime::now()).unwrap();
        assert_eq!(cluster.as_deref(), Some("prod-mgmt"));
        let url = decoded_url(&token_of(&k));
        assert!(
            url.starts_with("https://sts.us-west-2.amazonaws.com/?Action=GetCallerIdentity"),
            "the exec plugin's --region wins over AWS_REGION: {url}"
        );
        assert!(
            url.contains("X-Amz-SignedHeaders=host%3Bx-k8s-aws-id"),
            "{url}"
        );
    }

    #[test]
    fn aws_iam_authenticator_is_replaced_too() {
        let mut k = with_user(
            "    exec:\n      apiVersion: client.authentication.k8s.io/v1beta1\n      command: /usr/local/bin/aws-iam-authenticator\n      args: [token, -i, legacy]\n",
        );
        let env = env_of(&aws_creds());
        let cluster = authenticate_eks(&mut k, None, &env, SystemTime::now()).unwrap();
        assert_eq!(cluster.as_deref(), Some("legacy"));
        assert!(decoded_url(&token_of(&k)).starts_with("https://sts.eu-west-1.amazonaws.com/"));
    }

    #[test]
    fn other_users_are_left_alone() {
        let mut k = with_user("    token: static-token\n");
        let env = env_of(&aws_creds());
        assert_eq!(
            authenticate_eks(&mut k, None, &env, SystemTime::now()).unwrap(),
            None
        );
        assert_eq!(token_of(&k), "static-token");
    }

    #[test]
    fn an_assumed_role_is_refused_with_the_way_out() {
        let mut k = with_user(
            "    exec:\n      command: aws\n      args: [eks, get-token, --cluster-name, x, --role-arn, 'arn:aws:iam::1:role/r']\n",
        );
        let env = env_of(&aws_creds());
        let err = authenticate_eks(&mut k, None, &env, SystemTime::now()).unwrap_err();
        let text = format!("{err:#}");
        assert!(
            text.contains("--role-arn") && text.contains("access entry"),
            "{text}"
        );
    }

    #[test]
    fn missing_region_and_credentials_are_named() {
        let exec =
            "    exec:\n      command: aws\n      args: [eks, get-token, --cluster-name=x]\n";
        let mut k = with_user(exec);
        let env = env_of(&[("AWS_ACCESS_KEY_ID", "A"), ("AWS_SECRET_ACCESS_KEY", "S")]);
        let err = authenticate_eks(&mut k, None, &env, SystemTime::now()).unwrap_err();
        assert!(err.to_string().contains("AWS_REGION"), "{err}");
        let mut k = with_user(exec);
        let env = env_of(&[("AWS_REGION", "eu-west-1")]);
        let err = authenticate_eks(&mut k, None, &env, SystemTime::now()).unwrap_err();
        assert!(err.to_string().contains("AWS_ACCESS_KEY_ID"), "{err}");
    }

    #[test]
    fn an_eks_cluster_needs_no_kubeconfig() {
        let mut pairs = aws_creds();
        pairs.extend([
            ("PROMOTER_EKS_CLUSTER", "fleet"),
            (
                "PROMOTER_EKS_ENDPOINT",
                "https://ABC.gr7.eu-west-1.eks.amazonaws.com",
            ),
            (
                "PROMOTER_EKS_CA_DATA",
                "TFMwdExTMUNSVWRKVGlCRFJWSlVTVVpKUTBGVVJTMHRMUzB0Q2c9PQ==",
            ),
        ]);
        let env = env_of(&pairs);
        let (mut k, origin) = load_kubeconfig(&env).unwrap();
        assert_eq!(origin, "EKS cluster fleet");
        let cluster = authenticate_eks(&mut k, None, &env, SystemTime::now()).unwrap();
        assert_eq!(cluster.as_deref(), Some("fleet"));
        assert!(token_of(&k).starts_with(eks::TOKEN_PREFIX));
        let server = k.clusters[0].cluster.as_ref().unwrap().server.clone();
        assert_eq!(
            server.as_deref(),
            Some("https://ABC.gr7.eu-west-1.eks.amazonaws.com")
        );

        let env = env_of(&[("PROMOTER_EKS_CLUSTER", "fleet")]);
        let err = load_kubeconfig(&env).unwrap_err().to_string();
        assert!(err.contains("PROMOTER_EKS_ENDPOINT"), "{err}");
    }

    #[test]
    fn inline_kubeconfigs_may_be_base64() {
        let yaml = format!("{BASE}users:\n- name: u\n  user:\n    token: t\n");
        let b64 = base64::engine::general_purpose::STANDARD.encode(&yaml);
        for data in [yaml.as_str(), b64.as_str()] {
            let env = env_of(&[("PROMOTER_KUBECONFIG_DATA", data)]);
            let (k, origin) = load_kubeconfig(&env).unwrap();
            assert_eq!(origin, "PROMOTER_KUBECONFIG_DATA");
            assert_eq!(k.current_context.as_deref(), Some("c"));
        }
        let env = env_of(&[("PROMOTER_KUBECONFIG_DATA", "%%%")]);
        let err = format!("{:#}", load_kubeconfig(&env).unwrap_err());
        assert!(err.contains("PROMOTER_KUBECONFIG_DATA"), "{err}");
    }

    #[test]
    fn nothing_configured_says_what_to_set() {
        let env = env_of(&[]);
        let err = load_kubeconfig(&env).unwrap_err().to_string();
        for name in [
            "PROMOTER_KUBECONFIG",
            "PROMOTER_KUBECONFIG_DATA",
            "PROMOTER_EKS_CLUSTER",
        ] {
            assert!(err.contains(name), "{err}");
        }
    }

    #[test]
    fn a_missing_kubeconfig_file_is_named() {
        let env = env_of(&[("PROMOTER_KUBECONFIG", "/nonexistent/kubeconfig")]);
        let err = format!("{:#}", load_kubeconfig(&env).unwrap_err());
        assert!(err.contains("/nonexistent/kubeconfig"), "{err}");
    }
}
