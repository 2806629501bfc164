//! A cloud that refuses terminations: the node of a refused termination stays (its instance on
//! record, its finalizer on) and the drain step or the reclaim asks again until the cloud accepts.

use std::cell::{Cell, RefCell};

use super::tests::{deleting, disrupted_node};
use crate::catalog::Catalog;
use crate::cloud::{CloudError, CloudProvider, Instance, LaunchRequest, Launched};
use crate::controller::tests::{settings, Fake};
use crate::controller::{Cluster, Controller, EvictionRefused, Wake};
use crate::domain::ClusterSnapshot;
use crate::optimizer::NewNode;

/// Refuses the first `refusals` terminations, as a throttled EC2 does, then accepts; counts them.
struct Refusing {
    refusals: Cell<u32>,
    calls: Cell<u32>,
}

impl CloudProvider for Refusing {
    async fn launch(&self, request: &LaunchRequest) -> Result<Launched, CloudError> {
        Err(CloudError::NoOfferings(request.claim.clone()))
    }
    async fn delete(&self, id: &str) -> Result<(), CloudError> {
        self.calls.set(self.calls.get() + 1);
        match self.refusals.get() {
            0 => Ok(()),
            n => {
                self.refusals.set(n - 1);
                Err(CloudError::Provider(format!(
                    "RequestLimitExceeded for {id}"
                )))
            }
        }
    }
    async fn get(&self, id: &str) -> Result<Instance, CloudError> {
        Err(CloudError::NotFound(id.to_string()))
    }
    async fn list(&self) -> Result<Vec<Instance>, CloudError> {
        Ok(vec![])
    }
    async fn catalog(&self) -> Result<Catalog, CloudError> {
        Ok(catalog())
    }
    async fn drifted(&self, _: &str) -> Result<Option<String>, CloudError> {
        Ok(None)
    }
}

fn catalog() -> Catalog {
    Catalog {
        region: "test".into(),
        instance_types: vec![],
        provenance: None,
    }
}

/// [`Fake`], recording the nodes deleted (the host releases their finalizers there).
struct Deleting(Fake, RefCell<Vec<String>>);

impl Cluster for Deleting {
    fn snapshot(&self) -> &ClusterSnapshot {
        &self.0 .0
    }
    fn in_flight(&self) -> Vec<(&str, &NewNode)> {
        vec![]
    }
    fn claim_launched(&mut self, _: &str, _: &NewNode, _: &Instance) {}
    fn set_disrupted(&mut self, node: &str, disrupted: bool) {
        self.0.set_disrupted(node, disrupted);
    }
    fn evict(&mut self, _: &str) -> Result<(), EvictionRefused> {
        Ok(())
    }
    fn delete_node(&mut self, node: &str) -> usize {
        self.1.borrow_mut().push(node.to_string());
        0
    }
}

/// A controller whose cloud refuses `refusals` terminations, and an empty registered node `name`
/// with instance `i-1` and the disrupted taint.
fn setup(refusals: u32, name: &str) -> (Controller<Refusing>, Deleting) {
    let cloud = Refusing {
        refusals: Cell::new(refusals),
        calls: Cell::new(0),
    };
    let mut ctl = Controller::new(settings(), catalog(), cloud);
    let mut snap = ClusterSnapshot::default();
    snap.nodes.push(disrupted_node(name).into());
    ctl.adopt(name, "i-1");
    (ctl, Deleting(Fake::new(snap), RefCell::default()))
}

#[test]
fn a_drained_node_whose_termination_is_refused_stays_until_a_later_drain_step_terminates_it() {
    let (mut ctl, mut cluster) = setup(2, "chosen");
    let mut cmd = deleting(&["chosen"]);
    cmd.validated = true;
    cmd.validated_at = Some(0.0);
    cmd.draining = true;
    ctl.disruption.command = Some(cmd);
    // (step time, cloud calls after it, next drain step): the waits double after each refusal,
    // and a step within a wait does not ask
    for (now, calls, next) in [(1.0, 1, 2.0), (1.5, 1, 2.0), (2.0, 2, 4.0)] {
        ctl.drain_step(&mut cluster, now);
        assert_eq!(ctl.cloud.calls.get(), calls, "at {now}");
        assert!(
            cluster.1.borrow().is_empty(),
            "a refused node is not released"
        );
        assert_eq!(ctl.instance_of("chosen"), Some("i-1"));
        let cmd = ctl.disruption.command.as_ref().expect("the command waits");
        assert!(cmd.terminated.is_empty());
        assert_eq!(ctl.take_wakes(), [(next, Wake::DrainStep)], "at {now}");
    }
    ctl.drain_step(&mut cluster, 4.0);
    assert_eq!(ctl.cloud.calls.get(), 3);
    assert_eq!(*cluster.1.borrow(), ["chosen"], "released once accepted");
    assert_eq!(ctl.instance_of("chosen"), None);
    assert!(ctl.disruption.command.is_none(), "the command finished");
    assert_eq!(ctl.stats.terminated, 1);
}

#[test]
fn a_reclaim_the_cloud_refuses_keeps_its_node_and_its_taint_and_is_asked_for_again() {
    let (mut ctl, mut cluster) = setup(1, "interrupted");
    ctl.interruption_warning(&mut cluster, "i-1", 0.0);
    let wakes = ctl.take_wakes();
    assert!(wakes.contains(&(120.0, Wake::Terminate("interrupted".into()))));
    assert!(!ctl.terminate(&mut cluster, "interrupted"));
    assert!(cluster.1.borrow().is_empty());
    assert!(ctl.reclaiming.contains("interrupted"));
    // the stale-taint cleanup leaves a node whose reclaim is still under way
    let _ = ctl.disruption_tick(&mut cluster, 121.0);
    assert_eq!(cluster.0 .1.get("interrupted"), Some(&true));
    assert!(ctl.terminate(&mut cluster, "interrupted"));
    assert_eq!(*cluster.1.borrow(), ["interrupted"]);
    assert!(ctl.reclaiming.is_empty());
    assert_eq!(ctl.cloud.calls.get(), 2);
}
