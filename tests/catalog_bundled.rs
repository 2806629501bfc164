//! The catalogs bundled into the binary (fixtures/catalogs, built by `joiner catalog build`) load and
//! hold plausible, spot-checked facts. The expected values were read from the AWS reference data
//! (fixtures/catalogs/README.md) when the catalogs were built and are hard-coded here, because CI need not have that folder.

use joiner::catalog::{Arch, CapacityType, Catalog, InstanceType};
use joiner::domain::Quantity;

fn bundled(region: &str) -> Catalog {
    Catalog::bundled(region).unwrap_or_else(|e| panic!("bundled catalog {region}: {e}"))
}

fn find<'a>(c: &'a Catalog, name: &str) -> &'a InstanceType {
    c.instance_types
        .iter()
        .find(|t| t.name == name)
        .unwrap_or_else(|| panic!("{} has no {name}", c.region))
}

/// The price of `name` in `zone` for `ct`, and whether it is an estimate.
fn price(c: &Catalog, name: &str, zone: &str, ct: CapacityType) -> (f64, bool) {
    let o = find(c, name)
        .offerings
        .iter()
        .find(|o| o.zone == zone && o.capacity_type == ct)
        .unwrap_or_else(|| panic!("{name} has no {ct:?} offering in {zone}"));
    (o.price, o.price_estimated)
}

#[test]
fn every_bundled_catalog_loads_and_is_sane() {
    for (region, zones) in [
        (
            "us-east-1",
            &[
                "us-east-1a",
                "us-east-1b",
                "us-east-1c",
                "us-east-1d",
                "us-east-1e",
                "us-east-1f",
            ][..],
        ),
        (
            "us-west-2",
            &["us-west-2a", "us-west-2b", "us-west-2c", "us-west-2d"][..],
        ),
        ("eu-west-1", &["eu-west-1a", "eu-west-1b", "eu-west-1c"][..]),
    ] {
        let c = bundled(region);
        assert_eq!(c.region, region);
        assert!(c.provenance.is_some(), "{region}: no provenance");
        let names: Vec<&str> = c.instance_types.iter().map(|t| t.name.as_str()).collect();
        assert!(
            names.windows(2).all(|w| w[0] < w[1]),
            "{region}: types not sorted by name"
        );
        for t in &c.instance_types {
            assert!(!t.offerings.is_empty(), "{region} {}: no offerings", t.name);
            assert!(
                !t.name.starts_with("mac"),
                "{region}: mac type {} kept",
                t.name
            );
            assert!(
                t.max_enis.is_some() && t.ipv4_per_eni.is_some(),
                "{region} {}: no ENI data",
                t.name
            );
            assert_eq!(
                t.capacity.get("ephemeral-storage"),
                Quantity::from_units(20 << 30),
                "{region} {}",
                t.name
            );
            for o in &t.offerings {
                assert!(
                    o.price > 0.0 && o.price.is_finite(),
                    "{region} {} {:?}: price {}",
                    t.name,
                    o,
                    o.price
                );
                assert!(o.available);
                assert!(
                    zones.contains(&o.zone.as_str()),
                    "{region} {}: unknown zone {}",
                    t.name,
                    o.zone
                );
                if o.capacity_type == CapacityType::OnDemand {
                    assert!(!o.price_estimated && o.interruption_band.is_none());
                }
            }
        }
    }
}

#[test]
fn type_counts_match_the_priced_data() {
    // us-east-1: 1,375 offered, less 26 without an on-demand price (r9g, r9gd, t8i, ...) and 9 mac.
    assert_eq!(bundled("us-east-1").instance_types.len(), 1340);
    // Only the SkyPilot subset has on-demand prices outside us-east-1.
    assert_eq!(bundled("us-west-2").instance_types.len(), 52);
    assert_eq!(bundled("eu-west-1").instance_types.len(), 53);
    assert!(bundled("us-east-1")
        .instance_types
        .iter()
        .all(|t| !t.name.starts_with("r9g")));
}

#[test]
fn m5_large_prices_are_the_observed_ones_in_named_zones() {
    use CapacityType::{OnDemand, Spot};
    let east = bundled("us-east-1");
    assert_eq!(
        price(&east, "m5.large", "us-east-1a", OnDemand),
        (0.096, false)
    );
    // us-east-1a is use1-az6 and us-east-1b is use1-az1 in the DescribeAvailabilityZones map.
    assert_eq!(
        price(&east, "m5.large", "us-east-1a", Spot),
        (0.0398, false)
    );
    assert_eq!(
        price(&east, "m5.large", "us-east-1b", Spot),
        (0.0375, false)
    );
    // m5.large is not offered in use1-az3 (us-east-1e).
    assert!(find(&east, "m5.large")
        .offerings
        .iter()
        .all(|o| o.zone != "us-east-1e"));

    let west = bundled("us-west-2");
    assert_eq!(
        price(&west, "m5.large", "us-west-2a", OnDemand),
        (0.096, false)
    );
    assert_eq!(
        price(&west, "m5.large", "us-west-2a", Spot),
        (0.0437, false)
    ); // usw2-az2
    assert_eq!(
        price(&west, "m5.large", "us-west-2b", Spot),
        (0.0463, false)
    ); // usw2-az1

    let eu = bundled("eu-west-1");
    assert_eq!(
        price(&eu, "m5.large", "eu-west-1a", OnDemand),
        (0.107, false)
    );
    assert_eq!(price(&eu, "m5.large", "eu-west-1a", Spot), (0.0702, false)); // euw1-az3
}

#[test]
fn gpu_type_has_hardware_and_an_estimated_spot_price() {
    let east = bundled("us-east-1");
    let p5 = find(&east, "p5.48xlarge");
    assert_eq!(
        (p5.vcpu, p5.memory_mib, p5.arch),
        (192, 2_097_152, Arch::Amd64)
    );
    let gpu = p5.gpu.as_ref().expect("p5 has GPUs");
    assert_eq!(
        (gpu.count, gpu.name.as_str(), gpu.memory_mib),
        (8, "H100", 81920)
    );
    // ENIs of the default network card only, so max pods is 2 * (50 - 1) + 2.
    assert_eq!(p5.max_enis, Some(2));
    assert_eq!(p5.pods(None), 100);
    assert_eq!(
        price(&east, "p5.48xlarge", "us-east-1a", CapacityType::OnDemand),
        (55.04, false)
    );
    // No observed spot price: 55.04 * (1 - 52/100) from Spot Advisor, flagged.
    assert_eq!(
        price(&east, "p5.48xlarge", "us-east-1a", CapacityType::Spot),
        (26.4192, true)
    );
    let trn1 = find(&east, "trn1.32xlarge");
    assert_eq!(
        trn1.capacity.get("aws.amazon.com/neuron"),
        Quantity::from_units(16)
    );
}

#[test]
fn bundled_m5_large_allocatable_matches_karpenter() {
    let east = bundled("us-east-1");
    let a = find(&east, "m5.large").allocatable(None);
    assert_eq!(a.get("cpu"), Quantity::from_milli(1930));
    assert_eq!(a.get("memory"), Quantity::from_mib(6903));
    assert_eq!(a.get("pods"), Quantity::from_units(29));
}
