//! The check accepts real plans of bundled scenarios and rejects each of them corrupted one rule at
//! a time, naming the rule.

use std::time::Duration;

use super::{verify, FallbackProblem, Violation};
use crate::catalog::Catalog;
use crate::domain::ClusterSnapshot;
use crate::optimizer::plan::{ExistingPlacement, NewNode};
use crate::optimizer::{Plan, SolveSettings, Strategy};

macro_rules! scenario {
    ($name:literal) => {
        (
            $name,
            include_str!(concat!("../../fixtures/scenarios/", $name, ".yaml")),
        )
    };
}

const TEST_F0: &str = include_str!("../../fixtures/catalogs/test-f0.json");
const TEST_M1: &str = include_str!("../../fixtures/catalogs/test-m1.json");

/// A scenario, its catalog and the greedy baseline's plan for it, which the check accepts.
fn solved((name, text): (&str, &str), catalog: &str) -> (ClusterSnapshot, Catalog, Plan) {
    let snapshot = crate::snapshot::parse_snapshot(text, name).expect("scenario parses");
    let catalog = Catalog::from_json(catalog, "catalog").expect("catalog parses");
    let settings = SolveSettings {
        strategy: Strategy::Greedy,
        time_limit: Duration::from_secs(10),
        ..SolveSettings::default()
    };
    let plan = crate::optimizer::solve(&snapshot, &catalog, &settings).expect("solves");
    if let Err(v) = verify(&snapshot, &catalog, &plan) {
        panic!("{name}: the uncorrupted plan is rejected: {v:#?}");
    }
    (snapshot, catalog, plan)
}

/// The corrupted plan is rejected, and one of the violations is the expected one.
fn rejects(
    (snapshot, catalog, plan): &(ClusterSnapshot, Catalog, Plan),
    expected: impl Fn(&Violation) -> bool,
) -> Vec<Violation> {
    match verify(snapshot, catalog, plan) {
        Ok(()) => panic!("the corrupted plan is accepted:\n{plan:#?}"),
        Err(v) => {
            assert!(v.iter().any(expected), "not the expected violation: {v:#?}");
            v
        }
    }
}

fn take(node: &mut NewNode, pod: &str) {
    let before = node.pods.len();
    node.pods.retain(|p| p != pod);
    assert_eq!(node.pods.len() + 1, before, "{pod} is not on {}", node.id);
}

fn node_with<'p>(plan: &'p mut Plan, pod: &str) -> &'p mut NewNode {
    plan.nodes
        .iter_mut()
        .find(|n| n.pods.iter().any(|p| p == pod))
        .unwrap_or_else(|| panic!("{pod} is on no new node"))
}

/// Moves `pod` from its new node to new node `to`.
fn move_pod(plan: &mut Plan, pod: &str, to: usize) {
    take(node_with(plan, pod), pod);
    plan.nodes[to].pods.push(pod.to_string());
}

/// A copy of new node `i` under another id, without pods, with the plan's cost updated.
fn add_copy(plan: &mut Plan, i: usize) {
    let mut copy = plan.nodes[i].clone();
    copy.id = "joiner-extra".into();
    copy.labels
        .insert("kubernetes.io/hostname".into(), copy.id.clone());
    copy.pods.clear();
    plan.cost_per_hour += copy.price;
    plan.objective += copy.price;
    plan.nodes.push(copy);
}

#[test]
fn real_plans_of_bundled_scenarios_are_accepted() {
    for s in [
        scenario!("zone-spread"),
        scenario!("zone-spread-counts-running-pods"),
        scenario!("hostname-anti-affinity"),
        scenario!("hostname-spread"),
        scenario!("gpu-pods"),
        scenario!("daemonset-overhead"),
        scenario!("daemonset-host-port"),
        scenario!("existing-node-room-first"),
        scenario!("nodepool-cpu-limit"),
        scenario!("zone-self-affinity"),
    ] {
        solved(s, TEST_F0);
    }
    solved(scenario!("min-values"), TEST_M1);
}

#[test]
fn a_pod_moved_to_a_zone_it_does_not_select_is_rejected() {
    let mut w = solved(scenario!("nodepool-zone-requirement"), TEST_F0);
    let pod = "default/wants-zone-1";
    w.2.unschedulable.retain(|u| u.pod != pod);
    w.2.nodes[0].pods.push(pod.into());
    let node = w.2.nodes[0].id.clone();
    rejects(&w, |v| {
        *v == Violation::NodeSelector {
            pod: pod.into(),
            node: node.clone(),
        }
    });
}

#[test]
fn a_node_in_a_zone_its_nodepool_excludes_is_rejected() {
    let mut w = solved(scenario!("nodepool-zone-requirement"), TEST_F0);
    w.2.nodes[0].zone = "test-zone-1".into();
    rejects(&w, |v| matches!(v, Violation::NodePoolRequirement { .. }));
}

#[test]
fn an_overfilled_new_node_is_rejected() {
    // two GPU nodes hold the three train pods 2 + 1; the third on the full one needs a third GPU
    let mut w = solved(scenario!("gpu-pods"), TEST_F0);
    let full =
        w.2.nodes
            .iter()
            .position(|n| n.pods.len() == 2 && n.nodepool == "gpu");
    let full = full.expect("a gpu node with two pods");
    let lone =
        w.2.nodes
            .iter()
            .position(|n| n.pods.len() == 1 && n.nodepool == "gpu");
    let pod = w.2.nodes[lone.expect("a gpu node with one pod")].pods[0].clone();
    move_pod(&mut w.2, &pod, full);
    let node = w.2.nodes[full].id.clone();
    rejects(&w, |v| {
        matches!(v, Violation::Overcommitted { node: n, resource, .. }
            if *n == node && resource == "nvidia.com/gpu")
    });
}

#[test]
fn an_overfilled_existing_node_is_rejected() {
    // the running node has room for two of the three api pods; the plan puts the third on a new
    // node
    let mut w = solved(scenario!("existing-node-room-first"), TEST_F0);
    let node = "ip-10-0-1-10.test";
    let pod = w.2.nodes[0].pods[0].clone();
    w.2.nodes[0].pods.clear();
    let e = w.2.existing.iter_mut().find(|e| e.node == node);
    e.expect("pods bound to the running node").pods.push(pod);
    rejects(
        &w,
        |v| matches!(v, Violation::Overcommitted { node: n, .. } if n == node),
    );
}

#[test]
fn pods_on_a_cordoned_node_are_rejected() {
    let mut w = solved(scenario!("existing-node-room-first"), TEST_F0);
    let pod = w.2.nodes[0].pods.pop().expect("a pod on the new node");
    w.2.existing.push(ExistingPlacement {
        node: "ip-10-0-1-11.test".into(),
        pods: vec![pod],
    });
    rejects(
        &w,
        |v| matches!(v, Violation::Cordoned { node } if node == "ip-10-0-1-11.test"),
    );
}

#[test]
fn a_broken_zone_spread_is_rejected() {
    // pods per zone {1, 1, 2}: moving a lone pod onto the pair makes {0, 1, 3}
    let mut w = solved(scenario!("zone-spread"), TEST_F0);
    let pair = w.2.nodes.iter().position(|n| n.pods.len() == 2);
    let pair = pair.expect("a node with two pods");
    let lone = w.2.nodes.iter().find(|n| n.pods.len() == 1);
    let pod = lone.expect("a node with one pod").pods[0].clone();
    move_pod(&mut w.2, &pod, pair);
    rejects(&w, |v| {
        matches!(v, Violation::Spread { key, count: 3, min: 0, max_skew: 1, .. }
            if key == "topology.kubernetes.io/zone")
    });
}

#[test]
fn a_broken_hostname_spread_is_rejected() {
    let mut w = solved(scenario!("hostname-spread"), TEST_F0);
    let pod = w.2.nodes[1].pods[0].clone();
    move_pod(&mut w.2, &pod, 0);
    rejects(
        &w,
        |v| matches!(v, Violation::Spread { key, .. } if key == "kubernetes.io/hostname"),
    );
}

#[test]
fn two_anti_affine_pods_on_one_node_are_rejected() {
    let mut w = solved(scenario!("hostname-anti-affinity"), TEST_F0);
    let to = node_index(&w.2, "default/db-0");
    move_pod(&mut w.2, "default/db-1", to);
    rejects(&w, |v| {
        matches!(v, Violation::AntiAffinity { pod, other, .. }
            if pod.starts_with("default/db-") && other.starts_with("default/db-"))
    });
}

#[test]
fn a_pod_away_from_its_required_affinity_group_is_rejected() {
    // the etcd pods must share one zone: one of them on a node in another zone is cut off
    let mut w = solved(scenario!("zone-self-affinity"), TEST_F0);
    add_copy(&mut w.2, 0);
    let copy = w.2.nodes.len() - 1;
    let n = &mut w.2.nodes[copy];
    let zone = if n.zone == "test-zone-1" {
        "test-zone-2"
    } else {
        "test-zone-1"
    };
    n.zone = zone.into();
    n.labels
        .insert("topology.kubernetes.io/zone".into(), zone.into());
    n.fallbacks.clear();
    let pod = w.2.nodes[0].pods[0].clone();
    move_pod(&mut w.2, &pod, copy);
    rejects(
        &w,
        |v| matches!(v, Violation::Affinity { pod: p, .. } if *p == pod),
    );
}

#[test]
fn a_wrong_price_is_rejected() {
    let mut w = solved(scenario!("zone-spread"), TEST_F0);
    w.2.nodes[0].price += 0.1;
    w.2.cost_per_hour += 0.1;
    let v = rejects(&w, |v| matches!(v, Violation::WrongPrice { .. }));
    assert_eq!(v.len(), 1, "{v:?}");
}

#[test]
fn a_cost_that_does_not_add_up_is_rejected() {
    let mut w = solved(scenario!("zone-spread"), TEST_F0);
    w.2.cost_per_hour -= 0.01;
    rejects(&w, |v| matches!(v, Violation::Cost { .. }));
}

#[test]
fn a_dropped_pod_is_rejected() {
    let mut w = solved(scenario!("zone-spread"), TEST_F0);
    let pod = w.2.nodes[0].pods.pop().expect("a pod");
    let v = rejects(&w, |v| *v == Violation::Dropped { pod: pod.clone() });
    assert_eq!(v.len(), 1, "{v:?}");
}

#[test]
fn a_pod_placed_twice_is_rejected() {
    let mut w = solved(scenario!("hostname-anti-affinity"), TEST_F0);
    let pod = w.2.nodes[0].pods[0].clone();
    w.2.unschedulable
        .push(crate::optimizer::plan::Unschedulable {
            pod: pod.clone(),
            reason: crate::optimizer::UnschedulableReason::SolverLimit,
            message: String::new(),
        });
    rejects(
        &w,
        |v| matches!(v, Violation::PlacedTwice { pod: p, .. } if *p == pod),
    );
}

#[test]
fn a_pod_that_is_not_pending_is_rejected() {
    let mut w = solved(scenario!("existing-node-room-first"), TEST_F0);
    w.2.nodes[0].pods.push("default/api-old".into());
    rejects(&w, |v| {
        *v == Violation::NotPending {
            pod: "default/api-old".into(),
        }
    });
}

#[test]
fn a_taint_not_tolerated_is_rejected() {
    // the gpu pool is tainted; the api pods do not tolerate it
    let mut w = solved(scenario!("gpu-pods"), TEST_F0);
    let gpu = w.2.nodes.iter().position(|n| n.nodepool == "gpu");
    let gpu = gpu.expect("a gpu node");
    move_pod(&mut w.2, "default/api-0", gpu);
    rejects(
        &w,
        |v| matches!(v, Violation::Taint { pod, .. } if pod == "default/api-0"),
    );
}

#[test]
fn a_nodepool_limit_exceeded_is_rejected() {
    // limits.cpu 2 admits the one 2-vCPU node the plan has; a second one is over it
    let mut w = solved(scenario!("nodepool-cpu-limit"), TEST_F0);
    add_copy(&mut w.2, 0);
    let v = rejects(&w, |v| {
        matches!(v, Violation::NodePoolLimit { nodepool, resource, .. }
            if nodepool == "default" && resource == "cpu")
    });
    assert_eq!(v.len(), 1, "{v:?}");
}

#[test]
fn a_host_port_claimed_twice_on_a_node_is_rejected() {
    let mut w = solved(scenario!("host-port-conflict"), TEST_F0);
    let pod = w.2.nodes[1].pods[0].clone();
    move_pod(&mut w.2, &pod, 0);
    rejects(
        &w,
        |v| matches!(v, Violation::HostPort { port, .. } if port == "8080/TCP"),
    );
}

#[test]
fn min_values_without_enough_fallbacks_are_rejected() {
    let mut w = solved(scenario!("min-values"), TEST_M1);
    w.2.nodes[0].fallbacks.clear();
    rejects(&w, |v| {
        matches!(
            v,
            Violation::MinValues {
                min: 2,
                found: 1,
                ..
            }
        )
    });
}

#[test]
fn an_offering_not_in_the_catalog_or_a_bad_fallback_is_rejected() {
    let mut w = solved(scenario!("zone-spread"), TEST_F0);
    w.2.nodes[0].zone = "test-zone-9".into();
    rejects(&w, |v| matches!(v, Violation::UnknownOffering { .. }));
    let mut w = solved(scenario!("min-values"), TEST_M1);
    w.2.nodes[0].fallbacks[0].price += 1.0;
    rejects(&w, |v| {
        matches!(
            v,
            Violation::Fallback {
                problem: FallbackProblem::Price { .. },
                ..
            }
        )
    });
}

fn node_index(plan: &Plan, pod: &str) -> usize {
    plan.nodes
        .iter()
        .position(|n| n.pods.iter().any(|p| p == pod))
        .unwrap_or_else(|| panic!("{pod} is on no new node"))
}
