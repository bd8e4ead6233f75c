//! The `gateway` binary: parse → run → exit code; nothing else.

fn main() -> std::process::ExitCode {
    gateway::cli::main()
}
