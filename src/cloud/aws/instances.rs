//! Instances as the provider sees them: DescribeInstances by id or by the cluster's tag, turned
//! into [`Instance`]s (the NodeClaim and NodePool come from the instance's tags, the offering from
//! its type, zone and lifecycle), and TerminateInstances that treats an instance already gone as
//! done.

use aws_sdk_ec2::types::{Filter, InstanceLifecycleType, InstanceStateName};

use super::{
    cluster_tag_key, AwsClients, AwsError, CAPACITY_TYPE_TAG, NODECLAIM_TAG, NODECLASS_TAG,
    NODEPOOL_TAG,
};
use crate::catalog::{CapacityType, Catalog};
use crate::cloud::{Instance, InstanceState};
use crate::optimizer::OfferingRef;

/// An EC2 instance reduced to what joiner decides with.
#[derive(Debug, Clone, PartialEq)]
pub struct Ec2Instance {
    pub instance: Instance,
    /// Seconds since the Unix epoch.
    pub launched: Option<i64>,
    pub image_id: Option<String>,
    pub subnet_id: Option<String>,
    pub security_groups: Vec<String>,
    /// The EC2NodeClass it was launched from (its tag).
    pub node_class: Option<String>,
}

/// Converts one described instance; None when it lacks an id, type or zone.
pub fn convert(i: &aws_sdk_ec2::types::Instance, catalog: &Catalog) -> Option<Ec2Instance> {
    let tag = |k: &str| {
        i.tags()
            .iter()
            .find(|t| t.key() == Some(k))
            .and_then(|t| t.value())
            .map(str::to_string)
    };
    let instance_type = i.instance_type()?.as_str().to_string();
    let zone = i.placement()?.availability_zone()?.to_string();
    // the capacity-type tag is what joiner asked for; the lifecycle is what EC2 says
    let capacity_type = match (
        i.instance_lifecycle(),
        tag(CAPACITY_TYPE_TAG)
            .as_deref()
            .and_then(CapacityType::parse),
    ) {
        (Some(InstanceLifecycleType::Spot), _) => CapacityType::Spot,
        (_, Some(c)) => c,
        _ => CapacityType::OnDemand,
    };
    let price = catalog
        .instance_types
        .iter()
        .find(|t| t.name == instance_type)
        .and_then(|t| {
            t.offerings
                .iter()
                .find(|o| o.zone == zone && o.capacity_type == capacity_type)
        })
        .map_or(0.0, |o| o.price);
    let state = match i.state().and_then(|s| s.name()) {
        Some(InstanceStateName::Pending) => InstanceState::Pending,
        Some(InstanceStateName::Running) => InstanceState::Running,
        Some(
            InstanceStateName::ShuttingDown
            | InstanceStateName::Stopping
            | InstanceStateName::Stopped,
        ) => InstanceState::ShuttingDown,
        _ => InstanceState::Terminated,
    };
    let instance = Instance {
        id: i.instance_id()?.to_string(),
        claim: tag(NODECLAIM_TAG).unwrap_or_default(),
        nodepool: tag(NODEPOOL_TAG).unwrap_or_default(),
        offering: OfferingRef {
            instance_type,
            zone,
            capacity_type,
            price,
        },
        state,
    };
    Some(Ec2Instance {
        instance,
        launched: i.launch_time().map(|t| t.secs()),
        image_id: i.image_id().map(str::to_string),
        subnet_id: i.subnet_id().map(str::to_string),
        security_groups: i
            .security_groups()
            .iter()
            .filter_map(|g| g.group_id())
            .map(str::to_string)
            .collect(),
        node_class: tag(NODECLASS_TAG),
    })
}

/// Instances by id; ids EC2 does not know are left out.
pub async fn describe(
    clients: &AwsClients,
    ids: &[String],
    catalog: &Catalog,
) -> Result<Vec<Ec2Instance>, AwsError> {
    let out = clients
        .ec2
        .describe_instances()
        .set_instance_ids(Some(ids.to_vec()))
        .into_paginator()
        .items()
        .send()
        .collect::<Result<Vec<_>, _>>()
        .await;
    match out {
        Ok(reservations) => Ok(reservations
            .iter()
            .flat_map(|r| r.instances())
            .filter_map(|i| convert(i, catalog))
            .collect()),
        Err(e) => {
            let e = AwsError::from_sdk("ec2:DescribeInstances", e);
            if is_not_found(&e) {
                return Ok(vec![]);
            }
            Err(e)
        }
    }
}

/// DescribeInstances's page size (EC2 allows 5 to 1000 with filters).
pub const PAGE: i32 = 500;

/// Every pending, running, stopping or stopped instance carrying the cluster's tag
/// (`kubernetes.io/cluster/<name>: owned`) and a NodePool tag, all pages of `page_size`
/// reservations. The cluster tag alone is not joiner's: EKS managed node groups and self-managed
/// groups carry it too, and joiner must never list (and so never collect) their instances.
pub async fn tagged(
    clients: &AwsClients,
    cluster: &str,
    page_size: i32,
) -> Result<Vec<aws_sdk_ec2::types::Instance>, AwsError> {
    // two filters of different names: EC2 ANDs them (moto merges filters that share a name)
    let tag = Filter::builder()
        .name(format!("tag:{}", cluster_tag_key(cluster)))
        .values("owned")
        .build();
    let pool = Filter::builder()
        .name("tag-key")
        .values(super::NODEPOOL_TAG)
        .build();
    let states = ["pending", "running", "stopping", "stopped"];
    let state = Filter::builder()
        .name("instance-state-name")
        .set_values(Some(states.map(String::from).to_vec()))
        .build();
    let mut out = Vec::new();
    let mut token: Option<String> = None;
    loop {
        let page = clients
            .ec2
            .describe_instances()
            .filters(tag.clone())
            .filters(pool.clone())
            .filters(state.clone())
            .max_results(page_size)
            .set_next_token(token.take())
            .send()
            .await
            .map_err(|e| AwsError::from_sdk("ec2:DescribeInstances", e))?;
        // checked here too: what joiner may terminate must not rest on the API's filter semantics
        let ours = |i: &&aws_sdk_ec2::types::Instance| {
            let has = |key: &str, value: Option<&str>| {
                i.tags()
                    .iter()
                    .any(|t| t.key() == Some(key) && value.is_none_or(|v| t.value() == Some(v)))
            };
            has(&cluster_tag_key(cluster), Some("owned")) && has(super::NODEPOOL_TAG, None)
        };
        out.extend(
            page.reservations()
                .iter()
                .flat_map(|r| r.instances())
                .filter(ours)
                .cloned(),
        );
        match page.next_token {
            Some(t) if !t.is_empty() => token = Some(t),
            _ => return Ok(out),
        }
    }
}

/// Every instance tagged for `cluster` that is not terminated or shutting down.
pub async fn list(
    clients: &AwsClients,
    cluster: &str,
    catalog: &Catalog,
) -> Result<Vec<Ec2Instance>, AwsError> {
    Ok(tagged(clients, cluster, PAGE)
        .await?
        .iter()
        .filter_map(|i| convert(i, catalog))
        .collect())
}

/// Instance ids asked about in one DescribeInstances filter (EC2 takes up to 200 values a filter).
const FILTER_BATCH: usize = 200;

/// The state of each of `ids` that EC2 still knows (a terminated instance is known for about an
/// hour, then forgotten). The ids go in an `instance-id` filter, `FILTER_BATCH` a call, all
/// pages of `page_size`: unlike the `InstanceIds` parameter, a filter leaves unknown ids out
/// instead of failing the whole call.
pub async fn states(
    clients: &AwsClients,
    ids: &[String],
    page_size: i32,
) -> Result<std::collections::BTreeMap<String, InstanceStateName>, AwsError> {
    let mut out = std::collections::BTreeMap::new();
    each_by_id(clients, ids, page_size, |i| {
        if let (Some(id), Some(state)) = (i.instance_id(), i.state().and_then(|s| s.name())) {
            out.insert(id.to_string(), state.clone());
        }
    })
    .await?;
    Ok(out)
}

/// [`describe`] for many ids: `FILTER_BATCH` ids a DescribeInstances call (all pages of
/// `page_size`) rather than a call an instance; ids EC2 does not know are left out.
pub async fn describe_many(
    clients: &AwsClients,
    ids: &[String],
    catalog: &Catalog,
    page_size: i32,
) -> Result<Vec<Ec2Instance>, AwsError> {
    let mut out = Vec::with_capacity(ids.len());
    each_by_id(clients, ids, page_size, |i| out.extend(convert(i, catalog))).await?;
    Ok(out)
}

/// Calls `f` with every instance of `ids` EC2 knows, asking for them in `instance-id` filters
/// of `FILTER_BATCH` values.
async fn each_by_id(
    clients: &AwsClients,
    ids: &[String],
    page_size: i32,
    mut f: impl FnMut(&aws_sdk_ec2::types::Instance),
) -> Result<(), AwsError> {
    for batch in ids.chunks(FILTER_BATCH) {
        let filter = Filter::builder()
            .name("instance-id")
            .set_values(Some(batch.to_vec()))
            .build();
        let mut token: Option<String> = None;
        loop {
            let page = clients
                .ec2
                .describe_instances()
                .filters(filter.clone())
                .max_results(page_size)
                .set_next_token(token.take())
                .send()
                .await
                .map_err(|e| AwsError::from_sdk("ec2:DescribeInstances", e))?;
            for i in page.reservations().iter().flat_map(|r| r.instances()) {
                f(i);
            }
            match page.next_token {
                Some(t) if !t.is_empty() => token = Some(t),
                _ => break,
            }
        }
    }
    Ok(())
}

/// TerminateInstances's batch; EC2 takes up to 1000 but recommends smaller batches.
const BATCH: usize = 100;

/// Terminates `ids`. An id EC2 does not know (already terminated and forgotten, or never launched)
/// is not an error: the goal, no such instance running, holds.
pub async fn terminate(clients: &AwsClients, ids: &[String]) -> Result<(), AwsError> {
    for batch in ids.chunks(BATCH) {
        match terminate_batch(clients, batch).await {
            Err(e) if is_not_found(&e) && batch.len() > 1 => {
                // EC2 fails the whole call for one unknown id: retry one by one so the others still
                // go
                for id in batch {
                    terminate_one(clients, id).await?;
                }
            }
            Err(e) if is_not_found(&e) => {}
            other => other?,
        }
    }
    Ok(())
}

async fn terminate_one(clients: &AwsClients, id: &str) -> Result<(), AwsError> {
    match terminate_batch(clients, &[id.to_string()]).await {
        Err(e) if is_not_found(&e) => Ok(()),
        other => other,
    }
}

async fn terminate_batch(clients: &AwsClients, ids: &[String]) -> Result<(), AwsError> {
    clients
        .ec2
        .terminate_instances()
        .set_instance_ids(Some(ids.to_vec()))
        .send()
        .await
        .map_err(|e| AwsError::from_sdk("ec2:TerminateInstances", e))?;
    Ok(())
}

fn is_not_found(e: &AwsError) -> bool {
    e.code() == Some("InvalidInstanceID.NotFound")
}
