"""Generates the EKS token known-answer vectors in eks_token.json with botocore, exactly as
`aws eks get-token` builds its token (awscli/customizations/eks/get_token.py): a presigned
STS GetCallerIdentity URL, expiring in 60 s, with the x-k8s-aws-id header signed.

    python3 -m venv /tmp/v && /tmp/v/bin/pip install botocore
    /tmp/v/bin/python lambda/tests/vectors/eks_token_botocore.py > lambda/tests/vectors/eks_token.json
"""
import base64
import datetime
import json
from unittest import mock

import botocore
import botocore.auth
import botocore.session

K8S_AWS_ID_HEADER = "x-k8s-aws-id"
CASES = [
    # name, region, cluster, access key, secret, session token, signing time (UTC)
    ("long-term-keys", "us-east-1", "prod-mgmt",
     "AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", None,
     datetime.datetime(2026, 11, 22, 6, 0, 0)),
    ("lambda-role-session", "eu-west-1", "fleet-management",
     "ASIAEXAMPLEEXAMPLE00", "je7MtGbClwBF/2Zp9Utk/h3yCo8nvbEXAMPLEKEY",
     "IQoJb3JpZ2luX2VjEXAMPLE//////////wEaCWV1LXdlc3QtMSJHMEUCIQ+EXAMPLE=",
     datetime.datetime(2026, 2, 16, 23, 59, 59)),
    ("china-partition", "cn-north-1", "cn-cluster",
     "AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", None,
     datetime.datetime(2026, 3, 29, 1, 30, 0)),
]


def token(region, cluster, akid, secret, session_token, when):
    session = botocore.session.get_session()
    session.set_credentials(akid, secret, session_token)
    client = session.create_client("sts", region_name=region)

    def retrieve(params, context, **kwargs):
        if K8S_AWS_ID_HEADER in params:
            context[K8S_AWS_ID_HEADER] = params.pop(K8S_AWS_ID_HEADER)

    def inject(request, **kwargs):
        if K8S_AWS_ID_HEADER in request.context:
            request.headers[K8S_AWS_ID_HEADER] = request.context[K8S_AWS_ID_HEADER]

    client.meta.events.register("provide-client-params.sts.GetCallerIdentity", retrieve)
    client.meta.events.register("before-sign.sts.GetCallerIdentity", inject)
    with mock.patch.object(botocore.auth, "get_current_datetime", return_value=when):
        url = client.generate_presigned_url(
            "get_caller_identity",
            Params={K8S_AWS_ID_HEADER: cluster},
            ExpiresIn=60,
            HttpMethod="GET",
        )
    return url, "k8s-aws-v1." + base64.urlsafe_b64encode(url.encode()).decode().rstrip("=")


out = {"generator": f"botocore {botocore.__version__}", "cases": []}
for name, region, cluster, akid, secret, session_token, when in CASES:
    url, tok = token(region, cluster, akid, secret, session_token, when)
    out["cases"].append({
        "name": name,
        "region": region,
        "cluster": cluster,
        "accessKeyId": akid,
        "secretAccessKey": secret,
        "sessionToken": session_token,
        "time": when.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "url": url,
        "token": tok,
    })
print(json.dumps(out, indent=2))
