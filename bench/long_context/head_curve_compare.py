"""The fused head's loss curve against the unfused one: |fused - unfused| / unfused at every logged step."""
import json
import sys

def losses(path):
    out = {}
    for line in open(path):
        j = json.loads(line)
        if "loss" in j and "step" in j:
            out[j["step"]] = j["loss"]
    return out

fused, whole = losses(sys.argv[1]), losses(sys.argv[2])
steps = sorted(set(fused) & set(whole))
worst = max(steps, key=lambda s: abs(fused[s] - whole[s]) / whole[s])
print(f"logged steps compared: {len(steps)} (fused {len(fused)}, unfused {len(whole)}), "
      f"first {steps[0]}, last {steps[-1]}")
for s in steps[:3] + steps[-3:]:
    print(f"  step {s}: fused {fused[s]:.4f} unfused {whole[s]:.4f} rel {abs(fused[s] - whole[s]) / whole[s]:.2e}")
rel = abs(fused[worst] - whole[worst]) / whole[worst]
print(f"max relative difference {rel:.3e} at step {worst} ({fused[worst]:.4f} vs {whole[worst]:.4f}): "
      f"{'within' if rel <= 0.005 else 'NOT within'} 0.5%")
