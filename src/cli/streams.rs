//! Standard output and error, written so that a reader who stops reading never ends the command.
//!
//! promoter keeps Rust's default for SIGPIPE (ignored): a write to a connection that the server or
//! a load balancer reset must be a failed request, handled by the retry policy, never the end of
//! the process (rustls writes with `writev`, which raises SIGPIPE on a reset socket where `send`
//! does not). The price is that `println!` panics on a closed pipe, so the commands write here:
//! when the reader of stdout is gone (`promoter simulate -o json | head`), the rest of the output is
//! dropped, quietly, and the command ends as it would have, with its own exit code (`status -w`
//! stops watching: nobody reads it). A failed write to stderr is dropped as well: there is nowhere
//! left to say it.

use std::io::{ErrorKind, Write};
use std::sync::atomic::{AtomicBool, Ordering};

static STDOUT_CLOSED: AtomicBool = AtomicBool::new(false);

/// Writes `text` to stdout. A closed pipe is not an error (see the module docs); any other failed
/// write (a full disk under a redirect) is.
pub fn out(text: &str) -> anyhow::Result<()> {
    if closed() {
        return Ok(());
    }
    let mut stdout = std::io::stdout().lock();
    match stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == ErrorKind::BrokenPipe => {
            STDOUT_CLOSED.store(true, Ordering::Relaxed);
            Ok(())
        }
        Err(e) => Err(anyhow::Error::new(e).context("writing to standard output")),
    }
}

/// [`out`] with a newline.
pub fn line(text: &str) -> anyhow::Result<()> {
    out(&format!("{text}\n"))
}

/// Whether stdout's reader has gone.
pub fn closed() -> bool {
    STDOUT_CLOSED.load(Ordering::Relaxed)
}

/// Writes `text` and a newline to stderr, if anyone reads it.
pub fn err(text: &str) {
    let _ = writeln!(std::io::stderr().lock(), "{text}");
}
