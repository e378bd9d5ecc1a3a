//! Pictures of the Pareto front: for each pair of objectives, every configuration as a grey
//! dot labelled with its id and the front's configurations as red dots joined in order,
//! labelled with their parameters; a dashed line at each SLO limit on either axis (SVG, or
//! PNG with the embedded DejaVu Sans).

use super::pareto::{Objective, SloRule};
use super::report::Config;
use crate::metrics::PlotFormat;
use crate::metrics::{tick_label, whole_label_count, whole_tick_label};
use anyhow::{Context, anyhow};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use plotters::style::{FontStyle, register_font};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

const FONT: &str = "sans-serif";
const SIZE: (u32, u32) = (900, 650);
const FRONT: RGBColor = RGBColor(214, 39, 40);
const OTHERS: RGBColor = RGBColor(150, 150, 150);
/// The SLO lines: matplotlib's `C2` green.
const SLO: RGBColor = RGBColor(44, 160, 44);

/// Draws `pareto_<a>_vs_<b>` into `dir` for each pair of objectives; returns the paths.
pub fn draw(
    dir: &Path,
    format: PlotFormat,
    configs: &[Config],
    on_front: &[bool],
    objectives: &[Objective],
    slo: &[SloRule],
) -> anyhow::Result<Vec<PathBuf>> {
    register()?;
    let mut paths = Vec::new();
    for (i, x) in objectives.iter().enumerate() {
        for y in &objectives[i + 1..] {
            let ext = if format == PlotFormat::Png {
                "png"
            } else {
                "svg"
            };
            let dest = dir.join(format!("pareto_{}_vs_{}.{ext}", y.column, x.column));
            let mut builder = tempfile::Builder::new();
            let suffix = format!(".{ext}");
            builder.prefix(".pareto").suffix(&suffix);
            // Temporary files default to mode 0600; ask for what a plain `File::create` gets.
            builder.permissions(std::os::unix::fs::PermissionsExt::from_mode(0o666));
            let (tmp, _pending) = crate::interrupt::create_registered(|| {
                builder
                    .tempfile_in(dir)
                    .map(tempfile::NamedTempFile::into_temp_path)
            })
            .context("creating a temporary plot file")?;
            let pts = points(configs, on_front, x, y);
            let picture = Picture {
                x: Axis::new(x, slo, &pts.iter().map(|p| p.x).collect::<Vec<_>>()),
                y: Axis::new(y, slo, &pts.iter().map(|p| p.y).collect::<Vec<_>>()),
                pts,
                title: format!(
                    "{} vs {}: the Pareto front in red, every configuration by its id",
                    y.column, x.column
                ),
            };
            match format {
                PlotFormat::Svg => chart(SVGBackend::new(&tmp, SIZE).into_drawing_area(), &picture),
                PlotFormat::Png => {
                    crate::metrics::write_png(&tmp, SIZE, |root| chart(root, &picture))
                }
            }
            .with_context(|| format!("drawing {}", dest.display()))?;
            tmp.persist(&dest)
                .with_context(|| format!("writing {}", dest.display()))?;
            paths.push(dest);
        }
    }
    Ok(paths)
}

fn register() -> anyhow::Result<()> {
    static OK: OnceLock<bool> = OnceLock::new();
    let ok =
        *OK.get_or_init(|| register_font(FONT, FontStyle::Normal, dejavu::sans::regular()).is_ok());
    if ok {
        Ok(())
    } else {
        Err(anyhow!("the embedded DejaVu Sans font could not be loaded"))
    }
}

/// One point: its coordinates, whether it is on the front, and its label.
struct Point {
    x: f64,
    y: f64,
    on_front: bool,
    label: String,
}

/// One axis of a picture: its range, kind, title and the SLO limits on it.
struct Axis {
    range: std::ops::Range<f64>,
    /// Every value is a whole number (GPUs, replicas): ticks on whole numbers only.
    whole: bool,
    log: bool,
    desc: String,
    /// The rules on this column: `(limit, text)`.
    limits: Vec<(f64, String)>,
}

impl Axis {
    /// The axis of objective `o` over `values`, with the limits of the rules of `slo` on it.
    fn new(o: &Objective, slo: &[SloRule], values: &[f64]) -> Axis {
        let limits: Vec<(f64, String)> = slo
            .iter()
            .filter(|r| r.column == o.column && r.limit.is_finite())
            .map(|r| (r.limit, format!("SLO {r}")))
            .collect();
        let mut all = values.to_vec();
        all.extend(limits.iter().map(|l| l.0));
        let log = wide(&all);
        Axis {
            range: span(&all, log),
            whole: !values.is_empty() && values.iter().all(|v| v.fract() == 0.0),
            log,
            desc: describe(o, log, values),
            limits,
        }
    }

    /// A tick's text on this axis.
    fn tick(&self, v: f64) -> String {
        if self.whole {
            return whole_tick_label(v);
        }
        let step = if self.log {
            v.abs()
        } else {
            (self.range.end - self.range.start) / 10.0
        };
        tick_label(v, step)
    }

    /// Where `v` falls between the axis's ends, 0 to 1 (on a log axis, by its logarithm).
    fn fraction(&self, v: f64) -> f64 {
        let (lo, hi) = (self.range.start, self.range.end);
        if self.log {
            (v / lo).ln() / (hi / lo).ln()
        } else {
            (v - lo) / (hi - lo)
        }
    }

    /// How many labels it asks for: ticks at least 1 apart on a whole-number axis.
    fn labels(&self) -> usize {
        if self.whole && !self.log {
            whole_label_count(self.range.end - self.range.start.min(0.0))
                .min((self.range.end - self.range.start).floor() as usize + 1)
                .max(2)
        } else {
            10
        }
    }
}

/// The axis title: the column, its sense, the scale, and how little it varies when that is
/// under 1% (the ticks then carry the decimals it needs).
fn describe(o: &Objective, log: bool, values: &[f64]) -> String {
    let sense = if o.maximize { "max" } else { "min" };
    let scale = if log { ", log scale" } else { "" };
    let lo = values.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let mid = (lo.abs() + hi.abs()) / 2.0;
    let spread = if hi > lo && mid > 0.0 && (hi - lo) / mid < 0.01 {
        let pct = (hi - lo) / mid * 100.0;
        format!(", all within {}%", tick_label(pct, pct / 10.0))
    } else {
        String::new()
    };
    format!("{} ({sense}{scale}{spread})", o.column)
}

/// What one picture shows.
struct Picture {
    pts: Vec<Point>,
    x: Axis,
    y: Axis,
    title: String,
}

/// The configurations' points, labelled: the front's with their id and parameters, the
/// others with their id.
fn points(configs: &[Config], on_front: &[bool], x: &Objective, y: &Objective) -> Vec<Point> {
    configs
        .iter()
        .zip(on_front)
        .map(|(c, &on)| {
            let label = if on {
                let params: Vec<String> =
                    c.params.iter().map(|(k, v)| format!("{k}={v}")).collect();
                format!("{}: {}", c.id, params.join(" "))
            } else {
                c.id.clone()
            };
            Point {
                x: c.means[&x.column],
                y: c.means[&y.column],
                on_front: on,
                label,
            }
        })
        .filter(|p| p.x.is_finite() && p.y.is_finite())
        .collect()
}

/// The axis range of `values`, with a margin (multiplicative on a log axis).
fn span(values: &[f64], log: bool) -> std::ops::Range<f64> {
    let lo = values.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if !lo.is_finite() {
        return 0.0..1.0;
    }
    if log {
        return (lo / 1.3)..(hi * 1.3);
    }
    let pad = if hi > lo {
        (hi - lo) * 0.08
    } else {
        lo.abs().max(1.0) * 0.05
    };
    (lo - pad)..(hi + pad)
}

/// Whether values span more than two decades, all positive: drawn on a log axis.
fn wide(values: &[f64]) -> bool {
    let lo = values.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    lo > 0.0 && hi / lo > 100.0
}

fn chart<DB: DrawingBackend>(
    root: DrawingArea<DB, Shift>,
    picture: &Picture,
) -> anyhow::Result<()> {
    draw_on(root, picture).map_err(|e| anyhow!("{e}"))
}

fn draw_on<DB: DrawingBackend>(
    root: DrawingArea<DB, Shift>,
    picture: &Picture,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    root.fill(&WHITE)?;
    let mut builder = ChartBuilder::on(&root);
    builder
        .caption(&picture.title, (FONT, 18))
        .margin(16)
        .margin_right(48)
        .x_label_area_size(48)
        .y_label_area_size(80);
    let (xr, yr) = (picture.x.range.clone(), picture.y.range.clone());
    match (picture.x.log, picture.y.log) {
        (false, false) => fill(builder.build_cartesian_2d(xr, yr)?, picture),
        (true, false) => fill(builder.build_cartesian_2d(xr.log_scale(), yr)?, picture),
        (false, true) => fill(builder.build_cartesian_2d(xr, yr.log_scale())?, picture),
        (true, true) => fill(
            builder.build_cartesian_2d(xr.log_scale(), yr.log_scale())?,
            picture,
        ),
    }?;
    root.present()
}

/// Draws the mesh, the SLO lines, the points and their labels.
fn fill<'a, DB, X, Y>(
    mut plot: ChartContext<'a, DB, Cartesian2d<X, Y>>,
    picture: &Picture,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>>
where
    DB: DrawingBackend + 'a,
    X: Ranged<ValueType = f64> + plotters::coord::ranged1d::ValueFormatter<f64>,
    Y: Ranged<ValueType = f64> + plotters::coord::ranged1d::ValueFormatter<f64>,
{
    let (x, y) = (&picture.x, &picture.y);
    let x_tick = |v: &f64| x.tick(*v);
    let y_tick = |v: &f64| y.tick(*v);
    plot.configure_mesh()
        .x_desc(x.desc.as_str())
        .y_desc(y.desc.as_str())
        .x_labels(x.labels())
        .y_labels(y.labels())
        .x_label_formatter(&x_tick)
        .y_label_formatter(&y_tick)
        .label_style((FONT, 14))
        .axis_desc_style((FONT, 16))
        .light_line_style(BLACK.mix(0.05))
        .draw()?;
    draw_limits(&mut plot, picture)?;
    let text = |color: RGBColor| (FONT, 12).into_font().color(&color);
    let others = picture.pts.iter().filter(|p| !p.on_front);
    plot.draw_series(others.map(|p| {
        EmptyElement::at((p.x, p.y))
            + Circle::new((0, 0), 3, OTHERS.filled())
            + Text::new(p.label.clone(), (5, -14), text(OTHERS))
    }))?;
    let mut front: Vec<&Point> = picture.pts.iter().filter(|p| p.on_front).collect();
    front.sort_by(|a, b| a.x.total_cmp(&b.x).then(a.y.total_cmp(&b.y)));
    plot.draw_series(LineSeries::new(
        front.iter().map(|p| (p.x, p.y)),
        FRONT.stroke_width(1),
    ))?;
    plot.draw_series(front.iter().map(|p| {
        // Written on the side of the point with room: to its left in the right part.
        let (dx, pos) = if x.fraction(p.x) > 0.6 {
            (-8, Pos::new(HPos::Right, VPos::Center))
        } else {
            (8, Pos::new(HPos::Left, VPos::Center))
        };
        EmptyElement::at((p.x, p.y))
            + Circle::new((0, 0), 5, FRONT.filled())
            + Text::new(p.label.clone(), (dx, 8), text(FRONT).pos(pos))
    }))?;
    Ok(())
}

/// A dashed line across the plot at each SLO limit, with the rule written beside it.
fn draw_limits<'a, DB, X, Y>(
    plot: &mut ChartContext<'a, DB, Cartesian2d<X, Y>>,
    picture: &Picture,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>>
where
    DB: DrawingBackend + 'a,
    X: Ranged<ValueType = f64>,
    Y: Ranged<ValueType = f64>,
{
    let (xr, yr) = (&picture.x.range, &picture.y.range);
    let style = SLO.stroke_width(2);
    let label = (FONT, 13).into_font().color(&SLO);
    for (limit, rule) in &picture.x.limits {
        let line = [(*limit, yr.start), (*limit, yr.end)];
        plot.draw_series(DashedLineSeries::new(line, 6, 4, style))?;
        plot.draw_series([Text::new(rule.clone(), (*limit, yr.end), label.clone())])?;
    }
    for (limit, rule) in &picture.y.limits {
        let line = [(xr.start, *limit), (xr.end, *limit)];
        plot.draw_series(DashedLineSeries::new(line, 6, 4, style))?;
        plot.draw_series([Text::new(rule.clone(), (xr.start, *limit), label.clone())])?;
    }
    Ok(())
}
