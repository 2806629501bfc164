//! Kubernetes RBAC as the authorizer applies it, over the rules of a rendered Helm chart: which
//! requests of the test API server's log a ServiceAccount's ClusterRoles and Roles allow, and
//! which granted permissions no request used.
#![allow(dead_code)]

use std::collections::BTreeSet;

use serde_json::Value;

use super::apiserver::RequestRecord;

/// One PolicyRule, with the namespace it applies in (`None`: every namespace and cluster scope).
#[derive(Debug, Clone)]
pub struct Rule {
    pub namespace: Option<String>,
    pub groups: Vec<String>,
    pub resources: Vec<String>,
    pub verbs: Vec<String>,
    pub names: Vec<String>,
}

/// A permission a rule grants: (namespace or "*", group, resource[/subresource], verb, name or "*").
pub type Grant = (String, String, String, String, String);

/// The rules bound to one ServiceAccount.
#[derive(Debug, Default)]
pub struct Rbac {
    pub rules: Vec<Rule>,
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s.as_str().map(String::from))
        .collect()
}

fn binds(binding: &Value, account: &str, namespace: &str) -> bool {
    binding["subjects"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|s| {
            s["kind"] == "ServiceAccount" && s["name"] == account && s["namespace"] == namespace
        })
}

impl Rbac {
    /// The rules the rendered `objects` grant to ServiceAccount `account` in `namespace`, through
    /// ClusterRoleBindings (cluster-wide) and RoleBindings (their own namespace).
    pub fn bound(objects: &[Value], account: &str, namespace: &str) -> Rbac {
        fn of_kind<'a>(objects: &'a [Value], kind: &'a str) -> impl Iterator<Item = &'a Value> {
            objects.iter().filter(move |o| o["kind"] == kind)
        }
        let role_rules = |kind: &str, name: &Value, ns: Option<&Value>| -> Vec<Value> {
            of_kind(objects, kind)
                .filter(|r| {
                    r["metadata"]["name"] == *name
                        && ns.is_none_or(|n| r["metadata"]["namespace"] == *n)
                })
                .flat_map(|r| r["rules"].as_array().cloned().unwrap_or_default())
                .collect()
        };
        let mut rules = vec![];
        for b in of_kind(objects, "ClusterRoleBinding").filter(|b| binds(b, account, namespace)) {
            for r in role_rules("ClusterRole", &b["roleRef"]["name"], None) {
                rules.push(Rule::of(&r, None));
            }
        }
        for b in of_kind(objects, "RoleBinding").filter(|b| binds(b, account, namespace)) {
            let ns = b["metadata"]["namespace"]
                .as_str()
                .unwrap_or(namespace)
                .to_string();
            let refers = if b["roleRef"]["kind"] == "ClusterRole" {
                "ClusterRole"
            } else {
                "Role"
            };
            let scope = (refers == "Role").then(|| Value::String(ns.clone()));
            for r in role_rules(refers, &b["roleRef"]["name"], scope.as_ref()) {
                rules.push(Rule::of(&r, Some(ns.clone())));
            }
        }
        Rbac { rules }
    }

    /// Whether some rule allows the request, as the RBAC authorizer decides.
    pub fn allows(&self, r: &RequestRecord) -> bool {
        self.rules.iter().any(|rule| rule.allows(r))
    }

    /// Every permission the rules grant that no request in `log` used.
    pub fn unused(&self, log: &[RequestRecord]) -> BTreeSet<Grant> {
        let mut out = BTreeSet::new();
        for rule in &self.rules {
            for grant in rule.grants() {
                if !log.iter().any(|r| grant_covers(&grant, r)) {
                    out.insert(grant);
                }
            }
        }
        out
    }
}

/// (group, resource[/subresource]) of a request: the log names resources `plural.group`.
pub fn group_resource(r: &RequestRecord) -> (String, String) {
    let (plural, group) = r
        .resource
        .split_once('.')
        .unwrap_or((r.resource.as_str(), ""));
    let resource = match &r.subresource {
        Some(sub) => format!("{plural}/{sub}"),
        None => plural.to_string(),
    };
    (group.to_string(), resource)
}

fn grant_covers(g: &Grant, r: &RequestRecord) -> bool {
    let (group, resource) = group_resource(r);
    let any = |want: &str, have: &str| want == "*" || want == have;
    any(&g.0, r.namespace.as_deref().unwrap_or(""))
        && any(&g.1, &group)
        && any(&g.2, &resource)
        && any(&g.3, &r.verb)
        && any(&g.4, r.name.as_deref().unwrap_or(""))
}

impl Rule {
    fn of(v: &Value, namespace: Option<String>) -> Rule {
        Rule {
            namespace,
            groups: strings(&v["apiGroups"]),
            resources: strings(&v["resources"]),
            verbs: strings(&v["verbs"]),
            names: strings(&v["resourceNames"]),
        }
    }

    fn allows(&self, r: &RequestRecord) -> bool {
        let (group, resource) = group_resource(r);
        let has = |list: &[String], x: &str| list.iter().any(|v| v == "*" || v == x);
        let in_scope = match &self.namespace {
            None => true,
            Some(ns) => r.namespace.as_deref() == Some(ns.as_str()),
        };
        // resourceNames cannot restrict create, nor list/watch without a name
        let named = self.names.is_empty()
            || r.name
                .as_deref()
                .is_some_and(|n| self.names.iter().any(|x| x == n));
        in_scope
            && has(&self.groups, &group)
            && has(&self.resources, &resource)
            && has(&self.verbs, &r.verb)
            && named
    }

    fn grants(&self) -> Vec<Grant> {
        let ns = self.namespace.clone().unwrap_or_else(|| "*".into());
        let names = if self.names.is_empty() {
            vec!["*".to_string()]
        } else {
            self.names.clone()
        };
        let mut out = vec![];
        for g in &self.groups {
            for res in &self.resources {
                for v in &self.verbs {
                    for n in &names {
                        out.push((ns.clone(), g.clone(), res.clone(), v.clone(), n.clone()));
                    }
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn request(
        verb: &str,
        resource: &str,
        sub: Option<&str>,
        ns: Option<&str>,
        name: Option<&str>,
    ) -> RequestRecord {
        RequestRecord {
            method: "GET".into(),
            verb: verb.into(),
            resource: resource.into(),
            subresource: sub.map(String::from),
            namespace: ns.map(String::from),
            name: name.map(String::from),
            user: None,
        }
    }

    fn objects() -> Vec<Value> {
        vec![
            json!({"kind": "ClusterRole", "metadata": {"name": "c"}, "rules": [
                {"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "watch"]},
                {"apiGroups": [""], "resources": ["pods/eviction"], "verbs": ["create"]},
            ]}),
            json!({"kind": "ClusterRoleBinding", "metadata": {"name": "c"}, "roleRef": {"kind": "ClusterRole", "name": "c"}, "subjects": [{"kind": "ServiceAccount", "name": "sa", "namespace": "ns"}]}),
            json!({"kind": "Role", "metadata": {"name": "r", "namespace": "ns"}, "rules": [
                {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get", "update"], "resourceNames": ["lock"]},
            ]}),
            json!({"kind": "RoleBinding", "metadata": {"name": "r", "namespace": "ns"}, "roleRef": {"kind": "Role", "name": "r"}, "subjects": [{"kind": "ServiceAccount", "name": "sa", "namespace": "ns"}]}),
            json!({"kind": "ClusterRoleBinding", "metadata": {"name": "other"}, "roleRef": {"kind": "ClusterRole", "name": "c"}, "subjects": [{"kind": "ServiceAccount", "name": "else", "namespace": "ns"}]}),
        ]
    }

    #[test]
    fn rules_apply_by_group_resource_verb_namespace_and_name() {
        let rbac = Rbac::bound(&objects(), "sa", "ns");
        assert!(rbac.allows(&request("list", "pods", None, Some("default"), None)));
        assert!(!rbac.allows(&request("delete", "pods", None, Some("default"), Some("p"))));
        assert!(rbac.allows(&request(
            "create",
            "pods",
            Some("eviction"),
            Some("default"),
            Some("p")
        )));
        assert!(!rbac.allows(&request(
            "create",
            "pods",
            Some("status"),
            Some("default"),
            Some("p")
        )));
        assert!(rbac.allows(&request(
            "get",
            "leases.coordination.k8s.io",
            None,
            Some("ns"),
            Some("lock")
        )));
        assert!(
            !rbac.allows(&request(
                "get",
                "leases.coordination.k8s.io",
                None,
                Some("other"),
                Some("lock")
            )),
            "a Role is its namespace's only"
        );
        assert!(
            !rbac.allows(&request(
                "get",
                "leases.coordination.k8s.io",
                None,
                Some("ns"),
                Some("another")
            )),
            "resourceNames restrict"
        );
        assert!(
            !rbac.allows(&request(
                "create",
                "leases.coordination.k8s.io",
                None,
                Some("ns"),
                None
            )),
            "create cannot match resourceNames"
        );
    }

    #[test]
    fn grants_no_request_used_are_reported() {
        let rbac = Rbac::bound(&objects(), "sa", "ns");
        let log = [
            request("list", "pods", None, Some("a"), None),
            request(
                "get",
                "leases.coordination.k8s.io",
                None,
                Some("ns"),
                Some("lock"),
            ),
        ];
        let unused: Vec<String> = rbac
            .unused(&log)
            .into_iter()
            .map(|g| format!("{} {} {}", g.1, g.2, g.3))
            .collect();
        assert_eq!(
            unused,
            [
                " pods watch",
                " pods/eviction create",
                "coordination.k8s.io leases update"
            ]
        );
    }
}
