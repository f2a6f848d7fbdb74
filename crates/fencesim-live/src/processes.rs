//! A trial's client processes: started with their configuration, read by a thread each,
//! given one origin once all are connected, told `go` at their safepoints, and killed on drop.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use crate::clock::Origin;
use crate::wire::{ClientConfig, ClientLine};
use crate::LiveError;

/// How long after every client is ready the trial's clock starts (time for the origin's line
/// to reach them).
const START_MARGIN_NS: u64 = 50_000_000;

/// What a client's reader thread passes on: a line, or `None` at the end of its output.
pub(crate) type FromClient = (usize, Option<ClientLine>);

/// The client processes, killed (after a SIGCONT, in case they are paused) on drop.
#[derive(Default)]
pub(crate) struct Processes {
    pub(crate) children: Vec<Child>,
    stdins: Vec<Option<ChildStdin>>,
    /// Their entries in [`crate::reaper`]'s list.
    owned: Vec<u64>,
}

impl Processes {
    pub(crate) fn spawn(
        &mut self,
        program: &Path,
        config: &ClientConfig,
        index: usize,
        tx: mpsc::Sender<FromClient>,
    ) -> Result<(), LiveError> {
        let mut command = Command::new(program);
        command.arg("live-client");
        // Their own process group: a Ctrl-C in the terminal reaches the harness, which ends
        // the trial and keeps its history, not the clients directly.
        std::os::unix::process::CommandExt::process_group(&mut command, 0);
        crate::reaper::die_with_parent(&mut command);
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| LiveError::Server(format!("{}: {e}", program.display())))?;
        let mut stdin = child.stdin.take();
        let line = serde_json::to_string(config).map_err(|e| LiveError::Server(e.to_string()))?;
        if let Some(s) = stdin.as_mut() {
            let _ = writeln!(s, "{line}");
        }
        let stdout = child.stdout.take();
        std::thread::spawn(move || {
            if let Some(out) = stdout {
                for line in BufReader::new(out).lines() {
                    let Ok(line) = line else { break };
                    match serde_json::from_str::<ClientLine>(&line) {
                        Ok(parsed) => {
                            if tx.send((index, Some(parsed))).is_err() {
                                return;
                            }
                        }
                        Err(e) => {
                            let message = format!("unreadable line from the client: {e}: {line}");
                            let _ = tx.send((index, Some(ClientLine::Error { message })));
                        }
                    }
                }
            }
            let _ = tx.send((index, None));
        });
        self.owned
            .push(crate::reaper::own(crate::reaper::Owned::Group(
                child.id() as i32
            )));
        self.children.push(child);
        self.stdins.push(stdin);
        Ok(())
    }

    /// Wait until every client has connected to its servers, then give them all one origin,
    /// a moment from now: the trial's clock starts when everyone is ready, so that a slow
    /// process start does not shift the clients against the faults' `at_ms`.
    pub(crate) fn start_together(
        &mut self,
        rx: &mpsc::Receiver<FromClient>,
    ) -> Result<Origin, LiveError> {
        let mut ready = 0;
        while ready < self.children.len() {
            match rx.recv_timeout(Duration::from_secs(30)) {
                Ok((_, Some(ClientLine::Ready))) => ready += 1,
                Ok((i, Some(ClientLine::Error { message }))) => {
                    return Err(LiveError::Server(format!("client {}: {message}", i + 1)));
                }
                Ok((i, None)) => {
                    return Err(LiveError::Server(format!(
                        "client {} exited before the trial started",
                        i + 1
                    )))
                }
                Ok(_) => {}
                Err(_) => {
                    return Err(LiveError::Server(
                        "the client processes were not ready within 30 s".to_owned(),
                    ))
                }
            }
        }
        let mut origin = Origin::now();
        origin.mono_ns += START_MARGIN_NS;
        origin.wall_us += (START_MARGIN_NS / 1000) as i64;
        let line = serde_json::to_string(&origin).map_err(|e| LiveError::Server(e.to_string()))?;
        for stdin in self.stdins.iter_mut().flatten() {
            let _ = writeln!(stdin, "{line}");
            let _ = stdin.flush();
        }
        Ok(origin)
    }

    /// Client `index`'s exit status, once it has exited (waited for here); `None` while it
    /// runs or if it cannot be waited for.
    pub(crate) fn wait(&mut self, index: usize) -> Option<std::process::ExitStatus> {
        let child = self.children.get_mut(index)?;
        // Its output closed: it is exiting; give it a moment to be reaped.
        for _ in 0..50 {
            if let Ok(Some(status)) = child.try_wait() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        None
    }

    pub(crate) fn pid(&self, index: usize) -> Pid {
        Pid::from_raw(self.children[index].id() as i32)
    }

    pub(crate) fn go(&mut self, index: usize) {
        if let Some(stdin) = self.stdins[index].as_mut() {
            let _ = writeln!(stdin, "go");
            let _ = stdin.flush();
        }
    }
}

impl Drop for Processes {
    fn drop(&mut self) {
        for child in &mut self.children {
            let pid = Pid::from_raw(child.id() as i32);
            let _ = kill(pid, Signal::SIGCONT);
            let _ = child.kill();
            let _ = child.wait();
        }
        for id in self.owned.drain(..) {
            crate::reaper::forget(id);
        }
    }
}
