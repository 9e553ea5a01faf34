//! Short runs that measure the simulator's machine-specific constants (`cosched calibrate --model`).
//! Each function returns one sample; the caller repeats them and fits the model
//! (`cosched_sim::calibrated`). Only software clocks and counters: no hardware PMU is needed.

use crate::affinity::Mask;
use crate::Error;
use cosched_core::CpuSet;
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// Work per barrier round of the spinning team, µs, split among its threads: synchronisations far
/// more frequent than OS time slices, as in the bundled `spin-barrier` job.
const SPIN_ROUND_US: u32 = 200;
/// Work per barrier round of the co-runners that block, µs (the bundled `block-barrier`'s).
const BLOCKING_ROUND_US: u32 = 400;

/// The progress of a spinning team (the bundled `barrier --kind spin`, `threads` threads) beside as
/// many threads that block and wake at every barrier (the bundled workload's `block-barrier`: spin 50 µs,
/// then sleep), as a fraction of its progress alone, each run lasting `seconds`. The OS time-shares the
/// two without coordination, so the team advances only while all its threads happen to run at once.
/// The co-runners block and wake as the workloads' OpenMP kernels do: beside CPU hogs that never block,
/// the OS keeps the slices of both CPUs in step, which no workload here sees (`docs/simulation-model.md`).
pub fn spin_progress(bench_dir: &Path, threads: u32, seconds: f64) -> Result<f64, Error> {
    let barrier = |kind: &str, work_us: u32, seconds: f64| {
        let mut command = Command::new(bench_dir.join("barrier"));
        command.args(["--kind", kind, "--threads", &threads.to_string()]);
        command.args(["--work", &work_us.to_string()]);
        command.args(["--duration", &seconds.to_string()]);
        command
    };
    let alone = rate_of(barrier("spin", SPIN_ROUND_US, seconds))?;
    let mut corunners = spawn_quiet(barrier("spin-block", BLOCKING_ROUND_US, seconds + 1.0))?;
    // Let the co-runners' threads reach their CPUs before the team starts.
    std::thread::sleep(Duration::from_millis(100));
    let beside = rate_of(barrier("spin", SPIN_ROUND_US, seconds));
    let _ = corunners.kill();
    let _ = corunners.wait();
    Ok(beside? / alone)
}

fn spawn_quiet(mut command: Command) -> Result<Child, Error> {
    command
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    command.spawn().map_err(|source| Error::Io {
        what: format!("cannot start {:?}", command.get_program()),
        source,
    })
}

/// Runs the bundled `barrier` and returns its `iterations_per_s=` figure.
fn rate_of(mut command: Command) -> Result<f64, Error> {
    let program = command.get_program().to_string_lossy().into_owned();
    let output = command
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .map_err(|source| Error::Io {
            what: format!("cannot run {program}"),
            source,
        })?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    stdout
        .split_whitespace()
        .find_map(|field| field.strip_prefix("iterations_per_s="))
        .and_then(|v| v.parse::<f64>().ok())
        .filter(|r| *r > 0.0 && output.status.success())
        .ok_or_else(|| Error::NoRate {
            program: program.clone(),
            status: output.status,
            stdout: stdout.trim().to_string(),
        })
}

/// Mean length of the time slice the OS gives each of two CPU-bound threads sharing `cpu`, seconds:
/// run time over the number of times it ran, from `/proc/thread-self/schedstat`.
pub fn timeslice(cpu: u32, seconds: f64) -> Result<f64, Error> {
    let mask = Mask::new(&CpuSet::from_iter([cpu])).map_err(|source| Error::Io {
        what: format!("cannot build a mask for CPU {cpu}"),
        source,
    })?;
    let run = |mask: &Mask| -> Option<f64> {
        mask.apply_to(0).ok()?;
        let before = schedstat()?;
        let end = Instant::now() + Duration::from_secs_f64(seconds);
        let mut spins = 0u64;
        while Instant::now() < end {
            spins = std::hint::black_box(spins + 1);
        }
        let after = schedstat()?;
        let slices = after.1.checked_sub(before.1).filter(|s| *s > 0)?;
        Some((after.0 - before.0) as f64 * 1e-9 / slices as f64)
    };
    let slices: Vec<Option<f64>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..2).map(|_| s.spawn(|| run(&mask))).collect();
        handles
            .into_iter()
            .map(|h| h.join().ok().flatten())
            .collect()
    });
    let measured: Vec<f64> = slices.into_iter().flatten().collect();
    if measured.is_empty() {
        return Err(Error::NoSchedstat);
    }
    Ok(measured.iter().sum::<f64>() / measured.len() as f64)
}

/// (nanoseconds on the CPU, times run on a CPU) of the calling thread.
fn schedstat() -> Option<(u64, u64)> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let mut fields = text.split_whitespace().map(|f| f.parse::<u64>().ok());
    let run = fields.next()??;
    let _wait = fields.next()??;
    Some((run, fields.next()??))
}

/// libgomp's default spin count before a waiting thread sleeps (`GOMP_SPINCOUNT`, no
/// `OMP_WAIT_POLICY`).
const GOMP_DEFAULT_SPINCOUNT: u32 = 300_000;

/// Seconds libgomp's default wait spins before its futex sleep: `GOMP_SPINCOUNT` rounds of its loop
/// (load the flag, pause), timed here with the same instructions. The fastest of a few tries.
pub fn gomp_spin() -> f64 {
    let flag = AtomicU32::new(0);
    (0..5)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..GOMP_DEFAULT_SPINCOUNT {
                if flag.load(Ordering::Relaxed) != 0 {
                    break;
                }
                std::hint::spin_loop();
            }
            start.elapsed().as_secs_f64()
        })
        .fold(f64::INFINITY, f64::min)
}

/// Seconds per switch between two threads on `cpu` that wake each other through a socket (a switch
/// with its wake-up, as a slot switch or a barrier's futex wake costs).
pub fn context_switch(cpu: u32, round_trips: u32) -> Result<f64, Error> {
    let io = |what: &str| {
        let what = what.to_string();
        move |source| Error::Io { what, source }
    };
    let mask = Mask::new(&CpuSet::from_iter([cpu])).map_err(io("cannot build a CPU mask"))?;
    let (mut a, mut b) = UnixStream::pair().map_err(io("cannot create a socket pair"))?;
    let failed = AtomicBool::new(false);
    let elapsed = std::thread::scope(|s| {
        s.spawn(|| {
            let mut byte = [0u8];
            let ok = mask.apply_to(0).is_ok()
                && (0..round_trips)
                    .all(|_| b.read_exact(&mut byte).is_ok() && b.write_all(&byte).is_ok());
            failed.fetch_or(!ok, Ordering::Relaxed);
        });
        let mut byte = [0u8];
        let ok = mask.apply_to(0).is_ok();
        let start = Instant::now();
        let ok = ok
            && (0..round_trips)
                .all(|_| a.write_all(&byte).is_ok() && a.read_exact(&mut byte).is_ok());
        failed.fetch_or(!ok, Ordering::Relaxed);
        start.elapsed().as_secs_f64()
    });
    if failed.load(Ordering::Relaxed) {
        return Err(Error::PingPong { cpu });
    }
    Ok(elapsed / (2.0 * f64::from(round_trips)))
}

/// Seconds to read `llc_bytes` of data back into the cache after a larger buffer evicted it: the
/// refill a job pays after a slot switch when its co-runner filled the LLC.
pub fn llc_refill(llc_bytes: usize) -> f64 {
    let words = (llc_bytes / 8).max(1);
    let data = vec![1u64; words];
    let evict = vec![2u64; words * 4];
    (0..3)
        .map(|_| {
            std::hint::black_box(sum(&evict));
            let start = Instant::now();
            std::hint::black_box(sum(&data));
            start.elapsed().as_secs_f64()
        })
        .fold(f64::INFINITY, f64::min)
}

fn sum(words: &[u64]) -> u64 {
    // One word per 64-byte line: the refill is bound by lines fetched, not by additions.
    words
        .iter()
        .step_by(8)
        .fold(0u64, |acc, w| acc.wrapping_add(*w))
}

/// Memory read bandwidth with `threads` threads each streaming through its own `mb_each` MB, GB/s.
pub fn bandwidth_gbs(threads: u32, mb_each: usize) -> f64 {
    let buffers: Vec<Vec<u64>> = (0..threads)
        .map(|t| vec![u64::from(t) + 1; mb_each * 1024 * 1024 / 8])
        .collect();
    let start = Instant::now();
    std::thread::scope(|s| {
        for buffer in &buffers {
            s.spawn(move || std::hint::black_box(sum(buffer)));
        }
    });
    let bytes = (threads as usize * mb_each * 1024 * 1024) as f64;
    bytes / start.elapsed().as_secs_f64() / 1e9
}
