//! Discovery documents (`/api`, `/api/v1`, `/apis`, `/apis/{group}`, `/apis/{group}/{version}`)
//! and `/version`, built from the resource table.

use serde_json::{json, Value};

use super::resources::{groups, RESOURCES};

const VERBS: [&str; 8] = [
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

/// The document served at a discovery path, `None` if the path is not one.
pub fn document(segments: &[&str], server_address: &str) -> Option<Value> {
    match segments {
        ["api"] => Some(json!({
            "kind": "APIVersions", "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}],
        })),
        ["api", "v1"] => Some(resource_list("", "v1")),
        ["apis"] => Some(json!({
            "kind": "APIGroupList", "apiVersion": "v1",
            "groups": groups().into_iter().map(|(g, v)| group(g, v)).collect::<Vec<_>>(),
        })),
        ["apis", g] => groups()
            .into_iter()
            .find(|(name, _)| name == g)
            .map(|(g, v)| group(g, v)),
        ["apis", g, v] if groups().contains(&(*g, *v)) => Some(resource_list(g, v)),
        _ => None,
    }
}

pub fn version() -> Value {
    json!({
        "major": "1", "minor": "33", "gitVersion": "v1.33.0-joiner-test", "gitCommit": "",
        "gitTreeState": "clean", "buildDate": "2025-04-23T00:00:00Z", "goVersion": "go1.24.0",
        "compiler": "gc", "platform": "linux/amd64",
    })
}

fn group(name: &str, version: &str) -> Value {
    let gv = json!({"groupVersion": format!("{name}/{version}"), "version": version});
    json!({"kind": "APIGroup", "apiVersion": "v1", "name": name, "versions": [gv.clone()], "preferredVersion": gv})
}

fn resource_list(group: &str, version: &str) -> Value {
    let mut resources = Vec::new();
    for r in RESOURCES
        .iter()
        .filter(|r| r.group == group && r.version == version)
    {
        resources.push(json!({
            "name": r.plural, "singularName": r.singular, "namespaced": r.namespaced,
            "kind": r.kind, "verbs": VERBS,
        }));
        if r.status_subresource {
            resources.push(json!({
                "name": format!("{}/status", r.plural), "singularName": "", "namespaced": r.namespaced,
                "kind": r.kind, "verbs": ["get", "patch", "update"],
            }));
        }
        if r.is_pod() {
            resources.push(json!({
                "name": "pods/eviction", "singularName": "", "namespaced": true, "group": "policy",
                "version": "v1", "kind": "Eviction", "verbs": ["create"],
            }));
        }
    }
    let gv = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources})
}
