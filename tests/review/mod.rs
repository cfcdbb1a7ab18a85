//! The morning review: every number and word recomputed from the runs behind it.

mod against_the_runs;
mod pictures;
mod show;
mod table;
