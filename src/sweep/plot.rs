//! Pictures of the Pareto front: for each pair of objectives, every configuration as a grey
//! dot and the front's configurations as red dots joined in order (SVG, or PNG with the
//! embedded DejaVu Sans).

use super::pareto::Objective;
use super::report::Config;
use crate::metrics::PlotFormat;
use anyhow::{Context, anyhow};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::{FontStyle, register_font};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

const FONT: &str = "sans-serif";
const SIZE: (u32, u32) = (900, 650);
const FRONT: RGBColor = RGBColor(214, 39, 40);
const OTHERS: RGBColor = RGBColor(150, 150, 150);

/// Draws `pareto_<a>_vs_<b>` into `dir` for each pair of objectives; returns the paths.
pub(super) fn draw(
    dir: &Path,
    format: PlotFormat,
    configs: &[Config],
    on_front: &[bool],
    objectives: &[Objective],
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
            let tmp = builder
                .tempfile_in(dir)
                .context("creating a temporary plot file")?
                .into_temp_path();
            let _pending = crate::interrupt::register(&tmp);
            let pts = points(configs, on_front, x, y);
            let title = format!("{} vs {}", y.column, x.column);
            match format {
                PlotFormat::Svg => chart(
                    SVGBackend::new(&tmp, SIZE).into_drawing_area(),
                    &pts,
                    x,
                    y,
                    &title,
                ),
                PlotFormat::Png => chart(
                    BitMapBackend::new(&tmp, SIZE).into_drawing_area(),
                    &pts,
                    x,
                    y,
                    &title,
                ),
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

/// `(x, y, on_front)` of each configuration.
fn points(
    configs: &[Config],
    on_front: &[bool],
    x: &Objective,
    y: &Objective,
) -> Vec<(f64, f64, bool)> {
    configs
        .iter()
        .zip(on_front)
        .map(|(c, &on)| (c.means[&x.column], c.means[&y.column], on))
        .filter(|(a, b, _)| a.is_finite() && b.is_finite())
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
        (hi - lo) * 0.05
    } else {
        lo.abs().max(1.0) * 0.05
    };
    (lo - pad)..(hi + pad)
}

fn label(o: &Objective, log: bool) -> String {
    let sense = if o.maximize { "max" } else { "min" };
    let scale = if log { ", log scale" } else { "" };
    format!("{} ({sense}{scale})", o.column)
}

fn chart<DB: DrawingBackend>(
    root: DrawingArea<DB, Shift>,
    pts: &[(f64, f64, bool)],
    x: &Objective,
    y: &Objective,
    title: &str,
) -> anyhow::Result<()> {
    draw_on(root, pts, x, y, title).map_err(|e| anyhow!("{e}"))
}

fn draw_on<DB: DrawingBackend>(
    root: DrawingArea<DB, Shift>,
    pts: &[(f64, f64, bool)],
    x: &Objective,
    y: &Objective,
    title: &str,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    root.fill(&WHITE)?;
    let mut builder = ChartBuilder::on(&root);
    builder
        .caption(title, (FONT, 20))
        .margin(16)
        .margin_right(48)
        .x_label_area_size(48)
        .y_label_area_size(80);
    let (xs, ys): (Vec<f64>, Vec<f64>) = pts.iter().map(|p| (p.0, p.1)).unzip();
    let (x_log, y_log) = (wide(&xs), wide(&ys));
    let (xr, yr) = (span(&xs, x_log), span(&ys, y_log));
    let labels = (label(x, x_log), label(y, y_log));
    match (x_log, y_log) {
        (false, false) => fill(builder.build_cartesian_2d(xr, yr)?, pts, labels),
        (true, false) => fill(builder.build_cartesian_2d(xr.log_scale(), yr)?, pts, labels),
        (false, true) => fill(builder.build_cartesian_2d(xr, yr.log_scale())?, pts, labels),
        (true, true) => fill(
            builder.build_cartesian_2d(xr.log_scale(), yr.log_scale())?,
            pts,
            labels,
        ),
    }?;
    root.present()
}

/// Whether values span more than two decades, all positive: drawn on a log axis.
fn wide(values: &[f64]) -> bool {
    let lo = values.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    lo > 0.0 && hi / lo > 100.0
}

fn fill<'a, DB, X, Y>(
    mut plot: ChartContext<'a, DB, Cartesian2d<X, Y>>,
    pts: &[(f64, f64, bool)],
    (x_desc, y_desc): (String, String),
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>>
where
    DB: DrawingBackend + 'a,
    X: Ranged<ValueType = f64> + plotters::coord::ranged1d::ValueFormatter<f64>,
    Y: Ranged<ValueType = f64> + plotters::coord::ranged1d::ValueFormatter<f64>,
{
    plot.configure_mesh()
        .x_desc(x_desc)
        .y_desc(y_desc)
        .label_style((FONT, 14))
        .axis_desc_style((FONT, 16))
        .light_line_style(BLACK.mix(0.05))
        .draw()?;
    let others = pts
        .iter()
        .filter(|p| !p.2)
        .map(|p| Circle::new((p.0, p.1), 3, OTHERS.filled()));
    plot.draw_series(others)?
        .label("configurations")
        .legend(|(a, b)| Circle::new((a + 8, b), 3, OTHERS.filled()));
    let mut front: Vec<(f64, f64)> = pts.iter().filter(|p| p.2).map(|p| (p.0, p.1)).collect();
    front.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.total_cmp(&b.1)));
    plot.draw_series(LineSeries::new(
        front.iter().copied(),
        FRONT.stroke_width(1),
    ))?;
    plot.draw_series(front.iter().map(|&p| Circle::new(p, 5, FRONT.filled())))?
        .label("Pareto front")
        .legend(|(a, b)| Circle::new((a + 8, b), 5, FRONT.filled()));
    plot.configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .label_font((FONT, 14))
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK.mix(0.3))
        .draw()?;
    Ok(())
}
