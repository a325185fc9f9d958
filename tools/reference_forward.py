#!/usr/bin/env python3
"""Independent NumPy reference of parallm's Llama-family forward pass.

Reads a GGUF file with its own minimal parser (no parallm code), runs the
transformer in float64 over a list of token ids and returns the logits of
every position. Covers what parallm's model code covers: GQA, Qwen2 QKV bias,
tied embeddings, RoPE (interleaved pairs for `llama`, rotate-half for the
Qwen families), Llama 3 rope scaling via `rope_freqs.weight`, linear rope
scaling, Qwen3's per-head q/k RMSNorm, head_dim from `attention.key_length`,
and MoE as the published models define it: Mixtral and Qwen3-MoE take the
softmax over the selected top-k logits; Qwen2-MoE keeps the top-k shares of
the softmax over all experts and adds a shared SwiGLU expert scaled by
sigmoid(h . ffn_gate_inp_shexp). Gemma 2 / 3 as llama.cpp runs their GGUFs
(norm weights already hold Gemma's 1 + w): embeddings times sqrt(n_embd),
tanh-GELU gates, norms after attention and FFN, score and logit soft-caps,
sliding-window layers (every layer but each 2nd / 6th), Gemma 3's local
layers on an unscaled RoPE base of 10000, and the query scale
1/sqrt(head_dim) (1/sqrt(n_embd / n_head) for the 27B shapes). Phi-3: fused
attn_qkv (Q, K, V rows) and ffn_up (gate rows, then up rows), LongRoPE:
inverse frequencies divided by the long factors when the context exceeds
the original one (the short factors otherwise), rotated q and k scaled by
rope.scaling.attn_factor.
Supported tensor types: F32, F16, BF16 (enough for the reference tests).

Usage as a script:  reference_forward.py MODEL.gguf ID ID ID ... > logits.npy
(`final_hidden` gives the final-norm hidden states the logits come from.)
"""
import struct
import sys

import numpy as np

GGUF_SCALAR = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}


class Gguf:
    def __init__(self, path):
        with open(path, "rb") as f:
            self.buf = f.read()
        self.pos = 0
        assert self.buf[:4] == b"GGUF", "not a GGUF file"
        self.pos = 4
        version = self._read("<I")
        assert version in (2, 3)
        n_tensors = self._read("<Q")
        n_kv = self._read("<Q")
        self.kv = {}
        for _ in range(n_kv):
            key = self._string()
            self.kv[key] = self._value(self._read("<I"))
        infos = []
        for _ in range(n_tensors):
            name = self._string()
            n_dims = self._read("<I")
            ne = [self._read("<Q") for _ in range(n_dims)]
            ggml_type = self._read("<I")
            offset = self._read("<Q")
            infos.append((name, ne, ggml_type, offset))
        align = self.kv.get("general.alignment", 32)
        start = (self.pos + align - 1) // align * align
        self.tensors = {}
        for name, ne, ggml_type, offset in infos:
            count = int(np.prod(ne))
            shape = list(reversed(ne))
            at = start + offset
            if ggml_type == 0:
                arr = np.frombuffer(self.buf, np.float32, count, at)
            elif ggml_type == 1:
                arr = np.frombuffer(self.buf, np.float16, count, at).astype(np.float32)
            elif ggml_type == 30:
                raw = np.frombuffer(self.buf, np.uint16, count, at).astype(np.uint32) << 16
                arr = raw.view(np.float32)
            else:
                raise SystemExit(f"reference supports f32/f16/bf16 tensors only, {name} has type {ggml_type}")
            self.tensors[name] = arr.reshape(shape).astype(np.float64)

    def _read(self, fmt):
        v = struct.unpack_from(fmt, self.buf, self.pos)[0]
        self.pos += struct.calcsize(fmt)
        return v

    def _string(self):
        n = self._read("<Q")
        s = self.buf[self.pos:self.pos + n].decode("utf-8", "replace")
        self.pos += n
        return s

    def _value(self, t):
        if t == 8:
            return self._string()
        if t == 9:
            et = self._read("<I")
            n = self._read("<Q")
            return [self._value(et) for _ in range(n)]
        return self._read(GGUF_SCALAR[t])


def rmsnorm(x, w, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def rope(x, pos, inv_freq, half):
    # x: [T, heads, hd]
    ang = pos[:, None] * inv_freq[None, :]  # [T, hd/2]
    cos, sin = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
    out = x.copy()
    hd = x.shape[-1]
    if half:
        a, b = x[..., : hd // 2], x[..., hd // 2:]
        out[..., : hd // 2] = a * cos - b * sin
        out[..., hd // 2:] = a * sin + b * cos
    else:
        a, b = x[..., 0::2], x[..., 1::2]
        out[..., 0::2] = a * cos - b * sin
        out[..., 1::2] = a * sin + b * cos
    return out


def silu(x):
    return x / (1.0 + np.exp(-x))


def gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x ** 3)))


def softcap(x, cap):
    return cap * np.tanh(x / cap) if cap else x


def yarn_inv_freq(dim, base, factor, original, beta_fast=32.0, beta_slow=1.0):
    """YaRN: below the band interpolated (frequency / factor), above it kept,
    blended linearly across it; the band's ends are the dimensions whose
    wavelength makes beta_fast / beta_slow turns in the original context."""
    extra = base ** (-np.arange(0, dim, 2, dtype=np.float64) / dim)

    def corr_dim(turns):
        return dim * np.log(original / (turns * 2 * np.pi)) / (2 * np.log(base))

    low, high = max(np.floor(corr_dim(beta_fast)), 0), min(np.ceil(corr_dim(beta_slow)), dim - 1)
    if low == high:
        high += 0.001
    ramp = np.clip((np.arange(dim // 2) - low) / (high - low), 0, 1)
    return extra / factor * ramp + extra * (1 - ramp)


def deepseek_route(logits, bias, gating, groups, groups_used, k, norm, scale):
    """Chosen experts and weights of one token (DeepSeek's gate)."""
    if gating == 2:
        scores = 1.0 / (1.0 + np.exp(-logits))
    else:
        scores = np.exp(logits - logits.max())
        scores /= scores.sum()
    choice = scores + (bias if bias is not None else 0.0)
    if groups > 1:
        per = len(choice) // groups
        grouped = choice.reshape(groups, per)
        if bias is not None:
            group_score = np.sort(grouped, axis=1)[:, -2:].sum(axis=1)
        else:
            group_score = grouped.max(axis=1)
        keep = np.argsort(-group_score, kind="stable")[:groups_used]
        masked = np.full_like(choice, -np.inf)
        for gi in keep:
            masked[gi * per:(gi + 1) * per] = choice[gi * per:(gi + 1) * per]
        choice = masked
    top = np.argsort(-choice, kind="stable")[:k]
    w = scores[top]
    if norm:
        w = w / w.sum()
    return top, w * scale


def mla_attention(g, t, b, h, pos, mask, eps, n_head, kv_dtype):
    """DeepSeek's multi-head latent attention of one layer, decompressed."""
    p = g.kv["general.architecture"] + "."
    T = h.shape[0]
    lora = g.kv[p + "attention.kv_lora_rank"]
    head_k, v_dim = g.kv[p + "attention.key_length"], g.kv[p + "attention.value_length"]
    rope_dim = g.kv[p + "rope.dimension_count"]
    nope = head_k - rope_dim
    base = g.kv.get(p + "rope.freq_base", 10000.0)
    scale = 1.0 / np.sqrt(head_k)
    if g.kv.get(p + "rope.scaling.type") == "yarn":
        factor = g.kv[p + "rope.scaling.factor"]
        inv_freq = yarn_inv_freq(rope_dim, base, factor, g.kv[p + "rope.scaling.original_context_length"])
        m = 1.0 + g.kv.get(p + "rope.scaling.yarn_log_multiplier", 0.0) * np.log(factor)
        scale *= m * m
    else:
        inv_freq = base ** (-np.arange(0, rope_dim, 2, dtype=np.float64) / rope_dim)
    if b + "attn_q_a.weight" in t:
        q = rmsnorm(h @ t[b + "attn_q_a.weight"].T, t[b + "attn_q_a_norm.weight"], eps) @ t[b + "attn_q_b.weight"].T
    else:
        q = h @ t[b + "attn_q.weight"].T
    q = q.reshape(T, n_head, head_k)
    q_nope, q_pe = q[..., :nope], rope(q[..., nope:], pos, inv_freq, False)
    kva = h @ t[b + "attn_kv_a_mqa.weight"].T
    c = rmsnorm(kva[:, :lora], t[b + "attn_kv_a_norm.weight"], eps)
    k_pe = rope(kva[:, None, lora:], pos, inv_freq, False)[:, 0, :]
    if kv_dtype == "q8_0":
        raise ValueError("the reference's MLA path has no q8_0 cache")
    if b + "attn_kv_b.weight" in t:
        kv = (c @ t[b + "attn_kv_b.weight"].T).reshape(T, n_head, nope + v_dim)
        k_nope, v = kv[..., :nope], kv[..., nope:]
    else:
        k_nope = np.einsum("tj,hjd->thd", c, t[b + "attn_k_b.weight"])
        v = np.einsum("tj,hvj->thv", c, t[b + "attn_v_b.weight"])
    out = np.zeros((T, n_head, v_dim))
    for hh in range(n_head):
        s = (q_nope[:, hh] @ k_nope[:, hh].T + q_pe[:, hh] @ k_pe.T) * scale + mask
        s = np.exp(s - s.max(axis=1, keepdims=True))
        s /= s.sum(axis=1, keepdims=True)
        out[:, hh] = s @ v[:, hh]
    return out.reshape(T, n_head * v_dim) @ t[b + "attn_output.weight"].T


def q8_0_round_trip(x):
    """Values as a q8_0 KV cache holds them: per 32 values along the last axis,
    d = amax / 127 kept as f16, q = x / d rounded half to even (as the SIMD
    quantizer does), value = q * d."""
    blocks = x.reshape(*x.shape[:-1], -1, 32)
    d = np.abs(blocks).max(axis=-1, keepdims=True).astype(np.float32) / np.float32(127)
    inv = np.where(d != 0, np.float32(1) / np.where(d != 0, d, 1), 0).astype(np.float32)
    q = np.clip(np.rint(blocks.astype(np.float32) * inv), -128, 127)
    return (q * d.astype(np.float16).astype(np.float64)).reshape(x.shape)


def forward(g, ids, kv_dtype="f32", n_ctx=None):
    """Logits of every position; kv_dtype "q8_0" rounds K (after RoPE) and V
    through a q8_0 cache first, and Q too (the engine scores q8_0 keys
    against q8_0-rounded queries, as ggml does)."""
    t = g.tensors
    out_w = t.get("output.weight", t["token_embd.weight"])
    arch = g.kv["general.architecture"]
    return softcap(final_hidden(g, ids, kv_dtype, n_ctx) @ out_w.T, g.kv.get(arch + ".final_logit_softcapping", 0))


def final_hidden(g, ids, kv_dtype="f32", n_ctx=None):
    """The last hidden state of every position after the final norm, the
    rows the output matrix reads ([T, n_embd]): what embeddings pool.
    n_ctx: the context the engine runs (default: the file's context_length)."""
    if kv_dtype not in ("f32", "q8_0"):
        raise ValueError(f"kv_dtype must be f32 or q8_0, not {kv_dtype}")
    arch = g.kv["general.architecture"]
    p = arch + "."
    n_embd = g.kv[p + "embedding_length"]
    n_layer = g.kv[p + "block_count"]
    n_head = g.kv[p + "attention.head_count"]
    n_kv = g.kv.get(p + "attention.head_count_kv", n_head)
    hd = g.kv.get(p + "attention.key_length", n_embd // n_head)
    eps = g.kv.get(p + "attention.layer_norm_rms_epsilon", 1e-5)
    theta = g.kv.get(p + "rope.freq_base", 10000.0)
    n_expert = g.kv.get(p + "expert_count", 0)
    k_used = g.kv.get(p + "expert_used_count", 0)
    # llama.cpp: qwen2moe weights the top-k by the full softmax, the others renormalize.
    norm_topk = g.kv.get(p + "expert_weights_norm", arch not in ("qwen2moe", "deepseek2"))
    n_dense_lead = g.kv.get(p + "leading_dense_block_count", 0)
    t = g.tensors
    inv_freq = theta ** (-np.arange(0, hd, 2, dtype=np.float64) / hd)
    if g.kv.get(p + "rope.scaling.type") == "linear":
        inv_freq = inv_freq / g.kv[p + "rope.scaling.factor"]
    if "rope_freqs.weight" in t:
        inv_freq = inv_freq / t["rope_freqs.weight"]
    mscale = 1.0
    if "rope_factors_long.weight" in t:
        n_ctx = n_ctx or g.kv.get(p + "context_length", 2048)
        original = g.kv[p + "rope.scaling.original_context_length"]
        factors = t["rope_factors_long.weight"] if n_ctx > original else t["rope_factors_short.weight"]
        inv_freq = inv_freq / factors
        mscale = g.kv[p + "rope.scaling.attn_factor"]
    half = arch in ("qwen2", "qwen3", "qwen2moe", "qwen3moe", "gemma2", "gemma3", "phi3")
    gemma = arch in ("gemma2", "gemma3")
    T = len(ids)
    pos = np.arange(T, dtype=np.float64)
    x = t["token_embd.weight"][ids]
    mask = np.triu(np.full((T, T), -np.inf), 1)
    scale = 1.0 / np.sqrt(hd)
    attn_cap = 0
    if gemma:
        x = x * np.sqrt(n_embd)
        if n_layer == (46 if arch == "gemma2" else 62):
            scale = 1.0 / np.sqrt(n_embd // n_head)
        attn_cap = g.kv.get(p + "attn_logit_softcapping", 50.0 if arch == "gemma2" else 0)
        window = g.kv.get(p + "attention.sliding_window", 4096 if arch == "gemma2" else 512)
        pattern = g.kv.get(p + "attention.sliding_window_pattern", 2 if arch == "gemma2" else 6)
        # Keys j of query i with i - window < j <= i.
        rows, cols = np.arange(T)[:, None], np.arange(T)[None, :]
        window_mask = np.where((cols <= rows) & (cols > rows - window), 0.0, -np.inf)
        inv_freq_local = 10000.0 ** (-np.arange(0, hd, 2, dtype=np.float64) / hd) if arch == "gemma3" else inv_freq
    group = n_head // n_kv
    for l in range(n_layer):
        b = f"blk.{l}."
        sliding = gemma and l % pattern < pattern - 1
        layer_mask = window_mask if sliding else mask
        layer_freq = inv_freq_local if sliding else inv_freq
        h = rmsnorm(x, t[b + "attn_norm.weight"], eps)
        if arch == "deepseek2":
            x = x + mla_attention(g, t, b, h, pos, mask, eps, n_head, kv_dtype)
            h = rmsnorm(x, t[b + "ffn_norm.weight"], eps)
            if l < n_dense_lead:
                a = silu(h @ t[b + "ffn_gate.weight"].T) * (h @ t[b + "ffn_up.weight"].T)
                x = x + a @ t[b + "ffn_down.weight"].T
                continue
            logits = h @ t[b + "ffn_gate_inp.weight"].T
            y = np.zeros_like(h)
            for i in range(T):
                top, w = deepseek_route(logits[i], t.get(b + "exp_probs_b.bias"), g.kv.get(p + "expert_gating_func", 1),
                                        g.kv.get(p + "expert_group_count", 1), g.kv.get(p + "expert_group_used_count", 1),
                                        k_used, norm_topk, g.kv.get(p + "expert_weights_scale", 1.0))
                for e, we in zip(top, w):
                    gte, up = t[b + "ffn_gate_exps.weight"][e], t[b + "ffn_up_exps.weight"][e]
                    y[i] += we * (t[b + "ffn_down_exps.weight"][e] @ (silu(gte @ h[i]) * (up @ h[i])))
            if b + "ffn_gate_shexp.weight" in t:
                shared = silu(h @ t[b + "ffn_gate_shexp.weight"].T) * (h @ t[b + "ffn_up_shexp.weight"].T)
                y = y + shared @ t[b + "ffn_down_shexp.weight"].T
            x = x + y
            continue
        if b + "attn_qkv.weight" in t:
            qkv = h @ t[b + "attn_qkv.weight"].T
            q, k, v = np.split(qkv, [n_head * hd, (n_head + n_kv) * hd], axis=1)
        else:
            q = h @ t[b + "attn_q.weight"].T + t.get(b + "attn_q.bias", 0)
            k = h @ t[b + "attn_k.weight"].T + t.get(b + "attn_k.bias", 0)
            v = h @ t[b + "attn_v.weight"].T + t.get(b + "attn_v.bias", 0)
        q, k = q.reshape(T, n_head, hd), k.reshape(T, n_kv, hd)
        if b + "attn_q_norm.weight" in t:
            q = rmsnorm(q, t[b + "attn_q_norm.weight"], eps)
            k = rmsnorm(k, t[b + "attn_k_norm.weight"], eps)
        q = rope(q, pos, layer_freq, half) * mscale
        k = rope(k, pos, layer_freq, half) * mscale
        v = v.reshape(T, n_kv, hd)
        if kv_dtype == "q8_0":
            q, k, v = q8_0_round_trip(q), q8_0_round_trip(k), q8_0_round_trip(v)
        out = np.zeros((T, n_head, hd))
        for hh in range(n_head):
            kv = hh // group
            s = softcap(q[:, hh, :] @ k[:, kv, :].T * scale, attn_cap) + layer_mask
            s = np.exp(s - s.max(axis=1, keepdims=True))
            s /= s.sum(axis=1, keepdims=True)
            out[:, hh, :] = s @ v[:, kv, :]
        o = out.reshape(T, n_head * hd) @ t[b + "attn_output.weight"].T
        if gemma:
            o = rmsnorm(o, t[b + "post_attention_norm.weight"], eps)
        x = x + o
        h = rmsnorm(x, t[b + "ffn_norm.weight"], eps)
        if n_expert:
            logits = h @ t[b + "ffn_gate_inp.weight"].T
            y = np.zeros_like(h)
            for i in range(T):
                top = np.argsort(-logits[i], kind="stable")[:k_used]
                probs = np.exp(logits[i] - logits[i].max())
                probs /= probs.sum()
                w = probs[top]
                if norm_topk:
                    w = w / w.sum()
                for e, we in zip(top, w):
                    gte = t[b + "ffn_gate_exps.weight"][e]
                    up = t[b + "ffn_up_exps.weight"][e]
                    dn = t[b + "ffn_down_exps.weight"][e]
                    y[i] += we * (dn @ (silu(gte @ h[i]) * (up @ h[i])))
            if b + "ffn_gate_inp_shexp.weight" in t:
                shared = silu(h @ t[b + "ffn_gate_shexp.weight"].T) * (h @ t[b + "ffn_up_shexp.weight"].T)
                shared = shared @ t[b + "ffn_down_shexp.weight"].T
                gate = 1.0 / (1.0 + np.exp(-(h @ t[b + "ffn_gate_inp_shexp.weight"])))
                y = y + gate[:, None] * shared
            x = x + y
        else:
            act = gelu_tanh if gemma else silu
            if b + "ffn_gate.weight" in t:
                gate, up = h @ t[b + "ffn_gate.weight"].T, h @ t[b + "ffn_up.weight"].T
            else:  # Phi-3: gate rows, then up rows
                gate, up = np.split(h @ t[b + "ffn_up.weight"].T, 2, axis=1)
            a = act(gate) * up
            f = a @ t[b + "ffn_down.weight"].T
            if gemma:
                f = rmsnorm(f, t[b + "post_ffw_norm.weight"], eps)
            x = x + f
    return rmsnorm(x, t["output_norm.weight"], eps)


if __name__ == "__main__":
    model = Gguf(sys.argv[1])
    logits = forward(model, [int(a) for a in sys.argv[2:]])
    np.save(sys.stdout.buffer, logits.astype(np.float32))
