//! Live catalog discovery against moto (us-east-1): the catalog built from DescribeInstanceTypes,
//! DescribeInstanceTypeOfferings, DescribeAvailabilityZones and DescribeSpotPriceHistory must agree
//! with the bundled catalog, which was built offline from the same moto data joined the same way.
//! moto has no Pricing API, so on-demand prices are taken from the bundled catalog, and its spot prices
//! are a fake 0.00001 for everything: they are checked as read, never as prices.

#[path = "support/moto.rs"]
mod moto;

use std::collections::BTreeSet;
use std::process::Command;

use joiner::catalog::{CapacityType, Catalog, InstanceType};
use joiner::cloud::aws::discovery;
use moto::Moto;

const REGION: &str = "us-east-1";

fn find<'a>(c: &'a Catalog, name: &str) -> &'a InstanceType {
    c.instance_types
        .iter()
        .find(|t| t.name == name)
        .unwrap_or_else(|| panic!("{name} in the catalog"))
}

fn zones(t: &InstanceType, ct: CapacityType) -> BTreeSet<&str> {
    t.offerings
        .iter()
        .filter(|o| o.capacity_type == ct)
        .map(|o| o.zone.as_str())
        .collect()
}

/// A type without its offerings: hardware, capacity and labels only.
fn hardware(t: &InstanceType) -> InstanceType {
    InstanceType {
        offerings: vec![],
        ..t.clone()
    }
}

#[tokio::test]
async fn live_catalog_from_moto_agrees_with_the_bundled_catalog() {
    let moto = Moto::start();
    let bundled = Catalog::bundled(REGION).expect("bundled catalog");
    let on_demand = discovery::on_demand_prices_of(&bundled);
    let (live, report) = discovery::discover(&moto.clients(REGION, "test"), REGION, &on_demand)
        .await
        .expect("discovery");

    let m5 = find(&live, "m5.large");
    assert_eq!(
        (m5.vcpu, m5.memory_mib, m5.max_enis, m5.ipv4_per_eni),
        (2, 8192, Some(3), Some(10))
    );
    // moto's us-east-1 data offers m5.large in zone IDs use1-az1,2,4,5,6, which its
    // DescribeAvailabilityZones names 1b, 1c, 1d, 1f, 1a; use1-az3 (1e) has only 68 types.
    let m5_zones = zones(m5, CapacityType::OnDemand);
    assert_eq!(
        m5_zones,
        BTreeSet::from([
            "us-east-1a",
            "us-east-1b",
            "us-east-1c",
            "us-east-1d",
            "us-east-1f"
        ])
    );
    assert!(m5
        .offerings
        .iter()
        .filter(|o| o.capacity_type == CapacityType::OnDemand)
        .all(|o| o.price == 0.096));
    // inf2.xlarge (use1-az2,4,5,6) tells the joins apart: by zone ID it is in 1c, 1d, 1f, 1a; the zone
    // names inside moto's offering data would put it in 1a, 1b, 1c, 1f.
    let inf2_zones = zones(find(&live, "inf2.xlarge"), CapacityType::OnDemand);
    assert_eq!(
        inf2_zones,
        BTreeSet::from(["us-east-1a", "us-east-1c", "us-east-1d", "us-east-1f"])
    );

    // Same types kept, same hardware and the same on-demand zones as the offline build.
    let names = |c: &Catalog| {
        c.instance_types
            .iter()
            .map(|t| t.name.clone())
            .collect::<BTreeSet<_>>()
    };
    assert_eq!(names(&live), names(&bundled));
    assert_eq!(
        (report.types_kept, report.types_described),
        (bundled.instance_types.len(), 1395)
    );
    for b in &bundled.instance_types {
        let l = find(&live, &b.name);
        assert_eq!(hardware(l), hardware(b), "{}", b.name);
        assert_eq!(
            zones(l, CapacityType::OnDemand),
            zones(b, CapacityType::OnDemand),
            "{}",
            b.name
        );
    }
    for name in ["p5.48xlarge", "m6g.large", "g5.xlarge", "inf2.xlarge"] {
        let (l, b) = (find(&live, name), find(&bundled, name));
        assert_eq!(
            (l.arch, &l.gpu, l.max_enis),
            (b.arch, &b.gpu, b.max_enis),
            "{name}"
        );
    }
    assert!(
        find(&live, "g5.xlarge").gpu.is_some() && find(&live, "p5.48xlarge").max_enis == Some(2)
    );

    // Spot prices were read and turned into offerings; their value is moto's placeholder.
    assert!(
        report.spot_prices_read > 1000 && report.spot_offerings > 1000,
        "{report}"
    );
    assert_eq!(report.spot_records_skipped, 0);
}

/// `joiner catalog live ARGS` against moto with static credentials from the environment.
fn joiner_live(moto: &Moto, out: &std::path::Path, on_demand: &str) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_joiner"))
        .args([
            "catalog",
            "live",
            "--region",
            REGION,
            "--endpoint-url",
            &moto.endpoint,
            "--on-demand",
            on_demand,
        ])
        .arg("--out")
        .arg(out)
        .env("AWS_ACCESS_KEY_ID", "testing")
        .env("AWS_SECRET_ACCESS_KEY", "testing")
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .env("AWS_CONFIG_FILE", "/nonexistent/joiner-test")
        .env("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/joiner-test")
        .env_remove("AWS_PROFILE")
        .output()
        .expect("joiner runs")
}

#[test]
fn catalog_live_writes_a_catalog_with_bundled_on_demand_prices() {
    let moto = Moto::start();
    let out = std::env::temp_dir().join(format!("joiner-catalog-live-{}.json", std::process::id()));
    let run = joiner_live(&moto, &out, "bundled");
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{stderr}");
    assert!(
        stderr.contains("catalog us-east-1 (live): kept"),
        "{stderr}"
    );
    let catalog = Catalog::from_file(&out).expect("a valid catalog file");
    let _ = std::fs::remove_file(&out);
    let m5 = find(&catalog, "m5.large");
    assert_eq!((m5.vcpu, m5.memory_mib), (2, 8192));
    assert_eq!(zones(m5, CapacityType::OnDemand).len(), 5);
    let provenance = catalog.provenance.expect("provenance");
    let source = provenance["sources"]["on_demand"]
        .as_str()
        .unwrap_or_default();
    assert!(source.contains("bundled catalog"), "{provenance}");
    assert!(
        provenance["discovered_at"].is_string()
            && provenance["counts"]["types_kept"].as_u64() > Some(1000)
    );
}

#[test]
fn catalog_live_reports_a_pricing_api_failure() {
    // moto does not implement the Price List API: the command must fail and say which call failed.
    let moto = Moto::start();
    let out = std::env::temp_dir().join(format!(
        "joiner-catalog-live-fail-{}.json",
        std::process::id()
    ));
    let run = joiner_live(&moto, &out, "pricing-api");
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(!run.status.success(), "{stderr}");
    assert!(stderr.contains("pricing:GetProducts"), "{stderr}");
    assert!(!out.exists());
}
