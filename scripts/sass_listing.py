"""The instructions of an `nvdisasm -gi -c` listing with their kernel and source line.

Shared by scripts/sass_load_waits.py and scripts/sass_div_calls.py.
"""
import argparse
import collections
import re

LINE = re.compile(r'//## File "([^"]+)", line (\d+)(?: inlined at "([^"]+)", line (\d+))?')
INSN = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(.*?)\s*;")


def instructions(path):
    """Yields (kernel, location, instruction) for every instruction of a kernel.

    kernel: the mangled name of the .text section; location: "file:line", with
    " @ file:line" of the inlined caller where the listing names one.
    """
    kern, loc = None, "?"
    for line in open(path):
        if line.startswith("//-----") and ".text." in line:
            kern = line.split(".text.", 1)[1].split()[0]
            yield kern, None, None  # a new kernel starts
            continue
        m = LINE.search(line)
        if m:
            loc = f"{m.group(1).split('/')[-1]}:{m.group(2)}"
            if m.group(3):
                loc += f" @ {m.group(3).split('/')[-1]}:{m.group(4)}"
            continue
        m = INSN.search(line)
        if m and kern is not None:
            yield kern, loc, m.group(1)


def report(scan, doc, unit):
    """The command line of a listing scan: `scan(path)` -> {kernel: Counter(location -> n)}
    summed over the listings given, printed per kernel (most first) and location."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("listing", nargs="+", help="nvdisasm -gi -c output")
    ap.add_argument("--kernel", default="", help="regex on the mangled kernel name")
    a = ap.parse_args()
    total = collections.defaultdict(collections.Counter)
    for path in a.listing:
        for kern, c in scan(path).items():
            if re.search(a.kernel, kern):
                total[kern].update(c)
    for kern, c in sorted(total.items(), key=lambda kv: -sum(kv[1].values())):
        print(f"{kern}: {sum(c.values())} {unit}")
        for loc, n in c.most_common():
            print(f"    {loc}  x{n}")
    if not total:
        print(f"no {unit}")
