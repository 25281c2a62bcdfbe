"""scripts/ncu_lines.py: per-line counts from ncu's source page and nvdisasm's
line markers (-g: innermost lines; -gi: the inlining chain, then the
outermost line; --caller FILE: the outermost line of FILE in the chain)."""
import importlib.util
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("ncu_lines", ROOT / "scripts" / "ncu_lines.py")
ncu_lines = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ncu_lines)

KERNEL = "_Z6kernelv"
GI = f"""//--------------------- .text.{KERNEL} --------------------------
	//## File "/src/a/helper.cuh", line 7 inlined at "/src/a/kern.cuh", line 40
	//## File "/src/a/kern.cuh", line 40
        /*0000*/                   LDG.E R2, desc[UR4][R2.64] ;
	//## File "/src/a/kern.cuh", line 41
        /*0010*/                   FADD R3, R2, R2 ;
	//## File "/src/a/inner.cuh", line 3 inlined at "/src/a/helper.cuh", line 9 inlined at "/src/a/kern.cuh", line 42
	//## File "/src/a/kern.cuh", line 42
        /*0020*/                   FMUL R4, R3, R3 ;
//--------------------- .text._Z5otherv --------------------------
"""
G = GI.replace(' inlined at "/src/a/kern.cuh", line 40\n\t//## File "/src/a/kern.cuh", line 40', "").replace(
    ' inlined at "/src/a/helper.cuh", line 9 inlined at "/src/a/kern.cuh", line 42\n\t//## File "/src/a/kern.cuh", line 42', "")


def locs(text, tmp_path, caller=None):
    p = tmp_path / "sass.txt"
    p.write_text(text)
    where = ncu_lines.read_sass(str(p), KERNEL, caller)
    return [where[o][0] for o in (0x0, 0x10, 0x20)]


def test_g_counts_innermost_lines(tmp_path):
    assert locs(G, tmp_path) == [("helper.cuh", 7), ("kern.cuh", 41), ("inner.cuh", 3)]


def test_gi_counts_the_kernels_own_lines(tmp_path):
    assert locs(GI, tmp_path) == [("kern.cuh", 40), ("kern.cuh", 41), ("kern.cuh", 42)]


def test_gi_caller_picks_that_files_line(tmp_path):
    assert locs(GI, tmp_path, "helper.cuh") == [("helper.cuh", 7), ("(not in helper.cuh)", 0), ("helper.cuh", 9)]
    assert locs(GI, tmp_path, "kern.cuh") == [("kern.cuh", 40), ("kern.cuh", 41), ("kern.cuh", 42)]
