//! Simulation scenario files (docs/simulate.md): the cluster to start from (real Kubernetes
//! objects, inline or from a `kubectl get -o yaml` dump), the workloads that change over virtual
//! time, scripted capacity shortages and interruptions, and the controller's timings. Read with
//! `serde_path_to_error` so a bad file is reported with the field that is wrong; validated once
//! into a [`Scenario`] whose durations are seconds. StorageClasses and StatefulSets' claim
//! templates are read in `storage`.

pub mod storage;

use std::path::Path;

use serde::Deserialize;

use crate::catalog::{CapacityType, Catalog};
use crate::disruption::timing::{parse_go_duration, parse_timestamp, Timestamp};
use crate::domain::volume::PodVolume;
use crate::domain::{ClusterSnapshot, PodConstraints};

use super::SimError;

/// The scenario `joiner simulate` runs when none is given.
pub const DEFAULT_SCENARIO: &str = include_str!("../../fixtures/scenarios/simulate/default.yaml");

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct File {
    name: String,
    #[serde(default)]
    description: String,
    /// Bundled catalog region, unless `catalog` names a file.
    #[serde(default)]
    region: Option<String>,
    #[serde(default)]
    catalog: Option<String>,
    #[serde(default = "default_start")]
    start: String,
    duration: String,
    #[serde(default)]
    seed: u64,
    #[serde(default)]
    timing: TimingFile,
    #[serde(default)]
    solver: SolverFile,
    #[serde(default)]
    spot_interruptions: InterruptionFile,
    /// A `kubectl get -o yaml` dump, relative to the scenario file.
    #[serde(default)]
    cluster: Option<String>,
    /// Kubernetes objects inline (NodePools, EC2NodeClasses, DaemonSets, PDBs, Nodes, Pods,
    /// StorageClasses, PersistentVolumes and their claims).
    #[serde(default)]
    manifests: Vec<serde_yaml_ng::Value>,
    /// StorageClasses in short form.
    #[serde(default)]
    storage_classes: Vec<storage::StorageClassFile>,
    #[serde(default)]
    workloads: Vec<WorkloadFile>,
    #[serde(default)]
    events: Vec<EventFile>,
}

fn default_start() -> String {
    "2026-01-05T00:00:00Z".into()
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct TimingFile {
    batch_idle: Option<String>,
    batch_max: Option<String>,
    boot: Option<String>,
    disruption_interval: Option<String>,
    validation_delay: Option<String>,
    sample_interval: Option<String>,
    workload_step: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct SolverFile {
    time_limit: Option<String>,
    disruption_time_limit: Option<String>,
    gap: Option<f64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct InterruptionFile {
    /// Multiplies the Spot Advisor interruption rates; 0 turns random interruptions off.
    #[serde(default = "one")]
    rate_scale: f64,
}

impl Default for InterruptionFile {
    fn default() -> Self {
        InterruptionFile { rate_scale: 1.0 }
    }
}

fn one() -> f64 {
    1.0
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct WorkloadFile {
    name: String,
    /// `Deployment` (default), `StatefulSet` or `Job`.
    #[serde(default = "deployment")]
    kind: String,
    #[serde(default = "default_namespace")]
    namespace: String,
    /// A pod template as in a Deployment: `metadata.labels` and `spec`.
    template: serde_yaml_ng::Value,
    #[serde(default)]
    replicas: Option<ReplicasFile>,
    #[serde(default)]
    bursts: Vec<BurstFile>,
    /// Jobs: when the job is created, how many pods run at once, and how long each runs.
    #[serde(default)]
    at: Option<String>,
    #[serde(default)]
    parallelism: Option<u32>,
    #[serde(default)]
    runtime: Option<String>,
    /// A PodDisruptionBudget over the workload's pods.
    #[serde(default)]
    max_unavailable: Option<String>,
    /// StatefulSets: a claim per pod and template, kept across the pod's evictions.
    #[serde(default)]
    volume_claim_templates: Vec<storage::ClaimTemplateFile>,
}

fn deployment() -> String {
    "Deployment".into()
}

fn default_namespace() -> String {
    "default".into()
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ReplicasFile {
    constant: Option<u32>,
    diurnal: Option<DiurnalFile>,
    steps: Option<Vec<StepFile>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct DiurnalFile {
    min: u32,
    max: u32,
    /// Offset of the peak from the start of each period (`14h`).
    peak: String,
    #[serde(default = "day")]
    period: String,
    /// Factors on the swing above `min`, one per day (24 h) of the run, repeating: a weekly
    /// pattern is seven of them.
    #[serde(default)]
    daily_scale: Vec<f64>,
}

fn day() -> String {
    "24h".into()
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct StepFile {
    at: String,
    replicas: u32,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct BurstFile {
    at: String,
    duration: String,
    extra: u32,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct EventFile {
    /// `insufficientCapacity` or `interrupt`.
    kind: String,
    at: String,
    #[serde(default)]
    until: Option<String>,
    #[serde(default)]
    instance_type: Option<String>,
    #[serde(default)]
    zone: Option<String>,
    #[serde(default)]
    capacity_type: Option<CapacityType>,
}

/// Durations in seconds.
#[derive(Debug, Clone, PartialEq)]
pub struct Timing {
    pub batch_idle: f64,
    pub batch_max: f64,
    pub boot: f64,
    pub disruption_interval: f64,
    pub validation_delay: f64,
    pub sample_interval: f64,
    pub workload_step: f64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Solver {
    pub time_limit: f64,
    pub disruption_time_limit: f64,
    pub gap: f64,
}

/// How many replicas a Deployment wants over time.
#[derive(Debug, Clone, PartialEq)]
pub enum Replicas {
    Constant(u32),
    /// A cosine between `min` and `max` peaking at `peak` seconds into each `period`; its swing
    /// above `min` is multiplied on day `d` (24 h days from the start) by
    /// `daily_scale[d % len]` (1 when empty).
    Diurnal {
        min: u32,
        max: u32,
        peak: f64,
        period: f64,
        daily_scale: Vec<f64>,
    },
    /// Piecewise constant: the last step at or before the time applies (0 before the first).
    Steps(Vec<(f64, u32)>),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Burst {
    pub at: f64,
    pub duration: f64,
    pub extra: u32,
}

#[derive(Debug, Clone, PartialEq)]
pub enum WorkloadKind {
    Deployment {
        replicas: Replicas,
        bursts: Vec<Burst>,
    },
    /// Pods `<name>-<ordinal>`, created lowest ordinal first (all at once, as with
    /// `podManagementPolicy: Parallel`) and deleted highest first; each mounts one claim per
    /// template, which outlives the pod.
    StatefulSet {
        replicas: Replicas,
        bursts: Vec<Burst>,
        claims: Vec<storage::ClaimTemplate>,
    },
    Job {
        at: f64,
        parallelism: u32,
        runtime: f64,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub struct Workload {
    pub name: String,
    pub namespace: String,
    pub pod: PodConstraints,
    /// Claims the template itself mounts (made beforehand, in the manifests).
    pub volumes: Vec<PodVolume>,
    pub kind: WorkloadKind,
    pub max_unavailable: Option<String>,
}

impl WorkloadKind {
    /// Replicas and bursts of the kinds that scale: Deployments and StatefulSets.
    pub fn scaling(&self) -> Option<(&Replicas, &[Burst])> {
        match self {
            WorkloadKind::Deployment { replicas, bursts }
            | WorkloadKind::StatefulSet {
                replicas, bursts, ..
            } => Some((replicas, bursts)),
            WorkloadKind::Job { .. } => None,
        }
    }
}

/// A scripted event.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// Launches of matching offerings fail with insufficient capacity in `[from, until)`.
    InsufficientCapacity {
        from: f64,
        until: f64,
        instance_type: String,
        zone: Option<String>,
        capacity_type: Option<CapacityType>,
    },
    /// A running spot instance (of `instance_type`, if given), drawn with the run's seed, gets an
    /// interruption warning.
    Interrupt {
        at: f64,
        instance_type: Option<String>,
    },
}

#[derive(Debug, Clone)]
pub struct Scenario {
    pub name: String,
    pub description: String,
    pub catalog: Catalog,
    pub start: Timestamp,
    pub duration: f64,
    pub seed: u64,
    pub timing: Timing,
    pub solver: Solver,
    pub interruption_rate_scale: f64,
    /// NodePools, DaemonSets, PDBs, and any nodes and pods the run starts with.
    pub cluster: ClusterSnapshot,
    pub workloads: Vec<Workload>,
    pub events: Vec<Event>,
}

impl Scenario {
    /// Reads a scenario file; relative `cluster` and `catalog` paths resolve against its directory.
    pub fn load(path: &Path) -> Result<Scenario, SimError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| SimError::Scenario(format!("cannot read {}: {e}", path.display())))?;
        Scenario::parse(&text, &path.display().to_string(), path.parent())
    }

    /// The bundled default scenario.
    pub fn bundled_default() -> Result<Scenario, SimError> {
        Scenario::parse(DEFAULT_SCENARIO, "bundled default scenario", None)
    }

    pub fn parse(text: &str, origin: &str, dir: Option<&Path>) -> Result<Scenario, SimError> {
        let de = serde_yaml_ng::Deserializer::from_str(text);
        let file: File = serde_path_to_error::deserialize(de).map_err(|e| {
            let at = e.path().to_string();
            let at = if at == "." {
                "document".to_string()
            } else {
                at
            };
            let message = e.into_inner().to_string();
            // serde_yaml_ng already starts its message with the path of an error below the root
            // (`workloads[0].x: invalid type ...`); add ours only when it is not there.
            if message.starts_with(&format!("{at}: ")) {
                SimError::Scenario(format!("{origin}: {message}"))
            } else {
                SimError::Scenario(format!("{origin}: {at}: {message}"))
            }
        })?;
        build(file, origin, dir)
    }
}

fn bad(origin: &str, field: &str, message: impl std::fmt::Display) -> SimError {
    SimError::Scenario(format!("{origin}: {field}: {message}"))
}

fn seconds(origin: &str, field: &str, value: &str) -> Result<f64, SimError> {
    parse_go_duration(value)
        .map(|d| d.as_secs_f64())
        .map_err(|e| bad(origin, field, e))
}

fn positive_seconds(origin: &str, field: &str, value: &str) -> Result<f64, SimError> {
    let s = seconds(origin, field, value)?;
    if s <= 0.0 {
        return Err(bad(origin, field, "must be positive"));
    }
    Ok(s)
}

fn opt_seconds(
    origin: &str,
    field: &str,
    value: &Option<String>,
    default: f64,
) -> Result<f64, SimError> {
    value
        .as_deref()
        .map_or(Ok(default), |v| positive_seconds(origin, field, v))
}

fn build(f: File, origin: &str, dir: Option<&Path>) -> Result<Scenario, SimError> {
    let catalog = match (&f.catalog, &f.region) {
        (Some(c), _) => {
            Catalog::from_file(&resolve(dir, c)).map_err(|e| bad(origin, "catalog", e))?
        }
        (None, r) => Catalog::bundled(r.as_deref().unwrap_or("us-east-1"))
            .map_err(|e| bad(origin, "region", e))?,
    };
    let t = &f.timing;
    let timing = Timing {
        batch_idle: opt_seconds(origin, "timing.batchIdle", &t.batch_idle, 1.0)?,
        batch_max: opt_seconds(origin, "timing.batchMax", &t.batch_max, 10.0)?,
        boot: opt_seconds(origin, "timing.boot", &t.boot, 40.0)?,
        disruption_interval: opt_seconds(
            origin,
            "timing.disruptionInterval",
            &t.disruption_interval,
            10.0,
        )?,
        validation_delay: opt_seconds(origin, "timing.validationDelay", &t.validation_delay, 15.0)?,
        sample_interval: opt_seconds(origin, "timing.sampleInterval", &t.sample_interval, 300.0)?,
        workload_step: opt_seconds(origin, "timing.workloadStep", &t.workload_step, 60.0)?,
    };
    let gap = f.solver.gap.unwrap_or(0.01);
    if !(0.0..1.0).contains(&gap) {
        return Err(bad(origin, "solver.gap", format!("{gap} is not in [0, 1)")));
    }
    let solver = Solver {
        time_limit: opt_seconds(origin, "solver.timeLimit", &f.solver.time_limit, 2.0)?,
        disruption_time_limit: opt_seconds(
            origin,
            "solver.disruptionTimeLimit",
            &f.solver.disruption_time_limit,
            2.0,
        )?,
        gap,
    };
    if !(f.spot_interruptions.rate_scale >= 0.0 && f.spot_interruptions.rate_scale.is_finite()) {
        return Err(bad(
            origin,
            "spotInterruptions.rateScale",
            "must be a non-negative number",
        ));
    }
    let mut cluster = read_cluster(&f, origin, dir)?;
    storage::add_classes(&f.storage_classes, &catalog, &mut cluster, origin)?;
    cluster.resolve_volumes();
    if cluster.nodepools.is_empty() {
        return Err(bad(
            origin,
            "manifests",
            "no NodePool: the simulated cluster could not launch anything",
        ));
    }
    let catalog = usable(catalog, &cluster);
    let workloads = f
        .workloads
        .iter()
        .enumerate()
        .map(|(i, w)| workload(w, &cluster, origin, &format!("workloads[{i}]")))
        .collect::<Result<Vec<_>, _>>()?;
    for (i, w) in workloads.iter().enumerate() {
        if workloads[..i]
            .iter()
            .any(|o| o.name == w.name && o.namespace == w.namespace)
        {
            return Err(bad(
                origin,
                &format!("workloads[{i}].name"),
                format!("{}/{} is named twice", w.namespace, w.name),
            ));
        }
    }
    let events = f
        .events
        .iter()
        .enumerate()
        .map(|(i, e)| event(e, origin, &format!("events[{i}]")))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Scenario {
        name: f.name,
        description: f.description,
        catalog,
        start: parse_timestamp(&f.start).map_err(|e| bad(origin, "start", e))?,
        duration: positive_seconds(origin, "duration", &f.duration)?,
        seed: f.seed,
        timing,
        solver,
        interruption_rate_scale: f.spot_interruptions.rate_scale,
        cluster,
        workloads,
        events,
    })
}

/// The catalog without the instance types no NodePool can launch and no starting node runs.
/// Decisions never look at them, and every solve of a run would otherwise scan them again.
fn usable(mut catalog: Catalog, cluster: &ClusterSnapshot) -> Catalog {
    use crate::optimizer::problem::{offering_labels, pool_type_labels};
    let running: std::collections::BTreeSet<&str> = cluster
        .nodes
        .iter()
        .filter_map(|n| {
            n.labels
                .get(crate::domain::labels::INSTANCE_TYPE)
                .map(String::as_str)
        })
        .collect();
    let region = catalog.region.clone();
    catalog.instance_types.retain(|it| {
        running.contains(it.name.as_str())
            || cluster.nodepools.iter().any(|np| {
                let base = pool_type_labels(it, np, &region);
                it.offerings.iter().any(|o| {
                    let labels = offering_labels(&base, o);
                    np.requirements.iter().all(|r| r.matches(&labels))
                })
            })
    });
    catalog
}

fn resolve(dir: Option<&Path>, file: &str) -> std::path::PathBuf {
    match dir {
        Some(d) => d.join(file),
        None => Path::new(file).to_path_buf(),
    }
}

fn read_cluster(f: &File, origin: &str, dir: Option<&Path>) -> Result<ClusterSnapshot, SimError> {
    let mut text = String::new();
    if let Some(c) = &f.cluster {
        let path = resolve(dir, c);
        text = std::fs::read_to_string(&path).map_err(|e| {
            bad(
                origin,
                "cluster",
                format!("cannot read {}: {e}", path.display()),
            )
        })?;
        text.push_str("\n---\n");
    }
    for m in &f.manifests {
        text.push_str(&serde_yaml_ng::to_string(m).map_err(|e| bad(origin, "manifests", e))?);
        text.push_str("---\n");
    }
    crate::snapshot::parse_snapshot(&text, &format!("{origin} (cluster and manifests)"))
        .map_err(|e| SimError::Scenario(e.to_string()))
}

/// A workload's pod template, read through the snapshot reader as a Pod so it gets exactly the
/// semantics (requests, init containers, affinity, spread) of a real one.
fn template(
    w: &WorkloadFile,
    origin: &str,
    field: &str,
) -> Result<(PodConstraints, Vec<PodVolume>), SimError> {
    let mut pod = serde_yaml_ng::Mapping::new();
    pod.insert("apiVersion".into(), "v1".into());
    pod.insert("kind".into(), "Pod".into());
    let mut meta = w
        .template
        .get("metadata")
        .cloned()
        .unwrap_or_else(|| serde_yaml_ng::Value::Mapping(Default::default()));
    if let serde_yaml_ng::Value::Mapping(m) = &mut meta {
        m.insert("name".into(), w.name.clone().into());
        m.insert("namespace".into(), w.namespace.clone().into());
    }
    pod.insert("metadata".into(), meta);
    let spec = w
        .template
        .get("spec")
        .cloned()
        .ok_or_else(|| bad(origin, &format!("{field}.template.spec"), "missing"))?;
    pod.insert("spec".into(), spec);
    let text = serde_yaml_ng::to_string(&pod).map_err(|e| bad(origin, field, e))?;
    let snap = crate::snapshot::parse_snapshot(&text, &format!("{origin}: {field}.template"))
        .map_err(|e| SimError::Scenario(e.to_string()))?;
    let p = snap.pods.into_iter().next().ok_or_else(|| {
        bad(
            origin,
            &format!("{field}.template"),
            "is not a pod template",
        )
    })?;
    let p = std::sync::Arc::unwrap_or_clone(p);
    let mut c = std::sync::Arc::unwrap_or_clone(p.constraints);
    // what the volumes demand depends on the cluster's storage, resolved once the pod is in it
    c.volume_requirements.clear();
    c.volume_error = None;
    Ok((c, p.volumes))
}

fn workload(
    w: &WorkloadFile,
    cluster: &ClusterSnapshot,
    origin: &str,
    field: &str,
) -> Result<Workload, SimError> {
    let (pod, volumes) = template(w, origin, field)?;
    let volumes = storage::template_volumes(&volumes, cluster, &w.namespace, origin, field)?;
    if w.kind != "StatefulSet" && !w.volume_claim_templates.is_empty() {
        return Err(bad(
            origin,
            &format!("{field}.volumeClaimTemplates"),
            "only a StatefulSet has them",
        ));
    }
    let kind = match w.kind.as_str() {
        "Deployment" => {
            let (replicas, bursts) = scaling(w, origin, field)?;
            WorkloadKind::Deployment { replicas, bursts }
        }
        "StatefulSet" => {
            let (replicas, bursts) = scaling(w, origin, field)?;
            let claims =
                storage::claim_templates(&w.volume_claim_templates, cluster, origin, field)?;
            WorkloadKind::StatefulSet {
                replicas,
                bursts,
                claims,
            }
        }
        "Job" => {
            let need = |name: &str| bad(origin, &format!("{field}.{name}"), "a Job needs it");
            WorkloadKind::Job {
                at: seconds(
                    origin,
                    &format!("{field}.at"),
                    w.at.as_deref().ok_or_else(|| need("at"))?,
                )?,
                parallelism: w.parallelism.ok_or_else(|| need("parallelism"))?,
                runtime: seconds(
                    origin,
                    &format!("{field}.runtime"),
                    w.runtime.as_deref().ok_or_else(|| need("runtime"))?,
                )?,
            }
        }
        other => {
            return Err(bad(
                origin,
                &format!("{field}.kind"),
                format!("unknown workload kind {other:?} (Deployment, StatefulSet or Job)"),
            ))
        }
    };
    Ok(Workload {
        name: w.name.clone(),
        namespace: w.namespace.clone(),
        pod,
        volumes,
        kind,
        max_unavailable: w.max_unavailable.clone(),
    })
}

/// The replicas and bursts of a Deployment or StatefulSet.
fn scaling(
    w: &WorkloadFile,
    origin: &str,
    field: &str,
) -> Result<(Replicas, Vec<Burst>), SimError> {
    let r = w.replicas.as_ref().ok_or_else(|| {
        bad(
            origin,
            &format!("{field}.replicas"),
            format!("a {} needs replicas", w.kind),
        )
    })?;
    let bursts = w
        .bursts
        .iter()
        .enumerate()
        .map(|(i, b)| {
            let f = format!("{field}.bursts[{i}]");
            Ok(Burst {
                at: seconds(origin, &format!("{f}.at"), &b.at)?,
                duration: seconds(origin, &format!("{f}.duration"), &b.duration)?,
                extra: b.extra,
            })
        })
        .collect::<Result<Vec<_>, SimError>>()?;
    Ok((replicas(r, origin, &format!("{field}.replicas"))?, bursts))
}

fn replicas(r: &ReplicasFile, origin: &str, field: &str) -> Result<Replicas, SimError> {
    match (r.constant, &r.diurnal, &r.steps) {
        (Some(n), None, None) => Ok(Replicas::Constant(n)),
        (None, Some(d), None) => {
            if d.min > d.max {
                return Err(bad(
                    origin,
                    &format!("{field}.diurnal"),
                    format!("min {} is above max {}", d.min, d.max),
                ));
            }
            let period = seconds(origin, &format!("{field}.diurnal.period"), &d.period)?;
            if period <= 0.0 {
                return Err(bad(
                    origin,
                    &format!("{field}.diurnal.period"),
                    "must be positive",
                ));
            }
            if let Some(i) = d
                .daily_scale
                .iter()
                .position(|f| !(f.is_finite() && *f >= 0.0))
            {
                return Err(bad(
                    origin,
                    &format!("{field}.diurnal.dailyScale[{i}]"),
                    format!("{} is not a non-negative number", d.daily_scale[i]),
                ));
            }
            Ok(Replicas::Diurnal {
                min: d.min,
                max: d.max,
                peak: seconds(origin, &format!("{field}.diurnal.peak"), &d.peak)?,
                period,
                daily_scale: d.daily_scale.clone(),
            })
        }
        (None, None, Some(steps)) => {
            let mut out = Vec::new();
            for (i, s) in steps.iter().enumerate() {
                out.push((
                    seconds(origin, &format!("{field}.steps[{i}].at"), &s.at)?,
                    s.replicas,
                ));
            }
            out.sort_by(|a, b| a.0.total_cmp(&b.0));
            Ok(Replicas::Steps(out))
        }
        _ => Err(bad(
            origin,
            field,
            "give exactly one of constant, diurnal, steps",
        )),
    }
}

fn event(e: &EventFile, origin: &str, field: &str) -> Result<Event, SimError> {
    let at = seconds(origin, &format!("{field}.at"), &e.at)?;
    match e.kind.as_str() {
        "insufficientCapacity" => {
            let until = e.until.as_deref().ok_or_else(|| {
                bad(
                    origin,
                    &format!("{field}.until"),
                    "an insufficientCapacity event needs it",
                )
            })?;
            let until = seconds(origin, &format!("{field}.until"), until)?;
            let instance_type = e.instance_type.clone().ok_or_else(|| {
                bad(
                    origin,
                    &format!("{field}.instanceType"),
                    "an insufficientCapacity event needs it",
                )
            })?;
            Ok(Event::InsufficientCapacity {
                from: at,
                until,
                instance_type,
                zone: e.zone.clone(),
                capacity_type: e.capacity_type,
            })
        }
        "interrupt" => Ok(Event::Interrupt {
            at,
            instance_type: e.instance_type.clone(),
        }),
        other => Err(bad(
            origin,
            &format!("{field}.kind"),
            format!("unknown event kind {other:?} (insufficientCapacity or interrupt)"),
        )),
    }
}

impl Replicas {
    /// Replicas wanted `t` seconds into the run.
    pub fn at(&self, t: f64) -> u32 {
        match self {
            Replicas::Constant(n) => *n,
            Replicas::Diurnal {
                min,
                max,
                peak,
                period,
                daily_scale,
            } => {
                let phase = 2.0 * std::f64::consts::PI * (t - peak) / period;
                let level = 0.5 * (1.0 + phase.cos());
                let day = (t.max(0.0) / 86_400.0) as usize;
                let scale = match daily_scale.len() {
                    0 => 1.0,
                    n => daily_scale[day % n],
                };
                (*min as f64 + (*max - *min) as f64 * level * scale).round() as u32
            }
            Replicas::Steps(steps) => steps
                .iter()
                .take_while(|(at, _)| *at <= t)
                .last()
                .map_or(0, |s| s.1),
        }
    }
}

#[cfg(test)]
mod tests;
