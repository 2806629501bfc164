//! Replica schedules and scenario errors.

use super::*;

#[test]
fn a_diurnal_schedule_peaks_at_its_peak_and_bottoms_half_a_period_later() {
    let r = Replicas::Diurnal {
        min: 4,
        max: 20,
        peak: 14.0 * 3600.0,
        period: 24.0 * 3600.0,
        daily_scale: vec![],
    };
    assert_eq!(r.at(14.0 * 3600.0), 20);
    assert_eq!(r.at(2.0 * 3600.0), 4);
    assert_eq!(
        r.at(8.0 * 3600.0),
        12,
        "a quarter period from the peak is halfway"
    );
    assert_eq!(r.at(38.0 * 3600.0), 20, "it repeats every period");
}

#[test]
fn a_daily_scale_shrinks_the_swing_on_its_days_and_repeats() {
    let r = Replicas::Diurnal {
        min: 4,
        max: 20,
        peak: 14.0 * 3600.0,
        period: 24.0 * 3600.0,
        daily_scale: vec![1.0, 0.25],
    };
    let h = |d: f64, hour: f64| r.at((24.0 * d + hour) * 3600.0);
    assert_eq!(h(0.0, 14.0), 20, "day 0 at full swing");
    assert_eq!(h(1.0, 14.0), 8, "day 1: 4 + 16 * 0.25");
    assert_eq!(h(1.0, 2.0), 4, "the trough stays at min");
    assert_eq!(h(2.0, 14.0), 20, "day 2 is day 0 again");
}

#[test]
fn a_bad_daily_scale_is_named() {
    let text =
        "name: x\nduration: 1h\nmanifests:\n- {apiVersion: karpenter.sh/v1, kind: NodePool, \
        metadata: {name: p}, spec: {template: {spec: {requirements: []}}}}\nworkloads:\n\
        - name: w\n  template: {spec: {containers: [{name: c}]}}\n  replicas:\n    \
        diurnal: {min: 1, max: 2, peak: 1h, dailyScale: [1, -0.5]}\n";
    let err = Scenario::parse(text, "x.yaml", None)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("x.yaml: workloads[0].replicas.diurnal.dailyScale[1]"),
        "{err}"
    );
}

#[test]
fn steps_hold_until_the_next_one_and_start_at_zero() {
    let r = Replicas::Steps(vec![(60.0, 3), (600.0, 1)]);
    assert_eq!(
        (r.at(0.0), r.at(60.0), r.at(599.0), r.at(600.0), r.at(1e6)),
        (0, 3, 3, 1, 1)
    );
}
