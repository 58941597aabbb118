//! The live target: zkfle impersonates every other recorded peer towards a live server
//! configured as SID.

use super::{Recording, Report};

/// Replays `rec` into the live server whose election address is `target`.
pub fn replay(rec: &Recording, target: &str, speed: f64) -> Result<Report, String> {
    let _ = (rec, speed);
    Err(format!("live target {target}: not implemented yet"))
}
