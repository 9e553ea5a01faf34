//! Ctrl-C, SIGTERM and SIGHUP end a run cleanly instead of killing cosched on the spot.
//!
//! While at least one run is active, handlers for these signals record the signal and wake every active
//! run through its eventfd (write(2) is async-signal-safe). The previous handlers come back when the last
//! run ends, so the rest of the program keeps its usual behaviour.

use nix::sys::eventfd::{EfdFlags, EventFd};
use nix::sys::signal::{self, SaFlags, SigAction, SigHandler, SigSet, Signal};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Mutex;

const SIGNALS: [Signal; 3] = [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP];
const MAX_RUNS: usize = 64;

/// Eventfds of active runs; -1 = free.
static WAKE_FDS: [AtomicI32; MAX_RUNS] = [const { AtomicI32::new(-1) }; MAX_RUNS];
/// The last signal received while runs were active; 0 = none.
static RECEIVED: AtomicI32 = AtomicI32::new(0);

struct Installed {
    runs: usize,
    previous: Vec<SigAction>,
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
            // A handler can only reach the descriptors through their numbers.
            // SAFETY: write is async-signal-safe and reads 8 bytes from `one`; a slot holds a
            // descriptor only while its run's EventFd is open, and a full eventfd only fails.
            unsafe { libc::write(fd, (&one as *const u64).cast(), 8) };
        }
    }
}

/// Installs `action` for `signal`, returning the one it replaces.
fn swap_action(signal: Signal, action: &SigAction) -> io::Result<SigAction> {
    // SAFETY: the actions installed are either `on_signal`, which only touches atomics and calls
    // write(2), or the actions that were installed before, given back as they were.
    unsafe { signal::sigaction(signal, action) }.map_err(io::Error::from)
}

/// Registration of one run; the eventfd becomes readable when a signal arrives.
pub struct Interrupts {
    wake: EventFd,
    index: usize,
}

impl Interrupts {
    pub fn register() -> io::Result<Interrupts> {
        let wake =
            EventFd::from_value_and_flags(0, EfdFlags::EFD_CLOEXEC | EfdFlags::EFD_NONBLOCK)?;
        let mut installed = INSTALLED.lock().unwrap_or_else(|p| p.into_inner());
        let Some(index) = WAKE_FDS.iter().position(|slot| {
            slot.compare_exchange(-1, wake.as_raw_fd(), Ordering::SeqCst, Ordering::SeqCst)
                .is_ok()
        }) else {
            return Err(io::Error::other(format!(
                "more than {MAX_RUNS} runs at once in one process"
            )));
        };
        if installed.runs == 0 {
            RECEIVED.store(0, Ordering::SeqCst);
            let action = SigAction::new(
                SigHandler::Handler(on_signal),
                SaFlags::SA_RESTART,
                SigSet::empty(),
            );
            let mut previous = Vec::with_capacity(SIGNALS.len());
            for signal in SIGNALS {
                match swap_action(signal, &action) {
                    Ok(replaced) => previous.push(replaced),
                    Err(e) => {
                        for (signal, replaced) in SIGNALS.into_iter().zip(&previous) {
                            let _ = swap_action(signal, replaced);
                        }
                        WAKE_FDS[index].store(-1, Ordering::SeqCst);
                        return Err(e);
                    }
                }
            }
            installed.previous = previous;
        }
        installed.runs += 1;
        Ok(Interrupts { wake, index })
    }

    pub fn fd(&self) -> BorrowedFd<'_> {
        self.wake.as_fd()
    }

    /// The signal that asked the run to stop, if one came.
    pub fn received(&self) -> Option<&'static str> {
        match Signal::try_from(RECEIVED.load(Ordering::SeqCst)) {
            Ok(Signal::SIGINT) => Some("SIGINT (Ctrl-C)"),
            Ok(Signal::SIGTERM) => Some("SIGTERM"),
            Ok(Signal::SIGHUP) => Some("SIGHUP"),
            _ => None,
        }
    }
}

impl Drop for Interrupts {
    fn drop(&mut self) {
        let mut installed = INSTALLED.lock().unwrap_or_else(|p| p.into_inner());
        // Freed before the EventFd closes, so a handler never writes to a reused descriptor number.
        WAKE_FDS[self.index].store(-1, Ordering::SeqCst);
        installed.runs -= 1;
        if installed.runs == 0 {
            for (signal, previous) in SIGNALS.into_iter().zip(&installed.previous) {
                let _ = swap_action(signal, previous);
            }
        }
    }
}
