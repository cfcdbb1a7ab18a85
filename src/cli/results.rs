//! `ratchet results`: the morning review. Filters (`--kept`, `--status`, `--tag`, `--since`)
//! and an order (`--sort`) pick the rows; the table and its footer tell the story of the whole
//! table (best-so-far, cumulative gain, runs spent), and csv/json/md export the chosen rows.

use crate::cli::args::{ResultsArgs, SortKey};
use crate::error::{Error, Result};
use crate::report::{self, View};
use crate::store::{ResultRow, Status};
use crate::workspace::Workspace;

pub fn run(ws: &Workspace, args: &ResultsArgs) -> Result<()> {
    let _repo = &ws.repo;
    let store = &ws.store;
    let rows = store.rows()?;
    let view = select(&rows, args, chrono::Utc::now())?;
    let opts = report::TableOpts { color: crate::cli::term::color(), width: crate::cli::term::width(), wide: args.wide };
    println!("{}", report::render_with(&view, args.format, opts).trim_end());
    Ok(())
}

/// The cutoff of `--since`: an RFC 3339 time, or an age (`12h`) before `now`.
pub fn parse_since(s: &str, now: chrono::DateTime<chrono::Utc>) -> Result<chrono::DateTime<chrono::Utc>> {
    if let Ok(t) = chrono::DateTime::parse_from_rfc3339(s.trim()) {
        return Ok(t.with_timezone(&chrono::Utc));
    }
    let d = crate::sweep::parse_duration(s).map_err(|_| {
        Error::usage(format!("--since {s:?} is neither an RFC 3339 time nor an age"))
            .hint("write e.g. --since 12h, --since 30m or --since 2026-11-22T01:00:00Z")
    })?;
    let d = chrono::Duration::from_std(d).map_err(|_| Error::usage(format!("--since {s:?} is too long ago")))?;
    Ok(now - d)
}

/// Apply the filters and the order of `args` to `rows`.
pub fn select<'a>(rows: &'a [ResultRow], args: &ResultsArgs, now: chrono::DateTime<chrono::Utc>) -> Result<View<'a>> {
    let mut statuses = vec![];
    for s in &args.status {
        statuses.push(Status::parse(s).ok_or_else(|| {
            Error::usage(format!("--status {s:?} is not a status"))
                .hint(format!("use one of {}", Status::ALL.map(|s| s.as_str()).join(", ")))
        })?);
    }
    if args.kept {
        statuses.push(Status::Keep);
    }
    let since = args.since.as_deref().map(|s| parse_since(s, now)).transpose()?;
    let mut filter = vec![];
    if !statuses.is_empty() {
        filter.push(format!("status {}", statuses.iter().map(|s| s.as_str()).collect::<Vec<_>>().join("|")));
    }
    if !args.tag.is_empty() {
        filter.push(format!("tag {}", args.tag.join("|")));
    }
    if let Some(s) = &args.since {
        filter.push(format!("since {s}"));
    }
    let mut shown: Vec<usize> = (0..rows.len())
        .filter(|&i| {
            let r = &rows[i];
            let status_ok = statuses.is_empty() || statuses.contains(&r.status);
            let tag_ok = args.tag.is_empty() || r.tags.split(';').any(|t| args.tag.iter().any(|w| w == t));
            let time_ok = match since {
                None => true,
                Some(cut) => chrono::DateTime::parse_from_rfc3339(&r.time).map(|t| t.with_timezone(&chrono::Utc) >= cut).unwrap_or(true),
            };
            status_ok && tag_ok && time_ok
        })
        .collect();
    let lower_better = rows.last().is_some_and(|r| crate::stats::Metric::lower_is_better(&r.metric));
    let key = |v: Option<f64>, flip: bool| v.map(|x| if flip { x } else { -x }).unwrap_or(f64::INFINITY);
    match args.sort {
        SortKey::Id => {}
        SortKey::Delta => shown.sort_by(|&a, &b| key(rows[a].delta_pct, false).total_cmp(&key(rows[b].delta_pct, false))),
        SortKey::Value => shown.sort_by(|&a, &b| key(rows[a].value, lower_better).total_cmp(&key(rows[b].value, lower_better))),
    }
    Ok(View { all: rows, shown, filter: filter.join(", ") })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn since_takes_times_and_ages() {
        let now = chrono::DateTime::parse_from_rfc3339("2026-11-22T12:00:00Z").unwrap().with_timezone(&chrono::Utc);
        assert_eq!(parse_since("12h", now).unwrap().to_rfc3339(), "2026-11-22T00:00:00+00:00");
        assert_eq!(parse_since("2026-11-21T10:00:00+02:00", now).unwrap().to_rfc3339(), "2026-11-21T08:00:00+00:00");
        assert!(parse_since("yesterday", now).unwrap_err().to_string().contains("RFC 3339"));
    }
}
