//! The morning review: every number and word recomputed from the runs behind it.

mod ab_table;
mod against_the_runs;
mod control_characters;
mod pictures;
mod reference_results;
mod show;
mod table;
