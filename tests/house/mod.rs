//! The code base itself: layers, one home per concept.

mod decision_levels;
mod layers;
