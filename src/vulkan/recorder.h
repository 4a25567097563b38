// Records one submission of compute work: uploads through staging, dispatches, read-backs and
// timestamps; end() submits it without waiting and wait() waits for it (submit() does both).
// A command waits for the ones recorded before it (a full compute/transfer barrier) only where
// it must: where it binds a range of a buffer that a command since the last barrier binds too,
// and one of the two may write it (a dispatch may write every binding its shader does not
// declare readonly). Commands that share no written bytes run together, as a step's next
// layer's append beside this layer's merge. Under KVC_PROFILE every command waits, so that its
// timestamps time it alone. A recording may also go into an application's command buffer,
// which the application submits (kvc_step_begin_commands). A dispatch pushes its buffers into
// the command buffer where the device offers VK_KHR_push_descriptor (Pipeline::push_template),
// or binds a descriptor set from the recorder's pools, reset at each begin().
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "vulkan/buffer.h"
#include "vulkan/pipeline.h"

namespace kvc::vk {

class Recorder {
 public:
  explicit Recorder(Device& device);
  ~Recorder();
  Recorder(const Recorder&) = delete;
  Recorder& operator=(const Recorder&) = delete;

  Device& device() const { return device_; }

  // Starts a new recording, into libkvc's command buffer or into `external` (an application's,
  // in the recording state). Waits for the previous submission first; staging and descriptor
  // sets of the previous recording are reused from here on.
  void begin(VkCommandBuffer external = VK_NULL_HANDLE);
  // Copies `bytes` from host memory now and records their copy into `dst`.
  void upload(const void* src, VkDeviceSize bytes, BufferSlice dst);
  // Records a copy of `src`; `dst` receives it when wait() returns true. Not in an external
  // recording (nothing would tell libkvc when to deliver it).
  void download(BufferSlice src, void* dst, VkDeviceSize bytes);
  void copy(BufferSlice src, BufferSlice dst, VkDeviceSize bytes);
  // One copy command of `count` regions of `bytes`, region i at src.offset + i * src_stride and
  // dst.offset + i * dst_stride. No destination region may overlap a source region.
  void copy_strided(BufferSlice src, VkDeviceSize src_stride, BufferSlice dst, VkDeviceSize dst_stride, VkDeviceSize bytes,
                    uint32_t count);
  void fill(BufferSlice dst, VkDeviceSize bytes, uint32_t word);
  // Binds `buffers` to bindings 0..n-1 and `push` (spec.push_bytes long) and dispatches. An
  // array binding (spec.array_lengths) takes that many consecutive buffers of the list.
  void dispatch(const KernelSpec& spec, std::initializer_list<BufferSlice> buffers, const void* push,
                uint32_t groups_x, uint32_t groups_y = 1, uint32_t groups_z = 1);
  void dispatch(const KernelSpec& spec, const std::vector<BufferSlice>& buffers, const void* push, uint32_t groups_x,
                uint32_t groups_y = 1, uint32_t groups_z = 1);
  // Writes a GPU timestamp once all earlier commands finished; returns its index.
  uint32_t timestamp();
  // Ends the recording: submits libkvc's command buffer without waiting, or records the
  // closing barrier into the application's (which the application then submits).
  void end();
  // Waits up to timeout_ns for the submitted recording; true once it finished (read-backs
  // delivered, timestamps read), at once when nothing is in flight.
  bool wait(uint64_t timeout_ns);
  // Ends, submits and waits.
  void submit();
  // Drops the current recording unsubmitted (a failed step).
  void discard();
  bool recording() const { return recording_; }
  // Commands recorded since the recording began (an operation that failed before recording
  // any left the recording intact).
  uint64_t commands_recorded() const { return commands_recorded_; }
  bool in_flight() const { return in_flight_; }
  bool external() const { return external_ != VK_NULL_HANDLE; }
  // GPU time of the last completed submission of libkvc's own command buffer, from its first
  // command to its last; 0 when the queue has no timestamps.
  double last_submission_ns() const;
  // Nanoseconds between two timestamps of the last submission.
  double elapsed_ns(uint32_t from, uint32_t to) const;
  // For third-party recorders (VkFFT): the command buffer being recorded, ordered after every
  // earlier command that shares bytes with `written` (what they record may read and write it,
  // and nothing else the recorder sees); `label` names it for KVC_PROFILE.
  VkCommandBuffer raw_commands(const std::string& label, BufferSlice written);
  // The next command waits for every command recorded before it, whoever recorded it (an
  // application may record its own between libkvc's calls into its command buffer).
  void order_after_all() { order_all_ = true; }
  // Barriers recorded since begin() (for tests of the ordering).
  uint64_t barriers_recorded() const { return barriers_recorded_; }

 private:
  // A byte range a command binds, and whether it may write it.
  struct Access {
    const Buffer* buffer;
    VkDeviceSize begin, end;
    bool write;
  };
  static Access access(BufferSlice slice, bool write);
  // Whether `a` and `b` may touch a byte in common, one of them writing it. An application's
  // buffers may alias each other's memory, so any two of them count as overlapping.
  static bool conflict(const Access& a, const Access& b);
  // Every command starts here: a barrier first where the command conflicts with one since the
  // last barrier (or `after_all`: it must follow every earlier command). `label` names it for
  // KVC_PROFILE (vulkan/profile.h).
  void before_command(const std::string& label, const Access* accesses, size_t count, bool after_all = false);
  uint32_t write_timestamp(std::string label);
  // The barrier that makes every earlier compute and transfer write visible to what follows.
  void barrier(VkPipelineStageFlags dst_stages, VkAccessFlags dst_access);
  VkCommandBuffer commands() const { return external_ ? external_ : commands_; }
  VkDescriptorSet allocate_set(VkDescriptorSetLayout layout);
  void dispatch(const KernelSpec& spec, const BufferSlice* buffers, size_t count, const void* push, uint32_t groups_x,
                uint32_t groups_y, uint32_t groups_z);
  VkResult allocate_from(const VkDescriptorSetAllocateInfo& alloc, VkDescriptorSet& set);

  struct Readback {
    BufferSlice staging;
    void* dst;
    VkDeviceSize bytes;
  };
  static constexpr uint32_t kMaxTimestamps = 256;
  static constexpr uint32_t kMaxProfiledTimestamps = 16384;  // a timestamp per command under KVC_PROFILE
  static constexpr uint32_t kSetsPerPool = 256;
  static constexpr size_t kInlineBuffers = 16;  // a dispatch's buffers held on the stack

  Device& device_;
  VkCommandPool pool_ = VK_NULL_HANDLE;
  VkCommandBuffer commands_ = VK_NULL_HANDLE;
  VkFence fence_ = VK_NULL_HANDLE;
  VkQueryPool queries_ = VK_NULL_HANDLE;
  std::vector<VkDescriptorPool> descriptor_pools_;
  size_t current_pool_ = 0;
  std::vector<Readback> readbacks_;
  const bool profiling_;
  const uint32_t timestamp_capacity_;
  std::vector<uint64_t> timestamps_;
  std::vector<std::string> labels_;  // per timestamp: the command recorded after it ("": none)
  uint32_t timestamps_written_ = 0;
  VkCommandBuffer external_ = VK_NULL_HANDLE;  // the application's, while recording into it
  bool recording_ = false;
  bool in_flight_ = false;  // submitted, not yet waited for
  std::vector<Access> unordered_;  // what the commands since the last barrier bind
  bool order_all_ = false;          // the next command waits for everything before it
  uint64_t barriers_recorded_ = 0;
  uint64_t commands_recorded_ = 0;
};

}  // namespace kvc::vk
