//! NodeClaims as joiner writes and reads them. A planned node becomes a NodeClaim before it
//! launches: its requirements pin the plan's offering plus its fallbacks (type, zone and capacity
//! type, each `In` the set the launch may choose from), its labels and taints come from the
//! NodePool template, and the `karpenter.sh/termination` finalizer guards the instance. After the
//! launch its status records the instance (providerID, capacity, allocatable, Launched). On restart
//! a claim still in flight is read back into the [`NewNode`] the provisioning view counts.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::api::DynamicObject;
use serde_json::{json, Value};

use crate::api::{self, deserialize_conditions, find_condition, NODECLAIM_LAUNCHED};
use crate::catalog::{CapacityType, Catalog};
use crate::cloud::Instance;
use crate::disruption::timing::Timestamp;
use crate::domain::labels::{CAPACITY_TYPE, HOSTNAME, INSTANCE_TYPE, NODEPOOL, ZONE};
use crate::domain::{ClusterSnapshot, NodeClass, Pod, Resources, Taint};
use crate::optimizer::NewNode;

pub use crate::api::{
    DISRUPTED_TAINT, INITIALIZED_LABEL, NODEPOOL_HASH, REGISTERED_LABEL, TERMINATION_FINALIZER,
    UNREGISTERED_TAINT,
};

/// The NodeClaim for a planned node, before launch.
pub fn claim_object(name: &str, node: &NewNode, snapshot: &ClusterSnapshot) -> Value {
    let pods: Vec<&Pod> = snapshot
        .pods
        .iter()
        .filter(|p| node.pods.contains(&p.key()))
        .map(|p| &**p)
        .collect();
    claim_object_for(name, node, snapshot, &pods)
}

/// [`claim_object`] with the node's pods already looked up (callers creating many claims index
/// the snapshot's pods once instead of scanning them per claim).
pub fn claim_object_for(
    name: &str,
    node: &NewNode,
    snapshot: &ClusterSnapshot,
    pods: &[&Pod],
) -> Value {
    let pool = snapshot.nodepools.iter().find(|p| p.name == node.nodepool);
    let mut labels: BTreeMap<String, String> = pool
        .map(|p| p.labels.clone().into_iter().collect())
        .unwrap_or_default();
    labels.insert(NODEPOOL.to_string(), node.nodepool.clone());
    let offerings = std::iter::once((&node.instance_type, &node.zone, node.capacity_type)).chain(
        node.fallbacks
            .iter()
            .map(|o| (&o.instance_type, &o.zone, o.capacity_type)),
    );
    let (mut types, mut zones, mut capacity) = (BTreeSet::new(), BTreeSet::new(), BTreeSet::new());
    for (t, z, c) in offerings {
        types.insert(t.clone());
        zones.insert(z.clone());
        capacity.insert(c.as_str());
    }
    let requirements = json!([
        {"key": NODEPOOL, "operator": "In", "values": [node.nodepool]},
        {"key": INSTANCE_TYPE, "operator": "In", "values": types},
        {"key": ZONE, "operator": "In", "values": zones},
        {"key": CAPACITY_TYPE, "operator": "In", "values": capacity},
    ]);
    let mut annotations = BTreeMap::new();
    if let Some(hash) = pool.and_then(|p| p.hash.clone()) {
        annotations.insert(NODEPOOL_HASH.to_string(), hash);
    }
    let mut spec = json!({
        "requirements": requirements,
        "taints": pool.map(|p| taints(&p.taints)).unwrap_or_default(),
        "startupTaints": pool.map(|p| taints(&p.startup_taints)).unwrap_or_default(),
        "resources": {"requests": requests(pods)},
        "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": pool.and_then(|p| p.node_class.clone()).unwrap_or_default()},
    });
    if let Some(expire) = pool.and_then(|p| p.expire_after.clone()) {
        spec["expireAfter"] = json!(expire);
    }
    // Karpenter copies it from the NodePool: the claim's own value bounds its drain
    if let Some(grace) = pool.and_then(|p| p.termination_grace_period.clone()) {
        spec["terminationGracePeriod"] = json!(grace);
    }
    json!({
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {"name": name, "labels": labels, "annotations": annotations, "finalizers": [TERMINATION_FINALIZER]},
        "spec": spec,
    })
}

/// Pod requests the claim is meant for, summed (Karpenter records them in `spec.resources`).
fn requests(pods: &[&Pod]) -> BTreeMap<String, String> {
    let mut total = Resources::new();
    for p in pods {
        total.add(p.requests());
    }
    total
        .iter()
        .map(|(k, q)| (k.to_string(), q.to_string()))
        .collect()
}

pub fn taints(taints: &[Taint]) -> Vec<Value> {
    taints
        .iter()
        .map(|t| json!({"key": t.key, "value": t.value, "effect": format!("{:?}", t.effect)}))
        .collect()
}

/// The claim's metadata labels and status once its instance runs. The plan's placeholder
/// hostname stays out, as Karpenter leaves it out: the kubelet owns the node's hostname label,
/// and registration copies the claim's labels onto the node.
pub fn launched_patches(
    node: &NewNode,
    instance: &Instance,
    capacity: &Resources,
    now: &Time,
) -> (Value, Value) {
    let labels: BTreeMap<&String, &String> =
        node.labels.iter().filter(|(k, _)| *k != HOSTNAME).collect();
    let labels = json!({"metadata": {"labels": labels}});
    // the EBS attach limit is the CSINode's to report, as the plan's allocatable leaves it out
    let attach = crate::domain::volume::ebs_attach_resource();
    let quantities = |r: &Resources| {
        r.iter()
            .filter(|(k, _)| *k != attach)
            .map(|(k, q)| (k.to_string(), q.to_string()))
            .collect::<BTreeMap<_, _>>()
    };
    let allocatable: BTreeMap<String, String> = node.allocatable.clone();
    let status = json!({"status": {
        "providerID": provider_id(&node.zone, &instance.id),
        "capacity": quantities(capacity),
        "allocatable": allocatable,
    }});
    let mut launched = DynamicObject {
        types: None,
        metadata: Default::default(),
        data: status,
    };
    set_condition(&mut launched, NODECLAIM_LAUNCHED, true, "Launched", "", now);
    (labels, launched.data)
}

pub fn provider_id(zone: &str, instance: &str) -> String {
    format!("aws:///{zone}/{instance}")
}

/// The instance id of an `aws:///zone/i-…` providerID.
pub fn instance_of_provider_id(provider_id: &str) -> Option<&str> {
    provider_id.rsplit('/').next().filter(|s| !s.is_empty())
}

/// An API timestamp for a controller time.
pub fn k8s_time(now: Timestamp) -> Time {
    Time(
        k8s_openapi::jiff::Timestamp::from_millisecond(now.timestamp_millis())
            .unwrap_or(k8s_openapi::jiff::Timestamp::UNIX_EPOCH),
    )
}

/// The object's status conditions, read leniently as the typed CRDs read them.
pub fn conditions_of(o: &DynamicObject) -> Vec<Condition> {
    deserialize_conditions(&o.data["status"]["conditions"]).unwrap_or_default()
}

/// Whether the object's condition `kind` is True.
pub fn has_condition(o: &DynamicObject, kind: &str) -> bool {
    find_condition(&conditions_of(o), kind).is_some_and(|c| c.status == "True")
}

/// Sets condition `kind` in the object's status with the CRDs' rule (the transition time moves
/// only when the status flips); returns whether anything changed.
pub fn set_condition(
    o: &mut DynamicObject,
    kind: &str,
    status: bool,
    reason: &str,
    message: &str,
    now: &Time,
) -> bool {
    let mut list = conditions_of(o);
    let changed = api::set_condition(&mut list, kind, status, reason, message, now.clone());
    if changed {
        o.data["status"]["conditions"] = serde_json::to_value(list).unwrap_or_default();
    }
    changed
}

pub fn provider_id_of(claim: &DynamicObject) -> Option<&str> {
    claim.data["status"]["providerID"]
        .as_str()
        .filter(|s| !s.is_empty())
}

pub fn node_name_of(claim: &DynamicObject) -> Option<&str> {
    claim.data["status"]["nodeName"]
        .as_str()
        .filter(|s| !s.is_empty())
}

/// A claim in flight read back as the node the provisioning view counts: the offering its labels
/// (set at launch) or single-valued requirements name, priced and sized from the catalog and
/// `class`, the EC2NodeClass it launches with (its kubelet settings and volumes).
pub fn planned_node(
    claim: &DynamicObject,
    catalog: &Catalog,
    class: Option<&NodeClass>,
) -> Option<NewNode> {
    let label = |key: &str| -> Option<String> {
        if let Some(v) = claim.metadata.labels.as_ref().and_then(|l| l.get(key)) {
            return Some(v.clone());
        }
        let reqs = claim.data["spec"]["requirements"].as_array()?;
        let r = reqs
            .iter()
            .find(|r| r["key"] == key && r["operator"] == "In")?;
        let values = r["values"].as_array()?;
        (values.len() == 1)
            .then(|| values[0].as_str().map(str::to_string))
            .flatten()
    };
    let instance_type = label(INSTANCE_TYPE)?;
    let zone = label(ZONE)?;
    let capacity_type = CapacityType::parse(&label(CAPACITY_TYPE)?)?;
    let it = catalog
        .instance_types
        .iter()
        .find(|t| t.name == instance_type)?;
    let price = it
        .offerings
        .iter()
        .find(|o| o.zone == zone && o.capacity_type == capacity_type)
        .map(|o| o.price)
        .unwrap_or(0.0);
    let allocatable = it
        .node_allocatable(class)
        .iter()
        .map(|(k, q)| (k.to_string(), q.to_string()))
        .collect();
    Some(NewNode {
        id: claim.metadata.name.clone().unwrap_or_default(),
        nodepool: label(NODEPOOL).unwrap_or_default(),
        instance_type,
        zone,
        capacity_type,
        price,
        labels: claim
            .metadata
            .labels
            .clone()
            .unwrap_or_default()
            .into_iter()
            .collect(),
        allocatable,
        pods: vec![],
        fallbacks: vec![],
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::CapacityType;
    use crate::domain::NodePool;
    use crate::optimizer::OfferingRef;

    fn node() -> NewNode {
        NewNode {
            id: "n0".into(),
            nodepool: "default".into(),
            instance_type: "m5.large".into(),
            zone: "us-east-1a".into(),
            capacity_type: CapacityType::Spot,
            price: 0.04,
            labels: BTreeMap::from([(INSTANCE_TYPE.to_string(), "m5.large".to_string())]),
            allocatable: BTreeMap::from([("cpu".to_string(), "1930m".to_string())]),
            pods: vec![],
            fallbacks: vec![OfferingRef {
                instance_type: "m5a.large".into(),
                zone: "us-east-1b".into(),
                capacity_type: CapacityType::OnDemand,
                price: 0.086,
            }],
        }
    }

    #[test]
    fn a_claim_pins_its_offering_and_fallbacks_and_carries_the_pool_template() {
        let mut snap = ClusterSnapshot::default();
        let mut pool = NodePool::unconstrained("default");
        pool.labels.insert("team".into(), "web".into());
        pool.hash = Some("123".into());
        pool.node_class = Some("default".into());
        pool.termination_grace_period = Some("45m".into());
        snap.nodepools.push(pool);
        let c = claim_object("default-abcde", &node(), &snap);
        assert_eq!(c["spec"]["terminationGracePeriod"], "45m");
        assert_eq!(c["metadata"]["labels"]["team"], "web");
        assert_eq!(c["metadata"]["labels"][NODEPOOL], "default");
        assert_eq!(c["metadata"]["annotations"][NODEPOOL_HASH], "123");
        assert_eq!(c["metadata"]["finalizers"][0], TERMINATION_FINALIZER);
        assert_eq!(c["spec"]["nodeClassRef"]["name"], "default");
        let req = |key: &str| {
            c["spec"]["requirements"]
                .as_array()
                .unwrap()
                .iter()
                .find(|r| r["key"] == key)
                .unwrap()["values"]
                .clone()
        };
        assert_eq!(req(INSTANCE_TYPE), json!(["m5.large", "m5a.large"]));
        assert_eq!(req(ZONE), json!(["us-east-1a", "us-east-1b"]));
        assert_eq!(req(CAPACITY_TYPE), json!(["on-demand", "spot"]));
    }

    #[test]
    fn a_launched_claim_gets_the_offering_labels_but_not_the_plans_placeholder_hostname() {
        let mut n = node();
        n.labels
            .insert(HOSTNAME.to_string(), "joiner-0001".to_string());
        let offering = OfferingRef {
            instance_type: "m5.large".into(),
            zone: "us-east-1a".into(),
            capacity_type: CapacityType::Spot,
            price: 0.04,
        };
        let instance = Instance {
            id: "i-0abc".into(),
            claim: "default-abcde".into(),
            nodepool: "default".into(),
            offering,
            state: crate::cloud::InstanceState::Running,
        };
        let (labels, status) = launched_patches(
            &n,
            &instance,
            &Resources::new(),
            &k8s_time(chrono::DateTime::UNIX_EPOCH),
        );
        assert_eq!(
            labels["metadata"]["labels"],
            json!({INSTANCE_TYPE: "m5.large"})
        );
        assert_eq!(status["status"]["providerID"], "aws:///us-east-1a/i-0abc");
    }

    #[test]
    fn a_claim_in_flight_reads_back_as_the_launched_offering() {
        let catalog = Catalog::bundled("us-east-1").unwrap();
        let mut n = node();
        n.labels.insert(ZONE.into(), "us-east-1a".into());
        n.labels.insert(CAPACITY_TYPE.into(), "spot".into());
        n.labels.insert(NODEPOOL.into(), "default".into());
        let obj = claim_object("default-abcde", &n, &ClusterSnapshot::default());
        let mut claim: DynamicObject = serde_json::from_value(obj).unwrap();
        // before launch the requirements are sets: nothing to read back
        assert!(planned_node(&claim, &catalog, None).is_none());
        claim.metadata.labels = Some(n.labels.clone());
        let back = planned_node(&claim, &catalog, None).unwrap();
        assert_eq!(
            (
                back.instance_type.as_str(),
                back.zone.as_str(),
                back.capacity_type
            ),
            ("m5.large", "us-east-1a", CapacityType::Spot)
        );
        assert!(back.price > 0.0);
        assert_eq!(back.nodepool, "default");
    }

    #[test]
    fn conditions_keep_their_transition_time_while_unchanged() {
        let at = |secs: i64| Time(k8s_openapi::jiff::Timestamp::from_second(secs).unwrap());
        let transition = |o: &DynamicObject| conditions_of(o)[0].last_transition_time.clone();
        let mut claim: DynamicObject = serde_json::from_value(json!({"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "metadata": {"name": "c"}})).unwrap();
        assert!(set_condition(
            &mut claim,
            "Launched",
            true,
            "Launched",
            "",
            &at(1)
        ));
        assert!(has_condition(&claim, "Launched"));
        assert!(!set_condition(
            &mut claim,
            "Launched",
            true,
            "Launched",
            "",
            &at(2)
        ));
        assert_eq!(transition(&claim), at(1));
        assert!(set_condition(
            &mut claim,
            "Launched",
            false,
            "Failed",
            "",
            &at(3)
        ));
        assert_eq!(transition(&claim), at(3));
        assert!(!has_condition(&claim, "Launched"));
        assert_eq!(
            instance_of_provider_id("aws:///us-east-1a/i-0abc"),
            Some("i-0abc")
        );
    }
}
