//! The progress bar `run` and `explore` draw on stderr.

use std::io::IsTerminal;

/// A progress bar on stderr when it is a terminal (rate-limited redraws, an
/// ETA, a count that only goes up), nothing otherwise.
pub struct Progress {
    bar: indicatif::ProgressBar,
}

impl Progress {
    pub fn new(total: u64, unit: &str) -> Self {
        if !std::io::stderr().is_terminal() {
            return Self { bar: indicatif::ProgressBar::hidden() };
        }
        let style = indicatif::ProgressStyle::with_template(&format!(
            "  {{bar:30}} {{pos}}/{{len}} {unit}  {{per_sec}}  ETA {{eta}}"
        ))
        .expect("a valid progress template");
        Self { bar: indicatif::ProgressBar::new(total).with_style(style) }
    }

    pub fn step(&self) {
        self.bar.inc(1);
    }

    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}
