//! Cgroups the executor creates, one per job and hierarchy: cgroup v2 (cpuset, `cgroup.freeze` and,
//! where delegated, memory), and the v1 cpuset, freezer and memory hierarchies.
//!
//! Every cgroup is created next to cosched's own cgroup of that hierarchy (its delegated subtree) and is
//! named `cosched-<pid>-<run>-<job>`, so that leftovers of a crashed run can be told apart.

use cosched_core::CpuSet;
use std::fmt;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CgroupKind {
    V2,
    V1Cpuset,
    V1Freezer,
    V1Memory,
}

impl CgroupKind {
    /// File whose content selects frozen or thawed, and the two values.
    pub fn freeze_file(self) -> Option<(&'static str, &'static str, &'static str)> {
        match self {
            CgroupKind::V2 => Some(("cgroup.freeze", "1", "0")),
            CgroupKind::V1Freezer => Some(("freezer.state", "FROZEN", "THAWED")),
            CgroupKind::V1Cpuset | CgroupKind::V1Memory => None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            CgroupKind::V2 => "cgroup2",
            CgroupKind::V1Cpuset => "cgroup v1 cpuset",
            CgroupKind::V1Freezer => "cgroup v1 freezer",
            CgroupKind::V1Memory => "cgroup v1 memory",
        }
    }
}

impl fmt::Display for CgroupKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Why cosched cannot create the cgroups it needs in a hierarchy.
#[derive(Debug, thiserror::Error)]
pub enum CgroupError {
    #[error("cannot read {}", path.display())]
    Proc {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("no cgroup2 file system is mounted")]
    NoCgroup2,
    #[error("no cgroup v1 hierarchy with the {controller} controller is mounted")]
    NoV1Hierarchy { controller: &'static str },
    #[error("/proc/self/cgroup does not name cosched's {kind} cgroup")]
    NotInHierarchy { kind: CgroupKind },
    #[error(
        "the cpuset controller is not available in cgroup2 at {} (available: {available}); it is \
         bound to a cgroup v1 hierarchy or not delegated to this cgroup",
        base.display()
    )]
    CpusetNotDelegated { base: PathBuf, available: String },
    #[error(
        "the memory controller is not available in cgroup2 at {} (available: {available})",
        base.display()
    )]
    MemoryNotDelegated { base: PathBuf, available: String },
    #[error(
        "cannot give the {controller} controller to jobs' cgroups: cosched's cgroup {} holds \
         processes other than cosched ({pids}), and cgroup v2 gives controllers only to the children \
         of a cgroup that holds none; start cosched in a cgroup of its own (the cosched.service \
         unit, or `systemd-run --scope -p Delegate=yes cosched ...`)",
        base.display()
    )]
    HoldsProcesses {
        controller: &'static str,
        base: PathBuf,
        pids: String,
    },
    #[error("cannot enable the {controller} controller in {}", subtree.display())]
    ControllerNotEnabled {
        controller: &'static str,
        subtree: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error(
        "cannot create a {kind} cgroup in {} (run as root, or delegate that cgroup to this user)",
        base.display()
    )]
    Create {
        kind: CgroupKind,
        base: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("{kind} cgroups in {} lack {}", base.display(), missing.join(", "))]
    MissingFiles {
        kind: CgroupKind,
        base: PathBuf,
        missing: Vec<&'static str>,
    },
}

/// The cgroup a cosched process moves into, below its own, when cgroup v2 asks its own cgroup to
/// hold no process: a cgroup gives a controller to its children only while it holds none itself
/// (the "no internal processes" rule), and a systemd service starts in its unit's cgroup.
const LEAF: &str = "cosched.leaf";

/// Where cosched itself sits in one hierarchy: the directory new cgroups are created in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hierarchy {
    pub kind: CgroupKind,
    pub base: PathBuf,
}

impl Hierarchy {
    /// Finds the hierarchy's mount and cosched's cgroup in it, from `/proc/self/{mounts,cgroup}`.
    pub fn find(kind: CgroupKind) -> Result<Hierarchy, CgroupError> {
        let read = |path: &str| {
            fs::read_to_string(path).map_err(|source| CgroupError::Proc {
                path: path.into(),
                source,
            })
        };
        let mounts = read("/proc/self/mounts")?;
        let own = read("/proc/self/cgroup")?;
        let (mount, relative) = match kind {
            CgroupKind::V2 => {
                let mount = mount_point(&mounts, |fstype, _| fstype == "cgroup2")
                    .ok_or(CgroupError::NoCgroup2)?;
                (mount, own_path(&own, |id, _| id == "0"))
            }
            CgroupKind::V1Cpuset | CgroupKind::V1Freezer | CgroupKind::V1Memory => {
                let controller = match kind {
                    CgroupKind::V1Cpuset => "cpuset",
                    CgroupKind::V1Freezer => "freezer",
                    _ => "memory",
                };
                let mount = mount_point(&mounts, |fstype, options| {
                    fstype == "cgroup" && options.split(',').any(|o| o == controller)
                })
                .ok_or(CgroupError::NoV1Hierarchy { controller })?;
                (
                    mount,
                    own_path(&own, |_, controllers| {
                        controllers.split(',').any(|c| c == controller)
                    }),
                )
            }
        };
        let relative = relative.ok_or(CgroupError::NotInHierarchy { kind })?;
        Ok(Hierarchy {
            kind,
            base: mount.join(outside_leaf(&relative).trim_start_matches('/')),
        })
    }

    /// Checks that cgroups can be created here and have the files the executor needs.
    pub fn probe(&self, needs_cpuset: bool) -> Result<(), CgroupError> {
        if needs_cpuset && self.kind == CgroupKind::V2 {
            self.enable_v2_cpuset()?;
        }
        let dir = self
            .base
            .join(format!("cosched-{}-probe", std::process::id()));
        fs::create_dir(&dir).map_err(|source| CgroupError::Create {
            kind: self.kind,
            base: self.base.clone(),
            source,
        })?;
        let wanted: Vec<&'static str> = match self.kind {
            CgroupKind::V2 if needs_cpuset => vec!["cgroup.freeze", "cpuset.cpus"],
            CgroupKind::V2 => vec!["cgroup.freeze"],
            CgroupKind::V1Cpuset => vec!["cpuset.cpus", "cpuset.mems"],
            CgroupKind::V1Freezer => vec!["freezer.state"],
            CgroupKind::V1Memory => vec!["memory.limit_in_bytes"],
        };
        let missing: Vec<&'static str> = wanted
            .into_iter()
            .filter(|f| !dir.join(f).exists())
            .collect();
        let _ = fs::remove_dir(&dir);
        if missing.is_empty() {
            Ok(())
        } else {
            Err(CgroupError::MissingFiles {
                kind: self.kind,
                base: self.base.clone(),
                missing,
            })
        }
    }

    fn enable_v2_cpuset(&self) -> Result<(), CgroupError> {
        self.enable_v2_controller("cpuset", std::process::id(), |base, available| {
            CgroupError::CpusetNotDelegated { base, available }
        })
    }

    /// Enables the memory controller for the cgroups created here (cgroup v2), so that a job's
    /// cgroup has `memory.max`; fails where it is not delegated, or where cosched's own cgroup holds
    /// processes other than cosched (cgroup v2 keeps memory out of such a cgroup's children).
    pub fn enable_v2_memory(&self) -> Result<(), CgroupError> {
        self.enable_v2_controller("memory", std::process::id(), |base, available| {
            CgroupError::MemoryNotDelegated { base, available }
        })
    }

    /// Enables `controller` for the cgroups created here; where cosched's own cgroup holds
    /// processes, `process` (this one, outside tests) first moves into [`LEAF`].
    fn enable_v2_controller(
        &self,
        controller: &'static str,
        process: u32,
        not_delegated: impl FnOnce(PathBuf, String) -> CgroupError,
    ) -> Result<(), CgroupError> {
        let controllers =
            fs::read_to_string(self.base.join("cgroup.controllers")).unwrap_or_default();
        if !controllers.split_whitespace().any(|c| c == controller) {
            let available = match controllers.trim() {
                "" => "none".into(),
                list => list.into(),
            };
            return Err(not_delegated(self.base.clone(), available));
        }
        let subtree = self.base.join("cgroup.subtree_control");
        let enabled = fs::read_to_string(&subtree).unwrap_or_default();
        if enabled.split_whitespace().any(|c| c == controller) {
            return Ok(());
        }
        let enable = || fs::write(&subtree, format!("+{controller}"));
        let enabled = match enable() {
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
                self.move_to_leaf(process)?;
                enable()
            }
            done => done,
        };
        enabled.map_err(|source| match source.raw_os_error() {
            Some(libc::EBUSY) => {
                let pids = self.processes();
                // Others hold the cgroup too: the move gained nothing, so cosched goes back.
                let _ = fs::write(self.base.join("cgroup.procs"), process.to_string());
                let _ = fs::remove_dir(self.base.join(LEAF));
                CgroupError::HoldsProcesses {
                    controller,
                    base: self.base.clone(),
                    pids,
                }
            }
            _ => CgroupError::ControllerNotEnabled {
                controller,
                subtree,
                source,
            },
        })
    }

    /// Moves `process` out of cosched's own cgroup into [`LEAF`] below it.
    fn move_to_leaf(&self, process: u32) -> Result<(), CgroupError> {
        let leaf = self.base.join(LEAF);
        let moved = match fs::create_dir(&leaf) {
            Err(e) if e.kind() != io::ErrorKind::AlreadyExists => Err(e),
            _ => fs::write(leaf.join("cgroup.procs"), process.to_string()),
        };
        moved.map_err(|source| CgroupError::Create {
            kind: self.kind,
            base: self.base.clone(),
            source,
        })
    }

    /// The processes in cosched's own cgroup, as `cgroup.procs` lists them.
    fn processes(&self) -> String {
        let procs = fs::read_to_string(self.base.join("cgroup.procs")).unwrap_or_default();
        procs.split_whitespace().collect::<Vec<_>>().join(", ")
    }

    /// Creates a job's cgroup; a cpuset cgroup gets its CPUs and memory nodes before any task joins.
    pub fn create(&self, name: &str, cpus: &CpuSet, mems: &CpuSet) -> io::Result<Cgroup> {
        let cgroup = Cgroup {
            kind: self.kind,
            dir: self.base.join(name),
        };
        fs::create_dir(&cgroup.dir).map_err(|e| context(e, "create cgroup", &cgroup.dir))?;
        if self.kind == CgroupKind::V1Cpuset {
            let parent_mems: CpuSet = read_list(&self.base.join("cpuset.mems"))?;
            let mems = match mems.intersection(&parent_mems) {
                m if m.is_empty() => parent_mems,
                m => m,
            };
            cgroup.write("cpuset.mems", &mems.to_string())?;
        }
        if self.kind == CgroupKind::V1Cpuset || cgroup.has_cpuset() {
            cgroup.set_cpus(cpus)?;
        }
        Ok(cgroup)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cgroup {
    pub kind: CgroupKind,
    pub dir: PathBuf,
}

impl Cgroup {
    pub fn procs_file(&self) -> PathBuf {
        self.dir.join("cgroup.procs")
    }

    fn has_cpuset(&self) -> bool {
        self.kind == CgroupKind::V1Cpuset || self.dir.join("cpuset.cpus").exists()
    }

    pub fn set_cpus(&self, cpus: &CpuSet) -> io::Result<()> {
        self.write("cpuset.cpus", &cpus.to_string())
    }

    pub fn set_frozen(&self, frozen: bool) -> io::Result<()> {
        if let Some((file, on, off)) = self.kind.freeze_file() {
            self.write(file, if frozen { on } else { off })?;
        }
        Ok(())
    }

    /// Limits the memory of the cgroup's processes to `bytes` (beyond it the kernel reclaims, then
    /// kills one of them: an OOM kill).
    pub fn set_memory_limit(&self, bytes: u64) -> io::Result<()> {
        match self.kind {
            CgroupKind::V2 => self.write("memory.max", &bytes.to_string()),
            _ => self.write("memory.limit_in_bytes", &bytes.to_string()),
        }
    }

    /// The most memory the cgroup's processes held at once, in bytes, where the kernel keeps it
    /// (`memory.peak`, cgroup v2 from Linux 5.19; `memory.max_usage_in_bytes`, v1).
    pub fn memory_peak(&self) -> Option<u64> {
        let file = match self.kind {
            CgroupKind::V2 => "memory.peak",
            _ => "memory.max_usage_in_bytes",
        };
        fs::read_to_string(self.dir.join(file))
            .ok()?
            .trim()
            .parse()
            .ok()
    }

    /// How many of the cgroup's processes the kernel killed for passing its memory limit.
    pub fn oom_kills(&self) -> u64 {
        let file = match self.kind {
            CgroupKind::V2 => "memory.events",
            _ => "memory.oom_control",
        };
        let text = fs::read_to_string(self.dir.join(file)).unwrap_or_default();
        text.lines()
            .filter_map(|line| line.strip_prefix("oom_kill "))
            .find_map(|n| n.trim().parse().ok())
            .unwrap_or(0)
    }

    /// Processes in the cgroup now.
    pub fn pids(&self) -> Vec<i32> {
        fs::read_to_string(self.procs_file())
            .map(|text| text.lines().filter_map(|l| l.trim().parse().ok()).collect())
            .unwrap_or_default()
    }

    /// Removes the cgroup; fails with EBUSY while processes remain.
    pub fn remove(&self) -> io::Result<()> {
        match fs::remove_dir(&self.dir) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            other => other,
        }
    }

    fn write(&self, file: &str, value: &str) -> io::Result<()> {
        let path = self.dir.join(file);
        fs::write(&path, value).map_err(|e| context(e, &format!("write {value:?} to"), &path))
    }
}

fn read_list(path: &Path) -> io::Result<CpuSet> {
    let text = fs::read_to_string(path).map_err(|e| context(e, "read", path))?;
    text.trim()
        .parse()
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

fn context(e: io::Error, what: &str, path: &Path) -> io::Error {
    io::Error::new(e.kind(), format!("cannot {what} {}: {e}", path.display()))
}

fn mount_point(mounts: &str, matches: impl Fn(&str, &str) -> bool) -> Option<PathBuf> {
    mounts.lines().find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        match fields.as_slice() {
            [_, dir, fstype, options, ..] if matches(fstype, options) => {
                Some(PathBuf::from(dir.replace("\\040", " ")))
            }
            _ => None,
        }
    })
}

/// Cosched's own cgroup from the one it is in: a process that moved into the [`LEAF`] still
/// creates jobs' cgroups beside it.
fn outside_leaf(path: &str) -> &str {
    match path.rsplit_once('/') {
        Some((parent, LEAF)) => parent,
        _ => path,
    }
}

/// The path in `/proc/self/cgroup` (lines `id:controllers:path`) of the first line that matches.
fn own_path(text: &str, matches: impl Fn(&str, &str) -> bool) -> Option<String> {
    text.lines().find_map(|line| {
        let mut parts = line.splitn(3, ':');
        let (id, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        matches(id, controllers).then(|| path.to_string())
    })
}

/// The CPUs of the cpuset cgroup process `pid` is in (its allocation, where a batch system confines
/// it): `cpuset.cpus` in the v1 cpuset hierarchy, else `cpuset.cpus.effective` in cgroup v2, read from
/// the cgroup itself or its nearest ancestor that has the file. `None` when neither can be read.
pub fn cpuset_of(pid: i32) -> Option<CpuSet> {
    let mounts = fs::read_to_string("/proc/self/mounts").ok()?;
    let theirs = fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    let v1 = mount_point(&mounts, |fstype, options| {
        fstype == "cgroup" && options.split(',').any(|o| o == "cpuset")
    })
    .zip(own_path(&theirs, |_, c| {
        c.split(',').any(|x| x == "cpuset")
    }))
    .map(|found| (found, "cpuset.cpus"));
    let v2 = || {
        mount_point(&mounts, |fstype, _| fstype == "cgroup2")
            .zip(own_path(&theirs, |id, _| id == "0"))
            .map(|found| (found, "cpuset.cpus.effective"))
    };
    let ((mount, relative), file) = v1.or_else(v2)?;
    let dir = mount.join(relative.trim_start_matches('/'));
    dir.ancestors()
        .take_while(|d| d.starts_with(&mount))
        .find_map(|d| read_list(&d.join(file)).ok().filter(|c| !c.is_empty()))
}

/// The first limit that another cgroup manager (systemd, a container, a batch system) holds process
/// `pid` to, in a hierarchy cosched would move it out of, said for a user: a cpuset narrower than
/// the online CPUs, or, in cgroup v2, a `memory.max`, `memory.high`, `pids.max` or `cpu.max` set on
/// its cgroup or an ancestor. `None` when nothing limits it.
pub fn limit_of(pid: i32) -> Option<String> {
    let online = read_list(Path::new("/sys/devices/system/cpu/online")).ok();
    if let (Some(cpus), Some(online)) = (cpuset_of(pid), online) {
        if cpus != online {
            return Some(format!("its cpuset allows CPUs {cpus} only"));
        }
    }
    let mounts = fs::read_to_string("/proc/self/mounts").ok()?;
    let theirs = fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    let mount = mount_point(&mounts, |fstype, _| fstype == "cgroup2")?;
    let relative = own_path(&theirs, |id, _| id == "0")?;
    let dir = mount.join(relative.trim_start_matches('/'));
    let cgroups = dir
        .ancestors()
        .take_while(|d| d.starts_with(&mount) && *d != mount);
    for cgroup in cgroups {
        for file in ["memory.max", "memory.high", "pids.max", "cpu.max"] {
            let Ok(value) = fs::read_to_string(cgroup.join(file)) else {
                continue;
            };
            let value = value.trim();
            if value != "max" && !value.starts_with("max ") {
                return Some(format!("{file} is {value} in {}", cgroup.display()));
            }
        }
    }
    None
}

/// NUMA nodes holding any of `cpus`, from sysfs (empty when the machine exposes no nodes).
pub fn numa_nodes_of(cpus: &CpuSet) -> CpuSet {
    let Ok(entries) = fs::read_dir("/sys/devices/system/node") else {
        return CpuSet::new();
    };
    entries
        .flatten()
        .filter_map(|e| {
            let node: u32 = e.file_name().to_str()?.strip_prefix("node")?.parse().ok()?;
            let node_cpus = read_list(&e.path().join("cpulist")).ok()?;
            (!node_cpus.is_disjoint(cpus)).then_some(node)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const MOUNTS: &str = "cgroup /sys/fs/cgroup/cpuset cgroup rw,relatime,cpuset 0 0\n\
cgroup /sys/fs/cgroup/freezer cgroup rw,relatime,freezer 0 0\n\
cgroup2 /sys/fs/cgroup/unified cgroup2 rw,relatime 0 0\n";

    #[test]
    fn mounts_are_found_by_type_and_controller() {
        let freezer = mount_point(MOUNTS, |t, o| {
            t == "cgroup" && o.split(',').any(|c| c == "freezer")
        });
        assert_eq!(freezer, Some(PathBuf::from("/sys/fs/cgroup/freezer")));
        let v2 = mount_point(MOUNTS, |t, _| t == "cgroup2");
        assert_eq!(v2, Some(PathBuf::from("/sys/fs/cgroup/unified")));
    }

    #[test]
    fn a_process_cpuset_is_within_the_machine() {
        let me = std::process::id() as i32;
        if let Some(cpus) = cpuset_of(me) {
            let online: CpuSet = read_list(Path::new("/sys/devices/system/cpu/online")).unwrap();
            assert!(!cpus.is_empty() && cpus.is_subset(&online), "{cpus}");
        }
        assert_eq!(cpuset_of(-1), None);
    }

    #[test]
    fn a_hierarchy_that_cannot_hold_cgroups_names_its_place_and_cause() {
        let missing = Hierarchy {
            kind: CgroupKind::V1Freezer,
            base: PathBuf::from("/nonexistent/cosched"),
        };
        match missing.probe(false) {
            Err(CgroupError::Create { base, source, .. }) => {
                assert_eq!(base, missing.base);
                assert_eq!(source.kind(), io::ErrorKind::NotFound);
            }
            other => panic!("{other:?}"),
        }
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("cgroup.controllers"), "memory pids\n").unwrap();
        let undelegated = Hierarchy {
            kind: CgroupKind::V2,
            base: dir.path().to_path_buf(),
        };
        match undelegated.probe(true) {
            Err(CgroupError::CpusetNotDelegated { available, .. }) => {
                assert_eq!(available, "memory pids")
            }
            other => panic!("{other:?}"),
        }
    }

    /// A cgroup2 hierarchy for a test, mounted here if the machine has none (a cgroup v1 host), and
    /// one controller its root can give to children; `None` without root or such a controller.
    struct Cgroup2 {
        root: PathBuf,
        controller: String,
        mounted: Option<tempfile::TempDir>,
    }

    impl Cgroup2 {
        fn new() -> Option<Cgroup2> {
            if !nix::unistd::geteuid().is_root() {
                return None;
            }
            let mounts = fs::read_to_string("/proc/self/mounts").ok()?;
            let (root, mounted) = match mount_point(&mounts, |fstype, _| fstype == "cgroup2") {
                Some(root) => (root, None),
                None => {
                    let dir = tempfile::tempdir().ok()?;
                    let mount = std::process::Command::new("mount")
                        .args(["-t", "cgroup2", "none"])
                        .arg(dir.path())
                        .status();
                    if !mount.is_ok_and(|status| status.success()) {
                        return None;
                    }
                    (dir.path().to_path_buf(), Some(dir))
                }
            };
            let controllers = fs::read_to_string(root.join("cgroup.controllers")).ok()?;
            let controller = controllers.split_whitespace().next()?.to_string();
            let cgroup2 = Cgroup2 {
                root,
                controller,
                mounted,
            };
            fs::write(
                cgroup2.root.join("cgroup.subtree_control"),
                format!("+{}", cgroup2.controller),
            )
            .ok()?;
            Some(cgroup2)
        }
    }

    impl Drop for Cgroup2 {
        fn drop(&mut self) {
            if let Some(dir) = &self.mounted {
                let _ = std::process::Command::new("umount")
                    .arg(dir.path())
                    .status();
            }
        }
    }

    fn cgroup_of(pid: u32) -> String {
        let text = fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap();
        own_path(&text, |id, _| id == "0").unwrap()
    }

    #[test]
    fn a_cgroup_holding_cosched_gives_its_children_a_controller_once_cosched_is_in_a_leaf() {
        let Some(cgroup2) = Cgroup2::new() else {
            eprintln!("SKIPPED: needs root and a cgroup2 controller free for a test cgroup");
            return;
        };
        let name = format!("cosched-test-leaf-{}", std::process::id());
        let base = cgroup2.root.join(&name);
        fs::create_dir(&base).unwrap();
        let sleep = || {
            std::process::Command::new("sleep")
                .arg("30")
                .spawn()
                .unwrap()
        };
        // `daemon` stands for cosched, started by systemd in its unit's cgroup.
        let (mut daemon, mut other) = (sleep(), sleep());
        let join = |child: &std::process::Child| {
            fs::write(base.join("cgroup.procs"), child.id().to_string()).unwrap()
        };
        join(&daemon);
        let own = Hierarchy {
            kind: CgroupKind::V2,
            base: base.clone(),
        };
        let controller: &'static str = cgroup2.controller.clone().leak();
        let enable = |process| {
            own.enable_v2_controller(controller, process, |base, available| {
                CgroupError::MemoryNotDelegated { base, available }
            })
        };
        let enabled = enable(daemon.id());
        let subtree = fs::read_to_string(base.join("cgroup.subtree_control")).unwrap();
        let daemon_cgroup = cgroup_of(daemon.id());
        // A process that is not cosched's keeps its cgroup from giving the controller.
        fs::write(
            base.join("cgroup.subtree_control"),
            format!("-{controller}"),
        )
        .unwrap();
        join(&other);
        let refused = enable(daemon.id());
        let daemon_refused_cgroup = cgroup_of(daemon.id());
        for child in [&mut daemon, &mut other] {
            child.kill().unwrap();
            child.wait().unwrap();
        }
        // Left where a failed step never made the leaf; the assertions below say which.
        let _ = fs::remove_dir(base.join(LEAF));
        let _ = fs::remove_dir(&base);

        enabled.unwrap();
        assert!(
            subtree.split_whitespace().any(|c| c == controller),
            "{subtree}"
        );
        assert!(
            daemon_cgroup.ends_with(&format!("/{name}/{LEAF}")),
            "{daemon_cgroup}"
        );
        assert_eq!(outside_leaf(&daemon_cgroup), format!("/{name}"));
        assert_eq!(daemon_refused_cgroup, format!("/{name}"));
        match refused {
            Err(e @ CgroupError::HoldsProcesses { .. }) => {
                let message = e.to_string();
                let CgroupError::HoldsProcesses { pids, .. } = e else {
                    unreachable!()
                };
                assert_eq!(pids, other.id().to_string(), "{message}");
                assert!(message.contains("systemd-run --scope"), "{message}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn own_cgroup_paths_are_read_per_controller() {
        let text = "6:freezer:/a\n4:memory:/m\n3:cpuset,cpu:/b/c\n0::/user.slice\n";
        assert_eq!(
            own_path(text, |_, c| c.split(',').any(|x| x == "cpuset")),
            Some("/b/c".into())
        );
        assert_eq!(
            own_path(text, |id, _| id == "0"),
            Some("/user.slice".into())
        );
    }
}
