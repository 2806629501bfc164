//! Watch streams: newline-delimited `{"type": ..., "object": ...}` events on a chunked response.
//!
//! A watch starts under the store lock (so no change can fall between its start and its live
//! feed): with no resourceVersion, "0" or `sendInitialEvents=true` it first sends ADDED for every
//! matching object (then, for sendInitialEvents, a BOOKMARK annotated
//! `k8s.io/initial-events-end`); with a resourceVersion N it replays the retained changes after N,
//! or, when N is older than the retained history, sends one ERROR event (Status 410 Expired) and
//! ends, as the real server does. It then follows the broadcast channel, sends BOOKMARKs at the
//! configured interval when `allowWatchBookmarks` is set, and ends cleanly at `timeoutSeconds`,
//! on `ApiServer::drop_watches`, or with an ERROR 410 if it fell too far behind the channel.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use serde_json::{json, Value};
use tokio::sync::broadcast::{self, error::RecvError};
use tokio::time::{Instant, Interval};

use super::resources::ResourceInfo;
use super::select::{FieldSelector, LabelSelector};
use super::status::{ApiError, ApiResult};
use super::store::{Change, ChangeKind};
use super::Shared;

/// A watch request's parameters.
#[derive(Debug, Clone)]
pub struct WatchRequest {
    pub namespace: Option<String>,
    pub labels: LabelSelector,
    pub fields: FieldSelector,
    pub resource_version: Option<String>,
    pub bookmarks: bool,
    pub send_initial_events: bool,
    pub resource_version_match: Option<String>,
    pub timeout: Duration,
}

impl WatchRequest {
    fn validate(&self, res: &ResourceInfo) -> ApiResult<()> {
        let forbid = |field: &str, why: &str| {
            Err(ApiError::invalid(
                res,
                "",
                field,
                &format!("Forbidden: {why}"),
            ))
        };
        let rv_match = self.resource_version_match.as_deref().unwrap_or("");
        if self.send_initial_events && rv_match != "NotOlderThan" {
            return forbid(
                "resourceVersionMatch",
                "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
            );
        }
        if self.send_initial_events && !self.bookmarks {
            return forbid(
                "allowWatchBookmarks",
                "sendInitialEvents requires setting allowWatchBookmarks to true",
            );
        }
        if !self.send_initial_events && !rv_match.is_empty() {
            return forbid(
                "resourceVersionMatch",
                "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
            );
        }
        Ok(())
    }

    fn matches(&self, res: &ResourceInfo, obj: &Value) -> bool {
        let ns_ok = self
            .namespace
            .as_deref()
            .is_none_or(|ns| obj["metadata"]["namespace"] == ns);
        ns_ok && self.labels.matches(obj) && self.fields.matches(obj) && obj["kind"] == res.kind
    }

    /// The event a change means for this watch, if any: an object that starts matching the
    /// selectors is ADDED, one that stops matching is DELETED.
    fn translate(&self, res: &'static ResourceInfo, c: &Change) -> Option<&'static str> {
        if !std::ptr::eq(c.resource, res) {
            return None;
        }
        let now = self.matches(res, &c.object);
        let before = c.old.as_ref().is_some_and(|o| self.matches(res, o));
        match (c.kind, before, now) {
            (ChangeKind::Added, _, true) => Some("ADDED"),
            (ChangeKind::Modified, true, true) => Some("MODIFIED"),
            (ChangeKind::Modified, false, true) => Some("ADDED"),
            (ChangeKind::Modified, true, false) => Some("DELETED"),
            (ChangeKind::Deleted, _, true) => Some("DELETED"),
            _ => None,
        }
    }
}

fn line(kind: &str, object: &Value) -> Bytes {
    let mut v = serde_json::to_vec(&json!({"type": kind, "object": object})).expect("json");
    v.push(b'\n');
    Bytes::from(v)
}

fn bookmark(res: &ResourceInfo, rv: u64, initial_end: bool) -> Bytes {
    let mut meta = json!({"resourceVersion": rv.to_string()});
    if initial_end {
        meta["annotations"] = json!({"k8s.io/initial-events-end": "true"});
    }
    line(
        "BOOKMARK",
        &json!({"kind": res.kind, "apiVersion": res.api_version(), "metadata": meta}),
    )
}

fn expired_line(message: String) -> Bytes {
    line("ERROR", &ApiError::expired(message).to_status())
}

/// Opens a watch: validates it, takes its starting events under the lock, and returns the body.
pub fn open(
    shared: &Arc<Shared>,
    res: &'static ResourceInfo,
    req: WatchRequest,
) -> ApiResult<Body> {
    req.validate(res)?;
    let start_rv = match req
        .resource_version
        .as_deref()
        .filter(|s| !s.is_empty() && !req.send_initial_events)
    {
        Some(s) => Some(
            s.parse::<u64>()
                .map_err(|_| ApiError::bad_request(format!("invalid resource version: {s:?}")))?,
        ),
        None => None,
    };
    let mut st = WatchStream::new(shared, res, req);
    {
        let state = shared.state.lock().expect("state lock");
        st.rx = Some(state.subscribe());
        st.last_rv = state.resource_version();
        match start_rv.filter(|rv| *rv != 0) {
            None => {
                let objects = state.select(
                    res,
                    st.req.namespace.as_deref(),
                    &st.req.labels,
                    &st.req.fields,
                );
                st.initial_state(&objects);
            }
            Some(rv) if rv < state.floor() => {
                let msg = format!("too old resource version: {rv} ({})", state.floor() + 1);
                st.pending.push_back(expired_line(msg));
                st.done = true;
            }
            Some(rv) => state
                .history_after(rv)
                .iter()
                .for_each(|c| st.push_change(c)),
        }
    }
    let stream = futures::stream::unfold(st, WatchStream::step);
    Ok(Body::from_stream(stream))
}

enum Wake {
    End,
    Change(Result<Arc<Change>, RecvError>),
    Tick,
}

struct WatchStream {
    res: &'static ResourceInfo,
    req: WatchRequest,
    pending: VecDeque<Bytes>,
    done: bool,
    rx: Option<broadcast::Receiver<Arc<Change>>>,
    /// The newest change this stream has seen (matching or not): what a bookmark may promise.
    last_rv: u64,
    ticks: Option<Interval>,
    deadline: Instant,
    drops: tokio::sync::watch::Receiver<u64>,
}

impl WatchStream {
    fn new(shared: &Arc<Shared>, res: &'static ResourceInfo, req: WatchRequest) -> Self {
        let period = shared.bookmark_interval();
        let ticks = req
            .bookmarks
            .then(|| tokio::time::interval_at(Instant::now() + period, period));
        let deadline = Instant::now() + req.timeout;
        let mut drops = shared.drops.subscribe();
        drops.mark_unchanged();
        Self {
            res,
            req,
            pending: VecDeque::new(),
            done: false,
            rx: None,
            last_rv: 0,
            ticks,
            deadline,
            drops,
        }
    }

    fn initial_state(&mut self, objects: &[Value]) {
        for o in objects {
            self.pending.push_back(line("ADDED", o));
        }
        if self.req.send_initial_events {
            self.pending
                .push_back(bookmark(self.res, self.last_rv, true));
        }
    }

    fn push_change(&mut self, c: &Change) {
        if let Some(kind) = self.req.translate(self.res, c) {
            self.pending.push_back(line(kind, &c.object));
        }
    }

    async fn step(mut self) -> Option<(Result<Bytes, Infallible>, Self)> {
        loop {
            if let Some(b) = self.pending.pop_front() {
                return Some((Ok(b), self));
            }
            if self.done {
                return None;
            }
            match self.wait().await {
                Wake::End => self.done = true,
                Wake::Tick => self
                    .pending
                    .push_back(bookmark(self.res, self.last_rv, false)),
                Wake::Change(r) => self.on_change(r),
            }
        }
    }

    async fn wait(&mut self) -> Wake {
        let Self {
            rx,
            ticks,
            deadline,
            drops,
            ..
        } = self;
        let rx = rx.as_mut().expect("subscribed at open");
        let tick = async {
            match ticks.as_mut() {
                Some(t) => t.tick().await,
                None => std::future::pending().await,
            }
        };
        // Biased: once a watch is dropped or timed out it must not deliver changes committed
        // after that, even if they are already waiting in the channel.
        tokio::select! {
            biased;
            _ = tokio::time::sleep_until(*deadline) => Wake::End,
            _ = drops.changed() => Wake::End,
            r = rx.recv() => Wake::Change(r),
            _ = tick => Wake::Tick,
        }
    }

    fn on_change(&mut self, r: Result<Arc<Change>, RecvError>) {
        match r {
            Ok(c) if c.rv > self.last_rv => {
                self.last_rv = c.rv;
                self.push_change(&c);
            }
            Ok(_) => {}
            Err(RecvError::Lagged(_)) => {
                self.pending.push_back(expired_line(format!(
                    "too old resource version: {}",
                    self.last_rv
                )));
                self.done = true;
            }
            Err(RecvError::Closed) => self.done = true,
        }
    }
}
