//! A simulated cloud: launches succeed at once (the simulator adds boot latency on the cluster
//! side) unless a scripted insufficient-capacity window covers the offering, in which case the
//! next offering of the request is tried, as CreateFleet does with overrides. Spot instances get an
//! interruption time drawn from their Spot Advisor band (seeded), which the simulator turns into
//! interruption warnings. It also keeps the bill: every instance is charged its price from launch
//! to termination. The clock is the caller's: [`SimCloud::set_now`] moves it.

use std::collections::BTreeMap;
use std::sync::Mutex;

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Exp};

use super::{
    CloudError, CloudProvider, Instance, InstanceState, LaunchRequest, Launched, OfferingKey,
};
use crate::catalog::{CapacityType, Catalog};

/// Launches of matching offerings fail in `[from, until)` seconds.
#[derive(Debug, Clone, PartialEq)]
pub struct IceWindow {
    pub from: f64,
    pub until: f64,
    pub instance_type: String,
    pub zone: Option<String>,
    pub capacity_type: Option<CapacityType>,
}

impl IceWindow {
    fn covers(&self, key: &OfferingKey, now: f64) -> bool {
        (self.from..self.until).contains(&now)
            && self.instance_type == key.instance_type
            && self.zone.as_ref().is_none_or(|z| *z == key.zone)
            && self.capacity_type.is_none_or(|c| c == key.capacity_type)
    }
}

/// Monthly interruption frequency of each Spot Advisor band (`<5%` .. `>20%`), at the band's middle
/// (25% for the open-ended top band).
const BAND_MONTHLY: [f64; 5] = [0.025, 0.075, 0.125, 0.175, 0.25];
const MONTH_SECONDS: f64 = 30.0 * 24.0 * 3600.0;

struct Inner {
    now: f64,
    next_id: u64,
    instances: BTreeMap<String, Instance>,
    /// Warnings drawn since the caller last took them.
    new_interruptions: Vec<(String, f64)>,
    /// Instances being billed: price and start.
    billed: BTreeMap<String, (f64, f64)>,
    /// Dollars of instances already terminated.
    spent: f64,
    rng: ChaCha8Rng,
}

pub struct SimCloud {
    catalog: Catalog,
    ice: Vec<IceWindow>,
    /// Multiplies the band rates; 0 turns random interruptions off.
    rate_scale: f64,
    inner: Mutex<Inner>,
}

impl SimCloud {
    pub fn new(catalog: Catalog, ice: Vec<IceWindow>, rate_scale: f64, seed: u64) -> SimCloud {
        let inner = Inner {
            now: 0.0,
            next_id: 0,
            instances: BTreeMap::new(),
            new_interruptions: vec![],
            billed: BTreeMap::new(),
            spent: 0.0,
            rng: ChaCha8Rng::seed_from_u64(seed),
        };
        SimCloud {
            catalog,
            ice,
            rate_scale,
            inner: Mutex::new(inner),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // a panic while holding the lock leaves plain data behind; keep using it
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn set_now(&self, now: f64) {
        self.lock().now = now;
    }

    /// Numbers instances from `base` on: providers in different processes (a controller and the
    /// replica that takes over from it) must not hand out the same instance ids.
    pub fn number_from(&self, base: u64) {
        self.lock().next_id = base;
    }

    /// Interruption warnings drawn for instances launched since the last call: (instance, time).
    pub fn take_new_interruptions(&self) -> Vec<(String, f64)> {
        std::mem::take(&mut self.lock().new_interruptions)
    }

    /// Bills an instance that was running before the simulation started, from now.
    pub fn adopt(&self, id: &str, price: f64) {
        let mut inner = self.lock();
        let now = inner.now;
        inner.billed.insert(id.to_string(), (price, now));
    }

    /// Instances billed now and the sum of their hourly prices.
    pub fn billing(&self) -> (usize, f64) {
        let inner = self.lock();
        (
            inner.billed.len(),
            inner.billed.values().map(|b| b.0).sum::<f64>() + 0.0,
        )
    }

    /// When a billed instance started, seconds.
    pub fn billed_since(&self, id: &str) -> Option<f64> {
        self.lock().billed.get(id).map(|b| b.1)
    }

    /// Dollars billed up to `now`, terminated and running instances together.
    pub fn total_cost(&self, now: f64) -> f64 {
        let inner = self.lock();
        inner.spent
            + inner
                .billed
                .values()
                .map(|(price, since)| price * (now - since) / 3600.0)
                .sum::<f64>()
    }

    fn offered(&self, key: &OfferingKey) -> Option<f64> {
        let it = self
            .catalog
            .instance_types
            .iter()
            .find(|t| t.name == key.instance_type)?;
        let o = it
            .offerings
            .iter()
            .find(|o| o.zone == key.zone && o.capacity_type == key.capacity_type && o.available)?;
        Some(o.price)
    }

    fn band(&self, key: &OfferingKey) -> Option<u8> {
        let it = self
            .catalog
            .instance_types
            .iter()
            .find(|t| t.name == key.instance_type)?;
        it.offerings
            .iter()
            .find(|o| o.zone == key.zone && o.capacity_type == key.capacity_type)?
            .interruption_band
    }

    fn draw_interruption(&self, inner: &mut Inner, key: &OfferingKey) -> Option<f64> {
        if key.capacity_type != CapacityType::Spot || self.rate_scale <= 0.0 {
            return None;
        }
        // an unknown band is taken as the middle one
        let p = BAND_MONTHLY[usize::from(self.band(key).unwrap_or(2)).min(4)];
        let rate = -(1.0 - p).ln() / MONTH_SECONDS * self.rate_scale;
        let exp = Exp::new(rate).ok()?;
        Some(inner.now + exp.sample(&mut inner.rng))
    }
}

impl CloudProvider for SimCloud {
    async fn launch(&self, request: &LaunchRequest) -> Result<Launched, CloudError> {
        if request.offerings.is_empty() {
            return Err(CloudError::NoOfferings(request.claim.clone()));
        }
        let mut inner = self.lock();
        let now = inner.now;
        let mut insufficient = Vec::new();
        for o in &request.offerings {
            let key = OfferingKey::from(o);
            let Some(price) = self
                .offered(&key)
                .filter(|_| !self.ice.iter().any(|w| w.covers(&key, now)))
            else {
                insufficient.push(key);
                continue;
            };
            inner.next_id += 1;
            let id = format!("i-{:017x}", inner.next_id);
            let instance = Instance {
                id: id.clone(),
                claim: request.claim.clone(),
                nodepool: request.nodepool.clone(),
                offering: crate::optimizer::OfferingRef { price, ..o.clone() },
                state: InstanceState::Running,
            };
            if let Some(at) = self.draw_interruption(&mut inner, &key) {
                inner.new_interruptions.push((id.clone(), at));
            }
            inner.billed.insert(id.clone(), (price, now));
            inner.instances.insert(id, instance.clone());
            return Ok(Launched {
                instance,
                insufficient,
            });
        }
        Err(CloudError::InsufficientCapacity {
            claim: request.claim.clone(),
            offerings: insufficient,
        })
    }

    async fn delete(&self, id: &str) -> Result<(), CloudError> {
        let mut inner = self.lock();
        if let Some(i) = inner.instances.get_mut(id) {
            i.state = InstanceState::Terminated;
        }
        let now = inner.now;
        if let Some((price, since)) = inner.billed.remove(id) {
            inner.spent += price * (now - since) / 3600.0;
        }
        Ok(())
    }

    async fn get(&self, id: &str) -> Result<Instance, CloudError> {
        self.lock()
            .instances
            .get(id)
            .cloned()
            .ok_or_else(|| CloudError::NotFound(id.to_string()))
    }

    async fn list(&self) -> Result<Vec<Instance>, CloudError> {
        Ok(self
            .lock()
            .instances
            .values()
            .filter(|i| i.state != InstanceState::Terminated)
            .cloned()
            .collect())
    }

    async fn catalog(&self) -> Result<Catalog, CloudError> {
        Ok(self.catalog.clone())
    }

    /// The simulated cloud launches no images into no subnets: nothing of an instance can drift
    /// on the provider's side, but a terminated or unknown instance is an error as in EC2.
    async fn drifted(&self, id: &str) -> Result<Option<String>, CloudError> {
        self.get(id).await.map(|_| None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::{Arch, InstanceType, Offering};
    use crate::optimizer::OfferingRef;

    fn catalog() -> Catalog {
        let offering = |zone: &str, ct, price| Offering {
            zone: zone.into(),
            capacity_type: ct,
            price,
            available: true,
            price_estimated: false,
            interruption_band: Some(4),
        };
        let it = |name: &str| InstanceType {
            offerings: vec![
                offering("z1", CapacityType::Spot, 0.03),
                offering("z1", CapacityType::OnDemand, 0.1),
            ],
            ..InstanceType::new(name, 2, 8192, Arch::Amd64)
        };
        Catalog {
            region: "test".into(),
            instance_types: vec![it("a.large"), it("b.large")],
            provenance: None,
        }
    }

    fn request(types: &[&str]) -> LaunchRequest {
        let offerings = types
            .iter()
            .map(|t| OfferingRef {
                instance_type: t.to_string(),
                zone: "z1".into(),
                capacity_type: CapacityType::Spot,
                price: 0.0,
            })
            .collect();
        LaunchRequest {
            claim: "c1".into(),
            nodepool: "default".into(),
            offerings,
            template: Default::default(),
        }
    }

    #[test]
    fn an_ice_window_moves_the_launch_to_the_next_offering_and_reports_the_first() {
        let ice = vec![IceWindow {
            from: 0.0,
            until: 60.0,
            instance_type: "a.large".into(),
            zone: None,
            capacity_type: None,
        }];
        let cloud = SimCloud::new(catalog(), ice, 0.0, 1);
        let got = pollster::block_on(cloud.launch(&request(&["a.large", "b.large"]))).unwrap();
        assert_eq!(got.instance.offering.instance_type, "b.large");
        assert_eq!(
            got.instance.offering.price, 0.03,
            "the price comes from the catalog"
        );
        assert_eq!(got.insufficient.len(), 1);
        let err = pollster::block_on(cloud.launch(&request(&["a.large"]))).unwrap_err();
        assert!(matches!(err, CloudError::InsufficientCapacity { .. }));
        cloud.set_now(60.0);
        let got = pollster::block_on(cloud.launch(&request(&["a.large"]))).unwrap();
        assert_eq!(
            got.instance.offering.instance_type, "a.large",
            "the window has closed"
        );
    }

    #[test]
    fn interruption_times_follow_the_seed_and_the_band() {
        let draw = |seed| {
            let cloud = SimCloud::new(catalog(), vec![], 1.0, seed);
            let got = pollster::block_on(cloud.launch(&request(&["a.large"]))).unwrap();
            let drawn = cloud.take_new_interruptions();
            assert_eq!(drawn.len(), 1);
            assert_eq!(drawn[0].0, got.instance.id);
            drawn[0].1
        };
        assert_eq!(draw(7), draw(7));
        assert_ne!(draw(7), draw(8));
        // band 4 is 25% a month: the mean time to interruption is about 3.5 months
        let mean: f64 = (0..400).map(draw).sum::<f64>() / 400.0;
        let expected = MONTH_SECONDS / -(0.75f64).ln();
        assert!(
            (mean / expected - 1.0).abs() < 0.2,
            "mean {mean} vs {expected}"
        );
    }
}
