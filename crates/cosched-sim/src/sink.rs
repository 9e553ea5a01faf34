//! Where the simulator's trace lines go: kept in memory, streamed as JSON Lines, or filtered.

use cosched_core::metrics::Summarizer;
use cosched_core::trace::{Record, TraceLine};
use std::io::{self, Write};

pub trait TraceSink {
    fn record(&mut self, line: &TraceLine) -> io::Result<()>;
}

/// Keeps every line (small runs, tests), plan changes rebuilt into whole plans as
/// [`cosched_core::trace::read_trace`] does.
impl TraceSink for Vec<TraceLine> {
    fn record(&mut self, line: &TraceLine) -> io::Result<()> {
        let Record::PlanChange(change) = &line.record else {
            self.push(line.clone());
            return Ok(());
        };
        let mut plan = self
            .iter()
            .rev()
            .find_map(|l| match &l.record {
                Record::Plan { plan } => Some(plan.clone()),
                _ => None,
            })
            .unwrap_or_default();
        change.apply(&mut plan);
        self.push(TraceLine {
            t: line.t,
            record: Record::Plan { plan },
        });
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
            Record::Plan { .. } | Record::PlanChange(_) | Record::Sample(_) => self.dropped += 1,
            _ => self.lines.push(line.clone()),
        }
        Ok(())
    }
}

/// Computes the run's metrics as lines stream past, and hands each line on to `next` (a trace file)
/// when there is one: a run's figures without keeping its trace.
pub struct SummarySink<'a> {
    pub summary: Summarizer,
    next: Option<&'a mut dyn TraceSink>,
}

impl<'a> SummarySink<'a> {
    pub fn new(next: Option<&'a mut dyn TraceSink>) -> Self {
        SummarySink {
            summary: Summarizer::default(),
            next,
        }
    }
}

impl TraceSink for SummarySink<'_> {
    fn record(&mut self, line: &TraceLine) -> io::Result<()> {
        self.summary.add(line);
        match &mut self.next {
            Some(next) => next.record(line),
            None => Ok(()),
        }
    }
}
