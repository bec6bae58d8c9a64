"""A small decoder-only transformer for the probe: pre-norm blocks, GQA attention with RoPE and QK RMSNorm with
learnable per-channel gains (gain_q, gain_k: one vector of head_dim per layer, shared by the heads, as in
OLMo 2 / Qwen 3), a GELU MLP. The attention kernel is pluggable (`attn_fn(q, k, v)` on BF16 [B, S, H, D],
causal), so every arm trains the same module with the same initialization."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def rms_norm(x, gain, eps=1e-6):
    xf = x.float()
    return xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * gain


class RMSNorm(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x):
        return rms_norm(x, self.weight).to(x.dtype)


def rope_tables(seqlen, dim, base=10000.0, device=None):
    inv = 1.0 / (base ** (torch.arange(0, dim, 2, device=device, dtype=torch.float32) / dim))
    ang = torch.outer(torch.arange(seqlen, device=device, dtype=torch.float32), inv)       # [S, D/2]
    return ang.cos()[None, :, None, :], ang.sin()[None, :, None, :]                      # [1, S, 1, D/2]


def apply_rope(x, cos, sin):
    """x [B, S, H, D] float32, rotate-half convention (channel c pairs with c + D/2)."""
    x1, x2 = x.chunk(2, -1)
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], -1)


def sdpa_bf16(q, k, v):
    """torch SDPA (flash / cuDNN / efficient on the GPU) in BF16: the reference arm."""
    o = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True,
                                       enable_gqa=True)
    return o.transpose(1, 2)


class Attention(nn.Module):
    def __init__(self, d_model, heads, kv_heads, head_dim, qk_norm=True):
        super().__init__()
        self.h, self.hkv, self.dh, self.qk_norm = heads, kv_heads, head_dim, qk_norm
        self.wq = nn.Linear(d_model, heads * head_dim, bias=False)
        self.wk = nn.Linear(d_model, kv_heads * head_dim, bias=False)
        self.wv = nn.Linear(d_model, kv_heads * head_dim, bias=False)
        self.wo = nn.Linear(heads * head_dim, d_model, bias=False)
        self.gain_q = nn.Parameter(torch.ones(head_dim))
        self.gain_k = nn.Parameter(torch.ones(head_dim))
        self.last_max_logit = None

    def qk(self, x, cos, sin):
        B, S, _ = x.shape
        q = self.wq(x).view(B, S, self.h, self.dh)
        k = self.wk(x).view(B, S, self.hkv, self.dh)
        if self.qk_norm:
            q, k = rms_norm(q, self.gain_q), rms_norm(k, self.gain_k)
        else:
            q, k = q.float(), k.float()
        return apply_rope(q, cos, sin), apply_rope(k, cos, sin)

    def forward(self, x, cos, sin, attn_fn, probe_logits=False):
        B, S, _ = x.shape
        q, k = self.qk(x, cos, sin)
        v = self.wv(x).view(B, S, self.hkv, self.dh)
        if probe_logits:   # the largest |scaled logit| on the first sequence, causal part (a diagnostic)
            with torch.no_grad():
                g = self.h // self.hkv
                s = torch.einsum("shd,thd->hst", q[0].float(), k[0].float().repeat_interleave(g, 1)) / math.sqrt(self.dh)
                mask = torch.ones(S, S, dtype=torch.bool, device=x.device).tril()
                self.last_max_logit = float(s.masked_fill(~mask, 0).abs().max())
        o = attn_fn(q.to(torch.bfloat16), k.to(torch.bfloat16), v.to(torch.bfloat16))
        return self.wo(o.reshape(B, S, self.h * self.dh).to(x.dtype))


class Block(nn.Module):
    def __init__(self, d_model, heads, kv_heads, head_dim, ffn, qk_norm):
        super().__init__()
        self.n1, self.n2 = RMSNorm(d_model), RMSNorm(d_model)
        self.attn = Attention(d_model, heads, kv_heads, head_dim, qk_norm)
        self.up = nn.Linear(d_model, ffn, bias=False)
        self.down = nn.Linear(ffn, d_model, bias=False)

    def forward(self, x, cos, sin, attn_fn, probe_logits=False):
        x = x + self.attn(self.n1(x), cos, sin, attn_fn, probe_logits)
        return x + self.down(F.gelu(self.up(self.n2(x))))


class Decoder(nn.Module):
    def __init__(self, vocab, seqlen, layers=4, d_model=256, heads=8, kv_heads=2, head_dim=64, ffn=1024,
                 qk_norm=True, token_shift=False):
        super().__init__()
        self.emb = nn.Embedding(vocab, d_model)
        # token shift: the input at t also carries an embedding of token t-1 (index `vocab` at t = 0), so a value
        # position already knows its key and recall is one attention hop instead of an induction circuit
        self.emb_prev = nn.Embedding(vocab + 1, d_model) if token_shift else None
        self.vocab = vocab
        self.blocks = nn.ModuleList(Block(d_model, heads, kv_heads, head_dim, ffn, qk_norm) for _ in range(layers))
        self.norm = RMSNorm(d_model)
        self.head = nn.Linear(d_model, vocab, bias=False)
        self.seqlen, self.head_dim = seqlen, head_dim
        self.reset(layers)

    def reset(self, layers):
        for n, p in self.named_parameters():
            if p.dim() == 2:
                std = 0.02 / math.sqrt(2 * layers) if n.endswith(("wo.weight", "down.weight")) else 0.02
                nn.init.normal_(p, std=std)

    def forward(self, tokens, attn_fn, probe_logits=False):
        S = tokens.shape[1]
        cos, sin = rope_tables(S, self.head_dim, device=tokens.device)
        x = self.emb(tokens)
        if self.emb_prev is not None:
            prev = torch.cat([torch.full_like(tokens[:, :1], self.vocab), tokens[:, :-1]], 1)
            x = x + self.emb_prev(prev)
        for b in self.blocks:
            x = b(x, cos, sin, attn_fn, probe_logits)
        return self.head(self.norm(x))

    def param_groups(self, weight_decay):
        """AdamW groups: matrices decay; gains, norms and the embedding do not (the gains are the diagnostic)."""
        decay, no = [], []
        for n, p in self.named_parameters():
            (decay if p.dim() == 2 and not n.startswith("emb") else no).append(p)
        return [{"params": decay, "weight_decay": weight_decay}, {"params": no, "weight_decay": 0.0}]


def gain_stats(model, top=4):
    """Per layer: max|gain_q|, max|gain_k|, and the share of sum_c |gain_q[c] gain_k[c]| held by the `top`
    largest channels (uniform gains: top / head_dim), plus the largest single channel's product."""
    out = []
    for b in model.blocks:
        gq, gk = b.attn.gain_q.detach().float(), b.attn.gain_k.detach().float()
        prod = (gq * gk).abs()
        srt = prod.sort(descending=True).values
        out.append(dict(max_gq=float(gq.abs().max()), max_gk=float(gk.abs().max()),
                        sum_qk=float((gq * gk).sum()), topk_share=float(srt[:top].sum() / srt.sum().clamp_min(1e-30)),
                        max_prod=float(srt[0]), mean_prod=float(prod.mean())))
    return out
