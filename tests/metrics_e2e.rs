//! End to end: the real `joiner controller` against the in-process API server provisions for a
//! Deployment, and its `/metrics` is read the way Prometheus and Grafana read it: every query of
//! the dashboard the chart ships names series and labels the scrape has, the provisioning plan's
//! gap to its certified bound (computed after the launches) is below 1, and the `karpenter_*`
//! series carry Karpenter's labels.

#[path = "support/apiserver/mod.rs"]
mod apiserver;
#[path = "support/joinerproc.rs"]
mod joinerproc;
#[path = "support/kubesim.rs"]
mod kubesim;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use serde_json::json;

use apiserver::ApiServer;
use joinerproc::{tempdir, Joiner, SYSTEM_NS};
use kubesim::{census, eventually, Deployment, KubeSim};

const NS: &str = "default";

/// One sample of the scrape: its metric name and labels.
#[derive(Debug, Clone)]
struct Sample {
    name: String,
    labels: BTreeMap<String, String>,
    value: f64,
}

/// The samples of an OpenMetrics text scrape.
fn samples(text: &str) -> Vec<Sample> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .filter_map(|l| {
            let (series, value) = l.rsplit_once(' ')?;
            let (name, labels) = match series.split_once('{') {
                Some((n, rest)) => (n, parse_labels(rest.strip_suffix('}')?)),
                None => (series, BTreeMap::new()),
            };
            Some(Sample {
                name: name.to_string(),
                labels,
                value: value.parse().ok()?,
            })
        })
        .collect()
}

/// `k="v",k2="v2"` (values without escaped quotes, as joiner's are).
fn parse_labels(s: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut rest = s;
    while let Some((k, after)) = rest.split_once("=\"") {
        let Some((v, tail)) = after.split_once('"') else {
            break;
        };
        out.insert(k.trim_start_matches(',').trim().to_string(), v.to_string());
        rest = tail;
    }
    out
}

/// What a PromQL expression asks of the scrape: metric names, the labels its matchers name per
/// metric, and the labels it groups by.
#[derive(Debug, Default)]
struct Query {
    metrics: BTreeSet<String>,
    matchers: Vec<(String, String)>,
    grouping: BTreeSet<String>,
}

const PROMQL_WORDS: &[&str] = &[
    "sum",
    "count",
    "max",
    "min",
    "avg",
    "by",
    "without",
    "rate",
    "increase",
    "irate",
    "histogram_quantile",
    "or",
    "and",
    "unless",
    "on",
    "ignoring",
    "vector",
    "label_values",
    "clamp_min",
    "clamp_max",
    "abs",
    "topk",
    "bottomk",
];

/// Parses the names out of `expr`: identifiers outside strings, braces and ranges; `by (...)`
/// lists; `{...}` matchers, attributed to the identifier just before them.
fn parse_query(expr: &str) -> Query {
    let mut q = Query::default();
    let chars: Vec<char> = expr.chars().collect();
    let mut i = 0;
    let mut last_ident: Option<String> = None;
    let mut after_by = false;
    while i < chars.len() {
        let c = chars[i];
        if c == '"' {
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                i += 1;
            }
            i += 1;
        } else if c == '[' {
            while i < chars.len() && chars[i] != ']' {
                i += 1;
            }
            i += 1;
        } else if c == '{' {
            let end = (i..chars.len())
                .find(|&j| chars[j] == '}')
                .unwrap_or(chars.len());
            let inside: String = chars[i + 1..end].iter().collect();
            let metric = last_ident.clone().expect("a matcher follows a metric name");
            for m in split_matchers(&inside) {
                q.matchers.push((metric.clone(), m));
            }
            i = end + 1;
        } else if c == '(' && after_by {
            let end = (i..chars.len())
                .find(|&j| chars[j] == ')')
                .unwrap_or(chars.len());
            let inside: String = chars[i + 1..end].iter().collect();
            q.grouping.extend(
                inside
                    .split(',')
                    .map(|l| l.trim().to_string())
                    .filter(|l| !l.is_empty()),
            );
            after_by = false;
            i = end + 1;
        } else if c.is_ascii_alphabetic() || c == '_' || c == '$' {
            let start = i;
            while i < chars.len()
                && (chars[i].is_ascii_alphanumeric() || chars[i] == '_' || chars[i] == '$')
            {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            after_by = word == "by";
            if !PROMQL_WORDS.contains(&word.as_str()) && !word.starts_with('$') {
                q.metrics.insert(word.clone());
            }
            last_ident = Some(word);
        } else {
            i += 1;
        }
    }
    q
}

/// The label names of a matcher list: `a="x",b=~"y"`.
fn split_matchers(inside: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut in_string = false;
    let mut name = String::new();
    let mut taking = true;
    for c in inside.chars() {
        match c {
            '"' => in_string = !in_string,
            ',' if !in_string => {
                taking = true;
                name.clear();
            }
            '=' | '!' | '~' if !in_string && taking => {
                if !name.trim().is_empty() {
                    out.push(name.trim().to_string());
                }
                taking = false;
            }
            _ if taking && !in_string => name.push(c),
            _ => {}
        }
    }
    out
}

/// Every query of the dashboard: panel targets and template variables.
fn dashboard_queries() -> Vec<String> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/charts/joiner/dashboards/joiner.json"
    );
    let d: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).expect("dashboard")).expect("json");
    let mut out = Vec::new();
    fn walk(panels: &serde_json::Value, out: &mut Vec<String>) {
        for p in panels.as_array().into_iter().flatten() {
            for t in p["targets"].as_array().into_iter().flatten() {
                out.extend(t["expr"].as_str().map(str::to_string));
            }
            walk(&p["panels"], out);
        }
    }
    walk(&d["panels"], &mut out);
    for v in d["templating"]["list"].as_array().into_iter().flatten() {
        if let Some(q) = v["query"]["query"].as_str() {
            // label_values(metric, label): the metric, grouped by the label
            let inner = q.trim_start_matches("label_values(").trim_end_matches(')');
            if let Some((metric, label)) = inner.split_once(", ") {
                out.push(format!("sum by ({label}) ({metric})"));
            }
        }
    }
    out
}

/// What of `query` the scrape lacks, one line each.
fn missing(query: &str, scrape: &[Sample]) -> Vec<String> {
    let q = parse_query(query);
    let labels_of = |metric: &str| -> BTreeSet<String> {
        scrape
            .iter()
            .filter(|s| s.name == metric)
            .flat_map(|s| s.labels.keys().cloned())
            .collect()
    };
    let mut out = Vec::new();
    for m in &q.metrics {
        if !scrape.iter().any(|s| &s.name == m) {
            out.push(format!("{query}: no series {m}"));
        }
    }
    for (m, label) in &q.matchers {
        if !labels_of(m).contains(label) {
            out.push(format!("{query}: {m} has no label {label}"));
        }
    }
    for label in &q.grouping {
        if !q.metrics.iter().any(|m| labels_of(m).contains(label)) {
            out.push(format!("{query}: no series to group by {label}"));
        }
    }
    out
}

#[test]
fn the_query_parser_finds_names_matchers_and_groupings() {
    let q = parse_query(
        r#"sum by (nodepool) (rate(karpenter_nodes_created_total{nodepool=~"$nodepool",zone!="a,b"}[5m])) / max(joiner_leader)"#,
    );
    assert_eq!(
        q.metrics,
        ["joiner_leader", "karpenter_nodes_created_total"]
            .map(String::from)
            .into()
    );
    assert_eq!(
        q.matchers,
        vec![
            (
                "karpenter_nodes_created_total".to_string(),
                "nodepool".to_string()
            ),
            (
                "karpenter_nodes_created_total".to_string(),
                "zone".to_string()
            )
        ]
    );
    assert_eq!(q.grouping, ["nodepool".to_string()].into());
    let scrape = samples("joiner_leader 1\nkarpenter_nodes_created_total{nodepool=\"a\"} 2\n");
    assert_eq!(
        missing(r#"max(joiner_leader)"#, &scrape),
        Vec::<String>::new()
    );
    assert_eq!(
        missing(
            r#"sum by (zone) (karpenter_nodes_created_total{arch="x"})"#,
            &scrape
        )
        .len(),
        2
    );
}

fn value(scrape: &[Sample], name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    scrape
        .iter()
        .find(|s| {
            s.name == name
                && labels
                    .iter()
                    .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))
        })
        .map(|s| s.value)
}

fn label_names(scrape: &[Sample], name: &str) -> BTreeSet<String> {
    scrape
        .iter()
        .filter(|s| s.name == name)
        .flat_map(|s| s.labels.keys().cloned())
        .collect()
}

fn names(list: &[&str]) -> BTreeSet<String> {
    list.iter().map(|s| s.to_string()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provisioning_step_exports_karpenter_s_series_the_dashboard_and_the_certified_gap() {
    let server = ApiServer::start().await;
    let client = server.client();
    joinerproc::namespace(&client, SYSTEM_NS).await;
    joinerproc::weights_for_a_seconds_clock(&client, json!({})).await;
    joinerproc::install_nodepool(
        &client,
        json!({"requirements": joinerproc::general_purpose(true), "expireAfter": "720h"}),
        json!({"limits": {"cpu": "1000"}}),
    )
    .await;
    let dir = tempdir::Dir::new("metrics");
    let joiner = Joiner::start(
        &server,
        &dir,
        "joiner-a",
        &["--disable-leader-election", "--disable-disruption"],
    );
    let sim = KubeSim::start(client.clone(), Duration::from_millis(300));
    sim.deploy(Deployment {
        namespace: NS.into(),
        name: "web".into(),
        replicas: 6,
        cpu: "700m".into(),
        memory: "1Gi".into(),
    });
    let settled = eventually(
        Duration::from_secs(30),
        || async { census(&client, NS).await.expect("census") },
        |c| c.pods_running == 6 && c.pods_pending == 0 && c.claims == c.nodes && c.nodes >= 1,
    )
    .await
    .unwrap_or_else(|c| panic!("not settled: {c:?}\n{}", joiner.log()));
    // the bound comes after the launches, and the pods' start after the kubelet's
    let scraped = eventually(
        Duration::from_secs(15),
        || async { samples(&joiner.metrics().await) },
        |s| {
            value(
                s,
                "joiner_provisioning_bounds_total",
                &[("outcome", "certified")],
            )
            .is_some_and(|v| v >= 1.0)
                && value(s, "karpenter_pods_startup_duration_seconds_count", &[])
                    .is_some_and(|v| v >= 6.0)
                && value(s, "karpenter_pods_state", &[("phase", "Running")]).is_some()
        },
    )
    .await
    .unwrap_or_else(|s| {
        panic!(
            "no certified bound or pod starts: {:?}\n{}",
            s.iter()
                .filter(|x| x.name.starts_with("joiner_provisioning_bounds")
                    || x.name.starts_with("karpenter_pods_startup"))
                .collect::<Vec<_>>(),
            joiner.log()
        )
    });

    // (b) the provisioning plan's gap to its certified bound is a number below 1
    let gap = value(
        &scraped,
        "joiner_solver_gap_ratio",
        &[("phase", "provisioning")],
    )
    .expect("provisioning gap");
    assert!((0.0..1.0).contains(&gap), "gap {gap}");
    let bound = value(
        &scraped,
        "joiner_bound_dollars_per_hour",
        &[("phase", "provisioning")],
    )
    .expect("bound");
    let objective = value(
        &scraped,
        "joiner_plan_objective_dollars_per_hour",
        &[("phase", "provisioning")],
    )
    .expect("objective");
    assert!(
        bound > 0.0 && bound <= objective + 1e-9,
        "bound {bound}, objective {objective}"
    );
    assert!((gap - (objective - bound) / objective).abs() < 1e-9);

    // (c) Karpenter's series with Karpenter's labels
    assert_eq!(
        label_names(&scraped, "karpenter_nodes_allocatable"),
        names(&[
            "node_name",
            "nodepool",
            "zone",
            "region",
            "instance_type",
            "arch",
            "os",
            "capacity_type",
            "managed",
            "resource_type"
        ])
    );
    for resource in ["cpu", "memory", "pods"] {
        let have = |metric| {
            value(
                &scraped,
                metric,
                &[
                    ("nodepool", "default"),
                    ("resource_type", resource),
                    ("managed", "true"),
                ],
            )
            .unwrap_or(0.0)
        };
        assert!(have("karpenter_nodes_allocatable") > 0.0, "{resource}");
        assert!(
            have("karpenter_nodes_total_pod_requests") > 0.0,
            "{resource}"
        );
    }
    assert_eq!(
        label_names(&scraped, "karpenter_pods_state"),
        names(&[
            "name",
            "namespace",
            "owner",
            "node",
            "scheduled",
            "nodepool",
            "zone",
            "arch",
            "capacity_type",
            "instance_type",
            "phase",
            "managed"
        ])
    );
    let running_web = scraped
        .iter()
        .filter(|s| {
            s.name == "karpenter_pods_state"
                && s.labels["namespace"] == NS
                && s.labels["phase"] == "Running"
                && s.labels["nodepool"] == "default"
                && s.labels["scheduled"] == "true"
                && s.labels["owner"].starts_with("/apis/apps/v1/namespaces/default/replicasets/")
        })
        .count();
    assert_eq!(running_web, 6);
    let claims = settled.claims as f64;
    let created = [
        ("reason", "provisioned"),
        ("nodepool", "default"),
        ("min_values_relaxed", "false"),
    ];
    assert_eq!(
        value(&scraped, "karpenter_nodeclaims_created_total", &created),
        Some(claims)
    );
    let nodes_created: f64 = scraped
        .iter()
        .filter(|s| s.name == "karpenter_nodes_created_total")
        .inspect(|s| {
            assert_eq!(
                s.labels.keys().cloned().collect::<BTreeSet<_>>(),
                names(&["nodepool", "zone"])
            )
        })
        .map(|s| s.value)
        .sum();
    assert_eq!(nodes_created, settled.nodes as f64);
    let pool_cpu = [("nodepool", "default"), ("resource_type", "cpu")];
    assert_eq!(
        value(&scraped, "karpenter_nodepools_limit", &pool_cpu),
        Some(1000.0)
    );
    assert!(value(&scraped, "karpenter_nodepools_usage", &pool_cpu).unwrap_or(0.0) >= 6.0 * 0.7);
    assert_eq!(
        value(
            &scraped,
            "karpenter_nodepools_usage",
            &[("nodepool", "default"), ("resource_type", "nodes")]
        ),
        Some(claims)
    );
    assert_eq!(
        value(&scraped, "karpenter_cluster_state_synced", &[]),
        Some(1.0)
    );
    assert_eq!(
        value(&scraped, "karpenter_cluster_state_node_count", &[]),
        Some(settled.nodes as f64)
    );
    assert_eq!(
        label_names(&scraped, "karpenter_build_info"),
        names(&["version", "goarch"])
    );
    assert_eq!(
        label_names(&scraped, "karpenter_voluntary_disruption_decisions_total"),
        names(&["decision", "reason", "consolidation_type"])
    );
    assert_eq!(
        label_names(&scraped, "karpenter_nodeclaims_disrupted_total"),
        names(&[
            "reason",
            "nodepool",
            "capacity_type",
            "consolidation_policy",
            "termination_mode"
        ])
    );
    let median = value(
        &scraped,
        "karpenter_pods_startup_duration_seconds",
        &[("quantile", "0.5")],
    )
    .expect("startup median");
    assert!((0.0..30.0).contains(&median), "{median}");
    let cost: f64 = scraped
        .iter()
        .filter(|s| {
            s.name == "joiner_cluster_cost_dollars_per_hour" && s.labels["nodepool"] == "default"
        })
        .map(|s| s.value)
        .sum();
    assert!(cost > 0.0, "cluster cost {cost}");

    // (a) every query of the shipped dashboard names series and labels the scrape has
    let queries = dashboard_queries();
    assert!(queries.len() >= 15, "{} queries", queries.len());
    let gaps: Vec<String> = queries.iter().flat_map(|q| missing(q, &scraped)).collect();
    assert_eq!(gaps, Vec::<String>::new());
    sim.stop().await;
}
