//! What the executor takes from the registry on each pass: queued jobs, handed over fairly among
//! users within their limits, new weights, joined tasks, jobs to kill.

use super::pending::Gate;
use super::{Incoming, Registry};
use cosched_core::memory::admits;
use cosched_linux::Adopt;
use std::collections::HashMap;

impl Registry {
    /// Hands queued jobs to the executor fairly among users, as a fair-share queue orders them: the
    /// next job is always the first of the user who runs the fewest jobs for their share, a user's
    /// jobs coming highest priority first, then oldest first. An array with a limit has at most that
    /// many elements handed over and not ended. A user
    /// (root included) has at most `awaiting_per_user` jobs handed over and not yet started, so that
    /// no user's backlog waits in the executor's queue ahead of another user's first job; a user
    /// (root excepted) who runs `running_per_user` jobs gets none until one of theirs ends. A running
    /// process to adopt is always taken: it runs whether or not cosched watches it. A job whose memory
    /// request does not fit beside those running ([`admits`]) waits in its place while later jobs
    /// that fit go ahead.
    pub fn take_incoming(
        &mut self,
        running_per_user: usize,
        awaiting_per_user: usize,
    ) -> Vec<Incoming> {
        if !std::mem::take(&mut self.takeable) {
            return Vec::new();
        }
        let mut chosen = self.incoming.take_adopt();
        self.release_held();
        // Processes adopted in this take run already: they count against their users' limits.
        let mut handed: HashMap<u32, usize> = HashMap::new();
        let mut memory_handed = 0u64;
        for id in &chosen {
            *handed.entry(self.jobs[id].view.uid).or_default() += 1;
            memory_handed += self.jobs[id].view.mem.unwrap_or(0);
        }
        let mut in_array = self.handed_per_array(&chosen);
        // One cancelled or held since no longer keeps the others waiting.
        if self
            .draining_for
            .is_some_and(|id| !self.incoming.contains(id) || !matches!(self.gate(id), Gate::Go))
        {
            self.draining_for = None;
        }
        let mut exclusive_running = self
            .running_of
            .values()
            .flatten()
            .chain(&chosen)
            .any(|id| self.jobs[id].exclusive);
        loop {
            if exclusive_running {
                break;
            }
            let fronts: Vec<(u32, u64)> = self.incoming.fronts().collect();
            let node_busy = !self.running_of.is_empty() || !chosen.is_empty();
            if self.draining_for.is_none() && node_busy {
                // An exclusive job first in its user's queue: the others wait with it, or a
                // busy node might never empty.
                let exclusive = fronts
                    .iter()
                    .find(|(_, id)| self.jobs[id].exclusive && matches!(self.gate(*id), Gate::Go));
                self.draining_for = exclusive.map(|&(_, id)| id);
            }
            let Some(uid) = self.next_user(
                fronts,
                &handed,
                &chosen,
                running_per_user,
                awaiting_per_user,
            ) else {
                break;
            };
            let id = self.incoming.pop_front(uid).expect("a front was named");
            // Held or given a later begin while queued: its place in its user's queue stayed.
            if !matches!(self.gate(id), Gate::Go) {
                self.incoming.hold(id);
                continue;
            }
            let job = &self.jobs[&id];
            match (job.exclusive, self.draining_for) {
                (true, _) if node_busy => {
                    // Nothing else starts until the node is empty and it has started.
                    self.draining_for = Some(id);
                    self.incoming.hold(id);
                    break;
                }
                (false, Some(_)) => {
                    self.incoming.hold(id);
                    continue;
                }
                _ => {}
            }
            exclusive_running = job.exclusive;
            if exclusive_running {
                self.draining_for = None;
            }
            let array = job.view.array_id;
            let limit = job.submission.as_ref().and_then(|s| s.array?.limit);
            let array_full = match (array, limit) {
                (Some(array), Some(limit)) => {
                    in_array.get(&array).copied().unwrap_or(0) >= limit as usize
                }
                _ => false,
            };
            let in_use = self.memory_in_use.saturating_add(memory_handed);
            if array_full || !admits(self.memory_for_jobs, in_use, job.view.mem) {
                // Out of the way until a job ends; the user's jobs behind it may start.
                self.incoming.hold(id);
                continue;
            }
            if let Some(array) = array {
                *in_array.entry(array).or_default() += 1;
            }
            memory_handed += job.view.mem.unwrap_or(0);
            self.incoming.taken(id);
            *handed.entry(uid).or_default() += 1;
            chosen.push(id);
        }
        self.hand_over(chosen)
    }

    /// The user whose first queued job is handed over next: of those whose first job may go within
    /// their limits, the one who runs the fewest jobs for their share, counting those `handed` over
    /// in this take (`chosen`); the lower id first between equals.
    fn next_user(
        &self,
        fronts: Vec<(u32, u64)>,
        handed: &HashMap<u32, usize>,
        chosen: &[u64],
        running_per_user: usize,
        awaiting_per_user: usize,
    ) -> Option<u32> {
        fronts
            .into_iter()
            .filter_map(|(uid, front)| {
                let load = self.users.get(&uid).copied().unwrap_or_default();
                let running = load.running + handed.get(&uid).copied().unwrap_or(0);
                let awaiting = self.awaiting_start.get(&uid).copied().unwrap_or(0)
                    + handed.get(&uid).copied().unwrap_or(0);
                // A job that outranks what its user has waiting in the executor goes there too,
                // so that the policy starts it first (`Registry::outranks_awaiting`).
                let room = awaiting < awaiting_per_user
                    || self.outranks_awaiting(uid, front, chosen, awaiting_per_user);
                let eligible = (uid == 0 || running < running_per_user) && room;
                let usage = running as f64 / self.shares.of(uid, self.jobs[&front].gid);
                eligible.then_some((usage, front, uid))
            })
            .min_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)))
            .map(|(_, _, uid)| uid)
    }

    /// Hands the `chosen` jobs to the executor: they count as running from now on, and every
    /// user's running jobs share their user's weight anew.
    fn hand_over(&mut self, chosen: Vec<u64>) -> Vec<Incoming> {
        let users_before = self.running_of.len();
        let mut taken = Vec::with_capacity(chosen.len());
        let mut users = Vec::new();
        for id in chosen {
            let job = self.jobs.get_mut(&id).expect("queued jobs are held");
            let Some(submission) = job.submission.take() else {
                continue;
            };
            let uid = job.view.uid;
            let load = self.users.entry(uid).or_default();
            load.queued -= 1;
            load.running += 1;
            job.running = true;
            self.memory_in_use = (self.memory_in_use).saturating_add(job.view.mem.unwrap_or(0));
            if job.adopt.is_none() {
                job.awaiting_start = true;
                *self.awaiting_start.entry(uid).or_default() += 1;
            }
            self.running_of.entry(uid).or_default().push(id);
            users.push(uid);
            taken.push(Incoming {
                id,
                uid,
                gid: job.gid,
                submission: *submission,
                weight: 1.0,
                share: self.shares.of(uid, job.gid),
                stdout: job.view.stdout.clone(),
                stderr: job.view.stderr.clone(),
                adopt: job.adopt,
            });
        }
        users.sort_unstable();
        users.dedup();
        self.reweigh_after(users_before, users);
        for job in &mut taken {
            job.weight = self.jobs[&job.id].fair_weight;
        }
        taken
    }

    /// Whether queued job `front` of `uid` is among the `limit` highest-priority jobs of its user
    /// that would wait in the executor beside those there now (`handed`: handed in this take):
    /// the executor holds at most `limit` of a user's jobs waiting to start, but a later job of
    /// higher priority must not queue behind them in the registry while they wait there.
    fn outranks_awaiting(&self, uid: u32, front: u64, handed: &[u64], limit: usize) -> bool {
        let priority = self.jobs[&front].view.priority;
        let ahead = (self.running_of.get(&uid).into_iter().flatten())
            .chain(handed)
            .filter_map(|id| self.jobs.get(id))
            .filter(|job| job.view.uid == uid && job.view.started.is_none())
            .filter(|job| job.adopt.is_none() && job.view.priority >= priority)
            .count();
        ahead < limit
    }

    /// Gives back to their users' queues the held jobs that may go now that a job has ended (those
    /// still held by an array's limit or by memory are held again when they come to the front),
    /// and notes the dependencies that can never be met; looks only after a job has ended.
    fn release_held(&mut self) {
        for id in self.incoming.take_unchecked_held() {
            match self.gate(id) {
                Gate::Go => self.incoming.release(id),
                Gate::Begin(begin) | Gate::Later(begin) => {
                    self.next_begin = self.next_begin.min(begin);
                    self.incoming.hold(id);
                }
                Gate::Never(why) if self.kill_invalid_depend => {
                    self.unsatisfiable.push((id, why));
                    self.incoming.hold(id);
                }
                Gate::Held | Gate::Dependency | Gate::Never(_) => self.incoming.hold(id),
            }
        }
    }

    /// How many elements of each array are running or among `adopted`.
    fn handed_per_array(&self, adopted: &[u64]) -> HashMap<u64, usize> {
        let mut counts = HashMap::new();
        let running = self.running_of.values().flatten();
        for id in running.chain(adopted) {
            if let Some(array) = self.jobs[id].view.array_id {
                *counts.entry(array).or_default() += 1;
            }
        }
        counts
    }

    /// Queued jobs found, at the last take, never to be able to start, with why.
    pub fn take_unsatisfiable(&mut self) -> Vec<(u64, String)> {
        std::mem::take(&mut self.unsatisfiable)
    }

    /// Gives each running job of `uid` its fair weight: the user's share, divided among their
    /// running jobs in proportion to the weights they were submitted with. The user's CPU time then
    /// does not grow with the number of jobs they run.
    fn reweigh(&mut self, uid: u32) {
        let Some(ids) = self.running_of.get(&uid) else {
            return;
        };
        let total: f64 = ids.iter().map(|id| self.jobs[id].weight).sum();
        let Some(first) = ids.first() else {
            return;
        };
        let share = self.shares.of(uid, self.jobs[first].gid);
        // A user alone on the machine shares it with no one: their jobs keep their own weights.
        let alone = self.running_of.len() <= 1;
        for id in ids {
            let job = self.jobs.get_mut(id).expect("running jobs are held");
            let weight = match alone {
                true => job.weight,
                false => share * job.weight / total,
            };
            if job.fair_weight != weight {
                job.fair_weight = weight;
                self.reweighted.push((*id, weight));
            }
        }
    }

    /// Reweighs `changed` users, or every user when the machine went from one user to several or
    /// back (`users_before` had running jobs before the change).
    pub(super) fn reweigh_after(&mut self, users_before: usize, changed: Vec<u32>) {
        let crossed = (users_before <= 1) != (self.running_of.len() <= 1);
        let users = match crossed {
            true => self.running_of.keys().copied().collect(),
            false => changed,
        };
        for uid in users {
            self.reweigh(uid);
        }
    }

    /// The jobs whose fair weight changed since the last call, with the new weight.
    pub fn take_reweighted(&mut self) -> Vec<(u64, f64)> {
        std::mem::take(&mut self.reweighted)
    }

    /// Whether the next [`Registry::take_incoming`] may hand over a job it held back.
    pub fn takeable(&self) -> bool {
        self.takeable
    }

    /// Jobs not yet handed to the executor.
    pub fn incoming_len(&self) -> usize {
        self.incoming.len()
    }

    /// The tasks that joined jobs the executor has. A task may join a job the executor has not taken
    /// yet (both came since its last pass): the task waits for its job, or the executor would take it
    /// for a job that has ended.
    pub fn take_joins(&mut self) -> Vec<(u64, Adopt)> {
        let joins = std::mem::take(&mut self.joins);
        let (waiting, ready): (Vec<_>, Vec<_>) = joins
            .into_iter()
            .partition(|(id, _)| self.incoming.contains(*id));
        self.joins = waiting;
        ready
    }

    /// Running jobs cancelled since the last call, for the executor to kill.
    pub fn take_cancelled(&mut self) -> Vec<u64> {
        std::mem::take(&mut self.cancelled)
    }

    /// Running jobs past their time limit at `now` that are to be sent SIGTERM now, each to be
    /// journaled `timed_out`. Those sent it `kill_wait` seconds ago or more are handed to the
    /// executor to kill, as cancelled jobs are.
    pub fn take_overdue(&mut self, now: f64, kill_wait: f64) -> Vec<u64> {
        let mut overdue = Vec::new();
        let jobs = &self.jobs;
        let cancelled = &mut self.cancelled;
        self.limited.retain(|id| {
            let Some(job) = jobs.get(id) else {
                return false;
            };
            match (job.terminated, job.view.started, job.view.time_limit) {
                (Some(sent), _, _) if now >= sent + kill_wait => {
                    cancelled.push(*id);
                    false
                }
                (None, Some(started), Some(limit)) if now >= started + limit as f64 => {
                    overdue.push(*id);
                    true
                }
                _ => true,
            }
        });
        overdue
    }
}
