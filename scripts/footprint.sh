#!/usr/bin/env bash
# footprint.sh - DFFS's code size and RAM on a Cortex-M4F, in the smallest and the default RAM
# configuration, on the nor-qspi-16m device (16 MiB QSPI NOR, 256 B pages, 64 KiB blocks).
#
# Owns only measuring and printing: it builds examples/firmware (thumbv7em-none-eabihf,
# opt-level z, LTO, panic=abort) once per configuration and reads its sections; runs the same
# workload (dffs_capi::workload) on the host through `dffs info --ram` for the heap figures;
# and, when qemu-system-arm is installed, runs the firmware under QEMU (mps2-an386) for the
# heap and stack it really used on the 32-bit target. It never changes a source file.
#
# Usage: scripts/footprint.sh            (a markdown table on stdout, details on stderr)
# Needs: cargo with the thumbv7em-none-eabihf target (rustup target add thumbv7em-none-eabihf),
# python3, one of arm-none-eabi-size / llvm-size / size; optional: qemu-system-arm.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
FW=$ROOT/examples/firmware
TARGET=thumbv7em-none-eabihf
OUT=$ROOT/target/footprint
mkdir -p "$OUT"

if command -v rustup >/dev/null && ! rustup target list --installed | grep -qx "$TARGET"; then
    rustup target add "$TARGET" >&2
fi
SIZE=""
for tool in arm-none-eabi-size llvm-size size; do
    if command -v "$tool" >/dev/null; then SIZE=$tool; break; fi
done
[ -n "$SIZE" ] || { echo "footprint.sh: no size tool (apt-get install binutils-arm-none-eabi)" >&2; exit 1; }
NM=""
for tool in arm-none-eabi-nm llvm-nm nm; do
    if command -v "$tool" >/dev/null; then NM=$tool; break; fi
done

features_of() {
    case $1 in
        smallest) echo "--no-default-features --features smallest" ;;
        default) echo "--no-default-features --features ram-default" ;;
    esac
}

# Sections of an ELF as "name size" lines (SysV format: every size tool above prints it).
sections() { "$SIZE" -A "$1" | awk 'NF >= 3 && $1 ~ /^\./ { print $1, $2 }'; }

for cfg in smallest default; do
    # shellcheck disable=SC2046
    (cd "$FW" && cargo build --quiet --release --target "$TARGET" $(features_of $cfg))
    cp "$FW/target/$TARGET/release/dffs-firmware" "$OUT/firmware-$cfg.elf"
    sections "$OUT/firmware-$cfg.elf" > "$OUT/sections-$cfg.txt"
    # The heap arena's size (a static in .bss): the symbol size of `ARENA`.
    arena=0
    if [ -n "$NM" ]; then
        arena=$("$NM" -S "$OUT/firmware-$cfg.elf" | python3 -c "import sys
print(sum(int(p[1], 16) for p in (l.split() for l in sys.stdin) if len(p) == 4 and 'ARENA' in p[3]))")
    fi
    echo "${arena:-0}" > "$OUT/arena-$cfg.txt"
    if command -v qemu-system-arm >/dev/null; then
        # shellcheck disable=SC2046
        (cd "$FW" && cargo build --quiet --release --target "$TARGET" $(features_of $cfg),qemu)
        timeout 120 qemu-system-arm -cpu cortex-m4 -machine mps2-an386 -nographic \
            -semihosting-config enable=on,target=native \
            -kernel "$FW/target/$TARGET/release/dffs-firmware" > "$OUT/qemu-$cfg.txt"
        cat "$OUT/qemu-$cfg.txt" >&2
    else
        echo "footprint.sh: qemu-system-arm not found; no on-target heap and stack figures" >&2
        : > "$OUT/qemu-$cfg.txt"
    fi
done

cargo run --quiet -p dffs-cli -- info --ram --preset nor-qspi-16m --json > "$OUT/host-ram.json"
cargo run --quiet -p dffs-cli -- info --ram --preset nor-qspi-16m --erase-size 4KiB --json \
    > "$OUT/host-ram-4k.json"

python3 - "$OUT" <<'PY'
import json, re, sys
out = sys.argv[1]
def kib(b): return f"{b / 1024:.1f} KiB"
host = {c["config"]: c for c in json.load(open(f"{out}/host-ram.json"))["configs"]}
host4k = {c["config"]: c for c in json.load(open(f"{out}/host-ram-4k.json"))["configs"]}
rows = []
for cfg in ["smallest", "default"]:
    sec = dict((n, int(s)) for n, s in (l.split() for l in open(f"{out}/sections-{cfg}.txt")))
    code = sec.get(".vector_table", 0) + sec.get(".text", 0) + sec.get(".rodata", 0)
    data = sec.get(".data", 0)
    bss = sec.get(".bss", 0) + sec.get(".uninit", 0)
    arena = int(open(f"{out}/arena-{cfg}.txt").read().strip() or 0)
    q = open(f"{out}/qemu-{cfg}.txt").read()
    m = dict(re.findall(r"(\w+) (-?\d+)", q))
    rows.append((cfg, code, sec.get(".text", 0), sec.get(".rodata", 0), data, bss, arena, m,
                 host[cfg], host4k[cfg]))
print("| section (bytes) | " + " | ".join(r[0] for r in rows) + " |")
print("|---|" + "---|" * len(rows))
for name in [".vector_table", ".text", ".rodata", ".data", ".bss"]:
    vals = [dict((n, int(v)) for n, v in (l.split() for l in open(f"{out}/sections-{r[0]}.txt"))).get(name, 0) for r in rows]
    print(f"| {name} | " + " | ".join(str(v) for v in vals) + " |")
print()
print("| configuration | code (.text+.rodata+vectors) | .data | .bss (of it heap arena) "
      "| heap after mount, target | heap peak, target | stack peak, target "
      "| heap after mount / peak, host 64-bit | same with 4 KiB sectors, host |")
print("|---|---|---|---|---|---|---|---|---|")
for cfg, code, text, ro, data, bss, arena, m, h, h4 in rows:
    t = lambda k: kib(int(m[k])) if k in m else "n/a"
    print(f"| {cfg} | {code} B ({kib(code)}) | {data} B | {bss} B ({kib(arena)}) "
          f"| {t('heap_after_mount')} | {t('heap_peak')} | {t('stack_peak')} "
          f"| {kib(h['after_mount_bytes'])} / {kib(h['peak_bytes'])} "
          f"| {kib(h4['after_mount_bytes'])} / {kib(h4['peak_bytes'])} |")
s = rows[0]
after = int(s[7].get("heap_after_mount", s[8]["after_mount_bytes"]))
peak = int(s[7].get("heap_peak", s[8]["peak_bytes"]))
goal = 16 * 1024
print()
print(f"Goal (smallest on nor-qspi-16m under 16 KiB): after mount {kib(after)} "
      f"{'meets' if after < goal else 'MISSES'} it; peak during the workload {kib(peak)} "
      f"{'meets' if peak < goal else 'MISSES'} it.")
PY
