//! One slot's rates, evaluated group by group.
//!
//! Runners in different regions of the machine ([`MachineModel::regions_of`]: CPUs joined by an
//! LLC, or by a NUMA node when some job demands memory bandwidth) affect each other only through the
//! machine's total load. So a slot's runners
//! fall into groups that share no region, and a group whose runners are the ones it had, with the
//! same CPUs and threads, keeps its rates: a job that ends on a large machine costs the model of its
//! own region, not of the whole machine. When the slot's total load moves (the effective speedup
//! model slows every job by it), every group's rates follow from what the model kept of its last
//! evaluation ([`Basis`]), in a few operations per runner.
//!
//! A slot is evaluated whole when its plan changed shape ([`SlotGroups::rates`]); after a few jobs
//! moved, only the groups they left or joined are ([`SlotGroups::update`]).

use crate::model::SpeedupModel;
use crate::model::{
    group_bases, Basis, Effects, MachineModel, ModelParams, Runner, Scratch, SlotRate,
};
use crate::profile::Profile;
use cosched_core::CpuSet;

/// A runner of the slot: the job's index and what the model sees of it.
pub(super) struct SlotRunner<'a> {
    pub job: usize,
    pub runner: Runner<'a>,
}

/// Where a job is in the slot after a change.
#[derive(Debug, Clone)]
pub(super) enum Moved {
    /// Gone from the slot.
    Gone,
    /// On these CPUs now.
    To(CpuSet),
    /// On the CPUs it had; it started, ended or changed its thread count.
    Stayed,
}

/// What the model sees of the running jobs besides their CPUs.
#[derive(Clone, Copy)]
pub(super) struct Lookup<'a, 'b> {
    /// Job `i`'s threads, profile and memory's NUMA nodes, if it runs.
    pub run: &'b dyn Fn(usize) -> Option<(u32, &'a Profile, &'a CpuSet)>,
    /// Job `i`'s profile, if it runs: all a remembered runner needs, read without the job's run
    /// (an allocation of its own, which a group of 64 runners would otherwise reach 64 times).
    pub profile: &'b dyn Fn(usize) -> Option<&'a Profile>,
}

/// The slot's groups from its last evaluation, by the lowest region each one covers.
#[derive(Default)]
pub(super) struct SlotGroups {
    groups: Vec<Option<Group>>,
    /// Some runner spans regions: groups may cover several, so moves cannot be placed one by one.
    spanning: bool,
    /// Union-find over regions (each region's parent is a lower one or itself), reused.
    parent: Vec<u32>,
    /// Each runner's group (by the slot's list), the runners by group, and the groups evaluated
    /// again, reused.
    keys: Vec<usize>,
    buckets: Vec<Vec<usize>>,
    changed: Vec<usize>,
    /// Groups replaced since, whose lists the next evaluations fill again.
    spare: Vec<Group>,
    /// The room of the list of runners evaluated together.
    runners: Vec<Runner<'static>>,
    /// Since the last [`take_changes`](Self::take_changes): the runners that left a group replaced
    /// or dropped, the rates of replacements that differ from those of the group replaced, and the
    /// runners whose rate moved with the slot's load.
    left: Vec<usize>,
    handed: Vec<(usize, SlotRate, usize)>,
    followed: Vec<(usize, SlotRate, usize)>,
    /// Some job has two runners in the slot, as of its last evaluation whole (moves never add one):
    /// its rate here is then whichever was handed last, not its group's, so a replacement hands over
    /// all of its rates.
    listed_twice: bool,
    /// The slot's jobs, sorted to find one listed twice, reused.
    sorted_jobs: Vec<usize>,
    /// The lists of [`update`](Self::update), kept for their room: it runs on most events.
    moves: MoveLists,
}

/// What [`SlotGroups::update`] works out, emptied after each call.
#[derive(Default)]
struct MoveLists {
    /// The jobs that moved, sorted.
    jobs: Vec<usize>,
    /// Where they are remembered: (job, group, index of its first place among the group's members),
    /// in the groups' order.
    remembered: Vec<(usize, usize, usize)>,
    /// Where each ends up: its CPUs in the slot, `None` if gone.
    now: Vec<(usize, Option<CpuSet>)>,
    /// The members joining each group, by group.
    joining: Vec<(usize, Member)>,
    /// The groups evaluated again.
    touched: Vec<usize>,
}

/// A runner as its group remembers it: its job (by index), threads, CPUs and memory's NUMA nodes.
struct Member {
    job: usize,
    threads: u32,
    cpus: CpuSet,
    home: CpuSet,
}

#[derive(Default)]
struct Group {
    /// Its runners, in the slot's order: what its rates were computed for. `None` when the group
    /// held the whole slot: any change to the slot changes it, so it is not worth remembering.
    members: Option<Vec<Member>>,
    /// Its members' jobs, in order: what finding moved jobs reads, a sixth of the members' bytes.
    member_jobs: Vec<usize>,
    /// (job index, the model's rate, CPUs held).
    rates: Vec<(usize, SlotRate, usize)>,
    /// What each rate depends on besides the slot's load, in the order of `rates`.
    bases: Vec<Basis>,
    /// CPUs' worth its runners keep busy.
    busy: f64,
    /// The slot's busy CPUs, all groups together, its rates were computed with.
    total: f64,
}

impl Group {
    fn remember(&mut self, members: Vec<Member>) {
        self.member_jobs.clear();
        self.member_jobs.extend(members.iter().map(|m| m.job));
        self.members = Some(members);
    }
}

/// What the model needs besides the runners.
pub(super) struct Model<'a> {
    pub machine: &'a MachineModel,
    pub effects: &'a Effects,
    pub params: &'a ModelParams,
}

impl SlotGroups {
    /// Evaluates the slot's `runners` anew, re-evaluating only the groups whose runners changed.
    pub fn rates(&mut self, model: &Model, runners: &[SlotRunner], scratch: &mut Scratch) {
        self.group_keys(model.machine, runners);
        self.sorted_jobs.clear();
        self.sorted_jobs.extend(runners.iter().map(|r| r.job));
        self.sorted_jobs.sort_unstable();
        let twice_now = self.sorted_jobs.windows(2).any(|w| w[0] == w[1]);
        // While the groups are replaced, a job listed twice before still has a rate here that may
        // be another group's.
        self.listed_twice |= twice_now;
        let regions = model.machine.regions;
        self.groups.resize_with(regions, || None);
        self.buckets.resize_with(regions, Vec::new);
        self.buckets.iter_mut().for_each(Vec::clear);
        for (r, &key) in self.keys.iter().enumerate() {
            self.buckets[key].push(r);
        }
        let mut changed = std::mem::take(&mut self.changed);
        for key in 0..regions {
            let bucket = &self.buckets[key];
            if bucket.is_empty() {
                self.replace(key, None);
                continue;
            }
            let members = self.groups[key].as_ref().and_then(|g| g.members.as_ref());
            let same = members.is_some_and(|members| {
                members.len() == bucket.len()
                    && members.iter().zip(bucket).all(|(member, &r)| {
                        let now = &runners[r];
                        member.job == now.job
                            && member.threads == now.runner.threads
                            && member.cpus == *now.runner.cpus
                    })
            });
            if !same {
                changed.push(key);
            }
        }
        for &key in &changed {
            let elsewhere = self.busy() - self.groups[key].as_ref().map_or(0.0, |g| g.busy);
            let bucket = &self.buckets[key];
            let whole_slot = bucket.len() == runners.len();
            let mut group = self.spare.pop().unwrap_or_default();
            let mut members = group.members.take().unwrap_or_default();
            members.clear();
            if !whole_slot {
                members.extend(bucket.iter().map(|&r| {
                    let SlotRunner { job, runner } = &runners[r];
                    Member {
                        job: *job,
                        threads: runner.threads,
                        cpus: runner.cpus.clone(),
                        home: runner.home.clone(),
                    }
                }));
                group.remember(members);
            }
            let mut group_runners = emptied(std::mem::take(&mut self.runners));
            group_runners.extend(bucket.iter().map(|&r| runners[r].runner.clone()));
            let jobs = bucket.iter().map(|&r| runners[r].job);
            evaluate(model, &group_runners, jobs, elsewhere, scratch, &mut group);
            self.runners = emptied(group_runners);
            self.replace(key, Some(group));
        }
        changed.clear();
        self.changed = changed;
        self.listed_twice = twice_now;
        self.follow_load(model);
    }

    /// Brings the groups up to date with jobs that `moved` (job index, where to), evaluating again
    /// only the groups they leave or join. `false`, with nothing changed, when the slot must be
    /// evaluated whole instead: it was one group, a runner spans regions, or a job's CPUs are unknown.
    pub fn update<'a>(
        &mut self,
        model: &Model,
        moved: &[(usize, Moved)],
        lookup: Lookup<'a, '_>,
        scratch: &mut Scratch,
    ) -> bool {
        let mut lists = std::mem::take(&mut self.moves);
        let updated = self.update_with(model, moved, lookup, scratch, &mut lists);
        lists.jobs.clear();
        lists.remembered.clear();
        lists.now.clear();
        lists.joining.clear();
        lists.touched.clear();
        self.moves = lists;
        updated
    }

    fn update_with<'a>(
        &mut self,
        model: &Model,
        moved: &[(usize, Moved)],
        lookup: Lookup<'a, '_>,
        scratch: &mut Scratch,
        lists: &mut MoveLists,
    ) -> bool {
        let remembered = self.groups.iter().flatten().all(|g| g.members.is_some());
        if self.spanning || !remembered || self.groups.is_empty() {
            return false;
        }
        let MoveLists {
            jobs,
            remembered,
            now,
            joining,
            touched,
        } = lists;
        jobs.extend(moved.iter().map(|(job, _)| *job));
        jobs.sort_unstable();
        jobs.dedup();
        for (key, group) in self.groups.iter().enumerate() {
            let Some(group) = group.as_ref().filter(|g| g.members.is_some()) else {
                continue;
            };
            for &job in jobs.iter() {
                if let Some(at) = group.member_jobs.iter().position(|&m| m == job) {
                    remembered.push((job, key, at));
                }
            }
        }
        let member = |job: usize| {
            let (_, key, at) = remembered.iter().find(|r| r.0 == job)?;
            self.groups[*key].as_ref()?.members.as_ref()?.get(*at)
        };
        for (job, moved) in moved {
            let known = now.iter().position(|(j, _)| j == job);
            let cpus = match moved {
                Moved::Gone => None,
                Moved::To(cpus) => Some(cpus.clone()),
                Moved::Stayed => match known {
                    Some(k) => now[k].1.clone(),
                    None => match member(*job) {
                        Some(member) => Some(member.cpus.clone()),
                        // Never a runner here: its CPUs are in the plan, not in the groups.
                        None if (lookup.run)(*job).is_some() => return false,
                        None => None,
                    },
                },
            };
            match known {
                Some(k) => now[k].1 = cpus,
                None => now.push((*job, cpus)),
            }
        }
        for (job, cpus) in now.iter() {
            let Some(cpus) = cpus.as_ref().filter(|c| !c.is_empty()) else {
                continue;
            };
            let Some((threads, _, home)) = (lookup.run)(*job) else {
                continue;
            };
            let mut regions = model.machine.regions_of(cpus);
            let key = regions.next().expect("not empty");
            if regions.any(|r| r != key) {
                return false;
            }
            let member = Member {
                job: *job,
                threads,
                cpus: cpus.clone(),
                home: home.clone(),
            };
            joining.push((key as usize, member));
        }
        // Each moved job leaves every group it is remembered in (its first place in each), the
        // last places first so that the others keep their indices.
        remembered.sort_unstable_by_key(|&(_, key, at)| std::cmp::Reverse((key, at)));
        for &(_, key, at) in remembered.iter() {
            if let Some(members) = self.groups[key].as_mut().and_then(|g| g.members.as_mut()) {
                members.remove(at);
                touched.push(key);
            }
        }
        for (key, member) in joining.drain(..) {
            let group = self.groups[key].get_or_insert_with(|| Group {
                members: Some(Vec::new()),
                ..Group::default()
            });
            group.members.get_or_insert_with(Vec::new).push(member);
            touched.push(key);
        }
        touched.sort_unstable();
        touched.dedup();
        for &key in touched.iter() {
            let members = self.groups[key]
                .as_mut()
                .and_then(|g| g.members.take())
                .unwrap_or_default();
            if members.is_empty() {
                self.replace(key, None);
                continue;
            }
            let elsewhere = self.busy() - self.groups[key].as_ref().map_or(0.0, |g| g.busy);
            let mut group = self.spare.pop().unwrap_or_default();
            let room = &mut self.runners;
            evaluate_members(model, members, lookup, elsewhere, scratch, &mut group, room);
            self.replace(key, Some(group));
        }
        self.follow_load(model);
        true
    }

    /// Hands `change` what changed since the last call: first the runners that may have lost their
    /// rate here (those of the groups replaced or dropped) with `None`, then the new rates, (job
    /// index, rate and CPUs held). A runner handed both keeps the new one.
    pub fn take_changes(&mut self, mut change: impl FnMut(usize, Option<(SlotRate, usize)>)) {
        self.left.drain(..).for_each(|i| change(i, None));
        let handed = self.handed.drain(..).chain(self.followed.drain(..));
        for (i, rate, held) in handed {
            change(i, Some((rate, held)));
        }
    }

    /// Puts `group` in place of the group at `key` (at most once per key between two
    /// [`take_changes`](Self::take_changes)), noting what changed for it.
    fn replace(&mut self, key: usize, group: Option<Group>) {
        let old = std::mem::replace(&mut self.groups[key], group);
        let new = self.groups[key].as_ref();
        match (&old, new) {
            (Some(old), Some(new)) if !self.listed_twice => {
                hand_over_differences(&old.rates, &new.rates, &mut self.left, &mut self.handed);
            }
            _ => {
                let old_jobs = old.iter().flat_map(|g| g.rates.iter().map(|r| r.0));
                self.left.extend(old_jobs);
                self.handed
                    .extend(new.iter().flat_map(|g| g.rates.iter().copied()));
            }
        }
        if let Some(old) = old.filter(|_| self.spare.len() < self.groups.len()) {
            self.spare.push(old);
        }
    }

    /// The jobs (by index) that have a rate here.
    pub fn runners(&self) -> impl Iterator<Item = usize> + '_ {
        self.groups
            .iter()
            .flatten()
            .flat_map(|g| g.rates.iter().map(|r| r.0))
    }

    fn busy(&self) -> f64 {
        self.groups.iter().flatten().map(|g| g.busy).sum()
    }

    /// The machine's load moved: every group's effective speedup moves with it, and its rates follow
    /// from their bases. (A group that held the whole slot saw all of the load already.) Only the
    /// runners whose rate changed are reported, and so summed again.
    fn follow_load(&mut self, model: &Model) {
        if model.effects.speedup != SpeedupModel::Effective {
            return;
        }
        let total = self.busy();
        for key in 0..self.groups.len() {
            let Some(group) = self.groups[key].as_mut() else {
                continue;
            };
            if (group.total - total).abs() <= 1e-12 * total.max(1.0) || group.members.is_none() {
                continue;
            }
            let elsewhere = total - group.busy;
            let busy_total = elsewhere + group.busy;
            for ((job, rate, held), basis) in group.rates.iter_mut().zip(&group.bases) {
                let now = basis.loaded(model.machine, busy_total);
                if !now.same_bits(rate) {
                    *rate = now;
                    self.followed.push((*job, now, *held));
                }
            }
            group.total = busy_total;
        }
    }

    /// Each runner's group, named by the lowest region of the group, into `keys`.
    fn group_keys(&mut self, machine: &MachineModel, runners: &[SlotRunner]) {
        self.parent.clear();
        self.parent.extend(0..machine.regions as u32);
        self.spanning = false;
        let parent = &mut self.parent;
        let root = |parent: &mut [u32], mut x: u32| {
            while parent[x as usize] != x {
                parent[x as usize] = parent[parent[x as usize] as usize];
                x = parent[x as usize];
            }
            x
        };
        let first = &mut self.keys;
        first.clear();
        for r in runners {
            let mut regions = machine.regions_of(r.runner.cpus);
            let Some(home) = regions.next() else {
                first.push(0);
                continue;
            };
            first.push(home as usize);
            for region in regions {
                if region != home {
                    self.spanning = true;
                }
                let (a, b) = (root(parent, home), root(parent, region));
                parent[a.max(b) as usize] = a.min(b);
            }
        }
        for key in first.iter_mut() {
            *key = root(parent, *key as u32) as usize;
        }
    }
}

/// What a group's rates `new` change from its rates `old`, in `left` (jobs no longer rated, or
/// maybe so) and `handed` (new or moved rates). Both lists keep the slot's order, in which a group
/// loses members where they were and gains them at its end, so they are walked side by side; a
/// rate found nowhere in step is handed over, which is never wrong, only slower. A job whose rate
/// here is its group's (no job listed twice) and kept it, to the bit, is left out: in a group of 64,
/// most of them.
fn hand_over_differences(
    old: &[(usize, SlotRate, usize)],
    new: &[(usize, SlotRate, usize)],
    left: &mut Vec<usize>,
    handed: &mut Vec<(usize, SlotRate, usize)>,
) {
    let mut k = 0;
    for &(job, rate, held) in new {
        let at = match old.get(k..) {
            Some([first, ..]) if first.0 == job => Some(k),
            Some([first, second, ..]) if second.0 == job => {
                left.push(first.0);
                Some(k + 1)
            }
            _ => None,
        };
        let Some(at) = at else {
            handed.push((job, rate, held));
            continue;
        };
        k = at + 1;
        let (_, was, held_before) = old[at];
        if held != held_before || !rate.same_bits(&was) {
            handed.push((job, rate, held));
        }
    }
    left.extend(old[k.min(old.len())..].iter().map(|r| r.0));
}

/// `group` made the group of `members`, the running jobs `lookup` describes, their runners listed in
/// the room of `room`.
fn evaluate_members(
    model: &Model,
    mut members: Vec<Member>,
    lookup: Lookup<'_, '_>,
    elsewhere: f64,
    scratch: &mut Scratch,
    group: &mut Group,
    room: &mut Vec<Runner<'static>>,
) {
    members.retain(|member| (lookup.profile)(member.job).is_some());
    let mut runners = emptied(std::mem::take(room));
    runners.extend(members.iter().map(|member| {
        let profile = (lookup.profile)(member.job).expect("kept above: running");
        Runner::new(&member.cpus, member.threads, profile, &member.home)
    }));
    let jobs = members.iter().map(|m| m.job);
    evaluate(model, &runners, jobs, elsewhere, scratch, group);
    *room = emptied(runners);
    group.remember(members);
}

/// `list` emptied, its room kept for items of another type of the same size: runners borrow the
/// engine's jobs for one evaluation, so their list cannot be kept, but its allocation can (collecting
/// in place reuses it).
pub(super) fn emptied<T, U>(mut list: Vec<T>) -> Vec<U> {
    list.clear();
    list.into_iter().map(|_| unreachable!("emptied")).collect()
}

/// `group` made the group of `runners` (of `jobs`), its lists refilled; its members are left as
/// they are.
fn evaluate(
    model: &Model,
    runners: &[Runner],
    jobs: impl Iterator<Item = usize>,
    elsewhere: f64,
    scratch: &mut Scratch,
    group: &mut Group,
) {
    let machine = model.machine;
    let busy = group_bases(
        machine,
        runners,
        model.effects,
        model.params,
        scratch,
        &mut group.bases,
    );
    let busy_total = elsewhere + busy;
    group.rates.clear();
    group.rates.extend(
        jobs.zip(runners)
            .zip(&group.bases)
            .map(|((job, runner), basis)| (job, basis.loaded(machine, busy_total), runner.width)),
    );
    group.busy = busy;
    group.total = busy_total;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::MachineModel;
    use crate::profile;
    use cosched_core::topology::synthetic;

    /// The jobs handed a rate when job 1 (on CPUs 2-3) gives its place to job 2, its twin, in a slot
    /// of job 0 on CPUs 0-1 and job 1, and of `also` (job, CPUs) in the other LLC.
    fn handed_after_a_twin_takes_over(also: (usize, &str)) -> Vec<usize> {
        let topology = synthetic::parse("package:2 l3:1(size=4MB) core:4").unwrap();
        let options = crate::SimOptions::default();
        // One region per LLC: the jobs demand no memory bandwidth.
        let machine = MachineModel::new(&topology, &options.params).uncouple_memory(&topology);
        let model = Model {
            machine: &machine,
            effects: &options.effects,
            params: &options.params,
        };
        let profile = profile::parse("amdahl(serial=0.1, runtime=3)").unwrap();
        let home = CpuSet::new();
        let cpus = |text: &str| text.parse::<CpuSet>().unwrap();
        let placed = [(0, cpus("0-1")), (1, cpus("2-3")), (also.0, cpus(also.1))];
        let runners: Vec<SlotRunner> = placed
            .iter()
            .map(|(job, cpus)| SlotRunner {
                job: *job,
                runner: Runner::new(cpus, 2, &profile, &home),
            })
            .collect();
        let mut groups = SlotGroups::default();
        let mut scratch = Scratch::default();
        groups.rates(&model, &runners, &mut scratch);
        groups.take_changes(|_, _| {});
        let run = |_: usize| Some((2, &profile, &home));
        let profile_of = |_: usize| Some(&profile);
        let lookup = Lookup {
            run: &run,
            profile: &profile_of,
        };
        let moved = [(1, Moved::Gone), (2, Moved::To(cpus("2-3")))];
        assert!(groups.update(&model, &moved, lookup, &mut scratch));
        let mut handed = Vec::new();
        groups.take_changes(|job, rate| {
            if rate.is_some() {
                handed.push(job);
            }
        });
        handed
    }

    #[test]
    fn a_group_evaluated_again_hands_over_only_the_rates_that_moved() {
        // Job 0's co-runner is replaced by its twin: job 0 keeps its rate to the bit.
        assert_eq!(handed_after_a_twin_takes_over((3, "4-5")), vec![2]);
    }

    #[test]
    fn a_job_listed_twice_in_a_slot_is_handed_its_rate_again() {
        // Job 0 also runs in the other LLC, whose rate for it may be the one it keeps: the rate of
        // the group evaluated again must be handed over even though that group's did not move.
        assert_eq!(handed_after_a_twin_takes_over((0, "4-5")), vec![0, 2]);
    }
}
