//! `executor`: the binary. Parses the command line (`cli.rs`), resolves it
//! into the crates' configs (`config.rs`), builds the shared parts
//! (`wiring.rs`) and runs the chosen command (`commands/`, one file per
//! command group). This file only sets up the process: allocator, log,
//! async runtime, exit status.

mod cli;
mod commands;
mod config;
mod wiring;

use clap::Parser;

use cli::{Cli, Command, LogFormat};

/// A server's allocator: the request path allocates and frees many small
/// objects across threads, where glibc's malloc cost about a fifth of the instructions of
/// `tools/list` (docs/performance.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The log filter of `serve` and `mcp` when `RUST_LOG` is not set.
const SERVER_LOG: &str = "info,rmcp=warn";
/// The log filter of every other command when `RUST_LOG` is not set.
const COMMAND_LOG: &str = "warn";

pub(crate) type AnyResult<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let log_format = cli.global.log_format;
    // Servers log what they do; a command the operator typed prints its
    // answer, and only warnings and errors beside it (RUST_LOG asks for more).
    let serving = matches!(cli.command, Command::Serve(_) | Command::Mcp(_));
    init_tracing(log_format, if serving { SERVER_LOG } else { COMMAND_LOG });
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    match runtime.block_on(commands::run(cli)) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            let e = with_causes(e.as_ref());
            match log_format {
                // A log collector reads every line of stderr as JSON.
                LogFormat::Json => tracing::error!(error = %e, "executor stopped"),
                LogFormat::Text => eprintln!("error: {e}"),
            }
            std::process::ExitCode::FAILURE
        }
    }
}

/// An error and the chain of its sources: "cannot configure TLS: <why>".
fn with_causes(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// The log goes to stderr. Colour codes only reach a terminal (and not with
/// `NO_COLOR`): in a file or a pipe they are noise for whoever reads it.
fn init_tracing(format: LogFormat, default_filter: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_filter));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Json => builder.json().with_ansi(false).init(),
        LogFormat::Text => {
            let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
            let terminal = std::io::IsTerminal::is_terminal(&std::io::stderr());
            builder.with_ansi(terminal && !no_color).init()
        }
    }
}
