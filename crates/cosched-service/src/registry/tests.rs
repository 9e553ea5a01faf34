use super::*;
use crate::journal::Entry;
use crate::protocol::{Accounting, ArrayElement, JobState};

/// The changes the daemon makes, each as the entries it journals for it, applied.
impl Registry {
    /// Ends job `id` as the executor reports it; whether a job held back may start.
    pub(crate) fn finish(
        &mut self,
        id: u64,
        t: Option<f64>,
        ok: bool,
        exit_code: Option<i32>,
        error: Option<String>,
    ) -> bool {
        let ending = Ending {
            t,
            ok,
            exit_code,
            error,
            ..Ending::default()
        };
        let finished = self.finished_entry(id, ending);
        self.apply(finished).wake
    }

    /// Starts job `id` as the executor reports it; whether it was adopted.
    pub(super) fn mark_started(&mut self, id: u64, pid: u32, threads: u32, t: f64) -> Option<bool> {
        let started = self.started_entry(id, t, pid, 7, threads)?;
        let Entry::Started { adopted, .. } = started else {
            unreachable!("a started entry")
        };
        let _ = self.apply(started);
        Some(adopted)
    }

    fn mark_placed(&mut self, id: u64, cpus: &str) {
        if let Some(placed) = self.placed_entry(id, 1.0, cpus.into()) {
            let _ = self.apply(placed);
        }
    }

    /// Cancels job `id` as `cosched cancel` does; whether it ended then, before it started.
    fn cancel(&mut self, id: u64) -> bool {
        let entries = self.cancellation(id, 1.0, None);
        let ended = entries.len() == 2;
        for entry in entries {
            let _ = self.apply(entry);
        }
        ended
    }

    fn set_held(&mut self, id: u64, held: bool) {
        let _ = self.apply(Entry::Held { id, t: 1.0, held });
    }

    /// The jobs sent SIGTERM at `now` for passing their time limit, journaled `timed_out`.
    fn time_out(&mut self, now: f64, kill_wait: f64) -> Vec<u64> {
        let overdue = self.take_overdue(now, kill_wait);
        for &id in &overdue {
            let _ = self.apply(Entry::TimedOut { id, t: now });
        }
        overdue
    }
}

fn job(registry: &Registry, uid: u32) -> Tracked {
    let id = registry.next_id();
    let submission = Submission::of("/bin/true");
    let view = JobView::queued(id, uid, 1.0, &submission, "o".into(), "e".into());
    Tracked::new(view, uid, Some(submission), None)
}

fn taken(registry: &mut Registry, limit: usize) -> Vec<u64> {
    registry
        .take_incoming(limit, usize::MAX)
        .into_iter()
        .map(|j| j.id)
        .collect()
}

#[test]
fn a_users_jobs_past_the_running_limit_wait_in_order_and_start_as_others_end() {
    let mut registry = Registry::new("eq".into(), 0, ShareTable::default());
    for uid in [1000, 1000, 1000, 1001, 0, 0] {
        let tracked = job(&registry, uid);
        registry.enqueue(tracked);
    }
    // One running job per user, root excepted: 0 and 3 start, 1 and 2 wait, root's both start.
    assert_eq!(taken(&mut registry, 1), [0, 3, 4, 5]);
    assert_eq!(
        registry.load_of(1000),
        UserLoad {
            queued: 2,
            running: 1
        }
    );
    assert!(taken(&mut registry, 1).is_empty());
    assert!(
        registry.finish(0, Some(2.0), true, Some(0), None),
        "1 may start"
    );
    assert_eq!(taken(&mut registry, 1), [1]);
    // A job cancelled while it waits leaves the queue and its count.
    assert!(registry.cancel(2), "ended before it started");
    assert_eq!(
        registry.load_of(1000),
        UserLoad {
            queued: 0,
            running: 1
        }
    );
    assert!(
        !registry.finish(1, Some(3.0), true, Some(0), None),
        "none waits"
    );
    assert_eq!(registry.load_of(1000), UserLoad::default());
}

#[test]
fn users_are_served_in_turn_and_share_the_weight_of_their_jobs() {
    let shares = ShareTable::default();
    let mut registry = Registry::new("gang".into(), 0, shares);
    // User 1000's backlog of four, then user 1001's first job.
    for uid in [1000, 1000, 1000, 1000, 1001] {
        let tracked = job(&registry, uid);
        registry.enqueue(tracked);
    }
    // Two handed over per user before one starts: 1001's job comes second, not fifth.
    assert_eq!(
        registry
            .take_incoming(100, 2)
            .iter()
            .map(|j| (j.id, j.weight))
            .collect::<Vec<_>>(),
        [(0, 0.5), (4, 1.0), (1, 0.5)]
    );
    registry.take_reweighted();
    assert!(taken(&mut registry, 100).is_empty(), "1000 has 2 awaiting");
    registry.mark_started(0, 10, 1, 2.0);
    assert_eq!(registry.take_incoming(100, 2)[0].weight, 1.0 / 3.0);
    // Its earlier jobs now weigh a third each too, and a half again once one ends.
    let mut reweighted = registry.take_reweighted();
    reweighted.sort_by_key(|r| r.0);
    assert_eq!(reweighted, [(0, 1.0 / 3.0), (1, 1.0 / 3.0), (2, 1.0 / 3.0)]);
    registry.finish(1, Some(3.0), true, Some(0), None);
    let mut reweighted = registry.take_reweighted();
    reweighted.sort_by_key(|r| r.0);
    assert_eq!(reweighted, [(0, 0.5), (2, 0.5)]);
}

#[test]
fn ended_jobs_are_forgotten_after_the_retention_and_their_ids_stay_used() {
    let mut registry = Registry::new("eq".into(), 0, ShareTable::default());
    for _ in 0..3 {
        let tracked = job(&registry, 1000);
        registry.enqueue(tracked);
    }
    taken(&mut registry, 10);
    registry.finish(0, Some(10.0), true, Some(0), None);
    registry.finish(1, Some(20.0), true, Some(0), None);
    assert_eq!(registry.forget_ended_before(15.0), 1);
    let ids: Vec<u64> = registry.jobs().map(|j| j.id).collect();
    assert_eq!(ids, [1, 2]);
    assert_eq!(registry.forget_ended_before(100.0), 1);
    assert!(registry.job(2).is_some(), "job 2 has not ended");
    assert_eq!(registry.next_id(), 3);
}

#[test]
fn a_job_past_its_limit_is_terminated_once_then_killed_after_the_grace_and_stays_timeout() {
    let mut registry = Registry::new("eq".into(), 0, ShareTable::default());
    for limit in [Some(10), None] {
        let mut tracked = job(&registry, 1000);
        tracked.view.time_limit = limit;
        registry.enqueue(tracked);
    }
    taken(&mut registry, 10);
    registry.mark_started(0, 100, 1, 1000.0);
    registry.mark_started(1, 101, 1, 1000.0);
    assert!(registry.time_out(1009.9, 5.0).is_empty());
    assert_eq!(registry.time_out(1010.0, 5.0), [0]);
    assert_eq!(registry.job(0).unwrap().state, JobState::Timeout);
    assert!(registry.time_out(1014.0, 5.0).is_empty(), "sent once");
    assert!(registry.take_cancelled().is_empty(), "within the grace");
    assert!(registry.time_out(1015.0, 5.0).is_empty());
    assert_eq!(registry.take_cancelled(), [0]);
    registry.finish(0, Some(1015.1), false, None, Some("cancelled".into()));
    let view = registry.job(0).unwrap();
    assert_eq!(view.state, JobState::Timeout);
    assert_eq!(view.wait_status(), 128 + libc::SIGKILL);
    assert_eq!(registry.job(1).unwrap().state, JobState::Running);
    assert!(registry.time_out(1e9, 5.0).is_empty(), "no limit");
}

#[test]
fn a_queued_job_says_whether_its_users_limit_or_the_cpus_hold_it() {
    let mut registry = Registry::new("eq".into(), 0, ShareTable::default());
    for uid in [1000, 1000] {
        let tracked = job(&registry, uid);
        registry.enqueue(tracked);
    }
    assert_eq!(registry.pending_reason(0, 1), Some("resources"));
    assert_eq!(taken(&mut registry, 1), [0]);
    // Taken by the executor, not started: the policy has no CPUs for it yet.
    assert_eq!(registry.pending_reason(0, 1), Some("resources"));
    assert_eq!(registry.pending_reason(1, 1), Some("user_limit"));
    assert_eq!(registry.pending_reason(1, 2), Some("resources"));
    registry.mark_started(0, 100, 1, 2.0);
    assert_eq!(registry.pending_reason(0, 1), None);
}

/// A job of `uid` from `submission`, under the registry's next id.
fn job_of(registry: &Registry, uid: u32, submission: Submission) -> Tracked {
    let id = registry.next_id();
    let view = JobView::queued(id, uid, 1.0, &submission, "o".into(), "e".into());
    Tracked::new(view, uid, Some(submission), None)
}

#[test]
fn a_users_jobs_start_by_priority_while_users_keep_their_fair_turns() {
    let mut registry = Registry::new("eq".into(), 0, ShareTable::default());
    let with = |nice: i32, priority: Option<u32>| Submission {
        nice,
        priority,
        ..Submission::of("/bin/true")
    };
    // User 1000: a nice job, a plain one, one with a priority; user 1001: one nice job.
    for (uid, submission) in [
        (1000, with(10, None)),
        (1000, with(0, None)),
        (1000, with(0, Some(5))),
        (1001, with(100, None)),
    ] {
        let tracked = job_of(&registry, uid, submission);
        registry.enqueue(tracked);
    }
    assert_eq!(registry.job(2).unwrap().priority, 5);
    assert_eq!(registry.job(0).unwrap().priority, -10);
    // Each user's best job first, in turn; however nice, 1001's one job is second.
    assert_eq!(taken(&mut registry, 100), [2, 3, 1, 0]);
}

/// Jobs handed over one by one as they come wait in the executor, at most two of a user here; a
/// later job of higher priority goes there too instead of queueing behind them in the registry,
/// and a later one of lower priority does not.
#[test]
fn a_job_that_outranks_those_waiting_in_the_executor_is_handed_over_past_the_limit() {
    let mut registry = Registry::new("bp".into(), 0, ShareTable::default());
    let with = |nice: i32, priority: Option<u32>| Submission {
        nice,
        priority,
        ..Submission::of("/bin/true")
    };
    let submit = |registry: &mut Registry, submission: Submission| {
        let tracked = job_of(registry, 1000, submission);
        registry.enqueue(tracked);
        registry
            .take_incoming(100, 2)
            .into_iter()
            .map(|j| j.id)
            .collect::<Vec<_>>()
    };
    assert_eq!(submit(&mut registry, with(100, None)), [0]);
    assert_eq!(submit(&mut registry, with(100, None)), [1]);
    assert_eq!(submit(&mut registry, with(200, None)), [0u64; 0], "2 waits");
    assert_eq!(submit(&mut registry, with(0, Some(50))), [3]);
    assert_eq!(submit(&mut registry, with(0, Some(50))), [4]);
    assert_eq!(
        submit(&mut registry, with(0, Some(50))),
        [0u64; 0],
        "two rank above"
    );
}

#[test]
fn an_array_with_a_limit_runs_at_most_that_many_elements_at_once() {
    let mut registry = Registry::new("eq".into(), 0, ShareTable::default());
    for index in 0..4 {
        let of = (index > 0).then_some(0);
        let submission = Submission {
            array: Some(ArrayElement {
                index,
                of,
                limit: Some(2),
            }),
            ..Submission::of("/bin/true")
        };
        let tracked = job_of(&registry, 1000, submission);
        registry.enqueue(tracked);
    }
    let other = job(&registry, 1000);
    registry.enqueue(other);
    // Elements 0 and 1, and the user's job outside the array; 2 and 3 wait for the limit.
    assert_eq!(taken(&mut registry, 100), [0, 1, 4]);
    assert_eq!(registry.pending_reason(2, 100), Some("array_task_limit"));
    assert!(taken(&mut registry, 100).is_empty());
    assert!(registry.finish(1, Some(2.0), true, Some(0), None));
    assert_eq!(taken(&mut registry, 100), [2]);
    assert_eq!(registry.pending_reason(3, 100), Some("array_task_limit"));
}

#[test]
fn a_job_adopted_after_a_restart_counts_against_its_users_running_limit() {
    let mut registry = Registry::new("eq".into(), 0, ShareTable::default());
    let submission = Submission::of("/bin/sleep");
    let view = JobView::queued(0, 1000, 1.0, &submission, "o".into(), "e".into());
    let process = Adopt {
        pid: 4242,
        start_ticks: 1,
        attached: false,
        in_place: false,
    };
    registry.restore(
        Tracked::new(view, 1000, Some(submission), Some(process)),
        Vec::new(),
    );
    let queued = job(&registry, 1000);
    registry.restore(queued, Vec::new());
    // One job per user: the running one is adopted, the queued one waits for it.
    assert_eq!(taken(&mut registry, 1), [0]);
    assert_eq!(registry.pending_reason(1, 1), Some("user_limit"));
}

#[test]
fn jobs_start_while_their_memory_fits_and_those_that_do_not_wait_for_memory() {
    let gib = 1u64 << 30;
    let mut registry =
        Registry::new("eq".into(), 0, ShareTable::default()).with_memory_for_jobs(4 * gib);
    for mem in [Some(3 * gib), Some(2 * gib), None, Some(gib)] {
        let mut tracked = job(&registry, 1000);
        tracked.view.mem = mem;
        tracked.submission.as_mut().unwrap().mem = mem;
        registry.enqueue(tracked);
    }
    // 3 GiB run; 2 GiB do not fit beside them and wait in place; the job without a request and
    // the last 1 GiB go ahead.
    assert_eq!(taken(&mut registry, usize::MAX), [0, 2, 3]);
    assert_eq!(registry.pending_reason(1, usize::MAX), Some("memory"));
    assert!(taken(&mut registry, usize::MAX).is_empty());
    // A job without a request ending frees nothing.
    registry.finish(2, Some(2.0), true, Some(0), None);
    assert!(taken(&mut registry, usize::MAX).is_empty());
    assert!(
        registry.finish(0, Some(3.0), true, Some(0), None),
        "1 may start"
    );
    assert_eq!(taken(&mut registry, usize::MAX), [1]);
    assert_eq!(registry.pending_reason(1, usize::MAX), Some("resources"));
}

#[test]
fn an_oom_end_is_oom_with_the_cpus_the_job_had() {
    let mut registry = Registry::new("eq".into(), 0, ShareTable::default());
    let tracked = job(&registry, 1000);
    registry.enqueue(tracked);
    taken(&mut registry, 1);
    registry.mark_started(0, 100, 2, 1.0);
    registry.mark_placed(0, "0-1");
    registry.mark_placed(0, "4");
    let used = Accounting {
        user_seconds: Some(1.5),
        system_seconds: Some(0.25),
        peak_memory: Some(64 << 20),
        cpus: None,
    };
    let ending = Ending {
        t: Some(2.0),
        exit_code: Some(137),
        oom: true,
        accounting: Some(used),
        ..Ending::default()
    };
    let finished = registry.finished_entry(0, ending);
    let _ = registry.apply(finished);
    let view = registry.job(0).unwrap();
    assert_eq!(view.state, JobState::Oom);
    let accounting = view.accounting.as_ref().unwrap();
    assert_eq!(accounting.cpus.as_deref(), Some("0-1,4"));
    assert_eq!(accounting.peak_memory, Some(64 << 20));
}

/// A registry with one job of uid 1000 queued per entry of `depends_on`, each `afterok` the job
/// named there, if any.
fn depending(depends_on: &[Option<u64>]) -> Registry {
    use crate::protocol::{After, Dependency};
    let mut registry = Registry::new("eq".into(), 0, ShareTable::default());
    for &depends_on in depends_on {
        let mut tracked = job(&registry, 1000);
        if let (Some(id), Some(s)) = (depends_on, tracked.submission.as_mut()) {
            s.dependency.push(Dependency {
                after: After::Ok,
                id,
                minutes: 0,
            });
        }
        registry.enqueue(tracked);
    }
    registry
}

#[test]
fn a_dependent_job_takes_its_place_by_id_once_released_and_cancelled_jobs_are_never_handed() {
    let mut registry = depending(&[None, Some(0), None, None, None]);
    assert!(registry.cancel(3), "ended before it started");
    // One running job at a time: 0 first, 1 waits for it, 2 comes next.
    assert_eq!(taken(&mut registry, 1), [0]);
    assert_eq!(registry.pending_reason(1, 1), Some("dependency"));
    assert!(registry.finish(0, Some(2.0), true, Some(0), None));
    // Released by 0's end, 1 is older than 2: it goes first, and the cancelled 3 never.
    assert_eq!(taken(&mut registry, 1), [1]);
    registry.finish(1, Some(3.0), true, Some(0), None);
    assert_eq!(taken(&mut registry, 1), [2]);
    registry.finish(2, Some(4.0), true, Some(0), None);
    assert_eq!(taken(&mut registry, 1), [4]);
    assert_eq!(registry.waiting(), (0, 0));
    assert_eq!(
        registry.load_of(1000),
        UserLoad {
            queued: 0,
            running: 1
        }
    );
}

#[test]
fn a_job_whose_dependency_failed_is_reported_unsatisfiable_once() {
    let mut registry = depending(&[None, Some(0)]).with_kill_invalid_depend(true);
    assert_eq!(taken(&mut registry, 10), [0]);
    registry.finish(0, Some(2.0), false, Some(1), None);
    assert!(taken(&mut registry, 10).is_empty());
    let unsatisfiable = registry.take_unsatisfiable();
    assert_eq!(unsatisfiable.len(), 1);
    assert_eq!(unsatisfiable[0].0, 1);
    for entry in registry.cancellation(1, 2.0, Some("never".into())) {
        let _ = registry.apply(entry);
    }
    assert!(taken(&mut registry, 10).is_empty());
    assert!(registry.take_unsatisfiable().is_empty(), "reported once");
    assert_eq!(registry.waiting(), (0, 0));
}

#[test]
fn a_wait_looks_past_the_jobs_it_found_ended_and_answers_with_every_view() {
    let mut registry = Registry::new("eq".into(), 0, ShareTable::default());
    for _ in 0..3 {
        let tracked = job(&registry, 1000);
        registry.enqueue(tracked);
    }
    taken(&mut registry, 10);
    let ids = [0, 1, 2];
    let mut checked = 0;
    registry.finish(0, Some(2.0), true, Some(0), None);
    assert!(registry.ended(&ids, &mut checked).unwrap().is_none());
    assert_eq!(checked, 1);
    registry.finish(1, Some(3.0), true, Some(0), None);
    registry.finish(2, Some(4.0), false, Some(1), None);
    let views = registry.ended(&ids, &mut checked).unwrap().unwrap();
    assert_eq!(views.iter().map(|v| v.id).collect::<Vec<_>>(), ids);
    assert_eq!(views[2].exit_code, Some(1));
    // One forgotten meanwhile is named, not left out.
    registry.forget_ended_before(2.5);
    assert!(registry.ended(&ids, &mut checked).is_err());
}

/// Enqueues a job of `uid` named `name`, its submission changed by `change`; its id.
fn submit(
    registry: &mut Registry,
    uid: u32,
    name: &str,
    change: impl FnOnce(&mut Submission),
) -> u64 {
    let id = registry.next_id();
    let mut submission = Submission::of("/bin/true");
    submission.name = name.into();
    change(&mut submission);
    let view = JobView::queued(id, uid, 1.0, &submission, "o".into(), "e".into());
    registry.enqueue(Tracked::new(view, uid, Some(submission), None));
    id
}

fn after(after: crate::protocol::After, id: u64) -> crate::protocol::Dependency {
    crate::protocol::Dependency {
        after,
        id,
        minutes: 0,
    }
}

#[test]
fn a_dependency_never_satisfied_stays_pending_unless_the_daemon_kills_such_jobs() {
    use crate::protocol::After;
    let mut registry = Registry::new("eq".into(), 0, ShareTable::default());
    let failing = submit(&mut registry, 1000, "a", |_| {});
    let never = submit(&mut registry, 1000, "b", |s| {
        s.dependency.push(after(After::Ok, failing))
    });
    assert_eq!(taken(&mut registry, 10), [failing]);
    registry.finish(failing, Some(2.0), false, Some(1), None);
    assert!(taken(&mut registry, 10).is_empty());
    assert!(
        registry.take_unsatisfiable().is_empty(),
        "kept, not cancelled"
    );
    assert_eq!(
        registry.pending_reason(never, 10),
        Some("dependency_never_satisfied")
    );
    assert_eq!(registry.job(never).unwrap().state, JobState::Queued);
}

#[test]
fn any_of_several_dependencies_is_enough_and_all_failing_is_never() {
    use crate::protocol::After;
    let mut registry = Registry::new("eq".into(), 0, ShareTable::default());
    let a = submit(&mut registry, 1000, "a", |_| {});
    let b = submit(&mut registry, 1000, "b", |_| {});
    let c = submit(&mut registry, 1000, "c", |_| {});
    let either = submit(&mut registry, 1000, "either", |s| {
        s.dependency = vec![after(After::Ok, a), after(After::Ok, b)];
        s.dependency_any = true;
    });
    let both = submit(&mut registry, 1000, "both", |s| {
        s.dependency = vec![after(After::Ok, a), after(After::Ok, c)];
    });
    assert_eq!(taken(&mut registry, 10), [a, b, c]);
    registry.finish(a, Some(2.0), false, Some(1), None);
    // `?`: a failed, but b may still succeed; `,`: a failed, so never.
    assert!(taken(&mut registry, 10).is_empty());
    assert_eq!(registry.pending_reason(either, 10), Some("dependency"));
    assert_eq!(
        registry.pending_reason(both, 10),
        Some("dependency_never_satisfied")
    );
    registry.finish(b, Some(3.0), true, Some(0), None);
    assert_eq!(taken(&mut registry, 10), [either]);

    let d = submit(&mut registry, 1000, "d", |_| {});
    let e = submit(&mut registry, 1000, "e", |_| {});
    let neither = submit(&mut registry, 1000, "neither", |s| {
        s.dependency = vec![after(After::Ok, d), after(After::Ok, e)];
        s.dependency_any = true;
    });
    assert_eq!(taken(&mut registry, 10), [d, e]);
    registry.finish(d, Some(4.0), false, Some(1), None);
    registry.finish(e, Some(4.0), false, Some(1), None);
    assert!(taken(&mut registry, 10).is_empty());
    assert_eq!(
        registry.pending_reason(neither, 10),
        Some("dependency_never_satisfied")
    );
}

#[test]
fn after_waits_for_a_start_and_aftercorr_for_the_element_of_the_same_index() {
    use crate::protocol::After;
    let mut registry = Registry::new("eq".into(), 0, ShareTable::default());
    let first = submit(&mut registry, 1000, "first", |_| {});
    let started = submit(&mut registry, 1000, "started", |s| {
        s.dependency.push(after(After::Start, first))
    });
    assert_eq!(taken(&mut registry, 10), [first]);
    assert!(
        taken(&mut registry, 10).is_empty(),
        "{first} has not started"
    );
    registry.mark_started(first, 42, 1, 2.0);
    assert_eq!(taken(&mut registry, 10), [started]);

    let element = |of: Option<u64>, index: u64| {
        move |s: &mut Submission| {
            s.array = Some(ArrayElement {
                index,
                of,
                limit: None,
            })
        }
    };
    let array = registry.next_id();
    submit(&mut registry, 1000, "a", element(None, 1));
    let a2 = submit(&mut registry, 1000, "a", element(Some(array), 2));
    let b1 = submit(&mut registry, 1000, "b", |s| {
        element(None, 1)(s);
        s.dependency.push(after(After::Corr, array));
    });
    let b2 = submit(&mut registry, 1000, "b", |s| {
        element(Some(b1), 2)(s);
        s.dependency.push(after(After::Corr, array));
    });
    let b3 = submit(&mut registry, 1000, "b", |s| {
        element(Some(b1), 3)(s);
        s.dependency.push(after(After::Corr, array));
    });
    // b3 has no counterpart: it does not wait.
    assert_eq!(taken(&mut registry, 10), [array, a2, b3]);
    registry.finish(a2, Some(3.0), true, Some(0), None);
    assert_eq!(
        taken(&mut registry, 10),
        [b2],
        "b2 after a2, b1 still waits"
    );
    registry.finish(array, Some(4.0), false, Some(1), None);
    assert!(taken(&mut registry, 10).is_empty());
    assert_eq!(
        registry.pending_reason(b1, 10),
        Some("dependency_never_satisfied")
    );
}

#[test]
fn a_singleton_waits_for_its_users_earlier_jobs_of_its_name() {
    let mut registry = Registry::new("eq".into(), 0, ShareTable::default());
    let first = submit(&mut registry, 1000, "nightly", |_| {});
    let other_user = submit(&mut registry, 1001, "nightly", |s| s.singleton = true);
    let second = submit(&mut registry, 1000, "nightly", |s| s.singleton = true);
    let third = submit(&mut registry, 1000, "nightly", |s| s.singleton = true);
    assert_eq!(taken(&mut registry, 10), [first, other_user]);
    assert_eq!(registry.pending_reason(second, 10), Some("dependency"));
    registry.finish(first, Some(2.0), true, Some(0), None);
    assert_eq!(taken(&mut registry, 10), [second], "third waits for second");
    registry.finish(second, Some(3.0), false, Some(1), None);
    assert_eq!(taken(&mut registry, 10), [third]);
}

#[test]
fn a_held_job_waits_until_released_and_a_begin_until_the_clock_reaches_it() {
    let mut registry = Registry::new("eq".into(), 0, ShareTable::default());
    let held = submit(&mut registry, 1000, "held", |s| s.hold = true);
    let later = submit(&mut registry, 1000, "later", |s| s.begin = Some(100.0));
    let plain = submit(&mut registry, 1000, "plain", |_| {});
    registry.tick(50.0);
    assert_eq!(taken(&mut registry, 10), [plain]);
    assert_eq!(registry.pending_reason(held, 10), Some("job_held_user"));
    assert_eq!(registry.pending_reason(later, 10), Some("begin_time"));
    registry.tick(99.0);
    assert!(taken(&mut registry, 10).is_empty(), "not before its begin");
    registry.tick(100.0);
    assert_eq!(taken(&mut registry, 10), [later]);
    assert!(registry.check_hold(&[plain], 1000).is_err(), "running");
    assert!(registry.check_hold(&[held], 1001).is_err(), "not theirs");
    registry.check_hold(&[held], 1000).unwrap();
    registry.set_held(held, false);
    assert_eq!(taken(&mut registry, 10), [held]);

    // Held while in its user's queue, it is not handed over.
    let queued = submit(&mut registry, 1000, "queued", |_| {});
    registry.set_held(queued, true);
    assert!(taken(&mut registry, 10).is_empty());
    registry.set_held(queued, false);
    assert_eq!(taken(&mut registry, 10), [queued]);
}

#[test]
fn an_exclusive_job_starts_on_an_empty_node_and_runs_alone() {
    let mut registry = Registry::new("eq".into(), 0, ShareTable::default());
    let running = submit(&mut registry, 1000, "running", |_| {});
    assert_eq!(taken(&mut registry, 10), [running]);
    let alone = submit(&mut registry, 1000, "alone", |s| s.exclusive = true);
    let after_it = submit(&mut registry, 1001, "after", |_| {});
    // The node is not empty: the exclusive job waits, and no job starts before it.
    assert!(taken(&mut registry, 10).is_empty());
    assert_eq!(registry.pending_reason(after_it, 10), Some("resources"));
    registry.finish(running, Some(2.0), true, Some(0), None);
    assert_eq!(taken(&mut registry, 10), [alone]);
    assert!(taken(&mut registry, 10).is_empty(), "none beside it");
    registry.finish(alone, Some(3.0), true, Some(0), None);
    assert_eq!(taken(&mut registry, 10), [after_it]);
    // An exclusive job held while it waits no longer keeps the others waiting.
    let running = submit(&mut registry, 1000, "running", |_| {});
    assert_eq!(taken(&mut registry, 10), [running]);
    let alone = submit(&mut registry, 1000, "alone", |s| s.exclusive = true);
    let other = submit(&mut registry, 1001, "other", |_| {});
    assert!(taken(&mut registry, 10).is_empty());
    registry.set_held(alone, true);
    registry.set_held(alone, false);
    registry.set_held(alone, true);
    assert_eq!(taken(&mut registry, 10), [other]);
}

#[test]
fn after_with_minutes_waits_that_long_after_the_start_on_the_clock() {
    use crate::protocol::{After, Dependency};
    let mut registry = Registry::new("eq".into(), 0, ShareTable::default());
    let first = submit(&mut registry, 1000, "first", |_| {});
    let delayed = submit(&mut registry, 1000, "delayed", |s| {
        s.dependency.push(Dependency {
            after: After::Start,
            id: first,
            minutes: 1,
        })
    });
    registry.tick(5.0);
    assert_eq!(taken(&mut registry, 10), [first]);
    registry.mark_started(first, 42, 1, 10.0);
    registry.tick(69.0);
    assert!(taken(&mut registry, 10).is_empty(), "59 s after the start");
    assert_eq!(registry.pending_reason(delayed, 10), Some("dependency"));
    registry.tick(70.0);
    assert_eq!(taken(&mut registry, 10), [delayed]);
}

#[test]
fn no_id_is_given_out_past_what_the_executor_holds() {
    let last = u64::from(u32::MAX);
    let registry = Registry::new("eq".into(), last, ShareTable::default());
    assert_eq!(registry.new_id().unwrap(), last);
    let registry = Registry::new("eq".into(), last + 1, ShareTable::default());
    assert!(matches!(registry.new_id(), Err(ServiceError::IdsExhausted)));
}
