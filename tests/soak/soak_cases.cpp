#include "soak/soak_cases.h"

#include <algorithm>

namespace kvc::soak {
namespace {

// Model-shaped but small, so that a million decode tokens take minutes on one CPU core: grouped
// queries (2 q heads per kv head) and more than one layer, which is what the policies index by.
constexpr uint32_t kNumLayers = 2;
constexpr uint32_t kNumQHeads = 4;
constexpr uint32_t kNumKvHeads = 2;
constexpr uint32_t kHeadDim = 16;

SoakCase eviction_case(const char* name, kvc_policy policy) {
  SoakCase c;
  c.name = name;
  c.policy = policy;
  c.rope_style = KVC_ROPE_NEOX;  // positions are ranks below capacity: RoPE must stay finite
  c.capacity = 64;
  c.prompt_tokens = 32;  // below capacity, so the decode passes the point where eviction starts
  c.memory_period = c.capacity;
  c.positions = PositionRule::InCacheRank;
  return c;
}

SoakCase freqkv_case() {
  SoakCase c;
  c.name = "FREQKV";
  c.policy = KVC_POLICY_FREQKV;
  c.rope_style = KVC_ROPE_NEOX;
  c.capacity = 128;
  c.prompt_tokens = 96;
  c.freqkv.recent_tokens = 8;  // the authors' code's setting, so the recent tokens' move is soaked too
  // A full window (128) shrinks to 4 sinks + floor(0.5 * 116) + 8 recent = 70 slots: a
  // compression every 58 tokens.
  c.memory_period = c.capacity;
  c.positions = PositionRule::SlotIndex;
  return c;
}

SoakCase faedkv_case() {
  SoakCase c;
  c.name = "FAEDKV";
  c.policy = KVC_POLICY_FAEDKV;
  c.capacity = 96;
  c.prompt_tokens = c.capacity;
  c.ends_prefill = true;
  c.faedkv.sinks = 4;
  c.faedkv.recent_window = 16;
  c.faedkv.chunks = 8;
  c.faedkv.retain_ratio = 0.25f;
  c.memory_period = c.faedkv.recent_window + 1;  // the window's ring (R + 1 slots) turns once every R + 1 tokens
  c.positions = PositionRule::FaedKvStream;
  c.faedkv_recent_window = c.faedkv.recent_window;
  return c;
}

SoakCase fourier_case() {
  SoakCase c;
  c.name = "FOURIER";
  c.policy = KVC_POLICY_FOURIER;
  c.capacity = 256;
  c.prompt_tokens = 64;  // past sinks + 2N + local window = 36: kvc_cache_end_prefill compresses
  c.ends_prefill = true;
  c.refills = true;
  c.fourier.sinks = 4;
  c.fourier.local_window = 16;
  c.fourier.num_states = 8;
  c.memory_period = c.capacity - c.prompt_tokens;  // one refill
  c.positions = PositionRule::SlotIndex;
  return c;
}

std::string slot_message(uint32_t head, uint32_t slot, int32_t position, int64_t expected) {
  return "kv head " + std::to_string(head) + " slot " + std::to_string(slot) + " has position " +
         std::to_string(position) + ", expected " + std::to_string(expected);
}

}  // namespace

kvc_cache_desc SoakCase::desc(kvc_dtype dtype) const {
  kvc_cache_desc d = kvc_cache_desc_default();
  d.num_layers = kNumLayers;
  d.num_q_heads = kNumQHeads;
  d.num_kv_heads = kNumKvHeads;
  d.head_dim = kHeadDim;
  d.dtype = dtype;
  d.capacity = capacity;
  d.policy = policy;
  d.rope_style = rope_style;
  switch (policy) {
    case KVC_POLICY_FREQKV: d.policy_params = &freqkv; break;
    case KVC_POLICY_FAEDKV: d.policy_params = &faedkv; break;
    case KVC_POLICY_FOURIER: d.policy_params = &fourier; break;
    default: d.policy_params = &eviction; break;
  }
  return d;
}

std::vector<SoakCase> soak_cases() {
  return {eviction_case("STREAMING", KVC_POLICY_STREAMING),
          eviction_case("H2O", KVC_POLICY_H2O),
          eviction_case("TOVA", KVC_POLICY_TOVA),
          eviction_case("TREEKV", KVC_POLICY_TREEKV),
          freqkv_case(),
          faedkv_case(),
          fourier_case()};
}

std::string check_positions(const SoakCase& soak_case, const std::vector<int32_t>& positions, uint32_t num_kv_heads,
                            uint32_t slots, uint64_t layer_tokens_seen) {
  for (uint32_t head = 0; head < num_kv_heads; ++head) {
    const int32_t* row = positions.data() + size_t(head) * slots;
    if (soak_case.positions == PositionRule::InCacheRank) {
      std::vector<int32_t> sorted(row, row + slots);
      std::sort(sorted.begin(), sorted.end());
      for (uint32_t rank = 0; rank < slots; ++rank)
        if (sorted[rank] != int32_t(rank))
          return "kv head " + std::to_string(head) + ": positions are not the ranks 0.." + std::to_string(slots - 1) +
                 " (sorted, rank " + std::to_string(rank) + " is " + std::to_string(sorted[rank]) + ")";
      continue;
    }
    const uint32_t window_start =
        soak_case.positions == PositionRule::FaedKvStream ? slots - soak_case.faedkv_recent_window : slots;
    for (uint32_t slot = 0; slot < slots; ++slot) {
      const int64_t expected = slot < window_start ? int64_t(slot) : int64_t(layer_tokens_seen) - (slots - slot);
      if (row[slot] != expected) return slot_message(head, slot, row[slot], expected);
    }
  }
  return "";
}

}  // namespace kvc::soak
