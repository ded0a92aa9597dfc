#!/usr/bin/env bash
# footprint.sh - DFFS's code size and RAM on a Cortex-M4F, in two firmware configurations, on
# the nor-qspi-16m device (16 MiB QSPI NOR, 256 B pages, 64 KiB blocks):
#   minimal  the smallest RAM configuration and no optional library feature (no compression,
#            no NAND)
#   full     the default RAM configuration and every optional library feature
#
# Owns only measuring and printing: it builds examples/firmware (thumbv7em-none-eabihf,
# opt-level z, LTO, panic=abort) once per configuration, reads its sections and its symbols
# (code by part: DFFS core, C API, compression, core/alloc generics, compiler builtins); runs
# the same workload (dffs_capi::workload) on the host through `dffs info --ram` for the heap
# figures; and, when qemu-system-arm is installed, runs the firmware under QEMU (mps2-an386)
# for the heap and stack it really used on the 32-bit target. It never changes a source file.
#
# Usage: scripts/footprint.sh           (a markdown table on stdout, details on stderr)
#        scripts/footprint.sh --json    (one JSON object on stdout)
# Needs: cargo with the thumbv7em-none-eabihf target (rustup target add thumbv7em-none-eabihf),
# python3, one of arm-none-eabi-size / llvm-size / size and of arm-none-eabi-nm / llvm-nm / nm;
# optional: qemu-system-arm.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
FW=$ROOT/examples/firmware
TARGET=thumbv7em-none-eabihf
OUT=$ROOT/target/footprint
FORMAT=markdown
case "${1:-}" in
    --json) FORMAT=json ;;
    "") ;;
    *) echo "usage: scripts/footprint.sh [--json]" >&2; exit 2 ;;
esac
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
[ -n "$NM" ] || { echo "footprint.sh: no nm tool (apt-get install binutils-arm-none-eabi)" >&2; exit 1; }

features_of() {
    case $1 in
        minimal) echo "smallest" ;;
        full) echo "ram-default,compression,nand,paged-records" ;;
    esac
}

# Sections of an ELF as "name size" lines (SysV format: every size tool above prints it).
sections() { "$SIZE" -A "$1" | awk 'NF >= 3 && $1 ~ /^\./ { print $1, $2 }'; }

for cfg in minimal full; do
    feats=$(features_of $cfg)
    (cd "$FW" && cargo build --quiet --release --target "$TARGET" --no-default-features \
        --features "$feats") >&2
    cp "$FW/target/$TARGET/release/dffs-firmware" "$OUT/firmware-$cfg.elf"
    sections "$OUT/firmware-$cfg.elf" > "$OUT/sections-$cfg.txt"
    # Code and read-only symbols with their sizes, demangled, for the breakdown by part.
    "$NM" -S --size-sort -C "$OUT/firmware-$cfg.elf" > "$OUT/symbols-$cfg.txt"
    if command -v qemu-system-arm >/dev/null; then
        (cd "$FW" && cargo build --quiet --release --target "$TARGET" --no-default-features \
            --features "$feats,qemu") >&2
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

python3 - "$OUT" "$FORMAT" <<'PY'
import collections, json, re, sys
out, fmt = sys.argv[1], sys.argv[2]
def kib(b): return f"{b / 1024:.1f} KiB"
host = {c["config"]: c for c in json.load(open(f"{out}/host-ram.json"))["configs"]}
host4k = {c["config"]: c for c in json.load(open(f"{out}/host-ram-4k.json"))["configs"]}
ram_config = {"minimal": "smallest", "full": "default"}

def part(name):
    """The part of the firmware a symbol belongs to."""
    if name.startswith("_$LT$"):  # a trait impl in legacy mangling: <Type as Trait>::method
        name = "<" + name[5:].replace("..", "::")
    if name.startswith("<dffs_capi"):
        return "C API"
    if name.startswith(("<dffs::", "<dffs_flash::")):
        return "dffs core"
    if name in ("memcmp", "memcpy", "memmove", "memset", "fmax", "fmin"):
        return "compiler builtins (mem*, soft float, division)"
    if name.startswith("dffs::") or name.startswith("dffs_flash::"):
        return "dffs core"
    if name.startswith("dffs_capi::workload") or name.startswith("dffs_firmware"):
        return "workload and firmware"
    if name.startswith("dffs_") or name.startswith("dffs_capi::"):
        return "C API"
    if name.startswith(("miniz_oxide", "lz4_flex")) or "lz4_flex" in name:
        return "compression (lz4_flex, miniz_oxide)"
    if name.startswith("compiler_builtins") or name.startswith("__aeabi") or re.match(r"__\w+[sd]f\d", name):
        return "compiler builtins (mem*, soft float, division)"
    if name.startswith(("core::", "alloc::", "<")):
        return "core and alloc (generics, sort, B-tree, panics)"
    return "other (start-up, vectors, allocator)"

result = {"device": "nor-qspi-16m (256 B pages, 64 KiB blocks)", "target": "thumbv7em-none-eabihf",
          "configs": []}
for cfg in ["minimal", "full"]:
    sec = dict((n, int(s)) for n, s in (l.split() for l in open(f"{out}/sections-{cfg}.txt")))
    code = sec.get(".vector_table", 0) + sec.get(".text", 0) + sec.get(".rodata", 0)
    arena = 0
    parts = collections.Counter()
    for line in open(f"{out}/symbols-{cfg}.txt"):
        p = line.split(None, 3)
        if len(p) < 4:
            continue
        if p[2] in "tTrR":
            parts[part(p[3].strip())] += int(p[1], 16)
        if "ARENA" in p[3]:
            arena += int(p[1], 16)
    q = open(f"{out}/qemu-{cfg}.txt").read()
    target = {k: int(v) for k, v in re.findall(r"(\w+) (-?\d+)", q)}
    h, h4 = host[ram_config[cfg]], host4k[ram_config[cfg]]
    result["configs"].append({
        "config": cfg,
        "ram_config": ram_config[cfg],
        "code_bytes": code,
        "sections": sec,
        "code_by_part": dict(parts.most_common()),
        "heap_arena_bytes": arena,
        "target": target or None,
        "host_after_mount_bytes": h["after_mount_bytes"],
        "host_peak_bytes": h["peak_bytes"],
        "host_4k_sectors_after_mount_bytes": h4["after_mount_bytes"],
        "host_4k_sectors_peak_bytes": h4["peak_bytes"],
    })

if fmt == "json":
    print(json.dumps(result, indent=2))
    sys.exit(0)

rows = result["configs"]
print("| | " + " | ".join(r["config"] for r in rows) + " |")
print("|---|" + "---|" * len(rows))
def line(label, f):
    print(f"| {label} | " + " | ".join(f(r) for r in rows) + " |")
line("RAM configuration", lambda r: r["ram_config"])
line("code (.text + .rodata + vectors)", lambda r: f"{r['code_bytes']} B ({kib(r['code_bytes'])})")
for name in [".text", ".rodata", ".data", ".bss"]:
    line(name, lambda r, n=name: str(r["sections"].get(n, 0)))
line("heap arena (in .bss)", lambda r: kib(r["heap_arena_bytes"]))
t = lambda r, k: kib(r["target"][k]) if r["target"] and k in r["target"] else "n/a"
line("heap after mount, target", lambda r: t(r, "heap_after_mount"))
line("heap peak, target", lambda r: t(r, "heap_peak"))
line("heap peak while formatting, target", lambda r: t(r, "heap_peak_format"))
line("stack peak, target", lambda r: t(r, "stack_peak"))
line("`ram_bytes()` after mount / `ram_estimate`, target",
     lambda r: f"{t(r, 'ram_bytes_after_mount')} / {t(r, 'estimate')}")
line("`ram_bytes()` at its highest (sampled after every call), target",
     lambda r: t(r, "ram_bytes_peak"))
line("heap after mount / peak, host 64-bit",
     lambda r: f"{kib(r['host_after_mount_bytes'])} / {kib(r['host_peak_bytes'])}")
line("same with 4 KiB sectors, host",
     lambda r: f"{kib(r['host_4k_sectors_after_mount_bytes'])} / {kib(r['host_4k_sectors_peak_bytes'])}")
print()
print("| code by part (bytes) | " + " | ".join(r["config"] for r in rows) + " |")
print("|---|" + "---|" * len(rows))
names = sorted({k for r in rows for k in r["code_by_part"]}, key=lambda k: -rows[-1]["code_by_part"].get(k, 0))
for k in names:
    line(k, lambda r, k=k: str(r["code_by_part"].get(k, 0)))
m = rows[0]
code_goal, heap_goal = 48 * 1024, 16 * 1024
peak = m["target"]["heap_peak"] if m["target"] and "heap_peak" in m["target"] else m["host_peak_bytes"]
print()
print(f"Goals (issue 19): minimal code {kib(m['code_bytes'])} "
      f"{'meets' if m['code_bytes'] <= code_goal else 'MISSES'} 48 KiB; "
      f"minimal heap peak {kib(peak)} {'meets' if peak <= heap_goal else 'MISSES'} 16 KiB.")
PY
