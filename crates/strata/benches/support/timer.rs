//! The benches' clock: wall clock, or with `STRATA_BENCH_CLOCK=cpu` the calling thread's
//! on-CPU time (`/proc/thread-self/schedstat`, Linux): on a shared machine it leaves out
//! the time the thread waited for a core (every contender times its own thread). Shared
//! by strata's benches and strata-bench's (`#[path]`), one copy.

use std::time::{Duration, Instant};

/// A phase being timed.
pub enum Timer {
    Wall(Instant),
    Cpu(u64),
}

/// The calling thread's on-CPU time so far, in nanoseconds.
pub fn thread_cpu_ns() -> Option<u64> {
    // The kernel brings the running thread's total up to date at scheduling events only;
    // a yield is one (without it a reading can lag by up to a scheduler tick).
    std::thread::yield_now();
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    s.split_whitespace().next()?.parse().ok()
}

impl Timer {
    /// Starts timing on the clock `STRATA_BENCH_CLOCK` chooses.
    pub fn start() -> Timer {
        if std::env::var("STRATA_BENCH_CLOCK").as_deref() == Ok("cpu") {
            if let Some(ns) = thread_cpu_ns() {
                return Timer::Cpu(ns);
            }
        }
        Timer::Wall(Instant::now())
    }

    /// The time since [`Timer::start`] on its clock.
    pub fn elapsed(&self) -> Duration {
        match self {
            Timer::Wall(t) => t.elapsed(),
            Timer::Cpu(start) => {
                Duration::from_nanos(thread_cpu_ns().unwrap_or(*start).saturating_sub(*start))
            }
        }
    }
}
