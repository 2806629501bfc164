//! The Rust-side API of `ApiServer`: synchronous store access for harnesses (same semantics as
//! the HTTP side: resourceVersions, events, finalizers, PDB status), typed helpers, and the
//! fault-injection and request-log controls.

use std::time::Duration;

use serde_json::Value;
use tokio::sync::broadcast::error::RecvError;

use super::faults::{Injected, RequestMatch, RequestRecord};
use super::patch::{patch_object, PatchKind};
use super::resources::{by_kind, by_name, ResourceInfo, RESOURCES};
use super::select::{FieldSelector, LabelSelector};
use super::status::{ApiError, ApiResult};
use super::store::{obj_name, obj_ns, Deleted, Target};
use super::ApiServer;
use serde::de::DeserializeOwned;
use serde::Serialize;

/// A resource by `plural` or `plural.group` (core wins for "events").
fn lookup(name: &str) -> ApiResult<&'static ResourceInfo> {
    by_name(name).ok_or_else(ApiError::no_such_resource)
}

/// The resource of an object, from its apiVersion and kind.
fn resource_of(obj: &Value) -> ApiResult<&'static ResourceInfo> {
    let (v, k) = (
        obj["apiVersion"].as_str().unwrap_or_default(),
        obj["kind"].as_str().unwrap_or_default(),
    );
    by_kind(v, k).ok_or_else(ApiError::no_such_resource)
}

/// The namespace an object is stored under: its own, else "default"; "" when cluster-scoped.
fn namespace_of(res: &ResourceInfo, obj: &Value) -> String {
    match obj_ns(obj) {
        _ if !res.namespaced => String::new(),
        "" => "default".to_string(),
        ns => ns.to_string(),
    }
}

fn scope(res: &ResourceInfo, ns: Option<&str>) -> String {
    if res.namespaced {
        ns.unwrap_or("default").to_string()
    } else {
        String::new()
    }
}

fn typed_resource<K: kube::Resource<DynamicType = ()>>() -> ApiResult<&'static ResourceInfo> {
    let (g, p) = (K::group(&()), K::plural(&()));
    RESOURCES
        .iter()
        .find(|r| r.group == g && r.plural == p)
        .ok_or_else(ApiError::no_such_resource)
}

fn to_value<K: Serialize>(obj: &K) -> ApiResult<Value> {
    serde_json::to_value(obj).map_err(|e| ApiError::bad_request(format!("encoding object: {e}")))
}

fn from_value<K: DeserializeOwned>(v: Value) -> ApiResult<K> {
    serde_json::from_value(v).map_err(|e| ApiError::internal(format!("decoding object: {e}")))
}

impl ApiServer {
    /// Creates an object (apiVersion and kind pick the resource; namespace defaults to
    /// "default"). Status is handled as on create over HTTP (dropped for CRDs and PDBs, reset to
    /// Pending for pods); use `create_with_status` to seed one.
    pub fn create(&self, obj: Value) -> ApiResult<Value> {
        let res = resource_of(&obj)?;
        let ns = namespace_of(res, &obj);
        self.state().create(res, &ns, obj)
    }

    /// Creates an object, then writes the status it was given (two resourceVersions).
    pub fn create_with_status(&self, obj: Value) -> ApiResult<Value> {
        let status = obj.get("status").cloned();
        let created = self.create(obj)?;
        match status {
            Some(s) => {
                let mut with = created;
                with["status"] = s;
                self.replace_status(with)
            }
            None => Ok(created),
        }
    }

    /// `resource` is `plural` or `plural.group`; `ns` is ignored for cluster-scoped resources and
    /// defaults to "default" for namespaced ones.
    pub fn get(&self, resource: &str, ns: Option<&str>, name: &str) -> ApiResult<Value> {
        let res = lookup(resource)?;
        self.state().get(res, &scope(res, ns), name)
    }

    /// Objects of a resource (all namespaces for `ns = None`) matching a label selector string.
    pub fn list(
        &self,
        resource: &str,
        ns: Option<&str>,
        label_selector: &str,
    ) -> ApiResult<Vec<Value>> {
        let res = lookup(resource)?;
        let labels = LabelSelector::parse(label_selector)?;
        Ok(self
            .state()
            .select(res, ns, &labels, &FieldSelector::default()))
    }

    /// Replaces an object (PUT): 409 if its resourceVersion is stale; status kept for kinds with
    /// a status subresource.
    pub fn replace(&self, obj: Value) -> ApiResult<Value> {
        self.write(obj, Target::Main)
    }

    /// Replaces an object's status (PUT `/status`).
    pub fn replace_status(&self, obj: Value) -> ApiResult<Value> {
        self.write(obj, Target::Status)
    }

    fn write(&self, obj: Value, target: Target) -> ApiResult<Value> {
        let res = resource_of(&obj)?;
        let (ns, name) = (namespace_of(res, &obj), obj_name(&obj).to_string());
        self.state().update(res, &ns, &name, obj, target)
    }

    /// Patches an object (main resource).
    pub fn patch(
        &self,
        resource: &str,
        ns: Option<&str>,
        name: &str,
        kind: PatchKind,
        patch: &Value,
    ) -> ApiResult<Value> {
        self.patch_target(resource, ns, name, kind, patch, Target::Main)
    }

    /// Patches an object's status subresource.
    pub fn patch_status(
        &self,
        resource: &str,
        ns: Option<&str>,
        name: &str,
        kind: PatchKind,
        patch: &Value,
    ) -> ApiResult<Value> {
        self.patch_target(resource, ns, name, kind, patch, Target::Status)
    }

    /// JSON merge patch of the main resource.
    pub fn merge_patch(
        &self,
        resource: &str,
        ns: Option<&str>,
        name: &str,
        patch: &Value,
    ) -> ApiResult<Value> {
        self.patch(resource, ns, name, PatchKind::Merge, patch)
    }

    /// JSON merge patch of the status subresource.
    pub fn merge_patch_status(
        &self,
        resource: &str,
        ns: Option<&str>,
        name: &str,
        patch: &Value,
    ) -> ApiResult<Value> {
        self.patch_status(resource, ns, name, PatchKind::Merge, patch)
    }

    fn patch_target(
        &self,
        resource: &str,
        ns: Option<&str>,
        name: &str,
        kind: PatchKind,
        patch: &Value,
        target: Target,
    ) -> ApiResult<Value> {
        let res = lookup(resource)?;
        let mut state = self.state();
        patch_object(&mut state, res, &scope(res, ns), name, &kind, patch, target).map(|(o, _)| o)
    }

    /// Deletes an object; returns its last state (with `deletionTimestamp` when finalizers keep
    /// it). Whether it is gone: `get` answers 404.
    pub fn delete(&self, resource: &str, ns: Option<&str>, name: &str) -> ApiResult<Value> {
        let res = lookup(resource)?;
        match self
            .state()
            .delete(res, &scope(res, ns), name, &Value::Null)?
        {
            Deleted::Removed(o) | Deleted::Pending(o) => Ok(o),
        }
    }

    /// Evicts a pod as `POST pods/{name}/eviction` would (429 when a budget forbids it).
    pub fn evict(&self, ns: &str, name: &str) -> ApiResult<Value> {
        super::eviction::evict(&mut self.state(), ns, name, &Value::Null)
    }

    pub fn create_typed<K>(&self, obj: &K) -> ApiResult<K>
    where
        K: kube::Resource<DynamicType = ()> + Serialize + DeserializeOwned,
    {
        let mut v = to_value(obj)?;
        v["apiVersion"] = K::api_version(&()).into();
        v["kind"] = K::kind(&()).into();
        from_value(self.create(v)?)
    }

    pub fn get_typed<K>(&self, ns: Option<&str>, name: &str) -> ApiResult<K>
    where
        K: kube::Resource<DynamicType = ()> + DeserializeOwned,
    {
        let res = typed_resource::<K>()?;
        from_value(self.state().get(res, &scope(res, ns), name)?)
    }

    pub fn list_typed<K>(&self, ns: Option<&str>) -> ApiResult<Vec<K>>
    where
        K: kube::Resource<DynamicType = ()> + DeserializeOwned,
    {
        let res = typed_resource::<K>()?;
        let all = self.state().select(
            res,
            ns,
            &LabelSelector::default(),
            &FieldSelector::default(),
        );
        all.into_iter().map(from_value).collect()
    }

    pub fn replace_typed<K>(&self, obj: &K) -> ApiResult<K>
    where
        K: kube::Resource<DynamicType = ()> + Serialize + DeserializeOwned,
    {
        let mut v = to_value(obj)?;
        v["apiVersion"] = K::api_version(&()).into();
        v["kind"] = K::kind(&()).into();
        from_value(self.replace(v)?)
    }

    pub fn replace_status_typed<K>(&self, obj: &K) -> ApiResult<K>
    where
        K: kube::Resource<DynamicType = ()> + Serialize + DeserializeOwned,
    {
        let mut v = to_value(obj)?;
        v["apiVersion"] = K::api_version(&()).into();
        v["kind"] = K::kind(&()).into();
        from_value(self.replace_status(v)?)
    }

    /// Waits until `cond` holds, re-checking after every committed change, for at most
    /// `timeout`. Returns whether it held.
    pub async fn wait_for(
        &self,
        timeout: Duration,
        mut cond: impl FnMut(&ApiServer) -> bool,
    ) -> bool {
        let mut changes = self.subscribe();
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if cond(self) {
                return true;
            }
            match tokio::time::timeout_at(deadline, changes.recv()).await {
                Err(_) | Ok(Err(RecvError::Closed)) => return cond(self),
                Ok(_) => {}
            }
        }
    }

    /// Answers the next `times` requests matching `m` with `code` (409 Conflict, 500
    /// InternalError, 429, 503, ...) instead of serving them.
    pub fn fail_next(&self, m: RequestMatch, times: u32, code: u16) {
        self.shared
            .faults
            .lock()
            .expect("faults lock")
            .add(m, times, code);
    }

    /// Answers the next `times` requests matching `m` late: kube-apiserver's request timeout (a
    /// 504 `Timeout` after `delay`; `committed`: the request took effect before its answer was
    /// lost), or a stall (`Injected::Stall`: served after the delay; a watch starts only then).
    pub fn inject_next(&self, m: RequestMatch, times: u32, action: Injected) {
        self.shared
            .faults
            .lock()
            .expect("faults lock")
            .inject(m, times, action);
    }

    /// Injected faults not used up yet, with the matches each has left (empty once every fault was hit).
    pub fn faults_pending(&self) -> Vec<(RequestMatch, u32)> {
        self.shared.faults.lock().expect("faults lock").pending()
    }

    /// Removes every pending fault.
    pub fn clear_faults(&self) {
        self.shared.faults.lock().expect("faults lock").clear();
    }

    /// Ends every open watch stream cleanly (as an apiserver restart or a load balancer would);
    /// clients resume from their last resourceVersion.
    pub fn drop_watches(&self) {
        self.shared.drops.send_modify(|n| *n += 1);
    }

    /// Forgets the change history: watches resuming from before now, and continue tokens issued
    /// before now, get 410 Expired.
    pub fn compact(&self) {
        self.state().compact();
    }

    /// Every API request served so far (faulted ones included), oldest first.
    pub fn requests(&self) -> Vec<RequestRecord> {
        self.shared.faults.lock().expect("faults lock").log()
    }

    /// How many requests matched `m`.
    pub fn request_count(&self, m: &RequestMatch) -> usize {
        self.shared.faults.lock().expect("faults lock").count(m)
    }

    /// How many requests had this HTTP method and resource (`plural` or `plural.group`).
    pub fn count(&self, method: &str, resource: &str) -> usize {
        self.request_count(&RequestMatch::new(method, resource))
    }

    pub fn reset_requests(&self) {
        self.shared.faults.lock().expect("faults lock").reset_log();
    }
}
