#!/usr/bin/env python3
"""GPU microbenchmarks for parsim's compute model (issue 4, item 5).

Measures, on the GPU present and with PyTorch:
  * bf16 and fp8 GEMM throughput over the shapes parsim's workloads produce: the QKV, output
    projection, fc1 and fc2 GEMMs of the model presets (models/*.cfg), forward, dgrad and wgrad,
    for tensor-parallel sizes 1/2/4/8 at sequence lengths 4096/8192 with micro batch 1
    (sequence parallelism gathers the whole sequence, so the token dimension is mbs*seq), and
    the expert GEMMs of MoE presets with balanced routing;
  * causal flash attention forward and backward
    (torch.nn.functional.scaled_dot_product_attention) by sequence length and head dim;
  * HBM copy bandwidth;
and writes an efficiency table (achieved / dense peak) with the GPU name, torch and CUDA
versions and the date, as CSV (default) or as a libconfig group a topology file can include.

  python3 bench/gpu_microbench.py --dry-run              # list the shapes (no torch needed)
  python3 bench/gpu_microbench.py --out h100.csv         # measure on GPU 0
  python3 bench/gpu_microbench.py --format cfg --out h100-microbench.cfg
  parsim run ... cluster.compute.microbench=h100-microbench.cfg   # or name it in a topology file

With a table, parsim takes each GEMM's efficiency from the nearest measured shape (log space),
attention's from the measured curve of the nearest head dimension (linear in log2 keys) and
memory-bound kernels at the measured copy bandwidth (sim/microbench.h).

FLOP conventions: a GEMM (m x k) @ (k x n) is 2mnk; causal attention forward is
4*b*h*s^2*d/2 and backward 2.5x the forward (FlashAttention's benchmark convention).
Efficiencies are against the dense peak of the dtype (--peak-bf16/--peak-fp8 or the built-in
table of bench/validation/README.md, matched on the device name).
"""

import argparse
import csv
import datetime
import glob
import io
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# Dense peaks in TFLOP/s (bf16, fp8) as bench/validation/README.md lists them; the first
# substring of the device name that matches wins.
PEAKS = [
    ("GB300", 2450.0, 4900.0),
    ("GB200", 2450.0, 4900.0),
    ("B300", 2250.0, 4500.0),
    ("B200", 2250.0, 4500.0),
    ("H200", 989.0, 1979.0),
    ("H800", 989.0, 1979.0),
    ("H100", 989.0, 1979.0),
    ("A100", 312.0, 0.0),
]

DEFAULT_MODELS = ["llama3-8b", "llama3-70b", "llama3.1-405b", "gpt3-175b", "nemotron4-340b",
                  "mixtral-8x7b", "qwen3-30b-a3b", "qwen3-235b-a22b", "deepseek-v3"]


# ----------------------------------------------------------------------------- presets

def read_preset(path):
    """Reads the scalar `key = value;` settings of a model preset (libconfig subset)."""
    vals = {}
    with open(path) as f:
        for line in f:
            line = line.split("#", 1)[0]
            m = re.match(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*[=:]\s*([^;\[]+);", line)
            if not m:
                continue
            key, v = m.group(1), m.group(2).strip()
            if v in ("true", "false"):
                vals[key] = v == "true"
            elif v.startswith('"'):
                vals[key] = v.strip('"')
            else:
                try:
                    vals[key] = int(v)
                except ValueError:
                    try:
                        vals[key] = float(v)
                    except ValueError:
                        vals[key] = v
    return vals


def model_gemms(name, cfg, tp, seq, mbs):
    """GEMMs of one transformer layer on one TP rank: (op, m, n, k) of the forward pass."""
    h = cfg["hidden_size"]
    a = cfg["num_attention_heads"]
    g = cfg.get("num_query_groups") or a
    d = cfg.get("kv_channels") or h // a
    glu = 2 if cfg.get("gated_linear_unit") else 1
    f = cfg.get("ffn_hidden_size") or 4 * h
    tokens = mbs * seq
    out = []
    if a % tp or (g % tp and tp % g):
        return out  # Megatron would reject this TP size for the model
    if cfg.get("multi_latent_attention"):
        # MLA: the down/up projections depend on q/kv LoRA ranks; only the output
        # projection is listed here
        vd = cfg.get("v_head_dim") or d
        out.append(("proj", tokens, h, a * vd // tp))
    else:
        # with fewer KV groups than TP ranks, Megatron gives each rank one KV group
        n_qkv = (a + 2 * g) * d // tp if g >= tp else (a // tp + 2) * d
        out.append(("qkv", tokens, n_qkv, h))
        out.append(("proj", tokens, h, a * d // tp))
    experts = cfg.get("num_moe_experts") or 0
    if experts:
        fe = cfg.get("moe_ffn_hidden_size") or f
        topk = cfg.get("moe_router_topk") or 2
        # balanced routing, EP shards experts and ETP = 1 (Megatron Bridge MoE recipes):
        # each expert sees tokens*topk/experts rows
        rows = max(1, tokens * topk // experts)
        out.append(("expert_fc1", rows, glu * fe, h))
        out.append(("expert_fc2", rows, h, fe))
        shared = cfg.get("moe_shared_expert_intermediate_size") or 0
        if shared:
            out.append(("shared_fc1", tokens, glu * shared // tp, h))
            out.append(("shared_fc2", tokens, h, shared // tp))
    else:
        out.append(("fc1", tokens, glu * f // tp, h))
        out.append(("fc2", tokens, h, f // tp))
    return out


def gemm_shapes(models_dir, models, tps, seqs, mbs):
    """Distinct (m, n, k) over models x TP x seq x {fwd, dgrad, wgrad}, with who uses them."""
    shapes = {}
    for name in models:
        path = os.path.join(models_dir, name + ".cfg")
        if not os.path.exists(path):
            print("gpu_microbench: no preset %s, skipped" % path, file=sys.stderr)
            continue
        cfg = read_preset(path)
        for tp in tps:
            for seq in seqs:
                for op, m, n, k in model_gemms(name, cfg, tp, seq, mbs):
                    # forward Y = X W: (m x k)(k x n); dgrad dX = dY W^T: (m x n)(n x k);
                    # wgrad dW = X^T dY: (k x m)(m x n)
                    for pas, shape in (("fwd", (m, n, k)), ("dgrad", (m, k, n)), ("wgrad", (k, n, m))):
                        use = "%s:%s:%s:tp%d:s%d" % (name, op, pas, tp, seq)
                        shapes.setdefault(shape, []).append(use)
    return dict(sorted(shapes.items()))


def attention_cases(seqs, head_dims, tokens):
    """(batch, heads, seq, head_dim) for causal attention, about `tokens` tokens per call."""
    cases = []
    for d in head_dims:
        heads = max(1, 2048 // d)  # 16 heads of 128: one TP-8 rank of a 128-head model, say
        for s in seqs:
            cases.append((max(1, tokens // s), heads, s, d))
    return cases


# ----------------------------------------------------------------------------- measurement

def peak_for(name, dtype, args):
    if dtype == "bf16" and args.peak_bf16:
        return args.peak_bf16
    if dtype == "fp8" and args.peak_fp8:
        return args.peak_fp8
    for key, bf16, fp8 in PEAKS:
        if key in name:
            return bf16 if dtype == "bf16" else fp8
    return 0.0


def timed(torch, fn, warmup, iters):
    """Mean time of fn() in seconds, with CUDA events after warmup."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / 1e3 / iters


def bench_gemm(torch, m, n, k, dtype, args):
    dev = "cuda"
    if dtype == "bf16":
        a = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
        b = torch.randn(k, n, device=dev, dtype=torch.bfloat16)
        return timed(torch, lambda: torch.matmul(a, b), args.warmup, args.iters)
    if not hasattr(torch, "_scaled_mm") or not hasattr(torch, "float8_e4m3fn"):
        return None
    if k % 16 or n % 16:
        return None  # fp8 GEMMs need 16-aligned inner and output dimensions
    a = torch.randn(m, k, device=dev).to(torch.float8_e4m3fn)
    b = torch.randn(n, k, device=dev).to(torch.float8_e4m3fn).t()  # column-major (k x n)
    one = torch.tensor(1.0, device=dev)
    try:
        return timed(torch, lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one,
                                                     out_dtype=torch.bfloat16),
                     args.warmup, args.iters)
    except (RuntimeError, TypeError) as e:  # unsupported on this GPU or torch
        print("gpu_microbench: fp8 %dx%dx%d: %s" % (m, n, k, e), file=sys.stderr)
        return None


def bench_attention(torch, b, h, s, d, args):
    import torch.nn.functional as F
    dev = "cuda"
    q, k, v = (torch.randn(b, h, s, d, device=dev, dtype=torch.bfloat16, requires_grad=True)
               for _ in range(3))
    fwd = timed(torch, lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True),
                args.warmup, args.iters)
    o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    g = torch.randn_like(o)

    def fwd_bwd():
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        out.backward(g)

    both = timed(torch, fwd_bwd, args.warmup, args.iters)
    return fwd, max(both - fwd, 1e-9)


def bench_sustained(torch, m, n, k, seconds):
    """bf16 GEMM throughput held over `seconds` of back-to-back runs: the mean TFLOP/s of the
    first second and of the last quarter.  Their ratio is what clocks under sustained power and
    heat keep of a short benchmark (one GPU; a full node under load may keep less)."""
    import time
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
    flop = 2.0 * m * n * k
    samples = []  # (elapsed s, TFLOP/s) per batch of GEMMs
    t0 = time.monotonic()
    while time.monotonic() - t0 < seconds:
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(20):
            torch.matmul(a, b)
        end.record()
        torch.cuda.synchronize()
        samples.append((time.monotonic() - t0, 20 * flop / (start.elapsed_time(end) / 1e3) / 1e12))
    first = [tf for t, tf in samples if t <= 1.0] or [samples[0][1]]
    last = [tf for t, tf in samples if t >= 0.75 * seconds] or [samples[-1][1]]
    return sum(first) / len(first), sum(last) / len(last)


def bench_copy(torch, args):
    n = 1 << 30
    x = torch.empty(n, dtype=torch.uint8, device="cuda")
    y = torch.empty_like(x)
    t = timed(torch, lambda: y.copy_(x), args.warmup, args.iters)
    return 2.0 * n / t  # read + write, bytes/s


# ----------------------------------------------------------------------------- output

def write_csv(out, meta, rows):
    for k, v in meta.items():
        out.write("# %s: %s\n" % (k, v))
    w = csv.writer(out, lineterminator="\n")
    cols = ["kind", "dtype", "m", "n", "k", "batch", "heads", "seq", "head_dim", "time_us",
            "tflops", "efficiency", "gbytes_per_s", "used_by"]
    w.writerow(cols)
    for r in rows:
        w.writerow([r.get(c, "") for c in cols])


def write_cfg(out, meta, rows):
    out.write("# parsim GPU microbenchmark table (bench/gpu_microbench.py).\n")
    for k, v in meta.items():
        out.write("# %s: %s\n" % (k, v))
    out.write("microbench: {\n")
    out.write('  gpu = "%s";\n  torch = "%s";\n  cuda = "%s";\n  date = "%s";\n'
              % (meta["gpu"], meta["torch"], meta["cuda"], meta["date"]))
    groups = {}
    for r in rows:
        groups.setdefault("%s_%s" % (r["kind"], r["dtype"]), []).append(r)
    for name, rs in groups.items():
        out.write("  %s = (\n" % name.replace("-", "_"))
        for i, r in enumerate(rs):
            if r["kind"] == "gemm":
                item = "{ m = %d; n = %d; k = %d; efficiency = %.4f; }" % (
                    r["m"], r["n"], r["k"], r["efficiency"])
            elif r["kind"].startswith("attention"):
                item = "{ seq = %d; head_dim = %d; efficiency = %.4f; }" % (
                    r["seq"], r["head_dim"], r["efficiency"])
            else:
                item = "{ gbytes_per_s = %.1f; }" % r["gbytes_per_s"]
            out.write("    %s%s\n" % (item, "," if i + 1 < len(rs) else ""))
        out.write("  );\n")
    out.write("};\n")


# ----------------------------------------------------------------------------- main

def int_list(s):
    return [int(x) for x in s.split(",") if x]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", default=",".join(DEFAULT_MODELS),
                   help="model presets to take GEMM shapes from (default: %(default)s; 'all' = every preset)")
    p.add_argument("--models-dir", default=os.path.join(ROOT, "models"))
    p.add_argument("--tp", type=int_list, default=[1, 2, 4, 8])
    p.add_argument("--seq", type=int_list, default=[4096, 8192])
    p.add_argument("--mbs", type=int, default=1)
    p.add_argument("--dtypes", default="bf16,fp8")
    p.add_argument("--attn-seq", type=int_list, default=[1024, 2048, 4096, 8192, 16384, 32768])
    p.add_argument("--attn-head-dim", type=int_list, default=[64, 128, 256])
    p.add_argument("--attn-tokens", type=int, default=32768, help="tokens per attention call")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--max-gemms", type=int, default=0, help="measure at most N GEMM shapes (0 = all)")
    p.add_argument("--peak-bf16", type=float, default=0.0, help="dense bf16 TFLOP/s (default: by GPU name)")
    p.add_argument("--peak-fp8", type=float, default=0.0, help="dense fp8 TFLOP/s (default: by GPU name)")
    p.add_argument("--sustain-s", type=float, default=0.0,
                   help="also run the largest bf16 GEMM back to back this long and report the share "
                        "of its first-second throughput it keeps (0 = skip)")
    p.add_argument("--format", choices=("csv", "cfg"), default="csv")
    p.add_argument("--out", default="-", help="output file (default stdout)")
    p.add_argument("--dry-run", action="store_true", help="list the shapes and exit (no torch needed)")
    args = p.parse_args(argv)

    if args.models == "all":
        models = sorted(os.path.basename(f)[:-4] for f in glob.glob(os.path.join(args.models_dir, "*.cfg")))
    else:
        models = [m for m in args.models.split(",") if m]
    shapes = gemm_shapes(args.models_dir, models, args.tp, args.seq, args.mbs)
    if args.max_gemms:
        shapes = dict(list(shapes.items())[: args.max_gemms])
    attn = attention_cases(args.attn_seq, args.attn_head_dim, args.attn_tokens)
    dtypes = [d for d in args.dtypes.split(",") if d]

    if args.dry_run:
        print("# %d GEMM shapes (m, n, k) x dtypes %s, from %s at TP %s, seq %s, mbs %d"
              % (len(shapes), ",".join(dtypes), ",".join(models), args.tp, args.seq, args.mbs))
        print("m,n,k,gflop,uses,first_use")
        for (m, n, k), uses in shapes.items():
            print("%d,%d,%d,%.3f,%d,%s" % (m, n, k, 2.0 * m * n * k / 1e9, len(uses), uses[0]))
        print("# %d causal attention cases (batch, heads, seq, head_dim), fwd and bwd" % len(attn))
        for b, h, s, d in attn:
            print("attention,%d,%d,%d,%d" % (b, h, s, d))
        print("# HBM copy: 1 GiB")
        return 0

    try:
        import torch
    except ImportError:
        print("gpu_microbench: PyTorch is not installed (pip install torch); --dry-run works without it",
              file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("gpu_microbench: no CUDA GPU visible", file=sys.stderr)
        return 2
    gpu = torch.cuda.get_device_name(0)
    meta = {
        "gpu": gpu,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%MZ"),
        "peak_bf16_tflops": peak_for(gpu, "bf16", args),
        "peak_fp8_tflops": peak_for(gpu, "fp8", args),
        "shapes_from": "%s at TP %s, seq %s, mbs %d" % (",".join(models), args.tp, args.seq, args.mbs),
        "flops": "GEMM 2mnk; causal attention fwd 4*b*h*s^2*d/2, bwd 2.5x fwd",
    }
    rows = []
    total = len(shapes) * len(dtypes)
    done = 0
    for dtype in dtypes:
        peak = peak_for(gpu, dtype, args)
        for (m, n, k), uses in shapes.items():
            done += 1
            t = bench_gemm(torch, m, n, k, dtype, args)
            print("\rgpu_microbench: GEMM %d/%d" % (done, total), end="", file=sys.stderr)
            if t is None:
                continue
            tf = 2.0 * m * n * k / t / 1e12
            rows.append(dict(kind="gemm", dtype=dtype, m=m, n=n, k=k, time_us=round(t * 1e6, 3),
                             tflops=round(tf, 2), efficiency=round(tf / peak, 4) if peak else "",
                             used_by=";".join(uses)))
            torch.cuda.empty_cache()
    print("", file=sys.stderr)
    peak = peak_for(gpu, "bf16", args)
    for b, h, s, d in attn:
        try:
            tf_, tb_ = bench_attention(torch, b, h, s, d, args)
        except RuntimeError as e:
            print("gpu_microbench: attention b%d h%d s%d d%d: %s" % (b, h, s, d, e), file=sys.stderr)
            continue
        fl = 4.0 * b * h * s * s * d / 2.0
        for kind, t, f in (("attention_fwd", tf_, fl), ("attention_bwd", tb_, 2.5 * fl)):
            tf = f / t / 1e12
            rows.append(dict(kind=kind, dtype="bf16", batch=b, heads=h, seq=s, head_dim=d,
                             time_us=round(t * 1e6, 3), tflops=round(tf, 2),
                             efficiency=round(tf / peak, 4) if peak else ""))
        torch.cuda.empty_cache()
    if args.sustain_s > 0 and shapes:
        m, n, k = max(shapes, key=lambda x: x[0] * x[1] * x[2])
        first, last = bench_sustained(torch, m, n, k, args.sustain_s)
        meta["sustained"] = ("bf16 %dx%dx%d for %.0f s: %.1f TFLOP/s in the first second, %.1f in the "
                             "last quarter (ratio %.3f; a bound for cluster.compute.sustained_fraction "
                             "on one GPU)" % (m, n, k, args.sustain_s, first, last, last / first))
        print("gpu_microbench: %s" % meta["sustained"], file=sys.stderr)
    bw = bench_copy(torch, args)
    rows.append(dict(kind="hbm_copy", dtype="uint8", gbytes_per_s=round(bw / 1e9, 1),
                     used_by="1 GiB device-to-device copy, read + write bytes"))

    buf = io.StringIO()
    (write_csv if args.format == "csv" else write_cfg)(buf, meta, rows)
    if args.out == "-":
        sys.stdout.write(buf.getvalue())
    else:
        with open(args.out, "w") as f:
            f.write(buf.getvalue())
        print("gpu_microbench: wrote %s (%d rows)" % (args.out, len(rows)), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
