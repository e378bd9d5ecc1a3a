//! Line charts drawn with `plotters` (a real vLLM run against a simulated one, or the time
//! series of a run): SVG, or PNG with its text rasterised from the embedded DejaVu Sans (no
//! system fonts needed).

use crate::output::StagedDir;
use anyhow::{Context, anyhow, bail};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::{FontStyle, register_font};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
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
pub struct Series {
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

    /// The same line drawn as a staircase: each value holds until the next point (a count
    /// that changes at the sample times, not in between).
    pub fn stepped(mut self) -> Series {
        let mut steps = Vec::with_capacity(self.points.len() * 2);
        for (i, &(x, y)) in self.points.iter().enumerate() {
            if i > 0 {
                steps.push((x, self.points[i - 1].1));
            }
            steps.push((x, y));
        }
        self.points = steps;
        self
    }
}

/// One chart: its lines in the default colour cycle, with a legend.
pub struct Chart {
    /// File stem.
    pub name: &'static str,
    pub title: String,
    pub x_desc: &'static str,
    pub y_desc: &'static str,
    pub legend: SeriesLabelPosition,
    /// Whether y counts whole things (replicas, requests): ticks on whole numbers only.
    pub y_integer: bool,
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
            PlotFormat::Png => write_png(&tmp, SIZE, |root| draw(root, chart)),
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

/// Draws with `draw` on an RGB raster of `size` and writes it to `path` as a PNG, encoded as
/// plotters' own PNG output was (the `image` crate's default encoder: the `png` crate's fast
/// compression with adaptive filtering), byte for byte, without the `image` crate and its
/// decoders in the build.
pub fn write_png(
    path: &Path,
    size: (u32, u32),
    draw: impl FnOnce(DrawingArea<BitMapBackend<'_>, Shift>) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let mut pixels = vec![0u8; size.0 as usize * size.1 as usize * 3];
    draw(BitMapBackend::with_buffer(&mut pixels, size).into_drawing_area())?;
    let mut file = BufWriter::new(File::create(path)?);
    let mut encoder = png::Encoder::new(&mut file, size.0, size.1);
    encoder.set_color(png::ColorType::Rgb);
    encoder.set_depth(png::BitDepth::Eight);
    encoder.set_compression(png::Compression::Fast);
    encoder.set_filter(png::FilterType::Sub);
    encoder.set_adaptive_filter(png::AdaptiveFilterType::Adaptive);
    let mut writer = encoder.write_header()?;
    writer.write_image_data(&pixels)?;
    writer.finish()?;
    file.flush()?;
    Ok(())
}

/// Draws `chart` on `root` and writes the image.
fn draw<DB: DrawingBackend>(root: DrawingArea<DB, Shift>, chart: &Chart) -> anyhow::Result<()> {
    draw_on(root, chart).map_err(|e| anyhow!("{e}"))
}

/// Draws `chart` on `root`: white background, axes from 0 with a light grid, the series and
/// their legend. A legend at the top gets a band of its own above the data, so that it covers
/// none of it.
fn draw_on<DB: DrawingBackend>(
    root: DrawingArea<DB, Shift>,
    chart: &Chart,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    root.fill(&WHITE)?;
    let points = || chart.series.iter().flat_map(|s| &s.points);
    let x_max = axis_max(points().map(|&(x, _)| x));
    let y_data = axis_max(points().map(|&(_, y)| y));
    let legend_on_top = matches!(
        chart.legend,
        SeriesLabelPosition::UpperLeft
            | SeriesLabelPosition::UpperMiddle
            | SeriesLabelPosition::UpperRight
    );
    let y_max = if legend_on_top {
        y_data / (1.0 - legend_share(chart.series.len()))
    } else {
        y_data * 1.05
    };
    let mut plot = ChartBuilder::on(&root)
        .caption(&chart.title, (FONT, 20))
        .margin(16)
        .x_label_area_size(48)
        .y_label_area_size(72)
        .build_cartesian_2d(0.0..x_max, 0.0..y_max)?;
    let x_format = |v: &f64| tick_label(*v, x_max / 10.0);
    let y_format = |v: &f64| {
        if chart.y_integer {
            whole_tick_label(*v)
        } else {
            tick_label(*v, y_max / 10.0)
        }
    };
    let mut mesh = plot.configure_mesh();
    mesh.x_desc(chart.x_desc)
        .y_desc(chart.y_desc)
        .label_style((FONT, 14))
        .axis_desc_style((FONT, 16))
        .light_line_style(BLACK.mix(0.05))
        .x_label_formatter(&x_format)
        .y_label_formatter(&y_format);
    if chart.y_integer {
        mesh.y_labels(whole_label_count(y_max));
    }
    mesh.draw()?;
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

/// The share of the plotting area's height a legend of `rows` lines takes, with a gap: about
/// 22 px a line and 24 px of frame and gap, of the ~490 px a [`SIZE`] chart plots in.
pub fn legend_share(rows: usize) -> f64 {
    let plot_px = f64::from(SIZE.1) - 110.0;
    ((rows as f64 * 22.0 + 24.0) / plot_px).min(0.5)
}

/// A tick's text with as many decimals as ticks `step` apart need (none for whole steps):
/// `120`, not `120.0`; `0.25`; `1000.12` on an axis that varies by less than 1%.
pub fn tick_label(v: f64, step: f64) -> String {
    let decimals = if step > 0.0 && step.is_finite() {
        (-step.log10().floor()).clamp(0.0, 12.0) as usize
    } else {
        0
    };
    let text = format!("{v:.decimals$}");
    if text.starts_with("-") && text.trim_start_matches(['-', '0', '.']).is_empty() {
        text[1..].to_owned()
    } else {
        text
    }
}

/// A tick of a whole-number axis: the number, or nothing between whole numbers.
pub fn whole_tick_label(v: f64) -> String {
    if (v - v.round()).abs() < 1e-9 {
        format!("{}", v.round())
    } else {
        String::new()
    }
}

/// How many labels a whole-number axis from 0 to `max` asks for, so that its ticks are at
/// least 1 apart.
pub fn whole_label_count(max: f64) -> usize {
    (max.floor() as usize + 1).clamp(2, 11)
}

/// The upper end of an axis starting at 0: the largest finite value, or 1 when there is no
/// positive one (an empty or all-zero series still gets a drawable range).
fn axis_max(values: impl Iterator<Item = f64>) -> f64 {
    let max = values.filter(|v| v.is_finite()).fold(0.0, f64::max);
    if max > 0.0 { max } else { 1.0 }
}
