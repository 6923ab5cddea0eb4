//! `--svg FILE`: the bench's figures as an SVG chart (plotters' SVG backend: text only, no
//! fonts or browser needed).

use std::path::Path;

use lockwise_bench::Entry;
use plotters::prelude::*;

use crate::exit::{self, Failure};

const SIZE: (u32, u32) = (800, 480);
const COLOURS: [RGBColor; 4] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
];

fn failed(what: &str, e: impl std::fmt::Display) -> Failure {
    Failure {
        code: exit::BACKEND,
        message: format!("cannot draw the chart: {what}: {e}"),
    }
}

/// Writes `svg` to `file`.
fn save(file: &Path, svg: String) -> Result<(), Failure> {
    std::fs::write(file, svg).map_err(|e| Failure {
        code: exit::USAGE,
        message: format!("cannot write {}: {e}", file.display()),
    })
}

/// Exercise 3: jobs/s against workers, one line per strategy.
pub(super) fn scaling(file: &Path, results: &[Entry]) -> Result<(), Failure> {
    let mut strategies: Vec<&str> = Vec::new();
    for e in results {
        if let Some(s) = e.strategy.as_deref()
            && !strategies.contains(&s)
        {
            strategies.push(s);
        }
    }
    let most_workers = results.iter().filter_map(|e| e.workers).max().unwrap_or(1) as u32;
    let top = results
        .iter()
        .filter_map(|e| e.jobs_per_s)
        .fold(1.0_f64, f64::max)
        * 1.1;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(|e| failed("background", e))?;
        let mut chart = ChartBuilder::on(&root)
            .caption(
                "lock-guarded queue vs SKIP LOCKED (the lesson's exercise 3)",
                ("sans-serif", 20),
            )
            .margin(16)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(0u32..most_workers + 1, 0f64..top)
            .map_err(|e| failed("axes", e))?;
        chart
            .configure_mesh()
            .x_desc("workers")
            .y_desc("jobs/s (median)")
            .draw()
            .map_err(|e| failed("grid", e))?;
        for (i, strategy) in strategies.iter().enumerate() {
            let colour = COLOURS[i % COLOURS.len()];
            let mut points: Vec<(u32, f64)> = results
                .iter()
                .filter(|e| e.strategy.as_deref() == Some(strategy))
                .filter_map(|e| Some((e.workers? as u32, e.jobs_per_s?)))
                .collect();
            points.sort_by_key(|p| p.0);
            chart
                .draw_series(LineSeries::new(points.clone(), colour.stroke_width(2)))
                .map_err(|e| failed("line", e))?
                .label(*strategy)
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], colour));
            chart
                .draw_series(
                    points
                        .into_iter()
                        .map(|p| Circle::new(p, 4, colour.filled())),
                )
                .map_err(|e| failed("points", e))?;
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .position(SeriesLabelPosition::UpperLeft)
            .draw()
            .map_err(|e| failed("legend", e))?;
        root.present().map_err(|e| failed("output", e))?;
    }
    save(file, svg)
}

/// The lock benches: each figure's ratio to its floor (median, with the min–max of the
/// rounds as an error bar), by bench and backend; 1.0 is the floor.
pub(super) fn lock(file: &Path, results: &[Entry]) -> Result<(), Failure> {
    let rated: Vec<&Entry> = results.iter().filter(|e| e.ratio.is_some()).collect();
    // The concurrent bench runs at more than one concurrency: a slot for each.
    let slot = |e: &Entry| match (e.bench.as_str(), e.tasks) {
        ("concurrent", Some(tasks)) => format!("concurrent ×{tasks}"),
        (bench, _) => bench.to_owned(),
    };
    let mut benches: Vec<String> = Vec::new();
    let mut backends: Vec<&str> = Vec::new();
    for e in &rated {
        if !benches.contains(&slot(e)) {
            benches.push(slot(e));
        }
        if !backends.contains(&e.backend.as_str()) {
            backends.push(&e.backend);
        }
    }
    let top = rated
        .iter()
        .filter_map(|e| e.ratio.map(|r| r.max))
        .fold(1.2_f64, f64::max)
        * 1.1;
    let slots = benches.len().max(1) as f64;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(|e| failed("background", e))?;
        let labels = benches.clone();
        let mut chart = ChartBuilder::on(&root)
            .caption(
                "lockwise / raw floor, same run (1.0 = the floor)",
                ("sans-serif", 20),
            )
            .margin(16)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(-0.5f64..slots - 0.5, 0f64..top)
            .map_err(|e| failed("axes", e))?;
        chart
            .configure_mesh()
            .x_labels(benches.len().max(1))
            .x_label_formatter(&|x| {
                let i = x.round();
                if (x - i).abs() < 0.01 && i >= 0.0 {
                    labels.get(i as usize).cloned().unwrap_or_default()
                } else {
                    String::new()
                }
            })
            .y_desc("ratio (median, min–max)")
            .draw()
            .map_err(|e| failed("grid", e))?;
        chart
            .draw_series(LineSeries::new(
                vec![(-0.5, 1.0), (slots - 0.5, 1.0)],
                BLACK.mix(0.5),
            ))
            .map_err(|e| failed("floor line", e))?;
        let width = 0.6 / backends.len().max(1) as f64;
        for (b, backend) in backends.iter().enumerate() {
            let colour = COLOURS[b % COLOURS.len()];
            let offset = -0.3 + width * (b as f64 + 0.5);
            let points: Vec<(f64, f64, f64, f64)> = rated
                .iter()
                .filter(|e| e.backend == *backend)
                .filter_map(|e| {
                    let x = benches.iter().position(|n| *n == slot(e))? as f64 + offset;
                    let r = e.ratio?;
                    Some((x, r.median, r.min, r.max))
                })
                .collect();
            chart
                .draw_series(points.iter().map(|&(x, m, lo, hi)| {
                    ErrorBar::new_vertical(x, lo, m, hi, colour.filled(), 8)
                }))
                .map_err(|e| failed("ranges", e))?
                .label(*backend)
                .legend(move |(x, y)| Circle::new((x + 10, y), 4, colour.filled()));
            chart
                .draw_series(
                    points
                        .iter()
                        .map(|&(x, m, _, _)| Circle::new((x, m), 5, colour.filled())),
                )
                .map_err(|e| failed("points", e))?;
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .position(SeriesLabelPosition::UpperRight)
            .draw()
            .map_err(|e| failed("legend", e))?;
        root.present().map_err(|e| failed("output", e))?;
    }
    save(file, svg)
}
