#!/usr/bin/env bash
# DFFS on real Linux MTD: boots a Debian kernel in QEMU (TCG; no KVM needed) with nandsim
# (128 MiB, 2 KiB pages, 128 KiB blocks) and mtdram, and runs the dffs binary against
# /dev/mtdN inside the VM. Prints one line per check (`PASS name: detail` or `FAIL name:
# detail`) and exits non-zero if any check failed or did not run. See docs/MTD.md.
#
#   scripts/mtd-vm-test.sh            # builds target/release/dffs, runs every check
#   DFFS=path/to/dffs scripts/mtd-vm-test.sh
#   ONLY=power-cut CUTS=20 scripts/mtd-vm-test.sh   # only the power-cut rounds, 20 of them
#   ONLY=bad-blocks scripts/mtd-vm-test.sh          # only bad blocks + bit flips, 4 times
#
# Needs (installed with apt-get when run as root and missing): qemu-system-x86, busybox-static,
# mtd-utils, cpio; the kernel comes from Debian's linux-image package (downloaded, not
# installed). Work files go to target/mtd-vm/.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
WORK=$ROOT/target/mtd-vm
mkdir -p "$WORK"
LOG=$WORK/console.log

need=()
command -v qemu-system-x86_64 >/dev/null || need+=(qemu-system-x86)
[ -x /bin/busybox ] && file -L /bin/busybox 2>/dev/null | grep -q static || dpkg -s busybox-static >/dev/null 2>&1 || need+=(busybox-static)
command -v nandwrite >/dev/null || need+=(mtd-utils)
command -v cpio >/dev/null || need+=(cpio)
if [ ${#need[@]} -gt 0 ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
    else
        echo "missing: ${need[*]} (install them, or run as root to have them installed)" >&2
        exit 2
    fi
fi
BUSYBOX=$(command -v busybox)

# --- the kernel: Debian's linux-image package, unpacked -------------------------------------
if [ ! -d "$WORK/kernel/boot" ]; then
    pkg=$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-[0-9]/ {print $2; exit}')
    (cd "$WORK" && rm -f linux-image-*.deb && apt-get download "$pkg" 2>/dev/null)
    rm -rf "$WORK/kernel"
    dpkg-deb -x "$WORK"/linux-image-*.deb "$WORK/kernel"
fi
VMLINUZ=$(ls "$WORK"/kernel/boot/vmlinuz-*)
KVER=${VMLINUZ##*/vmlinuz-}
MODS=$WORK/kernel/lib/modules/$KVER/kernel

# --- the binary ----------------------------------------------------------------------------
if [ -z "${DFFS:-}" ]; then
    cargo build --release -q -p dffs-cli
    DFFS=$ROOT/target/release/dffs
fi

# --- a tree to copy, and an image packed from it on the host ---------------------------------
TREE=$WORK/tree
rm -rf "$TREE" && mkdir -p "$TREE"
seed=1
for d in $(seq 1 12); do
    mkdir -p "$TREE/d$d/sub"
    for f in $(seq 1 10); do
        n=$(( (seed * 7919 + f * 104729) % 200000 ))
        head -c "$n" /dev/urandom > "$TREE/d$d/f$f.bin"
        seed=$((seed + 1))
    done
    printf 'small %s\n' "$d" > "$TREE/d$d/sub/note.txt"
    ln -s ../f1.bin "$TREE/d$d/sub/link"
done
ln -s /nowhere/at/all "$TREE/dangling"
chmod 600 "$TREE/d1/f1.bin"
chmod 750 "$TREE/d2"
: > "$TREE/empty"
head -c 3000000 /dev/urandom > "$TREE/big.bin"
"$DFFS" pack "$TREE" "$WORK/host.img" --preset nand-slc-128m -q 2>/dev/null || {
    rm -f "$WORK/host.img" "$WORK/host.img.sim"
    "$DFFS" pack "$TREE" "$WORK/host.img" --preset nand-slc-128m -q
}
IMG_BYTES=$(stat -c %s "$WORK/host.img")
rm -f "$WORK/dump.img"
truncate -s "$IMG_BYTES" "$WORK/dump.img"

# --- the initramfs -------------------------------------------------------------------------
IR=$WORK/initramfs
rm -rf "$IR"
mkdir -p "$IR"/{bin,sbin,dev,proc,sys,tmp,mnt,mods,etc,lib,lib64}
cp "$BUSYBOX" "$IR/bin/busybox"
for a in $("$BUSYBOX" --list); do [ "$a" = busybox ] || ln -sf busybox "$IR/bin/$a"; done
copy_with_libs() {
    cp "$1" "$IR/bin/"
    ldd "$1" | awk '/=> \// {print $3} /^[ \t]*\// {print $1}' | while read -r lib; do
        mkdir -p "$IR$(dirname "$lib")"
        cp -L "$lib" "$IR$lib"
    done
}
copy_with_libs "$DFFS"
for t in nandwrite nanddump flash_erase; do copy_with_libs "$(command -v $t)"; done
# Modules in dependency order.
declare -A seen
order=()
add_mod() {
    [ -n "${seen[$1]:-}" ] && return
    seen[$1]=1
    local f deps d
    f=$(find "$MODS" -name "$1.ko" | head -1)
    [ -n "$f" ] || { echo "module $1 not found in $KVER" >&2; exit 2; }
    deps=$(grep -ao 'depends=[a-z0-9_,-]*' "$f" | head -1 | cut -d= -f2 | tr ',' ' ')
    for d in $deps; do add_mod "$d"; done
    cp "$f" "$IR/mods/"
    order+=("$1")
}
for m in virtio_pci virtio_blk fuse mtd nand nandcore bch mtdram phram; do add_mod "$m"; done
add_mod nandsim
echo "${order[@]}" > "$IR/mods/order"
cp -a "$TREE" "$IR/tree"
cp "$ROOT/scripts/mtd-vm-init.sh" "$IR/init"
chmod +x "$IR/init"
(cd "$IR" && find . | cpio -o -H newc --quiet | gzip -1) > "$WORK/initramfs.gz"

# --- boot ----------------------------------------------------------------------------------
start=$(date +%s)
: > "$WORK/results"
[ "${ONLY:-}" = power-cut ] || timeout "${VM_TIMEOUT:-1500}" qemu-system-x86_64 -machine q35 -accel tcg -m 1024 -smp 1 \
    -kernel "$VMLINUZ" -initrd "$WORK/initramfs.gz" \
    -append "console=ttyS0 quiet panic=-1 rdinit=/init${ONLY:+ dffs_only=$ONLY}" \
    -drive file="$WORK/host.img",format=raw,if=virtio,readonly=on \
    -drive file="$WORK/dump.img",format=raw,if=virtio \
    -nographic -no-reboot > "$LOG" 2>&1 || true
took=$(( $(date +%s) - start ))
[ "${ONLY:-}" = power-cut ] || { tr -d '\r' < "$LOG" | grep -oE '(PASS|FAIL) [a-z-]+: .*' > "$WORK/results" || true; }

# --- host side of the interop check: the chip's dump opens on the host ------------------------
if grep -q '^PASS dump:' "$WORK/results"; then
    out=$WORK/unpacked
    rm -rf "$out"
    if "$DFFS" unpack "$WORK/dump.img" "$out" --preset nand-slc-128m >/dev/null 2>"$WORK/unpack.err" \
        && diff -r --no-dereference "$TREE" "$out" > "$WORK/unpack.diff" 2>&1; then
        echo "PASS host-unpack: nanddump --oob of the chip unpacked on the host equals the tree" >> "$WORK/results"
    else
        echo "FAIL host-unpack: $(head -c 300 "$WORK/unpack.err" "$WORK/unpack.diff" | tr '\n' ' ')" >> "$WORK/results"
    fi
fi

# --- power cuts: kill QEMU while DFFS writes to a NOR MTD device that survives the kill -------
# The VM's RAM is a shared host file; 16 MiB of it (reserved with memmap=) is the phram MTD
# device. Every store the guest made is in the file when QEMU dies, so the next boot finds the
# chip exactly as the cut left it. Each boot recovers, reports the files it has (HAVE) and
# fsck, then writes files with fsync and reports each one whose fsync returned (SYNCED) until
# the host kills QEMU, at a different moment each round. A last boot only reports.
CUTS=${CUTS:-6}
[ -z "${ONLY:-}" ] || [ "$ONLY" = power-cut ] || CUTS=0
VMRAM=$WORK/vmram
rm -f "$VMRAM" && truncate -s 1G "$VMRAM"
boot_cut() { # MODE ROUND LOG
    exec qemu-system-x86_64 -accel tcg -m 1G -smp 1 \
        -object memory-backend-file,id=ram,size=1G,mem-path="$VMRAM",share=on \
        -machine q35,memory-backend=ram \
        -kernel "$VMLINUZ" -initrd "$WORK/initramfs.gz" \
        -append "console=ttyS0 quiet panic=-1 rdinit=/init nokaslr memmap=16M\$0x30000000 dffs_mode=$1 dffs_round=$2" \
        -nographic -no-reboot > "$3" 2>&1
}
: > "$WORK/synced"
: > "$WORK/removed"
cut_fail=""
cut_checks=0
# Compares what a boot found (HAVE lines of LOG) with every file synced before it.
check_boot() { # LOG WHEN
    local log=$1 clean
    clean=$(tr -d '\r' < "$log")
    if ! grep -q 'MOUNTED' <<< "$clean"; then
        cut_fail="$2: mount failed: $(grep -o 'MOUNT-FAILED.*' <<< "$clean" | head -c 200)"; return
    fi
    grep -q 'FSCK clean' <<< "$clean" || { cut_fail="$2: $(grep -o 'FSCK .*' <<< "$clean" | head -c 200)"; return; }
    while read -r _ name sum; do
        got=$(grep -oE "HAVE $name [0-9a-f]{32}" <<< "$clean" | awk '{print $3}' || true)
        if grep -qx "REMOVED $name" "$WORK/removed"; then
            [ -z "$got" ] || [ "$got" = "$sum" ] || { cut_fail="$2: removed file $name came back changed"; return; }
        elif [ "$got" != "$sum" ]; then
            cut_fail="$2: synced file $name ${got:+has other content}${got:-is missing}"; return
        fi
        cut_checks=$((cut_checks + 1))
    done < "$WORK/synced"
}
cut_start=$(date +%s)
for r in $(seq 1 "$CUTS"); do
    log=$WORK/cut$r.log
    boot_cut cycle "$r" "$log" &
    qpid=$!
    for _ in $(seq 1 900); do grep -q WRITING "$log" 2>/dev/null && break; sleep 0.2; done
    sleep "$(( (r * 37) % 5 + 2 )).$(( (r * 53) % 10 ))"
    kill -9 "$qpid" 2>/dev/null
    wait "$qpid" 2>/dev/null || true
    [ "$r" = 1 ] || check_boot "$log" "boot $r (after cut $((r - 1)))"
    [ -z "$cut_fail" ] || break
    tr -d '\r' < "$log" | grep -oE 'SYNCED [a-z0-9]+ [0-9a-f]{32}' >> "$WORK/synced" || true
    tr -d '\r' < "$log" | grep -oE 'REMOVED [a-z0-9]+' >> "$WORK/removed" || true
done
if [ -z "$cut_fail" ] && [ "$CUTS" -gt 0 ]; then
    timeout 600 bash -c "$(declare -f boot_cut); VMRAM='$VMRAM' VMLINUZ='$VMLINUZ' WORK='$WORK'; boot_cut check 0 '$WORK/cutcheck.log'" || true
    check_boot "$WORK/cutcheck.log" "final boot"
fi
if [ "$CUTS" = 0 ]; then
    :
elif [ -z "$cut_fail" ]; then
    echo "PASS power-cut: $CUTS kills of QEMU mid-write on phram NOR (16 MiB, 64 KiB blocks): $(wc -l < "$WORK/synced") synced files, $cut_checks checks after reboots all equal, fsck clean each boot ($(( $(date +%s) - cut_start )) s)" >> "$WORK/results"
else
    echo "FAIL power-cut: $cut_fail" >> "$WORK/results"
fi

cat "$WORK/results"
expected=(nandsim format-copy remount-compare fsck dump pack-nandwrite bad-blocks bitflips program-erase-failures kill-recover nor-mtdram host-unpack power-cut)
fail=0
[ "${ONLY:-}" = power-cut ] && expected=(power-cut)
[ "${ONLY:-}" = bad-blocks ] && expected=(bad-blocks bitflips)
for e in "${expected[@]}"; do
    if ! grep -q "^PASS $e:" "$WORK/results"; then
        grep -q "^FAIL $e:" "$WORK/results" || echo "FAIL $e: did not run (see $LOG)"
        fail=1
    fi
done
echo "mtd-vm-test: ${#expected[@]} checks, VM ran ${took} s, $( [ $fail = 0 ] && echo all passed || echo FAILED )"
exit $fail
