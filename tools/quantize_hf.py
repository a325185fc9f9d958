#!/usr/bin/env python3
"""Writes quantized Hugging Face checkpoints in the layouts real repositories
ship, and dequantizes them back, in NumPy, from those layouts alone.

From a GGUF model (f32, a Qwen-family preset, so no q/k permutation is
involved), its Hugging Face twin (tools/gguf_to_hf.py) is written with every
layer's q/k/v/o/gate/up/down matrix quantized as one of:

  fp8        e4m3 weights; weight_scale per tensor or per output channel, or
             weight_scale_inv per block (DeepSeek-V3: weight_block_size)
  gptq       4-bit; qweight [in/8, out] (8 inputs a word, low nibble first),
             qzeros [groups, out/8] storing z - 1 (AutoGPTQ's "gptq" format),
             scales f16 [groups, out], g_idx [in] with desc_act
  awq        4-bit gemm; qweight [in, out/8] and qzeros [groups, out/8] with
             outputs in AWQ's nibble order 0 2 4 6 1 3 5 7, scales f16
  compressed compressed-tensors pack-quantized: weight_packed [out, in/8]
             (value + 8, low nibble first), weight_scale [out, groups]

quantize() returns the dequantized matrices under their GGUF names, which is
what the NumPy reference forward then runs (dequantize-then-forward).

Usage: quantize_hf.py MODEL.gguf OUT_DIR METHOD [options as key=value]
"""
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gguf_to_hf  # noqa: E402
from reference_forward import Gguf  # noqa: E402

QUANTIZED = ["attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"]
AWQ_ORDER = [0, 2, 4, 6, 1, 3, 5, 7]  # nibble k of a word holds output 8c + AWQ_ORDER[k]


def e4m3_table():
    """Every finite e4m3 value, by code (NaN codes 0x7f / 0xff as nan)."""
    vals = []
    for code in range(256):
        s, e, m = code >> 7, (code >> 3) & 15, code & 7
        if e == 15 and m == 7:
            vals.append(np.nan)
            continue
        v = (m / 8.0) * 2.0 ** -6 if e == 0 else (1 + m / 8.0) * 2.0 ** (e - 7)
        vals.append(-v if s else v)
    return np.array(vals)


E4M3 = e4m3_table()


def to_e4m3(x):
    """Codes of the nearest e4m3 values (|x| <= 448)."""
    finite = np.where(np.isnan(E4M3), np.inf, E4M3)
    codes = np.abs(x[..., None] - finite[None, :]).argmin(axis=-1)
    return codes.astype(np.uint8)


def pack_nibbles(q, axis):
    """uint32 words of 8 nibbles along `axis`, element 8w + k in bits 4k."""
    q = np.moveaxis(q.astype(np.uint32), axis, -1)
    q = q.reshape(*q.shape[:-1], -1, 8)
    words = np.zeros(q.shape[:-1], dtype=np.uint32)
    for k in range(8):
        words |= (q[..., k] & 15) << np.uint32(4 * k)
    return np.moveaxis(words, -1, axis).view(np.int32)


def quantize_fp8(w, scheme):
    out, inp = w.shape
    if scheme == "tensor":
        scale = np.array([np.abs(w).max() / 448.0], dtype=np.float32)
        codes = to_e4m3(w / scale[0])
        return {"weight": ("F8_E4M3", codes), "weight_scale": ("F32", scale)}, E4M3[codes] * scale[0]
    if scheme == "channel":
        scale = (np.abs(w).max(axis=1, keepdims=True) / 448.0).astype(np.float32)
        codes = to_e4m3(w / scale)
        return {"weight": ("F8_E4M3", codes), "weight_scale": ("F32", scale)}, E4M3[codes] * scale
    b0, b1 = scheme  # blocks
    rows, cols = -(-out // b0), -(-inp // b1)
    scale = np.zeros((rows, cols), dtype=np.float32)
    deq = np.zeros_like(w)
    codes = np.zeros(w.shape, dtype=np.uint8)
    for r in range(rows):
        for c in range(cols):
            blk = w[r * b0:(r + 1) * b0, c * b1:(c + 1) * b1]
            scale[r, c] = np.abs(blk).max() / 448.0
            q = to_e4m3(blk / scale[r, c])
            codes[r * b0:(r + 1) * b0, c * b1:(c + 1) * b1] = q
            deq[r * b0:(r + 1) * b0, c * b1:(c + 1) * b1] = E4M3[q] * scale[r, c]
    return {"weight": ("F8_E4M3", codes), "weight_scale_inv": ("F32", scale)}, deq


def int4_groups(w, group, g_idx, sym):
    """Per-group f16 scales and integer zero points [groups, out], quants [out, in]."""
    out, inp = w.shape
    n_groups = int(g_idx.max()) + 1
    scales = np.zeros((n_groups, out), dtype=np.float16)
    zeros = np.zeros((n_groups, out), dtype=np.int64)
    q = np.zeros((out, inp), dtype=np.int64)
    for gi in range(n_groups):
        cols = np.nonzero(g_idx == gi)[0]
        blk = w[:, cols]
        if sym:
            s = (np.abs(blk).max(axis=1) / 7.0).astype(np.float16)
            z = np.full(out, 8)
        else:
            lo, hi = blk.min(axis=1), blk.max(axis=1)
            s = ((hi - lo) / 15.0).astype(np.float16)
            # Zero points in 1..15: AutoGPTQ's "gptq" format stores z - 1.
            z = np.clip(np.round(-lo / s.astype(np.float64)), 1, 15).astype(np.int64)
        s64 = s.astype(np.float64)
        q[:, cols] = np.clip(np.round(blk / s64[:, None]) + z[:, None], 0, 15)
        scales[gi], zeros[gi] = s, z
    deq = (q - zeros[g_idx].T) * scales[g_idx].T.astype(np.float64)
    return q, scales, zeros, deq


def quantize_gptq(w, group, desc_act, sym, rng):
    out, inp = w.shape
    g = group if group > 0 else inp
    if desc_act:
        perm = rng.permutation(inp)  # the order GPTQ quantized the inputs in
        g_idx = np.empty(inp, dtype=np.int64)
        g_idx[perm] = np.arange(inp) // g
    else:
        g_idx = np.arange(inp) // g
    q, scales, zeros, deq = int4_groups(w, g, g_idx, sym)
    parts = {"qweight": ("I32", pack_nibbles(q.T, 0)), "qzeros": ("I32", pack_nibbles(zeros - 1, 1)),
             "scales": ("F16", scales)}
    if desc_act:
        parts["g_idx"] = ("I32", g_idx.astype(np.int32))
    return parts, deq


def awq_pack(x):
    """[rows, out] -> words [rows, out/8] in AWQ's nibble order."""
    rows, out = x.shape
    x = x.reshape(rows, out // 8, 8)[:, :, AWQ_ORDER]
    return pack_nibbles(x.reshape(rows, out), 1)


def quantize_awq(w, group):
    out, inp = w.shape
    g_idx = np.arange(inp) // group
    q, scales, zeros, deq = int4_groups(w, group, g_idx, sym=False)
    return {"qweight": ("I32", awq_pack(q.T)), "qzeros": ("I32", awq_pack(zeros)), "scales": ("F16", scales)}, deq


def quantize_compressed(w, group):
    out, inp = w.shape
    g = group if group > 0 else inp
    g_idx = np.arange(inp) // g
    q, scales, _, deq = int4_groups(w, g, g_idx, sym=True)
    return {"weight_packed": ("I32", pack_nibbles(q, 1)), "weight_scale": ("F16", scales.T.copy()),
            "weight_shape": ("I64", np.array([out, inp], dtype=np.int64))}, deq


def quant_config(method, opts):
    if method == "fp8":
        c = {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic"}
        if isinstance(opts["scheme"], tuple):
            c["weight_block_size"] = list(opts["scheme"])
        return c
    if method == "gptq":
        return {"quant_method": "gptq", "bits": 4, "group_size": opts["group"], "desc_act": opts["desc_act"],
                "sym": opts["sym"], "checkpoint_format": "gptq"}
    if method == "awq":
        return {"quant_method": "awq", "bits": 4, "group_size": opts["group"], "zero_point": True, "version": "gemm"}
    return {"quant_method": "compressed-tensors", "format": "pack-quantized", "ignore": ["lm_head"],
            "config_groups": {"group_0": {"targets": ["Linear"], "weights": {
                "num_bits": 4, "type": "int", "symmetric": True, "strategy": "group" if opts["group"] > 0 else "channel",
                "group_size": opts["group"] if opts["group"] > 0 else None}}}}


def quantize(gguf_path, out_dir, method, seed=0, **opts):
    """Writes the quantized twin; returns the Gguf with its layer matrices
    replaced by their dequantized values (for reference_forward)."""
    g = Gguf(gguf_path)
    arch = g.kv["general.architecture"]
    if arch == "llama":
        raise SystemExit("quantize_hf: use a Qwen-family preset (llama q/k rows are permuted in GGUF)")
    config = gguf_to_hf.hf_config(g, arch)
    config["quantization_config"] = quant_config(method, opts)
    rng = np.random.default_rng(seed)
    skip, tensors = set(), []
    for l in range(config["num_hidden_layers"]):
        for kind in QUANTIZED:
            name = f"blk.{l}.{kind}.weight"
            if name not in g.tensors:
                continue
            module = f"model.layers.{l}." + gguf_to_hf.LAYER_NAMES[kind + ".weight"][: -len(".weight")]
            w = g.tensors[name]
            if method == "fp8":
                parts, deq = quantize_fp8(w, opts["scheme"])
            elif method == "gptq":
                parts, deq = quantize_gptq(w, opts["group"], opts["desc_act"], opts["sym"], rng)
            elif method == "awq":
                parts, deq = quantize_awq(w, opts["group"])
            else:
                parts, deq = quantize_compressed(w, opts["group"])
            for suffix, (dtype, arr) in parts.items():
                tensors.append((module + "." + suffix, dtype, arr))
            if method == "fp8":
                tensors.append((module + ".input_scale", "F32", np.array([1.0], dtype=np.float32)))
            skip.add(module + ".weight")
            g.tensors[name] = deq
    for name, arr in gguf_to_hf.hf_tensors(Gguf(gguf_path), arch, config):
        if name not in skip:
            tensors.append((name, "F32", arr.astype(np.float32)))
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    gguf_to_hf.write_safetensors(os.path.join(out_dir, "model.safetensors"), tensors)
    return g


if __name__ == "__main__":
    if len(sys.argv) < 4:
        raise SystemExit(__doc__)
    kw = dict(a.split("=", 1) for a in sys.argv[4:])
    opts = {"scheme": kw.get("scheme", "tensor"), "group": int(kw.get("group", 128)),
            "desc_act": kw.get("desc_act", "0") == "1", "sym": kw.get("sym", "1") == "1"}
    quantize(sys.argv[1], sys.argv[2], sys.argv[3], **opts)
