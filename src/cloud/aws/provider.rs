//! [`AwsCloud`]: the [`CloudProvider`] on EC2. It holds the SDK clients, the catalog it prices
//! instances with, the EC2NodeClasses as last resolved (the operator refreshes them) and the
//! launch templates it created. Calls run on the tokio runtime it was given, so the decision thread
//! can block on them from outside any runtime.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Arc, RwLock};

use aws_sdk_ec2::types::InstanceStateName;

use super::instances::{self, Ec2Instance};
use super::launch::{create_fleet, instance_tags, plan_fleets, TemplateCache};
use super::nodeclass::ResolvedNodeClass;
use super::{AwsClients, AwsError, AwsSettings, CAPACITY_TYPE_TAG};
use crate::catalog::Catalog;
use crate::cloud::{CloudError, CloudProvider, Instance, LaunchRequest, Launched, OfferingKey};
use crate::optimizer::OfferingRef;

/// Launches of one plan in flight at once.
const LAUNCH_CONCURRENCY: usize = 10;

#[derive(Debug, Default)]
struct State {
    catalog: Option<Catalog>,
    node_classes: BTreeMap<String, ResolvedNodeClass>,
}

/// The AWS cloud provider. Cloning shares the clients, state and template cache.
#[derive(Debug, Clone)]
pub struct AwsCloud {
    clients: AwsClients,
    settings: Arc<AwsSettings>,
    rt: tokio::runtime::Handle,
    templates: Arc<TemplateCache>,
    state: Arc<RwLock<State>>,
}

impl AwsCloud {
    pub fn new(
        clients: AwsClients,
        settings: AwsSettings,
        catalog: Catalog,
        rt: tokio::runtime::Handle,
    ) -> AwsCloud {
        let state = State {
            catalog: Some(catalog),
            node_classes: BTreeMap::new(),
        };
        AwsCloud {
            clients,
            settings: Arc::new(settings),
            rt,
            templates: Arc::default(),
            state: Arc::new(RwLock::new(state)),
        }
    }

    pub fn clients(&self) -> &AwsClients {
        &self.clients
    }

    pub fn settings(&self) -> &AwsSettings {
        &self.settings
    }

    /// Records what EC2NodeClass `name` resolved to (None: it is gone or not ready). Launch
    /// templates are looked up again, as their options may have changed.
    pub fn set_node_class(&self, name: &str, resolved: Option<ResolvedNodeClass>) {
        let mut st = self.state.write().unwrap_or_else(|e| e.into_inner());
        let changed = match resolved {
            // the cache is keyed by the templates' content hash; clearing only bounds its size
            Some(r) => st
                .node_classes
                .insert(name.to_string(), r.clone())
                .is_none_or(|old| !old.same_templates(&r)),
            None => st.node_classes.remove(name).is_some(),
        };
        if changed {
            self.templates.clear();
        }
    }

    pub fn node_class(&self, name: &str) -> Option<ResolvedNodeClass> {
        self.state
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .node_classes
            .get(name)
            .cloned()
    }

    pub fn node_class_names(&self) -> Vec<String> {
        self.state
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .node_classes
            .keys()
            .cloned()
            .collect()
    }

    pub fn set_catalog(&self, catalog: Catalog) {
        self.state
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .catalog = Some(catalog);
    }

    fn current_catalog(&self) -> Catalog {
        self.state
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .catalog
            .clone()
            .unwrap_or_else(|| Catalog {
                region: self.settings.region.clone(),
                instance_types: vec![],
                provenance: None,
            })
    }

    /// Runs `f` on the provider's runtime and waits for it from any thread or runtime.
    async fn on_runtime<T: Send + 'static>(
        &self,
        f: impl Future<Output = Result<T, AwsError>> + Send + 'static,
    ) -> Result<T, CloudError> {
        match self.rt.spawn(f).await {
            Ok(r) => r.map_err(CloudError::from),
            Err(e) => Err(CloudError::Provider(format!(
                "aws call did not finish: {e}"
            ))),
        }
    }

    async fn launch_on_runtime(self, request: LaunchRequest) -> Result<Launched, CloudError> {
        let class = request.template.node_class.clone().ok_or_else(|| {
            CloudError::Provider(format!("nodepool {} names no node class", request.nodepool))
        })?;
        let nc = self.node_class(&class).ok_or_else(|| {
            CloudError::Provider(format!(
                "ec2nodeclass {class} is not resolved (see its status conditions)"
            ))
        })?;
        let catalog = self.current_catalog();
        let fleets = plan_fleets(&self.settings, &nc, &catalog, &request)?;
        let mut insufficient: Vec<OfferingKey> = vec![];
        let mut errors = vec![];
        for fleet in fleets {
            // offerings the node class cannot serve are kept out of solves like ones without
            // capacity
            insufficient.extend(fleet.skipped.iter().cloned());
            if fleet.groups.is_empty() {
                continue;
            }
            let mut templates = vec![];
            for g in &fleet.groups {
                templates.push(
                    self.templates
                        .ensure(&self.clients, &self.settings.cluster_name, &g.options)
                        .await?,
                );
            }
            let mut tags = instance_tags(&self.settings, &nc, &request);
            tags.insert(
                CAPACITY_TYPE_TAG.into(),
                fleet.capacity_type.as_str().into(),
            );
            let outcome = create_fleet(&self.clients, &templates, &fleet, &tags).await?;
            insufficient.extend(outcome.insufficient);
            errors.extend(outcome.errors);
            let Some(id) = outcome.instance_id else {
                continue;
            };
            let described =
                instances::describe(&self.clients, std::slice::from_ref(&id), &catalog).await?;
            let instance = match described.into_iter().next() {
                Some(e) => e.instance,
                // EC2's read-after-write lag: fall back to what was asked for
                None => self.asked(&id, &request, &fleet),
            };
            return Ok(Launched {
                instance,
                insufficient,
            });
        }
        if errors.is_empty() {
            return Err(CloudError::InsufficientCapacity {
                claim: request.claim,
                offerings: insufficient,
            });
        }
        Err(CloudError::Provider(format!(
            "create fleet for claim {}: {}",
            request.claim,
            errors.join("; ")
        )))
    }

    fn asked(
        &self,
        id: &str,
        request: &LaunchRequest,
        fleet: &super::launch::FleetPlan,
    ) -> Instance {
        let first: Option<&OfferingRef> = fleet
            .groups
            .first()
            .and_then(|g| g.overrides.first())
            .map(|(o, _)| o);
        let offering = first
            .cloned()
            .unwrap_or_else(|| request.offerings[0].clone());
        Instance {
            id: id.to_string(),
            claim: request.claim.clone(),
            nodepool: request.nodepool.clone(),
            offering,
            state: crate::cloud::InstanceState::Pending,
        }
    }

    /// Why each of `ids` drifted, by instance id; an instance that did not drift, or that EC2 or
    /// its node class no longer knows, is left out. One DescribeInstances for every 200 ids (see
    /// [`instances::describe_many`]), run on the caller's task.
    pub async fn drift_scan(&self, ids: &[String]) -> Result<BTreeMap<String, String>, CloudError> {
        let catalog = self.current_catalog();
        let found = instances::describe_many(&self.clients, ids, &catalog, instances::PAGE).await?;
        let mut classes: BTreeMap<String, Option<ResolvedNodeClass>> = BTreeMap::new();
        let mut out = BTreeMap::new();
        for e in &found {
            let Some(name) = e.node_class.as_deref() else {
                continue;
            };
            let nc = classes
                .entry(name.to_string())
                .or_insert_with(|| self.node_class(name));
            if let Some(why) = nc.as_ref().and_then(|nc| self.drift_of(e, nc)) {
                out.insert(e.instance.id.clone(), why);
            }
        }
        Ok(out)
    }

    async fn describe_one(&self, id: &str) -> Result<Option<Ec2Instance>, CloudError> {
        let (me, ids) = (self.clone(), vec![id.to_string()]);
        let found = self
            .on_runtime(async move {
                instances::describe(&me.clients, &ids, &me.current_catalog()).await
            })
            .await?;
        Ok(found.into_iter().next())
    }

    /// Why instance `e` differs from what its node class resolves to now.
    fn drift_of(&self, e: &Ec2Instance, nc: &ResolvedNodeClass) -> Option<String> {
        if let Some(image) = &e.image_id {
            if !nc.amis.iter().any(|a| &a.id == image) {
                return Some(format!("AMIDrift: image {image} is no longer selected"));
            }
        }
        if let Some(subnet) = &e.subnet_id {
            if !nc.subnets.iter().any(|s| &s.id == subnet) {
                return Some(format!(
                    "SubnetDrift: subnet {subnet} is no longer selected"
                ));
            }
        }
        let mut want: Vec<&String> = nc.security_groups.iter().map(|g| &g.id).collect();
        let mut have: Vec<&String> = e.security_groups.iter().collect();
        want.sort();
        have.sort();
        // moto and some AMIs report no groups: only a different non-empty set is drift
        if !have.is_empty() && have != want {
            return Some("SecurityGroupDrift: security groups changed".into());
        }
        None
    }
}

impl CloudProvider for AwsCloud {
    async fn launch(&self, request: &LaunchRequest) -> Result<Launched, CloudError> {
        if request.offerings.is_empty() {
            return Err(CloudError::NoOfferings(request.claim.clone()));
        }
        let me = self.clone();
        let request = request.clone();
        match self.rt.spawn(me.launch_on_runtime(request)).await {
            Ok(r) => r,
            Err(e) => Err(CloudError::Provider(format!("launch did not finish: {e}"))),
        }
    }

    /// A CreateFleet call takes about a second: a plan of hundreds of nodes launched one at a
    /// time would wait minutes. The SDK's adaptive retry mode paces them when EC2 throttles.
    fn launch_concurrency(&self) -> usize {
        LAUNCH_CONCURRENCY
    }

    /// TerminateInstances; when EC2 refuses it (throttling, an outage), the instance still counts
    /// as going if EC2 reports it shutting down or terminated (a spot reclaim, a console
    /// termination, an earlier call that took effect although its answer was lost). Otherwise the
    /// refusal is returned and the caller keeps the node and asks again later: nothing retries
    /// behind its back, so the node's finalizer is what keeps the instance in sight.
    async fn delete(&self, id: &str) -> Result<(), CloudError> {
        let (clients, ids) = (self.clients.clone(), vec![id.to_string()]);
        let refused = match self
            .on_runtime(async move { instances::terminate(&clients, &ids).await })
            .await
        {
            Ok(()) => return Ok(()),
            Err(e) => e,
        };
        let (clients, ids) = (self.clients.clone(), vec![id.to_string()]);
        let states = self
            .on_runtime(async move { instances::states(&clients, &ids, instances::PAGE).await })
            .await;
        // an id Describe leaves out is not taken as gone: EC2 may not list an instance launched
        // moments ago
        match states.as_ref().ok().and_then(|s| s.get(id)) {
            Some(InstanceStateName::ShuttingDown | InstanceStateName::Terminated) => {
                tracing::info!(instance = %id, error = %refused, "termination refused, but the instance is already going");
                Ok(())
            }
            _ => Err(refused),
        }
    }

    async fn get(&self, id: &str) -> Result<Instance, CloudError> {
        self.describe_one(id)
            .await?
            .map(|e| e.instance)
            .ok_or_else(|| CloudError::NotFound(id.to_string()))
    }

    async fn list(&self) -> Result<Vec<Instance>, CloudError> {
        let me = self.clone();
        let all = self
            .on_runtime(async move {
                instances::list(
                    &me.clients,
                    &me.settings.cluster_name,
                    &me.current_catalog(),
                )
                .await
            })
            .await?;
        Ok(all.into_iter().map(|e| e.instance).collect())
    }

    async fn catalog(&self) -> Result<Catalog, CloudError> {
        Ok(self.current_catalog())
    }

    async fn drifted(&self, id: &str) -> Result<Option<String>, CloudError> {
        let Some(e) = self.describe_one(id).await? else {
            return Ok(None);
        };
        let nc = e.node_class.as_deref().and_then(|c| self.node_class(c));
        Ok(nc.and_then(|nc| self.drift_of(&e, &nc)))
    }
}
