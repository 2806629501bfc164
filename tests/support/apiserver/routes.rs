//! HTTP: path parsing, query parameters, verb dispatch, and JSON/Status responses. Every API
//! request is logged (and may meet an injected fault) before it is served.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Query, State};
use axum::http::{header, HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use serde_json::{json, Value};

use super::discovery;
use super::faults::{Injected, RequestRecord};
use super::patch::{parse_body, patch_object, PatchKind};
use super::resources::{by_path, ResourceInfo};
use super::select::{FieldSelector, LabelSelector};
use super::status::{success, ApiError, ApiResult};
use super::store::{Deleted, ListQuery, Target};
use super::watch::{self, WatchRequest};
use super::Shared;

pub fn router(shared: Arc<Shared>) -> Router {
    Router::new()
        .route(
            "/version",
            get(|| async { json_response(200, &discovery::version()) }),
        )
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(|| async { "ok" }))
        .fallback(handle)
        .with_state(shared)
}

/// A parsed resource path.
#[derive(Debug, Clone)]
struct ResPath {
    res: &'static ResourceInfo,
    ns: Option<String>,
    name: Option<String>,
    sub: Option<String>,
}

/// One request, parsed.
struct Call {
    method: Method,
    path: ResPath,
    query: HashMap<String, String>,
    headers: HeaderMap,
    body: Bytes,
}

async fn handle(
    State(shared): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let segments: Vec<&str> = uri.path().split('/').filter(|s| !s.is_empty()).collect();
    if let Some(doc) = discovery::document(&segments, &shared.addr.to_string()) {
        return json_response(200, &doc);
    }
    let query = Query::<HashMap<String, String>>::try_from_uri(&uri)
        .map(|q| q.0)
        .unwrap_or_default();
    let call = match parse_path(&segments) {
        Ok(path) => Call {
            method,
            path,
            query,
            headers,
            body,
        },
        Err(e) => return error_response(&e),
    };
    let (verb, target, late) = match admit(&shared, &call) {
        Ok(admitted) => admitted,
        Err(e) => return error_response(&e),
    };
    match late {
        None => serve(&shared, &call, verb, target).unwrap_or_else(|e| error_response(&e)),
        Some(Injected::Stall(delay)) => {
            tokio::time::sleep(delay).await;
            serve(&shared, &call, verb, target).unwrap_or_else(|e| error_response(&e))
        }
        Some(Injected::Timeout { delay, committed }) => {
            if committed {
                let _ = serve(&shared, &call, verb, target);
            }
            tokio::time::sleep(delay).await;
            error_response(&ApiError::new(504, "Timeout", "the server was unable to return a response in the time allotted, but may still be processing the request"))
        }
        Some(Injected::Error(code)) => error_response(&ApiError::injected(code)),
    }
}

fn parse_path(seg: &[&str]) -> ApiResult<ResPath> {
    let (group, version, rest) = match seg {
        ["api", v, rest @ ..] => ("", *v, rest),
        ["apis", g, v, rest @ ..] => (*g, *v, rest),
        _ => return Err(ApiError::no_such_resource()),
    };
    let (ns, rest) = match rest {
        ["namespaces", ns, plural, tail @ ..] if !matches!(*plural, "status" | "finalize") => {
            (Some(ns.to_string()), split_plural(plural, tail))
        }
        [plural, tail @ ..] => (None, split_plural(plural, tail)),
        [] => return Err(ApiError::no_such_resource()),
    };
    let (plural, name, sub) = rest.ok_or_else(ApiError::no_such_resource)?;
    let res = by_path(group, version, plural).ok_or_else(ApiError::no_such_resource)?;
    if res.namespaced != ns.is_some() && (name.is_some() || !res.namespaced) {
        return Err(ApiError::no_such_resource());
    }
    Ok(ResPath { res, ns, name, sub })
}

type Split<'a> = Option<(&'a str, Option<String>, Option<String>)>;

fn split_plural<'a>(plural: &'a str, tail: &[&str]) -> Split<'a> {
    match tail {
        [] => Some((plural, None, None)),
        [name] => Some((plural, Some(name.to_string()), None)),
        [name, sub] => Some((plural, Some(name.to_string()), Some(sub.to_string()))),
        _ => None,
    }
}

/// The Kubernetes verb of a request, `None` if the method is not allowed on the path.
fn verb(method: &Method, p: &ResPath, q: &HashMap<String, String>) -> Option<&'static str> {
    let watch = matches!(q.get("watch").map(String::as_str), Some("true" | "1"));
    Some(match (method.as_str(), p.name.is_some()) {
        ("GET", false) if watch => "watch",
        ("GET", false) => "list",
        ("GET", true) => "get",
        ("POST", false) => "create",
        ("POST", true) if p.sub.as_deref() == Some("eviction") => "create",
        ("PUT", true) => "update",
        ("PATCH", true) => "patch",
        ("DELETE", true) => "delete",
        ("DELETE", false) => "deletecollection",
        _ => return None,
    })
}

fn check_subresource(p: &ResPath, verb: &str) -> ApiResult<Target> {
    match p.sub.as_deref() {
        None => Ok(Target::Main),
        Some("status")
            if p.res.status_subresource && matches!(verb, "get" | "update" | "patch") =>
        {
            Ok(Target::Status)
        }
        Some("eviction") if p.res.is_pod() && verb == "create" => Ok(Target::Main),
        _ => Err(ApiError::no_such_resource()),
    }
}

/// Parses the verb, logs the request and looks up an injected fault: an error is returned at
/// once; a late answer (timeout, stall) is the caller's to wait out.
fn admit(shared: &Arc<Shared>, c: &Call) -> ApiResult<(&'static str, Target, Option<Injected>)> {
    let verb = verb(&c.method, &c.path, &c.query).ok_or_else(ApiError::method_not_allowed)?;
    let target = check_subresource(&c.path, verb)?;
    let p = &c.path;
    let token = c
        .headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    // as kube-apiserver authorizes it: a list or watch of `metadata.name=X` is a request for X
    let selected = c
        .query
        .get("fieldSelector")
        .and_then(|f| f.strip_prefix("metadata.name="))
        .filter(|n| !n.contains(','));
    let name = p
        .name
        .as_deref()
        .or(selected.filter(|_| matches!(verb, "list" | "watch")));
    let record = RequestRecord::new(
        c.method.as_str(),
        verb,
        p.res,
        p.sub.as_deref(),
        p.ns.as_deref(),
        name,
    )
    .by(token);
    let fault = shared
        .faults
        .lock()
        .expect("faults lock")
        .on_request(record);
    if let Some(Injected::Error(code)) = fault {
        return Err(ApiError::injected(code));
    }
    if c.query.contains_key("dryRun") {
        return Err(ApiError::bad_request(
            "dryRun is not supported by this test server",
        ));
    }
    Ok((verb, target, fault))
}

fn serve(shared: &Arc<Shared>, c: &Call, verb: &str, target: Target) -> ApiResult<Response> {
    let p = &c.path;
    match verb {
        "watch" => watch_response(shared, c),
        "list" => list(shared, c),
        "get" => get_one(shared, c),
        "create" if p.sub.is_some() => evict(shared, c),
        "create" => create(shared, c),
        "update" => update(shared, c, target),
        "patch" => patch(shared, c, target),
        "delete" => delete(shared, c),
        _ => delete_collection(shared, c),
    }
}

fn ns_of(c: &Call) -> String {
    c.path.ns.clone().unwrap_or_default()
}

fn name_of(c: &Call) -> &str {
    c.path.name.as_deref().unwrap_or_default()
}

fn json_body(body: &Bytes) -> ApiResult<Value> {
    if body.is_empty() {
        return Ok(json!({}));
    }
    serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("error decoding request body: {e}")))
}

fn selectors(c: &Call) -> ApiResult<(LabelSelector, FieldSelector)> {
    let labels = LabelSelector::parse(
        c.query
            .get("labelSelector")
            .map(String::as_str)
            .unwrap_or(""),
    )?;
    let fields = FieldSelector::parse(
        c.query
            .get("fieldSelector")
            .map(String::as_str)
            .unwrap_or(""),
        c.path.res,
    )?;
    Ok((labels, fields))
}

fn list(shared: &Arc<Shared>, c: &Call) -> ApiResult<Response> {
    let (labels, fields) = selectors(c)?;
    let limit = c.query.get("limit").and_then(|l| l.parse().ok());
    let q = ListQuery {
        namespace: c.path.ns.clone(),
        labels,
        fields,
        limit,
        continue_token: c.query.get("continue").cloned().filter(|t| !t.is_empty()),
    };
    let page = shared
        .state
        .lock()
        .expect("state lock")
        .list(c.path.res, &q)?;
    let mut meta = json!({"resourceVersion": page.resource_version.to_string()});
    if let Some(t) = page.continue_token {
        meta["continue"] = json!(t);
        meta["remainingItemCount"] = json!(page.remaining.unwrap_or(0));
    }
    let res = c.path.res;
    Ok(json_response(200, &list_body(res, meta, page.items)))
}

fn watch_response(shared: &Arc<Shared>, c: &Call) -> ApiResult<Response> {
    let (labels, fields) = selectors(c)?;
    let flag = |k: &str| matches!(c.query.get(k).map(String::as_str), Some("true" | "1"));
    let timeout = c
        .query
        .get("timeoutSeconds")
        .and_then(|t| t.parse().ok())
        .unwrap_or(1800);
    let req = WatchRequest {
        namespace: c.path.ns.clone(),
        labels,
        fields,
        resource_version: c.query.get("resourceVersion").cloned(),
        bookmarks: flag("allowWatchBookmarks"),
        send_initial_events: flag("sendInitialEvents"),
        resource_version_match: c.query.get("resourceVersionMatch").cloned(),
        timeout: Duration::from_secs(timeout),
    };
    let body = watch::open(shared, c.path.res, req)?;
    Ok(Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "application/json")
        .body(body)
        .expect("valid response"))
}

fn get_one(shared: &Arc<Shared>, c: &Call) -> ApiResult<Response> {
    let obj = shared
        .state
        .lock()
        .expect("state lock")
        .get(c.path.res, &ns_of(c), name_of(c))?;
    Ok(json_response(200, &obj))
}

fn create(shared: &Arc<Shared>, c: &Call) -> ApiResult<Response> {
    let obj = json_body(&c.body)?;
    let ns = ns_of(c);
    if c.path.res.namespaced && ns.is_empty() {
        return Err(ApiError::method_not_allowed());
    }
    if c.path.res.namespaced
        && !matches!(obj["metadata"]["namespace"].as_str(), None | Some(""))
        && obj["metadata"]["namespace"] != ns.as_str()
    {
        return Err(ApiError::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        ));
    }
    let created = shared
        .state
        .lock()
        .expect("state lock")
        .create(c.path.res, &ns, obj)?;
    Ok(json_response(201, &created))
}

fn update(shared: &Arc<Shared>, c: &Call, target: Target) -> ApiResult<Response> {
    let obj = json_body(&c.body)?;
    let updated = shared.state.lock().expect("state lock").update(
        c.path.res,
        &ns_of(c),
        name_of(c),
        obj,
        target,
    )?;
    Ok(json_response(200, &updated))
}

fn patch(shared: &Arc<Shared>, c: &Call, target: Target) -> ApiResult<Response> {
    let ct = c
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let force = matches!(c.query.get("force").map(String::as_str), Some("true"));
    let kind = PatchKind::from_content_type(ct, c.query.get("fieldManager").cloned(), force)
        .ok_or_else(|| ApiError::unsupported_patch(ct))?;
    let body = parse_body(&kind, &c.body)?;
    let mut state = shared.state.lock().expect("state lock");
    let (obj, created) = patch_object(
        &mut state,
        c.path.res,
        &ns_of(c),
        name_of(c),
        &kind,
        &body,
        target,
    )?;
    Ok(json_response(if created { 201 } else { 200 }, &obj))
}

/// DeleteOptions from the body, with query parameters (gracePeriodSeconds, propagationPolicy)
/// filled in where the body has none.
fn delete_options(c: &Call) -> ApiResult<Value> {
    let mut opts = json_body(&c.body)?;
    if let Some(g) = c
        .query
        .get("gracePeriodSeconds")
        .and_then(|g| g.parse::<i64>().ok())
    {
        opts["gracePeriodSeconds"] = opts.get("gracePeriodSeconds").cloned().unwrap_or(json!(g));
    }
    if let Some(p) = c.query.get("propagationPolicy") {
        opts["propagationPolicy"] = opts.get("propagationPolicy").cloned().unwrap_or(json!(p));
    }
    Ok(opts)
}

fn delete(shared: &Arc<Shared>, c: &Call) -> ApiResult<Response> {
    let opts = delete_options(c)?;
    let done = shared.state.lock().expect("state lock").delete(
        c.path.res,
        &ns_of(c),
        name_of(c),
        &opts,
    )?;
    Ok(json_response(200, &deletion_body(c.path.res, done)))
}

/// What the real server answers a delete with: the object while finalizers hold it, and for an
/// immediate removal the object for pods (their strategy returns it) or a Success Status.
pub fn deletion_body(res: &ResourceInfo, done: Deleted) -> Value {
    match done {
        Deleted::Pending(obj) => obj,
        Deleted::Removed(obj) if res.is_pod() => obj,
        Deleted::Removed(obj) => {
            let m = &obj["metadata"];
            success(
                200,
                Some(
                    json!({"name": m["name"], "group": res.group, "kind": res.plural, "uid": m["uid"]}),
                ),
            )
        }
    }
}

fn delete_collection(shared: &Arc<Shared>, c: &Call) -> ApiResult<Response> {
    let (labels, fields) = selectors(c)?;
    let opts = delete_options(c)?;
    let mut state = shared.state.lock().expect("state lock");
    let items = state.select(c.path.res, c.path.ns.as_deref(), &labels, &fields);
    let mut deleted = Vec::new();
    for o in &items {
        let (ns, name) = (
            super::store::obj_ns(o).to_string(),
            super::store::obj_name(o).to_string(),
        );
        if let Ok(Deleted::Removed(d) | Deleted::Pending(d)) =
            state.delete(c.path.res, &ns, &name, &opts)
        {
            deleted.push(d);
        }
    }
    let res = c.path.res;
    let meta = json!({"resourceVersion": state.resource_version().to_string()});
    Ok(json_response(200, &list_body(res, meta, deleted)))
}

fn evict(shared: &Arc<Shared>, c: &Call) -> ApiResult<Response> {
    let body = json_body(&c.body)?;
    let status = super::eviction::evict(
        &mut shared.state.lock().expect("state lock"),
        &ns_of(c),
        name_of(c),
        &body,
    )?;
    Ok(json_response(201, &status))
}

fn list_body(res: &ResourceInfo, meta: Value, items: Vec<Value>) -> Value {
    json!({"kind": format!("{}List", res.kind), "apiVersion": res.api_version(), "metadata": meta, "items": items})
}

pub fn json_response(code: u16, v: &Value) -> Response {
    let status = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let body = Body::from(serde_json::to_vec(v).expect("json"));
    (status, [(header::CONTENT_TYPE, "application/json")], body).into_response()
}

pub fn error_response(e: &ApiError) -> Response {
    json_response(e.code, &e.to_status())
}
