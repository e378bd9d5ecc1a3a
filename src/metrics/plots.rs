//! Line charts drawn with `plotters` (a real vLLM run against a simulated one, or the time
//! series of a run): SVG, or PNG with its text rasterised from the embedded DejaVu Sans (no
//! system fonts needed).

use crate::output::StagedDir;
use anyhow::{Context, anyhow, bail};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::{FontStyle, register_font};
use std::path::PathBuf;
use std::sync::OnceLock;

/// Image format of [`super::Validation::write_plots`].
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Default,
    strum::EnumIter,
    strum::EnumMessage,
    strum::IntoStaticStr,
)]
#[strum(serialize_all = "lowercase")]
pub enum PlotFormat {
    /// Scalable vector graphics; text is left to the viewer's fonts.
    #[default]
    Svg,
    /// Portable network graphics; text is drawn with the embedded DejaVu Sans.
    Png,
}

impl crate::choice::Choice for PlotFormat {
    const WHAT: &'static str = "picture format";
    fn name(&self) -> &'static str {
        self.into()
    }
}

impl PlotFormat {
    /// The file extension, without the dot.
    fn extension(self) -> &'static str {
        match self {
            PlotFormat::Svg => "svg",
            PlotFormat::Png => "png",
        }
    }
}

/// Image size in pixels.
const SIZE: (u32, u32) = (1000, 600);
/// matplotlib's default cycle (`C0`, `C1`, ...): `C0` and `C1` are the colours of
/// LLMServingSim's validation plots.
const COLORS: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
];
/// Font family name the charts ask for; the embedded font is registered under it.
const FONT: &str = "sans-serif";

/// One line of a chart.
pub(super) struct Series {
    pub label: String,
    /// `(x, y)` points, in x order.
    pub points: Vec<(f64, f64)>,
    pub dashed: bool,
}

impl Series {
    /// A solid line.
    pub fn solid(label: impl Into<String>, points: Vec<(f64, f64)>) -> Series {
        Series {
            label: label.into(),
            points,
            dashed: false,
        }
    }

    /// A dashed line.
    pub fn dashed(label: impl Into<String>, points: Vec<(f64, f64)>) -> Series {
        Series {
            dashed: true,
            ..Series::solid(label, points)
        }
    }
}

/// One chart: its lines in the default colour cycle, with a legend.
pub(super) struct Chart {
    /// File stem.
    pub name: &'static str,
    pub title: String,
    pub x_desc: &'static str,
    pub y_desc: &'static str,
    pub legend: SeriesLabelPosition,
    pub series: Vec<Series>,
}

/// Draws every chart into the staged folder `dir` as `<name>.<ext>` and returns the paths they
/// will have once `dir` is committed (a failure leaves no partial images: see [`StagedDir`]).
pub(super) fn write_charts(
    dir: &StagedDir,
    format: PlotFormat,
    charts: &[Chart],
) -> anyhow::Result<Vec<PathBuf>> {
    register_embedded_font()?;
    let mut paths = Vec::with_capacity(charts.len());
    for chart in charts {
        let file = format!("{}.{}", chart.name, format.extension());
        let dest = dir.dest().join(&file);
        let tmp = dir.path().join(&file);
        match format {
            PlotFormat::Svg => draw(SVGBackend::new(&tmp, SIZE).into_drawing_area(), chart),
            PlotFormat::Png => draw(BitMapBackend::new(&tmp, SIZE).into_drawing_area(), chart),
        }
        .with_context(|| format!("drawing {}", dest.display()))?;
        paths.push(dest);
    }
    Ok(paths)
}

/// Registers DejaVu Sans as [`FONT`] once per process; plotters needs it to lay out text for
/// either format and to rasterise it for PNG.
fn register_embedded_font() -> anyhow::Result<()> {
    static REGISTERED: OnceLock<bool> = OnceLock::new();
    let ok = *REGISTERED
        .get_or_init(|| register_font(FONT, FontStyle::Normal, dejavu::sans::regular()).is_ok());
    if !ok {
        bail!("the embedded DejaVu Sans font could not be loaded");
    }
    Ok(())
}

/// Draws `chart` on `root` and writes the image.
fn draw<DB: DrawingBackend>(root: DrawingArea<DB, Shift>, chart: &Chart) -> anyhow::Result<()> {
    draw_on(root, chart).map_err(|e| anyhow!("{e}"))
}

/// Draws `chart` on `root`: white background, axes from 0 with a light grid, the series and
/// their legend.
fn draw_on<DB: DrawingBackend>(
    root: DrawingArea<DB, Shift>,
    chart: &Chart,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    root.fill(&WHITE)?;
    let points = || chart.series.iter().flat_map(|s| &s.points);
    let x_max = axis_max(points().map(|&(x, _)| x));
    let y_max = axis_max(points().map(|&(_, y)| y)) * 1.05;
    let mut plot = ChartBuilder::on(&root)
        .caption(&chart.title, (FONT, 20))
        .margin(16)
        .x_label_area_size(48)
        .y_label_area_size(72)
        .build_cartesian_2d(0.0..x_max, 0.0..y_max)?;
    plot.configure_mesh()
        .x_desc(chart.x_desc)
        .y_desc(chart.y_desc)
        .label_style((FONT, 14))
        .axis_desc_style((FONT, 16))
        .light_line_style(BLACK.mix(0.05))
        .draw()?;
    for (series, color) in chart.series.iter().zip(COLORS.iter().cycle()) {
        let style = color.stroke_width(2);
        let points = series.points.iter().copied();
        let drawn = if series.dashed {
            plot.draw_series(DashedLineSeries::new(points, 8, 5, style))?
        } else {
            plot.draw_series(LineSeries::new(points, style))?
        };
        drawn
            .label(series.label.as_str())
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 24, y)], style));
    }
    plot.configure_series_labels()
        .position(chart.legend.clone())
        .label_font((FONT, 16))
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK.mix(0.3))
        .draw()?;
    root.present()
}

/// The upper end of an axis starting at 0: the largest finite value, or 1 when there is no
/// positive one (an empty or all-zero series still gets a drawable range).
fn axis_max(values: impl Iterator<Item = f64>) -> f64 {
    let max = values.filter(|v| v.is_finite()).fold(0.0, f64::max);
    if max > 0.0 { max } else { 1.0 }
}
