//! `ratchet plot`: write the staircase, roofline and run-distribution charts as PNG and SVG,
//! with `--ops ID` an experiment's per-op chart, the sequential test's looks of `--looks ID` (by
//! default the latest experiment that recorded them), and with `--html` a self-contained HTML
//! report.

use crate::cli::args::PlotArgs;
use crate::config::{self, Config};
use crate::error::{Error, Result};
use crate::outcome::{read_looks, LooksRecord};
use crate::plot::{self, Chart, Night};
use crate::store::{write_atomic, ResultRow};
use crate::workspace::Workspace;
use std::path::Path;

/// `dir` is where ratchet was started (`-C`): a relative `--html` path is taken from there.
pub fn run(ws: &Workspace, dir: &Path, args: &PlotArgs) -> Result<()> {
    let repo = &ws.repo;
    let store = &ws.store;
    let rows = store.rows()?;
    if rows.is_empty() {
        return Err(Error::usage("no experiments to plot yet").hint("run `ratchet sweep` or `ratchet \"experiment: ...\"` first"));
    }
    let runs = store.runs()?;
    let hw = Config::load(&config::path_in(repo.root())).ok().and_then(|c| c.hardware());
    let night = Night { rows: &rows, runs: &runs, hw: hw.as_ref() };
    let out = if args.out.is_absolute() { args.out.clone() } else { repo.root().join(&args.out) };
    std::fs::create_dir_all(&out)?;
    let fail = |what: &str, e: String| Error::failure(format!("drawing the {what} chart failed: {e}"));
    for chart in Chart::ALL {
        let name = chart.name();
        if chart == Chart::Runs && runs.is_empty() {
            continue;
        }
        let svg = plot::svg(chart, &night).map_err(|e| fail(name, e))?;
        write_atomic(&out.join(format!("{name}.svg")), svg.as_bytes())?;
        let png = plot::png(chart, &night).map_err(|e| fail(name, e))?;
        write_atomic(&out.join(format!("{name}.png")), &png)?;
        println!("wrote {0}/{name}.png and {0}/{name}.svg", crate::printable::path(&out));
    }
    let mut extra = vec![];
    for &id in &args.ops {
        let row = rows.iter().find(|r| r.id == id).ok_or_else(|| {
            Error::usage(format!("--ops {id}: no experiment {id} in results/results.csv")).hint("`ratchet results` lists the ids")
        })?;
        let exp_runs: Vec<_> = runs.iter().filter(|r| r.experiment == id.to_string()).cloned().collect();
        let kernel = Config::load(&config::path_in(repo.root())).ok().and_then(|c| c.trace.kernel);
        let opts = crate::trace::AnalyzeOptions { kernel, ..Default::default() };
        let side = |s| crate::cli::show::op_breakdown(&exp_runs, s, &opts).map(|(_, ops)| ops);
        let (Some(cand), Some(inc)) = (side(crate::bench::Side::Candidate), side(crate::bench::Side::Incumbent)) else {
            return Err(Error::usage(format!("--ops {id}: experiment {id} has no readable trace on both sides")).hint(
                "traces are written when [benchmark] profile_iters > 0, and `ratchet gc` removes those of old reverted experiments",
            ));
        };
        let svg = plot::ops_svg(row, &cand, &inc).map_err(|e| fail("ops", e))?;
        write_atomic(&out.join(format!("ops-{id}.svg")), svg.as_bytes())?;
        let png = plot::ops_png(row, &cand, &inc).map_err(|e| fail("ops", e))?;
        write_atomic(&out.join(format!("ops-{id}.png")), &png)?;
        println!("wrote {0}/ops-{id}.png and {0}/ops-{id}.svg", crate::printable::path(&out));
        extra.push(svg);
    }
    let state_dir = repo.state_dir();
    for (id, rec) in looks_to_draw(&state_dir, &rows, &args.looks)? {
        let Some(rec) = rec else {
            println!(
                "experiment {id} has no record of its sequential test's looks (decided before ratchet kept them, \
                 not decided by the test, or its directory was removed by `ratchet gc`): no looks chart"
            );
            continue;
        };
        let svg = plot::looks_svg(&rec).map_err(|e| fail("looks", e))?;
        write_atomic(&out.join(format!("looks-{id}.svg")), svg.as_bytes())?;
        let png = plot::looks_png(&rec).map_err(|e| fail("looks", e))?;
        write_atomic(&out.join(format!("looks-{id}.png")), &png)?;
        println!("wrote {0}/looks-{id}.png and {0}/looks-{id}.svg", crate::printable::path(&out));
        extra.push(svg);
    }
    if let Some(h) = &args.html {
        let path = if h.is_absolute() { h.clone() } else { dir.join(h) };
        let title = format!("ratchet results: {}", repo.root().file_name().map(|n| n.to_string_lossy()).unwrap_or_default());
        let ev = plot::Evidence::gather(repo, &rows, path.parent().unwrap_or(Path::new(".")));
        let text = plot::html_with(&night, &title, &extra, &ev).map_err(|e| fail("html", e))?;
        write_atomic(&path, text.as_bytes())?;
        println!("wrote {}", crate::printable::path(&path));
    }
    Ok(())
}

/// The experiments whose looks chart is drawn, each with its record (`None`: it has none). The
/// ids asked for (an id not in results.csv is a usage error); none asked: the latest experiment
/// with a record, if any.
fn looks_to_draw(state_dir: &Path, rows: &[ResultRow], ids: &[u64]) -> Result<Vec<(u64, Option<LooksRecord>)>> {
    let dir = |id: u64| crate::layout::experiment_dir(state_dir, &id.to_string());
    if ids.is_empty() {
        for r in rows.iter().rev() {
            if let Some(rec) = read_looks(&dir(r.id))? {
                return Ok(vec![(r.id, Some(rec))]);
            }
        }
        return Ok(vec![]);
    }
    ids.iter()
        .map(|&id| {
            if !rows.iter().any(|r| r.id == id) {
                return Err(Error::usage(format!("--looks {id}: no experiment {id} in results/results.csv"))
                    .hint("`ratchet results` lists the ids"));
            }
            Ok((id, read_looks(&dir(id))?))
        })
        .collect()
}
