//! What procfs says about a job's processes: their process group, state, CPU time and threads.

use std::fs;
use std::io;

/// The fields of `/proc/<pid>/stat` the executor uses.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProcStat {
    pub pid: i32,
    /// One-letter state: `R`, `S`, `D`, `T` (stopped), `t` (traced), `Z`, …
    pub state: char,
    pub ppid: i32,
    pub pgid: i32,
    /// User + system time of all threads, live and exited, in clock ticks.
    pub cpu_ticks: u64,
    /// User + system time of waited-for children, in clock ticks.
    pub children_ticks: u64,
    pub num_threads: u32,
    /// Clock ticks after boot at which the process started: with the pid, it names one process.
    pub start_ticks: u64,
}

impl ProcStat {
    pub fn cpu_seconds(&self) -> f64 {
        (self.cpu_ticks + self.children_ticks) as f64 / clock_ticks_per_second()
    }
}

/// The machine's memory in bytes (`MemTotal` of /proc/meminfo).
pub fn memory_total() -> io::Result<u64> {
    let meminfo = fs::read_to_string("/proc/meminfo")?;
    let kib = meminfo
        .lines()
        .find_map(|line| line.strip_prefix("MemTotal:"))
        .and_then(|rest| {
            rest.trim()
                .trim_end_matches("kB")
                .trim()
                .parse::<u64>()
                .ok()
        });
    kib.map(|kib| kib << 10)
        .ok_or_else(|| io::Error::other("/proc/meminfo has no MemTotal line"))
}

pub fn stat(pid: i32) -> io::Result<ProcStat> {
    parse_stat(&fs::read_to_string(format!("/proc/{pid}/stat"))?)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "malformed /proc/<pid>/stat"))
}

/// Parses a stat line (as `/proc/<pid>/stat` holds it, or a copy a script printed); the command name
/// is in parentheses and may itself contain spaces and `)`.
pub fn parse_stat(text: &str) -> Option<ProcStat> {
    let (head, rest) = text.rsplit_once(')')?;
    let pid = head.split_once('(')?.0.trim().parse().ok()?;
    // Fields after the name, numbered from 3 (state) as in proc(5).
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let field = |n: usize| fields.get(n - 3).copied();
    let number = |n: usize| field(n)?.parse::<u64>().ok();
    Some(ProcStat {
        pid,
        state: field(3)?.chars().next()?,
        ppid: field(4)?.parse().ok()?,
        pgid: field(5)?.parse().ok()?,
        cpu_ticks: number(14)? + number(15)?,
        children_ticks: number(16)? + number(17)?,
        num_threads: field(20)?.parse().ok()?,
        start_ticks: number(22)?,
    })
}

pub fn clock_ticks_per_second() -> f64 {
    match nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK) {
        Ok(Some(ticks)) if ticks > 0 => ticks as f64,
        _ => 100.0,
    }
}

/// Every process on the machine, as far as it can be read (processes exit while we look).
pub fn all_processes() -> Vec<ProcStat> {
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(|pid| stat(pid).ok())
        .collect()
}

/// The parent, grandparent, … of `pid` up to the first process (which has parent 0).
pub fn ancestors(pid: i32) -> Vec<i32> {
    let mut chain = Vec::new();
    let mut at = pid;
    // A parent always starts before its child, so the chain ends; the bound guards a racing /proc.
    while let Ok(s) = stat(at) {
        if s.ppid <= 0 || chain.len() > 4096 {
            break;
        }
        chain.push(s.ppid);
        at = s.ppid;
    }
    chain
}

/// The real, effective, saved and filesystem uids of a process (`Uid:` of `/proc/<pid>/status`).
pub fn uids(pid: i32) -> io::Result<[u32; 4]> {
    let status = fs::read_to_string(format!("/proc/{pid}/status"))?;
    let malformed = || io::Error::new(io::ErrorKind::InvalidData, "malformed /proc/<pid>/status");
    let line = status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .ok_or_else(malformed)?;
    let ids: Vec<u32> = line
        .split_whitespace()
        .filter_map(|u| u.parse().ok())
        .collect();
    ids.try_into().map_err(|_| malformed())
}

/// The most memory a process has held resident since its last exec, in bytes (`VmHWM:` of
/// `/proc/<pid>/status`); `None` for a process gone or ended.
pub fn resident_peak(pid: i32) -> Option<u64> {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kib = status.lines().find_map(|l| l.strip_prefix("VmHWM:"))?;
    let kib: u64 = kib.trim().trim_end_matches("kB").trim().parse().ok()?;
    Some(kib << 10)
}

/// Thread ids of a process.
pub fn threads(pid: i32) -> Vec<i32> {
    let Ok(entries) = fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_with_spaces_and_parentheses_parse() {
        let line =
            "1234 (my (odd) prog) T 1 1230 1230 0 -1 4194560 100 0 0 0 250 50 7 3 20 0 2 0 98765 0";
        let stat = parse_stat(line).unwrap();
        assert_eq!(
            (stat.pid, stat.state, stat.ppid, stat.pgid),
            (1234, 'T', 1, 1230)
        );
        assert_eq!((stat.cpu_ticks, stat.children_ticks), (300, 10));
        assert_eq!(stat.num_threads, 2);
        assert_eq!(stat.start_ticks, 98765);
    }

    #[test]
    fn own_process_is_found_with_its_threads() {
        let me = std::process::id() as i32;
        let own = stat(me).unwrap();
        assert_eq!(own.pid, me);
        assert!(all_processes().iter().any(|p| p.pid == me));
        assert!(threads(me).contains(&me));
        let me_uid = nix::unistd::getuid().as_raw();
        assert_eq!(uids(me).unwrap()[0], me_uid);
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        let chain = ancestors(child.id() as i32);
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(chain.first(), Some(&me), "{chain:?}");
    }
}
