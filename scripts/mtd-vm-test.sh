#!/usr/bin/env bash
# DFFS on real Linux MTD: boots a Debian kernel in QEMU (TCG; no KVM needed) with nandsim
# (128 MiB, 2 KiB pages, 128 KiB blocks) and mtdram, and runs the dffs binary against
# /dev/mtdN inside the VM. Prints one line per check (`PASS name: detail` or `FAIL name:
# detail`) and exits non-zero if any check failed or did not run. See docs/MTD.md.
#
#   scripts/mtd-vm-test.sh            # builds target/release/dffs, runs every check
#   DFFS=path/to/dffs scripts/mtd-vm-test.sh
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
    ln -s "../d$d/f1.bin" "$TREE/d$d/sub/link"
done
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
for m in virtio_pci virtio_blk fuse mtd nand nandcore bch mtdram; do add_mod "$m"; done
add_mod nandsim
echo "${order[@]}" > "$IR/mods/order"
cp -a "$TREE" "$IR/tree"
cp "$ROOT/scripts/mtd-vm-init.sh" "$IR/init"
chmod +x "$IR/init"
(cd "$IR" && find . | cpio -o -H newc --quiet | gzip -1) > "$WORK/initramfs.gz"

# --- boot ----------------------------------------------------------------------------------
start=$(date +%s)
timeout "${VM_TIMEOUT:-1500}" qemu-system-x86_64 -machine q35 -accel tcg -m 1024 -smp 1 \
    -kernel "$VMLINUZ" -initrd "$WORK/initramfs.gz" \
    -append "console=ttyS0 quiet panic=-1 rdinit=/init" \
    -drive file="$WORK/host.img",format=raw,if=virtio,readonly=on \
    -drive file="$WORK/dump.img",format=raw,if=virtio \
    -nographic -no-reboot > "$LOG" 2>&1 || true
took=$(( $(date +%s) - start ))
tr -d '\r' < "$LOG" | grep -oE '(PASS|FAIL) [a-z-]+: .*' > "$WORK/results" || true

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

cat "$WORK/results"
expected=(nandsim format-copy remount-compare fsck dump pack-nandwrite bad-blocks bitflips kill-recover nor-mtdram host-unpack)
fail=0
for e in "${expected[@]}"; do
    if ! grep -q "^PASS $e:" "$WORK/results"; then
        grep -q "^FAIL $e:" "$WORK/results" || echo "FAIL $e: did not run (see $LOG)"
        fail=1
    fi
done
echo "mtd-vm-test: ${#expected[@]} checks, VM ran ${took} s, $( [ $fail = 0 ] && echo all passed || echo FAILED )"
exit $fail
