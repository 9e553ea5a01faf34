//! Where the simulator's trace lines go: kept in memory, streamed as JSON Lines, or filtered, on the
//! simulation's thread or beside it ([`in_background`]).

use cosched_core::metrics::Summarizer;
use cosched_core::trace::{Record, TraceLine};
use std::io::{self, Write};
use std::sync::mpsc;

pub trait TraceSink {
    fn record(&mut self, line: TraceLine) -> io::Result<()>;
}

/// Keeps every line (small runs, tests), plan changes rebuilt into whole plans as
/// [`cosched_core::trace::read_trace`] does.
impl TraceSink for Vec<TraceLine> {
    fn record(&mut self, line: TraceLine) -> io::Result<()> {
        let Record::PlanChange(change) = &line.record else {
            self.push(line);
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
    fn record(&mut self, line: TraceLine) -> io::Result<()> {
        serde_json::to_writer(&mut self.out, &line)?;
        self.out.write_all(b"\n")
    }
}

/// How much of a run `cosched sim` writes to its trace file.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TraceLevel {
    /// Every line (`docs/trace-format.md`).
    #[default]
    Full,
    /// The run's header and end, and each job's arrival, start and finish: a large run's plans and
    /// thread changes would otherwise make nearly all of its trace and of its time.
    Jobs,
    /// No trace file.
    None,
}

/// A trace level's name that is none of those known.
#[derive(Debug, thiserror::Error)]
#[error("unknown trace level `{0}`; choose full, jobs or none")]
pub struct UnknownTraceLevel(String);

impl std::str::FromStr for TraceLevel {
    type Err = UnknownTraceLevel;
    fn from_str(s: &str) -> Result<Self, UnknownTraceLevel> {
        match s {
            "full" => Ok(Self::Full),
            "jobs" => Ok(Self::Jobs),
            "none" => Ok(Self::None),
            _ => Err(UnknownTraceLevel(s.to_string())),
        }
    }
}

impl TraceLevel {
    /// Whether a line of this kind goes into a trace of this level.
    pub fn keeps(self, record: &Record) -> bool {
        match self {
            TraceLevel::Full => true,
            TraceLevel::Jobs => matches!(
                record,
                Record::RunStart { .. }
                    | Record::Arrival { .. }
                    | Record::Start { .. }
                    | Record::Finish { .. }
                    | Record::RunEnd { .. }
            ),
            TraceLevel::None => false,
        }
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
    fn record(&mut self, line: TraceLine) -> io::Result<()> {
        match line.record {
            Record::Plan { .. } | Record::PlanChange(_) | Record::Sample(_) => self.dropped += 1,
            _ => self.lines.push(line),
        }
        Ok(())
    }
}

/// Computes the run's metrics as lines stream past, and hands each line on to `next` (a trace file)
/// when there is one: a run's figures without keeping its trace.
pub struct SummarySink<'a> {
    pub summary: Summarizer,
    next: Option<&'a mut (dyn TraceSink + Send)>,
}

impl<'a> SummarySink<'a> {
    pub fn new(next: Option<&'a mut (dyn TraceSink + Send)>) -> Self {
        SummarySink {
            summary: Summarizer::default(),
            next,
        }
    }
}

impl TraceSink for SummarySink<'_> {
    fn record(&mut self, line: TraceLine) -> io::Result<()> {
        self.summary.add(&line);
        match &mut self.next {
            Some(next) => next.record(line),
            None => Ok(()),
        }
    }
}

/// Runs `simulate` with a sink that hands its lines to `sink` on another thread, in batches: turning a
/// large run's million lines into JSON and writing them then goes on beside the simulation instead of
/// inside it. Returns what `simulate` returned, or the error `sink` met, which stops the simulation (its
/// lines then fail to go through).
pub fn in_background<R>(
    sink: &mut (dyn TraceSink + Send),
    simulate: impl FnOnce(&mut dyn TraceSink) -> R,
) -> io::Result<R> {
    std::thread::scope(|scope| {
        // A few batches in flight at most: a writer slower than the simulation holds it back rather
        // than letting the lines pile up in memory.
        let (send, receive) = mpsc::sync_channel::<Vec<TraceLine>>(4);
        let writer = scope.spawn(move || -> io::Result<()> {
            for batch in receive {
                for line in batch {
                    sink.record(line)?;
                }
            }
            Ok(())
        });
        let mut handing = Batches {
            send,
            batch: Vec::with_capacity(BATCH),
        };
        let result = simulate(&mut handing);
        let last = handing.hand_over();
        drop(handing);
        match writer.join() {
            Ok(written) => written.and(last).map(|()| result),
            Err(panic) => std::panic::resume_unwind(panic),
        }
    })
}

/// Lines per batch [`in_background`] hands over: few enough to hold, many enough that handing them
/// over costs little.
const BATCH: usize = 512;

/// The sink [`in_background`] gives the simulation.
struct Batches {
    send: mpsc::SyncSender<Vec<TraceLine>>,
    batch: Vec<TraceLine>,
}

impl Batches {
    fn hand_over(&mut self) -> io::Result<()> {
        if self.batch.is_empty() {
            return Ok(());
        }
        let batch = std::mem::replace(&mut self.batch, Vec::with_capacity(BATCH));
        self.send
            .send(batch)
            .map_err(|_| io::Error::new(io::ErrorKind::BrokenPipe, "the trace writer stopped"))
    }
}

impl TraceSink for Batches {
    fn record(&mut self, line: TraceLine) -> io::Result<()> {
        self.batch.push(line);
        if self.batch.len() >= BATCH {
            self.hand_over()?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{simulate_into, SimError, SimOptions, SimStats};
    use crate::generate::Poisson;
    use crate::runner::generated_instances;
    use cosched_core::topology::presets;
    use cosched_core::JobKind;

    fn simulate(jobs: usize, sink: &mut dyn TraceSink) -> Result<SimStats, SimError> {
        let machine = presets::preset("taco-opteron8435").unwrap();
        let generator = Poisson {
            jobs,
            rate_per_min: 30.0,
            mix: vec!["nas".into()],
            exclude: Vec::new(),
            kind: JobKind::Malleable,
            seed: 3,
        };
        let instances = generated_instances(&generator, 1, machine.num_cpus()).unwrap();
        let mut policy = cosched_policies::create("taco").unwrap();
        let options = SimOptions::default();
        simulate_into(
            &machine,
            &instances[0].jobs,
            policy.as_mut(),
            &options,
            sink,
        )
    }

    /// Every line but the run's end, which carries the wall time the run took, as JSON.
    fn texts(lines: &[TraceLine]) -> Vec<String> {
        lines
            .iter()
            .filter(|line| !matches!(line.record, Record::RunEnd { .. }))
            .map(|line| serde_json::to_string(line).unwrap())
            .collect()
    }

    #[test]
    fn a_sink_beside_the_simulation_gets_every_line_in_order() {
        let mut direct = Vec::new();
        simulate(12, &mut direct).unwrap();
        let mut beside = Vec::new();
        in_background(&mut beside, |sink| simulate(12, sink))
            .unwrap()
            .unwrap();
        assert!(direct.len() > 20, "a run of a dozen jobs");
        assert_eq!(texts(&beside), texts(&direct));
    }

    /// A disk that fills up under the trace of a run of many more lines than the writer may fall
    /// behind by: the run stops, and reports the disk's error, not that the writer stopped.
    #[test]
    fn a_sink_that_fails_beside_the_simulation_gives_its_own_error() {
        struct FillsUp(usize);
        impl TraceSink for FillsUp {
            fn record(&mut self, _: TraceLine) -> io::Result<()> {
                self.0 = self.0.checked_sub(1).ok_or(io::ErrorKind::StorageFull)?;
                Ok(())
            }
        }
        let error = in_background(&mut FillsUp(10), |sink| simulate(400, sink)).unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::StorageFull);
    }
}
