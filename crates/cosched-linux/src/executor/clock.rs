//! Waiting and timers: the executor's clock, and sleeping until an absolute deadline or until a job
//! exits, a signal arrives or a job source has news, whichever comes first.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::resource::{getrusage, UsageWho};
use nix::sys::time::{TimeSpec, TimeValLike};
use nix::sys::timerfd::{ClockId, Expiration, TimerFd, TimerFlags, TimerSetTimeFlags};
use nix::time::clock_gettime;

/// Seconds on the monotonic clock.
pub fn monotonic() -> f64 {
    // CLOCK_MONOTONIC exists on every Linux the executor runs on, so the call cannot fail.
    let ts = clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC).unwrap_or(TimeSpec::zero());
    ts.tv_sec() as f64 + ts.tv_nsec() as f64 * 1e-9
}

/// Seconds since the Unix epoch, wall-clock.
pub fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// CPU seconds the calling thread has used.
pub fn thread_cpu_seconds() -> f64 {
    let Ok(usage) = getrusage(UsageWho::RUSAGE_THREAD) else {
        return 0.0;
    };
    let seconds = |t: nix::sys::time::TimeVal| t.tv_sec() as f64 + t.tv_usec() as f64 * 1e-6;
    seconds(usage.user_time()) + seconds(usage.system_time())
}

/// A descriptor that becomes readable when process `pid` ends (it need not be our child).
pub fn pidfd_open(pid: i32) -> Option<OwnedFd> {
    // nix has no pidfd_open.
    // SAFETY: the system call takes no pointers; a non-negative result is a new descriptor that
    // nothing else owns.
    unsafe {
        let fd = libc::syscall(libc::SYS_pidfd_open, pid, 0);
        (fd >= 0).then(|| OwnedFd::from_raw_fd(fd as i32))
    }
}

/// Sleeps on an absolute-deadline timerfd: late wake-ups do not accumulate into drift.
pub struct Sleeper {
    timerfd: TimerFd,
}

impl Sleeper {
    pub fn new() -> io::Result<Sleeper> {
        let timerfd = TimerFd::new(
            ClockId::CLOCK_MONOTONIC,
            TimerFlags::TFD_CLOEXEC | TimerFlags::TFD_NONBLOCK,
        )?;
        Ok(Sleeper { timerfd })
    }

    /// Sleeps until monotonic time `at` or until one of `fds` is readable.
    pub fn sleep_until(&self, at: f64, fds: &[BorrowedFd<'_>]) {
        // A zero expiry would disarm the timer instead of firing at once.
        let at = at.max(1e-9);
        let nanos = ((at.fract() * 1e9) as i64).clamp(0, 999_999_999);
        let deadline = TimeSpec::seconds(at.trunc() as i64) + TimeSpec::nanoseconds(nanos);
        let _ = self.timerfd.set(
            Expiration::OneShot(deadline),
            TimerSetTimeFlags::TFD_TIMER_ABSTIME,
        );
        let mut polled: Vec<PollFd> = std::iter::once(self.timerfd.as_fd())
            .chain(fds.iter().copied())
            .map(|fd| PollFd::new(fd, PollFlags::POLLIN))
            .collect();
        let _ = poll(&mut polled, PollTimeout::NONE);
        // Drains the expiration count so the next sleep polls a quiet timer; EAGAIN when it has
        // not fired is expected.
        let _ = nix::unistd::read(self.timerfd.as_fd().as_raw_fd(), &mut [0u8; 8]);
    }
}
