//! Waiting in tests on what they observe, never for a fixed time: [`until`] a condition holds, within
//! a deadline, and [`stays_false_for`] a stated time, where a test checks that something does not
//! happen. Both look at their condition every [`POLL`] on this machine's clock; a [`Wait`] looks less
//! often, or on another [`Clock`] (their own tests move one by hand).

use std::time::{Duration, Instant};

/// How often a condition is looked at.
pub const POLL: Duration = Duration::from_millis(10);

/// The time a wait reads and passes.
pub trait Clock {
    /// Time since some fixed moment.
    fn now(&self) -> Duration;
    /// Lets `time` pass.
    fn pause(&self, time: Duration);
}

impl<C: Clock> Clock for &C {
    fn now(&self) -> Duration {
        (**self).now()
    }

    fn pause(&self, time: Duration) {
        (**self).pause(time)
    }
}

/// The monotonic clock of this machine.
pub struct Monotonic(Instant);

impl Default for Monotonic {
    fn default() -> Monotonic {
        Monotonic(Instant::now())
    }
}

impl Clock for Monotonic {
    fn now(&self) -> Duration {
        self.0.elapsed()
    }

    fn pause(&self, time: Duration) {
        // The one fixed sleep of the waits: what they wait for sends no signal to block on (a file,
        // a process state, a daemon's answer), so they look again after a poll interval.
        std::thread::sleep(time);
    }
}

/// Whether `done` holds before `limit` passes, looked at every [`POLL`] and once more at the
/// deadline.
pub fn until(limit: Duration, done: impl FnMut() -> bool) -> bool {
    Wait::default().until(limit, done)
}

/// Whether `happened` stays false for all of `time`, looked at every [`POLL`] and once at the end:
/// for a test that checks that something does not happen, where no event can say that it never
/// will. It returns as soon as `happened` holds.
pub fn stays_false_for(time: Duration, happened: impl FnMut() -> bool) -> bool {
    Wait::default().stays_false_for(time, happened)
}

/// How a wait looks at its condition: how often, on which clock.
pub struct Wait<C: Clock = Monotonic> {
    clock: C,
    every: Duration,
}

impl Default for Wait {
    fn default() -> Wait {
        Wait::on(Monotonic::default())
    }
}

impl<C: Clock> Wait<C> {
    /// Waits on `clock`, looking every [`POLL`].
    pub fn on(clock: C) -> Wait<C> {
        Wait { clock, every: POLL }
    }

    /// Looking every `every` instead: for a condition costly to look at (a command to run).
    pub fn every(self, every: Duration) -> Wait<C> {
        Wait { every, ..self }
    }

    /// [`until`], as this wait looks.
    pub fn until(&self, limit: Duration, mut done: impl FnMut() -> bool) -> bool {
        let deadline = self.clock.now() + limit;
        loop {
            if done() {
                return true;
            }
            let now = self.clock.now();
            if now >= deadline {
                return false;
            }
            self.clock.pause(self.every.min(deadline - now));
        }
    }

    /// [`stays_false_for`], as this wait looks.
    pub fn stays_false_for(&self, time: Duration, happened: impl FnMut() -> bool) -> bool {
        !self.until(time, happened)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::{Cell, RefCell};

    /// A clock that moves only when a wait pauses, and records each pause.
    #[derive(Default)]
    struct HandClock {
        now: Cell<Duration>,
        pauses: RefCell<Vec<Duration>>,
    }

    impl Clock for HandClock {
        fn now(&self) -> Duration {
            self.now.get()
        }

        fn pause(&self, time: Duration) {
            self.now.set(self.now.get() + time);
            self.pauses.borrow_mut().push(time);
        }
    }

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn until_returns_once_the_condition_holds_without_pausing_further() {
        let clock = HandClock::default();
        let held = Wait::on(&clock).until(1000 * MS, || clock.now() >= 35 * MS);
        assert!(held);
        assert_eq!(clock.now(), 40 * MS, "four polls of 10 ms");
    }

    #[test]
    fn until_gives_up_at_the_deadline_after_a_last_look() {
        let clock = HandClock::default();
        let mut looks = Vec::new();
        let held = Wait::on(&clock).until(25 * MS, || {
            looks.push(clock.now());
            false
        });
        assert!(!held);
        assert_eq!(*clock.pauses.borrow(), vec![10 * MS, 10 * MS, 5 * MS]);
        assert_eq!(looks, vec![Duration::ZERO, 10 * MS, 20 * MS, 25 * MS]);
    }

    #[test]
    fn until_holds_at_the_deadline_when_the_last_look_sees_it() {
        let clock = HandClock::default();
        assert!(Wait::on(&clock).until(25 * MS, || clock.now() == 25 * MS));
    }

    #[test]
    fn a_wait_looks_as_often_as_it_is_told() {
        let clock = HandClock::default();
        assert!(!Wait::on(&clock).every(30 * MS).until(70 * MS, || false));
        assert_eq!(*clock.pauses.borrow(), vec![30 * MS, 30 * MS, 10 * MS]);
    }

    #[test]
    fn stays_false_for_the_whole_time_when_nothing_happens() {
        let clock = HandClock::default();
        assert!(Wait::on(&clock).stays_false_for(100 * MS, || false));
        assert_eq!(clock.now(), 100 * MS);
    }

    #[test]
    fn stays_false_for_fails_as_soon_as_it_happens() {
        let clock = HandClock::default();
        assert!(!Wait::on(&clock).stays_false_for(100 * MS, || clock.now() >= 30 * MS));
        assert_eq!(clock.now(), 30 * MS);
    }
}
