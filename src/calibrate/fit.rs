//! What `calibrate` fits and how: five kernel constants of the roofline, each within the range
//! real GPUs have, found by a bounded Hooke–Jeeves pattern search (deterministic and
//! derivative-free) on the distance of the runs' simulated TTFT, TPOT and latency
//! distributions from the real ones (`super::distance`), in rounds that each start from the
//! best point with the runs' response there and its Gauss–Newton step
//! ([`search_in_rounds`]). The response is measured with moves of 5% of each range, far
//! larger than the steps and flats below, so it sees the trend.
//!
//! Why a pattern search: a simulated run's statistics are piecewise constant in the constants
//! (integer nanoseconds, discrete scheduling decisions), so finite-difference gradients and
//! the local linear or quadratic models of COBYLA or BOBYQA see steps and flats, while a
//! pattern search only compares values. It keeps every trial inside the bounds by
//! construction, visits the same points in the same order on every run, and needs no
//! tuning beyond its step sizes.

use crate::config::KernelSpec;
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// One constant the fit may move (two are the same when their keys are).
#[derive(Debug, Clone, Copy)]
pub struct Scalar {
    /// Its key in the hardware file.
    pub key: &'static str,
    /// What it is, in words.
    pub what: &'static str,
    /// The range real GPUs have (with the measurements it comes from in [`SCALARS`]).
    pub lo: f64,
    pub hi: f64,
    /// Decimal places it is written with.
    pub decimals: i32,
    /// How much it varies between GPUs: one standard deviation of the values measured on
    /// different GPUs (in [`SCALARS`], with where they come from). The search steps in it.
    pub width: f64,
    get: fn(&KernelSpec) -> Option<f64>,
    set: fn(&mut KernelSpec, f64),
}

impl PartialEq for Scalar {
    fn eq(&self, other: &Scalar) -> bool {
        self.key == other.key
    }
}

impl Scalar {
    /// Its value in `k`.
    pub fn get(&self, k: &KernelSpec) -> Option<f64> {
        (self.get)(k)
    }

    /// `k` with this constant at `value`.
    pub fn set(&self, k: &mut KernelSpec, value: f64) {
        (self.set)(k, value);
    }

    /// `value` at the precision the file keeps.
    pub fn round(&self, value: f64) -> f64 {
        let scale = 10f64.powi(self.decimals);
        ((value * scale).round() / scale).clamp(self.lo, self.hi)
    }

    /// Whether `value` is at one of the bounds, as closely as the search can tell: within 8 of
    /// its final steps (1/512 of the range). The objective is a simulation, which moves in
    /// whole nanoseconds and whole scheduling decisions, so points that close to the bound
    /// can score in either order even when the runs push far past it (runs made at 1.1 of
    /// `gemm_memory_efficiency` on an RTX PRO 6000 fit 0.9993–0.9994 better than 1.0).
    pub fn at_bound(&self, value: f64) -> bool {
        let resolution = (self.hi - self.lo) / 512.0;
        value - self.lo <= resolution || self.hi - value <= resolution
    }
}

/// A [`Scalar`] for `KernelSpec`'s field of the same name, which is its key in the file.
macro_rules! kernel_scalar {
    ($field:ident, $what:expr, $lo:expr, $hi:expr, $decimals:expr, $width:expr) => {
        Scalar {
            key: stringify!($field),
            what: $what,
            lo: $lo,
            hi: $hi,
            decimals: $decimals,
            width: $width,
            get: |k| k.$field,
            set: |k, v| k.$field = Some(v),
        }
    };
}

/// The constants `calibrate` can fit. Bounds: the measured spread over eight GPUs'
/// kernel tables (`src/latency/roofline.rs` cites them) widened to what a healthy GPU can
/// show, and never above what the hardware can deliver. Widths: the sample standard
/// deviation of the per-GPU values `scripts/derive_roofline.py` fits to each GPU's own kernel
/// tables (its "per-GPU fits": LLMServingSim's and Frontier's profiles and our H200
/// measurement; no end-to-end run).
pub const SCALARS: [Scalar; 5] = [
    // Large GEMMs: 0.77–1.02 of peak dense FLOP/s measured (A100 to RTX 4090, which
    // sustains a boost clock); below 0.4 no tuned library runs; 1.1 leaves room for boost.
    // Width: 0.084 over A100 0.77, A800 0.86, A40 0.82, H100 0.79, H200 0.80, RTX 4090 1.02,
    // RTX PRO 6000 0.82.
    kernel_scalar!(
        gemm_compute_efficiency,
        "fraction of peak dense FLOP/s a large (compute-bound) GEMM reaches",
        0.4,
        1.1,
        4,
        0.084
    ),
    // Weight streaming of small-batch GEMMs: 0.78–0.98 of peak bandwidth measured; no kernel
    // reads memory faster than the datasheet's bandwidth. Width: within a class whose median
    // the roofline uses, as derived when the classes were generations: 0.038 over H100 0.898,
    // H800 0.982, H200 0.905, RTX 4090 0.947, RTX PRO 6000 0.971; 0.037 over A100 0.783, A800
    // 0.844, A40 0.777 (kept: by memory class, the roofline's now, 0.043 over HBM2e, 0.047
    // over HBM3 and HBM3e, 0.029 over GDDR with the A40's in-band ECC taken off).
    kernel_scalar!(
        gemm_memory_efficiency,
        "fraction of peak memory bandwidth at which a GEMM streams its weights",
        0.5,
        1.0,
        4,
        0.037
    ),
    // Fixed time per GEMM kernel (ramp-up, tail wave, split-K): 1.66–6.95 µs measured.
    // Width: 1,785 ns over A100 4.64, A800 6.24, A40 2.63, H100 4.43, H800 3.14, H200 6.95,
    // RTX 4090 4.84, RTX PRO 6000 1.66 µs.
    kernel_scalar!(
        gemm_fixed_ns,
        "fixed time of every GEMM kernel, ns (ramp-up, tail wave, split-K reduction)",
        500.0,
        12_000.0,
        0,
        1785.0
    ),
    // Decode attention streaming the KV cache: 0.916 median over the tables (with the decode
    // kernels' clocks and waves, `roofline/decode.rs`); paged KV reads below 0.3 of bandwidth
    // are a broken kernel, above 1.0 impossible. Width: 0.017 over H200 0.906, RTX 4090 0.940,
    // RTX PRO 6000 0.916.
    kernel_scalar!(
        decode_attention_efficiency,
        "fraction of peak memory bandwidth at which decode attention reads the KV cache",
        0.3,
        1.0,
        4,
        0.017
    ),
    // Fused MoE streaming the hit experts' weights: 0.68–0.93 measured (A100 to A800).
    // Width: 0.105 over A100 0.682, A800 0.926, H800 0.818, RTX PRO 6000 0.873.
    kernel_scalar!(
        moe_memory_efficiency,
        "fraction of peak memory bandwidth at which the fused-MoE kernel streams the \
         weights of the experts a batch hits",
        0.3,
        1.0,
        4,
        0.105
    ),
];

/// The scalar named `key` (as in the hardware file, with or without `kernels.`).
pub fn scalar(key: &str) -> Option<Scalar> {
    let key = key.strip_prefix("kernels.").unwrap_or(key);
    SCALARS.iter().copied().find(|s| s.key == key)
}

/// How the search moves: first step and the step below which it stops, in widths along
/// each axis of its [`Space`], and the most evaluations it makes.
#[derive(Debug, Clone, Copy)]
pub struct SearchLimits {
    pub first_step: f64,
    pub last_step: f64,
    pub max_evaluations: usize,
}

impl Default for SearchLimits {
    fn default() -> SearchLimits {
        SearchLimits {
            first_step: 2.0,
            last_step: 1.0 / 256.0,
            max_evaluations: 400,
        }
    }
}

/// The coordinates the search moves in: from the starting values, along `axes` (each a
/// direction with one weight per scalar), in units of each scalar's width.
#[derive(Debug, Clone)]
pub struct Space<'a> {
    scalars: &'a [Scalar],
    axes: Vec<Vec<f64>>,
}

impl<'a> Space<'a> {
    /// The principal axes of the runs' response: `effects[i]` is how the runs' numbers move
    /// when `scalars[i]` moves one width; the axes are the eigenvectors of the effects' Gram
    /// matrix, steepest first. Along them the objective's curvature near the start is
    /// uncoupled, so a search along them follows a valley that two constants share (one
    /// along each scalar stalls in it: every single move climbs a wall).
    pub fn principal(scalars: &'a [Scalar], effects: &[Vec<f64>]) -> Space<'a> {
        let gram = effects
            .iter()
            .map(|a| {
                let dot = |b: &Vec<f64>| a.iter().zip(b).map(|(x, y)| x * y).sum::<f64>();
                effects.iter().map(dot).collect()
            })
            .collect();
        Space {
            scalars,
            axes: eigenvectors(gram),
        }
    }

    /// The point `c` (a coordinate per axis) from `start`, rounded as the file keeps it and
    /// clamped to the bounds.
    pub fn point(&self, start: &KernelSpec, c: &[f64]) -> KernelSpec {
        let mut k = start.clone();
        for (i, s) in self.scalars.iter().enumerate() {
            let shift: f64 = self.axes.iter().zip(c).map(|(a, x)| a[i] * x).sum();
            s.set(
                &mut k,
                s.round(s.get(start).unwrap_or(s.lo) + s.width * shift),
            );
        }
        k
    }

    /// The coordinates of `k` from `start`: the inverse of [`Space::point`] for a point
    /// inside the bounds (the axes are orthonormal). The search takes them from each point
    /// it keeps, so coordinates never run past a bound the point is clamped to (a move back
    /// from the bound then moves the constant at once).
    pub fn coordinates(&self, start: &KernelSpec, k: &KernelSpec) -> Vec<f64> {
        let shifts: Vec<f64> = self
            .scalars
            .iter()
            .map(|s| (s.get(k).unwrap_or(s.lo) - s.get(start).unwrap_or(s.lo)) / s.width)
            .collect();
        self.axes
            .iter()
            .map(|a| a.iter().zip(&shifts).map(|(x, y)| x * y).sum())
            .collect()
    }
}

/// The eigenvectors of the symmetric matrix `a`, by decreasing eigenvalue (cyclic Jacobi
/// rotations; the matrices here are at most 5 × 5).
pub fn eigenvectors(mut a: Vec<Vec<f64>>) -> Vec<Vec<f64>> {
    let n = a.len();
    let mut v: Vec<Vec<f64>> = (0..n)
        .map(|i| (0..n).map(|j| f64::from(u8::from(i == j))).collect())
        .collect();
    for _ in 0..64 {
        let off: f64 = (0..n)
            .flat_map(|p| (p + 1..n).map(move |q| (p, q)))
            .map(|(p, q)| a[p][q] * a[p][q])
            .sum();
        let diagonal: f64 = (0..n).map(|p| a[p][p] * a[p][p]).sum();
        if off <= 1e-24 * diagonal || off == 0.0 {
            break;
        }
        for p in 0..n {
            for q in p + 1..n {
                if a[p][q] != 0.0 {
                    rotate(&mut a, &mut v, p, q);
                }
            }
        }
    }
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&i, &j| a[j][j].total_cmp(&a[i][i]));
    order
        .iter()
        .map(|&j| (0..n).map(|i| v[i][j]).collect())
        .collect()
}

/// One Jacobi rotation zeroing `a[p][q]` (`p < q`), accumulated into `v`'s columns.
fn rotate(a: &mut [Vec<f64>], v: &mut [Vec<f64>], p: usize, q: usize) {
    let theta = (a[q][q] - a[p][p]) / (2.0 * a[p][q]);
    let t = theta.signum() / (theta.abs() + (theta * theta + 1.0).sqrt());
    let c = 1.0 / (t * t + 1.0).sqrt();
    let s = t * c;
    for row in a.iter_mut() {
        let (x, y) = (row[p], row[q]);
        (row[p], row[q]) = (c * x - s * y, s * x + c * y);
    }
    let (upper, lower) = a.split_at_mut(q);
    for (x, y) in upper[p].iter_mut().zip(lower[0].iter_mut()) {
        (*x, *y) = (c * *x - s * *y, s * *x + c * *y);
    }
    for row in v.iter_mut() {
        let (x, y) = (row[p], row[q]);
        (row[p], row[q]) = (c * x - s * y, s * x + c * y);
    }
}

/// Where a search ended.
#[derive(Debug, Clone)]
pub struct Found {
    /// The constants at the best point, rounded as the file keeps them.
    pub kernels: KernelSpec,
    /// The objective there.
    pub value: f64,
    pub evaluations: usize,
    /// How many rounds (a response, a Gauss–Newton step, a pattern search) it made.
    pub rounds: usize,
    /// The simulations that measured the response after the first round's (not counted
    /// against the most evaluations: each round makes at least one evaluation).
    pub probes: usize,
    /// How many starts it searched from ([`search_from_starts`]).
    pub starts: usize,
}

/// How the runs' numbers respond at a point: `effects[i]`, how they move when scalar `i`
/// moves one width from it (inwards at a bound), and `numbers`, their values there (0 where
/// a number does not exist).
#[derive(Debug, Clone)]
pub struct Response {
    pub effects: Vec<Vec<f64>>,
    pub numbers: Vec<f64>,
}

/// Minimises `objective` over `scalars` (each within its bounds) from `start`. Each round
/// starts from the best point so far with the runs' [`Response`] there: first a
/// Gauss–Newton step (the move, in widths, that brings the numbers to zero by the response
/// taken as linear, clamped to the bounds; tried whole, half and quarter), then a
/// [`search`] along the principal axes of the response, from its first step again. Rounds
/// continue while one improves. The axes found at one point hold only where the response is
/// close to linear: where a valley that two constants share bends, or a constant reaches a
/// bound and the others must slide along it, every move along the old axes climbs and the
/// steps shrink to nothing short of the floor. A round follows the valley as it is where
/// the last stopped, and the Gauss–Newton step crosses the flat floor of a shallow valley
/// in one move that no pattern step on it finds.
pub fn search_in_rounds(
    scalars: &[Scalar],
    start: &KernelSpec,
    limits: SearchLimits,
    response_at: &mut dyn FnMut(&KernelSpec) -> anyhow::Result<Response>,
    objective: &mut dyn FnMut(&KernelSpec) -> anyhow::Result<f64>,
    progress: &mut dyn FnMut(),
) -> anyhow::Result<Found> {
    let mut best = Found {
        kernels: start.clone(),
        value: objective(start)?,
        evaluations: 1,
        rounds: 0,
        probes: 0,
        starts: 1,
    };
    progress();
    while best.evaluations < limits.max_evaluations {
        let response = response_at(&best.kernels)?;
        if best.rounds > 0 {
            // The response's simulations: the point and one move of each scalar.
            best.probes += scalars.len() + 1;
        }
        best.rounds += 1;
        let before = best.value;
        newton(scalars, &mut best, &response, limits, objective, progress)?;
        let space = Space::principal(scalars, &response.effects);
        let rest = SearchLimits {
            max_evaluations: limits.max_evaluations - best.evaluations,
            ..limits
        };
        let again = search(
            &space,
            &best.kernels,
            Some(best.value),
            rest,
            objective,
            progress,
        )?;
        best.evaluations += again.evaluations;
        if again.value < best.value {
            (best.kernels, best.value) = (again.kernels, again.value);
        }
        if best.value >= before {
            break;
        }
    }
    Ok(best)
}

/// How many starts a fit searches from besides the measured constants ([`starts`]).
pub const EXTRA_STARTS: usize = 3;

/// The seed of the stream that places the extra starts (fixed: a fit is the same on every
/// run).
const STARTS_SEED: u64 = 37;

/// Where a multi-start fit begins: `start` (the measured constants), then `extra` points
/// spread over the fitted scalars' bounds as a Latin hypercube: each scalar's range is cut
/// into `extra` equal strata, every stratum's midpoint is used by exactly one start, and
/// which start gets which midpoint is a shuffle drawn from a ChaCha stream of fixed seed.
/// Every scalar thus starts once in each part of its range, never at a bound, and the
/// points are the same on every run.
pub fn starts(scalars: &[Scalar], start: &KernelSpec, extra: usize) -> Vec<KernelSpec> {
    let mut rng = ChaCha8Rng::seed_from_u64(STARTS_SEED);
    let mut out = vec![start.clone(); extra + 1];
    for s in scalars {
        let mut strata: Vec<usize> = (0..extra).collect();
        for i in (1..extra).rev() {
            strata.swap(i, rng.random_range(0..=i));
        }
        for (k, stratum) in out[1..].iter_mut().zip(strata) {
            let u = (stratum as f64 + 0.5) / extra as f64;
            s.set(k, s.round(s.lo + u * (s.hi - s.lo)));
        }
    }
    out
}

/// [`search_in_rounds`] from each of `starts` in turn (each with the whole of `limits`),
/// keeping the end with the lowest objective (the earliest start's on a tie). One search
/// descends into the basin its start lies in: where the runs' distance has a second, shallower
/// valley (a constant pushed to its bound while another compensates), a search from the
/// measured constants can end there, and a start in another part of the range reaches the
/// deeper one. The returned counts add up every start's simulations; `rounds` are the
/// winner's.
pub fn search_from_starts(
    scalars: &[Scalar],
    starts: &[KernelSpec],
    limits: SearchLimits,
    response_at: &mut dyn FnMut(&KernelSpec) -> anyhow::Result<Response>,
    objective: &mut dyn FnMut(&KernelSpec) -> anyhow::Result<f64>,
    progress: &mut dyn FnMut(),
) -> anyhow::Result<Found> {
    let mut best: Option<Found> = None;
    let (mut evaluations, mut probes) = (0, 0);
    for (i, start) in starts.iter().enumerate() {
        let found = search_in_rounds(scalars, start, limits, response_at, objective, progress)?;
        evaluations += found.evaluations;
        // A later start's first response is simulated too (the first start's is not: the
        // identifiability check measured it).
        probes += found.probes + if i == 0 { 0 } else { scalars.len() + 1 };
        if best.as_ref().is_none_or(|b| found.value < b.value) {
            best = Some(found);
        }
    }
    let mut best = best.ok_or_else(|| anyhow::anyhow!("no start to search from"))?;
    (best.evaluations, best.probes, best.starts) = (evaluations, probes, starts.len());
    Ok(best)
}

/// Tries the Gauss–Newton step of `response` from `best`, whole, then a half and a quarter
/// of it, and moves `best` to the first that improves, if one does.
fn newton(
    scalars: &[Scalar],
    best: &mut Found,
    response: &Response,
    limits: SearchLimits,
    objective: &mut dyn FnMut(&KernelSpec) -> anyhow::Result<f64>,
    progress: &mut dyn FnMut(),
) -> anyhow::Result<()> {
    for fraction in [1.0, 0.5, 0.25] {
        if best.evaluations >= limits.max_evaluations {
            break;
        }
        let k = newton_point(scalars, &best.kernels, response, fraction);
        if k == best.kernels {
            break;
        }
        let value = objective(&k)?;
        progress();
        best.evaluations += 1;
        if value < best.value {
            (best.kernels, best.value) = (k, value);
            break;
        }
    }
    Ok(())
}

/// `from` moved by `fraction` of the Gauss–Newton step of `response` (the least-squares
/// solution, in widths, of effects × move = −numbers), rounded and clamped to the bounds.
pub fn newton_point(
    scalars: &[Scalar],
    from: &KernelSpec,
    response: &Response,
    fraction: f64,
) -> KernelSpec {
    let e = &response.effects;
    let dot = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(x, y)| x * y).sum::<f64>();
    let mut normal: Vec<Vec<f64>> = e
        .iter()
        .map(|a| e.iter().map(|b| dot(a, b)).collect())
        .collect();
    let trace: f64 = (0..e.len()).map(|i| normal[i][i]).sum();
    for (i, row) in normal.iter_mut().enumerate() {
        row[i] += 1e-9 * trace;
    }
    let right: Vec<f64> = e.iter().map(|a| -dot(a, &response.numbers)).collect();
    let mut k = from.clone();
    if let Some(step) = solve(normal, right) {
        for (s, d) in scalars.iter().zip(step) {
            let now = s.get(from).unwrap_or(s.lo);
            s.set(&mut k, s.round(now + fraction * d * s.width));
        }
    }
    k
}

/// The solution of `a` x = `b` (Gaussian elimination with partial pivoting; `None` when
/// `a` is singular or the solution is not finite).
pub fn solve(mut a: Vec<Vec<f64>>, mut b: Vec<f64>) -> Option<Vec<f64>> {
    let n = b.len();
    for col in 0..n {
        let pivot = (col..n).max_by(|&i, &j| a[i][col].abs().total_cmp(&a[j][col].abs()))?;
        if a[pivot][col] == 0.0 {
            return None;
        }
        a.swap(col, pivot);
        b.swap(col, pivot);
        for row in col + 1..n {
            let (upper, lower) = a.split_at_mut(row);
            let (pivot_row, this) = (&upper[col], &mut lower[0]);
            let f = this[col] / pivot_row[col];
            this.iter_mut()
                .zip(pivot_row)
                .for_each(|(x, p)| *x -= f * p);
            b[row] -= f * b[col];
        }
    }
    let mut x = vec![0.0; n];
    for row in (0..n).rev() {
        let tail: f64 = (row + 1..n).map(|j| a[row][j] * x[j]).sum();
        x[row] = (b[row] - tail) / a[row][row];
    }
    x.iter().all(|v| v.is_finite()).then_some(x)
}

/// Minimises `objective` over the scalars of `space` (each within its bounds) from `start`
/// (whose objective is `value` when known), by a Hooke–Jeeves pattern search along the
/// space's axes: a sweep tries one step up, then down, along each axis, keeping any
/// improvement; after a sweep that improved, one pattern move repeats the sweep's whole
/// displacement (which follows a valley that no single axis descends); after a sweep that
/// did not, the step halves. Points are rounded to the file's precision (and clamped to the
/// bounds) before they are evaluated, so the result is exactly a point evaluated.
/// `progress` is called after each evaluation.
pub fn search(
    space: &Space<'_>,
    start: &KernelSpec,
    value: Option<f64>,
    limits: SearchLimits,
    objective: &mut dyn FnMut(&KernelSpec) -> anyhow::Result<f64>,
    progress: &mut dyn FnMut(),
) -> anyhow::Result<Found> {
    let start = space.point(start, &vec![0.0; space.axes.len()]);
    let mut search = Search {
        space,
        start: &start,
        objective,
        progress,
        evaluations: 0,
        max: limits.max_evaluations,
    };
    let mut best = Point {
        c: vec![0.0; space.axes.len()],
        kernels: start.clone(),
        value: 0.0,
    };
    best.value = match value {
        Some(v) => v,
        None => search.evaluate(&best.kernels)?,
    };
    let mut step = limits.first_step;
    while step >= limits.last_step && search.evaluations < search.max {
        let before = best.c.clone();
        let swept = search.sweep(&best, step)?;
        if swept.value >= best.value {
            step /= 2.0;
            continue;
        }
        best = swept;
        let c: Vec<f64> = best
            .c
            .iter()
            .zip(&before)
            .map(|(n, w)| 2.0 * n - w)
            .collect();
        let kernels = space.point(&start, &c);
        if kernels != best.kernels && search.evaluations < search.max {
            let value = search.evaluate(&kernels)?;
            if value < best.value {
                let c = space.coordinates(&start, &kernels);
                best = Point { c, kernels, value };
            }
        }
    }
    Ok(Found {
        kernels: best.kernels,
        value: best.value,
        evaluations: search.evaluations,
        rounds: 0,
        probes: 0,
        starts: 1,
    })
}

/// A point of the search: its coordinates, constants and objective.
#[derive(Clone)]
struct Point {
    c: Vec<f64>,
    kernels: KernelSpec,
    value: f64,
}

/// The objective with its evaluation count.
struct Search<'a> {
    space: &'a Space<'a>,
    start: &'a KernelSpec,
    objective: &'a mut dyn FnMut(&KernelSpec) -> anyhow::Result<f64>,
    progress: &'a mut dyn FnMut(),
    evaluations: usize,
    max: usize,
}

impl Search<'_> {
    fn evaluate(&mut self, k: &KernelSpec) -> anyhow::Result<f64> {
        let value = (self.objective)(k)?;
        self.evaluations += 1;
        (self.progress)();
        Ok(value)
    }

    /// One exploratory sweep from `from` at `step`: the point it ends at.
    fn sweep(&mut self, from: &Point, step: f64) -> anyhow::Result<Point> {
        let mut best = from.clone();
        for axis in 0..self.space.axes.len() {
            for direction in [1.0, -1.0] {
                if self.evaluations >= self.max {
                    return Ok(best);
                }
                let mut c = best.c.clone();
                c[axis] += direction * step;
                let kernels = self.space.point(self.start, &c);
                if kernels == best.kernels {
                    continue;
                }
                let value = self.evaluate(&kernels)?;
                if value < best.value {
                    let c = self.space.coordinates(self.start, &kernels);
                    best = Point { c, kernels, value };
                    break;
                }
            }
        }
        Ok(best)
    }
}
