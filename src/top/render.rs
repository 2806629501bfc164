//! Drawing a [`Frame`] with ratatui: a header with the totals and the keys, the nodes grouped by
//! NodePool (or one node's pods), and two panels: the pending pods' plan and what consolidation
//! would do. Only layout and formatting; what is shown is decided in [`super::model`].

use ratatui::backend::TestBackend;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Block, Borders, Cell, Paragraph, Row, Table, TableState, Wrap};
use ratatui::Terminal;

use super::model::{Consolidation, Frame, Launch, NodeRow, Pending, Usage, View};
use super::watch::Status;

/// Cells of a usage bar, before its percentage.
const BAR: usize = 8;

/// Draws `status` as `view` shows it over the whole terminal.
pub fn draw(f: &mut ratatui::Frame<'_>, status: &Status, view: &View) {
    let area = f.area();
    match status {
        Status::Connecting => f.render_widget(
            Paragraph::new("joiner top: waiting for the watches to sync… (q quits)"),
            area,
        ),
        Status::Failed(e) => f.render_widget(
            Paragraph::new(format!("joiner top: {e} (q quits)")).wrap(Wrap { trim: false }),
            area,
        ),
        Status::Ready { frame, .. } => draw_frame(f, area, frame, view),
    }
}

/// The pending and consolidation panels, bordered and wrapped.
fn panels(frame: &Frame) -> [Paragraph<'static>; 2] {
    let panel = |title: &'static str, lines: Vec<String>| {
        Paragraph::new(lines.into_iter().map(Line::from).collect::<Vec<_>>())
            .wrap(Wrap { trim: false })
            .block(Block::default().borders(Borders::ALL).title(title))
    };
    [
        panel(" pending ", pending_lines(&frame.pending)),
        panel(
            " consolidation now ",
            consolidation_lines(&frame.consolidation),
        ),
    ]
}

/// The two panels side by side, each half of `area`.
fn halves(area: Rect) -> [Rect; 2] {
    Layout::horizontal([Constraint::Percentage(50), Constraint::Percentage(50)]).areas(area)
}

/// Rows the panels need at `width`: as tall as their text once wrapped, so that a long plan line
/// never pushes the launches out of sight.
fn panel_height(panels: &[Paragraph<'_>; 2], width: u16) -> u16 {
    let [left, right] = halves(Rect::new(0, 0, width, 1));
    let rows = panels[0]
        .line_count(left.width)
        .max(panels[1].line_count(right.width));
    rows.clamp(3, 14) as u16
}

fn draw_frame(f: &mut ratatui::Frame<'_>, area: Rect, frame: &Frame, view: &View) {
    let panels = panels(frame);
    let height = panel_height(&panels, area.width);
    // a terminal too short for everything keeps the totals and the nodes
    let height = if area.height >= height + 5 { height } else { 0 };
    let [head, body, bottom] = Layout::vertical([
        Constraint::Length(2),
        Constraint::Min(0),
        Constraint::Length(height),
    ])
    .areas(area);
    f.render_widget(Paragraph::new(header(frame, view)), head);
    if view.detail {
        draw_pods(f, body, view.selected(frame));
    } else {
        draw_nodes(f, body, frame, view);
    }
    let [left, right] = halves(bottom);
    let [pending, consolidation] = panels;
    f.render_widget(pending, left);
    f.render_widget(consolidation, right);
}

fn header(frame: &Frame, view: &View) -> Vec<Line<'static>> {
    let t = &frame.totals;
    let bound = match (t.repack_bound, t.gap_per_hour) {
        (Some(b), Some(g)) => format!(
            "re-pack bound ${b:.4}/h, gap ${g:.4}/h ({:.0}%)",
            percent(g, t.cost_per_hour)
        ),
        _ => "re-pack bound unknown".into(),
    };
    let time = frame.at.get(11..19).unwrap_or(&frame.at);
    let notes = match frame.notes.len() {
        0 => String::new(),
        n => format!("  {n} notes: {}", frame.notes[0]),
    };
    vec![
        Line::from(format!(
            "joiner top  {time}  {} nodes  {} pods  ${:.4}/h  {bound}  {} pending",
            t.nodes,
            t.running_pods,
            t.cost_per_hour,
            frame.pending.pods.len()
        )),
        Line::from(format!(
            "q quit  s sort:{}  p pool:{}  up/down select  enter pods{notes}",
            view.sort.label(),
            view.pool.as_deref().unwrap_or("all")
        )),
    ]
}

fn percent(part: f64, whole: f64) -> f64 {
    if whole > 0.0 {
        100.0 * part / whole
    } else {
        0.0
    }
}

fn draw_nodes(f: &mut ratatui::Frame<'_>, area: Rect, frame: &Frame, view: &View) {
    let mut rows = Vec::new();
    let mut selected = None;
    let mut index = 0;
    for g in view.groups(frame) {
        let pool = g.nodepool.unwrap_or("(no nodepool)").to_string();
        let count = format!("{} nodes", g.nodes.len());
        let cost = format!("{:.4}", g.cost_per_hour);
        let cells = [
            pool,
            count,
            String::new(),
            String::new(),
            String::new(),
            cost,
        ];
        rows.push(
            Row::new(cells.map(Cell::from)).style(Style::default().add_modifier(Modifier::BOLD)),
        );
        for n in g.nodes {
            if index == view.selected {
                selected = Some(rows.len());
            }
            rows.push(node_row(n));
            index += 1;
        }
    }
    let widths = [
        Constraint::Min(16),
        Constraint::Length(13),
        Constraint::Length(11),
        Constraint::Length(9),
        Constraint::Length(5),
        Constraint::Length(7),
        Constraint::Length(BAR as u16 + 5),
        Constraint::Length(BAR as u16 + 5),
        Constraint::Length(4),
        Constraint::Min(14),
    ];
    let head = Row::new([
        "NODE",
        "TYPE",
        "ZONE",
        "CAPACITY",
        "AGE",
        "$/H",
        "CPU",
        "MEMORY",
        "PODS",
        "DISRUPTION",
    ])
    .style(Style::default().add_modifier(Modifier::UNDERLINED));
    let table = Table::new(rows, widths)
        .header(head)
        .row_highlight_style(Style::default().add_modifier(Modifier::REVERSED));
    let mut state = TableState::default().with_selected(selected);
    f.render_stateful_widget(table, area, &mut state);
}

fn node_row(n: &NodeRow) -> Row<'static> {
    let mut disruption = n.disruption.label().to_string();
    if let Some(a) = n.deleted_by {
        disruption = format!("{disruption}, deleted by #{}", a + 1);
    } else if n.drift.is_some() {
        disruption.push_str(", drifted");
    }
    Row::new(vec![
        n.name.clone(),
        n.instance_type.clone(),
        n.zone.clone(),
        n.capacity_type.clone(),
        n.age_seconds.map_or("-".into(), age),
        format!("{:.4}", n.price_per_hour),
        bar(n.cpu),
        bar(n.memory),
        n.pods.len().to_string(),
        disruption,
    ])
}

/// `1h`, `12m`, `40s`, `3d`: the largest unit, as kubectl prints ages.
pub fn age(seconds: u64) -> String {
    match seconds {
        s if s < 120 => format!("{s}s"),
        s if s < 7200 => format!("{}m", s / 60),
        s if s < 172_800 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86_400),
    }
}

/// A usage bar of [`BAR`] cells and its percentage, e.g. `█████░░░ 63%`.
pub fn bar(u: Usage) -> String {
    let fraction = u.fraction();
    let filled = ((fraction.clamp(0.0, 1.0) * BAR as f64).round() as usize).min(BAR);
    format!(
        "{}{} {:>3.0}%",
        "█".repeat(filled),
        "░".repeat(BAR - filled),
        fraction * 100.0
    )
}

fn draw_pods(f: &mut ratatui::Frame<'_>, area: Rect, node: Option<&NodeRow>) {
    let Some(node) = node else {
        f.render_widget(Paragraph::new("no node selected (esc goes back)"), area);
        return;
    };
    let rows = node.pods.iter().map(|p| {
        Row::new(vec![
            p.pod.clone(),
            format!("{:.3}", p.cpu),
            format!("{:.0}Mi", p.memory / 1_048_576.0),
            if p.daemonset { "daemonset" } else { "" }.to_string(),
        ])
    });
    let widths = [
        Constraint::Min(30),
        Constraint::Length(8),
        Constraint::Length(10),
        Constraint::Length(10),
    ];
    let table = Table::new(rows, widths)
        .header(
            Row::new(["POD", "CPU", "MEMORY", ""])
                .style(Style::default().add_modifier(Modifier::UNDERLINED)),
        )
        .block(Block::default().borders(Borders::TOP).title(format!(
            " pods on {} ({}; esc goes back) ",
            node.name,
            node.disruption.label()
        )));
    f.render_widget(table, area);
}

fn launch_text(l: &Launch) -> String {
    format!(
        "{} {} {} ${:.4}/h, {} pods",
        l.instance_type, l.capacity_type, l.zone, l.price_per_hour, l.pods
    )
}

/// The pending panel's lines.
pub fn pending_lines(p: &Pending) -> Vec<String> {
    let mut out = vec![format!("{} pending pods", p.pods.len())];
    let Some(plan) = &p.plan else {
        return out;
    };
    out.push(format!(
        "plan ${:.4}/h (objective {:.4}, bound {:.4}, {}); {} onto existing nodes",
        plan.cost_per_hour,
        plan.objective,
        plan.lower_bound,
        plan.status.as_str(),
        plan.onto_existing
    ));
    out.extend(
        plan.launches
            .iter()
            .map(|l| format!("+ {}", launch_text(l))),
    );
    out.extend(
        plan.unschedulable
            .iter()
            .map(|u| format!("unschedulable {u}")),
    );
    out
}

/// The consolidation panel's lines.
pub fn consolidation_lines(c: &Consolidation) -> Vec<String> {
    let Some(status) = c.status else {
        return vec!["no decision (see the notes)".into()];
    };
    let mut out = vec![format!(
        "${:.4}/h -> ${:.4}/h, saves ${:.4}/h, {} evictions ({})",
        c.cost_before_per_hour,
        c.cost_after_per_hour,
        c.savings_per_hour,
        c.evictions,
        status.as_str()
    )];
    for (i, cmd) in c.commands.iter().enumerate() {
        let launch = match cmd.launch.as_slice() {
            [] => String::new(),
            ls => format!(
                ", launch {}",
                ls.iter().map(launch_text).collect::<Vec<_>>().join("; ")
            ),
        };
        out.push(format!(
            "#{} {} delete {}{launch}; {} moves, saves ${:.4}/h",
            i + 1,
            cmd.reason,
            cmd.delete.join(","),
            cmd.moves,
            cmd.savings_per_hour
        ));
    }
    out.extend(c.blocked.iter().map(|b| format!("blocked {b}")));
    out
}

/// The frame as text `width` columns wide, drawn as the terminal shows it (`--once -o table`).
pub fn text(frame: &Frame, width: u16) -> Result<String, std::io::Error> {
    let view = View::default();
    let groups = view.groups(frame).len();
    let panel = usize::from(panel_height(&panels(frame), width));
    let height = 2 + 1 + groups + frame.nodes.len() + panel;
    let height = u16::try_from(height).unwrap_or(u16::MAX);
    let mut terminal = Terminal::new(TestBackend::new(width, height))?;
    let status = Status::Ready {
        frame: std::sync::Arc::new(frame.clone()),
        seq: 0,
    };
    terminal.draw(|f| draw(f, &status, &view))?;
    let buffer = terminal.backend().buffer();
    let mut out = String::new();
    for y in 0..buffer.area.height {
        let line: String = (0..buffer.area.width)
            .map(|x| buffer[(x, y)].symbol())
            .collect();
        out.push_str(line.trim_end());
        out.push('\n');
    }
    Ok(out)
}
