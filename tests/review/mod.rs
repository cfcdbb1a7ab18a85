//! The morning review: every number and word recomputed from the runs behind it.

mod against_the_runs;
mod pictures;
mod reference_results;
mod show;
mod table;
