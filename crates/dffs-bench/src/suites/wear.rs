//! Suite `wear` (being written).

use std::io::Write;

use crate::report::SuiteReport;
use crate::Options;

/// Runs the suite.
pub fn run(_opts: &Options) -> Result<SuiteReport, String> {
    Err("not yet".into())
}

/// The suite's tables.
pub fn tables(_out: &mut dyn Write, _rep: &SuiteReport) -> std::io::Result<()> {
    Ok(())
}
