//! Waiting and timers: the executor's clock, and sleeping until an absolute deadline or until a job
//! exits, a signal arrives or a job source has news, whichever comes first.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// Seconds on the monotonic clock.
pub fn monotonic() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

/// Seconds since the Unix epoch, wall-clock.
pub fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// CPU seconds the calling thread has used.
pub fn thread_cpu_seconds() -> f64 {
    // SAFETY: getrusage only writes into the struct.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut usage) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

/// A descriptor that becomes readable when process `pid` ends (it need not be our child).
pub fn pidfd_open(pid: i32) -> Option<OwnedFd> {
    // SAFETY: plain system call; a returned descriptor is owned.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// Sleeps on an absolute-deadline timerfd: late wake-ups do not accumulate into drift.
pub struct Sleeper {
    timerfd: OwnedFd,
}

impl Sleeper {
    pub fn new() -> io::Result<Sleeper> {
        // SAFETY: plain system call; the descriptor is owned below.
        let fd = unsafe {
            libc::timerfd_create(
                libc::CLOCK_MONOTONIC,
                libc::TFD_CLOEXEC | libc::TFD_NONBLOCK,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Sleeper {
            timerfd: unsafe { OwnedFd::from_raw_fd(fd) },
        })
    }

    /// Sleeps until monotonic time `at` or until one of `fds` is readable.
    pub fn sleep_until(&self, at: f64, fds: &[RawFd]) {
        let at = at.max(1e-9);
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: libc::timespec {
                tv_sec: at.trunc() as libc::time_t,
                tv_nsec: ((at.fract() * 1e9) as libc::c_long).clamp(0, 999_999_999),
            },
        };
        // SAFETY: valid descriptor and itimerspec.
        unsafe {
            libc::timerfd_settime(
                self.timerfd.as_raw_fd(),
                libc::TFD_TIMER_ABSTIME,
                &spec,
                std::ptr::null_mut(),
            )
        };
        let mut polled: Vec<libc::pollfd> = std::iter::once(self.timerfd.as_raw_fd())
            .chain(fds.iter().copied())
            .map(|fd| libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        // SAFETY: polled is a valid array of pollfd.
        unsafe { libc::poll(polled.as_mut_ptr(), polled.len() as libc::nfds_t, -1) };
        let mut expirations = 0u64;
        // SAFETY: reading the 8-byte expiration count of a non-blocking timerfd.
        unsafe {
            libc::read(
                self.timerfd.as_raw_fd(),
                (&mut expirations as *mut u64).cast(),
                8,
            );
        }
    }
}
