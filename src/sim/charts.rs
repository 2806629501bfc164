//! SVG charts of a `joiner simulate` run: cost per hour, billed nodes and pending pods against
//! virtual time, one line per strategy, so the strategies' behaviour over the run can be compared
//! at a glance next to the summary table. SVG keeps the output dependency-free (no font files:
//! the SVG backend writes `<text>` elements and the viewer lays them out) and byte-for-byte
//! reproducible, so a chart changes only when the run does.

use std::ops::Range;
use std::path::{Path, PathBuf};

use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;

use super::report::{RunReport, Sample};

#[derive(Debug, thiserror::Error)]
pub enum ChartError {
    #[error("chart {path}: {source}")]
    Draw {
        path: String,
        #[source]
        source: DrawError,
    },
    #[error("chart {path}: writing the file: {source}")]
    Write {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

/// A plotters failure at one drawing step (plotters' errors borrow its backend, so the message is
/// kept).
#[derive(Debug, thiserror::Error)]
#[error("{step}: {message}")]
pub struct DrawError {
    step: &'static str,
    message: String,
}

/// One chart: its file, caption, y axis description and the sample field it plots.
struct Metric {
    file: &'static str,
    title: &'static str,
    y_desc: &'static str,
    value: fn(&Sample) -> f64,
    /// Whole-number quantities, labelled without decimals.
    counts: bool,
}

#[rustfmt::skip] // one row per chart reads best
const METRICS: [Metric; 3] = [
    Metric { file: "cost.svg", title: "Cost per hour", y_desc: "$ per hour", counts: false,
             value: |s| s.cost_per_hour },
    Metric { file: "nodes.svg", title: "Billed nodes", y_desc: "nodes", counts: true,
             value: |s| s.nodes as f64 },
    Metric { file: "pending.svg", title: "Pending pods", y_desc: "pending pods", counts: true,
             value: |s| s.pending_pods as f64 },
];

/// Colour-blind-friendly (Okabe-Ito) and readable on white; cycled when there are more runs.
#[rustfmt::skip]
const PALETTE: [RGBColor; 7] = [
    RGBColor(0, 114, 178), RGBColor(213, 94, 0), RGBColor(0, 158, 115), RGBColor(204, 121, 167),
    RGBColor(86, 180, 233), RGBColor(230, 159, 0), RGBColor(0, 0, 0),
];

const SIZE: (u32, u32) = (960, 540);
/// The largest magnitude plotted; see `steps`.
const LIMIT: f64 = 1e12;

/// Writes cost.svg (cost per hour over time), nodes.svg (billed nodes over time) and pending.svg
/// (pending pods over time) into `dir`, one line per run (legend = strategy), x axis in hours.
/// Returns the paths written.
pub fn write_all(dir: &Path, runs: &[RunReport]) -> Result<Vec<PathBuf>, ChartError> {
    METRICS
        .iter()
        .map(|metric| {
            let path = dir.join(metric.file);
            let svg = render(metric, runs).map_err(|source| ChartError::Draw {
                path: path.display().to_string(),
                source,
            })?;
            std::fs::write(&path, svg).map_err(|source| ChartError::Write {
                path: path.display().to_string(),
                source,
            })?;
            Ok(path)
        })
        .collect()
}

/// The day suite's chart of one scenario: each run's cost per hour, and dashed, the certified
/// lower bound of re-packing the pods running at each of `bound`'s samples (hours, $/h), labelled
/// `bound_label`. `title` is the caption (it states the bound's sample times and limit).
pub fn write_suite_chart(
    path: &Path,
    title: &str,
    runs: &[RunReport],
    bound: &[(f64, f64)],
    bound_label: &str,
) -> Result<(), ChartError> {
    let metric = Metric {
        title: "",
        ..METRICS[0]
    };
    let dashed: Line = bound
        .iter()
        .copied()
        .filter(|(x, y)| x.abs() <= LIMIT && y.abs() <= LIMIT)
        .collect();
    let svg = render_with(&metric, title, runs, Some((bound_label, dashed))).map_err(|source| {
        ChartError::Draw {
            path: path.display().to_string(),
            source,
        }
    })?;
    std::fs::write(path, svg).map_err(|source| ChartError::Write {
        path: path.display().to_string(),
        source,
    })
}

/// The chart `render` builds; one lifetime, as the drawing area borrows the backend it owns.
type Chart<'a> = ChartContext<'a, SVGBackend<'a>, Cartesian2d<RangedCoordf64, RangedCoordf64>>;
/// A run's points, (hours, value).
type Line = Vec<(f64, f64)>;

/// Draws one chart into a string; rendering in memory keeps file errors apart from drawing ones.
fn render(metric: &Metric, runs: &[RunReport]) -> Result<String, DrawError> {
    render_with(metric, metric.title, runs, None)
}

/// `render` with a caption of its own and, optionally, a dashed black line with its label.
fn render_with(
    metric: &Metric,
    title: &str,
    runs: &[RunReport],
    dashed: Option<(&str, Line)>,
) -> Result<String, DrawError> {
    let mut lines: Vec<Line> = runs.iter().map(|run| steps(run, metric.value)).collect();
    let (x_range, y_range) = match &dashed {
        Some((_, line)) => {
            lines.push(line.clone());
            let r = ranges(runs, &lines);
            lines.pop();
            r
        }
        None => ranges(runs, &lines),
    };
    let font = if title.len() > 40 { 18 } else { 24 };
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(fail("filling the background"))?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", font))
            .margin(16)
            .x_label_area_size(48)
            .y_label_area_size(72)
            .build_cartesian_2d(x_range, y_range)
            .map_err(fail("laying out the axes"))?;
        draw_axes(&mut chart, metric)?;
        if let Some((label, line)) = dashed {
            let style = BLACK.stroke_width(2);
            chart
                .draw_series(DashedLineSeries::new(line, 8, 6, style))
                .map_err(fail("drawing the dashed line"))?
                .label(label)
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 8, y)], style));
        }
        draw_runs(&mut chart, runs, lines)?;
        root.present().map_err(fail("finishing the svg"))?;
    }
    Ok(svg)
}

/// Axis descriptions and tick labels, readable at the chart's size.
fn draw_axes(chart: &mut Chart, metric: &Metric) -> Result<(), DrawError> {
    let y_end = chart.y_range().end;
    let mut mesh = chart.configure_mesh();
    mesh.x_desc("hours")
        .y_desc(metric.y_desc)
        .label_style(("sans-serif", 14))
        .axis_desc_style(("sans-serif", 16));
    if metric.counts {
        // Few enough ticks that plotters' 1-2-5 steps are whole numbers: no "0.5 nodes".
        mesh.y_labels((y_end.floor() as usize).clamp(1, 10) + 1)
            .y_label_formatter(&|v| format!("{v:.0}"));
    }
    mesh.draw().map_err(fail("drawing the axes"))
}

/// One line per run, coloured by its position, and a legend naming each run's strategy.
fn draw_runs(chart: &mut Chart, runs: &[RunReport], lines: Vec<Line>) -> Result<(), DrawError> {
    for (i, (run, line)) in runs.iter().zip(lines).enumerate() {
        let style = PALETTE[i % PALETTE.len()].stroke_width(2);
        chart
            .draw_series(LineSeries::new(line, style))
            .map_err(fail("drawing a line"))?
            .label(run.strategy.as_str())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 24, y)], style));
    }
    if runs.is_empty() {
        return Ok(()); // no legend box with nothing in it
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 14))
        .draw()
        .map_err(fail("drawing the legend"))
}

/// Turns a plotters error into a [`DrawError`] naming the step that failed.
fn fail<E: std::fmt::Display>(step: &'static str) -> impl Fn(E) -> DrawError {
    move |e| DrawError {
        step,
        message: e.to_string(),
    }
}

/// The run's samples as a step line: cost, nodes and pods jump rather than ramp, so a value holds
/// until the next sample, and the last one until the end of the run.
/// Points beyond `LIMIT` (or not finite) are dropped: no real hour, price or count is that large,
/// and an axis spanning more than f64 can hold would send plotters' tick search into a loop.
fn steps(run: &RunReport, value: fn(&Sample) -> f64) -> Line {
    let mut line = Line::new();
    let points = run.series.iter().map(|s| (s.hours, value(s)));
    for (x, y) in points.filter(|(x, y)| x.abs() <= LIMIT && y.abs() <= LIMIT) {
        if let Some(&(_, previous)) = line.last() {
            line.push((x, previous));
        }
        line.push((x, y));
    }
    if let Some(&(x, y)) = line.last() {
        if run.hours <= LIMIT && run.hours > x {
            line.push((run.hours, y));
        }
    }
    line
}

/// Axis ranges covering every line and each run's length, from 0 (time and counts start there),
/// at least 0..1 so an empty or all-zero chart still has a usable scale, with 5% headroom on y
/// so a line at the maximum does not sit on the frame.
fn ranges(runs: &[RunReport], lines: &[Line]) -> (Range<f64>, Range<f64>) {
    let points = || lines.iter().flatten();
    let run_ends = runs.iter().map(|r| r.hours).filter(|h| h.abs() <= LIMIT);
    let x_max = points().map(|p| p.0).chain(run_ends).fold(1.0, f64::max);
    let x_min = points().map(|p| p.0).fold(0.0, f64::min);
    let y_max = points().map(|p| p.1).fold(1.0 / 1.05, f64::max) * 1.05;
    let y_min = points().map(|p| p.1).fold(0.0, f64::min);
    (x_min..x_max, y_min..y_max)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::report::{Percentiles, Summary};

    /// A run from (hours, cost per hour, nodes, pending pods) tuples.
    #[rustfmt::skip]
    fn run(strategy: &str, samples: &[(f64, f64, usize, usize)]) -> RunReport {
        let p = Percentiles::default();
        let summary = Summary {
            total_cost: 0.0, average_cost_per_hour: 0.0, peak_nodes: 0, final_nodes: 0,
            pending_seconds: p, pods_started: 0, pods_evicted: 0, pods_evicted_by_interruption: 0, interruptions_handled: 0,
            ice_events: 0, instances_launched: 0, instances_terminated: 0, disruptions_executed: 0,
            disruptions_abandoned: 0, solves: 0, solver_seconds: p, time_limited_solves: 0,
            unschedulable_pods: 0, pending_at_end: 0, pending_pod_hours: 0.0,
            served_pod_hours: 0.0, cost_per_served_pod_hour: 0.0, short_lived_nodes: 0,
            volume_zone_violations: 0,
        };
        let series = samples.iter().map(|&(hours, cost_per_hour, nodes, pending_pods)| {
            Sample { hours, cost_per_hour, nodes, pending_pods }
        });
        RunReport { strategy: strategy.into(), scenario: "steady".into(), seed: 7, hours: 4.0,
                    summary, series: series.collect(), wall_seconds: 0.5 }
    }

    fn two_runs() -> Vec<RunReport> {
        let wave = |k: f64| -> Vec<_> {
            (0..16)
                .map(|i| (i as f64 / 4.0, k * (i % 5) as f64, i % 4, i % 3))
                .collect()
        };
        vec![run("milp", &wave(0.5)), run("greedy", &wave(0.8))]
    }

    /// A fresh directory per test and process, so parallel tests never share files.
    fn temp_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("joiner-charts-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    /// Writes the charts, checks each looks like ours, and returns their text.
    fn written(name: &str, runs: &[RunReport]) -> Vec<String> {
        let dir = temp_dir(name);
        let paths = write_all(&dir, runs).unwrap();
        let files: Vec<_> = paths
            .iter()
            .map(|p| p.strip_prefix(&dir).unwrap())
            .collect();
        assert_eq!(
            files,
            ["cost.svg", "nodes.svg", "pending.svg"].map(Path::new)
        );
        let texts: Vec<String> = paths
            .iter()
            .map(|p| std::fs::read_to_string(p).unwrap())
            .collect();
        let labels = [
            ["Cost per hour", "$ per hour"],
            ["Billed nodes", "nodes"],
            ["Pending pods", "pending pods"],
        ];
        for (text, labels) in texts.iter().zip(labels) {
            assert!(text.starts_with("<svg") && text.trim_end().ends_with("</svg>"));
            let names = runs.iter().map(|r| r.strategy.as_str());
            for label in labels.into_iter().chain(["hours"]).chain(names) {
                assert!(text.contains(&format!(">\n{label}\n</text>")), "{label}");
            }
            // Each run has its legend swatch, plus its line when it has samples.
            for (i, run) in runs.iter().enumerate() {
                let RGBColor(r, g, b) = PALETTE[i];
                let stroke = format!("stroke=\"#{r:02X}{g:02X}{b:02X}\" stroke-width=\"2\"");
                assert_eq!(
                    text.matches(&stroke).count(),
                    1 + !run.series.is_empty() as usize
                );
            }
        }
        std::fs::remove_dir_all(&dir).unwrap();
        texts
    }

    #[test]
    fn draws_one_line_per_run_with_a_legend() {
        written("two", &two_runs());
    }

    #[test]
    fn same_input_same_bytes() {
        assert_eq!(
            written("same-a", &two_runs()),
            written("same-b", &two_runs())
        );
    }

    #[test]
    fn handles_empty_single_and_all_zero_runs() {
        written("none", &[]);
        written("empty", &[run("milp", &[])]);
        written(
            "zero",
            &[run("milp", &[(0.0, 0.0, 0, 0), (1.0, 0.0, 0, 0)])],
        );
        written("single", &[run("greedy", &[(0.0, 0.3, 1, 0)])]);
    }

    #[test]
    fn the_suite_chart_has_three_lines_and_a_dashed_bound() {
        let mut runs = two_runs();
        runs.push(run(
            "karpenter-balanced",
            &[(0.0, 0.2, 1, 0), (2.0, 0.6, 2, 0)],
        ));
        let dir = temp_dir("suite");
        let path = dir.join("day.svg");
        let bound = [(0.0, 0.1), (1.0, 0.3), (2.0, 0.25)];
        write_suite_chart(&path, "day: cost per hour", &runs, &bound, "bound (hourly)").unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        for label in [
            "day: cost per hour",
            "bound (hourly)",
            "karpenter-balanced",
            "milp",
        ] {
            assert!(text.contains(&format!(">\n{label}\n</text>")), "{label}");
        }
        // the dashed line is drawn as one short black segment per dash, plus its legend swatch
        let black = "stroke=\"#000000\" stroke-width=\"2\"";
        assert!(
            text.matches(black).count() > 3,
            "{}",
            text.matches(black).count()
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn survives_hostile_values() {
        let odd = [
            (f64::NAN, f64::INFINITY, 1, 0),
            (-1.0, -2.0, 0, usize::MAX),
            (1e300, f64::MAX, 3, 1),
        ];
        let mut hostile = run("a<b&\"c\"", &odd);
        hostile.hours = f64::NAN;
        let dir = temp_dir("hostile");
        assert_eq!(write_all(&dir, &[hostile]).unwrap().len(), 3);
        let err = write_all(&dir.join("missing"), &[])
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("chart ") && err.contains("writing the file"),
            "{err}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
