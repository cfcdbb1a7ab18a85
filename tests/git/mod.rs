//! The repository: what ratchet commits, reverts, parks and recovers, and what it never touches.

mod at_scale;
mod gc;
mod hostile_hypotheses;
mod hostile_paths;
mod hypothesis_contents;
mod kill_at_every_step;
mod large_files_question;
mod retry;
mod safety;
mod unusual_setups;
mod worktree_after;
mod worktree_inprocess;
