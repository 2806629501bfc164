//! The attach/detach controller and the CSI external-attacher, run in-process against the store:
//!
//! - **Attach**: a pod bound to an existing Node that is not finished, whose volume is a
//!   PersistentVolumeClaim (or a generic ephemeral volume's claim, `<pod>-<volume>`) bound to a
//!   CSI PersistentVolume, gets a VolumeAttachment for that volume on that node, named as the
//!   real controller names it (`csi-` and the SHA-256 of the volume handle, driver and node), with
//!   `status.attached: true`.
//! - **Detach**: an attachment no such pod needs any more (the pod is gone from the node or
//!   finished, or its Node is gone) is deleted only after the detach delay
//!   (`ApiServer::set_detach_delay`, at first [`DEFAULT_DETACH_DELAY`]): the kubelet unmounts,
//!   the controller waits for that, then EC2 detaches the volume. A pod with a deletionTimestamp
//!   still holds its volume until the kubelet has removed it.
//! - **Stuck**: the attachments of a volume named with `ApiServer::stick_volume` never detach (an
//!   EBS volume stuck in `detaching`, a CSI driver that is down).
//!
//! The external-attacher's finalizer is not modelled: an attachment is deleted in one step.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use super::kubelet::{nodes, pods};
use super::resources::{by_path, ResourceInfo};
use super::select::{FieldSelector, LabelSelector};
use super::store::{obj_name, obj_ns, State, Target};
use super::ApiServer;

/// How long a volume takes to detach once no pod on the node uses it, unless a test sets another.
pub const DEFAULT_DETACH_DELAY: Duration = Duration::from_secs(3);

/// The controller's settings and what it remembers between ticks.
#[derive(Debug)]
pub struct Detacher {
    delay: Duration,
    /// PersistentVolumes whose attachments never detach.
    stuck: BTreeSet<String>,
    /// Attachment name -> when it was first seen unneeded.
    unneeded: BTreeMap<String, DateTime<Utc>>,
}

impl Default for Detacher {
    fn default() -> Self {
        Detacher {
            delay: DEFAULT_DETACH_DELAY,
            stuck: BTreeSet::new(),
            unneeded: BTreeMap::new(),
        }
    }
}

impl ApiServer {
    /// How long a volume takes to detach after the last pod on the node using it is gone.
    pub fn set_detach_delay(&self, delay: Duration) {
        self.shared.attach.lock().expect("attach lock").delay = delay;
    }

    /// Attachments of PersistentVolume `pv` never detach from now on.
    pub fn stick_volume(&self, pv: &str) {
        let mut d = self.shared.attach.lock().expect("attach lock");
        d.stuck.insert(pv.to_string());
    }
}

fn served(group: &str, plural: &str) -> Option<&'static ResourceInfo> {
    by_path(group, "v1", plural)
}

/// One attachment the cluster needs: (PV, node) -> (driver, volume handle).
type Wanted = BTreeMap<(String, String), (String, String)>;

/// One pass at `now`.
pub fn tick(state: &mut State, detacher: &mut Detacher, now: DateTime<Utc>) {
    let (Some(vas), Some(pvcs), Some(pvs)) = (
        served("storage.k8s.io", "volumeattachments"),
        served("", "persistentvolumeclaims"),
        served("", "persistentvolumes"),
    ) else {
        return;
    };
    let wanted = wanted(state, pvcs, pvs);
    let all = FieldSelector::default();
    let existing = state.select(vas, None, &LabelSelector::default(), &all);
    let mut have = BTreeSet::new();
    for va in &existing {
        let pv = va["spec"]["source"]["persistentVolumeName"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let node = va["spec"]["nodeName"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let name = obj_name(va).to_string();
        if wanted.contains_key(&(pv.clone(), node.clone())) {
            detacher.unneeded.remove(&name);
            have.insert((pv, node));
            continue;
        }
        if detacher.stuck.contains(&pv) {
            continue;
        }
        let since = *detacher.unneeded.entry(name.clone()).or_insert(now);
        let due = chrono::Duration::from_std(detacher.delay).unwrap_or(chrono::Duration::MAX);
        if now - since >= due {
            let _ = state.delete(vas, "", &name, &json!({}));
            detacher.unneeded.remove(&name);
        }
    }
    for ((pv, node), (driver, handle)) in wanted {
        if !have.contains(&(pv.clone(), node.clone())) {
            attach(state, vas, &pv, &node, &driver, &handle);
        }
    }
}

/// The (volume, node) pairs bound, unfinished pods on existing nodes use.
fn wanted(state: &State, pvcs: &'static ResourceInfo, pvs: &'static ResourceInfo) -> Wanted {
    let all = FieldSelector::default();
    let any = LabelSelector::default();
    let existing: BTreeSet<String> = state
        .select(nodes(), None, &any, &all)
        .iter()
        .map(|n| obj_name(n).to_string())
        .collect();
    let mut out = Wanted::new();
    for pod in state.select(pods(), None, &any, &all) {
        let node = pod["spec"]["nodeName"].as_str().unwrap_or_default();
        let finished = matches!(
            pod["status"]["phase"].as_str(),
            Some("Succeeded" | "Failed")
        );
        if node.is_empty() || finished || !existing.contains(node) {
            continue;
        }
        for claim in claim_names(&pod) {
            let Ok(pvc) = state.get(pvcs, obj_ns(&pod), &claim) else {
                continue;
            };
            let Some(pv) = pvc["spec"]["volumeName"].as_str().filter(|v| !v.is_empty()) else {
                continue;
            };
            let Ok(volume) = state.get(pvs, "", pv) else {
                continue;
            };
            let csi = &volume["spec"]["csi"];
            if let (Some(driver), Some(handle)) =
                (csi["driver"].as_str(), csi["volumeHandle"].as_str())
            {
                out.insert(
                    (pv.to_string(), node.to_string()),
                    (driver.to_string(), handle.to_string()),
                );
            }
        }
    }
    out
}

fn claim_names(pod: &Value) -> Vec<String> {
    let name = obj_name(pod);
    pod["spec"]["volumes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| {
            if let Some(c) = v["persistentVolumeClaim"]["claimName"].as_str() {
                return Some(c.to_string());
            }
            v["ephemeral"]
                .is_object()
                .then(|| format!("{name}-{}", v["name"].as_str().unwrap_or_default()))
        })
        .collect()
}

/// Creates the attachment and marks it attached (the external-attacher's status write).
fn attach(
    state: &mut State,
    vas: &'static ResourceInfo,
    pv: &str,
    node: &str,
    driver: &str,
    handle: &str,
) {
    let digest = Sha256::digest(format!("{handle}{driver}{node}").as_bytes());
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    let name = format!("csi-{hex}");
    let va = json!({
        "apiVersion": "storage.k8s.io/v1", "kind": "VolumeAttachment",
        "metadata": {"name": name},
        "spec": {"attacher": driver, "nodeName": node, "source": {"persistentVolumeName": pv}},
    });
    let Ok(mut created) = state.create(vas, "", va) else {
        return;
    };
    created["status"] = json!({"attached": true});
    let _ = state.update(vas, "", &name, created, Target::Status);
}
