//! Independent runs on all the CPUs this process may use, longest first.

use crate::engine::IsolatedTimes;
use crate::scenario::ScenarioError;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Mutex};
use std::time::{Duration, Instant};

/// Runs `count` independent runs, `run(k, isolated)` being run k, as many at once as this process
/// may use CPUs (`taskset` or a cgroup's quota limit them), in the order a [`Dealer`] hands them out
/// (`class_of(k)` is run k's class). The runs share only a cache of isolated times, and each gives
/// what it gives alone. Results come in the order of `k`; `progress` hears (runs done, `count`) on
/// the calling thread, every [`PROGRESS_BEAT`] and at the end. After a run fails no other starts, and
/// the failure of the earliest run is returned.
pub(crate) fn in_parallel<T: Send>(
    count: usize,
    class_of: impl Fn(usize) -> usize,
    run: impl Fn(usize, &IsolatedTimes) -> Result<T, ScenarioError> + Sync,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<Vec<T>, ScenarioError> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let isolated = IsolatedTimes::default();
    if threads.min(count) <= 1 {
        return (0..count)
            .map(|k| {
                let result = run(k, &isolated)?;
                progress(k + 1, count);
                Ok(result)
            })
            .collect();
    }
    let mut results: Vec<Option<T>> = (0..count).map(|_| None).collect();
    let mut failure: Option<(usize, ScenarioError)> = None;
    let mut reported = 0;
    let mut record = |(k, result): (usize, Result<T, ScenarioError>)| match result {
        Ok(value) => {
            results[k] = Some(value);
            reported += 1;
            progress(reported, count);
        }
        Err(error) if failure.as_ref().is_none_or(|(first, _)| k < *first) => {
            failure = Some((k, error));
        }
        Err(_) => {}
    };
    let dealer = Mutex::new(Dealer::new((0..count).map(class_of)));
    let stop = AtomicBool::new(false);
    let next_run = || take_run(&dealer, &stop, &run, &isolated);
    let working = AtomicUsize::new(threads.min(count));
    std::thread::scope(|scope| {
        let (done, finished) = mpsc::channel();
        for _ in 0..threads.min(count) {
            let done = done.clone();
            let leaving = Leaving {
                working: &working,
                waiting: std::thread::current(),
            };
            scope.spawn(move || {
                let _leaving = leaving;
                while let Some(finished) = next_run() {
                    if done.send(finished).is_err() {
                        break;
                    }
                }
            });
        }
        drop(done);
        // The results are taken in at each beat and when the last thread stops, not as each comes:
        // woken at every run, this thread would take turns from those that work (on two CPUs, one in
        // three).
        loop {
            while let Ok(result) = finished.try_recv() {
                record(result);
            }
            if working.load(Ordering::Acquire) == 0 {
                break;
            }
            std::thread::park_timeout(PROGRESS_BEAT);
        }
        for result in finished {
            record(result);
        }
    });
    if let Some((_, error)) = failure {
        return Err(error);
    }
    Ok(results
        .into_iter()
        .map(|result| result.expect("every run reported"))
        .collect())
}

/// The next run the dealer gives, run: (its index, its result); None when none is left or a run
/// failed.
fn take_run<T>(
    dealer: &Mutex<Dealer>,
    stop: &AtomicBool,
    run: &(impl Fn(usize, &IsolatedTimes) -> Result<T, ScenarioError> + Sync),
    isolated: &IsolatedTimes,
) -> Option<(usize, Result<T, ScenarioError>)> {
    if stop.load(Ordering::Relaxed) {
        return None;
    }
    let (k, class) = lock(dealer).next()?;
    let started = Instant::now();
    let result = run(k, isolated);
    lock(dealer).took(class, started.elapsed());
    stop.fetch_or(result.is_err(), Ordering::Relaxed);
    Some((k, result))
}

/// How often the calling thread takes in results and reports progress while the runs go on.
const PROGRESS_BEAT: Duration = Duration::from_millis(100);

/// A running thread's leave, even by a panic: the last to leave wakes the thread waiting for them.
struct Leaving<'a> {
    working: &'a AtomicUsize,
    waiting: std::thread::Thread,
}

impl Drop for Leaving<'_> {
    fn drop(&mut self) {
        if self.working.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.waiting.unpark();
        }
    }
}

/// A dealer left whole by a thread that panicked (each step is one update) is read on.
fn lock(dealer: &Mutex<Dealer>) -> std::sync::MutexGuard<'_, Dealer> {
    dealer
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Which run a free thread takes next. Runs of one class (one policy on workloads alike) take about
/// as long as each other, and classes differ several times over (TACO's runs take ten times BP's).
/// Handed out in their order, the last runs may be long ones while the other threads idle, which on
/// a sweep of a few runs per CPU is a good part of its time. So the first run of each class goes
/// first, in order, to learn the class's length, and then the runs of the longest class
/// (longest processing time first); a class whose first run is still going counts as the longest.
struct Dealer {
    /// Each class's runs not handed out yet, in order.
    left: Vec<VecDeque<usize>>,
    /// Whether each class's first run was handed out.
    tried: Vec<bool>,
    /// How long each class's first run took, once it ended.
    took: Vec<Option<Duration>>,
}

impl Dealer {
    fn new(classes: impl Iterator<Item = usize>) -> Dealer {
        let mut left: Vec<VecDeque<usize>> = Vec::new();
        for (k, class) in classes.enumerate() {
            if left.len() <= class {
                left.resize_with(class + 1, VecDeque::new);
            }
            left[class].push_back(k);
        }
        let classes = left.len();
        Dealer {
            left,
            tried: vec![false; classes],
            took: vec![None; classes],
        }
    }

    /// The next run and its class; None when all are handed out.
    fn next(&mut self) -> Option<(usize, usize)> {
        let untried = (0..self.left.len()).find(|&c| !self.tried[c] && !self.left[c].is_empty());
        let class = untried.or_else(|| {
            (0..self.left.len())
                .filter(|&c| !self.left[c].is_empty())
                .min_by_key(|&c| std::cmp::Reverse(self.took[c].unwrap_or(Duration::MAX)))
        })?;
        self.tried[class] = true;
        Some((self.left[class].pop_front()?, class))
    }

    /// Notes that a run of `class` took `time`; the first to end sets the class's length.
    fn took(&mut self, class: usize, time: Duration) {
        self.took[class].get_or_insert(time);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_runs_go_in_order_then_the_longest_class_first() {
        // Two workloads under three policies, workload by workload: classes 0 1 2 0 1 2.
        let mut dealer = Dealer::new([0, 1, 2, 0, 1, 2].into_iter());
        assert_eq!(dealer.next(), Some((0, 0)));
        assert_eq!(dealer.next(), Some((1, 1)));
        dealer.took(0, Duration::from_millis(1));
        dealer.took(1, Duration::from_millis(9));
        assert_eq!(dealer.next(), Some((2, 2)));
        dealer.took(2, Duration::from_millis(4));
        assert_eq!(dealer.next(), Some((4, 1)), "the longest class");
        assert_eq!(dealer.next(), Some((5, 2)));
        assert_eq!(dealer.next(), Some((3, 0)));
        assert_eq!(dealer.next(), None);
    }

    #[test]
    fn a_class_still_running_counts_as_the_longest() {
        let mut dealer = Dealer::new([0, 1, 0, 1].into_iter());
        assert_eq!(dealer.next(), Some((0, 0)));
        assert_eq!(dealer.next(), Some((1, 1)));
        dealer.took(1, Duration::from_millis(5));
        assert_eq!(dealer.next(), Some((2, 0)));
        assert_eq!(dealer.next(), Some((3, 1)));
    }
}
