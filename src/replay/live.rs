//! The live target (not yet written).
