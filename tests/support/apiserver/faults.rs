//! Fault injection and request accounting: every API request is recorded (method, verb,
//! resource, subresource, namespace, name) before it is served, and may be answered with an
//! injected error instead, or late: kube-apiserver's own request timeout (a 504 `Timeout` after
//! the delay, with or without the request's effect committed, as the real server may still
//! finish a write it timed out on), or a stall (the answer, or a watch's stream, only after the
//! delay). kube's client waits for a stalled answer until joiner's `--api-timeout` (a watch, which
//! has none, however long it takes); it retries a 504 up to three times. Each request's arrival
//! time is kept beside the log, so a test can tell what a client sent after a given moment, and
//! a client can be cut off: every request it sends from then on hangs, its open watches end.

use std::time::{Duration, Instant};

use super::resources::ResourceInfo;

/// One API request as the server saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestRecord {
    /// HTTP method: GET, POST, PUT, PATCH, DELETE.
    pub method: String,
    /// Kubernetes verb: get, list, watch, create, update, patch, delete, deletecollection.
    pub verb: String,
    /// `plural` for the core group, `plural.group` otherwise.
    pub resource: String,
    pub subresource: Option<String>,
    pub namespace: Option<String>,
    pub name: Option<String>,
    /// The bearer token the client sent, standing in for its user (`None` when anonymous).
    pub user: Option<String>,
}

impl RequestRecord {
    pub fn new(
        method: &str,
        verb: &str,
        res: &ResourceInfo,
        sub: Option<&str>,
        ns: Option<&str>,
        name: Option<&str>,
    ) -> Self {
        Self {
            method: method.to_string(),
            verb: verb.to_string(),
            resource: res.qualified(),
            subresource: sub.map(String::from),
            namespace: ns.map(String::from),
            name: name.map(String::from),
            user: None,
        }
    }

    /// The same request, sent with `Authorization: Bearer <token>`.
    pub fn by(mut self, token: Option<&str>) -> Self {
        self.user = token.map(String::from);
        self
    }

    /// `resource` is a plural (`nodeclaims`) or a qualified name (`nodeclaims.karpenter.sh`).
    fn is_resource(&self, resource: &str) -> bool {
        self.resource == resource || self.resource.split('.').next() == Some(resource)
    }
}

/// Which requests a fault applies to. Unset parts match anything; `method` and `verb` compare
/// case-insensitively, `subresource` must match exactly when set (`Some("")` is the main
/// resource only).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequestMatch {
    pub method: Option<String>,
    pub verb: Option<String>,
    pub resource: Option<String>,
    pub subresource: Option<String>,
    /// The bearer token the request must carry (one client's requests, not another's).
    pub user: Option<String>,
}

impl RequestMatch {
    /// HTTP method and resource, e.g. `RequestMatch::new("PATCH", "nodeclaims")`.
    pub fn new(method: &str, resource: &str) -> Self {
        Self {
            method: Some(method.to_string()),
            resource: Some(resource.to_string()),
            ..Self::default()
        }
    }

    /// Kubernetes verb and resource, e.g. `RequestMatch::verb("watch", "nodes")`.
    pub fn verb(verb: &str, resource: &str) -> Self {
        Self {
            verb: Some(verb.to_string()),
            resource: Some(resource.to_string()),
            ..Self::default()
        }
    }

    /// Restricts to a subresource (`"status"`, `"eviction"`), or `""` for the main resource.
    pub fn subresource(mut self, sub: &str) -> Self {
        self.subresource = Some(sub.to_string());
        self
    }

    /// Restricts to requests sent with `Authorization: Bearer <token>` (see `RequestRecord::by`).
    pub fn by(mut self, token: &str) -> Self {
        self.user = Some(token.to_string());
        self
    }

    pub fn matches(&self, r: &RequestRecord) -> bool {
        let eq = |want: &Option<String>, have: &str| {
            want.as_ref().is_none_or(|w| w.eq_ignore_ascii_case(have))
        };
        eq(&self.method, &r.method)
            && eq(&self.verb, &r.verb)
            && self.resource.as_ref().is_none_or(|res| r.is_resource(res))
            && self
                .subresource
                .as_ref()
                .is_none_or(|s| s == r.subresource.as_deref().unwrap_or(""))
            && self
                .user
                .as_ref()
                .is_none_or(|u| r.user.as_ref() == Some(u))
    }
}

/// What a matching request gets instead of its normal answer.
#[derive(Debug, Clone, PartialEq)]
pub enum Injected {
    /// An error status at once, the request not served.
    Error(u16),
    /// A 504 `Timeout` after the delay; `committed`: the request is served (its write applied)
    /// before the answer is lost.
    Timeout { delay: Duration, committed: bool },
    /// The request is served after the delay (a watch's stream starts only then).
    Stall(Duration),
}

#[derive(Debug, Clone)]
struct Fault {
    matcher: RequestMatch,
    remaining: u32,
    action: Injected,
}

/// Pending faults and the request log.
#[derive(Debug, Default)]
pub struct Faults {
    faults: Vec<Fault>,
    log: Vec<RequestRecord>,
    /// When each request of `log` arrived.
    arrived: Vec<Instant>,
}

impl Faults {
    pub fn add(&mut self, matcher: RequestMatch, times: u32, code: u16) {
        self.inject(matcher, times, Injected::Error(code));
    }

    pub fn inject(&mut self, matcher: RequestMatch, times: u32, action: Injected) {
        self.faults.push(Fault {
            matcher,
            remaining: times,
            action,
        });
    }

    pub fn clear(&mut self) {
        self.faults.clear();
    }

    /// Logs the request and returns the injected fault, if a pending fault matches (the oldest
    /// matching fault is used up first).
    pub fn on_request(&mut self, r: RequestRecord) -> Option<Injected> {
        let hit = self
            .faults
            .iter_mut()
            .find(|f| f.remaining > 0 && f.matcher.matches(&r));
        let action = hit.map(|f| {
            f.remaining -= 1;
            f.action.clone()
        });
        self.faults.retain(|f| f.remaining > 0);
        self.log.push(r);
        self.arrived.push(Instant::now());
        action
    }

    /// The log with each request's arrival time, oldest first.
    pub fn timed_log(&self) -> Vec<(Instant, RequestRecord)> {
        self.arrived
            .iter()
            .copied()
            .zip(self.log.iter().cloned())
            .collect()
    }

    /// Faults still pending and the matches each has left, for checking that a test's faults were hit.
    pub fn pending(&self) -> Vec<(RequestMatch, u32)> {
        self.faults
            .iter()
            .map(|f| (f.matcher.clone(), f.remaining))
            .collect()
    }

    pub fn log(&self) -> Vec<RequestRecord> {
        self.log.clone()
    }

    pub fn count(&self, m: &RequestMatch) -> usize {
        self.log.iter().filter(|r| m.matches(r)).count()
    }

    pub fn reset_log(&mut self) {
        self.log.clear();
        self.arrived.clear();
    }
}

/// A request a client sent but the server never answers (as long as a test runs).
const HANG: Duration = Duration::from_secs(24 * 3600);

impl super::ApiServer {
    /// Every request so far with its arrival time, oldest first.
    pub fn timed_requests(&self) -> Vec<(Instant, RequestRecord)> {
        self.shared.faults.lock().expect("faults lock").timed_log()
    }

    /// Cuts the client that sends `token` off, as a network partition would: its open watches
    /// end and every request it sends from now on hangs unanswered (a watch never starts). After
    /// `clear_faults` its new requests are served; those sent while cut off stay unanswered. Its
    /// requests are still logged, with their arrival times.
    pub fn cut_off(&self, token: &str) {
        self.shared.faults.lock().expect("faults lock").inject(
            RequestMatch::default().by(token),
            u32::MAX,
            Injected::Stall(HANG),
        );
        self.drop_watches();
    }

    /// Hangs the next `times` requests matching `m` (each waits unanswered while a test runs).
    pub fn hang_next(&self, m: RequestMatch, times: u32) {
        self.shared
            .faults
            .lock()
            .expect("faults lock")
            .inject(m, times, Injected::Stall(HANG));
    }
}
