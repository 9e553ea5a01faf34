//! How late the daemon's slot switches came against their deadlines: a total and the latest
//! lateness values, bounded so that a daemon running for months keeps a fixed amount of them.

use std::collections::VecDeque;

/// Lateness values kept: about three minutes of 50 ms slots.
pub const KEPT: usize = 4096;

#[derive(Debug, Default)]
pub struct SwitchLog {
    total: u64,
    recent: VecDeque<f64>,
}

impl SwitchLog {
    pub fn record(&mut self, lateness: f64) {
        self.total += 1;
        if self.recent.len() == KEPT {
            self.recent.pop_front();
        }
        self.recent.push_back(lateness);
    }

    /// Switches since the daemon started.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// The latest lateness values in seconds, oldest first.
    pub fn recent(&self) -> Vec<f64> {
        self.recent.iter().copied().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_total_and_only_the_latest_values() {
        let mut log = SwitchLog::default();
        for i in 0..KEPT + 10 {
            log.record(i as f64);
        }
        assert_eq!(log.total(), (KEPT + 10) as u64);
        let recent = log.recent();
        assert_eq!(recent.len(), KEPT);
        assert_eq!(recent[0], 10.0);
        assert_eq!(*recent.last().unwrap(), (KEPT + 9) as f64);
    }
}
