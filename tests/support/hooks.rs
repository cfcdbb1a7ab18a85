//! Hook-engine scripts for the tests: they run the worker in the background on this
//! host, in its own session, as a site's launcher would run it elsewhere.

// A launcher in four scripts: submit starts the worker in its own session and prints its pid;
// poll asks whether it lives (a zombie does not: it waits for whichever init reaps it); cancel
// kills its group and logs the job; fetch copies a "remote" run directory.

/// Saves the trial's JSON beside its run and prints `local-PID`.
pub const SUBMIT: &str = r#"#!/bin/sh
# $1: the hook's state directory. The trial arrives as JSON on stdin.
state="$1"
cat > "$RATCHET_OUT_DIR/submitted.json"
echo "submit for $RATCHET_TRIAL_ID" >&2
setsid sh -c 'eval "$RATCHET_WORKER"; echo $? > "$0/exit"' "$RATCHET_OUT_DIR" </dev/null >"$RATCHET_OUT_DIR/worker.log" 2>&1 &
echo "$RATCHET_OUT_DIR" > "$state/$!"
echo "local-$!" > "$state/name-$RATCHET_JOB_NAME"
echo "local-$!"
"#;
/// Prints the token of the job submitted under `$RATCHET_JOB_NAME`, or nothing.
pub const FIND: &str = r#"#!/bin/sh
cat "$1/name-$RATCHET_JOB_NAME" 2>/dev/null
exit 0
"#;
pub const POLL: &str = r#"#!/bin/sh
state="$1"; pid="${RATCHET_JOB#local-}"
out="$(cat "$state/$pid" 2>/dev/null)" || { echo "failed: unknown job $RATCHET_JOB"; exit 0; }
if [ -f "$out/exit" ]; then echo finished
elif [ -r "/proc/$pid/stat" ] && ! grep -q ') Z' "/proc/$pid/stat"; then echo running
# Looked at again: the worker may have ended between the first look and the second.
elif [ -f "$out/exit" ]; then echo finished
else echo "failed: worker $pid died without an exit status"; fi
"#;
pub const CANCEL: &str = r#"#!/bin/sh
state="$1"; pid="${RATCHET_JOB#local-}"
echo "$RATCHET_JOB" >> "$state/cancelled"
kill -9 "-$pid" 2>/dev/null
exit 0
"#;
pub const FETCH: &str = r#"#!/bin/sh
# The "remote" copy of every run directory is under $1/remote/<trial id>.
cp -R "$1/remote/$RATCHET_TRIAL_ID/." "$RATCHET_OUT_DIR/"
"#;
