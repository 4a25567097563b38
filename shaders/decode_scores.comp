#version 450
// Per kv head and slot, the decode query's attention probability summed over the kv head's
// query heads: exp(logit - lse), from the logits attention_decode wrote (WRITE_LOGITS) and the
// log-sum-exps attention_merge wrote. One thread per slot; the chunk path (attention_scores)
// recomputes its logits from K instead.
layout(local_size_x_id = 0) in;

layout(binding = 0) readonly buffer Logits { float logits[]; };  // [num_kv_heads][num_slots][group_size]
layout(binding = 1) readonly buffer Lse { float lse[]; };        // [num_q_heads]
layout(binding = 2) writeonly buffer Scores { float scores[]; };  // [num_kv_heads][num_slots]

layout(push_constant) uniform Push {
  uint num_slots;
  uint group_size;
} push;

void main() {
  const uint slot = gl_GlobalInvocationID.x;
  const uint kv_head = gl_WorkGroupID.y;
  if (slot >= push.num_slots) return;
  float total = 0.0;
  for (uint g = 0; g < push.group_size; ++g)
    total += exp(logits[(kv_head * push.num_slots + slot) * push.group_size + g] - lse[kv_head * push.group_size + g]);
  scores[kv_head * push.num_slots + slot] = total;
}
