//! The fake API server's watch, through kube's real client over HTTP: what a watch from a list's
//! resourceVersion sees, selectors, bookmarks, streaming lists, 410 on a compacted version, and
//! timeouts, as kube-apiserver's watch cache serves them.

use futures::{StreamExt as _, TryStreamExt as _};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{
    Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use promoter::fake::FakeApiServer;
use serde_json::json;
use std::time::Duration;

async fn server() -> (FakeApiServer, Api<ConfigMap>) {
    let s = FakeApiServer::start_with_sveltos().await.unwrap();
    let api = Api::namespaced(s.client().await.unwrap(), "default");
    (s, api)
}

fn config_map(name: &str, team: &str) -> ConfigMap {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "default", "labels": {"team": team}},
        "data": {"k": "v"}
    }))
    .unwrap()
}

/// An event as `TYPE name rv` (a bookmark as `BOOKMARK rv`, an error as `ERROR code reason`).
fn said(e: &WatchEvent<ConfigMap>) -> String {
    let of = |c: &ConfigMap| {
        format!(
            "{} {}",
            c.metadata.name.clone().unwrap_or_default(),
            c.metadata.resource_version.clone().unwrap_or_default()
        )
    };
    match e {
        WatchEvent::Added(c) => format!("ADDED {}", of(c)),
        WatchEvent::Modified(c) => format!("MODIFIED {}", of(c)),
        WatchEvent::Deleted(c) => format!("DELETED {}", of(c)),
        WatchEvent::Bookmark(b) => format!("BOOKMARK {}", b.metadata.resource_version),
        WatchEvent::Error(s) => format!("ERROR {} {}", s.code, s.reason),
    }
}

/// The next `n` events of a watch, waiting for them at most 10 s.
async fn next_events(
    stream: &mut (impl futures::Stream<Item = kube::Result<WatchEvent<ConfigMap>>> + Unpin),
    n: usize,
) -> Vec<String> {
    let mut out = Vec::new();
    while out.len() < n {
        match tokio::time::timeout(Duration::from_secs(10), stream.try_next()).await {
            Ok(Ok(Some(e))) => out.push(said(&e)),
            Ok(Ok(None)) => panic!("the watch ended after {out:?}"),
            Ok(Err(e)) => panic!("the watch failed after {out:?}: {e}"),
            Err(_) => panic!("no event within 10 s after {out:?}"),
        }
    }
    out
}

fn rv(c: &ConfigMap) -> String {
    c.metadata.resource_version.clone().unwrap_or_default()
}

#[tokio::test]
async fn a_watch_from_a_lists_version_sees_each_later_change_once_in_order() {
    let (s, api) = server().await;
    api.create(&PostParams::default(), &config_map("before", "a"))
        .await
        .unwrap();
    let listed = api.list(&ListParams::default()).await.unwrap();
    let from = listed.metadata.resource_version.unwrap();
    let mut stream = api
        .watch(&WatchParams::default().disable_bookmarks(), &from)
        .await
        .unwrap()
        .boxed();
    let created = api
        .create(&PostParams::default(), &config_map("x", "a"))
        .await
        .unwrap();
    let patched = api
        .patch(
            "x",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"k": "w"}})),
        )
        .await
        .unwrap();
    api.delete("x", &DeleteParams::default()).await.unwrap();
    let events = next_events(&mut stream, 3).await;
    let deleted_at: u64 = events[2].rsplit(' ').next().unwrap().parse().unwrap();
    assert_eq!(
        events[..2],
        [
            format!("ADDED x {}", rv(&created)),
            format!("MODIFIED x {}", rv(&patched))
        ]
    );
    assert!(events[2].starts_with("DELETED x "), "{events:?}");
    // A deletion is a write with its own revision, after the last update.
    assert!(deleted_at > rv(&patched).parse().unwrap(), "{events:?}");
    // The watch is one request, logged as a watch: nothing was listed again.
    let verbs: Vec<String> = s
        .requests()
        .iter()
        .filter(|r| r.resource == "configmaps" && (r.verb == "list" || r.verb == "watch"))
        .map(|r| r.verb.clone())
        .collect();
    assert_eq!(verbs, ["list", "watch"]);
}

#[tokio::test]
async fn a_watch_without_a_version_starts_with_the_objects_there_are() {
    let (_s, api) = server().await;
    let a = api
        .create(&PostParams::default(), &config_map("a", "a"))
        .await
        .unwrap();
    let mut stream = api
        .watch(&WatchParams::default().disable_bookmarks(), "0")
        .await
        .unwrap()
        .boxed();
    assert_eq!(
        next_events(&mut stream, 1).await,
        [format!("ADDED a {}", rv(&a))]
    );
    let b = api
        .create(&PostParams::default(), &config_map("b", "a"))
        .await
        .unwrap();
    assert_eq!(
        next_events(&mut stream, 1).await,
        [format!("ADDED b {}", rv(&b))]
    );
}

#[tokio::test]
async fn a_change_in_and_out_of_the_selector_is_added_and_deleted() {
    let (_s, api) = server().await;
    let from = api
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let mut stream = api
        .watch(
            &WatchParams::default().labels("team=a").disable_bookmarks(),
            &from,
        )
        .await
        .unwrap()
        .boxed();
    api.create(&PostParams::default(), &config_map("other", "b"))
        .await
        .unwrap();
    let relabel = |team: &str| Patch::Merge(json!({"metadata": {"labels": {"team": team}}}));
    let joined = api
        .patch("other", &PatchParams::default(), &relabel("a"))
        .await
        .unwrap();
    let left = api
        .patch("other", &PatchParams::default(), &relabel("c"))
        .await
        .unwrap();
    assert_eq!(
        next_events(&mut stream, 2).await,
        [
            format!("ADDED other {}", rv(&joined)),
            format!("DELETED other {}", rv(&left))
        ]
    );
}

#[tokio::test]
async fn bookmarks_carry_a_version_to_resume_from_without_replaying_changes() {
    let (s, api) = server().await;
    s.set_bookmark_interval(Duration::from_millis(200));
    let from = api
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let mut stream = api
        .watch(&WatchParams::default().labels("team=a"), &from)
        .await
        .unwrap()
        .boxed();
    let a = api
        .create(&PostParams::default(), &config_map("a", "a"))
        .await
        .unwrap();
    // A change this watch does not select moves its bookmarks on all the same.
    let b = api
        .create(&PostParams::default(), &config_map("b", "b"))
        .await
        .unwrap();
    let b_rv: u64 = rv(&b).parse().unwrap();
    assert_eq!(
        next_events(&mut stream, 1).await,
        [format!("ADDED a {}", rv(&a))]
    );
    let bookmark = loop {
        let e = next_events(&mut stream, 1).await.remove(0);
        let at: u64 = e
            .strip_prefix("BOOKMARK ")
            .unwrap_or_else(|| panic!("{e}"))
            .parse()
            .unwrap();
        if at >= b_rv {
            break at;
        }
    };
    drop(stream);
    let mut resumed = api
        .watch(
            &WatchParams::default().labels("team=a").disable_bookmarks(),
            &bookmark.to_string(),
        )
        .await
        .unwrap()
        .boxed();
    let c = api
        .create(&PostParams::default(), &config_map("c", "a"))
        .await
        .unwrap();
    assert_eq!(
        next_events(&mut resumed, 1).await,
        [format!("ADDED c {}", rv(&c))]
    );
}

#[tokio::test]
async fn a_streaming_list_ends_its_initial_events_with_an_annotated_bookmark() {
    let (s, api) = server().await;
    let a = api
        .create(&PostParams::default(), &config_map("a", "a"))
        .await
        .unwrap();
    let mut stream = api
        .watch(&WatchParams::streaming_lists(), "")
        .await
        .unwrap()
        .boxed();
    let first = stream.try_next().await.unwrap().unwrap();
    assert_eq!(said(&first), format!("ADDED a {}", rv(&a)));
    match stream.try_next().await.unwrap().unwrap() {
        WatchEvent::Bookmark(b) => {
            assert_eq!(b.metadata.resource_version, rv(&a));
            assert_eq!(
                b.metadata
                    .annotations
                    .get("k8s.io/initial-events-end")
                    .map(String::as_str),
                Some("true")
            );
        }
        other => panic!(
            "expected the initial-events-end bookmark, got {}",
            said(&other)
        ),
    }
    // Without resourceVersionMatch=NotOlderThan the real server refuses it (kube's client
    // refuses to build it, so it is sent by hand).
    let client = s.client().await.unwrap();
    let refused = client
        .request_text(
            http::Request::get(
                "/api/v1/namespaces/default/configmaps?watch=true&sendInitialEvents=true&allowWatchBookmarks=true",
            )
            .body(Vec::new())
            .unwrap(),
        )
        .await;
    match refused {
        Err(kube::Error::Api(s)) => assert_eq!((s.code, s.reason.as_str()), (422, "Invalid")),
        other => panic!("expected 422 Invalid, got {other:?}"),
    }
}

#[tokio::test]
async fn a_watch_from_before_a_compaction_is_told_410_expired() {
    let (s, api) = server().await;
    let from = api
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    api.create(&PostParams::default(), &config_map("a", "a"))
        .await
        .unwrap();
    s.compact();
    let mut stream = api
        .watch(&WatchParams::default(), &from)
        .await
        .unwrap()
        .boxed();
    match stream.try_next().await.unwrap().unwrap() {
        WatchEvent::Error(status) => {
            assert_eq!((status.code, status.reason.as_str()), (410, "Expired"));
            assert!(
                status
                    .message
                    .starts_with(&format!("too old resource version: {from} (")),
                "{}",
                status.message
            );
        }
        other => panic!("expected a 410 ERROR event, got {}", said(&other)),
    }
    assert!(
        stream.try_next().await.unwrap().is_none(),
        "the stream ends"
    );
    // A watch from the list's version after the compaction goes on.
    let now = api
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let mut stream = api
        .watch(&WatchParams::default().disable_bookmarks(), &now)
        .await
        .unwrap()
        .boxed();
    let b = api
        .create(&PostParams::default(), &config_map("b", "a"))
        .await
        .unwrap();
    assert_eq!(
        next_events(&mut stream, 1).await,
        [format!("ADDED b {}", rv(&b))]
    );
}

#[tokio::test]
async fn a_watch_ends_at_its_timeout() {
    let (_s, api) = server().await;
    let stream = api
        .watch(&WatchParams::default().timeout(1), "0")
        .await
        .unwrap()
        .boxed();
    let ended = tokio::time::timeout(Duration::from_secs(20), stream.collect::<Vec<_>>()).await;
    assert!(ended.is_ok(), "the watch outlived its timeoutSeconds");
}

#[tokio::test]
async fn a_watch_from_a_version_sees_the_changes_made_after_it_before_the_watch_began() {
    let (_s, api) = server().await;
    let from = api
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let created = api
        .create(&PostParams::default(), &config_map("x", "a"))
        .await
        .unwrap();
    let mut stream = api
        .watch(&WatchParams::default().disable_bookmarks(), &from)
        .await
        .unwrap()
        .boxed();
    assert_eq!(
        next_events(&mut stream, 1).await,
        [format!("ADDED x {}", rv(&created))]
    );
}
