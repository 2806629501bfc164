//! Tests of the in-process API server (`tests/support/apiserver/`) through the real kube-rs
//! client: CRUD and optimistic concurrency, the four patch types, the status subresource,
//! finalizers, selectors and paging, `kube::runtime::watcher`/`reflector` across dropped watches
//! and compaction, bookmarks and streaming lists, eviction against PodDisruptionBudgets, and
//! fault injection. Every test starts its own server on a free port.

#[path = "support/apiserver/mod.rs"]
mod apiserver;

use std::time::Duration;

use apiserver::{ApiServer, ChangeKind, RequestMatch, ServerOptions};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, EvictParams, GroupVersionKind, ListParams,
    Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use kube::runtime::{reflector, watcher};
use kube::ResourceExt;
use serde_json::{json, Value};

const WAIT: Duration = Duration::from_secs(5);

fn pod(name: &str, labels: Value) -> Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": labels},
        "spec": {"containers": [{"name": "app", "image": "busybox"}]},
    }))
    .unwrap()
}

fn nodeclaims() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("karpenter.sh", "v1", "NodeClaim"),
        "nodeclaims",
    )
}

fn nodeclaim(name: &str) -> DynamicObject {
    DynamicObject::new(name, &nodeclaims()).data(json!({
        "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}},
        "status": {"providerID": "set-on-create"},
    }))
}

/// Asserts that a call failed with this HTTP code and Status reason.
#[track_caller]
fn fails<T: std::fmt::Debug>(r: kube::Result<T>, code: u16, reason: &str) {
    match r {
        Err(kube::Error::Api(s)) => {
            assert_eq!((s.code, s.reason.as_str()), (code, reason), "{}", s.message)
        }
        other => panic!("expected {code} {reason}, got {other:?}"),
    }
}

fn rv(o: &impl ResourceExt) -> u64 {
    o.resource_version().unwrap().parse().unwrap()
}

#[tokio::test]
async fn create_get_list_and_stale_update_conflicts() {
    let server = ApiServer::start().await;
    let pods: Api<Pod> = Api::namespaced(server.client(), "default");
    let created = pods
        .create(&PostParams::default(), &pod("a", json!({"app": "x"})))
        .await
        .unwrap();
    assert!(!created.uid().unwrap().is_empty());
    assert!(created.metadata.creation_timestamp.is_some());
    assert_eq!(
        created.status.as_ref().unwrap().phase.as_deref(),
        Some("Pending")
    );

    let got = pods.get("a").await.unwrap();
    assert_eq!(got.resource_version(), created.resource_version());
    let list = pods.list(&ListParams::default()).await.unwrap();
    assert_eq!(list.items.len(), 1);
    assert_eq!(
        list.metadata.resource_version.as_deref(),
        Some(server.resource_version().to_string().as_str())
    );

    let mut fresh = got.clone();
    fresh.labels_mut().insert("v".into(), "2".into());
    let replaced = pods
        .replace("a", &PostParams::default(), &fresh)
        .await
        .unwrap();
    assert!(rv(&replaced) > rv(&got));
    let mut stale = got.clone();
    stale.labels_mut().insert("v".into(), "3".into());
    fails(
        pods.replace("a", &PostParams::default(), &stale).await,
        409,
        "Conflict",
    );

    fails(
        pods.create(&PostParams::default(), &pod("a", json!({})))
            .await,
        409,
        "AlreadyExists",
    );
    fails(pods.get("missing").await, 404, "NotFound");
}

#[tokio::test]
async fn merge_json_apply_and_strategic_patches_on_pods() {
    let server = ApiServer::start().await;
    let pods: Api<Pod> = Api::namespaced(server.client(), "default");
    pods.create(&PostParams::default(), &pod("p", json!({"a": "1"})))
        .await
        .unwrap();
    let pp = PatchParams::default();

    let merged = pods
        .patch(
            "p",
            &pp,
            &Patch::Merge(json!({"metadata": {"labels": {"b": "2", "a": null}}})),
        )
        .await
        .unwrap();
    assert_eq!(merged.labels().get("b").map(String::as_str), Some("2"));
    assert!(!merged.labels().contains_key("a"));

    let ops: json_patch::Patch = serde_json::from_value(json!([
        {"op": "add", "path": "/metadata/annotations", "value": {"note": "json"}},
        {"op": "replace", "path": "/spec/containers/0/image", "value": "nginx"},
    ]))
    .unwrap();
    let jp = pods.patch("p", &pp, &Patch::<()>::Json(ops)).await.unwrap();
    assert_eq!(
        jp.annotations().get("note").map(String::as_str),
        Some("json")
    );
    assert_eq!(
        jp.spec.as_ref().unwrap().containers[0].image.as_deref(),
        Some("nginx")
    );

    let failing: json_patch::Patch =
        serde_json::from_value(json!([{"op": "test", "path": "/metadata/name", "value": "other"}]))
            .unwrap();
    fails(
        pods.patch("p", &pp, &Patch::<()>::Json(failing)).await,
        422,
        "Invalid",
    );

    let apply = PatchParams::apply("tester").force();
    let body =
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"c": "3"}}});
    let applied = pods.patch("p", &apply, &Patch::Apply(&body)).await.unwrap();
    assert_eq!(applied.labels().get("c").map(String::as_str), Some("3"));
    assert_eq!(applied.labels().get("b").map(String::as_str), Some("2"));

    let smp = json!({"spec": {"containers": [{"name": "sidecar", "image": "envoy"}]}});
    let sp = pods.patch("p", &pp, &Patch::Strategic(smp)).await.unwrap();
    let names: Vec<_> = sp
        .spec
        .unwrap()
        .containers
        .iter()
        .map(|c| c.name.clone())
        .collect();
    assert_eq!(names, ["app", "sidecar"]);

    let new_pod = json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "q"},
        "spec": {"containers": [{"name": "c", "image": "i"}]},
    });
    let created = pods
        .patch("q", &apply, &Patch::Apply(new_pod))
        .await
        .unwrap();
    assert_eq!(created.name_any(), "q");
    assert!(server.get("pods", Some("default"), "q").is_ok());
}

#[tokio::test]
async fn nodeclaim_status_subresource_and_generation() {
    let server = ApiServer::start().await;
    let api: Api<DynamicObject> = Api::all_with(server.client(), &nodeclaims());
    let created = api
        .create(&PostParams::default(), &nodeclaim("nc-1"))
        .await
        .unwrap();
    assert_eq!(created.metadata.generation, Some(1));
    assert!(
        created.data.get("status").is_none(),
        "status is dropped on create: {:?}",
        created.data
    );
    assert!(created.metadata.namespace.is_none());

    let pp = PatchParams::default();
    let st = api
        .patch_status(
            "nc-1",
            &pp,
            &Patch::Merge(json!({"status": {"providerID": "aws:///i-1"}, "spec": {"nodeClassRef": {"name": "x"}}})),
        )
        .await
        .unwrap();
    assert_eq!(st.data["status"]["providerID"], "aws:///i-1");
    assert_eq!(
        st.data["spec"]["nodeClassRef"]["name"], "default",
        "spec ignored on /status"
    );
    assert_eq!(st.metadata.generation, Some(1));
    assert!(rv(&st) > rv(&created));

    let main = api
        .patch(
            "nc-1",
            &pp,
            &Patch::Merge(json!({"status": {"providerID": "ignored"}, "spec": {"nodeClassRef": {"name": "other"}}})),
        )
        .await
        .unwrap();
    assert_eq!(
        main.data["status"]["providerID"], "aws:///i-1",
        "status ignored on the main resource"
    );
    assert_eq!(main.data["spec"]["nodeClassRef"]["name"], "other");
    assert_eq!(main.metadata.generation, Some(2));

    let same = api
        .patch(
            "nc-1",
            &pp,
            &Patch::Merge(json!({"spec": {"nodeClassRef": {"name": "other"}}})),
        )
        .await
        .unwrap();
    assert_eq!(
        same.resource_version(),
        main.resource_version(),
        "a no-op patch writes nothing"
    );

    let apply = PatchParams::apply("joiner").force();
    let body = json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
        "metadata": {"name": "nc-1"}, "status": {"nodeName": "node-1"},
    });
    let applied = api
        .patch_status("nc-1", &apply, &Patch::Apply(&body))
        .await
        .unwrap();
    assert_eq!(applied.data["status"]["nodeName"], "node-1");
    assert_eq!(applied.data["status"]["providerID"], "aws:///i-1");
}

#[tokio::test]
async fn finalizers_hold_deletion_until_removed() {
    let server = ApiServer::start().await;
    let api: Api<DynamicObject> = Api::all_with(server.client(), &nodeclaims());
    api.create(&PostParams::default(), &nodeclaim("nc-f"))
        .await
        .unwrap();
    // How kube-runtime's finalizer helper adds the first finalizer: `test` of the missing list
    // against null, which the real server lets pass.
    let first: json_patch::Patch = serde_json::from_value(json!([
        {"op": "test", "path": "/metadata/finalizers", "value": null},
        {"op": "add", "path": "/metadata/finalizers", "value": ["karpenter.sh/termination"]},
    ]))
    .unwrap();
    let with = api
        .patch("nc-f", &PatchParams::default(), &Patch::<()>::Json(first))
        .await
        .unwrap();
    assert_eq!(with.finalizers(), ["karpenter.sh/termination"]);
    let mut events = server.subscribe();

    let deleted = api.delete("nc-f", &DeleteParams::default()).await.unwrap();
    let kept = deleted
        .left()
        .expect("object returned while finalizers are pending");
    assert!(kept.metadata.deletion_timestamp.is_some());
    let still = api.get("nc-f").await.unwrap();
    assert!(still.metadata.deletion_timestamp.is_some());
    assert_eq!(events.recv().await.unwrap().kind, ChangeKind::Modified);

    let add =
        Patch::Merge(json!({"metadata": {"finalizers": ["karpenter.sh/termination", "extra"]}}));
    fails(
        api.patch("nc-f", &PatchParams::default(), &add).await,
        422,
        "Invalid",
    );

    let remove: json_patch::Patch = serde_json::from_value(json!([
        {"op": "test", "path": "/metadata/finalizers", "value": ["karpenter.sh/termination"]},
        {"op": "remove", "path": "/metadata/finalizers/0"},
    ]))
    .unwrap();
    api.patch("nc-f", &PatchParams::default(), &Patch::<()>::Json(remove))
        .await
        .unwrap();
    fails(api.get("nc-f").await, 404, "NotFound");
    let gone = events.recv().await.unwrap();
    assert_eq!(
        (gone.kind, gone.object["metadata"]["name"].as_str()),
        (ChangeKind::Deleted, Some("nc-f"))
    );

    api.create(&PostParams::default(), &nodeclaim("plain"))
        .await
        .unwrap();
    let status = api
        .delete("plain", &DeleteParams::default())
        .await
        .unwrap()
        .right()
        .expect("Status for immediate removal");
    assert_eq!(status.code, 200);
    fails(api.get("plain").await, 404, "NotFound");
}

#[tokio::test]
async fn label_and_field_selectors_and_paging() {
    let server = ApiServer::start().await;
    let pods: Api<Pod> = Api::namespaced(server.client(), "default");
    for (name, labels) in [
        ("a", json!({"app": "web", "tier": "fe"})),
        ("b", json!({"app": "db"})),
        ("c", json!({"app": "web"})),
        ("d", json!({})),
    ] {
        pods.create(&PostParams::default(), &pod(name, labels))
            .await
            .unwrap();
    }
    server
        .merge_patch(
            "pods",
            Some("default"),
            "a",
            &json!({"spec": {"nodeName": "node-1"}}),
        )
        .unwrap();
    server
        .merge_patch_status(
            "pods",
            Some("default"),
            "c",
            &json!({"status": {"phase": "Running"}}),
        )
        .unwrap();
    let names =
        |l: kube::core::ObjectList<Pod>| l.items.iter().map(|p| p.name_any()).collect::<Vec<_>>();
    let by_labels = |s: &str| ListParams::default().labels(s);
    assert_eq!(
        names(pods.list(&by_labels("app=web")).await.unwrap()),
        ["a", "c"]
    );
    assert_eq!(
        names(pods.list(&by_labels("app!=web")).await.unwrap()),
        ["b", "d"]
    );
    assert_eq!(
        names(
            pods.list(&by_labels("app in (db, web),tier"))
                .await
                .unwrap()
        ),
        ["a"]
    );
    assert_eq!(
        names(pods.list(&by_labels("app notin (web)")).await.unwrap()),
        ["b", "d"]
    );
    assert_eq!(names(pods.list(&by_labels("!app")).await.unwrap()), ["d"]);
    assert_eq!(
        names(
            pods.list(&ListParams::default().fields("spec.nodeName=node-1"))
                .await
                .unwrap()
        ),
        ["a"]
    );
    assert_eq!(
        names(
            pods.list(&ListParams::default().fields("spec.nodeName="))
                .await
                .unwrap()
        ),
        ["b", "c", "d"]
    );
    assert_eq!(
        names(
            pods.list(&ListParams::default().fields("status.phase=Running,metadata.name!=x"))
                .await
                .unwrap()
        ),
        ["c"]
    );
    fails(
        pods.list(&ListParams::default().fields("spec.bogus=1"))
            .await,
        400,
        "BadRequest",
    );

    let page1 = pods.list(&ListParams::default().limit(3)).await.unwrap();
    assert_eq!(names(page1.clone()), ["a", "b", "c"]);
    assert_eq!(page1.metadata.remaining_item_count, Some(1));
    let token = page1.metadata.continue_.clone().unwrap();
    let page2 = pods
        .list(&ListParams::default().limit(3).continue_token(&token))
        .await
        .unwrap();
    assert_eq!(names(page2.clone()), ["d"]);
    assert!(page2.metadata.continue_.is_none());
    assert_eq!(
        page2.metadata.resource_version,
        page1.metadata.resource_version
    );

    let all: Api<Pod> = Api::all(server.client());
    server.create(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "e", "namespace": "other"}})).unwrap();
    assert_eq!(
        all.list(&ListParams::default()).await.unwrap().items.len(),
        5
    );

    server.compact();
    fails(
        pods.list(&ListParams::default().limit(3).continue_token(&token))
            .await,
        410,
        "Expired",
    );
}

async fn next_event<S, K>(stream: &mut S) -> watcher::Event<K>
where
    S: futures::Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Unpin,
{
    loop {
        match tokio::time::timeout(WAIT, stream.next())
            .await
            .expect("watcher event in time")
        {
            Some(Ok(e)) => return e,
            Some(Err(e)) => eprintln!("watcher error (expected after 410): {e}"),
            None => panic!("watcher ended"),
        }
    }
}

fn names_in(store: &reflector::Store<Pod>) -> Vec<String> {
    let mut v: Vec<String> = store.state().iter().map(|p| p.name_any()).collect();
    v.sort();
    v
}

#[tokio::test]
async fn watcher_and_reflector_survive_dropped_watches_and_compaction() {
    let server = ApiServer::start().await;
    let pods: Api<Pod> = Api::namespaced(server.client(), "default");
    pods.create(&PostParams::default(), &pod("keep", json!({})))
        .await
        .unwrap();
    pods.create(&PostParams::default(), &pod("doomed", json!({})))
        .await
        .unwrap();
    let (reader, writer) = reflector::store();
    let mut stream = reflector(writer, watcher(pods.clone(), watcher::Config::default())).boxed();
    while !matches!(next_event(&mut stream).await, watcher::Event::InitDone) {}
    assert_eq!(names_in(&reader), ["doomed", "keep"]);

    pods.create(&PostParams::default(), &pod("new", json!({})))
        .await
        .unwrap();
    assert!(
        matches!(next_event(&mut stream).await, watcher::Event::Apply(p) if p.name_any() == "new")
    );
    server
        .merge_patch(
            "pods",
            Some("default"),
            "new",
            &json!({"metadata": {"labels": {"x": "y"}}}),
        )
        .unwrap();
    assert!(
        matches!(next_event(&mut stream).await, watcher::Event::Apply(p) if p.labels().contains_key("x"))
    );
    pods.delete("new", &DeleteParams::default()).await.unwrap();
    assert!(
        matches!(next_event(&mut stream).await, watcher::Event::Delete(p) if p.name_any() == "new")
    );

    // Dropped watch: the watcher resumes from its resourceVersion without relisting.
    server.drop_watches();
    pods.create(&PostParams::default(), &pod("after-drop", json!({})))
        .await
        .unwrap();
    assert!(
        matches!(next_event(&mut stream).await, watcher::Event::Apply(p) if p.name_any() == "after-drop")
    );
    assert_eq!(server.request_count(&RequestMatch::verb("list", "pods")), 1);
    assert_eq!(
        server.request_count(&RequestMatch::verb("watch", "pods")),
        2
    );

    // Compaction while the watcher is away: the resume gets 410 and the watcher relists.
    server.drop_watches();
    pods.create(&PostParams::default(), &pod("while-away", json!({})))
        .await
        .unwrap();
    pods.delete("doomed", &DeleteParams::default())
        .await
        .unwrap();
    server.compact();
    while !matches!(next_event(&mut stream).await, watcher::Event::InitDone) {}
    assert_eq!(names_in(&reader), ["after-drop", "keep", "while-away"]);
    assert_eq!(server.request_count(&RequestMatch::verb("list", "pods")), 2);
}

#[tokio::test]
async fn streaming_list_watcher_and_selected_watch() {
    let server = ApiServer::start().await;
    let pods: Api<Pod> = Api::namespaced(server.client(), "default");
    pods.create(&PostParams::default(), &pod("a", json!({"app": "web"})))
        .await
        .unwrap();
    pods.create(&PostParams::default(), &pod("b", json!({"app": "db"})))
        .await
        .unwrap();
    let config = watcher::Config::default()
        .streaming_lists()
        .labels("app=web");
    let mut stream = watcher(pods.clone(), config).boxed();
    let mut initial = Vec::new();
    loop {
        match next_event(&mut stream).await {
            watcher::Event::InitApply(p) => initial.push(p.name_any()),
            watcher::Event::InitDone => break,
            _ => {}
        }
    }
    assert_eq!(initial, ["a"]);
    assert_eq!(server.request_count(&RequestMatch::verb("list", "pods")), 0);

    // b starts matching: ADDED; a stops matching: DELETED.
    server
        .merge_patch(
            "pods",
            Some("default"),
            "b",
            &json!({"metadata": {"labels": {"app": "web"}}}),
        )
        .unwrap();
    assert!(
        matches!(next_event(&mut stream).await, watcher::Event::Apply(p) if p.name_any() == "b")
    );
    server
        .merge_patch(
            "pods",
            Some("default"),
            "a",
            &json!({"metadata": {"labels": {"app": "db"}}}),
        )
        .unwrap();
    assert!(
        matches!(next_event(&mut stream).await, watcher::Event::Delete(p) if p.name_any() == "a")
    );
}

#[tokio::test]
async fn bookmarks_and_expired_resource_versions_on_raw_watches() {
    let opts = ServerOptions {
        bookmark_interval: Duration::from_millis(100),
        ..ServerOptions::default()
    };
    let server = ApiServer::start_with(opts).await;
    let pods: Api<Pod> = Api::namespaced(server.client(), "default");
    pods.create(&PostParams::default(), &pod("a", json!({})))
        .await
        .unwrap();
    let current = server.resource_version().to_string();

    let mut w = pods
        .watch(&WatchParams::default(), "0")
        .await
        .unwrap()
        .boxed();
    let first = tokio::time::timeout(WAIT, w.try_next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(matches!(first, WatchEvent::Added(p) if p.name_any() == "a"));
    let second = tokio::time::timeout(WAIT, w.try_next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    match second {
        WatchEvent::Bookmark(b) => assert_eq!(b.metadata.resource_version, current),
        other => panic!("expected a bookmark, got {other:?}"),
    }

    let mut resumed = pods
        .watch(&WatchParams::default(), &current)
        .await
        .unwrap()
        .boxed();
    pods.create(&PostParams::default(), &pod("b", json!({})))
        .await
        .unwrap();
    let ev = tokio::time::timeout(WAIT, resumed.try_next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(matches!(ev, WatchEvent::Added(p) if p.name_any() == "b"));

    server.compact();
    let mut old = pods
        .watch(&WatchParams::default(), &current)
        .await
        .unwrap()
        .boxed();
    match tokio::time::timeout(WAIT, old.try_next())
        .await
        .unwrap()
        .unwrap()
    {
        Some(WatchEvent::Error(s)) => assert_eq!((s.code, s.reason.as_str()), (410, "Expired")),
        other => panic!("expected a 410 ERROR event, got {other:?}"),
    }
    assert!(
        tokio::time::timeout(WAIT, old.try_next())
            .await
            .unwrap()
            .unwrap()
            .is_none(),
        "stream ends after 410"
    );
}

fn ready_pod(name: &str, app: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": {"app": app}},
        "spec": {"nodeName": "node-1", "containers": [{"name": "c", "image": "i"}]},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
    })
}

fn pdb(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": name}, "spec": spec})
}

fn pdb_status(server: &ApiServer, name: &str) -> (i64, i64, i64, i64) {
    let pdb = server
        .get("poddisruptionbudgets", Some("default"), name)
        .unwrap();
    let s = &pdb["status"];
    let n = |k: &str| s[k].as_i64().unwrap();
    (
        n("currentHealthy"),
        n("desiredHealthy"),
        n("expectedPods"),
        n("disruptionsAllowed"),
    )
}

#[tokio::test]
async fn eviction_respects_disruption_budgets() {
    let server = ApiServer::start().await;
    for name in ["w-1", "w-2", "w-3"] {
        server.create_with_status(ready_pod(name, "web")).unwrap();
    }
    server
        .create_with_status(ready_pod("lonely", "other"))
        .unwrap();
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(server.client(), "default");
    let spec = json!({"minAvailable": "50%", "selector": {"matchLabels": {"app": "web"}}});
    let budget: PodDisruptionBudget = serde_json::from_value(pdb("web-pdb", spec)).unwrap();
    pdbs.create(&PostParams::default(), &budget).await.unwrap();
    assert_eq!(pdb_status(&server, "web-pdb"), (3, 2, 3, 1));
    let typed = pdbs.get("web-pdb").await.unwrap().status.unwrap();
    assert_eq!(typed.observed_generation, Some(1));

    let pods: Api<Pod> = Api::namespaced(server.client_without_retries(), "default");
    let ok = pods.evict("w-1", &EvictParams::default()).await.unwrap();
    assert_eq!(ok.code, 201);
    fails(pods.get("w-1").await, 404, "NotFound");
    assert_eq!(pdb_status(&server, "web-pdb"), (2, 1, 2, 1));
    pods.evict("w-2", &EvictParams::default()).await.unwrap();
    assert_eq!(pdb_status(&server, "web-pdb"), (1, 1, 1, 0));

    let err = pods
        .evict("w-3", &EvictParams::default())
        .await
        .unwrap_err();
    match err {
        kube::Error::Api(s) => {
            assert_eq!((s.code, s.reason.as_str()), (429, "TooManyRequests"));
            assert_eq!(
                s.message,
                "Cannot evict pod as it would violate the pod's disruption budget."
            );
            assert!(s.details.unwrap().causes[0].message.contains("web-pdb"));
        }
        other => panic!("expected 429, got {other:?}"),
    }
    assert!(pods.get("w-3").await.is_ok());
    pods.evict("lonely", &EvictParams::default()).await.unwrap();

    // An unready pod may go while the budget is healthy.
    server.create_with_status(ready_pod("w-4", "web")).unwrap();
    server
        .merge_patch_status(
            "pods",
            Some("default"),
            "w-4",
            &json!({"status": {"conditions": [{"type": "Ready", "status": "False"}]}}),
        )
        .unwrap();
    assert_eq!(pdb_status(&server, "web-pdb"), (1, 1, 2, 0));
    pods.evict("w-4", &EvictParams::default()).await.unwrap();

    // Two budgets over one pod: 500, as the real server.
    server
        .create(pdb("second", json!({"maxUnavailable": 1, "selector": {}})))
        .unwrap();
    fails(
        pods.evict("w-3", &EvictParams::default()).await,
        500,
        "InternalError",
    );
}

#[tokio::test]
async fn default_client_retries_a_blocked_eviction_until_the_budget_allows() {
    let server = ApiServer::start().await;
    // the pods' node exists: the pod garbage collector removes pods bound to a missing node
    server
        .create(json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-1"}}))
        .unwrap();
    server.create_with_status(ready_pod("a", "web")).unwrap();
    server
        .create(pdb(
            "pdb",
            json!({"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}}),
        ))
        .unwrap();
    assert_eq!(pdb_status(&server, "pdb").3, 0);
    let pods: Api<Pod> = Api::namespaced(server.client(), "default");
    let eviction = tokio::spawn(async move { pods.evict("a", &EvictParams::default()).await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    server.create_with_status(ready_pod("b", "web")).unwrap();
    let status = tokio::time::timeout(Duration::from_secs(10), eviction)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(status.code, 201);
    assert!(server.request_count(&RequestMatch::new("POST", "pods").subresource("eviction")) >= 2);
}

#[tokio::test]
async fn injected_faults_reach_the_client() {
    let server = ApiServer::start().await;
    let api: Api<DynamicObject> = Api::all_with(server.client(), &nodeclaims());
    server.fail_next(RequestMatch::new("POST", "nodeclaims"), 1, 500);
    fails(
        api.create(&PostParams::default(), &nodeclaim("nc")).await,
        500,
        "InternalError",
    );
    api.create(&PostParams::default(), &nodeclaim("nc"))
        .await
        .unwrap();

    server.fail_next(
        RequestMatch::new("PATCH", "nodeclaims.karpenter.sh"),
        2,
        409,
    );
    let patch = Patch::Merge(json!({"metadata": {"labels": {"a": "b"}}}));
    for _ in 0..2 {
        fails(
            api.patch("nc", &PatchParams::default(), &patch).await,
            409,
            "Conflict",
        );
    }
    let ok = api
        .patch("nc", &PatchParams::default(), &patch)
        .await
        .unwrap();
    assert_eq!(ok.labels().get("a").map(String::as_str), Some("b"));
    assert_eq!(server.count("POST", "nodeclaims"), 2);
    assert_eq!(server.count("PATCH", "nodeclaims"), 3);
    assert!(server.get("nodeclaims", None, "nc").unwrap()["metadata"]["labels"]["a"] == "b");
}

#[tokio::test]
async fn unknown_resources_discovery_and_generate_name() {
    let server = ApiServer::start().await;
    let client = server.client();
    let req = http_get("/apis/example.com/v1/widgets");
    fails(client.request::<Value>(req).await, 404, "NotFound");
    let version = client.apiserver_version().await.unwrap();
    assert_eq!(
        (version.major.as_str(), version.minor.as_str()),
        ("1", "33")
    );
    let groups: Value = client.request(http_get("/apis")).await.unwrap();
    assert!(groups["groups"]
        .as_array()
        .unwrap()
        .iter()
        .any(|g| g["name"] == "karpenter.sh"));

    let api: Api<DynamicObject> = Api::all_with(client, &nodeclaims());
    let mut obj = nodeclaim("");
    obj.metadata.name = None;
    obj.metadata.generate_name = Some("default-".into());
    let created = api.create(&PostParams::default(), &obj).await.unwrap();
    let name = created.name_any();
    assert!(
        name.starts_with("default-") && name.len() == "default-".len() + 5,
        "{name}"
    );
}

#[tokio::test]
async fn kubeconfig_client_and_harness_wait() {
    let server = ApiServer::start().await;
    let dir = std::env::temp_dir().join(format!("joiner-apiserver-{}", server.addr().port()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("kubeconfig");
    server.write_kubeconfig(&path).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    let kubeconfig = kube::config::Kubeconfig::from_yaml(&text).unwrap();
    let options = kube::config::KubeConfigOptions::default();
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &options)
        .await
        .unwrap();
    assert_eq!(config.default_namespace, "default");
    let client = kube::Client::try_from(config).unwrap();
    let pods: Api<Pod> = Api::default_namespaced(client);

    let waiter = pods.clone();
    let created = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(50)).await;
        waiter
            .create(&PostParams::default(), &pod("late", json!({})))
            .await
            .unwrap();
    });
    let seen = server
        .wait_for(WAIT, |s| s.get("pods", Some("default"), "late").is_ok())
        .await;
    assert!(seen);
    created.await.unwrap();
    assert!(
        !server
            .wait_for(Duration::from_millis(50), |s| s
                .list("pods", None, "")
                .unwrap()
                .len()
                == 2)
            .await
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

fn http_get(path: &str) -> axum::http::Request<Vec<u8>> {
    axum::http::Request::get(path).body(Vec::new()).unwrap()
}

#[tokio::test]
async fn leases_and_events_are_stored() {
    use k8s_openapi::api::coordination::v1::Lease;
    use kube::runtime::events::{Event, EventType, Recorder};
    use kube::Resource as _;
    let server = ApiServer::start().await;
    let leases: Api<Lease> = Api::namespaced(server.client(), "kube-system");
    let lease = serde_json::from_value(
        json!({"metadata": {"name": "joiner"}, "spec": {"holderIdentity": "a"}}),
    )
    .unwrap();
    let mut held = leases.create(&PostParams::default(), &lease).await.unwrap();
    held.spec.as_mut().unwrap().holder_identity = Some("b".into());
    let renewed = leases
        .replace("joiner", &PostParams::default(), &held)
        .await
        .unwrap();
    assert_eq!(renewed.spec.unwrap().holder_identity.as_deref(), Some("b"));
    assert_eq!(
        renewed.metadata.generation, None,
        "leases have no status subresource"
    );

    let pods: Api<Pod> = Api::namespaced(server.client(), "default");
    let target = pods
        .create(&PostParams::default(), &pod("evicted", json!({})))
        .await
        .unwrap();
    let recorder = Recorder::new(server.client(), "joiner".into());
    let ev = Event {
        type_: EventType::Normal,
        reason: "Evicted".into(),
        note: None,
        action: "Evict".into(),
        secondary: None,
    };
    let reference = target.object_ref(&());
    recorder.publish(&ev, &reference).await.unwrap();
    recorder.publish(&ev, &reference).await.unwrap();
    let events = server
        .list("events.events.k8s.io", Some("default"), "")
        .unwrap();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0]["reason"], "Evicted");
    assert_eq!(events[0]["series"]["count"], 2);
    assert_eq!(server.count("PATCH", "events.events.k8s.io"), 1);
    let core = json!({"apiVersion": "v1", "kind": "Event", "metadata": {"name": "e1"}, "reason": "Scheduled"});
    assert_eq!(
        server.create(core).unwrap()["metadata"]["namespace"],
        "default"
    );
}
