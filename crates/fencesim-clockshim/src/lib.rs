//! fencesim's clock shim: an `LD_PRELOAD` library that offsets a process's wall clock
//! (`CLOCK_REALTIME`, as `clock_gettime`, `gettimeofday` and `time` read it) by the number of
//! milliseconds written in the file `FENCESIM_CLOCK_OFFSET_FILE` names, read again at every
//! call, so that a live trial can step a Redis node's clock (`clock-jump`, docs/live.md). The
//! monotonic clocks are left alone, as libfaketime's `DONT_FAKE_MONOTONIC=1` leaves them.
//!
//! Why not libfaketime: Debian's `redis-server` is linked with jemalloc, and libfaketime cannot
//! start inside such a process (jemalloc reads the clock while libfaketime is still looking up
//! the real functions with `dlsym`, which allocates: libfaketime issues #130, #327, #478). This
//! shim looks nothing up and allocates nothing: it reads the real clock with the raw system
//! call and the offset with `open`/`read` into a stack buffer.
//!
//! It depends on no crate, not even `libc`: fencesim-live's build script compiles this one
//! file with `rustc` alone and embeds the library in the fencesim binary, so that an
//! installed fencesim (`cargo install`, which cannot install a library) writes it out when a
//! trial needs it. The few C types and constants it needs are those of 64-bit Linux, below.
#![deny(missing_docs)]
#![allow(unsafe_code)]

use core::ffi::{c_char, c_int, c_long, c_void};

#[cfg(not(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
)))]
compile_error!("fencesim's clock shim is written for 64-bit Linux (x86_64, aarch64)");

/// The C types and constants of 64-bit Linux that the shim uses (glibc's and musl's agree).
#[allow(non_camel_case_types)]
mod c {
    use core::ffi::{c_char, c_int, c_long, c_void};

    /// `clockid_t`.
    pub type clockid_t = c_int;
    /// `time_t`.
    pub type time_t = i64;
    /// `suseconds_t`.
    pub type suseconds_t = i64;

    /// `struct timespec`.
    #[repr(C)]
    pub struct timespec {
        /// Seconds.
        pub tv_sec: time_t,
        /// Nanoseconds.
        pub tv_nsec: c_long,
    }

    /// `struct timeval`.
    #[repr(C)]
    pub struct timeval {
        /// Seconds.
        pub tv_sec: time_t,
        /// Microseconds.
        pub tv_usec: suseconds_t,
    }

    pub const CLOCK_REALTIME: clockid_t = 0;
    pub const CLOCK_REALTIME_COARSE: clockid_t = 5;
    pub const O_RDONLY: c_int = 0;
    pub const O_CLOEXEC: c_int = 0o2_000_000;
    #[cfg(target_arch = "x86_64")]
    pub const SYS_CLOCK_GETTIME: c_long = 228;
    #[cfg(target_arch = "aarch64")]
    pub const SYS_CLOCK_GETTIME: c_long = 113;

    extern "C" {
        pub fn getenv(name: *const c_char) -> *mut c_char;
        pub fn open(path: *const c_char, flags: c_int, ...) -> c_int;
        pub fn read(fd: c_int, buf: *mut c_void, count: usize) -> isize;
        pub fn close(fd: c_int) -> c_int;
        pub fn syscall(number: c_long, ...) -> c_long;
    }
}

/// The environment variable naming the offset file.
const VARIABLE: &[u8] = b"FENCESIM_CLOCK_OFFSET_FILE\0";

/// The offset in ms from the file (`+5000`, `-1500`, `0`); 0 if there is none or it does not
/// read.
fn offset_ms() -> i64 {
    // SAFETY: getenv with a NUL-terminated name; the result is only read.
    let path = unsafe { c::getenv(VARIABLE.as_ptr().cast::<c_char>()) };
    if path.is_null() {
        return 0;
    }
    let mut buf = [0u8; 32];
    // SAFETY: a NUL-terminated path from the environment; the buffer outlives the read.
    let n = unsafe {
        let fd = c::open(path, c::O_RDONLY | c::O_CLOEXEC);
        if fd < 0 {
            return 0;
        }
        let n = c::read(fd, buf.as_mut_ptr().cast::<c_void>(), buf.len());
        c::close(fd);
        n
    };
    if n <= 0 {
        return 0;
    }
    parse(&buf[..n as usize])
}

/// A signed decimal integer, leading spaces and a trailing newline allowed.
fn parse(text: &[u8]) -> i64 {
    let mut digits = text
        .iter()
        .skip_while(|b| b.is_ascii_whitespace())
        .peekable();
    let negative = match digits.peek() {
        Some(b'-') => {
            digits.next();
            true
        }
        Some(b'+') => {
            digits.next();
            false
        }
        _ => false,
    };
    let mut value: i64 = 0;
    for b in digits.take_while(|b| b.is_ascii_digit()) {
        value = value.saturating_mul(10).saturating_add(i64::from(b - b'0'));
    }
    if negative {
        -value
    } else {
        value
    }
}

/// The real clock `clock`, by the system call (no vDSO lookup, no libc symbol).
fn real(clock: c::clockid_t, tp: *mut c::timespec) -> c_int {
    // SAFETY: the kernel writes one timespec to `tp`, which the caller provides.
    unsafe { c::syscall(c::SYS_CLOCK_GETTIME, c_long::from(clock), tp) as c_int }
}

fn shift(tp: &mut c::timespec, ms: i64) {
    let ns =
        i128::from(tp.tv_sec) * 1_000_000_000 + i128::from(tp.tv_nsec) + i128::from(ms) * 1_000_000;
    tp.tv_sec = ns.div_euclid(1_000_000_000) as c::time_t;
    tp.tv_nsec = ns.rem_euclid(1_000_000_000) as c_long;
}

fn is_wall(clock: c::clockid_t) -> bool {
    clock == c::CLOCK_REALTIME || clock == c::CLOCK_REALTIME_COARSE
}

/// `clock_gettime(2)`, with the wall clocks offset.
///
/// # Safety
/// As `clock_gettime`: `tp` points to a writable `timespec`.
#[no_mangle]
pub unsafe extern "C" fn clock_gettime(clock: c::clockid_t, tp: *mut c::timespec) -> c_int {
    let r = real(clock, tp);
    if r == 0 && is_wall(clock) && !tp.is_null() {
        // SAFETY: the kernel just wrote it.
        shift(unsafe { &mut *tp }, offset_ms());
    }
    r
}

/// `gettimeofday(2)`, offset as the wall clock is; the time zone is not filled in.
///
/// # Safety
/// As `gettimeofday`: `tv` is null or points to a writable `timeval`.
#[no_mangle]
pub unsafe extern "C" fn gettimeofday(tv: *mut c::timeval, _tz: *mut c_void) -> c_int {
    let mut ts = c::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    let r = real(c::CLOCK_REALTIME, &mut ts);
    if r != 0 || tv.is_null() {
        return r;
    }
    shift(&mut ts, offset_ms());
    // SAFETY: checked non-null; the caller provides it.
    unsafe {
        (*tv).tv_sec = ts.tv_sec;
        (*tv).tv_usec = (ts.tv_nsec / 1000) as c::suseconds_t;
    }
    0
}

/// `time(2)`, offset as the wall clock is.
///
/// # Safety
/// As `time`: `t` is null or points to a writable `time_t`.
#[no_mangle]
pub unsafe extern "C" fn time(t: *mut c::time_t) -> c::time_t {
    let mut ts = c::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    if real(c::CLOCK_REALTIME, &mut ts) != 0 {
        return -1;
    }
    shift(&mut ts, offset_ms());
    if !t.is_null() {
        // SAFETY: checked non-null; the caller provides it.
        unsafe { *t = ts.tv_sec };
    }
    ts.tv_sec
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_read_with_a_sign_and_a_newline() {
        assert_eq!(parse(b"+5000\n"), 5000);
        assert_eq!(parse(b"-1500"), -1500);
        assert_eq!(parse(b"  0\n"), 0);
        assert_eq!(parse(b"nonsense"), 0);
    }

    #[test]
    fn shifting_carries_across_seconds_both_ways() {
        let mut t = c::timespec {
            tv_sec: 10,
            tv_nsec: 900_000_000,
        };
        shift(&mut t, 200);
        assert_eq!((t.tv_sec, t.tv_nsec), (11, 100_000_000));
        shift(&mut t, -1_300);
        assert_eq!((t.tv_sec, t.tv_nsec), (9, 800_000_000));
    }
}
