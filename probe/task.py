"""Multi-query associative recall (MQAR), generated on the fly, deterministic per (seed, step).

A sequence is `pairs` key-value pairs  k1 v1 k2 v2 ... kN vN  (distinct keys), then `queries` pairs drawn from
those N, in random order:  k_a v_a k_b v_b ...  The loss and the accuracy count only the query values: the model
must predict v_a at the position of k_a, which needs attention (find the earlier k_a, read the value after it:
an induction-style two-step lookup; one step when the model is given the previous token, see model.py's token
shift). Chance accuracy is 1 / n_values. Tokens: keys [0, n_keys), values [n_keys, n_keys + n_values).

noise: the share of scored answers whose *target* is replaced by a random value (the input sequence keeps the
true value). It keeps the loss, hence dO and the FP8 gradient error, away from zero for the whole run (a solved
noiseless task stops producing gradients within a few hundred steps); the best accuracy is then
1 - noise + noise / n_values."""
import torch


class MQAR:
    def __init__(self, n_keys=128, n_values=128, pairs=64, queries=64, device="cpu", noise=0.0):
        if pairs > n_keys:
            raise ValueError(f"pairs ({pairs}) must be <= n_keys ({n_keys}): keys are distinct within a sequence")
        self.n_keys, self.n_values, self.pairs, self.queries, self.noise = n_keys, n_values, pairs, queries, noise
        self.vocab = n_keys + n_values
        self.seqlen = 2 * (pairs + queries)
        self.device = torch.device(device)

    def batch(self, batch_size, seed):
        """(inputs [B, T], targets [B, T] with -100 where not scored). Same seed -> same batch on any device."""
        g = torch.Generator(device="cpu").manual_seed(int(seed))
        B, N, Q = batch_size, self.pairs, self.queries
        keys = torch.rand(B, self.n_keys, generator=g).argsort(-1)[:, :N]                 # distinct per row
        vals = torch.randint(0, self.n_values, (B, N), generator=g) + self.n_keys
        pick = torch.randint(0, N, (B, Q), generator=g)
        qk, qv = keys.gather(1, pick), vals.gather(1, pick)
        ctx = torch.stack([keys, vals], -1).reshape(B, 2 * N)
        qry = torch.stack([qk, qv], -1).reshape(B, 2 * Q)
        seq = torch.cat([ctx, qry], 1)                                                    # [B, 2N + 2Q]
        inputs = seq[:, :-1]
        targets = torch.full_like(inputs, -100)
        # position t predicts seq[t + 1]; query value j sits at 2N + 2j + 1, predicted from position 2N + 2j
        pos = 2 * N + 2 * torch.arange(Q)
        targets[:, pos] = seq[:, pos + 1]
        if self.noise > 0:
            flip = torch.rand(B, Q, generator=g) < self.noise
            rnd = torch.randint(0, self.n_values, (B, Q), generator=g) + self.n_keys
            targets[:, pos] = torch.where(flip, rnd, targets[:, pos])
        # pad by one token so the length is seqlen (a multiple of 16 when pairs + queries is a multiple of 8)
        inputs = torch.cat([inputs, torch.zeros(B, 1, dtype=inputs.dtype)], 1)
        targets = torch.cat([targets, torch.full((B, 1), -100, dtype=targets.dtype)], 1)
        return inputs.to(self.device, non_blocking=True), targets.to(self.device, non_blocking=True)

    def chance(self):
        return 1.0 / self.n_values

    def best(self):
        """The best expected accuracy (noise makes some answers unpredictable)."""
        return 1.0 - self.noise + self.noise / self.n_values
