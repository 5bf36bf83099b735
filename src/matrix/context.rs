//! What every cell of a running matrix shares: the definition, the matrix's id, where the cells
//! run, the display and the signal handler (`runner.rs` builds it; `cell.rs` runs a cell in it).

use std::sync::Arc;
use std::time::Duration;

use super::Matrix;
use super::display::Display;
use firedup::host::Host;
use firedup::session::interrupts::Interrupts;

pub(super) struct Ctx<'a> {
    pub m: &'a Matrix,
    pub matrix_id: &'a str,
    pub grace: Duration,
    pub fail_fast: bool,
    pub allow_dirty: bool,
    pub display: &'a Display,
    pub predecessors: Vec<Vec<(usize, usize)>>,
    /// Where the cells run: this machine, or the matrix's SSH host.
    pub host: Arc<dyn Host>,
    /// The one signal handler: each running cell is registered with it.
    pub interrupts: &'a Interrupts,
}
