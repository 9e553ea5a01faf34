//! Where the simulator's trace lines go: kept in memory, streamed as JSON Lines, or filtered.

use cosched_core::trace::{Record, TraceLine};
use std::io::{self, Write};

pub trait TraceSink {
    fn record(&mut self, line: &TraceLine) -> io::Result<()>;
}

/// Keeps every line (small runs, tests, metrics).
impl TraceSink for Vec<TraceLine> {
    fn record(&mut self, line: &TraceLine) -> io::Result<()> {
        self.push(line.clone());
        Ok(())
    }
}

/// Streams JSON Lines (`docs/trace-format.md`) to any writer, holding nothing in memory.
pub struct JsonLinesSink<W: Write> {
    out: W,
}

impl<W: Write> JsonLinesSink<W> {
    pub fn new(out: W) -> Self {
        JsonLinesSink { out }
    }

    pub fn into_inner(self) -> W {
        self.out
    }
}

impl<W: Write> TraceSink for JsonLinesSink<W> {
    fn record(&mut self, line: &TraceLine) -> io::Result<()> {
        serde_json::to_writer(&mut self.out, line)?;
        self.out.write_all(b"\n")
    }
}

/// Keeps everything but plans and samples: enough for makespan, slowdowns and NTT of very large runs,
/// whose plans would not fit in memory (reconfiguration counts need the plans and read as zero).
#[derive(Default)]
pub struct OutcomeSink {
    pub lines: Vec<TraceLine>,
    pub dropped: u64,
}

impl TraceSink for OutcomeSink {
    fn record(&mut self, line: &TraceLine) -> io::Result<()> {
        match line.record {
            Record::Plan { .. } | Record::Sample(_) => self.dropped += 1,
            _ => self.lines.push(line.clone()),
        }
        Ok(())
    }
}
