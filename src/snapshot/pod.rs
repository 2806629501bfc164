//! Pods and pod templates: effective requests (Kubernetes' init-container and sidecar rules), host
//! ports and identity. The same [`constraints`] conversion serves Pods and DaemonSet templates so a
//! DaemonSet's pod and the pods it creates look alike to the optimizer.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1 as apps;
use k8s_openapi::api::core::v1 as core;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use crate::domain::{
    self, resources::PODS, HostPort, Labels, Pod, PodConstraints, Quantity, Resources,
};

use super::convert::{api_resources, FieldError, FieldResult};
use super::scheduling;

pub(crate) const DELETION_COST: &str = "controller.kubernetes.io/pod-deletion-cost";
pub(crate) const DO_NOT_DISRUPT: &str = "karpenter.sh/do-not-disrupt";
const MIRROR: &str = "kubernetes.io/config.mirror";

/// Converts a v1 Pod.
pub(crate) fn convert_pod(pod: core::Pod) -> FieldResult<Pod> {
    let meta = &pod.metadata;
    let namespace = namespace_of(meta);
    let name = meta
        .name
        .clone()
        .filter(|n| !n.is_empty())
        .ok_or_else(|| FieldError::new("metadata.name", "missing"))?;
    let spec = pod
        .spec
        .as_ref()
        .ok_or_else(|| FieldError::new("spec", "missing"))?;
    let labels = meta.labels.clone().unwrap_or_default();
    let constraints = constraints(&namespace, &labels, spec, "spec")?;
    let annotations = meta.annotations.as_ref();
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    let (owner_kind, owner_name) = controller_owner(meta.owner_references.as_deref());
    Ok(Pod {
        volumes: super::storage::pod_volumes(&name, spec),
        namespace,
        name,
        uid: meta.uid.clone().unwrap_or_default(),
        labels: std::sync::Arc::new(labels),
        constraints: std::sync::Arc::new(constraints),
        node_name: spec.node_name.clone().filter(|n| !n.is_empty()),
        terminal: matches!(phase, Some("Succeeded" | "Failed")),
        terminating: meta.deletion_timestamp.is_some(),
        owner_kind,
        owner_name,
        priority: spec.priority.unwrap_or(0),
        deletion_cost: deletion_cost(annotations)?,
        do_not_disrupt: annotations.and_then(|a| a.get(DO_NOT_DISRUPT)).cloned(),
        created: meta.creation_timestamp.as_ref().map(|t| t.0.to_string()),
        started: pod
            .status
            .as_ref()
            .and_then(|s| s.start_time.as_ref())
            .map(|t| t.0.to_string()),
        mirror: annotations.is_some_and(|a| a.contains_key(MIRROR)),
    })
}

/// Converts an apps/v1 DaemonSet to the pod its template creates on every matching node.
pub(crate) fn convert_daemonset(ds: apps::DaemonSet) -> FieldResult<domain::DaemonSet> {
    let namespace = namespace_of(&ds.metadata);
    let name = ds
        .metadata
        .name
        .clone()
        .filter(|n| !n.is_empty())
        .ok_or_else(|| FieldError::new("metadata.name", "missing"))?;
    let template = &ds
        .spec
        .as_ref()
        .ok_or_else(|| FieldError::new("spec", "missing"))?
        .template;
    let spec = template
        .spec
        .as_ref()
        .ok_or_else(|| FieldError::new("spec.template.spec", "missing"))?;
    let labels = template
        .metadata
        .as_ref()
        .and_then(|m| m.labels.clone())
        .unwrap_or_default();
    let pod = constraints(&namespace, &labels, spec, "spec.template.spec")?;
    Ok(domain::DaemonSet {
        namespace,
        name,
        pod,
    })
}

pub(crate) fn namespace_of(meta: &ObjectMeta) -> String {
    meta.namespace
        .clone()
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| "default".to_string())
}

/// Everything placement depends on, from a pod spec at `path` (`spec` or `spec.template.spec`).
pub(crate) fn constraints(
    namespace: &str,
    labels: &Labels,
    spec: &core::PodSpec,
    path: &str,
) -> FieldResult<PodConstraints> {
    let mut c = PodConstraints {
        namespace: namespace.to_string(),
        labels: labels.clone(),
        requests: pod_requests(spec, path)?,
        host_ports: host_ports(spec, path)?,
        ..PodConstraints::default()
    };
    scheduling::apply(&mut c, spec, path)?;
    Ok(c)
}

/// A sidecar is an init container that keeps running beside the app containers.
fn is_sidecar(c: &core::Container) -> bool {
    c.restart_policy.as_deref() == Some("Always")
}

/// The pod's requests as the scheduler computes them: app containers plus sidecars, element-wise at
/// least every init container's peak (a regular init container runs beside the sidecars started
/// before it), pod-level requests when set, plus overhead, plus one pod slot.
fn pod_requests(spec: &core::PodSpec, path: &str) -> FieldResult<Resources> {
    let mut total = Resources::new();
    for (i, c) in spec.containers.iter().enumerate() {
        total.add(&container_requests(c, &format!("{path}.containers[{i}]"))?);
    }
    let mut sidecars = Resources::new();
    let mut init_peak = Resources::new();
    for (i, c) in spec.init_containers.iter().flatten().enumerate() {
        let r = container_requests(c, &format!("{path}.initContainers[{i}]"))?;
        if is_sidecar(c) {
            total.add(&r);
            sidecars.add(&r);
            init_peak.max_with(&sidecars);
        } else {
            init_peak.max_with(&sidecars.plus(&r));
        }
    }
    total.max_with(&init_peak);
    if let Some(pod_level) = &spec.resources {
        // Pod-level resources (KEP 2837) replace the container aggregate for the resources they
        // name.
        for (name, q) in requirements_requests(pod_level, &format!("{path}.resources"))?.iter() {
            total.set(name, q);
        }
    }
    total.add(&api_resources(
        spec.overhead.as_ref(),
        &format!("{path}.overhead"),
    )?);
    total.set(PODS, Quantity::from_units(1));
    Ok(total)
}

fn container_requests(c: &core::Container, path: &str) -> FieldResult<Resources> {
    match &c.resources {
        Some(r) => requirements_requests(r, &format!("{path}.resources")),
        None => Ok(Resources::new()),
    }
}

/// Requests, with a limit standing in for a request that is absent (the API server's defaulting).
fn requirements_requests(r: &core::ResourceRequirements, path: &str) -> FieldResult<Resources> {
    let mut out = api_resources(r.limits.as_ref(), &format!("{path}.limits"))?;
    for (name, q) in api_resources(r.requests.as_ref(), &format!("{path}.requests"))?.iter() {
        out.set(name, q);
    }
    Ok(out)
}

/// Host ports of the app containers and sidecars (regular init containers exit before the pod
/// runs).
fn host_ports(spec: &core::PodSpec, path: &str) -> FieldResult<Vec<HostPort>> {
    let apps = spec
        .containers
        .iter()
        .enumerate()
        .map(|(i, c)| (format!("{path}.containers[{i}]"), c));
    let sidecars = spec
        .init_containers
        .iter()
        .flatten()
        .enumerate()
        .filter(|(_, c)| is_sidecar(c))
        .map(|(i, c)| (format!("{path}.initContainers[{i}]"), c));
    let mut out = Vec::new();
    for (cpath, c) in apps.chain(sidecars) {
        for (j, p) in c.ports.iter().flatten().enumerate() {
            let Some(port) = p.host_port.filter(|&hp| hp != 0) else {
                continue;
            };
            let port = u16::try_from(port).ok().ok_or_else(|| {
                FieldError::new(
                    format!("{cpath}.ports[{j}].hostPort"),
                    format!("host port {port} is out of range"),
                )
            })?;
            out.push(HostPort {
                ip: p.host_ip.clone().unwrap_or_default(),
                port,
                protocol: p
                    .protocol
                    .clone()
                    .filter(|s| !s.is_empty())
                    .unwrap_or_else(|| "TCP".to_string()),
            });
        }
    }
    Ok(out)
}

fn deletion_cost(annotations: Option<&BTreeMap<String, String>>) -> FieldResult<i32> {
    let Some(text) = annotations.and_then(|a| a.get(DELETION_COST)) else {
        return Ok(0);
    };
    text.trim().parse::<i32>().map_err(|_| {
        FieldError::new(
            format!("metadata.annotations[{DELETION_COST:?}]"),
            format!("{text:?} is not a 32-bit integer"),
        )
    })
}

/// The controlling owner (the reference with `controller: true`, else the first one).
fn controller_owner(refs: Option<&[OwnerReference]>) -> (Option<String>, Option<String>) {
    let refs = refs.unwrap_or_default();
    let owner = refs
        .iter()
        .find(|r| r.controller == Some(true))
        .or_else(|| refs.first());
    (owner.map(|o| o.kind.clone()), owner.map(|o| o.name.clone()))
}
