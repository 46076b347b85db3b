//! The memory timeline: counted resident bytes over the ops of one training iteration, with
//! the budget line, marks for offloads, fetches and recomputations, and the unbudgeted run's
//! curve, as an SVG picture.

use std::error::Error;

use burn_swap::Trace;
use plotters::prelude::*;

/// What a timeline shows, as numbers (the picture is drawn from it; tests read it).
#[derive(Debug, Clone, PartialEq)]
pub struct Timeline {
    /// `(op index, resident MiB)` of the budgeted iteration.
    pub resident: Vec<(f64, f64)>,
    /// `(op index, resident MiB)` of the unbudgeted run, when given.
    pub unbudgeted: Vec<(f64, f64)>,
    /// The budget in MiB.
    pub budget: Option<f64>,
    /// Ops with offloads, fetches and recomputations: `(op index, resident MiB)`.
    pub offloads: Vec<(f64, f64)>,
    /// See `offloads`.
    pub fetches: Vec<(f64, f64)>,
    /// See `offloads`.
    pub recomputes: Vec<(f64, f64)>,
}

const MIB: f64 = 1024.0 * 1024.0;

/// `(x, y)` points of a curve or a set of marks.
type Points = Vec<(f64, f64)>;

fn curve(trace: &Trace) -> Vec<(f64, f64)> {
    trace
        .ops
        .iter()
        .enumerate()
        .map(|(i, op)| (i as f64, op.resident_bytes as f64 / MIB))
        .collect()
}

/// The curve of `other` shifted so that its ops line up with `iteration`'s: by the shift
/// under which the most op signatures agree (the warm-up step also makes the optimizer's
/// state, so the two never agree everywhere), one iteration long.
fn aligned(other: &Trace, iteration: &Trace) -> Vec<(f64, f64)> {
    let matches = |k: usize| {
        other.ops[k..]
            .iter()
            .zip(&iteration.ops)
            .filter(|(o, i)| o.signature == i.signature)
            .count()
    };
    let start = (0..other.ops.len())
        .max_by_key(|&k| (matches(k), std::cmp::Reverse(k)))
        .unwrap_or(0);
    other.ops[start..]
        .iter()
        .take(iteration.ops.len())
        .enumerate()
        .map(|(i, op)| (i as f64, op.resident_bytes as f64 / MIB))
        .collect()
}

impl Timeline {
    /// The timeline of `budgeted` (one iteration), beside `unbudgeted` when given.
    pub fn new(budgeted: &Trace, unbudgeted: Option<&Trace>, budget: Option<u64>) -> Self {
        let marks = |pick: fn(&burn_swap::trace::OpEvents) -> u16| -> Vec<(f64, f64)> {
            budgeted
                .ops
                .iter()
                .enumerate()
                .filter(|(_, op)| pick(&op.events) > 0)
                .map(|(i, op)| (i as f64, op.resident_bytes as f64 / MIB))
                .collect()
        };
        Self {
            resident: curve(budgeted),
            unbudgeted: unbudgeted.map(|u| aligned(u, budgeted)).unwrap_or_default(),
            budget: budget.map(|b| b as f64 / MIB),
            offloads: marks(|e| e.offloads),
            fetches: marks(|e| e.fetches),
            recomputes: marks(|e| e.recomputes),
        }
    }

    /// Draws the timeline to `path` (an `.svg` file), titled `title`.
    pub fn draw(&self, path: &str, title: &str) -> Result<(), Box<dyn Error>> {
        if !path.ends_with(".svg") {
            return Err(format!(
                "--plot {path}: the picture is written as SVG (end the path with .svg)"
            )
            .into());
        }
        let ops = self.resident.len().max(self.unbudgeted.len()).max(1) as f64;
        let top = self
            .resident
            .iter()
            .chain(&self.unbudgeted)
            .map(|p| p.1)
            .chain(self.budget)
            .fold(0.0f64, f64::max)
            * 1.1
            + 1e-3;
        let root = SVGBackend::new(path, (1000, 480)).into_drawing_area();
        root.fill(&WHITE)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 20))
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(60)
            .build_cartesian_2d(0f64..ops, 0f64..top)?;
        chart
            .configure_mesh()
            .x_desc("op in the iteration")
            .y_desc("resident MiB (counted)")
            .draw()?;
        if !self.unbudgeted.is_empty() {
            chart
                .draw_series(LineSeries::new(
                    self.unbudgeted.iter().copied(),
                    &BLACK.mix(0.35),
                ))?
                .label("unbudgeted")
                .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], BLACK.mix(0.35)));
        }
        let blue = RGBColor(31, 119, 180);
        chart
            .draw_series(LineSeries::new(self.resident.iter().copied(), &blue))?
            .label("under burn-swap")
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], blue));
        if let Some(budget) = self.budget {
            chart
                .draw_series(LineSeries::new(vec![(0.0, budget), (ops, budget)], &RED))?
                .label("budget")
                .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], RED));
        }
        let marks: [(&Points, RGBColor, &str); 3] = [
            (&self.offloads, RGBColor(214, 39, 40), "offload"),
            (&self.fetches, RGBColor(44, 160, 44), "fetch"),
            (&self.recomputes, RGBColor(148, 103, 189), "recompute"),
        ];
        for (points, color, name) in marks {
            if points.is_empty() {
                continue;
            }
            chart
                .draw_series(
                    points
                        .iter()
                        .map(move |&p| Circle::new(p, 3, color.filled())),
                )?
                .label(name)
                .legend(move |(x, y)| Circle::new((x + 9, y), 3, color.filled()));
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .position(SeriesLabelPosition::UpperRight)
            .draw()?;
        root.present()?;
        Ok(())
    }
}
