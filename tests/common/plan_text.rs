//! Plans as short text for failure messages, shared by every test harness.

use joiner::optimizer::Plan;

/// A short human-readable plan for failure messages.
pub fn summary(p: &Plan) -> String {
    let mut s = String::new();
    for n in &p.nodes {
        s += &format!(
            "  {} {} {} {} {} ${} {:?}\n",
            n.id,
            n.nodepool,
            n.instance_type,
            n.zone,
            n.capacity_type.as_str(),
            n.price,
            n.pods
        );
    }
    for e in &p.existing {
        s += &format!("  existing {} {:?}\n", e.node, e.pods);
    }
    for u in &p.unschedulable {
        s += &format!("  unschedulable {} {:?}: {}\n", u.pod, u.reason, u.message);
    }
    s += &format!(
        "  cost ${} objective {} lower bound {} status {} notes {:?}\n",
        p.cost_per_hour, p.objective, p.lower_bound, p.solver.status, p.solver.notes
    );
    s
}
