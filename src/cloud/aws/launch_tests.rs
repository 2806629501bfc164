use super::*;
use crate::api::SecurityGroup;
use crate::catalog::{Arch, InstanceType};
use crate::cloud::aws::nodeclass::{ResolvedAmi, ResolvedSubnet};
use crate::cloud::NodeTemplate;

fn nodeclass() -> ResolvedNodeClass {
    let spec = serde_json::from_value(serde_json::json!({
        "subnetSelectorTerms": [{"tags": {"k": "v"}}], "securityGroupSelectorTerms": [{"tags": {"k": "v"}}],
        "amiSelectorTerms": [{"alias": "al2023@latest"}], "instanceProfile": "nodes", "tags": {"team": "a"},
    }))
    .expect("spec");
    let subnet = |id: &str, zone: &str, free: i64| ResolvedSubnet {
        id: id.into(),
        zone: zone.into(),
        zone_id: None,
        free_ips: free,
    };
    let ami = |id: &str, arch: Arch| ResolvedAmi {
        id: id.into(),
        name: None,
        arch,
        created: "2026-01-01".into(),
        deprecated: false,
    };
    ResolvedNodeClass {
        name: "default".into(),
        family: AmiFamily::AL2023,
        subnets: vec![
            subnet("subnet-a1", "us-east-1a", 10),
            subnet("subnet-a2", "us-east-1a", 200),
            subnet("subnet-b", "us-east-1b", 50),
        ],
        security_groups: vec![SecurityGroup {
            id: "sg-1".into(),
            name: None,
        }],
        amis: vec![ami("ami-x86", Arch::Amd64), ami("ami-arm", Arch::Arm64)],
        instance_profile: "nodes".into(),
        spec,
    }
}

fn catalog() -> Catalog {
    let mut m5 = InstanceType::new("m5.large", 2, 8192, Arch::Amd64);
    m5.max_pods = Some(29);
    let mut m6g = InstanceType::new("m6g.large", 2, 8192, Arch::Arm64);
    m6g.max_pods = Some(29);
    let mut c5 = InstanceType::new("c5.xlarge", 4, 8192, Arch::Amd64);
    c5.max_pods = Some(58);
    Catalog {
        region: "us-east-1".into(),
        instance_types: vec![m5, m6g, c5],
        provenance: None,
    }
}

fn offering(t: &str, zone: &str, c: CapacityType) -> OfferingRef {
    OfferingRef {
        instance_type: t.into(),
        zone: zone.into(),
        capacity_type: c,
        price: 0.1,
    }
}

fn request(offerings: Vec<OfferingRef>) -> LaunchRequest {
    LaunchRequest {
        claim: "default-abcde".into(),
        nodepool: "default".into(),
        offerings,
        template: NodeTemplate {
            node_class: Some("default".into()),
            ..Default::default()
        },
    }
}

#[test]
fn offerings_split_into_fleets_by_capacity_type_and_templates_by_options() {
    let settings = AwsSettings::new("us-east-1", "prod", "https://api");
    let req = request(vec![
        offering("m5.large", "us-east-1a", CapacityType::Spot),
        offering("m6g.large", "us-east-1b", CapacityType::Spot),
        offering("m5.large", "us-east-1b", CapacityType::Spot),
        offering("m5.large", "us-east-1a", CapacityType::OnDemand),
        offering("m5.large", "us-east-1c", CapacityType::OnDemand),
        offering("c5.xlarge", "us-east-1a", CapacityType::OnDemand),
    ]);
    let fleets = plan_fleets(&settings, &nodeclass(), &catalog(), &req).expect("plan");
    assert_eq!(
        fleets.iter().map(|f| f.capacity_type).collect::<Vec<_>>(),
        [CapacityType::Spot, CapacityType::OnDemand]
    );
    let spot = &fleets[0];
    assert_eq!(
        spot.groups.len(),
        2,
        "arm64 boots another AMI, so another template"
    );
    assert_eq!(spot.groups[0].options.image_id, "ami-x86");
    let first: Vec<_> = spot.groups[0]
        .overrides
        .iter()
        .map(|(o, s)| (o.zone.as_str(), s.as_str()))
        .collect();
    assert_eq!(
        first,
        [("us-east-1a", "subnet-a2"), ("us-east-1b", "subnet-b")],
        "the subnet with the most free addresses"
    );
    assert_eq!(spot.groups[1].options.image_id, "ami-arm");
    let od = &fleets[1];
    assert_eq!(
        od.skipped,
        vec![OfferingKey {
            instance_type: "m5.large".into(),
            zone: "us-east-1c".into(),
            capacity_type: CapacityType::OnDemand
        }],
        "no subnet in 1c"
    );
    assert_eq!(od.groups.len(), 2, "58 pods is other user data than 29");
}

#[test]
fn template_names_follow_the_options() {
    let settings = AwsSettings::new("us-east-1", "prod", "https://api");
    let req = request(vec![offering(
        "m5.large",
        "us-east-1a",
        CapacityType::OnDemand,
    )]);
    let a = plan_fleets(&settings, &nodeclass(), &catalog(), &req).expect("plan")[0].groups[0]
        .options
        .clone();
    let b = plan_fleets(&settings, &nodeclass(), &catalog(), &req).expect("plan")[0].groups[0]
        .options
        .clone();
    assert_eq!(a.name("prod"), b.name("prod"));
    assert!(
        a.name("prod").starts_with("joiner/prod/")
            && a.name("prod").len() == "joiner/prod/".len() + 16
    );
    let mut nc = nodeclass();
    nc.spec.detailed_monitoring = Some(true);
    let c = plan_fleets(&settings, &nc, &catalog(), &req).expect("plan")[0].groups[0]
        .options
        .clone();
    assert_ne!(a.name("prod"), c.name("prod"));
    let text = String::from_utf8(
        base64::engine::general_purpose::STANDARD
            .decode(&a.user_data)
            .expect("base64"),
    )
    .expect("utf-8");
    assert!(
        text.contains("maxPods: 29") && text.contains("karpenter.sh/unregistered"),
        "{text}"
    );
    assert_eq!(a.block_devices, default_block_devices(AmiFamily::AL2023));
    assert_eq!(a.tags.get("team").map(String::as_str), Some("a"));
}

#[test]
fn a_resolution_that_only_moves_free_addresses_keeps_its_templates() {
    let settings = AwsSettings::new("us-east-1", "prod", "https://api");
    let req = request(vec![offering(
        "m5.large",
        "us-east-1a",
        CapacityType::OnDemand,
    )]);
    let name = |nc: &ResolvedNodeClass| {
        plan_fleets(&settings, nc, &catalog(), &req).expect("plan")[0].groups[0]
            .options
            .name("prod")
    };
    let before = nodeclass();
    let mut after = nodeclass();
    after.subnets[1].free_ips -= 1;
    assert!(
        before.same_templates(&after),
        "free addresses go into overrides, not templates"
    );
    assert_eq!(name(&before), name(&after));
    let mut new_ami = nodeclass();
    new_ami.amis[0].id = "ami-x86-2".into();
    assert!(!before.same_templates(&new_ami));
    assert_ne!(name(&before), name(&new_ami));
}

#[test]
fn restricted_labels_are_left_to_registration() {
    assert!(kubelet_may_set("team"));
    assert!(kubelet_may_set("karpenter.sh/nodepool"));
    assert!(kubelet_may_set("node.kubernetes.io/instance-type"));
    assert!(!kubelet_may_set("kubernetes.io/role"));
    assert!(!kubelet_may_set("node-role.kubernetes.io/worker"));
}

#[test]
fn volume_sizes_become_whole_gib() {
    assert_eq!(volume_gib("20Gi"), Some(20));
    assert_eq!(volume_gib("100G"), Some(94));
    assert_eq!(volume_gib("1Ti"), Some(1024));
    assert_eq!(volume_gib("huge"), None);
}
