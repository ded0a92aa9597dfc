#!/bin/sh
# /init of the VM that scripts/mtd-vm-test.sh boots: runs DFFS on nandsim and mtdram and
# prints one `PASS name: detail` / `FAIL name: detail` line per check on the console.
# /dev/vda: the image packed on the host (input); /dev/vdb: where the chip's dump goes.
export PATH=/bin:/sbin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mount -t tmpfs tmp /tmp
echo 1 > /proc/sys/kernel/printk

for m in $(cat /mods/order); do
    case $m in nandsim | mtdram | phram) continue ;; esac
    insmod /mods/$m.ko || echo "insmod $m failed"
done

# Each line ends with the VM's uptime, so that the log shows where the time goes.
up() { cut -d' ' -f1 /proc/uptime; }
pass() { echo "PASS $1: $2 [at $(up) s]"; }
fail() { echo "FAIL $1: $2 [at $(up) s]"; }
NAND_ID="id_bytes=0x20,0xf1,0x00,0x15"

# Waits for every dffs process (a session saving after umount) to end.
settle() {
    i=0
    while pidof dffs >/dev/null && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
}
mounted() { grep -q " $1 fuse" /proc/mounts; }
unmount() { umount "$1" 2>/dev/null || umount -l "$1"; settle; }

# ---- power-cut boots: NOR on phram over RAM that QEMU keeps in a host file -----------------
# The host boots the VM with its RAM in a shared file and 16 MiB at 0x30000000 reserved
# (memmap=), which phram makes an MTD device. Killing QEMU leaves that memory, every store
# that reached it included, in the file: a power cut of the chip at an arbitrary instant.
# dffs_mode=cycle: recover, report every file (HAVE name md5) and fsck, then write files with
# fsync and report each one whose fsync returned (SYNCED name md5) until QEMU is killed.
# dffs_mode=check: the same report, then power off.
mode=$(tr ' ' '\n' < /proc/cmdline | sed -n 's/^dffs_mode=//p')
if [ -n "$mode" ]; then
    round=$(tr ' ' '\n' < /proc/cmdline | sed -n 's/^dffs_round=//p')
    insmod /mods/phram.ko phram=cutnor,0x30000000,16777216,65536 || echo "FAIL phram: no device"
    dev=/dev/$(grep -l cutnor /sys/class/mtd/mtd*/name | head -1 | cut -d/ -f5)
    dffs info "$dev" > /dev/null 2>&1 || { dffs format "$dev" > /dev/null && echo "FORMATTED $dev"; }
    if dffs mount "$dev" /mnt > /tmp/mount.out 2>&1; then
        echo "MOUNTED $(date +%s)"
        for f in /mnt/*; do
            [ -f "$f" ] && echo "HAVE ${f#/mnt/} $(md5sum < "$f" | cut -d' ' -f1)"
        done
        unmount /mnt
        if dffs fsck "$dev" > /tmp/fsck.out 2>&1; then echo "FSCK clean"; else echo "FSCK $(tr '\n' ' ' < /tmp/fsck.out)"; fi
    else
        echo "MOUNT-FAILED $(tr '\n' ' ' < /tmp/mount.out)"
    fi
    if [ "$mode" = cycle ]; then
        dffs mount "$dev" /mnt > /tmp/mount.out 2>&1
        echo "WRITING"
        n=0
        while true; do
            n=$((n + 1)); name=c${round}f$n
            head -c $(( (n * 7919) % 40000 + 1 )) /dev/urandom > /tmp/src
            dd if=/tmp/src of=/mnt/$name bs=4096 conv=fsync 2>/dev/null || { echo "WRITE-FAILED $name"; sleep 1; continue; }
            echo "SYNCED $name $(md5sum < /tmp/src | cut -d' ' -f1)"
            # Delete some older files now and then, so that GC and free space churn too.
            [ $((n % 5)) = 0 ] && [ -f /mnt/c${round}f$((n - 3)) ] && rm /mnt/c${round}f$((n - 3)) && sync && echo "REMOVED c${round}f$((n - 3))"
        done
    fi
    echo "VM-DONE"
    poweroff -f
fi

load_nandsim() {
    rmmod nandsim 2>/dev/null
    insmod /mods/nandsim.ko $NAND_ID "$@" || return 1
    [ -c /dev/mtd0 ] || mdev -s 2>/dev/null
    grep -q '^mtd0: 08000000 00020000' /proc/mtd
}

# ---- nandsim ---------------------------------------------------------------------------------
if load_nandsim; then
    pass nandsim "$(grep mtd0 /proc/mtd | tr -d '"'), writesize $(cat /sys/class/mtd/mtd0/writesize), oobsize $(cat /sys/class/mtd/mtd0/oobsize), subpage $(cat /sys/class/mtd/mtd0/subpagesize)"
else
    fail nandsim "no 128 MiB mtd0: $(cat /proc/mtd | tr '\n' ' ')"
    poweroff -f
fi

# ---- format, copy a tree in through FUSE, unmount -------------------------------------------
copy_in() { # DEV DIRS...
    dev=$1; shift
    dffs mount "$dev" /mnt > /tmp/mount.out 2>&1 || { cat /tmp/mount.out; return 1; }
    for d in "$@"; do cp -a "$d" /mnt/ || { unmount /mnt; return 1; }; done
    unmount /mnt
}
# One line per entry of the tree under $1: type, path, mode, and the content's md5 and size
# (files) or the target (symlinks). busybox diff -r follows symlinks and exits 0 when it
# cannot open a file, so trees are compared through this instead.
manifest() {
    (cd "$1" && find . | sort | while read -r p; do
        if [ -L "$p" ]; then echo "L $p -> $(readlink "$p")"
        elif [ -d "$p" ]; then echo "D $p $(stat -c %a "$p")"
        else echo "F $p $(stat -c '%a %s' "$p") $(md5sum < "$p" | cut -d' ' -f1)"; fi
    done)
}
compare() { # DEV SRC [SUBDIRS]
    dev=$1; src=$2
    dffs mount "$dev" /mnt --ro > /tmp/mount.out 2>&1 || { cat /tmp/mount.out; return 1; }
    ok=0
    if [ $# -gt 2 ]; then
        shift 2
        for d in "$@"; do
            manifest "$src/$d" > /tmp/want; manifest "/mnt/$d" > /tmp/got
            cmp -s /tmp/want /tmp/got || { diff /tmp/want /tmp/got > /tmp/diff.out; ok=1; }
        done
    else
        manifest "$src" > /tmp/want; manifest /mnt > /tmp/got
        cmp -s /tmp/want /tmp/got || { diff /tmp/want /tmp/got > /tmp/diff.out; ok=1; }
    fi
    echo "$(wc -l < /tmp/want) entries" > /tmp/compared
    unmount /mnt
    [ $ok = 0 ] || { head -c 400 /tmp/diff.out; return 1; }
}

# Format, copy, compare, fsck on $1 (a freshly loaded nandsim); on failure /tmp/why says which
# step failed and what it printed.
full_run() {
    dffs format /dev/mtd0 > /tmp/f.out 2>&1 || { echo "format: $(tr '\n' ' ' < /tmp/f.out)" > /tmp/why; return 1; }
    copy_in /dev/mtd0 /tree/. > /tmp/c.out 2>&1 || { echo "copy: $(tr '\n' ' ' < /tmp/c.out)" > /tmp/why; return 1; }
    compare /dev/mtd0 /tree > /tmp/c.out 2>&1 || { echo "compare: $(tr '\n' ' ' < /tmp/c.out)" > /tmp/why; return 1; }
    dffs fsck /dev/mtd0 > /tmp/fsck.out 2>&1 || { echo "fsck: $(tr '\n' ' ' < /tmp/fsck.out | cut -c1-900)" > /tmp/why; return 1; }
}
bad_blocks_check() {
    if ! load_nandsim badblocks=3,10,200,777,1000 bitflips=1; then
        fail bad-blocks "nandsim with badblocks= did not load"; return
    fi
    before=$(cat /sys/class/mtd/mtd0/corrected_bits 2>/dev/null || echo 0)
    if full_run; then
        bad=$(dffs info /dev/mtd0 --json | grep -m1 '"bad_blocks"' | tr -dc 0-9)
        if [ "${bad:-0}" -ge 5 ]; then
            pass bad-blocks "5 bad blocks given to nandsim, dffs info counts $bad; tree equal, fsck clean"
        else
            fail bad-blocks "dffs info counts ${bad:-?} bad blocks, nandsim has 5"
        fi
        # More reads, so that nandsim's rare flips (1 in 1024 page reads) show up.
        compare /dev/mtd0 /tree > /tmp/c.out 2>&1 && compare /dev/mtd0 /tree > /tmp/c.out 2>&1 \
            && dffs fsck /dev/mtd0 > /tmp/fsck.out 2>&1
        ok=$?
        after=$(cat /sys/class/mtd/mtd0/corrected_bits 2>/dev/null || echo 0)
        if [ $ok = 0 ] && [ $((after - before)) -gt 0 ]; then
            pass bitflips "$((after - before)) bit flips corrected by ECC during the run, every read equal, fsck clean"
        elif [ $ok = 0 ]; then
            fail bitflips "no bit flip happened (corrected_bits $before -> $after): nothing was tested"
        else
            fail bitflips "after bit flips: $(cat /tmp/c.out /tmp/fsck.out | tr '\n' ' ' | cut -c1-900)"
        fi
    else
        fail bad-blocks "with bitflips=1: $(cat /tmp/why)"
        fail bitflips "the run above failed with bit flips on"
    fi
}
only=$(tr ' ' '\n' < /proc/cmdline | sed -n 's/^dffs_only=//p')
if [ "$only" = bad-blocks ]; then
    for i in 1 2 3 4; do bad_blocks_check; done
    echo "VM-DONE"; poweroff -f
fi
t0=$(date +%s)
if dffs format /dev/mtd0 > /tmp/f.out 2>&1 && copy_in /dev/mtd0 /tree/.; then
    pass format-copy "$(cat /tmp/f.out | cut -c1-160); copied $(du -s /tree | cut -f1) KiB in $(( $(date +%s) - t0 )) s"
else
    fail format-copy "$(cat /tmp/f.out /tmp/mount.out 2>/dev/null | tr '\n' ' ' | cut -c1-300)"
fi
if r=$(compare /dev/mtd0 /tree 2>&1); then
    pass remount-compare "remounted read-only: $(cat /tmp/compared) (files, directories, symlinks: type, mode, size, md5, target) equal"
else
    fail remount-compare "$(echo "$r" | tr '\n' ' ' | cut -c1-300)"
fi
if dffs fsck /dev/mtd0 > /tmp/fsck.out 2>&1; then
    pass fsck "$(tr '\n' ' ' < /tmp/fsck.out | cut -c1-200)"
else
    fail fsck "$(tr '\n' ' ' < /tmp/fsck.out | cut -c1-300)"
fi

# ---- the chip's dump, for the host to open ----------------------------------------------------
if nanddump --oob --bb=padbad -q -f /dev/vdb /dev/mtd0 2>/tmp/dump.err; then
    sync
    pass dump "nanddump --oob of mtd0 written for the host"
else
    fail dump "$(tr '\n' ' ' < /tmp/dump.err)"
fi

# ---- an image packed on the host, written with nandwrite --oob --------------------------------
flash_erase -q /dev/mtd0 0 0
if nandwrite --oob -q /dev/mtd0 - < /dev/vda 2>/tmp/nw.err \
    && r=$(compare /dev/mtd0 /tree 2>&1) && dffs fsck /dev/mtd0 > /tmp/fsck.out 2>&1; then
    pass pack-nandwrite "host 'dffs pack' image, nandwrite --oob, mounted: tree equal, fsck clean"
else
    fail pack-nandwrite "$(cat /tmp/nw.err /tmp/fsck.out 2>/dev/null | tr '\n' ' ' | cut -c1-200) $r"
fi

# ---- bad blocks and bit flips ------------------------------------------------------------------
bad_blocks_check

# ---- programs and erases that fail: nandsim's weak pages and weak blocks ------------------------
# A weak page fails a program (and a weak block an erase) with even odds once it has been
# written (erased) the given number of times: the driver returns -EIO, DFFS must retire the
# block and put what it was writing elsewhere.
wp=""; for b in $(seq 8 2 40); do wp="$wp,$((b * 64)):0,$((b * 64 + 1)):0"; done
wb=""; for b in $(seq 9 2 41); do wb="$wb,$b:0"; done
if load_nandsim weakpages=${wp#,} weakblocks=${wb#,}; then
    if dffs format /dev/mtd0 > /tmp/f.out 2>&1 && copy_in /dev/mtd0 /tree/. \
        && r=$(compare /dev/mtd0 /tree 2>&1) && dffs fsck /dev/mtd0 > /tmp/fsck.out 2>&1; then
        bad=$(dffs info /dev/mtd0 --json | grep -m1 '"bad_blocks"' | tr -dc 0-9)
        kbad=$(cat /sys/class/mtd/mtd0/bad_blocks 2>/dev/null)
        if [ "${bad:-0}" -ge 1 ]; then
            pass program-erase-failures "weak pages in 17 blocks, weak blocks 17: $bad blocks retired (kernel: ${kbad:-?} marked bad); tree equal, fsck clean"
        else
            fail program-erase-failures "no block was retired: no program or erase failed, nothing was tested"
        fi
    else
        fail program-erase-failures "$(cat /tmp/f.out /tmp/mount.out /tmp/fsck.out 2>/dev/null | tr '\n' ' ' | cut -c1-300) $r"
    fi
else
    fail program-erase-failures "nandsim with weakpages=/weakblocks= did not load"
fi

# ---- the dffs process killed mid-write, then remounted -------------------------------------------
# nandsim lives in the VM's RAM, so killing QEMU would erase the chip; the cut here is the
# file-system process dying (SIGKILL) between or during its MTD calls, 3 rounds on one chip.
load_nandsim
dffs format /dev/mtd0 > /dev/null 2>&1
: > /tmp/synced
round=1; kill_ok=0; checked=0
while [ $round -le 3 ]; do
    dffs mount /dev/mtd0 /mnt --foreground > /tmp/kmount.out 2>&1 &
    dpid=$!
    i=0; while ! mounted /mnt && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
    (
        n=0
        while true; do
            n=$((n + 1)); name=r${round}f$n
            head -c $(( (n * 4099) % 60000 + 1 )) /dev/urandom > /tmp/src
            dd if=/tmp/src of=/mnt/$name bs=4096 conv=fsync 2>/dev/null || break
            echo "$(md5sum < /tmp/src | cut -d' ' -f1) $name" >> /tmp/synced
        done
    ) &
    wpid=$!
    sleep $((round + 2))
    kill -9 $dpid
    wait $dpid 2>/dev/null
    kill $wpid 2>/dev/null; wait $wpid 2>/dev/null
    umount -l /mnt 2>/dev/null
    settle
    if ! dffs mount /dev/mtd0 /mnt > /tmp/mount.out 2>&1; then
        fail kill-recover "round $round: remount failed: $(tr '\n' ' ' < /tmp/mount.out)"; kill_ok=1; break
    fi
    while read -r sum name; do
        got=$(md5sum < /mnt/$name 2>/dev/null | cut -d' ' -f1)
        if [ "$got" != "$sum" ]; then
            fail kill-recover "round $round: synced file $name lost or wrong"; kill_ok=1
        fi
        checked=$((checked + 1))
    done < /tmp/synced
    unmount /mnt
    dffs fsck /dev/mtd0 > /tmp/fsck.out 2>&1 || { fail kill-recover "round $round: fsck: $(tr '\n' ' ' < /tmp/fsck.out | cut -c1-200)"; kill_ok=1; }
    [ $kill_ok = 0 ] || break
    round=$((round + 1))
done
if [ $kill_ok = 0 ]; then
    pass kill-recover "3 rounds of SIGKILL mid-write: $(wc -l < /tmp/synced) synced files, $checked checks after remounts all equal, fsck clean"
fi

# ---- NOR: mtdram (a RAM-backed MTD device, bytes overwritten, 64 KiB erase blocks) ------------
if insmod /mods/mtdram.ko total_size=8192 erase_size=64; then
    dev=/dev/$(grep -l 'mtdram' /sys/class/mtd/mtd*/name | head -1 | cut -d/ -f5)
    if dffs format "$dev" > /tmp/f.out 2>&1 && copy_in "$dev" /tree/d1 /tree/d2 /tree/d3 \
        && r=$(compare "$dev" /tree d1 d2 d3 2>&1) && dffs fsck "$dev" > /tmp/fsck.out 2>&1; then
        pass nor-mtdram "$dev: $(cut -c1-120 /tmp/f.out); 3 directories copied, equal after remount, fsck clean"
    else
        fail nor-mtdram "$(cat /tmp/f.out /tmp/mount.out /tmp/fsck.out 2>/dev/null | tr '\n' ' ' | cut -c1-300) $r"
    fi
else
    fail nor-mtdram "mtdram did not load"
fi

sync
echo "VM-DONE"
poweroff -f
