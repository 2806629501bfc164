//! The view model on a small cluster of Karpenter objects: what each node shows, the totals, the
//! decisions' summaries, and the view state's keys. The render layer's formatting is checked too.

use std::sync::Arc;

use super::*;
use crate::disruption::timing::parse_timestamp;
use crate::top::render;
use crate::top::watch::Status;

/// Four default-instance-type nodes ($0.80/h each in test-f0) of NodePool `default` bar the last:
/// `n1` runs one small pod, `n2` is annotated do-not-disrupt, `n3` runs a pod a PDB at zero
/// protects, `n4` belongs to no NodePool. One 1-CPU pod is pending.
const CLUSTER: &str = r#"
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      requirements:
      - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
  disruption: {consolidationPolicy: WhenEmptyOrUnderutilized, consolidateAfter: 0s}
---
apiVersion: v1
kind: Pod
metadata: {name: small, namespace: default, labels: {app: small}}
spec:
  nodeName: n1
  containers: [{name: c, resources: {requests: {cpu: "1", memory: 1Gi}}}]
status: {phase: Running}
---
apiVersion: v1
kind: Pod
metadata: {name: guarded, namespace: default, labels: {app: guarded}}
spec:
  nodeName: n3
  containers: [{name: c, resources: {requests: {cpu: "2", memory: 2Gi}}}]
status: {phase: Running}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: guarded, namespace: default}
spec:
  maxUnavailable: 0
  selector: {matchLabels: {app: guarded}}
---
apiVersion: v1
kind: Pod
metadata: {name: waiting, namespace: default}
spec:
  containers: [{name: c, resources: {requests: {cpu: "1", memory: 1Gi}}}]
status:
  phase: Pending
  conditions: [{type: PodScheduled, status: "False", reason: Unschedulable}]
"#;

/// A node document: `pool` labels it as a NodePool's, `annotations` as given.
fn node(name: &str, created: &str, pool: bool, annotations: &str) -> String {
    let pool = if pool {
        "karpenter.sh/nodepool: default, "
    } else {
        ""
    };
    format!(
        r#"---
apiVersion: v1
kind: Node
metadata:
  name: {name}
  creationTimestamp: "{created}"
  annotations: {{{annotations}}}
  labels: {{{pool}karpenter.sh/capacity-type: on-demand, kubernetes.io/arch: amd64,
    node.kubernetes.io/instance-type: default-instance-type, topology.kubernetes.io/zone: test-zone-1}}
status:
  capacity: {{cpu: "4", memory: 4096Mi, pods: "5"}}
  allocatable: {{cpu: "4", memory: 4096Mi, pods: "5"}}
  conditions: [{{type: Ready, status: "True"}}]
"#
    )
}

fn inputs() -> (ClusterSnapshot, Catalog, Timestamp) {
    let text = [
        CLUSTER.to_string(),
        node("n1", "2026-11-30T11:00:00Z", true, ""),
        node(
            "n2",
            "2026-11-30T10:00:00Z",
            true,
            "karpenter.sh/do-not-disrupt: \"true\"",
        ),
        node("n3", "2026-11-30T09:00:00Z", true, ""),
        node("n4", "2026-11-30T08:00:00Z", false, ""),
    ]
    .concat();
    let snapshot = crate::snapshot::parse_snapshot(&text, "test").expect("cluster parses");
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/fixtures/catalogs/test-f0.json"
    );
    let catalog = Catalog::from_file(std::path::Path::new(path)).expect("catalog");
    let now = parse_timestamp("2026-11-30T12:00:00Z").expect("time");
    (snapshot, catalog, now)
}

fn bare(snapshot: &ClusterSnapshot, catalog: &Catalog, now: Timestamp) -> Frame {
    let inputs = Inputs {
        snapshot,
        catalog,
        now,
        plan: None,
        consolidation: None,
        repack_bound: Some(1.0),
    };
    frame(inputs, vec!["a note".into()])
}

fn row<'f>(frame: &'f Frame, name: &str) -> &'f NodeRow {
    frame.nodes.iter().find(|n| n.name == name).expect(name)
}

#[test]
fn nodes_show_their_offering_usage_age_and_disruption_state() {
    let (snapshot, catalog, now) = inputs();
    let f = bare(&snapshot, &catalog, now);
    let n1 = row(&f, "n1");
    assert_eq!(n1.nodepool.as_deref(), Some("default"));
    assert_eq!(
        (
            n1.instance_type.as_str(),
            n1.zone.as_str(),
            n1.capacity_type.as_str()
        ),
        ("default-instance-type", "test-zone-1", "on-demand")
    );
    assert_eq!(n1.age_seconds, Some(3600));
    assert!((n1.price_per_hour - 0.8).abs() < 1e-9);
    assert_eq!((n1.cpu.requested, n1.cpu.allocatable), (1.0, 4.0));
    assert!((n1.memory.fraction() - 0.25).abs() < 1e-9);
    assert_eq!(n1.pods.len(), 1);
    assert_eq!(n1.pods[0].pod, "default/small");
    assert_eq!(n1.disruption, DisruptionState::Consolidatable);
    assert!(matches!(
        row(&f, "n2").disruption,
        DisruptionState::DoNotDisrupt(_)
    ));
    match &row(&f, "n3").disruption {
        DisruptionState::BlockedByPdb(r) => assert!(r.contains("default/guarded"), "{r}"),
        other => panic!("n3 is {other:?}"),
    }
    let n4 = row(&f, "n4");
    assert_eq!(
        (n4.nodepool.as_deref(), &n4.disruption),
        (None, &DisruptionState::Unmanaged)
    );
    assert_eq!(n4.age_seconds, Some(4 * 3600));
}

#[test]
fn totals_add_up_the_nodes_and_the_gap_to_the_bound() {
    let (snapshot, catalog, now) = inputs();
    let f = bare(&snapshot, &catalog, now);
    assert_eq!((f.totals.nodes, f.totals.running_pods), (4, 2));
    assert!((f.totals.cost_per_hour - 3.2).abs() < 1e-9);
    assert!((f.totals.gap_per_hour.expect("gap") - 2.2).abs() < 1e-9);
    assert_eq!(f.pending.pods, vec!["default/waiting".to_string()]);
    assert_eq!(
        (f.pending.plan.as_ref(), f.consolidation.status),
        (None, None)
    );
    assert_eq!(f.notes, vec!["a note".to_string()]);
}

#[test]
fn the_decisions_are_summarised_as_the_core_made_them() {
    let (snapshot, catalog, now) = inputs();
    let limit = std::time::Duration::from_secs(5);
    let limits = crate::top::decide::Limits {
        solve: limit,
        consolidate: limit,
        bound: limit,
    };
    let f = crate::top::decide::frame(&snapshot, &catalog, now, limits, vec![]);
    assert!(f.notes.is_empty(), "{:?}", f.notes);
    let plan = f.pending.plan.as_ref().expect("a plan for the pending pod");
    // n1 has room for the pending pod: nothing is launched for it
    assert_eq!(
        (plan.onto_existing, plan.launches.len()),
        (1, 0),
        "{plan:?}"
    );
    let c = &f.consolidation;
    assert!(c.status.is_some() && c.savings_per_hour > 0.0, "{c:?}");
    let deleted: Vec<&str> = c
        .commands
        .iter()
        .flat_map(|cmd| cmd.delete.iter().map(String::as_str))
        .collect();
    assert!(
        !deleted.contains(&"n2") && !deleted.contains(&"n3"),
        "{deleted:?}"
    );
    for name in &deleted {
        assert!(row(&f, name).deleted_by.is_some(), "{name}");
    }
    assert!(
        c.blocked.iter().any(|b| b.starts_with("n2: ")),
        "{:?}",
        c.blocked
    );
    let bound = f.totals.repack_bound.expect("bound");
    assert!(bound > 0.0 && bound <= f.totals.cost_per_hour, "{bound}");
}

#[test]
fn groups_put_pools_first_unmanaged_last_and_sort_within() {
    let (snapshot, catalog, now) = inputs();
    let f = bare(&snapshot, &catalog, now);
    let mut view = View::default();
    let names = |v: &View| -> Vec<String> { v.rows(&f).iter().map(|n| n.name.clone()).collect() };
    assert_eq!(names(&view), ["n1", "n2", "n3", "n4"]);
    let groups = view.groups(&f);
    assert_eq!(groups.len(), 2);
    assert_eq!(
        (groups[0].nodepool, groups[1].nodepool),
        (Some("default"), None)
    );
    assert!((groups[0].cost_per_hour - 2.4).abs() < 1e-9);
    view.key(Key::Sort, &f); // price: all equal, by name
    view.key(Key::Sort, &f); // cpu
    assert_eq!(view.sort, SortKey::Cpu);
    assert_eq!(names(&view), ["n3", "n1", "n2", "n4"]);
    view.key(Key::Sort, &f);
    view.key(Key::Sort, &f); // age: oldest first
    assert_eq!(names(&view), ["n3", "n2", "n1", "n4"]);
}

#[test]
fn keys_filter_select_show_pods_and_quit() {
    let (snapshot, catalog, now) = inputs();
    let f = bare(&snapshot, &catalog, now);
    let mut view = View::default();
    for _ in 0..10 {
        assert!(!view.key(Key::Down, &f));
    }
    assert_eq!(view.selected(&f).map(|n| n.name.as_str()), Some("n4"));
    view.key(Key::Pool, &f);
    assert_eq!(view.pool.as_deref(), Some("default"));
    assert_eq!(view.rows(&f).len(), 3);
    assert_eq!(view.selected, 0);
    view.key(Key::Down, &f);
    view.key(Key::Toggle, &f);
    assert!(view.detail);
    assert_eq!(view.selected(&f).map(|n| n.name.as_str()), Some("n2"));
    view.key(Key::Back, &f);
    assert!(!view.detail);
    view.key(Key::Pool, &f);
    assert_eq!(view.pool, None);
    view.key(Key::Up, &f);
    view.key(Key::Up, &f);
    assert_eq!(view.selected, 0);
    assert!(view.key(Key::Quit, &f));
}

#[test]
fn the_text_frame_shows_every_node_its_pool_and_the_panels() {
    let (snapshot, catalog, now) = inputs();
    let f = bare(&snapshot, &catalog, now);
    let text = render::text(&f, 140).expect("drawn");
    for want in [
        "4 nodes",
        "$3.2000/h",
        "(no nodepool)",
        "do-not-disrupt",
        "pdb-blocked",
        "1 pending pods",
        "no decision",
    ] {
        assert!(text.contains(want), "{want:?} missing from\n{text}");
    }
    let pool = text
        .lines()
        .find(|l| l.starts_with("default"))
        .expect("pool row");
    assert!(
        pool.contains("3 nodes") && pool.contains("2.4000"),
        "{pool}"
    );
    assert!(
        text.contains("n1") && text.contains("██░░░░░░  25%"),
        "{text}"
    );
}

#[test]
fn a_tiny_terminal_draws_without_panicking() {
    let (snapshot, catalog, now) = inputs();
    let f = bare(&snapshot, &catalog, now);
    let status = Status::Ready {
        frame: Arc::new(f),
        seq: 1,
    };
    let view = View {
        detail: true,
        ..View::default()
    };
    for (w, h) in [(1, 1), (10, 3), (30, 6), (200, 2)] {
        let backend = ratatui::backend::TestBackend::new(w, h);
        let mut terminal = ratatui::Terminal::new(backend).expect("terminal");
        terminal
            .draw(|fr| render::draw(fr, &status, &view))
            .expect("drawn");
        terminal
            .draw(|fr| render::draw(fr, &status, &View::default()))
            .expect("drawn");
    }
}

#[test]
fn ages_and_bars_read_as_kubectl_and_eks_node_viewer_print_them() {
    assert_eq!(
        [30, 300, 7200 + 59, 3 * 86_400].map(render::age),
        ["30s", "5m", "2h", "3d"]
    );
    let u = |r, a| Usage {
        requested: r,
        allocatable: a,
    };
    assert_eq!(render::bar(u(1.0, 4.0)), "██░░░░░░  25%");
    assert_eq!(render::bar(u(0.0, 0.0)), "░░░░░░░░   0%");
    // over-committed (a kubelet's view of allocatable shrank): the bar stays full, the number says
    assert_eq!(render::bar(u(5.0, 4.0)), "████████ 125%");
}

#[test]
fn the_panels_grow_with_their_wrapped_text_so_every_launch_shows() {
    let (snapshot, catalog, now) = inputs();
    let mut f = bare(&snapshot, &catalog, now);
    let launch = |t: &str| Launch {
        nodepool: "default".into(),
        instance_type: t.into(),
        zone: "us-east-1a".into(),
        capacity_type: "spot".into(),
        price_per_hour: 0.2611,
        pods: 6,
    };
    f.pending.plan = Some(PendingPlan {
        launches: vec![launch("m6i.4xlarge"), launch("c7a.2xlarge")],
        onto_existing: 0,
        cost_per_hour: 0.4371,
        objective: 0.4415,
        lower_bound: 0.4415,
        status: crate::optimizer::PlanStatus::Optimal,
        unschedulable: vec![],
    });
    let status = Status::Ready {
        frame: Arc::new(f.clone()),
        seq: 1,
    };
    // at 100 columns each panel is 50 wide and the plan's line wraps onto a second row
    for (w, h) in [(100, 40), (150, 40)] {
        let mut terminal =
            ratatui::Terminal::new(ratatui::backend::TestBackend::new(w, h)).expect("terminal");
        terminal
            .draw(|fr| render::draw(fr, &status, &View::default()))
            .expect("drawn");
        let screen = format!("{:?}", terminal.backend().buffer());
        for t in ["+ m6i.4xlarge", "+ c7a.2xlarge"] {
            assert!(screen.contains(t), "{t} missing at {w}x{h}:\n{screen}");
        }
    }
    let text = render::text(&f, 100).expect("drawn");
    assert!(text.contains("+ c7a.2xlarge"), "{text}");
}
