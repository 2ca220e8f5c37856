//! The Node floor: the Node SDK's protocol loop with nothing behind it
//! (`adapters/node/examples/noop.mjs`), fed the very lines a Node engine
//! was sent in runs of a scenario (its `init`s and every input, the
//! replies to its own requests left out: the no-op engine asks nothing).
//! Each input is answered `idle` (an `inputs` line one per input it holds),
//! so a run costs the floor what the same
//! story's round trips cost any engine on the SDK before it does anything:
//! the pipe, the JSON, the SDK's dispatch, a generation's reset.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Duration;

use turnsim_engine::RegressionSet;

use super::wall_now;
use crate::protocol::proxy::Tapped;
use crate::scenario::ScenarioFile;

/// The lines the engine `command` is sent in runs of `file`, one list per
/// seed of `seeds`.
pub fn inputs(command: &str, file: &ScenarioFile, seeds: u64) -> Vec<Vec<Tapped>> {
    crate::world::use_engine_command(Some(command.to_string()));
    let runs = std::thread::scope(|scope| {
        scope
            .spawn(|| {
                (0..seeds)
                    .map(|seed| {
                        let regressions = RegressionSet::default();
                        crate::protocol::proxy::tapping_inputs(|| crate::world::run(file, seed, &regressions)).1
                    })
                    .collect()
            })
            .join()
            .expect("bench thread")
    });
    crate::world::use_engine_command(None);
    crate::protocol::proxy::stop_waiting_processes();
    runs
}

/// The floor engine's process, reaped when dropped.
struct Floor {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Floor {
    fn start(command: &str) -> Result<Self, String> {
        let mut child = Command::new("sh")
            .args(["-c", &format!("exec {command}")])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|error| format!("`{command}` did not start: {error}"))?;
        let stdin = child.stdin.take().expect("piped stdin");
        let stdout = BufReader::new(child.stdout.take().expect("piped stdout"));
        Ok(Self { child, stdin, stdout })
    }

    /// Sends one run's lines, each answered before the next goes out.
    fn run(&mut self, lines: &[Tapped]) -> Result<(), String> {
        let mut answer = String::new();
        for line in lines {
            self.stdin.write_all(line.text.as_bytes()).and_then(|()| self.stdin.flush()).map_err(|e| e.to_string())?;
            let mut idles = 0;
            while idles < line.idles {
                answer.clear();
                if self.stdout.read_line(&mut answer).map_err(|e| e.to_string())? == 0 {
                    return Err("the Node floor engine exited".to_string());
                }
                if answer.contains("\"type\":\"idle\"") {
                    idles += 1;
                }
            }
        }
        Ok(())
    }
}

impl Drop for Floor {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs per second (wall clock) of the floor engine `command` over `runs`
/// in turn, for about `round_time` (after one run to load it).
pub fn rate(command: &str, runs: &[Vec<Tapped>], round_time: Duration) -> Result<f64, String> {
    let mut floor = Floor::start(command)?;
    floor.run(&runs[0])?;
    let started = wall_now();
    let mut done = 0;
    while started.elapsed() < round_time {
        floor.run(&runs[done % runs.len()])?;
        done += 1;
    }
    Ok(done as f64 / started.elapsed().as_secs_f64())
}
