//! Engine processes as process groups: the command runs under `sh -c` in a
//! group of its own, so whatever it starts (the shell's child, a forked
//! worker) is stopped with it, and the harness is the subreaper of all of
//! them, so each one is reaped here, not left to an init that may not reap.

use std::collections::BTreeSet;
use std::os::unix::process::CommandExt as _;
use std::process::{Child, ChildStderr, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::Mutex;
use std::time::Duration;

use super::output::real_now;

/// How long a process group is given to leave after SIGTERM before SIGKILL.
const GRACE: Duration = Duration::from_millis(500);
/// How long to wait for the group's last members to be reaped after SIGKILL.
const KILL_WAIT: Duration = Duration::from_secs(2);

/// Process groups started and not yet stopped: what an exit must stop.
static LIVE: Mutex<BTreeSet<i32>> = Mutex::new(BTreeSet::new());

/// One engine command's process group.
pub struct Group {
    child: Child,
    pgid: i32,
}

/// How a group is stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stop {
    /// SIGKILL at once: an eviction, where nothing may outlive the instant.
    Kill,
    /// SIGTERM, then SIGKILL after a grace period: the end of a run.
    Term,
}

pub struct Pipes {
    pub stdin: ChildStdin,
    pub stdout: ChildStdout,
    pub stderr: ChildStderr,
}

impl Group {
    pub fn spawn(command: &str) -> std::io::Result<(Self, Pipes)> {
        become_subreaper();
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(command)
            .process_group(0)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()?;
        let pgid = i32::try_from(child.id()).expect("pids fit in i32");
        LIVE.lock().expect("live groups lock").insert(pgid);
        let pipes = Pipes {
            stdin: child.stdin.take().expect("piped stdin"),
            stdout: child.stdout.take().expect("piped stdout"),
            stderr: child.stderr.take().expect("piped stderr"),
        };
        Ok((Self { child, pgid }, pipes))
    }

    /// Stops every process of the group and reaps them.
    pub fn stop(mut self, how: Stop) {
        stop_group(self.pgid, how);
        let _ = self.child.wait();
        LIVE.lock().expect("live groups lock").remove(&self.pgid);
    }
}

/// Stops every group still running: at exit, after Ctrl-C, after a panic.
pub fn stop_all() {
    let live = std::mem::take(&mut *LIVE.lock().expect("live groups lock"));
    for pgid in live {
        stop_group(pgid, Stop::Term);
    }
}

fn stop_group(pgid: i32, how: Stop) {
    if how == Stop::Term {
        signal(pgid, libc::SIGTERM);
        if reaped_within(pgid, GRACE) {
            return;
        }
    }
    signal(pgid, libc::SIGKILL);
    reaped_within(pgid, KILL_WAIT);
}

fn signal(pgid: i32, signal: i32) {
    // SAFETY: kill(2) on a process group this module started.
    unsafe {
        libc::kill(-pgid, signal);
    }
}

/// Reaps the group's processes as they end; true once none is left.
fn reaped_within(pgid: i32, within: Duration) -> bool {
    let deadline = real_now() + within;
    // A killed process is usually gone within microseconds: look again at
    // once a few times before sleeping between looks (an eviction is on
    // the hot path of a run over the protocol).
    let mut looks = 0u32;
    loop {
        looks += 1;
        // SAFETY: waitpid(2) on our own children (and, as subreaper, orphans) in the group.
        while unsafe { libc::waitpid(-pgid, std::ptr::null_mut(), libc::WNOHANG) } > 0 {}
        // SAFETY: signal 0 only asks whether any process of the group is left.
        let left = unsafe { libc::kill(-pgid, 0) } == 0;
        if !left {
            return true;
        }
        if real_now() >= deadline {
            return false;
        }
        if looks < 200 {
            std::thread::yield_now();
        } else {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

/// Orphans of an engine (a forked worker whose parent died) become this
/// process's children, to be reaped by [`Group::stop`], instead of init's.
fn become_subreaper() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // SAFETY: prctl with a constant option; failure leaves orphans to init.
        unsafe {
            libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
        }
    });
}
