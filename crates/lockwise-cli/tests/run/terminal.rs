//! Interactive commands on a terminal, and second signals.

use super::*;

/// A `lockwise` on a pseudo-terminal of its own, as in an interactive shell: script(1) makes
/// the pty the controlling terminal of a new session and relays its stdin to it, and the
/// pty's output (echo included) to its stdout. Its exit code is lockwise's.
pub(super) struct OnTerminal {
    pub(super) script: Child,
    pub(super) input: std::process::ChildStdin,
    pub(super) lines: std::sync::mpsc::Receiver<String>,
}

impl OnTerminal {
    pub(super) fn run(args: &[&str]) -> OnTerminal {
        let quote = |a: &str| format!("'{}'", a.replace('\'', r"'\''"));
        let line: Vec<String> = std::iter::once(BIN)
            .chain(args.iter().copied())
            .map(quote)
            .collect();
        let mut script = Command::new("script")
            .args(["-qec", &line.join(" "), "/dev/null"])
            .env_remove("LOCKWISE_URL")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("script(1) from util-linux");
        let input = script.stdin.take().expect("stdin");
        let output = script.stdout.take().expect("stdout");
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            use std::io::BufRead;
            for line in BufReader::new(output).lines().map_while(Result::ok) {
                let _ = tx.send(line.trim_end_matches('\r').to_owned());
            }
        });
        OnTerminal {
            script,
            input,
            lines,
        }
    }

    /// Types `text` on the terminal.
    pub(super) fn type_in(&mut self, text: &str) {
        use std::io::Write;
        self.input
            .write_all(text.as_bytes())
            .expect("write to the terminal");
        self.input.flush().expect("flush");
    }

    /// Waits up to `limit` for an output line ending with `wanted` (after the echo of a
    /// control character such as `^C`).
    pub(super) fn expect_line(&self, wanted: &str, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            match self.lines.recv_timeout(left) {
                Ok(line) if line.ends_with(wanted) => return true,
                Ok(_) => {}
                Err(_) => return false,
            }
        }
        false
    }

    /// lockwise's exit code, if it exits within `limit` (else its session is killed).
    pub(super) fn exit_code_within(&mut self, limit: Duration) -> Option<i32> {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if let Some(status) = self.script.try_wait().expect("wait") {
                return status.code();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }
}

impl Drop for OnTerminal {
    /// A hung lockwise: kill every process of the terminal's session (a stopped command
    /// ignores the hangup), then script.
    fn drop(&mut self) {
        if let Ok(Some(_)) = self.script.try_wait() {
            return;
        }
        let leader = proc_stats().find(|s| s.ppid == self.script.id() as i32);
        for stat in proc_stats().filter(|s| leader.as_ref().is_some_and(|l| s.session == l.pid)) {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(stat.pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        let _ = self.script.kill();
        let _ = self.script.wait();
    }
}

/// A prompt works under `lockwise run` in a terminal, as under flock(1): the command reads
/// the line typed (it is not stopped by SIGTTIN in a background process group) and lockwise
/// exits with its exit code.
#[test]
pub(super) fn an_interactive_command_reads_the_terminal() {
    let b = Backend::file();
    let url = b.url();
    let mut term = OnTerminal::run(&[
        "run",
        "--url",
        &url,
        "--key",
        "k",
        "--",
        "sh",
        "-c",
        "echo prompt; read x; echo \"got:$x\"; exit 4",
    ]);
    assert!(
        term.expect_line("prompt", Duration::from_secs(10)),
        "the command started"
    );
    term.type_in("hello\n");
    let echoed = term.expect_line("got:hello", Duration::from_secs(5));
    let code = term.exit_code_within(Duration::from_secs(5));
    assert!(echoed, "the command did not read the line typed");
    assert_eq!(
        code,
        Some(4),
        "lockwise did not exit with the command's code"
    );
}

/// Ctrl-C on the terminal ends a command waiting for input (exit 130, SIGINT), and the lock
/// is released.
#[test]
pub(super) fn ctrl_c_ends_an_interactive_command() {
    let b = Backend::file();
    let url = b.url();
    let mut term = OnTerminal::run(&[
        "run",
        "--url",
        &url,
        "--key",
        "k",
        "--",
        "sh",
        "-c",
        "echo prompt; read x; echo never",
    ]);
    assert!(
        term.expect_line("prompt", Duration::from_secs(10)),
        "the command started"
    );
    std::thread::sleep(Duration::from_millis(200)); // let it block in read
    term.type_in("\x03");
    assert_eq!(term.exit_code_within(Duration::from_secs(5)), Some(130));
    let again = lockwise(&url, "k", &[], &["true"]).output().expect("run");
    assert_eq!(code(&again), 0, "the lock was released: {again:?}");
}

/// Fields of /proc/PID/stat.
pub(super) struct ProcStat {
    pub(super) pid: i32,
    pub(super) ppid: i32,
    pub(super) session: i32,
}

pub(super) fn proc_stats() -> impl Iterator<Item = ProcStat> {
    std::fs::read_dir("/proc")
        .expect("/proc")
        .flatten()
        .filter_map(|entry| {
            let pid: i32 = entry.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(entry.path().join("stat")).ok()?;
            // pid (comm) state ppid pgrp session …
            let mut fields = stat.rsplit_once(')')?.1.split_whitespace().skip(1);
            let ppid = fields.next()?.parse().ok()?;
            let session = fields.nth(1)?.parse().ok()?;
            Some(ProcStat { pid, ppid, session })
        })
}

/// Waits up to `limit` for `child` to exit; kills it (and `pids`) and returns None if not.
pub(super) fn exit_within(child: &mut Child, limit: Duration, pids: &[i32]) -> Option<i32> {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if let Some(status) = child.try_wait().expect("wait") {
            return status.code();
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    for &pid in pids.iter().chain(&[child.id() as i32]) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    let _ = child.wait();
    None
}

/// A command that traps SIGINT and SIGTERM and keeps running: the first SIGINT sent to
/// lockwise reaches it, the second kills its whole process group (a background process that
/// ignores SIGINT included); lockwise exits 137 and releases the lock.
#[test]
pub(super) fn a_second_signal_kills_the_group() {
    use nix::sys::signal::{Signal, kill};
    let b = Backend::file();
    let key = b.key();
    let script = "trap 'echo got-signal' INT TERM; sleep 600 & echo \"grandchild $!\"; \
                  echo \"shell $$\"; echo started; while true; do sleep 0.05; done";
    let mut child = lockwise(&b.url(), &key, &[], &["sh", "-c", script])
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut out = BufReader::new(child.stdout.take().expect("stdout"));
    let pid_after = |out: &mut BufReader<_>, prefix: &str| -> i32 {
        let line = wait_for_line(out, Duration::from_secs(10), |l| l.starts_with(prefix))
            .expect("pid line");
        line[prefix.len()..].trim().parse().expect("pid")
    };
    let grandchild = pid_after(&mut out, "grandchild ");
    let shell = pid_after(&mut out, "shell ");
    wait_for_line(&mut out, Duration::from_secs(10), |l| l == "started").expect("started");
    let lockwise_pid = nix::unistd::Pid::from_raw(child.id() as i32);
    kill(lockwise_pid, Signal::SIGINT).expect("SIGINT");
    assert!(
        wait_for_line(&mut out, Duration::from_secs(5), |l| l == "got-signal").is_some(),
        "the first SIGINT reached the command"
    );
    std::thread::sleep(Duration::from_millis(300));
    assert!(alive(shell), "the command lingers after the first SIGINT");
    kill(lockwise_pid, Signal::SIGINT).expect("SIGINT");
    let exited = exit_within(&mut child, Duration::from_secs(3), &[shell, grandchild]);
    assert_eq!(exited, Some(137), "lockwise exits 128 + SIGKILL");
    assert!(!alive(shell), "the command survived the second SIGINT");
    assert!(!alive(grandchild), "the background process survived");
    let again = lockwise(&b.url(), &key, &[], &["true"])
        .output()
        .expect("run");
    assert_eq!(code(&again), 0, "the lock was released: {again:?}");
}

/// On a terminal, Ctrl-C reaches the command's group without lockwise: the second Ctrl-C
/// kills the group all the same (exit 137).
#[test]
pub(super) fn a_second_ctrl_c_kills_an_interactive_command() {
    let b = Backend::file();
    let url = b.url();
    let mut term = OnTerminal::run(&[
        "run",
        "--url",
        &url,
        "--key",
        "k",
        "--",
        "sh",
        "-c",
        "trap 'echo got-int' INT; echo prompt; while true; do sleep 0.05; done",
    ]);
    assert!(
        term.expect_line("prompt", Duration::from_secs(10)),
        "the command started"
    );
    term.type_in("\x03");
    assert!(
        term.expect_line("got-int", Duration::from_secs(5)),
        "the first Ctrl-C reached it"
    );
    std::thread::sleep(Duration::from_millis(300));
    term.type_in("\x03");
    assert_eq!(term.exit_code_within(Duration::from_secs(5)), Some(137));
}

/// `--verbose` prints to stderr how long lockwise waited (here for a holder of about 1 s) and
/// the fencing token the command gets; without it, lockwise prints nothing.
#[test]
pub(super) fn verbose_prints_the_wait_and_the_token() {
    let b = Backend::file();
    let key = b.key();
    let (mut holder, _out) = spawn_holder(&b, &key, &[], "echo started; sleep 1");
    let out = lockwise(
        &b.url(),
        &key,
        &["--verbose", "--wait", "10s"],
        &["sh", "-c", "echo $LOCKWISE_FENCING_TOKEN"],
    )
    .output()
    .expect("run");
    assert_eq!(code(&out), 0, "{out:?}");
    assert!(holder.wait().expect("holder").success());
    let token = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let line = stderr
        .lines()
        .find(|l| l.starts_with("lockwise: acquired lock"))
        .unwrap_or_else(|| panic!("no verbose line in {stderr:?}"));
    assert!(
        line.ends_with(&format!("; fencing token {token}")),
        "{line}"
    );
    let waited: f64 = line
        .split(" after ")
        .nth(1)
        .and_then(|rest| rest.split("s;").next())
        .and_then(|secs| secs.parse().ok())
        .unwrap_or_else(|| panic!("no time waited in {line:?}"));
    assert!((0.5..10.0).contains(&waited), "{line}");
    let quiet = lockwise(&b.url(), &key, &[], &["true"])
        .output()
        .expect("run");
    assert_eq!(code(&quiet), 0, "{quiet:?}");
    assert!(quiet.stderr.is_empty(), "{quiet:?}");
}
