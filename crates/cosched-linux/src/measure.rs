//! Measuring running jobs: CPU time from procfs, progress from the control page, and whether hardware
//! counters could be used on this machine.

use cosched_core::{JobId, RateSource, Sample};
use std::os::fd::{FromRawFd, OwnedFd, RawFd};

/// What a job had done at one moment; a sample is the difference between two of these.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Reading {
    pub t: f64,
    pub cpu_seconds: f64,
    /// Control-page progress (regions completed + heartbeats).
    pub progress: u64,
    /// Control-page count of top-level parallel regions started.
    pub regions_started: u64,
    /// Integral of the CPUs the job held over time, CPU-seconds.
    pub held: f64,
}

impl Reading {
    /// The sample covering `self` → `now`, or `None` for an empty interval. Control-page progress is the
    /// rate source once the job has reported any; before that, CPU time. Regions started are counted
    /// once the job has started any (a job without the preload library reports none).
    pub fn sample_until(&self, now: &Reading, job: JobId) -> Option<Sample> {
        let interval = now.t - self.t;
        if interval <= 0.0 {
            return None;
        }
        let cpu_seconds = (now.cpu_seconds - self.cpu_seconds).max(0.0);
        let (rate, source) = if now.progress > 0 {
            (
                now.progress.saturating_sub(self.progress) as f64 / interval,
                RateSource::ControlPage,
            )
        } else {
            (cpu_seconds / interval, RateSource::CpuTime)
        };
        Some(Sample {
            regions_started: (now.regions_started > 0)
                .then(|| now.regions_started.saturating_sub(self.regions_started)),
            ..Sample::new(
                job,
                rate,
                source,
                ((now.held - self.held) / interval).round() as u32,
                cpu_seconds,
                interval,
            )
        })
    }
}

/// The most memory one process of a job held, for a job whose memory cgroup does not say.
///
/// `wait4`'s maxrss alone would not do: a child started from the executor runs in the executor's
/// memory until it execs, and exec keeps that memory's high-water mark in the maxrss it reports,
/// so a `sleep` would seem as large as a daemon. Each process's `VmHWM` counts only since its exec,
/// so the largest one sampled is the job's own (though growth after the last sample is missed);
/// the maxrss is taken as well only where it passes the executor's own high-water mark at the
/// job's start, the most that memory could have held, so a job larger than the executor is measured
/// to its last page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResidentPeak {
    seen: u64,
    executor_at_start: u64,
}

impl ResidentPeak {
    /// Starts measuring job process `pid`, already past its exec.
    pub fn start(pid: i32) -> ResidentPeak {
        let executor = crate::procfs::resident_peak(std::process::id() as i32);
        ResidentPeak {
            seen: crate::procfs::resident_peak(pid).unwrap_or(0),
            // Unknown, the maxrss cannot be told from the copy: it is never taken.
            executor_at_start: executor.unwrap_or(u64::MAX),
        }
    }

    /// Samples process `pid` of the job.
    pub fn observe(&mut self, pid: i32) {
        self.seen = self
            .seen
            .max(crate::procfs::resident_peak(pid).unwrap_or(0));
    }

    /// The peak, with `waited_max_rss` (wait4's, bytes; 0 when not waited for); `None`: unknown.
    pub fn at_end(&self, waited_max_rss: u64) -> Option<u64> {
        let waited = (waited_max_rss > self.executor_at_start).then_some(waited_max_rss);
        let peak = self.seen.max(waited.unwrap_or(0));
        (peak > 0).then_some(peak)
    }
}

/// Whether an instruction counter can be opened here, and if not, why (for the trace's mechanism line).
pub fn instruction_counter_status() -> String {
    // perf_event_attr as the kernel's ABI version 5 lays it out (112 bytes); only the leading fields and
    // the exclude bits are set.
    #[repr(C)]
    struct Attr {
        kind: u32,
        size: u32,
        config: u64,
        sample: u64,
        sample_type: u64,
        read_format: u64,
        flags: u64,
        rest: [u64; 8],
    }
    const PERF_TYPE_HARDWARE: u32 = 0;
    const PERF_COUNT_HW_INSTRUCTIONS: u64 = 1;
    const DISABLED: u64 = 1;
    const EXCLUDE_KERNEL: u64 = 1 << 5;
    const EXCLUDE_HV: u64 = 1 << 6;
    let attr = Attr {
        kind: PERF_TYPE_HARDWARE,
        size: std::mem::size_of::<Attr>() as u32,
        config: PERF_COUNT_HW_INSTRUCTIONS,
        sample: 0,
        sample_type: 0,
        read_format: 0,
        flags: DISABLED | EXCLUDE_KERNEL | EXCLUDE_HV,
        rest: [0; 8],
    };
    // Neither std nor nix wraps perf_event_open.
    // SAFETY: the attribute struct outlives the call and its size field is its real size; a
    // descriptor returned is new and owned by nobody else, so it may be owned (and closed) here.
    let counter = unsafe {
        let fd = libc::syscall(
            libc::SYS_perf_event_open,
            &attr as *const Attr,
            0,
            -1,
            -1,
            0,
        );
        (fd >= 0).then(|| OwnedFd::from_raw_fd(fd as RawFd))
    };
    if counter.is_some() {
        "perf instructions counter available but not used (per-job counting is not implemented)"
            .into()
    } else {
        let error = std::io::Error::last_os_error();
        let why = match error.raw_os_error() {
            Some(libc::ENOENT) | Some(libc::EOPNOTSUPP) => {
                "this machine exposes no hardware counters (only software events)"
            }
            Some(libc::EACCES) | Some(libc::EPERM) => {
                "not permitted (see /proc/sys/kernel/perf_event_paranoid)"
            }
            _ => "perf_event_open failed",
        };
        format!("perf instructions counter unavailable: {why} ({error})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_maxrss_within_the_executors_own_peak_is_not_the_jobs() {
        let peak = ResidentPeak {
            seen: 2 << 20,
            executor_at_start: 900 << 20,
        };
        assert_eq!(peak.at_end(900 << 20), Some(2 << 20));
        assert_eq!(peak.at_end(0), Some(2 << 20));
        assert_eq!(peak.at_end(901 << 20), Some(901 << 20));
        let unknown = ResidentPeak {
            seen: 0,
            executor_at_start: u64::MAX,
        };
        assert_eq!(unknown.at_end(5 << 20), None);
    }

    #[test]
    fn a_process_started_by_a_large_executor_is_measured_alone() {
        // 64 MiB of the test's own, resident when the child is started.
        let ballast = std::hint::black_box(vec![1u8; 64 << 20]);
        let mut child = std::process::Command::new("sleep")
            .arg("0.2")
            .spawn()
            .unwrap();
        let mut peak = ResidentPeak::start(child.id() as i32);
        peak.observe(child.id() as i32);
        child.wait().unwrap();
        let usage = nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_CHILDREN);
        let waited = (usage.unwrap().max_rss().max(0) as u64) << 10;
        assert!(
            waited >= 64 << 20,
            "the maxrss carries the executor's: {waited}"
        );
        let measured = peak.at_end(waited).expect("sleep's VmHWM");
        assert!(measured < 16 << 20, "sleep held {measured} bytes");
        drop(ballast);
    }

    #[test]
    fn control_page_progress_wins_over_cpu_time_once_reported() {
        let before = Reading {
            t: 1.0,
            cpu_seconds: 0.5,
            progress: 0,
            regions_started: 0,
            held: 2.0,
        };
        let after = Reading {
            t: 3.0,
            cpu_seconds: 2.5,
            progress: 0,
            regions_started: 0,
            held: 6.0,
        };
        let s = before.sample_until(&after, JobId(1)).unwrap();
        assert_eq!(
            (s.source, s.rate, s.cpus, s.interval),
            (RateSource::CpuTime, 1.0, 2, 2.0)
        );
        let after = Reading {
            progress: 40,
            ..after
        };
        let s = before.sample_until(&after, JobId(1)).unwrap();
        assert_eq!((s.source, s.rate), (RateSource::ControlPage, 20.0));
        assert_eq!(s.regions_started, None, "no region reported yet");
        let after = Reading {
            regions_started: 3,
            ..after
        };
        let s = before.sample_until(&after, JobId(1)).unwrap();
        assert_eq!(s.regions_started, Some(3));
        assert!(after.sample_until(&after, JobId(1)).is_none());
    }

    #[test]
    fn the_counter_probe_always_explains_itself() {
        assert!(instruction_counter_status().starts_with("perf instructions counter"));
    }
}
