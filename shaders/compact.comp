#version 450
// Stable gather of kept slots: item (slot, word) of a kv head moves one 32-bit word of the
// slot's K and V row; word == ROW_WORDS moves the slot's position.
layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint ROW_WORDS = 64;

layout(binding = 0) readonly buffer Indices { uint indices[]; };
layout(binding = 1) readonly buffer Keys { uint k_words[]; };
layout(binding = 2) readonly buffer Values { uint v_words[]; };
layout(binding = 3) readonly buffer Positions { int positions[]; };
layout(binding = 4) writeonly buffer KeysOut { uint k_out[]; };
layout(binding = 5) writeonly buffer ValuesOut { uint v_out[]; };
layout(binding = 6) writeonly buffer PositionsOut { int positions_out[]; };

layout(push_constant) uniform Push {
  uint slot_stride;
  uint out_slot_stride;
  uint num_selected;
  uint index_stride;
  uint tail_first;
  uint kept_slots;
} push;

void main() {
  const uint item = gl_GlobalInvocationID.x;
  const uint slot = item / (ROW_WORDS + 1u);
  const uint word = item % (ROW_WORDS + 1u);
  if (slot >= push.kept_slots) return;
  const uint kv_head = gl_WorkGroupID.y;
  const uint source = slot < push.num_selected ? indices[kv_head * push.index_stride + slot]
                                               : push.tail_first + (slot - push.num_selected);
  const uint from = kv_head * push.slot_stride + source;
  const uint to = kv_head * push.out_slot_stride + slot;
  if (word == ROW_WORDS) {
    positions_out[to] = positions[from];
  } else {
    k_out[to * ROW_WORDS + word] = k_words[from * ROW_WORDS + word];
    v_out[to * ROW_WORDS + word] = v_words[from * ROW_WORDS + word];
  }
}
