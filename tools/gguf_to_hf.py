#!/usr/bin/env python3
"""Writes the Hugging Face twin of a GGUF model: config.json + model.safetensors.

The twin is the checkpoint that llama.cpp's converter would have turned into
the given GGUF: Hugging Face tensor names, q/k rows of the `llama`
architecture un-permuted back to rotate-half order (the converter permutes
them for interleaved-pair RoPE), merged expert tensors split per expert, and
the config fields transformers reads for that model type, and Gemma's norm
weights stored as w - 1 (Gemma multiplies by 1 + w; llama.cpp's converter
adds the 1). Tests load both
files in parallm and compare them against tools/reference_forward.py.

Reads the GGUF with reference_forward's own parser (f32/f16/bf16 tensors) and
writes every tensor as F32. No parallm code is involved.

Usage: gguf_to_hf.py MODEL.gguf OUT_DIR
"""
import json
import os
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reference_forward import Gguf  # noqa: E402

# GGUF architecture -> (transformers model_type, architectures[0]).
HF_TYPES = {
    "llama": ("llama", "LlamaForCausalLM"),
    "qwen2": ("qwen2", "Qwen2ForCausalLM"),
    "qwen3": ("qwen3", "Qwen3ForCausalLM"),
    "qwen2moe": ("qwen2_moe", "Qwen2MoeForCausalLM"),
    "qwen3moe": ("qwen3_moe", "Qwen3MoeForCausalLM"),
    "gemma2": ("gemma2", "Gemma2ForCausalLM"),
    "gemma3": ("gemma3_text", "Gemma3ForCausalLM"),
    "phi3": ("phi3", "Phi3ForCausalLM"),
    "deepseek2": ("deepseek_v3", "DeepseekV3ForCausalLM"),
}

# DeepSeek's latent attention and shared experts.
DEEPSEEK_NAMES = {
    "attn_q_a.weight": "self_attn.q_a_proj.weight",
    "attn_q_a_norm.weight": "self_attn.q_a_layernorm.weight",
    "attn_q_b.weight": "self_attn.q_b_proj.weight",
    "attn_kv_a_mqa.weight": "self_attn.kv_a_proj_with_mqa.weight",
    "attn_kv_a_norm.weight": "self_attn.kv_a_layernorm.weight",
    "attn_kv_b.weight": "self_attn.kv_b_proj.weight",
    "exp_probs_b.bias": "mlp.gate.e_score_correction_bias",
    "ffn_gate_shexp.weight": "mlp.shared_experts.gate_proj.weight",
    "ffn_up_shexp.weight": "mlp.shared_experts.up_proj.weight",
    "ffn_down_shexp.weight": "mlp.shared_experts.down_proj.weight",
}

# Gemma's names for its four norms per layer.
GEMMA_NORMS = {
    "attn_norm.weight": "input_layernorm.weight",
    "post_attention_norm.weight": "post_attention_layernorm.weight",
    "ffn_norm.weight": "pre_feedforward_layernorm.weight",
    "post_ffw_norm.weight": "post_feedforward_layernorm.weight",
}

LAYER_NAMES = {
    "attn_norm.weight": "input_layernorm.weight",
    "ffn_norm.weight": "post_attention_layernorm.weight",
    "attn_q.weight": "self_attn.q_proj.weight",
    "attn_k.weight": "self_attn.k_proj.weight",
    "attn_v.weight": "self_attn.v_proj.weight",
    "attn_q.bias": "self_attn.q_proj.bias",
    "attn_k.bias": "self_attn.k_proj.bias",
    "attn_v.bias": "self_attn.v_proj.bias",
    "attn_output.weight": "self_attn.o_proj.weight",
    "attn_q_norm.weight": "self_attn.q_norm.weight",
    "attn_k_norm.weight": "self_attn.k_norm.weight",
    "ffn_gate.weight": "mlp.gate_proj.weight",
    "ffn_up.weight": "mlp.up_proj.weight",
    "ffn_down.weight": "mlp.down_proj.weight",
    "ffn_gate_shexp.weight": "mlp.shared_expert.gate_proj.weight",
    "ffn_up_shexp.weight": "mlp.shared_expert.up_proj.weight",
    "ffn_down_shexp.weight": "mlp.shared_expert.down_proj.weight",
}


def unpermute(w, n_head):
    """Inverse of llama.cpp's q/k permutation: GGUF rows (head, i, pair) back
    to Hugging Face's (head, half, i)."""
    rows, cols = w.shape
    return w.reshape(n_head, rows // n_head // 2, 2, cols).swapaxes(1, 2).reshape(rows, cols)


def hf_config(g, arch):
    p = arch + "."
    kv = g.kv
    model_type, cls = HF_TYPES[arch]
    n_expert = kv.get(p + "expert_count", 0)
    if arch == "llama" and n_expert:
        model_type, cls = "mixtral", "MixtralForCausalLM"
    n_head = kv[p + "attention.head_count"]
    c = {
        "architectures": [cls],
        "model_type": model_type,
        "vocab_size": int(g.tensors["token_embd.weight"].shape[0]),
        "hidden_size": kv[p + "embedding_length"],
        "intermediate_size": kv[p + "feed_forward_length"],
        "num_hidden_layers": kv[p + "block_count"],
        "num_attention_heads": n_head,
        "num_key_value_heads": kv.get(p + "attention.head_count_kv", n_head),
        "head_dim": kv.get(p + "attention.key_length", kv[p + "embedding_length"] // n_head),
        "max_position_embeddings": kv.get(p + "context_length", 2048),
        "rms_norm_eps": kv.get(p + "attention.layer_norm_rms_epsilon", 1e-5),
        "rope_theta": kv.get(p + "rope.freq_base", 10000.0),
        "tie_word_embeddings": "output.weight" not in g.tensors,
        "hidden_act": "silu",
        "torch_dtype": "float32",
    }
    if arch in ("qwen3", "qwen3moe", "llama", "phi3"):
        c["attention_bias"] = False
    if model_type == "mixtral":
        c["num_local_experts"] = n_expert
        c["num_experts_per_tok"] = kv[p + "expert_used_count"]
    elif arch in ("qwen2moe", "qwen3moe"):
        c["num_experts"] = n_expert
        c["num_experts_per_tok"] = kv[p + "expert_used_count"]
        c["moe_intermediate_size"] = kv[p + "expert_feed_forward_length"]
        c["norm_topk_prob"] = bool(kv.get(p + "expert_weights_norm", arch != "qwen2moe"))
        c["decoder_sparse_step"] = 1
        c["mlp_only_layers"] = []
        if arch == "qwen2moe":
            c["shared_expert_intermediate_size"] = kv[p + "expert_shared_feed_forward_length"]
    if arch in ("gemma2", "gemma3"):
        gemma2 = arch == "gemma2"
        c["hidden_activation"] = "gelu_pytorch_tanh"
        c.pop("hidden_act")
        c["query_pre_attn_scalar"] = c["head_dim"]
        c["sliding_window"] = kv.get(p + "attention.sliding_window", 4096 if gemma2 else 512)
        c["attn_logit_softcapping"] = kv.get(p + "attn_logit_softcapping", 50.0 if gemma2 else None)
        c["final_logit_softcapping"] = kv.get(p + "final_logit_softcapping", 30.0 if gemma2 else None)
        if not gemma2:
            c["rope_local_base_freq"] = 10000.0
            c["sliding_window_pattern"] = kv.get(p + "attention.sliding_window_pattern", 6)
    if "rope_factors_long.weight" in g.tensors:
        c["original_max_position_embeddings"] = kv[p + "rope.scaling.original_context_length"]
        c["rope_scaling"] = {"type": "longrope",
                             "long_factor": [float(x) for x in g.tensors["rope_factors_long.weight"]],
                             "short_factor": [float(x) for x in g.tensors["rope_factors_short.weight"]]}
    if arch == "deepseek2":
        c["intermediate_size"] = kv[p + "feed_forward_length"]
        c["q_lora_rank"] = kv.get(p + "attention.q_lora_rank")
        c["kv_lora_rank"] = kv[p + "attention.kv_lora_rank"]
        c["qk_rope_head_dim"] = kv[p + "rope.dimension_count"]
        c["qk_nope_head_dim"] = kv[p + "attention.key_length"] - c["qk_rope_head_dim"]
        c["v_head_dim"] = kv[p + "attention.value_length"]
        c["head_dim"] = c["qk_rope_head_dim"]  # transformers' DeepseekV3Config: the rope part
        c["n_routed_experts"] = n_expert
        c["num_experts_per_tok"] = kv[p + "expert_used_count"]
        c["moe_intermediate_size"] = kv[p + "expert_feed_forward_length"]
        c["n_shared_experts"] = kv.get(p + "expert_shared_count", 0)
        c["first_k_dense_replace"] = kv.get(p + "leading_dense_block_count", 0)
        c["moe_layer_freq"] = 1
        c["routed_scaling_factor"] = kv.get(p + "expert_weights_scale", 1.0)
        c["norm_topk_prob"] = bool(kv.get(p + "expert_weights_norm", False))
        c["scoring_func"] = "sigmoid" if kv.get(p + "expert_gating_func", 1) == 2 else "softmax"
        groups = kv.get(p + "expert_group_count", 1)
        c["n_group"], c["topk_group"] = groups, kv.get(p + "expert_group_used_count", 1)
        has_bias = any(n.endswith("exp_probs_b.bias") for n in g.tensors)
        c["topk_method"] = "noaux_tc" if has_bias else ("group_limited_greedy" if groups > 1 else "greedy")
        c["attention_bias"] = False
        if kv.get(p + "rope.scaling.type") == "yarn":
            m_all = kv.get(p + "rope.scaling.yarn_log_multiplier", 0.0) / 0.1
            c["rope_scaling"] = {"type": "yarn", "factor": kv[p + "rope.scaling.factor"],
                                 "original_max_position_embeddings": kv[p + "rope.scaling.original_context_length"],
                                 "beta_fast": 32, "beta_slow": 1, "mscale": m_all, "mscale_all_dim": m_all}
    if kv.get(p + "rope.scaling.type") == "linear":
        c["rope_scaling"] = {"rope_type": "linear", "factor": kv[p + "rope.scaling.factor"]}
    elif kv.get("parallm.rope_scaling.type") == "llama3":
        c["rope_scaling"] = {
            "rope_type": "llama3",
            "factor": kv["parallm.rope_scaling.factor"],
            "low_freq_factor": kv["parallm.rope_scaling.low_freq_factor"],
            "high_freq_factor": kv["parallm.rope_scaling.high_freq_factor"],
            "original_max_position_embeddings": kv["parallm.rope_scaling.original_context_length"],
        }
    return c


def hf_tensors(g, arch, config):
    """(name, float32 array) in a stable order."""
    t = g.tensors
    out = [("model.embed_tokens.weight", t["token_embd.weight"]), ("model.norm.weight", t["output_norm.weight"])]
    if "output.weight" in t:
        out.append(("lm_head.weight", t["output.weight"]))
    mixtral = config["model_type"] == "mixtral"
    gemma = arch in ("gemma2", "gemma3")
    if gemma:
        out[1] = ("model.norm.weight", t["output_norm.weight"] - 1.0)
    names = {**LAYER_NAMES, **GEMMA_NORMS} if gemma else dict(LAYER_NAMES)
    if arch == "deepseek2":
        names.update(DEEPSEEK_NAMES)
    if arch == "phi3":  # fused Q/K/V; ffn_up holds gate and up
        names.update({"attn_qkv.weight": "self_attn.qkv_proj.weight", "ffn_up.weight": "mlp.gate_up_proj.weight"})
    for l in range(config["num_hidden_layers"]):
        b, hf = f"blk.{l}.", f"model.layers.{l}."
        for suffix, name in names.items():
            if b + suffix not in t:
                continue
            w = t[b + suffix]
            if gemma and suffix.endswith("norm.weight"):
                w = w - 1.0
            if arch == "llama" and suffix == "attn_q.weight":
                w = unpermute(w, config["num_attention_heads"])
            elif arch == "llama" and suffix == "attn_k.weight":
                w = unpermute(w, config["num_key_value_heads"])
            out.append((hf + name, w))
        if b + "attn_k_b.weight" in t:  # llama.cpp's split form back to kv_b_proj
            k_b, v_b = t[b + "attn_k_b.weight"], t[b + "attn_v_b.weight"]
            rows = [np.concatenate([k_b[hh].T, v_b[hh]], axis=0) for hh in range(k_b.shape[0])]
            out.append((hf + "self_attn.kv_b_proj.weight", np.concatenate(rows, axis=0)))
        if b + "ffn_gate_inp.weight" in t:
            out.append((hf + ("block_sparse_moe.gate.weight" if mixtral else "mlp.gate.weight"),
                        t[b + "ffn_gate_inp.weight"]))
        if b + "ffn_gate_inp_shexp.weight" in t:
            out.append((hf + "mlp.shared_expert_gate.weight", t[b + "ffn_gate_inp_shexp.weight"][None, :]))
        if b + "ffn_gate_exps.weight" in t:
            for e in range(t[b + "ffn_gate_exps.weight"].shape[0]):
                for kind, w_name, q_name in (("gate", "w1", "gate_proj"), ("up", "w3", "up_proj"),
                                             ("down", "w2", "down_proj")):
                    w = t[b + f"ffn_{kind}_exps.weight"][e]
                    name = f"block_sparse_moe.experts.{e}.{w_name}.weight" if mixtral else f"mlp.experts.{e}.{q_name}.weight"
                    out.append((hf + name, w))
    return out


def write_safetensors(path, tensors):
    """tensors: [(name, array)] written as F32, or [(name, dtype, array)]
    with the array's raw little-endian bytes under that safetensors dtype."""
    header, offset, blobs = {}, 0, []
    for item in tensors:
        name, dtype, arr = item if len(item) == 3 else (item[0], "F32", item[1])
        data = np.ascontiguousarray(arr, dtype=np.float32 if dtype == "F32" else None).tobytes()
        header[name] = {"dtype": dtype, "shape": list(arr.shape), "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        blobs.append(data)
    text = json.dumps(header, separators=(",", ":"))
    text += " " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text.encode())
        for blob in blobs:
            f.write(blob)


def convert(gguf_path, out_dir):
    g = Gguf(gguf_path)
    arch = g.kv["general.architecture"]
    if arch not in HF_TYPES:
        raise SystemExit(f"gguf_to_hf: architecture {arch} has no Hugging Face twin here")
    config = hf_config(g, arch)
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    write_safetensors(os.path.join(out_dir, "model.safetensors"), hf_tensors(g, arch, config))


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    convert(sys.argv[1], sys.argv[2])
