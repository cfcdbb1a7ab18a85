//! Hostile input, property-based: parsers, the measuring step, the trace reader.

mod measuring;
mod parsers;
mod traces;
