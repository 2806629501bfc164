//! A fault-injection HTTP proxy between the AWS SDK and moto. moto's CreateFleet always takes the
//! first override and never runs out of capacity, and nothing in moto throttles; this layer adds
//! what EC2 does under pressure, at the wire level so the SDK's parsing and retries are exercised:
//!
//! - **insufficient capacity**: CreateFleet overrides of the instance types in `ice_types` are
//!   removed from the request before moto sees it and come back as `errorSet` items with code
//!   `InsufficientInstanceCapacity` (when no override is left, moto is not called and the answer
//!   holds only the errors, as EC2's does);
//! - **throttling**: the next N calls of an action answer HTTP 503 `RequestLimitExceeded`;
//! - **failures**: the next N calls of an action answer HTTP 500 `InternalError`;
//! - **withheld answers**: calls of an action in `hold` reach moto, which acts on them, but their
//!   answer never comes back (a process killed between the call and recording its result).
//!
//! Every call is counted by action, and CreateFleet requests are kept (decoded) for assertions.
#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

#[derive(Debug, Default)]
pub struct Faults {
    pub ice_types: BTreeSet<String>,
    pub throttle: BTreeMap<String, u32>,
    pub fail: BTreeMap<String, u32>,
    pub calls: BTreeMap<String, u32>,
    pub fleets: Vec<Vec<(String, String)>>,
    /// Overrides answered with InsufficientInstanceCapacity so far.
    pub ice_answered: u32,
    /// Every call as its IAM action, `service:Action` (the service from the SigV4 credential scope).
    pub iam_actions: BTreeSet<String>,
    /// Actions whose answers are withheld once moto has acted on them.
    pub hold: BTreeSet<String>,
    /// Calls whose answers were withheld so far.
    pub held: u32,
}

#[derive(Clone)]
struct Proxy {
    upstream: String,
    faults: Arc<Mutex<Faults>>,
    client: Client<HttpConnector, Full<Bytes>>,
}

pub struct FaultProxy {
    pub endpoint: String,
    pub faults: Arc<Mutex<Faults>>,
    task: tokio::task::JoinHandle<()>,
}

impl FaultProxy {
    /// Starts the proxy on a free loopback port, forwarding to `upstream` (moto's endpoint).
    pub async fn start(upstream: &str) -> FaultProxy {
        let faults = Arc::new(Mutex::new(Faults::default()));
        let client = Client::builder(TokioExecutor::new()).build_http();
        let proxy = Proxy {
            upstream: upstream.to_string(),
            faults: faults.clone(),
            client,
        };
        let app = axum::Router::new().fallback(handle).with_state(proxy);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind proxy");
        let endpoint = format!("http://{}", listener.local_addr().expect("proxy address"));
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        FaultProxy {
            endpoint,
            faults,
            task,
        }
    }

    pub fn faults(&self) -> std::sync::MutexGuard<'_, Faults> {
        self.faults.lock().unwrap()
    }

    pub fn calls(&self, action: &str) -> u32 {
        self.faults().calls.get(action).copied().unwrap_or(0)
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// `service:Action` of a call: the signing service of its SigV4 credential scope
/// (`Credential=AKID/DATE/REGION/SERVICE/aws4_request`) and the action without a JSON-protocol
/// target prefix (`AmazonSSM.GetParameter`).
fn iam_action(headers: &HeaderMap, action: &str) -> String {
    let auth = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let service = auth
        .split("Credential=")
        .nth(1)
        .and_then(|c| c.split('/').nth(3))
        .unwrap_or("unsigned");
    let action = action.rsplit('.').next().unwrap_or(action);
    format!("{service}:{action}")
}

fn error_xml(code: &str, message: &str) -> String {
    format!("<?xml version=\"1.0\" encoding=\"UTF-8\"?><Response><Errors><Error><Code>{code}</Code><Message>{message}</Message></Error></Errors><RequestID>fault-proxy</RequestID></Response>")
}

async fn handle(
    State(p): State<Proxy>,
    method: axum::http::Method,
    uri: axum::http::Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let params: Vec<(String, String)> = form_urlencoded::parse(&body).into_owned().collect();
    let action = params
        .iter()
        .find(|(k, _)| k == "Action")
        .map(|(_, v)| v.clone())
        .unwrap_or_else(|| {
            headers
                .get("x-amz-target")
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
                .to_string()
        });
    let mut removed = vec![];
    let mut forward = body.clone();
    {
        let mut f = p.faults.lock().unwrap();
        *f.calls.entry(action.clone()).or_default() += 1;
        f.iam_actions.insert(iam_action(&headers, &action));
        if let Some(n) = f.throttle.get_mut(&action).filter(|n| **n > 0) {
            *n -= 1;
            return (
                StatusCode::SERVICE_UNAVAILABLE,
                error_xml("RequestLimitExceeded", "Request limit exceeded."),
            )
                .into_response();
        }
        if let Some(n) = f.fail.get_mut(&action).filter(|n| **n > 0) {
            *n -= 1;
            return (
                StatusCode::INTERNAL_SERVER_ERROR,
                error_xml("InternalError", "An internal error has occurred."),
            )
                .into_response();
        }
        if action == "CreateFleet" {
            f.fleets.push(params.clone());
            let (kept, gone) = drop_overrides(&params, &f.ice_types);
            f.ice_answered += gone.len() as u32;
            removed = gone;
            forward = Bytes::from(
                form_urlencoded::Serializer::new(String::new())
                    .extend_pairs(kept.iter())
                    .finish(),
            );
        }
    }
    let lifecycle = params
        .iter()
        .find(|(k, _)| k == "TargetCapacitySpecification.DefaultTargetCapacityType")
        .map_or("on-demand", |(_, v)| v.as_str())
        .to_string();
    if action == "CreateFleet" && !removed.is_empty() && !has_overrides(&forward) {
        let xml = format!("<CreateFleetResponse xmlns=\"http://ec2.amazonaws.com/doc/2016-11-15/\"><requestId>fault-proxy</requestId><fleetId>fleet-fault</fleetId>{}<fleetInstanceSet/></CreateFleetResponse>", error_set(&removed, &lifecycle));
        return (StatusCode::OK, [("content-type", "text/xml")], xml).into_response();
    }
    let (status, upstream_headers, bytes) =
        match upstream(&p, method, &uri, &headers, forward).await {
            Ok(r) => r,
            Err(e) => return (StatusCode::BAD_GATEWAY, e).into_response(),
        };
    let withhold = {
        let mut f = p.faults.lock().unwrap();
        let hold = f.hold.contains(&action);
        f.held += u32::from(hold);
        hold
    };
    if withhold {
        // the caller waits until it gives up or dies; moto has already done the work
        std::future::pending::<()>().await;
    }
    let mut out = bytes.to_vec();
    if action == "CreateFleet" && !removed.is_empty() {
        let text = String::from_utf8_lossy(&out).replace(
            "</CreateFleetResponse>",
            &format!("{}</CreateFleetResponse>", error_set(&removed, &lifecycle)),
        );
        out = text.into_bytes();
    }
    let mut resp = (status, out).into_response();
    if let Some(ct) = upstream_headers.get("content-type") {
        resp.headers_mut().insert("content-type", ct.clone());
    }
    resp
}

async fn upstream(
    p: &Proxy,
    method: axum::http::Method,
    uri: &axum::http::Uri,
    headers: &HeaderMap,
    body: Bytes,
) -> Result<(StatusCode, HeaderMap, Bytes), String> {
    let target = format!(
        "{}{}",
        p.upstream,
        uri.path_and_query().map_or("/", |x| x.as_str())
    );
    let mut req = axum::http::Request::builder().method(method).uri(target);
    for (k, v) in headers {
        // the body may have changed size; hyper sets the length of what is sent
        if k != "content-length" && k != "host" {
            req = req.header(k, v);
        }
    }
    let req = req.body(Full::new(body)).map_err(|e| e.to_string())?;
    let resp = p.client.request(req).await.map_err(|e| e.to_string())?;
    let (parts, body) = resp.into_parts();
    let bytes = body.collect().await.map_err(|e| e.to_string())?.to_bytes();
    Ok((parts.status, parts.headers, bytes))
}

/// An override removed from a CreateFleet request: launch template id, instance type, subnet.
type Removed = (String, String, String);

/// Splits the request's overrides: those of ICE types are removed (and the rest renumbered).
fn drop_overrides(
    params: &[(String, String)],
    ice: &BTreeSet<String>,
) -> (Vec<(String, String)>, Vec<Removed>) {
    // LaunchTemplateConfigs.<c>.Overrides.<o>.<Field>
    let mut overrides: BTreeMap<(u32, u32), BTreeMap<String, String>> = BTreeMap::new();
    let mut rest = vec![];
    let mut templates: BTreeMap<u32, String> = BTreeMap::new();
    for (k, v) in params {
        let parts: Vec<&str> = k.split('.').collect();
        match parts.as_slice() {
            ["LaunchTemplateConfigs", c, "Overrides", o, field] => {
                overrides
                    .entry((c.parse().unwrap_or(0), o.parse().unwrap_or(0)))
                    .or_default()
                    .insert(field.to_string(), v.clone());
            }
            ["LaunchTemplateConfigs", c, "LaunchTemplateSpecification", "LaunchTemplateId"] => {
                templates.insert(c.parse().unwrap_or(0), v.clone());
                rest.push((k.clone(), v.clone()));
            }
            _ => rest.push((k.clone(), v.clone())),
        }
    }
    let mut removed = vec![];
    let mut next: BTreeMap<u32, u32> = BTreeMap::new();
    for ((c, _), fields) in overrides {
        let t = fields.get("InstanceType").cloned().unwrap_or_default();
        if ice.contains(&t) {
            removed.push((
                templates.get(&c).cloned().unwrap_or_default(),
                t,
                fields.get("SubnetId").cloned().unwrap_or_default(),
            ));
            continue;
        }
        let n = next.entry(c).or_default();
        *n += 1;
        for (field, v) in fields {
            rest.push((
                format!("LaunchTemplateConfigs.{c}.Overrides.{n}.{field}"),
                v,
            ));
        }
    }
    (rest, removed)
}

fn has_overrides(body: &Bytes) -> bool {
    form_urlencoded::parse(body).any(|(k, _)| k.contains(".Overrides."))
}

fn error_set(removed: &[Removed], lifecycle: &str) -> String {
    let items: String = removed
        .iter()
        .map(|(lt, t, subnet)| {
            format!(
                "<item><launchTemplateAndOverrides><launchTemplateSpecification><launchTemplateId>{lt}</launchTemplateId><version>$Latest</version></launchTemplateSpecification>\
                 <overrides><instanceType>{t}</instanceType><subnetId>{subnet}</subnetId></overrides></launchTemplateAndOverrides><lifecycle>{lifecycle}</lifecycle>\
                 <errorCode>InsufficientInstanceCapacity</errorCode><errorMessage>We currently do not have sufficient {t} capacity in the Availability Zone you requested.</errorMessage></item>"
            )
        })
        .collect();
    format!("<errorSet>{items}</errorSet>")
}
