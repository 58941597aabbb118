//! `zkfle repro`'s report as JSON (its contract) and as text.

use serde_json::{Value, json};

use crate::repro::Report;

impl Report {
    pub fn to_json(&self) -> Value {
        json!({
            "name": self.name,
            "target": self.target,
            "verdict": self.verdict.name(),
            "evidence": self.evidence,
            "server_version": self.server_version,
        })
    }

    pub fn to_text(&self) -> String {
        let mut s = format!(
            "{} against {} (server {}): {}\n",
            self.name,
            self.target,
            self.server_version.as_deref().unwrap_or("version unknown"),
            self.verdict.name()
        );
        for e in &self.evidence {
            s.push_str(&format!("  - {e}\n"));
        }
        s
    }
}
