//! An engine process's stdout as bounded lines, and its stderr as a bounded
//! tail. No thread may run inside the simulation, so one poll(2) watches
//! both pipes: stderr is drained whenever the harness waits for a line, so
//! a chatty engine never blocks on it and never costs more than the tail.

use std::io::Read as _;
use std::os::fd::AsRawFd;
use std::process::{ChildStderr, ChildStdout};
use std::time::Duration;

use super::fault::{shown, FaultKind};
use super::timing::{Part, Stopwatch};

/// Bytes of the engine's stderr kept to show with a failure.
pub const STDERR_TAIL: usize = 4_000;
/// How much one read takes.
const CHUNK: usize = 64 * 1024;

/// The bounds on what one engine process may send.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Real time one line may take to arrive whole.
    pub silence: Duration,
    /// Bytes in one line.
    pub line_bytes: usize,
    /// Bytes in one generation's whole output.
    pub run_bytes: u64,
}

impl Limits {
    pub const DEFAULT_SILENCE: Duration = Duration::from_secs(30);
    pub const DEFAULT_LINE_BYTES: usize = 16 << 20;
    pub const DEFAULT_RUN_BYTES: u64 = 1 << 30;

    /// The defaults, or `TURNSIM_ENGINE_TIMEOUT_MS`, `TURNSIM_ENGINE_MAX_LINE_BYTES`
    /// and `TURNSIM_ENGINE_MAX_RUN_BYTES`. A live run's engine may be silent
    /// longer ([`crate::live::SILENCE`]).
    pub fn from_env() -> Self {
        let silence = if crate::live::is_live() { crate::live::SILENCE } else { Self::DEFAULT_SILENCE };
        fn var<T: std::str::FromStr>(name: &str) -> Option<T> {
            std::env::var(name).ok().and_then(|value| value.trim().parse().ok())
        }
        Self {
            silence: var("TURNSIM_ENGINE_TIMEOUT_MS").map_or(silence, Duration::from_millis),
            line_bytes: var("TURNSIM_ENGINE_MAX_LINE_BYTES").unwrap_or(Self::DEFAULT_LINE_BYTES),
            run_bytes: var("TURNSIM_ENGINE_MAX_RUN_BYTES").unwrap_or(Self::DEFAULT_RUN_BYTES),
        }
    }
}

/// Why no line came.
#[derive(Debug)]
pub struct ReadFault {
    pub kind: FaultKind,
    pub what: String,
}

impl ReadFault {
    fn new(kind: FaultKind, what: impl Into<String>) -> Self {
        Self { kind, what: what.into() }
    }
}

pub struct EngineOutput {
    stdout: ChildStdout,
    stderr: ChildStderr,
    /// Read from stdout; what is not yet taken as a line starts at `taken`
    /// (lines are taken from the front without moving the rest).
    pending: Vec<u8>,
    taken: usize,
    /// How far `pending` is known to hold no newline.
    scanned: usize,
    /// Bytes this generation has sent on stdout.
    sent: u64,
    tail: Tail,
    stderr_open: bool,
    /// Where one read lands.
    chunk: Box<[u8]>,
}

impl EngineOutput {
    pub fn new(stdout: ChildStdout, stderr: ChildStderr) -> Self {
        // Drained only as far as it goes: never wait on stderr.
        set_nonblocking(stderr.as_raw_fd());
        let chunk = vec![0; CHUNK].into_boxed_slice();
        Self {
            stdout,
            stderr,
            pending: Vec::new(),
            taken: 0,
            scanned: 0,
            sent: 0,
            tail: Tail::default(),
            stderr_open: true,
            chunk,
        }
    }

    /// A new generation starts on this process: its stderr and byte count
    /// start over.
    pub fn start_generation(&mut self) {
        self.drain_stderr();
        self.tail = Tail::default();
        self.sent = 0;
    }

    /// The next line, without its newline, within `limits`.
    pub fn next_line(&mut self, limits: &Limits) -> Result<Vec<u8>, ReadFault> {
        let mut deadline = None;
        loop {
            let from = self.scanned.max(self.taken);
            if let Some(at) = self.pending[from..].iter().position(|&byte| byte == b'\n') {
                let end = from + at;
                if end - self.taken > limits.line_bytes {
                    return Err(Self::too_long(&self.pending[self.taken..], limits));
                }
                let line = self.pending[self.taken..end].to_vec();
                self.taken = end + 1;
                self.scanned = self.taken;
                if self.taken == self.pending.len() {
                    self.pending.clear();
                    (self.taken, self.scanned) = (0, 0);
                }
                return Ok(line);
            }
            // What is left is part of a line: move it to the front before
            // reading more.
            self.pending.drain(..self.taken);
            self.taken = 0;
            self.scanned = self.pending.len();
            if self.pending.len() > limits.line_bytes {
                return Err(Self::too_long(&self.pending, limits));
            }
            let waiting = Stopwatch::start();
            if !super::spin_until_readable(self.stdout.as_raw_fd()) {
                let deadline = *deadline.get_or_insert_with(|| real_now() + limits.silence);
                self.wait(deadline, limits)?;
            }
            self.read_stdout(limits)?;
            waiting.stop(Part::Waiting);
        }
    }

    fn too_long(line: &[u8], limits: &Limits) -> ReadFault {
        let what = format!(
            "a line longer than {} bytes (TURNSIM_ENGINE_MAX_LINE_BYTES), starting: {}",
            limits.line_bytes,
            shown(line)
        );
        ReadFault::new(FaultKind::Flood, what)
    }

    /// That the engine has sent nothing not yet taken, looked at now
    /// without waiting: a protocol violation shows what it sent, and a
    /// closed stdout is a crash.
    pub fn expect_quiet(&mut self, limits: &Limits, what: &str) -> Result<(), ReadFault> {
        if self.left().is_empty() && super::poll_readable(self.stdout.as_raw_fd(), 0) {
            self.read_stdout(limits)?;
        }
        self.expect_nothing_left(what)
    }

    /// That nothing already read waits to be taken (what the engine wrote
    /// in the same breath as its last line), without a system call.
    pub fn expect_nothing_left(&self, what: &str) -> Result<(), ReadFault> {
        if self.left().is_empty() {
            return Ok(());
        }
        Err(ReadFault::new(FaultKind::Protocol, format!("{what}: {}", shown(self.left()))))
    }

    /// Read and not yet taken.
    fn left(&self) -> &[u8] {
        &self.pending[self.taken..]
    }

    /// The last bytes the process wrote to stderr.
    pub fn stderr_tail(&mut self) -> String {
        self.drain_stderr();
        String::from_utf8_lossy(self.tail.bytes()).into_owned()
    }

    /// Waits until stdout is readable, draining stderr meanwhile.
    fn wait(&mut self, deadline: Duration, limits: &Limits) -> Result<(), ReadFault> {
        loop {
            let left = deadline.saturating_sub(real_now());
            if left.is_zero() {
                let what = if self.left().is_empty() {
                    format!(
                        "nothing for {} ms of real time while it handled an input (a hang?)",
                        limits.silence.as_millis()
                    )
                } else {
                    format!(
                        "a line left unfinished for {} ms of real time (it starts: {})",
                        limits.silence.as_millis(),
                        shown(self.left())
                    )
                };
                return Err(ReadFault::new(FaultKind::Silent, what));
            }
            let millis = i32::try_from(left.as_millis().max(1)).unwrap_or(i32::MAX);
            let mut fds = [
                libc::pollfd { fd: self.stdout.as_raw_fd(), events: libc::POLLIN, revents: 0 },
                libc::pollfd {
                    fd: if self.stderr_open { self.stderr.as_raw_fd() } else { -1 },
                    events: libc::POLLIN,
                    revents: 0,
                },
            ];
            // SAFETY: two valid pollfds for descriptors this value owns (-1 is skipped).
            let ready = unsafe { libc::poll(fds.as_mut_ptr(), 2, millis) };
            if ready < 0 {
                continue; // EINTR: a signal (Ctrl-C); the deadline still holds
            }
            if fds[1].revents != 0 {
                self.drain_stderr();
            }
            if fds[0].revents != 0 {
                return Ok(());
            }
        }
    }

    fn read_stdout(&mut self, limits: &Limits) -> Result<(), ReadFault> {
        let read = match self.stdout.read(&mut self.chunk[..]) {
            Ok(0) => {
                let what = if self.left().is_empty() {
                    "it exited (stdout closed) before going idle".to_string()
                } else {
                    format!("it exited (stdout closed) in the middle of a line: {}", shown(self.left()))
                };
                return Err(ReadFault::new(FaultKind::Crashed, what));
            }
            Ok(read) => read,
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => return Ok(()),
            Err(error) => {
                return Err(ReadFault::new(FaultKind::Crashed, format!("reading its stdout failed: {error}")))
            }
        };
        self.pending.extend_from_slice(&self.chunk[..read]);
        self.sent += read as u64;
        if self.sent > limits.run_bytes {
            let what =
                format!("more than {} bytes of output in one run (TURNSIM_ENGINE_MAX_RUN_BYTES)", limits.run_bytes);
            return Err(ReadFault::new(FaultKind::Flood, what));
        }
        Ok(())
    }

    fn drain_stderr(&mut self) {
        if !self.stderr_open {
            return;
        }
        let mut chunk = [0u8; 8192];
        loop {
            match self.stderr.read(&mut chunk) {
                Ok(0) => {
                    self.stderr_open = false;
                    return;
                }
                Ok(read) => self.tail.push(&chunk[..read]),
                Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => return, // WouldBlock: drained for now
            }
        }
    }
}

/// The last [`STDERR_TAIL`] bytes of a stream, in at most twice that.
#[derive(Default)]
pub struct Tail {
    bytes: Vec<u8>,
}

impl Tail {
    pub fn push(&mut self, more: &[u8]) {
        let more = &more[more.len().saturating_sub(STDERR_TAIL)..];
        self.bytes.extend_from_slice(more);
        if self.bytes.len() > 2 * STDERR_TAIL {
            self.bytes.drain(..self.bytes.len() - STDERR_TAIL);
        }
    }

    pub fn bytes(&self) -> &[u8] {
        &self.bytes[self.bytes.len().saturating_sub(STDERR_TAIL)..]
    }

    /// Bytes held, kept and not yet dropped (at most twice the tail).
    pub fn held(&self) -> usize {
        self.bytes.len()
    }
}

fn set_nonblocking(fd: i32) {
    // SAFETY: fcntl on a descriptor the caller owns.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        if flags >= 0 {
            libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK);
        }
    }
}

/// The machine's monotonic clock, read past the simulation (which answers
/// `clock_gettime` with sim time): for real-time limits on an engine
/// process only. It never reaches a trace.
pub fn real_now() -> Duration {
    let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: the raw syscall writes one timespec we own.
    unsafe {
        libc::syscall(libc::SYS_clock_gettime, libc::CLOCK_MONOTONIC, &mut now as *mut libc::timespec);
    }
    Duration::new(u64::try_from(now.tv_sec).unwrap_or(0), u32::try_from(now.tv_nsec).unwrap_or(0))
}
