//! The AWS side of the host: builds the [`AwsCloud`] and runs its background work on the async
//! runtime.
//!
//! - EC2NodeClasses are resolved once before the first decision, then every minute and soon after
//!   one changes; their status (subnets, security groups, AMIs, conditions) is written back and the
//!   provider launches with what they resolved to.
//! - The garbage collector terminates instances tagged for the cluster that no NodeClaim owns,
//!   and deletes NodeClaims whose instance is gone, 10 seconds after start and every
//!   `--instance-gc-interval` (2 minutes).
//! - With an interruption queue, an event that calls for action is first recorded in the cluster,
//!   as Karpenter records it: the instance's NodeClaim is deleted, so its termination (taint,
//!   drain, volumes, instance, finalizer) is carried on by whichever replica leads next. Then it
//!   becomes [`HostEvent`]s for the decision thread (which cordons, evicts at once, keeps a spot
//!   offering out of solves and reclaims after the notice), and the message is deleted once both
//!   are done; a message not recorded stays in the queue and comes back.
//! - Every 12 hours the catalog is discovered again from the EC2 APIs, with on-demand prices from
//!   the Pricing API (or the bundled catalog's in an isolated VPC); the decision thread takes it
//!   up.
//! - Every minute the NodeClaims' instances are checked for drift, 200 to a DescribeInstances
//!   call, and the decision thread reads the [`DriftReport`].
//!
//! Every write these tasks make (a status, a NodeClaim delete, a TerminateInstances, a queue
//! message delete) asks the [`LeaderToken`] first.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::Client;
use tokio::runtime::Handle;

use super::decisions::{DriftReport, HostEvent, HostEvents};
use super::leadership::LeaderToken;
use super::metrics::Metrics;
use super::OperatorError;
use crate::api::EC2NodeClass;
use crate::catalog::Catalog;
use crate::cloud::aws::{
    discovery, gc, interruption, nodeclass, pricing, AwsClients, AwsCloud, AwsSettings,
};
use crate::disruption::timing::parse_timestamp;
use crate::k8s::caches::{karpenter_resource, Caches, Signal, Wakeup};
use crate::k8s::claims::provider_id_of;

/// How often EC2NodeClasses are resolved again without a change (Karpenter's is a minute too).
const RESOLVE_EVERY: Duration = Duration::from_secs(60);

/// What the background tasks share with the rest of the host.
pub struct Shared {
    /// Interruption events for the decision thread.
    pub events: HostEvents,
    /// Drift scans for the decision thread.
    pub drift: DriftReport,
    /// Wakes the decision thread when events arrive.
    pub wake: Wakeup,
    /// Asked before every write.
    pub token: LeaderToken,
    /// The interruption queue's reader counts its messages here.
    pub metrics: Arc<Metrics>,
}

/// Builds the provider, resolves the node classes once, and starts the background loops.
pub async fn start(
    aws: &AwsSettings,
    version: Option<&str>,
    catalog: &Catalog,
    client: &Client,
    caches: &Caches,
    shared: Shared,
) -> Result<AwsCloud, OperatorError> {
    let Shared {
        events,
        drift,
        wake,
        token,
        metrics,
    } = shared;
    let mut aws = aws.clone();
    if aws.cluster_endpoint.is_empty() {
        aws.cluster_endpoint = discover_endpoint(client).await?;
        tracing::info!(endpoint = %aws.cluster_endpoint, "cluster endpoint discovered");
    }
    let aws = &aws;
    let clients = AwsClients::load(aws)
        .await
        .map_err(|e| OperatorError::Setting {
            name: "aws",
            message: e.to_string(),
        })?;
    let cloud = AwsCloud::new(clients, aws.clone(), catalog.clone(), Handle::current());
    let version = match version {
        Some(v) => v.to_string(),
        None => kubernetes_version(client).await,
    };
    let resolver = Resolver {
        cloud: cloud.clone(),
        client: client.clone(),
        caches: caches.clone(),
        version: Arc::new(version),
        token: token.clone(),
    };
    resolver.pass().await;
    tokio::spawn(resolver.run());
    let collector = Collector {
        cloud: cloud.clone(),
        client: client.clone(),
        caches: caches.clone(),
        token: token.clone(),
    };
    tokio::spawn(collector.run());
    tokio::spawn(scan_drift(cloud.clone(), caches.clone(), drift));
    if let Some(queue) = &aws.interruption_queue {
        let reader = Reader {
            cloud: cloud.clone(),
            client: client.clone(),
            caches: caches.clone(),
            token,
            metrics,
        };
        tokio::spawn(reader.run(queue.clone(), events, wake));
    }
    if !aws.isolated_vpc {
        tokio::spawn(refresh_catalog(cloud.clone(), catalog.clone()));
    }
    Ok(cloud)
}

const GC_FIRST: Duration = Duration::from_secs(10);
const CATALOG_EVERY: Duration = Duration::from_secs(12 * 3600);
/// How often the NodeClaims' instances are checked for drift (Karpenter checks every few minutes).
const DRIFT_EVERY: Duration = Duration::from_secs(60);

/// Checks every NodeClaim's instance for drift, a batched DescribeInstances at a time, and
/// publishes what drifted for the decision thread. Only reads: no leadership check.
async fn scan_drift(cloud: AwsCloud, caches: Caches, report: DriftReport) {
    loop {
        let ids: BTreeSet<String> = caches
            .node_claims()
            .iter()
            .filter_map(|c| provider_id_of(c).and_then(gc::instance_id))
            .map(str::to_string)
            .collect();
        let ids: Vec<String> = ids.into_iter().collect();
        match cloud.drift_scan(&ids).await {
            Ok(drifted) => report.publish(drifted),
            Err(e) => tracing::warn!(error = %e, "drift not checked"),
        }
        tokio::time::sleep(DRIFT_EVERY).await;
    }
}

/// The garbage collector: instances no NodeClaim owns, NodeClaims whose instance is gone.
pub struct Collector {
    pub cloud: AwsCloud,
    pub client: Client,
    pub caches: Caches,
    pub token: LeaderToken,
}

impl Collector {
    async fn run(self) {
        tokio::time::sleep(GC_FIRST).await;
        loop {
            self.pass().await;
            tokio::time::sleep(self.cloud.settings().gc_interval).await;
        }
    }

    /// One collection; nothing at all while this replica does not lead (the leader's collector
    /// owns the cluster's instances).
    pub async fn pass(&self) {
        if self.token.check().is_err() {
            tracing::debug!("not the leader; garbage collection skipped");
            return;
        }
        let (cloud, client, caches) = (&self.cloud, &self.client, &self.caches);
        let owners = || {
            let claims = caches.node_claims();
            let pairs: Vec<(String, Option<String>)> = claims
                .iter()
                .map(|c| {
                    (
                        c.metadata.name.clone().unwrap_or_default(),
                        provider_id_of(c).map(str::to_string),
                    )
                })
                .collect();
            gc::Owners::from_claims(pairs.iter().map(|(n, p)| (n.as_str(), p.as_deref())))
        };
        let s = cloud.settings();
        let leads = || self.token.is_leader();
        match gc::collect_while(
            cloud.clients(),
            &s.cluster_name,
            chrono::Utc::now(),
            s.gc_grace,
            owners,
            leads,
        )
        .await
        {
            Ok(ids) if !ids.is_empty() => {
                tracing::warn!(instances = ?ids, "terminated instances no nodeclaim owns")
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "garbage collection failed"),
        }
        collect_claims(cloud, client, caches, &self.token).await;
    }
}

/// Deletes the NodeClaims whose instance is gone: the decision thread then drains their nodes
/// (pods past their grace period no longer hold a node whose kubelet died with the instance) and
/// releases them.
async fn collect_claims(cloud: &AwsCloud, client: &Client, caches: &Caches, token: &LeaderToken) {
    let launched = || {
        caches
            .node_claims()
            .iter()
            .filter(|c| c.metadata.deletion_timestamp.is_none())
            .filter_map(|c| {
                let instance = provider_id_of(c).and_then(gc::instance_id)?.to_string();
                Some(gc::LaunchedClaim {
                    name: c.metadata.name.clone()?,
                    instance,
                    created: c
                        .metadata
                        .creation_timestamp
                        .as_ref()
                        .and_then(|t| parse_timestamp(&t.0.to_string()).ok()),
                })
            })
            .collect()
    };
    let s = cloud.settings();
    let names = match gc::claims_to_collect(
        cloud.clients(),
        &s.cluster_name,
        chrono::Utc::now(),
        s.gc_grace,
        launched,
    )
    .await
    {
        Ok(names) => names,
        Err(e) => {
            tracing::warn!(error = %e, "nodeclaim garbage collection failed");
            return;
        }
    };
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &karpenter_resource("NodeClaim"));
    for name in names {
        if token.check().is_err() {
            return;
        }
        tracing::warn!(claim = %name, "the nodeclaim's instance is gone; deleting the nodeclaim");
        if let Err(e) = api.delete(&name, &Default::default()).await {
            tracing::warn!(claim = %name, error = %e, "nodeclaim not deleted");
        }
    }
}

/// How long the reader waits for the decision thread to act on the messages it handed over before
/// polling again; what is not acted on by then stays in the queue and comes back after its
/// visibility timeout.
const ACT_WAIT: Duration = Duration::from_secs(10);

/// The interruption queue's reader.
pub struct Reader {
    pub cloud: AwsCloud,
    pub client: Client,
    pub caches: Caches,
    pub token: LeaderToken,
    pub metrics: Arc<Metrics>,
}

impl Reader {
    async fn run(self, queue: String, events: HostEvents, wake: Wakeup) {
        let cloud = &self.cloud;
        let url = loop {
            match interruption::queue_url(cloud.clients(), &queue).await {
                Ok(u) => break u,
                Err(e) => {
                    tracing::error!(queue = %queue, error = %e, "interruption queue not found; retrying")
                }
            }
            tokio::time::sleep(Duration::from_secs(30)).await;
        };
        loop {
            let received = match interruption::receive(cloud.clients(), &url).await {
                Ok(r) => r,
                Err(e) => {
                    tracing::warn!(error = %e, "interruption queue not read");
                    tokio::time::sleep(Duration::from_secs(5)).await;
                    continue;
                }
            };
            let mut waiting = BTreeSet::new();
            for (receipt, parsed) in received {
                self.count_received(&parsed);
                match parsed {
                    // left in the queue: it comes back after its visibility timeout
                    Ok(ev) if acts(&ev) && !self.record(&ev).await => continue,
                    // deleted once the decision thread has acted on it
                    Ok(ev) if hand_over(&ev, &receipt, &events, &wake) => {
                        waiting.insert(receipt);
                        continue;
                    }
                    Ok(_) => {}
                    Err(ignored) => {
                        tracing::info!(reason = ignored.reason(), error = %ignored, "interruption message ignored")
                    }
                }
                self.delete_message(&url, &receipt).await;
            }
            self.delete_acted(&url, &events, waiting).await;
        }
    }

    /// Deletes the handed-over messages as the decision thread acts on them, for up to [`ACT_WAIT`].
    async fn delete_acted(&self, url: &str, events: &HostEvents, mut waiting: BTreeSet<String>) {
        let started = tokio::time::Instant::now();
        while !waiting.is_empty() && started.elapsed() < ACT_WAIT {
            tokio::time::sleep(Duration::from_millis(100)).await;
            for receipt in events.take_acted() {
                waiting.remove(&receipt);
                self.delete_message(url, &receipt).await;
            }
        }
        if !waiting.is_empty() {
            tracing::warn!(
            messages = waiting.len(),
            "interruption messages not acted on yet; they come back after their visibility timeout"
        );
        }
    }

    /// Records an interruption in the cluster before anything else: the NodeClaims of its
    /// instances are deleted (Karpenter's interruption controller does the same), which puts
    /// their nodes' termination on the cluster's record, where a new leader finds it and its
    /// stale-taint cleanup leaves them cordoned. False when a claim could not be deleted, or this
    /// replica does not lead: the message stays in the queue.
    pub async fn record(&self, ev: &interruption::InterruptionEvent) -> bool {
        let api: Api<DynamicObject> =
            Api::all_with(self.client.clone(), &karpenter_resource("NodeClaim"));
        let claims = self.caches.node_claims();
        for id in &ev.instance_ids {
            let claim = claims
                .iter()
                .find(|c| provider_id_of(c).and_then(gc::instance_id) == Some(id.as_str()));
            // an instance joiner does not own, or a claim already on its way out
            let Some(name) = claim
                .filter(|c| c.metadata.deletion_timestamp.is_none())
                .and_then(|c| c.metadata.name.clone())
            else {
                continue;
            };
            if self.token.check().is_err() {
                tracing::debug!("not the leader; interruption left in the queue");
                return false;
            }
            match api.delete(&name, &Default::default()).await {
                Ok(_) => {
                    tracing::info!(claim = %name, instance = %id, "interrupted instance's nodeclaim deleted")
                }
                Err(kube::Error::Api(e)) if e.code == 404 => {}
                Err(e) => {
                    tracing::warn!(claim = %name, error = %e, "interruption not recorded; the message comes back");
                    return false;
                }
            }
        }
        true
    }

    /// Deletes one message; a replica that does not lead leaves it, to come back to the leader
    /// after its visibility timeout.
    pub async fn delete_message(&self, url: &str, receipt: &str) {
        if self.token.check().is_err() {
            tracing::debug!("not the leader; interruption message left in the queue");
            return;
        }
        match interruption::delete(self.cloud.clients(), url, receipt).await {
            Ok(()) => {
                self.metrics.karpenter.interruption.deleted.inc();
            }
            Err(e) => tracing::warn!(error = %e, "interruption message not deleted"),
        }
    }

    /// Counts a message by its type (`noop` for one joiner ignores), with its time on the queue.
    /// A message that comes back after its visibility timeout is counted again, as Karpenter's
    /// receive counter does.
    fn count_received(
        &self,
        parsed: &Result<interruption::InterruptionEvent, interruption::Ignored>,
    ) {
        let (kind, time) = match parsed {
            Ok(ev) => (ev.kind.as_str(), ev.event_time),
            Err(_) => ("noop", None),
        };
        self.metrics.karpenter.interruption.received(kind, time);
    }
}

/// Whether an event calls for action on its instances.
fn acts(ev: &interruption::InterruptionEvent) -> bool {
    ev.action() != interruption::InterruptionAction::NoAction
}

/// Queues an event's actions for the decision thread; false when it calls for none.
fn hand_over(
    ev: &interruption::InterruptionEvent,
    receipt: &str,
    events: &HostEvents,
    wake: &Wakeup,
) -> bool {
    tracing::info!(kind = ev.kind.as_str(), instances = ?ev.instance_ids, "interruption event");
    let make: fn(String) -> HostEvent = match ev.action() {
        interruption::InterruptionAction::CordonAndDrainMarkUnavailable => {
            HostEvent::SpotInterruption
        }
        interruption::InterruptionAction::CordonAndDrain => HostEvent::Retiring,
        interruption::InterruptionAction::NoAction => return false,
    };
    let batch = ev.instance_ids.iter().cloned().map(make).collect();
    events.push(batch, Some(receipt.to_string()));
    let _ = wake.send(Signal::Changed);
    true
}

/// Discovers the catalog at start and every 12 hours; the bundled one stays in force until then
/// and whenever discovery fails.
async fn refresh_catalog(cloud: AwsCloud, bundled: Catalog) {
    loop {
        let s = cloud.settings();
        let prices = match pricing::on_demand_prices(&cloud.clients().pricing, &s.region).await {
            Ok((p, _)) => p,
            Err(e) => {
                tracing::warn!(error = %e, "on-demand prices not read; using the bundled catalog's");
                discovery::on_demand_prices_of(&bundled)
            }
        };
        match discovery::discover(cloud.clients(), &s.region, &prices).await {
            Ok((catalog, report)) => {
                tracing::info!(types = catalog.instance_types.len(), report = ?report, "catalog discovered");
                cloud.set_catalog(catalog);
            }
            Err(e) => tracing::warn!(error = %e, "catalog not discovered; keeping the current one"),
        }
        tokio::time::sleep(CATALOG_EVERY).await;
    }
}

/// The API server URL new nodes join, when none is set: the server of the kubeconfig in ConfigMap
/// kube-system/kube-proxy, which EKS and kubeadm write because kube-proxy, like a booting kubelet,
/// cannot reach the API server through its Service address (the in-cluster one this client uses).
async fn discover_endpoint(client: &Client) -> Result<String, OperatorError> {
    let missing = |why: String| OperatorError::Setting {
        name: "cluster-endpoint",
        message: format!("not set, and {why}: set CLUSTER_ENDPOINT (settings.clusterEndpoint)"),
    };
    let api: Api<k8s_openapi::api::core::v1::ConfigMap> =
        Api::namespaced(client.clone(), "kube-system");
    let map = api
        .get_opt("kube-proxy")
        .await
        .map_err(|e| {
            missing(format!(
                "ConfigMap kube-system/kube-proxy cannot be read ({e})"
            ))
        })?
        .ok_or_else(|| missing("there is no ConfigMap kube-system/kube-proxy".into()))?;
    map.data
        .unwrap_or_default()
        .values()
        .find_map(|text| kubeconfig_server(text))
        .ok_or_else(|| {
            missing(
                "ConfigMap kube-system/kube-proxy holds no kubeconfig with an https server".into(),
            )
        })
}

/// The first https cluster server of a kubeconfig document.
fn kubeconfig_server(text: &str) -> Option<String> {
    let config = kube::config::Kubeconfig::from_yaml(text).ok()?;
    config
        .clusters
        .iter()
        .filter_map(|c| c.cluster.as_ref()?.server.clone())
        .find(|s| s.starts_with("https://"))
}

/// `major.minor` of the API server (`1.33`), or `1.33` when it cannot be read: only AMI aliases use
/// it.
async fn kubernetes_version(client: &Client) -> String {
    match client.apiserver_version().await {
        Ok(info) => format!("{}.{}", info.major, info.minor.trim_end_matches('+')),
        Err(e) => {
            tracing::warn!(error = %e, "cannot read the kubernetes version; AMI aliases resolve for 1.33");
            "1.33".to_string()
        }
    }
}

#[derive(Clone)]
struct Resolver {
    cloud: AwsCloud,
    client: Client,
    caches: Caches,
    version: Arc<String>,
    token: LeaderToken,
}

impl Resolver {
    async fn run(self) {
        let mut seen = self.fingerprint();
        let mut next = tokio::time::Instant::now() + RESOLVE_EVERY;
        loop {
            tokio::time::sleep(Duration::from_secs(2)).await;
            let now = self.fingerprint();
            if now != seen || tokio::time::Instant::now() >= next {
                seen = now;
                next = tokio::time::Instant::now() + RESOLVE_EVERY;
                self.pass().await;
            }
        }
    }

    /// Names and generations of the cached EC2NodeClasses: a spec change moves the generation.
    fn fingerprint(&self) -> BTreeSet<(String, i64)> {
        self.caches
            .nodeclasses
            .state()
            .iter()
            .map(|o| {
                (
                    o.metadata.name.clone().unwrap_or_default(),
                    o.metadata.generation.unwrap_or(0),
                )
            })
            .collect()
    }

    /// Resolves every cached EC2NodeClass, writes changed statuses and updates the provider.
    async fn pass(&self) {
        let objects = self.caches.nodeclasses.state();
        let mut live = BTreeSet::new();
        for obj in objects {
            let name = obj.metadata.name.clone().unwrap_or_default();
            live.insert(name.clone());
            let nc: EC2NodeClass =
                match serde_json::to_value(obj.as_ref()).and_then(serde_json::from_value) {
                    Ok(nc) => nc,
                    Err(e) => {
                        tracing::warn!(ec2nodeclass = %name, error = %e, "unreadable ec2nodeclass");
                        self.cloud.set_node_class(&name, None);
                        continue;
                    }
                };
            let r = nodeclass::resolve(
                self.cloud.clients(),
                self.cloud.settings(),
                &nc,
                &self.version,
            )
            .await;
            if nc.status.as_ref() != Some(&r.status) {
                self.write_status(&name, &r.status).await;
            }
            self.cloud.set_node_class(&name, r.resolved);
        }
        for gone in self
            .cloud
            .node_class_names()
            .into_iter()
            .filter(|n| !live.contains(n))
        {
            self.cloud.set_node_class(&gone, None);
        }
    }

    async fn write_status(&self, name: &str, status: &crate::api::EC2NodeClassStatus) {
        if self.token.check().is_err() {
            tracing::debug!(ec2nodeclass = %name, "not the leader; status not written");
            return;
        }
        let api: Api<DynamicObject> =
            Api::all_with(self.client.clone(), &karpenter_resource("EC2NodeClass"));
        let patch = serde_json::json!({"status": status});
        if let Err(e) = api
            .patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            tracing::warn!(ec2nodeclass = %name, error = %e, "status not written");
        }
    }
}
