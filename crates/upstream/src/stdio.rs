//! Child processes that speak MCP on stdio: started in a process group of
//! their own that dies with the server, with only the environment they
//! need, their stderr lines sent to our log.

use std::process::Stdio;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};
use tokio::process::{Child, ChildStderr, ChildStdin, ChildStdout, Command};

use executor_store::secrets::SecretString;

use crate::env::scrub_env_text;

/// The server's variables a child inherits; everything else it gets from
/// the integration's `--env`. The server's own settings (its secret key,
/// its database URL) never reach an upstream.
const INHERITED_ENV: &[&str] = &["PATH", "HOME", "USER", "LANG", "LC_ALL", "TMPDIR", "TZ"];

/// Longest stderr line logged; the rest of a longer one is dropped.
const MAX_STDERR_LINE: u64 = 4096;

/// A running child: its pipes, and the guard that ends its process group.
pub struct StdioChild {
    pub stdin: ChildStdin,
    pub stdout: ChildStdout,
    pub guard: ChildGuard,
}

/// Kills the child's whole process group when dropped (the session it
/// serves closed, the integration was removed, the server stops), and
/// reaps the child.
pub struct ChildGuard {
    pgid: i32,
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        if self.pgid > 0 {
            // SAFETY: kill(2) with a negative pid signals the group the
            // child leads; no memory is touched.
            unsafe {
                libc::kill(-self.pgid, libc::SIGKILL);
            }
        }
    }
}

/// Starts `command` with `args` and `env`. Err says why it could not start
/// (for the operator and the agent: it names the command, not a path of
/// ours).
pub fn spawn(
    namespace: &str,
    command: &str,
    args: &[String],
    env: &[(String, SecretString)],
) -> Result<StdioChild, String> {
    let mut cmd = Command::new(command);
    cmd.args(args)
        .env_clear()
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    for name in INHERITED_ENV {
        if let Some(value) = std::env::var_os(name) {
            cmd.env(name, value);
        }
    }
    cmd.envs(env.iter().map(|(name, value)| (name, value.expose())));
    let parent = std::process::id() as libc::pid_t;
    // SAFETY: runs in the forked child before exec; prctl, getppid and
    // _exit are async-signal-safe and nothing is allocated.
    unsafe {
        cmd.pre_exec(move || {
            // The kernel kills the child when the thread that started it
            // (a runtime worker, alive as long as the server) is gone: no
            // child outlives a `kill -9` of the server.
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong);
            if libc::getppid() != parent {
                libc::_exit(1);
            }
            Ok(())
        });
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot start `{command}`: {e}"))?;
    let pgid = child.id().map_or(0, |id| id as i32);
    let (Some(stdin), Some(stdout), Some(stderr)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        return Err(format!(
            "cannot start `{command}`: its pipes were not opened"
        ));
    };
    tokio::spawn(log_stderr(namespace.to_string(), stderr, env.to_vec()));
    tokio::spawn(reap(namespace.to_string(), child));
    Ok(StdioChild {
        stdin,
        stdout,
        guard: ChildGuard { pgid },
    })
}

/// Waits for the child so that it never lingers as a zombie.
async fn reap(namespace: String, mut child: Child) {
    match child.wait().await {
        Ok(status) => tracing::info!(namespace, %status, "upstream MCP child exited"),
        Err(e) => tracing::warn!(namespace, error = %e, "cannot wait for an upstream MCP child"),
    }
}

/// Each stderr line of the child as a log event (never to the agent), its
/// `--env` values scrubbed.
async fn log_stderr(namespace: String, stderr: ChildStderr, env: Vec<(String, SecretString)>) {
    let mut reader = BufReader::new(stderr);
    let mut line = Vec::new();
    loop {
        line.clear();
        let read = (&mut reader)
            .take(MAX_STDERR_LINE)
            .read_until(b'\n', &mut line)
            .await;
        match read {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        if line.last() != Some(&b'\n') && !skip_rest_of_line(&mut reader).await {
            return;
        }
        let text = scrub_env_text(&env, String::from_utf8_lossy(&line).into_owned());
        tracing::info!(target: "executor_upstream::stderr", namespace, "{}", text.trim_end());
    }
}

/// Reads past the end of an over-long line, a bounded piece at a time;
/// false at the end of the stream.
async fn skip_rest_of_line(reader: &mut BufReader<ChildStderr>) -> bool {
    let mut piece = Vec::new();
    loop {
        piece.clear();
        match reader
            .take(MAX_STDERR_LINE)
            .read_until(b'\n', &mut piece)
            .await
        {
            Ok(0) | Err(_) => return false,
            Ok(_) if piece.last() == Some(&b'\n') => return true,
            Ok(_) => {}
        }
    }
}
