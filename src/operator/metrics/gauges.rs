//! Two metric shapes prometheus-client lacks: a gauge family whose series are replaced as a
//! whole at every step (series of nodes and pods that are gone disappear), and a summary with
//! Karpenter's quantiles over a sliding window.

use std::collections::{HashSet, VecDeque};
use std::hash::Hash;
use std::sync::atomic::AtomicU64;
use std::sync::Mutex;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

type F64Gauge = Gauge<f64, AtomicU64>;

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A gauge family replaced whole: series not in the latest set are removed after the new values
/// are set, so a scrape never sees a half-written set.
pub struct GaugeSet<L> {
    pub family: Family<L, F64Gauge>,
    last: Mutex<HashSet<L>>,
}

impl<L: Clone + Hash + Eq> Default for GaugeSet<L> {
    fn default() -> Self {
        GaugeSet {
            family: Family::default(),
            last: Mutex::new(HashSet::new()),
        }
    }
}

impl<L: Clone + Hash + Eq + EncodeLabelSet + std::fmt::Debug> GaugeSet<L> {
    /// Sets every series of `values` (a label set given twice is summed) and removes the others.
    pub fn replace(&self, values: impl IntoIterator<Item = (L, f64)>) {
        let mut now: std::collections::HashMap<L, f64> = std::collections::HashMap::new();
        for (l, v) in values {
            *now.entry(l).or_default() += v;
        }
        for (l, v) in &now {
            self.family.get_or_create(l).set(*v);
        }
        let mut last = lock(&self.last);
        for gone in last.iter().filter(|l| !now.contains_key(*l)) {
            self.family.remove(gone);
        }
        *last = now.into_keys().collect();
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Quantile {
    pub quantile: &'static str,
}

/// Karpenter's summary objectives.
const QUANTILES: [(&str, f64); 5] = [
    ("0", 0.0),
    ("0.5", 0.5),
    ("0.9", 0.9),
    ("0.99", 0.99),
    ("1", 1.0),
];
/// Observations count towards the quantiles this long (client_golang's default MaxAge).
const WINDOW_SECONDS: f64 = 600.0;
/// At most this many observations are kept in the window.
const WINDOW_MAX: usize = 10_000;

/// A summary exposed as Prometheus reads one: `name{quantile=...}` over the last ten minutes,
/// `name_sum` and `name_count` over all time. The quantile series are gauges on the wire (the
/// client library has no summary type); queries cannot tell the difference.
#[derive(Default)]
pub struct Summary {
    quantiles: Family<Quantile, F64Gauge>,
    sum: F64Gauge,
    count: F64Gauge,
    window: Mutex<VecDeque<(f64, f64)>>,
}

impl Summary {
    pub fn register(&self, r: &mut Registry, name: &str, help: &str) {
        r.register(name, help, self.quantiles.clone());
        r.register(
            format!("{name}_sum"),
            format!("Sum of {name}"),
            self.sum.clone(),
        );
        r.register(
            format!("{name}_count"),
            format!("Count of {name}"),
            self.count.clone(),
        );
    }

    /// Records one value at time `now` (seconds on the host's clock).
    pub fn observe(&self, value: f64, now: f64) {
        self.sum.inc_by(value);
        self.count.inc_by(1.0);
        let mut w = lock(&self.window);
        w.push_back((now, value));
        while w.len() > WINDOW_MAX {
            w.pop_front();
        }
    }

    /// Drops observations older than the window and sets the quantiles (NaN when it is empty,
    /// as client_golang reports them).
    pub fn publish(&self, now: f64) {
        let mut w = lock(&self.window);
        while w.front().is_some_and(|(t, _)| now - t > WINDOW_SECONDS) {
            w.pop_front();
        }
        let mut values: Vec<f64> = w.iter().map(|(_, v)| *v).collect();
        values.sort_by(f64::total_cmp);
        for (label, q) in QUANTILES {
            let v = quantile(&values, q);
            self.quantiles
                .get_or_create(&Quantile { quantile: label })
                .set(v);
        }
    }
}

/// The nearest-rank quantile of sorted `values`; NaN for none.
fn quantile(values: &[f64], q: f64) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    let rank = (q * (values.len() - 1) as f64).round() as usize;
    values[rank.min(values.len() - 1)]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_are_nearest_ranks_and_old_values_leave_the_window() {
        let s = Summary::default();
        for (i, v) in [5.0, 1.0, 3.0, 2.0, 4.0].into_iter().enumerate() {
            s.observe(v, i as f64);
        }
        s.publish(10.0);
        let q = |l| s.quantiles.get_or_create(&Quantile { quantile: l }).get();
        assert_eq!((q("0"), q("0.5"), q("1")), (1.0, 3.0, 5.0));
        s.publish(10.0 + WINDOW_SECONDS);
        assert!(q("0.5").is_nan());
        assert_eq!((s.sum.get(), s.count.get()), (15.0, 5.0));
    }

    #[test]
    fn a_replaced_set_drops_the_series_no_longer_given() {
        let g: GaugeSet<Quantile> = GaugeSet::default();
        let q = |quantile| Quantile { quantile };
        g.replace([(q("a"), 1.0), (q("b"), 2.0), (q("b"), 1.0)]);
        g.replace([(q("b"), 4.0)]);
        let mut out = String::new();
        let mut r = Registry::default();
        r.register("x", "x", g.family.clone());
        prometheus_client::encoding::text::encode(&mut out, &r).unwrap();
        assert!(out.contains("x{quantile=\"b\"} 4.0"), "{out}");
        assert!(!out.contains("quantile=\"a\""), "{out}");
    }
}
