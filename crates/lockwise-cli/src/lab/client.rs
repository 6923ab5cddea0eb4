//! One actor process seen from the lab: started, sent ops, waited on, finished.

use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lockwise_bench::history::{Event, What};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::mpsc;

use super::children;
use super::error::{LabError, LabResult};
use super::proto::{How, Line, Op};

/// One actor process.
pub(super) struct Proc {
    pub(super) name: String,
    pub(super) key: String,
    pub(super) pid: i32,
    child: Child,
    stdin: Option<ChildStdin>,
    rx: mpsc::UnboundedReceiver<Line>,
    reader: Option<tokio::task::JoinHandle<()>>,
}

/// Longest wait for an actor's answer; a pause is never longer than 120 s.
const ANSWER_WITHIN: Duration = Duration::from_secs(180);

impl Proc {
    /// Starts `cmd` (a `lockwise lab-actor`) and adds every event it reports to `log`. Its
    /// first [`done`](Self::done) says it is ready (connected to the backend).
    pub(super) fn start(
        mut cmd: Command,
        name: &str,
        key: &str,
        log: Arc<Mutex<Vec<Event>>>,
    ) -> LabResult<Proc> {
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true);
        crate::child::stop_with_parent(&mut cmd, Signal::SIGKILL);
        let mut child = cmd
            .spawn()
            .map_err(|e| LabError(format!("cannot start actor {name}: {e}")))?;
        let pid = child
            .id()
            .and_then(|p| i32::try_from(p).ok())
            .ok_or_else(|| LabError(format!("actor {name} exited at once")))?;
        children::register(pid);
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| LabError("no stdout".into()))?;
        let (tx, rx) = mpsc::unbounded_channel();
        let reader = tokio::spawn(async move {
            let mut lines = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                let Ok(parsed) = serde_json::from_str::<Line>(&line) else {
                    continue;
                };
                if let Line::Event(e) = &parsed
                    && let Ok(mut log) = log.lock()
                {
                    log.push(e.clone());
                }
                let _ = tx.send(parsed);
            }
        });
        Ok(Proc {
            name: name.to_owned(),
            key: key.to_owned(),
            pid,
            stdin: child.stdin.take(),
            child,
            rx,
            reader: Some(reader),
        })
    }

    pub(super) async fn send(&mut self, op: &Op) -> LabResult<()> {
        let stdin = self
            .stdin
            .as_mut()
            .ok_or_else(|| LabError(format!("{} is closed", self.name)))?;
        let mut line = serde_json::to_string(op)?;
        line.push('\n');
        stdin
            .write_all(line.as_bytes())
            .await
            .map_err(|e| LabError(format!("{} is gone: {e}", self.name)))?;
        stdin.flush().await?;
        Ok(())
    }

    /// Waits for the answer to the last op.
    pub(super) async fn done(&mut self) -> LabResult<()> {
        let name = self.name.clone();
        let wait = async {
            loop {
                match self.rx.recv().await {
                    Some(Line::Done) => return Ok(()),
                    Some(Line::Failed(e)) => return Err(LabError(format!("{name}: {e}"))),
                    Some(Line::Event(_)) => {}
                    None => return Err(LabError(format!("{name} exited unexpectedly"))),
                }
            }
        };
        tokio::time::timeout(ANSWER_WITHIN, wait)
            .await
            .map_err(|_| LabError(format!("{} did not answer", self.name)))?
    }

    pub(super) async fn call(&mut self, op: Op) -> LabResult<()> {
        self.send(&op).await?;
        self.done().await
    }

    /// Ends the work and releases the lock with the owner token.
    pub(super) async fn end_work(&mut self) -> LabResult<()> {
        self.call(Op::Exit).await?;
        self.call(Op::Release { how: How::Token }).await
    }

    /// Waits for an event of this actor that `pick` accepts.
    pub(super) async fn wait_for(&mut self, pick: impl Fn(&What) -> bool) -> LabResult<Event> {
        let name = self.name.clone();
        let wait = async {
            loop {
                match self.rx.recv().await {
                    Some(Line::Event(e)) if pick(&e.what) => return Ok(e),
                    Some(Line::Failed(e)) => return Err(LabError(format!("{name}: {e}"))),
                    Some(_) => {}
                    None => return Err(LabError(format!("{name} exited unexpectedly"))),
                }
            }
        };
        tokio::time::timeout(ANSWER_WITHIN, wait)
            .await
            .map_err(|_| LabError(format!("{} never did what was expected", self.name)))?
    }

    /// Sends `signal` to the actor (SIGSTOP and SIGCONT freeze and thaw it).
    pub(super) fn signal(&self, signal: Signal) {
        let _ = kill(Pid::from_raw(self.pid), signal);
    }

    pub(super) fn kill(&self) {
        self.signal(Signal::SIGKILL);
    }

    /// Closes stdin (the actor exits), waits for it and for the last of its events.
    pub(super) async fn finish(mut self) {
        drop(self.stdin.take());
        self.signal(Signal::SIGCONT);
        if tokio::time::timeout(Duration::from_secs(10), self.child.wait())
            .await
            .is_err()
        {
            let _ = self.child.start_kill();
            let _ = self.child.wait().await;
        }
        if let Some(reader) = self.reader.take() {
            let _ = reader.await;
        }
    }
}

impl Drop for Proc {
    /// `kill_on_drop` kills and reaps the child; forget its pid first, so that no later
    /// signal can reach a process that reused it.
    fn drop(&mut self) {
        children::forget(self.pid);
    }
}
