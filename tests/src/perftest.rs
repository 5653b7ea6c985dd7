//! perftest's report-time clock check, retried in one place wherever a test runs perftest.
//!
//! At the end of a run perftest fits its cycle counter against the wall clock; on a loaded or
//! virtualised machine the fit can come out poor ("Correlation coefficient r^2 … < 0.9") and
//! perftest then refuses to print figures ("Can't produce a report") and exits non-zero. That
//! says nothing about the NIC, so such a run is repeated (the interop matrix does the same).

/// Runs of one perftest invocation at most: the first and two repeats.
pub const CLOCK_ATTEMPTS: u32 = 3;

/// Whether perftest's output (server or client, stdout or stderr) shows the clock check failing.
pub fn clock_check_failed(output: &str) -> bool {
    output.contains("Can't produce a report")
}

/// Calls `run` (one perftest run: server and client) again while [`clock_check_failed`] holds
/// for `output` of its result, at most [`CLOCK_ATTEMPTS`] times in all, and returns the last
/// result. Any other outcome, good or bad, is returned at once.
pub fn retry_clock_check<T>(
    what: &str,
    mut run: impl FnMut() -> T,
    output: impl Fn(&T) -> String,
) -> T {
    let mut attempt = 1;
    loop {
        let r = run();
        if attempt < CLOCK_ATTEMPTS && clock_check_failed(&output(&r)) {
            eprintln!(
                "{what}: perftest could not calibrate its clock (r^2 < 0.9, \"Can't produce a \
                 report\"); run {} of {CLOCK_ATTEMPTS}",
                attempt + 1
            );
            attempt += 1;
            continue;
        }
        return r;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_clock_failure_is_run_again_at_most_twice_and_nothing_else_is() {
        let bad = " Correlation coefficient r^2: 0.42 < 0.9\n Can't produce a report\n";
        let mut n = 0;
        let out = retry_clock_check(
            "t",
            || {
                n += 1;
                if n < 2 {
                    bad
                } else {
                    "ok"
                }
            },
            |s| s.to_string(),
        );
        assert_eq!((out, n), ("ok", 2));
        let mut n = 0;
        let out = retry_clock_check(
            "t",
            || {
                n += 1;
                bad
            },
            |s| s.to_string(),
        );
        assert_eq!((out, n), (bad, CLOCK_ATTEMPTS));
        let mut n = 0;
        retry_clock_check(
            "t",
            || {
                n += 1;
                "Couldn't connect"
            },
            |s| s.to_string(),
        );
        assert_eq!(n, 1);
    }
}
