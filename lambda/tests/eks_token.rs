//! Known-answer tests of the EKS token: the vectors in vectors/eks_token.json were made by botocore
//! exactly as `aws eks get-token` makes its token (vectors/eks_token_botocore.py), and two presigned
//! requests come from AWS's published SigV4 test suite.

use base64::Engine as _;
use promoter_lambda::eks::{self, AwsCredentials, Presign};
use serde_json::Value;
use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

fn at(rfc3339: &str) -> SystemTime {
    let t = chrono::DateTime::parse_from_rfc3339(rfc3339).unwrap();
    SystemTime::UNIX_EPOCH + Duration::from_secs(t.timestamp() as u64)
}

fn query(url: &str) -> BTreeMap<String, String> {
    let (_, q) = url.split_once('?').unwrap();
    q.split('&')
        .map(|kv| {
            let (k, v) = kv.split_once('=').unwrap();
            (k.to_string(), v.to_string())
        })
        .collect()
}

#[test]
fn tokens_match_aws_eks_get_token() {
    let vectors: Value = serde_json::from_str(include_str!("vectors/eks_token.json")).unwrap();
    let cases = vectors["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 3);
    for case in cases {
        let s = |k: &str| case[k].as_str().unwrap().to_string();
        let creds = AwsCredentials {
            access_key_id: s("accessKeyId"),
            secret_access_key: s("secretAccessKey"),
            session_token: case["sessionToken"].as_str().map(String::from),
        };
        let name = s("name");
        let url = eks::presigned_url(&s("cluster"), &s("region"), &creds, at(&s("time"))).unwrap();
        // Same host, path, parameters and signature; the order of the query parameters is free.
        let (base, _) = url.split_once('?').unwrap();
        let expected_url = s("url");
        let (expected_base, _) = expected_url.split_once('?').unwrap();
        assert_eq!(base, expected_base, "{name}");
        assert_eq!(query(&url), query(&expected_url), "{name}");

        let token = eks::token(&s("cluster"), &s("region"), &creds, at(&s("time"))).unwrap();
        let payload = token.strip_prefix("k8s-aws-v1.").unwrap();
        assert!(!payload.contains('='), "unpadded: {name}");
        let decoded = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(payload)
            .unwrap();
        assert_eq!(String::from_utf8(decoded).unwrap(), url, "{name}");
        if creds.session_token.is_none() {
            assert_eq!(token, s("token"), "{name}: byte for byte");
        } else {
            // aws-sigv4 appends X-Amz-Security-Token after the signature, botocore before it;
            // the signature covers the sorted parameters, so both URLs are the same request.
            assert!(url.ends_with(&format!(
                "X-Amz-Security-Token={}",
                query(&expected_url)["X-Amz-Security-Token"]
            )));
        }
    }
}

#[test]
fn a_token_changes_with_everything_it_signs() {
    let creds = AwsCredentials {
        access_key_id: "AKIDEXAMPLE".into(),
        secret_access_key: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY".into(),
        session_token: None,
    };
    let t = at("2026-11-22T06:00:00Z");
    let signature = |cluster: &str, region: &str, creds: &AwsCredentials, t: SystemTime| {
        query(&eks::presigned_url(cluster, region, creds, t).unwrap())["X-Amz-Signature"].clone()
    };
    let base = signature("a", "eu-west-1", &creds, t);
    assert_ne!(base, signature("b", "eu-west-1", &creds, t));
    assert_ne!(base, signature("a", "eu-west-2", &creds, t));
    assert_ne!(
        base,
        signature("a", "eu-west-1", &creds, t + Duration::from_secs(1))
    );
    let other = AwsCredentials {
        secret_access_key: "another".into(),
        ..creds.clone()
    };
    assert_ne!(base, signature("a", "eu-west-1", &other, t));
}

/// AWS SigV4 test suite, `get-vanilla-query-order-key-case` and `get-vanilla-with-session-token`,
/// signed in the query string.
#[test]
fn presigning_matches_the_aws_sigv4_test_suite() {
    let creds = AwsCredentials {
        access_key_id: "AKIDEXAMPLE".into(),
        secret_access_key: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY".into(),
        session_token: None,
    };
    let request = |url| Presign {
        url,
        headers: &[],
        service: "service",
        region: "us-east-1",
        expires: Duration::from_secs(3600),
        time: at("2015-08-30T12:36:00Z"),
    };
    let url = request("https://example.amazonaws.com/?Param2=value2&Param1=value1")
        .sign(&creds)
        .unwrap();
    assert_eq!(
        query(&url)["X-Amz-Signature"],
        "86012e2c9ad4d77369f5d81c11f75158aae4f895a085212cc6d3f923d300bed5"
    );
    let with_token = AwsCredentials {
        session_token: Some(
            "6e86291e8372ff2a2260956d9b8aae1d763fbf315fa00fa31553b73ebf194267".into(),
        ),
        ..creds
    };
    let url = request("https://example.amazonaws.com/")
        .sign(&with_token)
        .unwrap();
    let q = query(&url);
    assert_eq!(
        q["X-Amz-Signature"],
        "7ff2b50b376cb4d151970630573d6291dc128cc5c2a12ffb237f73cc53f67b6c"
    );
    assert_eq!(
        q["X-Amz-Security-Token"],
        "6e86291e8372ff2a2260956d9b8aae1d763fbf315fa00fa31553b73ebf194267"
    );
}
