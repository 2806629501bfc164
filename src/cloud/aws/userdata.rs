//! User data: how a new instance learns which cluster to join, with which labels, taints and
//! kubelet settings. Each AMI family bootstraps differently:
//!
//! - **AL2023** reads `NodeConfig` documents (`application/node.eks.aws`) from a MIME multipart
//!   archive; the user's own parts go first and joiner's NodeConfig last, so nodeadm merges ours
//!   over theirs for the fields joiner owns.
//! - **AL2** runs `/etc/eks/bootstrap.sh` from a shell part after the user's parts.
//! - **Bottlerocket** takes one TOML document: the user's settings with joiner's
//!   `settings.kubernetes` keys written over them.
//! - **Custom** gets the user's user data unchanged; the AMI is expected to bootstrap itself.
//!
//! Windows families are not supported: joiner launches Linux nodes only.

use std::collections::BTreeMap;

use serde_json::json;

use super::AwsError;
use crate::api::{AmiFamily, KubeletConfiguration};
use crate::domain::labels::Taint;

/// Boundary of the MIME archives joiner writes.
const BOUNDARY: &str = "//";

/// What a node needs to join, beside the EC2NodeClass's own user data.
#[derive(Debug, Clone, PartialEq)]
pub struct Bootstrap<'a> {
    pub cluster_name: &'a str,
    pub cluster_endpoint: &'a str,
    /// Base64 PEM bundle of the cluster CA.
    pub ca_bundle: Option<&'a str>,
    /// The Service CIDR (AL2023 derives the cluster DNS address from it).
    pub cluster_cidr: Option<&'a str>,
    pub max_pods: Option<u32>,
    /// Labels the kubelet registers with.
    pub labels: &'a BTreeMap<String, String>,
    /// Taints the kubelet registers with (the NodePool's taints and startup taints).
    pub taints: &'a [Taint],
    pub kubelet: Option<&'a KubeletConfiguration>,
    /// The EC2NodeClass's `spec.userData`.
    pub custom: Option<&'a str>,
}

/// Why an EC2NodeClass's user data cannot be built: its `spec.userData` does not merge with
/// joiner's bootstrap, or its `spec.amiFamily` is not supported.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UserDataError {
    #[error("spec.userData is not valid TOML: {0}")]
    Toml(String),
    #[error("spec.userData: {0} must be a TOML table")]
    NotATable(String),
    #[error("spec.userData: MIME archive without a boundary")]
    NoBoundary,
    #[error("spec.userData: MIME part without a blank line after its headers")]
    NoHeaderEnd,
    #[error("spec.userData: MIME part without a Content-Type")]
    NoContentType,
    #[error("spec.amiFamily: windows nodes are not supported")]
    Windows,
}

/// The user data (plain text; the launch template base64-encodes it) for `family`.
pub fn user_data(nodeclass: &str, family: AmiFamily, b: &Bootstrap) -> Result<String, AwsError> {
    let bad = |source: UserDataError| AwsError::UserData {
        name: nodeclass.to_string(),
        source,
    };
    match family {
        AmiFamily::AL2023 => {
            let mut parts = user_parts(b.custom, true).map_err(bad)?;
            parts.push(("application/node.eks.aws".to_string(), node_config(b)));
            Ok(mime(&parts))
        }
        AmiFamily::AL2 => {
            let mut parts = user_parts(b.custom, false).map_err(bad)?;
            parts.push((
                "text/x-shellscript; charset=\"us-ascii\"".to_string(),
                al2_script(b),
            ));
            Ok(mime(&parts))
        }
        AmiFamily::Bottlerocket => bottlerocket(b).map_err(bad),
        AmiFamily::Custom => Ok(b.custom.unwrap_or_default().to_string()),
        AmiFamily::Windows2019 | AmiFamily::Windows2022 | AmiFamily::Windows2025 => {
            Err(bad(UserDataError::Windows))
        }
    }
}

/// `k=v,k2=v2` for `--node-labels`.
fn label_flag(labels: &BTreeMap<String, String>) -> String {
    labels
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// `k=v:Effect,...` for `--register-with-taints`.
fn taint_flag(taints: &[Taint]) -> String {
    taints
        .iter()
        .map(|t| format!("{}={}:{}", t.key, t.value, t.effect.as_str()))
        .collect::<Vec<_>>()
        .join(",")
}

fn node_config(b: &Bootstrap) -> String {
    let mut kubelet = serde_json::Map::new();
    if let Some(k) = b.kubelet {
        // the EC2NodeClass kubelet block is a KubeletConfiguration subset with the same field names
        if let Ok(serde_json::Value::Object(m)) = serde_json::to_value(k) {
            kubelet.extend(m);
        }
    }
    if let Some(n) = b.max_pods {
        kubelet.insert("maxPods".into(), json!(n));
    }
    if !b.taints.is_empty() {
        let taints: Vec<_> = b
            .taints
            .iter()
            .map(|t| json!({"key": t.key, "value": t.value, "effect": t.effect.as_str()}))
            .collect();
        kubelet.insert("registerWithTaints".into(), json!(taints));
    }
    let mut cluster = json!({"name": b.cluster_name, "apiServerEndpoint": b.cluster_endpoint});
    if let Some(ca) = b.ca_bundle {
        cluster["certificateAuthority"] = json!(ca);
    }
    if let Some(cidr) = b.cluster_cidr {
        cluster["cidr"] = json!(cidr);
    }
    let mut spec = json!({"cluster": cluster, "kubelet": {"config": kubelet}});
    if !b.labels.is_empty() {
        spec["kubelet"]["flags"] = json!([format!("--node-labels={}", label_flag(b.labels))]);
    }
    let doc = json!({"apiVersion": "node.eks.aws/v1alpha1", "kind": "NodeConfig", "spec": spec});
    serde_yaml_ng::to_string(&doc).unwrap_or_default()
}

/// Single-quotes a shell word.
fn sh(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

fn al2_script(b: &Bootstrap) -> String {
    let mut args = vec![format!("--apiserver-endpoint {}", sh(b.cluster_endpoint))];
    if let Some(ca) = b.ca_bundle {
        args.push(format!("--b64-cluster-ca {}", sh(ca)));
    }
    if let Some(dns) = b
        .kubelet
        .and_then(|k| k.cluster_dns.as_ref())
        .and_then(|d| d.first())
    {
        args.push(format!("--dns-cluster-ip {}", sh(dns)));
    }
    let mut extra = vec![];
    if !b.labels.is_empty() {
        extra.push(format!("--node-labels={}", label_flag(b.labels)));
    }
    if !b.taints.is_empty() {
        extra.push(format!("--register-with-taints={}", taint_flag(b.taints)));
    }
    if let Some(n) = b.max_pods {
        // bootstrap.sh would compute its own ENI-based value; joiner's model decided this one
        args.push("--use-max-pods false".into());
        extra.push(format!("--max-pods={n}"));
    }
    if !extra.is_empty() {
        args.push(format!("--kubelet-extra-args {}", sh(&extra.join(" "))));
    }
    format!("#!/bin/bash -xe\nexec > >(tee /var/log/user-data.log|logger -t user-data -s 2>/dev/console) 2>&1\n/etc/eks/bootstrap.sh {} {}\n", sh(b.cluster_name), args.join(" "))
}

fn bottlerocket(b: &Bootstrap) -> Result<String, UserDataError> {
    let mut doc: toml::Table = match b.custom {
        Some(text) if !text.trim().is_empty() => text
            .parse()
            .map_err(|e: toml::de::Error| UserDataError::Toml(e.to_string()))?,
        _ => toml::Table::new(),
    };
    let settings = table(&mut doc, "settings")?;
    let k8s = table(settings, "kubernetes")?;
    k8s.insert("cluster-name".into(), b.cluster_name.into());
    k8s.insert("api-server".into(), b.cluster_endpoint.into());
    if let Some(ca) = b.ca_bundle {
        k8s.insert("cluster-certificate".into(), ca.into());
    }
    if let Some(n) = b.max_pods {
        k8s.insert("max-pods".into(), toml::Value::Integer(n.into()));
    }
    if let Some(dns) = b.kubelet.and_then(|k| k.cluster_dns.as_ref()) {
        k8s.insert(
            "cluster-dns-ip".into(),
            toml::Value::Array(dns.iter().map(|d| d.as_str().into()).collect()),
        );
    }
    let labels = table(k8s, "node-labels")?;
    for (k, v) in b.labels {
        labels.insert(k.clone(), v.as_str().into());
    }
    let mut taints: BTreeMap<&str, Vec<toml::Value>> = BTreeMap::new();
    for t in b.taints {
        taints
            .entry(&t.key)
            .or_default()
            .push(format!("{}:{}", t.value, t.effect.as_str()).into());
    }
    let node_taints = table(k8s, "node-taints")?;
    for (k, v) in taints {
        node_taints.insert(k.to_string(), toml::Value::Array(v));
    }
    Ok(doc.to_string())
}

/// The sub-table `key` of `t`, created when missing.
fn table<'t>(t: &'t mut toml::Table, key: &str) -> Result<&'t mut toml::Table, UserDataError> {
    t.entry(key.to_string())
        .or_insert_with(|| toml::Value::Table(toml::Table::new()))
        .as_table_mut()
        .ok_or_else(|| UserDataError::NotATable(key.to_string()))
}

/// The user's user data as MIME parts: a MIME archive is split into its parts; anything else is
/// one part (a NodeConfig document on AL2023 when it names that kind, else a shell script).
fn user_parts(custom: Option<&str>, al2023: bool) -> Result<Vec<(String, String)>, UserDataError> {
    let Some(text) = custom.filter(|t| !t.trim().is_empty()) else {
        return Ok(vec![]);
    };
    if text.starts_with("MIME-Version:") {
        return split_mime(text);
    }
    let kind = if al2023 && text.contains("kind: NodeConfig") {
        "application/node.eks.aws"
    } else {
        "text/x-shellscript; charset=\"us-ascii\""
    };
    Ok(vec![(kind.to_string(), text.to_string())])
}

fn split_mime(text: &str) -> Result<Vec<(String, String)>, UserDataError> {
    let boundary = text
        .lines()
        .take_while(|l| !l.trim().is_empty())
        .find_map(|l| {
            l.split_once("boundary=")
                .map(|(_, b)| b.trim().trim_matches('"').to_string())
        })
        .ok_or(UserDataError::NoBoundary)?;
    let delimiter = format!("--{boundary}");
    let mut parts = vec![];
    for chunk in text.split(&delimiter).skip(1) {
        if chunk.starts_with("--") {
            break;
        }
        let chunk = chunk.trim_start_matches(['\r', '\n']);
        let (headers, body) = chunk
            .split_once("\n\n")
            .or_else(|| chunk.split_once("\r\n\r\n"))
            .ok_or(UserDataError::NoHeaderEnd)?;
        let kind = headers
            .lines()
            .find_map(|l| {
                l.strip_prefix("Content-Type:")
                    .map(|v| v.trim().to_string())
            })
            .ok_or(UserDataError::NoContentType)?;
        parts.push((kind, body.trim_end().to_string()));
    }
    Ok(parts)
}

fn mime(parts: &[(String, String)]) -> String {
    let mut out =
        format!("MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"{BOUNDARY}\"\n\n");
    for (kind, body) in parts {
        out.push_str(&format!(
            "--{BOUNDARY}\nContent-Type: {kind}\n\n{}\n\n",
            body.trim_end()
        ));
    }
    out.push_str(&format!("--{BOUNDARY}--\n"));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::labels::TaintEffect;

    fn labels() -> BTreeMap<String, String> {
        [
            ("karpenter.sh/nodepool".to_string(), "default".to_string()),
            ("team".to_string(), "a".to_string()),
        ]
        .into()
    }

    fn taints() -> Vec<Taint> {
        vec![Taint {
            key: "karpenter.sh/unregistered".into(),
            value: String::new(),
            effect: TaintEffect::NoExecute,
        }]
    }

    fn bootstrap<'a>(
        labels: &'a BTreeMap<String, String>,
        taints: &'a [Taint],
        custom: Option<&'a str>,
    ) -> Bootstrap<'a> {
        Bootstrap {
            cluster_name: "prod",
            cluster_endpoint: "https://api.example",
            ca_bundle: Some("Q0E="),
            cluster_cidr: Some("10.100.0.0/16"),
            max_pods: Some(58),
            labels,
            taints,
            kubelet: None,
            custom,
        }
    }

    #[test]
    fn al2023_nodeconfig_comes_after_the_users_parts() {
        let (l, t) = (labels(), taints());
        let custom = "apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  kubelet:\n    config:\n      shutdownGracePeriod: 30s\n";
        let text = user_data("nc", AmiFamily::AL2023, &bootstrap(&l, &t, Some(custom)))
            .expect("user data");
        let parts = split_mime(&text).expect("joiner writes valid MIME");
        assert_eq!(parts.len(), 2);
        assert!(parts[0].1.contains("shutdownGracePeriod"));
        let ours: serde_yaml_ng::Value =
            serde_yaml_ng::from_str(&parts[1].1).expect("NodeConfig is YAML");
        assert_eq!(ours["spec"]["cluster"]["name"], "prod");
        assert_eq!(ours["spec"]["cluster"]["cidr"], "10.100.0.0/16");
        assert_eq!(ours["spec"]["kubelet"]["config"]["maxPods"], 58);
        assert_eq!(
            ours["spec"]["kubelet"]["config"]["registerWithTaints"][0]["effect"],
            "NoExecute"
        );
        assert_eq!(
            ours["spec"]["kubelet"]["flags"][0],
            "--node-labels=karpenter.sh/nodepool=default,team=a"
        );
    }

    #[test]
    fn a_users_mime_archive_is_split_into_its_parts() {
        let (l, t) = (labels(), taints());
        let custom = "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"BOUNDARY\"\n\n--BOUNDARY\nContent-Type: text/x-shellscript\n\necho one\n--BOUNDARY\nContent-Type: text/x-shellscript\n\necho two\n--BOUNDARY--\n";
        let text =
            user_data("nc", AmiFamily::AL2, &bootstrap(&l, &t, Some(custom))).expect("user data");
        let parts = split_mime(&text).expect("valid MIME");
        assert_eq!(
            parts
                .iter()
                .map(|p| p.1.lines().last().unwrap_or_default())
                .collect::<Vec<_>>()[..2],
            ["echo one", "echo two"]
        );
        let script = &parts[2].1;
        assert!(script.contains("/etc/eks/bootstrap.sh 'prod' --apiserver-endpoint 'https://api.example' --b64-cluster-ca 'Q0E='"), "{script}");
        assert!(script.contains("--kubelet-extra-args '--node-labels=karpenter.sh/nodepool=default,team=a --register-with-taints=karpenter.sh/unregistered=:NoExecute --max-pods=58'"), "{script}");
    }

    #[test]
    fn bottlerocket_settings_override_the_users_and_keep_the_rest() {
        let (l, t) = (labels(), taints());
        let custom = "[settings.kubernetes]\ncluster-name = \"wrong\"\n[settings.host-containers.admin]\nenabled = true\n";
        let text = user_data(
            "nc",
            AmiFamily::Bottlerocket,
            &bootstrap(&l, &t, Some(custom)),
        )
        .expect("user data");
        let doc: toml::Table = text.parse().expect("TOML");
        let k8s = &doc["settings"]["kubernetes"];
        assert_eq!(k8s["cluster-name"].as_str(), Some("prod"));
        assert_eq!(k8s["max-pods"].as_integer(), Some(58));
        assert_eq!(k8s["node-labels"]["team"].as_str(), Some("a"));
        assert_eq!(
            k8s["node-taints"]["karpenter.sh/unregistered"][0].as_str(),
            Some(":NoExecute")
        );
        assert_eq!(
            doc["settings"]["host-containers"]["admin"]["enabled"].as_bool(),
            Some(true)
        );
    }

    #[test]
    fn bad_user_data_and_windows_are_errors_naming_the_nodeclass() {
        let (l, t) = (labels(), taints());
        let err = user_data(
            "gpu",
            AmiFamily::Bottlerocket,
            &bootstrap(&l, &t, Some("settings = [")),
        )
        .expect_err("not TOML");
        assert!(
            err.to_string()
                .starts_with("ec2nodeclass gpu: spec.userData is not valid TOML"),
            "{err}"
        );
        let err = user_data("win", AmiFamily::Windows2022, &bootstrap(&l, &t, None))
            .expect_err("windows");
        assert!(err.to_string().contains("not supported"));
        assert_eq!(
            user_data(
                "c",
                AmiFamily::Custom,
                &bootstrap(&l, &t, Some("#!/bin/sh\necho hi"))
            )
            .expect("custom"),
            "#!/bin/sh\necho hi"
        );
    }
}
