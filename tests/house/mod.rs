//! The code base itself: layers, one home per concept.

mod layers;
