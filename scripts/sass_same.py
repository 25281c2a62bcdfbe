#!/usr/bin/env python3
"""Which kernels of a build have the same SASS as in other builds.

A benchmark figure belongs to the binary that was measured. When a later
commit changes source but not the machine code of a kernel (a refactor, a
choice moved to compile time), its figure still holds; this shows it without
a GPU. For every sm_90a kernel of CAND it prints which of the REF builds hold
the identical instruction sequence (addresses and branch labels ignored):

  python3 scripts/sass_same.py build-gpu/replayssm /tmp/a/replayssm /tmp/b/replayssm \\
      [--match replay] [--only-different]

Needs cuobjdump and nvdisasm (CUDA toolkit; on a machine without one,
`pip download nvidia-cuda-nvdisasm nvidia-cuda-cuobjdump` and unpack the
wheels). Binaries may be stripped: the device code stays. Only the cubins
`cuobjdump -lelf` lists are compared (with CUDA 13.0 / cuobjdump 13.5 the
linked CLI lists 23 translation units; conv1d.cu's device code, present in
its object file, is not among them: compare object files for it).
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

ADDR = re.compile(r"/\*[0-9a-f]+\*/")
LABEL = re.compile(r"\.L_x_\d+")
SECTION = re.compile(r"\s*\.text\.(\S+):")
# An anonymous namespace's mangled name carries hashes of the file's path
# (`_GLOBAL__N__38671607_11_slot_ops_cu_53feefd9`): builds of one commit in
# two checkouts differ there only, so both hashes are dropped.
ANON = re.compile(r"_GLOBAL__N__[0-9a-f]+_(\d+_\w+?)_[0-9a-f]{8}")


def kernels(binary, arch):
    """{mangled name: [normalised SASS lines]} of every cubin of one arch."""
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(["cuobjdump", "-xelf", "all", os.path.abspath(binary)], cwd=tmp, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for cubin in sorted(f for f in os.listdir(tmp) if f.endswith(f".{arch}.cubin")):
            text = subprocess.run(["nvdisasm", "-c", os.path.join(tmp, cubin)], check=True,
                                  capture_output=True, text=True).stdout
            name, body = None, []
            for line in text.splitlines():
                m = SECTION.match(line)
                if m:
                    if name:
                        out[name] = body
                    name, body = ANON.sub(r"_GLOBAL__N_\1", m.group(1)), []
                elif name and line.strip():
                    body.append(ANON.sub(r"_GLOBAL__N_\1", LABEL.sub("L", ADDR.sub("", line))).strip())
            if name:
                out[name] = body
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("cand")
    ap.add_argument("refs", nargs="+")
    ap.add_argument("--arch", default="sm_90a")
    ap.add_argument("--match", default="", help="only kernels whose mangled name contains this")
    ap.add_argument("--only-different", action="store_true", help="list only kernels no REF matches")
    a = ap.parse_args()
    cand = kernels(a.cand, a.arch)
    refs = [(r, kernels(r, a.arch)) for r in a.refs]
    unmatched = 0
    for name in sorted(cand):
        if a.match not in name:
            continue
        same = [r for r, k in refs if k.get(name) == cand[name]]
        unmatched += not same
        if same and a.only_different:
            continue
        print(f"{name}  {len(cand[name])} lines  same as: {', '.join(same) if same else 'none'}")
    print(f"{unmatched} kernel(s) matched by no reference", file=sys.stderr)
    return 1 if unmatched else 0


if __name__ == "__main__":
    sys.exit(main())
