//! A thin epoll wrapper: the only unsafe code in the crate.
//!
//! One epoll instance per thread, level-triggered. Readiness for reading is always
//! wanted; readiness for writing only while a pipeline did not fit the socket
//! buffer, so the common case costs no `epoll_ctl` at all.

use std::io;
use std::os::fd::RawFd;
use std::time::Duration;

/// Readiness reported for one connection.
#[derive(Debug, Clone, Copy)]
pub struct Event {
    /// Index of the connection within its thread.
    pub token: usize,
    /// Data (or EOF / error) can be read.
    pub readable: bool,
    /// The socket has room again.
    pub writable: bool,
}

/// Events returned by one wait; sized so one wait covers every connection of a
/// typical thread.
pub const EVENTS_MAX: usize = 1024;

/// An epoll instance owned by one thread.
pub struct Poller {
    fd: RawFd,
    events: Vec<libc::epoll_event>,
    /// Whether epoll_pwait2 (nanosecond timeouts, Linux 5.11) is usable.
    precise: bool,
}

impl Poller {
    /// A new epoll instance.
    pub fn new() -> io::Result<Self> {
        // SAFETY: plain syscall with no pointers.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let events = vec![libc::epoll_event { events: 0, u64: 0 }; EVENTS_MAX];
        Ok(Poller {
            fd,
            events,
            precise: true,
        })
    }

    /// Watch `fd` for reading, and for writing when `writable` is set.
    pub fn register(&self, fd: RawFd, token: usize, writable: bool) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_ADD, fd, token, writable)
    }

    /// Change whether `fd` is watched for writing.
    pub fn reregister(&self, fd: RawFd, token: usize, writable: bool) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_MOD, fd, token, writable)
    }

    fn ctl(&self, op: i32, fd: RawFd, token: usize, writable: bool) -> io::Result<()> {
        let mut flags = libc::EPOLLIN | libc::EPOLLRDHUP;
        if writable {
            flags |= libc::EPOLLOUT;
        }
        let mut ev = libc::epoll_event {
            events: flags as u32,
            u64: token as u64,
        };
        // SAFETY: `ev` is a valid epoll_event for the duration of the call.
        if unsafe { libc::epoll_ctl(self.fd, op, fd, &mut ev) } < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Wait up to `timeout` (forever when `None`) and pass each event to `on_event`.
    pub fn wait(
        &mut self,
        timeout: Option<Duration>,
        mut on_event: impl FnMut(Event),
    ) -> io::Result<usize> {
        let n = loop {
            let n = self.wait_raw(timeout);
            if n >= 0 {
                break n as usize;
            }
            let err = io::Error::last_os_error();
            match err.raw_os_error() {
                Some(libc::EINTR) => continue,
                Some(libc::ENOSYS) if self.precise => self.precise = false,
                _ => return Err(err),
            }
        };
        for ev in &self.events[..n] {
            let bits = ev.events as i32;
            on_event(Event {
                token: ev.u64 as usize,
                readable: bits
                    & (libc::EPOLLIN | libc::EPOLLRDHUP | libc::EPOLLERR | libc::EPOLLHUP)
                    != 0,
                writable: bits & libc::EPOLLOUT != 0,
            });
        }
        Ok(n)
    }

    fn wait_raw(&mut self, timeout: Option<Duration>) -> i32 {
        let max = self.events.len() as i32;
        let ptr = self.events.as_mut_ptr();
        if self.precise {
            let ts = timeout.map(|d| libc::timespec {
                tv_sec: d.as_secs() as libc::time_t,
                tv_nsec: d.subsec_nanos() as libc::c_long,
            });
            let ts_ptr = ts
                .as_ref()
                .map_or(std::ptr::null(), |t| t as *const libc::timespec);
            // SAFETY: `ptr` points to `max` writable events; `ts_ptr` is null or valid.
            unsafe { libc::epoll_pwait2(self.fd, ptr, max, ts_ptr, std::ptr::null()) }
        } else {
            let ms = timeout.map_or(-1, |d| {
                d.as_micros().div_ceil(1000).min(i32::MAX as u128) as i32
            });
            // SAFETY: `ptr` points to `max` writable events.
            unsafe { libc::epoll_wait(self.fd, ptr, max, ms) }
        }
    }
}

impl Drop for Poller {
    fn drop(&mut self) {
        // SAFETY: we own the descriptor.
        unsafe { libc::close(self.fd) };
    }
}

/// CPU time (user + system) of the whole process so far.
pub fn process_cpu() -> Duration {
    // SAFETY: getrusage fills the struct we pass.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(ru.ru_utime) + tv(ru.ru_stime)
}
