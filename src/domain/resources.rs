//! Resource lists (`cpu`, `memory`, `pods`, `ephemeral-storage`, GPUs, any extended resource) as
//! exact integer quantities, with the arithmetic the scheduler needs: sums, differences and "fits
//! within".

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use super::quantity::Quantity;

pub const CPU: &str = "cpu";
pub const MEMORY: &str = "memory";
pub const PODS: &str = "pods";
pub const EPHEMERAL_STORAGE: &str = "ephemeral-storage";
pub const NVIDIA_GPU: &str = "nvidia.com/gpu";
pub const AMD_GPU: &str = "amd.com/gpu";

/// A map from resource name to quantity. Absent names are zero.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Resources(BTreeMap<String, Quantity>);

impl Resources {
    pub fn new() -> Self {
        Resources::default()
    }

    pub fn get(&self, name: &str) -> Quantity {
        self.0.get(name).copied().unwrap_or_default()
    }

    pub fn set(&mut self, name: impl Into<String>, q: Quantity) {
        self.0.insert(name.into(), q);
    }

    /// Sets `name`, or drops it when `q` is zero (so an absent and a zero amount compare equal).
    pub fn set_or_remove(&mut self, name: &str, q: Quantity) {
        if q.milli() == 0 {
            self.0.remove(name);
        } else {
            self.set(name, q);
        }
    }

    pub fn with(mut self, name: &str, q: Quantity) -> Self {
        self.set(name, q);
        self
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, Quantity)> {
        self.0.iter().map(|(k, v)| (k.as_str(), *v))
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.0.keys().map(String::as_str)
    }

    pub fn is_empty(&self) -> bool {
        self.0.values().all(|q| q.milli() == 0)
    }

    pub fn add(&mut self, other: &Resources) {
        for (k, v) in other.iter() {
            let cur = self.get(k);
            self.0.insert(k.to_string(), cur.saturating_add(v));
        }
    }

    pub fn sub(&mut self, other: &Resources) {
        for (k, v) in other.iter() {
            let cur = self.get(k);
            self.0.insert(k.to_string(), cur.saturating_sub(v));
        }
    }

    pub fn plus(&self, other: &Resources) -> Resources {
        let mut r = self.clone();
        r.add(other);
        r
    }

    pub fn minus(&self, other: &Resources) -> Resources {
        let mut r = self.clone();
        r.sub(other);
        r
    }

    /// Element-wise maximum (used for init containers).
    pub fn max_with(&mut self, other: &Resources) {
        for (k, v) in other.iter() {
            if v > self.get(k) {
                self.0.insert(k.to_string(), v);
            }
        }
    }

    /// True when every requested amount is within `capacity` (absent names count as zero).
    pub fn fits_in(&self, capacity: &Resources) -> bool {
        self.iter()
            .all(|(k, v)| v.milli() <= 0 || v <= capacity.get(k))
    }

    /// The names whose request exceeds `capacity`.
    pub fn exceeding<'a>(&'a self, capacity: &'a Resources) -> impl Iterator<Item = &'a str> + 'a {
        self.iter()
            .filter(move |(k, v)| v.milli() > 0 && *v > capacity.get(k))
            .map(|(k, _)| k)
    }

    pub fn first_negative(&self) -> Option<&str> {
        self.iter().find(|(_, v)| v.is_negative()).map(|(k, _)| k)
    }
}

impl FromIterator<(String, Quantity)> for Resources {
    fn from_iter<T: IntoIterator<Item = (String, Quantity)>>(iter: T) -> Self {
        Resources(iter.into_iter().collect())
    }
}

impl fmt::Display for Resources {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self
            .iter()
            .map(|(k, v)| {
                if k == MEMORY || k == EPHEMERAL_STORAGE {
                    format!("{k}={}", v.to_binary())
                } else {
                    format!("{k}={v}")
                }
            })
            .collect();
        f.write_str(&parts.join(","))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(pairs: &[(&str, &str)]) -> Resources {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), Quantity::parse(v).unwrap()))
            .collect()
    }

    #[test]
    fn fits_treats_absent_capacity_as_zero() {
        assert!(r(&[("cpu", "1")]).fits_in(&r(&[("cpu", "2")])));
        assert!(!r(&[("nvidia.com/gpu", "1")]).fits_in(&r(&[("cpu", "2")])));
        assert!(r(&[("nvidia.com/gpu", "0")]).fits_in(&r(&[("cpu", "2")])));
    }

    #[test]
    fn add_sub_and_max() {
        let mut a = r(&[("cpu", "1"), ("memory", "1Gi")]);
        a.add(&r(&[("cpu", "500m")]));
        assert_eq!(a.get(CPU), Quantity::from_milli(1500));
        a.sub(&r(&[("memory", "512Mi")]));
        assert_eq!(a.get(MEMORY), Quantity::from_mib(512));
        a.max_with(&r(&[("cpu", "2"), ("memory", "1")]));
        assert_eq!(a.get(CPU), Quantity::from_units(2));
        assert_eq!(a.get(MEMORY), Quantity::from_mib(512));
    }
}
