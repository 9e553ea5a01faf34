//! Ctrl-C, SIGTERM and SIGHUP end a run cleanly instead of killing cosched on the spot.
//!
//! While at least one run is active, handlers for these signals record the signal and wake every active
//! run through its eventfd (write(2) is async-signal-safe). The previous handlers come back when the last
//! run ends, so the rest of the program keeps its usual behaviour.

use std::io;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Mutex;

const SIGNALS: [libc::c_int; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];
const MAX_RUNS: usize = 64;

/// Eventfds of active runs; -1 = free.
static WAKE_FDS: [AtomicI32; MAX_RUNS] = [const { AtomicI32::new(-1) }; MAX_RUNS];
/// The last signal received while runs were active; 0 = none.
static RECEIVED: AtomicI32 = AtomicI32::new(0);

struct Installed {
    runs: usize,
    previous: Vec<libc::sigaction>,
}

static INSTALLED: Mutex<Installed> = Mutex::new(Installed {
    runs: 0,
    previous: Vec::new(),
});

extern "C" fn on_signal(signal: libc::c_int) {
    RECEIVED.store(signal, Ordering::SeqCst);
    let one: u64 = 1;
    for fd in &WAKE_FDS {
        let fd = fd.load(Ordering::SeqCst);
        if fd >= 0 {
            // SAFETY: write is async-signal-safe; a full eventfd only fails with EAGAIN.
            unsafe { libc::write(fd, (&one as *const u64).cast(), 8) };
        }
    }
}

/// Registration of one run; the eventfd becomes readable when a signal arrives.
pub struct Interrupts {
    fd: libc::c_int,
    index: usize,
}

impl Interrupts {
    pub fn register() -> io::Result<Interrupts> {
        // SAFETY: plain system call.
        let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let mut installed = INSTALLED.lock().unwrap_or_else(|p| p.into_inner());
        let Some(index) = WAKE_FDS.iter().position(|slot| {
            slot.compare_exchange(-1, fd, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok()
        }) else {
            unsafe { libc::close(fd) };
            return Err(io::Error::other(format!(
                "more than {MAX_RUNS} runs at once in one process"
            )));
        };
        if installed.runs == 0 {
            RECEIVED.store(0, Ordering::SeqCst);
            installed.previous = SIGNALS
                .iter()
                .map(|&signal| unsafe {
                    let mut action: libc::sigaction = std::mem::zeroed();
                    action.sa_sigaction = on_signal as *const () as usize;
                    action.sa_flags = libc::SA_RESTART;
                    let mut previous: libc::sigaction = std::mem::zeroed();
                    libc::sigaction(signal, &action, &mut previous);
                    previous
                })
                .collect();
        }
        installed.runs += 1;
        Ok(Interrupts { fd, index })
    }

    pub fn fd(&self) -> libc::c_int {
        self.fd
    }

    /// The signal that asked the run to stop, if one came.
    pub fn received(&self) -> Option<&'static str> {
        match RECEIVED.load(Ordering::SeqCst) {
            libc::SIGINT => Some("SIGINT (Ctrl-C)"),
            libc::SIGTERM => Some("SIGTERM"),
            libc::SIGHUP => Some("SIGHUP"),
            _ => None,
        }
    }
}

impl Drop for Interrupts {
    fn drop(&mut self) {
        let mut installed = INSTALLED.lock().unwrap_or_else(|p| p.into_inner());
        WAKE_FDS[self.index].store(-1, Ordering::SeqCst);
        unsafe { libc::close(self.fd) };
        installed.runs -= 1;
        if installed.runs == 0 {
            for (signal, previous) in SIGNALS.iter().zip(&installed.previous) {
                unsafe { libc::sigaction(*signal, previous, std::ptr::null_mut()) };
            }
        }
    }
}
