# Host check of t35-tail-tiles.patch's Mamba-2 TAIL mapping (block_pos_tail):
# every (row, head, head-dim row) once. choose_tile as heuristics.h's, with
# the shared-memory limit left out (it only shrinks nh, as max_rows does).
def cdiv(a, b): return -(-a // b)
def choose_tile(rows, H, G, P, min_rows, sms, max_rows):
    hpg = H // G; nh, np = hpg, P
    while nh > 1 and nh * np > max_rows: nh = cdiv(nh, 2)
    blocks = lambda nh, np: rows * G * cdiv(hpg, nh) * cdiv(P, np)
    while blocks(nh, np) < 4 * sms:
        if nh > 1 and (nh // 2) * np >= min_rows: nh = cdiv(nh, 2)
        elif nh == 1 and np // 2 >= min_rows: np = cdiv(np, 2)
        else: break
    return nh, np, cdiv(hpg, nh), cdiv(P, np), blocks(nh, np)
def check(B, H, G, P, rpp, tr, tp):
    t = choose_tile(B, H, G, P, rpp, 132, 8 * rpp)
    u = choose_tile(tr, H, G, P, rpp, 132, tp * rpp)
    if not (u[0] <= t[0] and u[1] <= t[1]):
        print(B, H, G, P, rpp, tr, tp, 'tail tile larger: knob ignored'); return
    hpg = H // G; tb0 = B - tr; big = tb0 * G * t[2] * t[3]
    seen = {}
    for i in range(big + u[4]):
        if i >= big: j, (nh, np, hch, pch), r0 = i - big, u[:4], tb0
        else: j, (nh, np, hch, pch), r0 = i, t[:4], 0
        pc = j % pch; j //= pch; hc = j % hch; j //= hch; g = j % G; row = r0 + j // G
        h0 = g * hpg + hc * nh; bnh = min(nh, hpg - hc * nh); p0 = pc * np; bnp = min(np, P - p0)
        for hl in range(bnh):
            for pp in range(bnp):
                k = (row, h0 + hl, p0 + pp); seen[k] = seen.get(k, 0) + 1
    ok = len(seen) == B * H * P and all(c == 1 for c in seen.values()) and all(k[0] < B for k in seen)
    print(B, H, G, P, rpp, tr, tp, t[:4], u[:4], 'OK' if ok else 'BAD')
for B in (40, 64, 72, 256):
    for H, P in ((128, 64), (64, 64), (96, 80), (256, 64)):
        for rpp in (16, 32):
            for tr, tp in ((7, 4), (16, 4), (16, 2), (5, 2)):
                check(B, H, 8, P, rpp, tr, tp)
