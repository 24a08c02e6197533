//! Bytes on the wire: kube's client asks for gzip and the fake API server, like the real one,
//! compresses responses over 128 KiB; a large ClusterSummary list arrives intact in a fraction of
//! its size.

use kube::api::{Api, ListParams};
use promoter::api::ClusterSummary;
use promoter::fake::{FakeApiServer, cluster_summary_type};
use serde_json::json;

#[tokio::test(flavor = "multi_thread")]
async fn large_lists_are_gzipped_small_answers_are_not() {
    let server = FakeApiServer::start_with_sveltos().await.unwrap();
    for i in 0..600 {
        server
            .store()
            .seed(
                &cluster_summary_type(),
                json!({"apiVersion": "config.projectsveltos.io/v1beta1", "kind": "ClusterSummary",
                    "metadata": {"name": format!("app-prod-sveltos-c{i}"), "namespace": "fleet",
                                 "labels": {"projectsveltos.io/cluster-profile-name": "app-prod"}},
                    "spec": {"clusterNamespace": "fleet", "clusterName": format!("c{i}"), "clusterType": "Sveltos",
                             "clusterProfileSpec": {"helmCharts": [{"repositoryURL": "https://kyverno.github.io/kyverno/",
                                 "repositoryName": "kyverno", "chartName": "kyverno/kyverno", "chartVersion": "3.5.2",
                                 "releaseName": "kyverno-latest", "releaseNamespace": "kyverno", "helmChartAction": "Install"}]}},
                    "status": {"featureSummaries": [{"featureID": "Helm", "status": "Provisioned"}]}}),
            )
            .unwrap();
    }
    let client = server.client().await.unwrap();
    let api: Api<ClusterSummary> = Api::all(client);
    server.clear_requests();
    let list = api.list(&ListParams::default()).await.unwrap();
    assert_eq!(list.items.len(), 600, "decompressed intact");
    let uncompressed = serde_json::to_vec(&list).unwrap().len();
    let wire = server.requests()[0].bytes;
    assert!(uncompressed > 128 * 1024, "{uncompressed}");
    assert!(
        wire * 5 < uncompressed,
        "gzip on the wire: {wire} bytes for {uncompressed}"
    );
    server.clear_requests();
    let small = api.list(&ListParams::default().limit(2)).await.unwrap();
    assert_eq!(small.items.len(), 2);
    let wire = server.requests()[0].bytes;
    assert!(
        wire > 1000 && wire < 128 * 1024,
        "small answers stay plain: {wire}"
    );
}
