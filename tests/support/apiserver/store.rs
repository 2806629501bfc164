//! The object store: every object as JSON under (group, plural, namespace, name), one global
//! resourceVersion counter, the bounded change history that watches replay from, and the generic
//! registry semantics (create, get, list, update, delete with finalizers).

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use serde_json::{json, Value};
use tokio::sync::broadcast;

use super::resources::{CreateStatus, ResourceInfo};
use super::select::{FieldSelector, LabelSelector};
use super::status::{ApiError, ApiResult};

/// What a change did to an object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeKind {
    Added,
    Modified,
    Deleted,
}

impl ChangeKind {
    pub fn wire_name(self) -> &'static str {
        match self {
            Self::Added => "ADDED",
            Self::Modified => "MODIFIED",
            Self::Deleted => "DELETED",
        }
    }
}

/// One committed change, as watches and `ApiServer::subscribe` see it.
#[derive(Debug, Clone)]
pub struct Change {
    pub rv: u64,
    pub kind: ChangeKind,
    pub resource: &'static ResourceInfo,
    /// The object after the change (for a deletion: its last state, with the deletion's rv).
    pub object: Value,
    /// The object before the change (`None` for an addition); watches with selectors need it to
    /// turn a change into ADDED or DELETED when an object starts or stops matching.
    pub old: Option<Value>,
}

type Key = (&'static str, &'static str, String, String);

fn key(res: &'static ResourceInfo, ns: &str, name: &str) -> Key {
    (res.group, res.plural, ns.to_string(), name.to_string())
}

/// Where an update writes: the main resource keeps the stored status (for kinds with a status
/// subresource), `/status` keeps everything but the status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    Main,
    Status,
}

/// A list request's filters and paging.
#[derive(Debug, Clone, Default)]
pub struct ListQuery {
    pub namespace: Option<String>,
    pub labels: LabelSelector,
    pub fields: FieldSelector,
    pub limit: Option<usize>,
    pub continue_token: Option<String>,
}

/// One page of a list.
#[derive(Debug, Clone)]
pub struct ListPage {
    pub items: Vec<Value>,
    pub resource_version: u64,
    pub continue_token: Option<String>,
    pub remaining: Option<usize>,
}

/// What a delete did: removed the object at once, or marked it (finalizers pending).
#[derive(Debug, Clone)]
pub enum Deleted {
    Removed(Value),
    Pending(Value),
}

pub const DEFAULT_HISTORY: usize = 10_000;

pub struct State {
    objects: BTreeMap<Key, Value>,
    rv: u64,
    history: VecDeque<Arc<Change>>,
    history_limit: usize,
    /// Watches and continue tokens from a resourceVersion below this get 410: the changes after
    /// it are no longer all retained.
    floor: u64,
    seq: u64,
    tx: broadcast::Sender<Arc<Change>>,
}

impl State {
    pub fn new(history_limit: usize) -> Self {
        let (tx, _) = broadcast::channel(65_536);
        Self {
            objects: BTreeMap::new(),
            rv: 1,
            history: VecDeque::new(),
            history_limit,
            floor: 0,
            seq: 0,
            tx,
        }
    }

    pub fn resource_version(&self) -> u64 {
        self.rv
    }

    pub fn floor(&self) -> u64 {
        self.floor
    }

    pub fn subscribe(&self) -> broadcast::Receiver<Arc<Change>> {
        self.tx.subscribe()
    }

    /// Changes after `rv` still in the history.
    pub fn history_after(&self, rv: u64) -> Vec<Arc<Change>> {
        self.history.iter().filter(|c| c.rv > rv).cloned().collect()
    }

    /// Forgets the history: a watch or continue token from before now gets 410.
    pub fn compact(&mut self) {
        self.history.clear();
        self.floor = self.rv;
    }

    fn next_rv(&mut self) -> u64 {
        self.rv += 1;
        self.rv
    }

    /// Records and broadcasts a change (sent under the lock, so every receiver sees changes in
    /// resourceVersion order).
    pub(super) fn emit(
        &mut self,
        kind: ChangeKind,
        res: &'static ResourceInfo,
        object: Value,
        old: Option<Value>,
    ) {
        let rv = object_rv(&object);
        let change = Arc::new(Change {
            rv,
            kind,
            resource: res,
            object,
            old,
        });
        self.history.push_back(change.clone());
        while self.history.len() > self.history_limit {
            if let Some(c) = self.history.pop_front() {
                self.floor = c.rv;
            }
        }
        let _ = self.tx.send(change);
    }

    pub fn get(&self, res: &'static ResourceInfo, ns: &str, name: &str) -> ApiResult<Value> {
        self.objects
            .get(&key(res, ns, name))
            .cloned()
            .ok_or_else(|| ApiError::not_found(res, name))
    }

    pub fn contains(&self, res: &'static ResourceInfo, ns: &str, name: &str) -> bool {
        self.objects.contains_key(&key(res, ns, name))
    }

    /// Every stored object of a resource in a namespace (all namespaces for `None`) matching the
    /// selectors, in key order.
    pub fn select(
        &self,
        res: &'static ResourceInfo,
        ns: Option<&str>,
        labels: &LabelSelector,
        fields: &FieldSelector,
    ) -> Vec<Value> {
        // keys sort by resource, then namespace: read only this resource's (and namespace's) range
        let from = (
            res.group,
            res.plural,
            ns.unwrap_or_default().to_string(),
            String::new(),
        );
        self.objects
            .range(from..)
            .take_while(|((g, p, n, _), _)| {
                *g == res.group && *p == res.plural && ns.is_none_or(|ns| ns == n.as_str())
            })
            .map(|(_, v)| v)
            .filter(|v| labels.matches(v) && fields.matches(v))
            .cloned()
            .collect()
    }

    pub fn list(&self, res: &'static ResourceInfo, q: &ListQuery) -> ApiResult<ListPage> {
        let all = self.select(res, q.namespace.as_deref(), &q.labels, &q.fields);
        let (rv, after) = match &q.continue_token {
            Some(t) => self.decode_continue(t)?,
            None => (self.rv, None),
        };
        let rest: Vec<Value> = match &after {
            Some((ns, name)) => all
                .into_iter()
                .filter(|o| (obj_ns(o), obj_name(o)) > (ns.as_str(), name.as_str()))
                .collect(),
            None => all,
        };
        Ok(paginate(rest, rv, q.limit))
    }

    fn decode_continue(&self, token: &str) -> ApiResult<(u64, Option<(String, String)>)> {
        let bad = || {
            ApiError::bad_request(
                "continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)",
            )
        };
        let raw = unhex(token).ok_or_else(bad)?;
        let mut parts = raw.splitn(3, '\u{0}');
        let rv: u64 = parts.next().and_then(|s| s.parse().ok()).ok_or_else(bad)?;
        let (ns, name) = (parts.next().ok_or_else(bad)?, parts.next().ok_or_else(bad)?);
        if rv < self.floor {
            return Err(ApiError::expired(
                "The provided continue parameter is too old to display a consistent list result. \
                 You can start a new list without the continue parameter.",
            ));
        }
        Ok((rv, Some((ns.to_string(), name.to_string()))))
    }

    pub fn create(
        &mut self,
        res: &'static ResourceInfo,
        ns: &str,
        mut obj: Value,
    ) -> ApiResult<Value> {
        check_type(res, &mut obj)?;
        let name = self.assign_name(res, &mut obj)?;
        if self.contains(res, ns, &name) {
            return Err(ApiError::already_exists(res, &name));
        }
        self.seq += 1;
        let rv = self.next_rv();
        init_metadata(res, ns, &mut obj, rv, self.seq);
        apply_create_status(res, &mut obj);
        self.objects.insert(key(res, ns, &name), obj.clone());
        self.emit(ChangeKind::Added, res, obj.clone(), None);
        self.after_change(res, ns);
        Ok(obj)
    }

    fn assign_name(&mut self, res: &'static ResourceInfo, obj: &mut Value) -> ApiResult<String> {
        if let Some(n) = obj["metadata"]["name"].as_str().filter(|n| !n.is_empty()) {
            return Ok(n.to_string());
        }
        let Some(prefix) = obj["metadata"]["generateName"]
            .as_str()
            .filter(|p| !p.is_empty())
        else {
            return Err(ApiError::invalid(
                res,
                "",
                "metadata.name",
                "Required value: name or generateName is required",
            ));
        };
        self.seq += 1;
        let name = format!("{prefix}{}", name_suffix(self.seq));
        obj["metadata"]["name"] = json!(name);
        Ok(name)
    }

    /// Replaces an object (PUT, and every patch after it is applied). Checks the body's
    /// resourceVersion, keeps what the client cannot change, refuses new finalizers on an object
    /// being deleted, skips no-op writes (no new resourceVersion, no event, as the real server),
    /// and removes the object once it is being deleted and has no finalizers left.
    pub fn update(
        &mut self,
        res: &'static ResourceInfo,
        ns: &str,
        name: &str,
        mut new: Value,
        target: Target,
    ) -> ApiResult<Value> {
        let old = self.get(res, ns, name)?;
        check_type(res, &mut new)?;
        check_identity(res, ns, name, &new)?;
        let sent_rv = new["metadata"]["resourceVersion"]
            .as_str()
            .unwrap_or_default();
        if !sent_rv.is_empty()
            && sent_rv
                != old["metadata"]["resourceVersion"]
                    .as_str()
                    .unwrap_or_default()
        {
            return Err(ApiError::stale(res, name));
        }
        let mut merged = merge_for_target(res, &old, new, target);
        check_finalizers(res, name, &old, &merged)?;
        if without_rv(&merged) == without_rv(&old) {
            return Ok(old);
        }
        bump_generation(res, &old, &mut merged);
        let rv = self.next_rv();
        merged["metadata"]["resourceVersion"] = json!(rv.to_string());
        if is_deleting(&merged) && finalizers(&merged).is_empty() {
            return Ok(self.remove(res, ns, name, merged, old));
        }
        self.objects.insert(key(res, ns, name), merged.clone());
        self.emit(ChangeKind::Modified, res, merged.clone(), Some(old));
        self.after_change(res, ns);
        Ok(merged)
    }

    /// Deletes an object: at once without finalizers; otherwise sets `deletionTimestamp` and keeps
    /// it until the finalizers are removed. `preconditions` as in DeleteOptions.
    pub fn delete(
        &mut self,
        res: &'static ResourceInfo,
        ns: &str,
        name: &str,
        opts: &Value,
    ) -> ApiResult<Deleted> {
        let old = self.get(res, ns, name)?;
        check_preconditions(res, name, &old, &opts["preconditions"])?;
        // pods on a node terminate gracefully: the kubelet removes them (see `kubelet.rs`)
        let grace = match res.is_pod() {
            true => super::kubelet::grace_period(self, &old, opts),
            false => 0,
        };
        if finalizers(&old).is_empty() && grace == 0 {
            let mut last = old.clone();
            let rv = self.next_rv();
            last["metadata"]["resourceVersion"] = json!(rv.to_string());
            return Ok(Deleted::Removed(self.remove(res, ns, name, last, old)));
        }
        let at = chrono::Utc::now();
        if is_deleting(&old) && !(res.is_pod() && super::kubelet::shortens(&old, grace, at)) {
            return Ok(Deleted::Pending(old));
        }
        let mut marked = match res.is_pod() {
            true => super::kubelet::mark(&old, grace, at),
            false => {
                let mut m = old.clone();
                let grace = opts["gracePeriodSeconds"].as_i64().unwrap_or(0);
                m["metadata"]["deletionTimestamp"] = json!(now());
                m["metadata"]["deletionGracePeriodSeconds"] = json!(grace);
                m
            }
        };
        if let Some(g) = marked["metadata"]["generation"].as_i64() {
            marked["metadata"]["generation"] = json!(g + 1);
        }
        let rv = self.next_rv();
        marked["metadata"]["resourceVersion"] = json!(rv.to_string());
        self.objects.insert(key(res, ns, name), marked.clone());
        self.emit(ChangeKind::Modified, res, marked.clone(), Some(old));
        self.after_change(res, ns);
        Ok(Deleted::Pending(marked))
    }

    fn remove(
        &mut self,
        res: &'static ResourceInfo,
        ns: &str,
        name: &str,
        last: Value,
        old: Value,
    ) -> Value {
        self.objects.remove(&key(res, ns, name));
        self.emit(ChangeKind::Deleted, res, last.clone(), Some(old));
        self.after_change(res, ns);
        last
    }

    /// Writes a status computed by the server itself (PDB status), without re-running hooks.
    pub(super) fn write_status_internal(
        &mut self,
        res: &'static ResourceInfo,
        ns: &str,
        name: &str,
        status: Value,
    ) {
        let Ok(old) = self.get(res, ns, name) else {
            return;
        };
        if old["status"] == status {
            return;
        }
        let mut new = old.clone();
        new["status"] = status;
        let rv = self.next_rv();
        new["metadata"]["resourceVersion"] = json!(rv.to_string());
        self.objects.insert(key(res, ns, name), new.clone());
        self.emit(ChangeKind::Modified, res, new, Some(old));
    }

    /// The controllers the server runs in-process: the disruption controller's PDB status.
    fn after_change(&mut self, res: &'static ResourceInfo, ns: &str) {
        if res.is_pod() || res.is_pdb() || res.plural == "replicasets" {
            super::eviction::refresh_budgets(self, ns);
        }
    }
}

fn paginate(items: Vec<Value>, rv: u64, limit: Option<usize>) -> ListPage {
    match limit.filter(|l| *l > 0 && *l < items.len()) {
        None => ListPage {
            items,
            resource_version: rv,
            continue_token: None,
            remaining: None,
        },
        Some(l) => {
            let remaining = items.len() - l;
            let page: Vec<Value> = items.into_iter().take(l).collect();
            let last = page.last().expect("limit > 0");
            let token = hex(&format!("{rv}\u{0}{}\u{0}{}", obj_ns(last), obj_name(last)));
            ListPage {
                items: page,
                resource_version: rv,
                continue_token: Some(token),
                remaining: Some(remaining),
            }
        }
    }
}

fn hex(s: &str) -> String {
    s.bytes().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Option<String> {
    if s.len() % 2 != 0 {
        return None;
    }
    let bytes: Option<Vec<u8>> = (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect();
    String::from_utf8(bytes?).ok()
}

pub fn obj_ns(o: &Value) -> &str {
    o["metadata"]["namespace"].as_str().unwrap_or_default()
}

pub fn obj_name(o: &Value) -> &str {
    o["metadata"]["name"].as_str().unwrap_or_default()
}

pub fn object_rv(o: &Value) -> u64 {
    o["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

pub fn finalizers(o: &Value) -> Vec<String> {
    o["metadata"]["finalizers"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|f| f.as_str().map(String::from))
        .collect()
}

pub fn is_deleting(o: &Value) -> bool {
    !o["metadata"]["deletionTimestamp"].is_null()
}

pub fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// Five characters from the real server's alphabet for generateName (no vowels, no confusables).
fn name_suffix(seq: u64) -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut x = seq.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ nanos();
    (0..5)
        .map(|_| {
            x = x
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            ALPHABET[((x >> 33) % ALPHABET.len() as u64) as usize] as char
        })
        .collect()
}

fn nanos() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

fn uid(seq: u64) -> String {
    let a = nanos() ^ seq.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    let b = seq;
    format!(
        "{:08x}-{:04x}-4{:03x}-8{:03x}-{:012x}",
        a >> 32,
        (a >> 16) & 0xffff,
        a & 0xfff,
        (b >> 48) & 0xfff,
        b & 0xffff_ffff_ffff
    )
}

/// Fills apiVersion and kind when absent; a mismatch is a 400 as on the real server.
fn check_type(res: &ResourceInfo, obj: &mut Value) -> ApiResult<()> {
    if !obj.is_object() {
        return Err(ApiError::bad_request(
            "the body of the request was not a JSON object",
        ));
    }
    let api_version = res.api_version();
    match obj["apiVersion"].as_str() {
        None | Some("") => obj["apiVersion"] = json!(api_version),
        Some(v) if v != api_version => {
            return Err(ApiError::bad_request(format!(
                "the API version in the data ({v}) does not match the expected API version ({api_version})"
            )))
        }
        _ => {}
    }
    match obj["kind"].as_str() {
        None | Some("") => obj["kind"] = json!(res.kind),
        Some(k) if k != res.kind => {
            return Err(ApiError::bad_request(format!(
                "the kind in the data ({k}) does not match the expected kind ({})",
                res.kind
            )))
        }
        _ => {}
    }
    if !obj["metadata"].is_object() {
        obj["metadata"] = json!({});
    }
    Ok(())
}

fn check_identity(res: &ResourceInfo, ns: &str, name: &str, obj: &Value) -> ApiResult<()> {
    let body_name = obj_name(obj);
    if !body_name.is_empty() && body_name != name {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({body_name}) does not match the name on the URL ({name})"
        )));
    }
    let body_ns = obj_ns(obj);
    if res.namespaced && !body_ns.is_empty() && body_ns != ns {
        return Err(ApiError::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        ));
    }
    Ok(())
}

fn init_metadata(res: &ResourceInfo, ns: &str, obj: &mut Value, rv: u64, seq: u64) {
    let m = &mut obj["metadata"];
    if res.namespaced {
        m["namespace"] = json!(ns);
    } else if let Some(map) = m.as_object_mut() {
        map.remove("namespace");
    }
    m["uid"] = json!(uid(seq));
    m["creationTimestamp"] = json!(now());
    m["resourceVersion"] = json!(rv.to_string());
    if let Some(map) = m.as_object_mut() {
        map.remove("deletionTimestamp");
        map.remove("deletionGracePeriodSeconds");
    }
    if res.status_subresource {
        m["generation"] = json!(1);
    }
}

fn apply_create_status(res: &ResourceInfo, obj: &mut Value) {
    let Some(map) = obj.as_object_mut() else {
        return;
    };
    match res.create_status {
        CreateStatus::Keep => {}
        CreateStatus::Clear => {
            map.remove("status");
        }
        CreateStatus::PodPending => {
            map.insert("status".into(), json!({"phase": "Pending"}));
        }
    }
}

/// The stored object an update produces: the client's body with server-owned metadata restored,
/// and the status (main resource) or everything but the status (`/status`) taken from `old`.
fn merge_for_target(res: &ResourceInfo, old: &Value, new: Value, target: Target) -> Value {
    let mut merged = match target {
        Target::Status => {
            let mut m = old.clone();
            set_or_remove(&mut m, "status", new.get("status").cloned());
            m
        }
        Target::Main => {
            let mut m = new;
            if res.status_subresource {
                set_or_remove(&mut m, "status", old.get("status").cloned());
            }
            m
        }
    };
    for field in [
        "uid",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "generation",
        "resourceVersion",
        "name",
        "namespace",
    ] {
        set_or_remove(
            &mut merged["metadata"],
            field,
            old["metadata"].get(field).cloned(),
        );
    }
    merged
}

fn set_or_remove(obj: &mut Value, field: &str, value: Option<Value>) {
    let Some(map) = obj.as_object_mut() else {
        return;
    };
    match value {
        Some(v) => map.insert(field.to_string(), v),
        None => map.remove(field),
    };
}

fn check_finalizers(res: &ResourceInfo, name: &str, old: &Value, new: &Value) -> ApiResult<()> {
    if !is_deleting(old) {
        return Ok(());
    }
    let before = finalizers(old);
    let added: Vec<String> = finalizers(new)
        .into_iter()
        .filter(|f| !before.contains(f))
        .collect();
    if added.is_empty() {
        return Ok(());
    }
    let detail = format!(
        "Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers {added:?}"
    );
    Err(ApiError::invalid(res, name, "metadata.finalizers", &detail))
}

fn check_preconditions(res: &ResourceInfo, name: &str, old: &Value, pre: &Value) -> ApiResult<()> {
    for (field, label) in [("uid", "UID"), ("resourceVersion", "ResourceVersion")] {
        if let Some(want) = pre[field].as_str() {
            let have = old["metadata"][field].as_str().unwrap_or_default();
            if want != have {
                let why = format!(
                    "the {label} in the precondition ({want}) does not match the {label} in record ({have}). \
                     The object might have been deleted and then recreated"
                );
                return Err(ApiError::conflict(res, name, &why));
            }
        }
    }
    Ok(())
}

fn without_rv(o: &Value) -> Value {
    let mut c = o.clone();
    if let Some(m) = c["metadata"].as_object_mut() {
        m.remove("resourceVersion");
    }
    c
}

/// Bumps `metadata.generation` when anything outside metadata and status changed.
fn bump_generation(res: &ResourceInfo, old: &Value, new: &mut Value) {
    if !res.status_subresource {
        return;
    }
    let spec_of = |o: &Value| -> Value {
        let mut c = o.clone();
        if let Some(m) = c.as_object_mut() {
            m.remove("metadata");
            m.remove("status");
        }
        c
    };
    if spec_of(old) != spec_of(new) {
        let g = old["metadata"]["generation"].as_i64().unwrap_or(0);
        new["metadata"]["generation"] = json!(g + 1);
    }
}
