#!/usr/bin/env bash
# Runs outside POSIX test suites on a fresh DFFS image mounted with `dffs mount`:
#   pjdfstest (cargo install pjdfstest), fsx (cargo install fsx), postmark (Debian package),
#   and a `cp -a` of a real tree in, unmount, mount, `diff -r`.
# Each suite gets its own fresh image and mount session, and the session's flash cost
# (--stats) is reported beside the suite's result. Prints a results table at the end.
#
# Needs: root (pjdfstest switches users; root mounts without fusermount3), /dev/fuse,
# `pjdfstest` and `fsx` on PATH (cargo install pjdfstest fsx), `postmark` (apt-get install
# postmark), a `tests` user and the `nogroup` group for pjdfstest (created here if missing),
# and the mount helper /sbin/mount.fuse.dffs (linked to $DFFS for the run if missing).
#
# Environment: DFFS=path/to/dffs (default: built here with --release), PRESET (default
# nand-slc-128m), FSX_OPS (default 3000), TREE (the tree for cp -a; default the Python
# standard library, /usr/lib/python3.*, about 50 MB), KEEP=1 keeps the work directory.
set -euo pipefail
cd "$(dirname "$0")/.."

preset=${PRESET:-nand-slc-128m}
fsx_ops=${FSX_OPS:-3000}
if [ -z "${DFFS:-}" ]; then
    cargo build --release -q -p dffs-cli
    DFFS=$PWD/target/release/dffs
fi
DFFS=$(realpath "$DFFS")
for tool in pjdfstest fsx postmark; do
    command -v "$tool" >/dev/null || { echo "posix-suites: $tool is not installed" >&2; exit 2; }
done
[ "$(id -u)" = 0 ] || { echo "posix-suites: run as root (pjdfstest switches users)" >&2; exit 2; }
id tests >/dev/null 2>&1 || echo 'tests:x:::pjdfstest dummy user:/:/usr/sbin/nologin' | newusers
getent group nogroup >/dev/null || groupadd nogroup

work=$(mktemp -d /tmp/dffs-posix.XXXXXX)
# Other users (pjdfstest switches to them) must reach the mount point.
chmod 755 "$work"
mnt=$work/mnt
mkdir -p "$mnt"
# pjdfstest's EROFS cases remount the file system read-only and back with mount(8), which
# needs the mount helper (see the README): install it for this run unless it is there.
helper=/sbin/mount.fuse.dffs
made_helper=0
if [ ! -e "$helper" ]; then
    ln -s "$DFFS" "$helper"
    made_helper=1
fi
cleanup() {
    if mountpoint -q "$mnt"; then umount "$mnt" 2>/dev/null || umount -l "$mnt"; fi
    [ "$made_helper" = 1 ] && rm -f "$helper"
    [ "${KEEP:-0}" = 1 ] || rm -rf "$work"
}
trap cleanup EXIT

# Starts a session on a fresh image named $1 (extra mount options follow).
start() {
    local name=$1; shift
    "$DFFS" format "$work/$name.img" --preset "$preset" >/dev/null
    "$DFFS" mount "$work/$name.img" "$mnt" --stats "$work/$name.stats.json" "$@" >/dev/null
}

# Ends the session: unmount, wait for the server to save the image, check it.
finish() {
    local name=$1
    umount "$mnt"
    for _ in $(seq 600); do
        [ -s "$work/$name.stats.json" ] && break
        sleep 0.1
    done
    "$DFFS" fsck "$work/$name.img" >/dev/null && echo clean || echo "NOT CLEAN"
}

cost() {
    python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); print("%d reads, %d programs, %d erases, %.2f s device time" % (s["reads"], s["programs"], s["erases"], s["sim_us"]/1e6))' "$1"
}

declare -a rows

# --- pjdfstest ---------------------------------------------------------------------------
# Two runs in one mount session. The first runs every case with remounts off. The second runs
# the EROFS cases, which remount the file system read-only and back (through the mount
# helper), in a process of their own: in one process they cannot pass on any file system,
# because open::einval_invalid_combination leaves a descriptor open for writing (nix's open
# returns a raw fd that the case never closes), and Linux refuses `remount,ro` while a file is
# open for writing (tmpfs fails them the same way).
pjd_config() {
    cat <<EOF
[features]
posix_fallocate = {}
utimensat = {}
utime_now = {}
rename_ctime = {}

[settings]
naptime = 0.01
allow_remount = $1

[dummy_auth]
entries = [
  ["nobody", "nogroup"],
  ["tests", "tests"],
]
EOF
}
pjd_config false >"$work/pjdfstest.toml"
pjd_config true >"$work/pjdfstest-erofs.toml"
start pjdfstest
mkdir -p "$work/secondary"  # another file system, for the EXDEV cases
(cd "$mnt" && RUST_BACKTRACE=0 pjdfstest -c "$work/pjdfstest.toml" -p "$mnt" -s "$work/secondary" \
    >"$work/pjdfstest.log" 2>&1) || true
(cd "$mnt" && RUST_BACKTRACE=0 pjdfstest -c "$work/pjdfstest-erofs.toml" -p "$mnt" \
    -s "$work/secondary" erofs >"$work/pjdfstest-erofs.log" 2>&1) || true
fsck=$(finish pjdfstest)
summary=$(grep '^Summary:' "$work/pjdfstest.log" || echo "Summary: none")
summary_erofs=$(grep '^Summary:' "$work/pjdfstest-erofs.log" || echo "Summary: none")
count() { echo "$1" | grep -o "[0-9]* $2" | cut -d' ' -f1; }
passed=$(($(count "$summary" passed) + $(count "$summary_erofs" passed)))
# Why each case failed; anything not explained here is a finding to look at.
failed_kinds=$(cat "$work/pjdfstest.log" "$work/pjdfstest-erofs.log" |
    awk '/^[a-z_0-9:]+ +FAILED$/ { name = $1; getline; print name "\t" $0 }' |
    awk -F'\t' '
        $0 ~ /EPERM/ || $0 ~ /link\(/ || $0 ~ /EMLINK/ { print "hard links"; next }
        $0 ~ /remount/ { print "remount refused"; next }
        { print "OTHER: " $1 }' | sort | uniq -c | awk '{c=$1; $1=""; printf "%s%s: %d", sep, substr($0,2), c; sep="; "}')
rows+=("pjdfstest | $passed passed of 398 (every case with remounts off: ${summary#Summary: }; the EROFS cases again in their own process: ${summary_erofs#Summary: }) | $fsck | $(cost "$work/pjdfstest.stats.json")")
echo "pjdfstest failures by cause: ${failed_kinds:-none}"

# --- fsx -----------------------------------------------------------------------------------
cat >"$work/fsx.toml" <<'EOF'
flen = 262144
[opsize]
max = 65536
min = 0
align = 1
[weights]
close_open = 1
read = 10
write = 10
mapread = 10
mapwrite = 10
invalidate = 1
truncate = 1
fsync = 1
fdatasync = 1
posix_fallocate = 1
punch_hole = 0
sendfile = 1
posix_fadvise = 1
copy_file_range = 1
EOF
start fsx
if (cd "$work" && fsx -N "$fsx_ops" -S 1 "$mnt/fsx.default" >"$work/fsx.default.log" 2>&1 &&
    fsx -N "$fsx_ops" -S 2 -f "$work/fsx.toml" "$mnt/fsx.all" >"$work/fsx.all.log" 2>&1); then
    fsx_result="$fsx_ops ops default + $fsx_ops ops all-but-punch-hole: OK"
else
    fsx_result="FAILED (see $work/fsx.*.log)"
fi
fsck=$(finish fsx)
rows+=("fsx | $fsx_result | $fsck | $(cost "$work/fsx.stats.json")")

# --- postmark ------------------------------------------------------------------------------
cat >"$work/postmark.cfg" <<EOF
set location $mnt
set subdirectories 100
set number 1000
set size 512 131072
set transactions 2000
set seed 42
run
quit
EOF
start postmark
if postmark "$work/postmark.cfg" >"$work/postmark.log" 2>&1 && grep -q 'Deleting subdirectories...Done' "$work/postmark.log"; then
    pm_result="completed: $(grep -m1 'seconds of transactions' "$work/postmark.log" | sed 's/^[[:space:]]*//')"
else
    pm_result="FAILED (see $work/postmark.log)"
fi
fsck=$(finish postmark)
rows+=("postmark | $pm_result | $fsck | $(cost "$work/postmark.stats.json")")

# --- cp -a round trip ------------------------------------------------------------------------
tree=${TREE:-$(ls -d /usr/lib/python3.* 2>/dev/null | head -n1)}
tree=${tree:-/etc}
start cpa
cp -a "$tree/." "$mnt/"
fsck=$(finish cpa)
"$DFFS" mount "$work/cpa.img" "$mnt" --ro >/dev/null
if diff -r --no-dereference "$tree" "$mnt" >"$work/cpa.diff" 2>&1; then
    cpa_result="$(find "$tree" | wc -l) entries, $(du -sh "$tree" | cut -f1) from $tree: diff -r clean after remount"
else
    cpa_result="DIFFERENCES (see $work/cpa.diff)"
fi
umount "$mnt"
rows+=("cp -a | $cpa_result | $fsck | $(cost "$work/cpa.stats.json")")

echo
echo "suite | result | fsck after unmount | flash cost of the session ($preset)"
echo "--- | --- | --- | ---"
printf '%s\n' "${rows[@]}"
[ "${KEEP:-0}" = 1 ] && echo "logs in $work"
