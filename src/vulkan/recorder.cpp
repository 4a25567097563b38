#include "vulkan/recorder.h"

#include <array>
#include <cstring>

#include "vulkan/device.h"
#include "vulkan/faults.h"
#include "vulkan/profile.h"
#include "vulkan/staging.h"

namespace kvc::vk {

Recorder::Recorder(Device& device)
    : device_(device),
      profiling_(profiling_enabled()),
      timestamp_capacity_(profiling_ ? kMaxProfiledTimestamps : kMaxTimestamps) {
  const VkDevice vk_device = device.device();
  VkCommandPoolCreateInfo pool_info{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  pool_info.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  pool_info.queueFamilyIndex = device.queue_family();
  check(vkCreateCommandPool(vk_device, &pool_info, nullptr, &pool_), "vkCreateCommandPool");
  VkCommandBufferAllocateInfo alloc{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
  alloc.commandPool = pool_;
  alloc.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  alloc.commandBufferCount = 1;
  check(vkAllocateCommandBuffers(vk_device, &alloc, &commands_), "vkAllocateCommandBuffers");
  VkFenceCreateInfo fence_info{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
  check(vkCreateFence(vk_device, &fence_info, nullptr, &fence_), "vkCreateFence");
  if (device.supports_timestamps()) {
    VkQueryPoolCreateInfo query_info{VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO};
    query_info.queryType = VK_QUERY_TYPE_TIMESTAMP;
    query_info.queryCount = timestamp_capacity_;
    check(vkCreateQueryPool(vk_device, &query_info, nullptr, &queries_), "vkCreateQueryPool");
  }
}

Recorder::~Recorder() {
  const VkDevice vk_device = device_.device();
  if (in_flight_) vkWaitForFences(vk_device, 1, &fence_, VK_TRUE, UINT64_MAX);
  for (VkDescriptorPool pool : descriptor_pools_) vkDestroyDescriptorPool(vk_device, pool, nullptr);
  if (queries_) vkDestroyQueryPool(vk_device, queries_, nullptr);
  vkDestroyFence(vk_device, fence_, nullptr);
  vkDestroyCommandPool(vk_device, pool_, nullptr);
}

void Recorder::begin(VkCommandBuffer external) {
  wait(UINT64_MAX);
  // A recording abandoned by an exception is simply dropped: the reset below discards it.
  device_.staging().reset();
  readbacks_.clear();
  for (VkDescriptorPool pool : descriptor_pools_) vkResetDescriptorPool(device_.device(), pool, 0);
  current_pool_ = 0;
  timestamps_written_ = 0;
  labels_.clear();
  commands_recorded_ = 0;
  barriers_recorded_ = 0;
  unordered_.clear();
  external_ = external;
  recording_ = true;
  // The application's commands recorded before ours, or its earlier submissions on this queue,
  // may have written what we read.
  order_all_ = true;
  if (external_) return;
  check(vkResetCommandBuffer(commands_, 0), "vkResetCommandBuffer");
  VkCommandBufferBeginInfo info{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  info.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  check(vkBeginCommandBuffer(commands_, &info), "vkBeginCommandBuffer");
  if (queries_) {
    vkCmdResetQueryPool(commands_, queries_, 0, timestamp_capacity_);
    timestamp();  // index 0: the submission's start (last_submission_ns)
  }
}

void Recorder::barrier(VkPipelineStageFlags dst_stages, VkAccessFlags dst_access) {
  VkMemoryBarrier barrier{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  barrier.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  barrier.dstAccessMask = dst_access;
  vkCmdPipelineBarrier(commands(), VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT, dst_stages, 0, 1,
                       &barrier, 0, nullptr, 0, nullptr);
  ++barriers_recorded_;
}

Recorder::Access Recorder::access(BufferSlice slice, bool write) {
  const VkDeviceSize end = slice.size == VK_WHOLE_SIZE ? VK_WHOLE_SIZE : slice.offset + slice.size;
  return {slice.buffer, slice.offset, end, write};
}

bool Recorder::conflict(const Access& a, const Access& b) {
  if (!a.write && !b.write) return false;
  if (a.buffer->borrowed() && b.buffer->borrowed()) return true;
  return a.buffer == b.buffer && a.begin < b.end && b.begin < a.end;
}

void Recorder::before_command(const std::string& label, const Access* accesses, size_t count, bool after_all) {
  require(recording_, KVC_ERROR_INTERNAL, "Recorder used outside begin()/end()");
  ++commands_recorded_;
  bool wait = order_all_ || after_all || profiling_;
  for (size_t i = 0; i < count && !wait; ++i)
    for (const Access& earlier : unordered_)
      if (conflict(accesses[i], earlier)) {
        wait = true;
        break;
      }
  if (wait) {
    barrier(VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
            VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT);
    unordered_.clear();
    order_all_ = false;
  }
  unordered_.insert(unordered_.end(), accesses, accesses + count);
  // After the barrier, so the timestamp falls when every earlier command finished; two are
  // left for end() and a caller's timestamp().
  if (profiling_ && !label.empty() && queries_ && !external_) {
    // The pool's last profiling timestamp closes the profiled commands: what follows it is
    // counted under a name of its own, not added to the last command profiled.
    if (timestamps_written_ + 3 < timestamp_capacity_) write_timestamp(label);
    else if (timestamps_written_ + 3 == timestamp_capacity_) write_timestamp("(commands past the profiler's timestamps)");
  }
}

void Recorder::upload(const void* src, VkDeviceSize bytes, BufferSlice dst) {
  if (bytes == 0) return;
  const BufferSlice staged = device_.staging().allocate(bytes);
  std::memcpy(static_cast<char*>(staged.buffer->mapped()) + staged.offset, src, bytes);
  copy(staged, dst, bytes);
}

void Recorder::download(BufferSlice src, void* dst, VkDeviceSize bytes) {
  require(!external_, KVC_ERROR_INTERNAL, "a read-back recorded into an application's command buffer");
  if (bytes == 0) return;
  const BufferSlice staged = device_.staging().allocate(bytes);
  copy(src, staged, bytes);
  readbacks_.push_back({staged, dst, bytes});
}

void Recorder::copy(BufferSlice src, BufferSlice dst, VkDeviceSize bytes) {
  copy_strided(src, 0, dst, 0, bytes, 1);
}

void Recorder::copy_strided(BufferSlice src, VkDeviceSize src_stride, BufferSlice dst, VkDeviceSize dst_stride,
                            VkDeviceSize bytes, uint32_t count) {
  if (bytes == 0 || count == 0) return;
  std::vector<VkBufferCopy> regions(count);
  for (uint32_t i = 0; i < count; ++i) regions[i] = {src.offset + i * src_stride, dst.offset + i * dst_stride, bytes};
  const VkDeviceSize span_last = VkDeviceSize(count - 1);
  const Access accesses[] = {access({src.buffer, src.offset, span_last * src_stride + bytes}, false),
                             access({dst.buffer, dst.offset, span_last * dst_stride + bytes}, true)};
  before_command("copy", accesses, 2);
  vkCmdCopyBuffer(commands(), src.buffer->handle(), dst.buffer->handle(), count, regions.data());
}

void Recorder::fill(BufferSlice dst, VkDeviceSize bytes, uint32_t word) {
  if (bytes == 0) return;
  const Access written = access({dst.buffer, dst.offset, bytes}, true);
  before_command("fill", &written, 1);
  vkCmdFillBuffer(commands(), dst.buffer->handle(), dst.offset, bytes, word);
}

VkResult Recorder::allocate_from(const VkDescriptorSetAllocateInfo& alloc, VkDescriptorSet& set) {
  const VkResult injected = faults::injected(faults::Op::AllocateDescriptorSet);
  return injected != VK_SUCCESS ? injected : vkAllocateDescriptorSets(device_.device(), &alloc, &set);
}

VkDescriptorSet Recorder::allocate_set(VkDescriptorSetLayout layout) {
  VkDescriptorSetAllocateInfo alloc{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
  alloc.descriptorSetCount = 1;
  alloc.pSetLayouts = &layout;
  VkDescriptorSet set = VK_NULL_HANDLE;
  for (; current_pool_ < descriptor_pools_.size(); ++current_pool_) {
    alloc.descriptorPool = descriptor_pools_[current_pool_];
    const VkResult result = allocate_from(alloc, set);
    if (result == VK_SUCCESS) return set;
    if (result != VK_ERROR_OUT_OF_POOL_MEMORY && result != VK_ERROR_FRAGMENTED_POOL)
      check(result, "vkAllocateDescriptorSets");
  }
  const VkDescriptorPoolSize size{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, kSetsPerPool * 8};
  VkDescriptorPoolCreateInfo pool_info{VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
  pool_info.maxSets = kSetsPerPool;
  pool_info.poolSizeCount = 1;
  pool_info.pPoolSizes = &size;
  VkDescriptorPool pool = VK_NULL_HANDLE;
  check(vkCreateDescriptorPool(device_.device(), &pool_info, nullptr, &pool), "vkCreateDescriptorPool");
  descriptor_pools_.push_back(pool);
  current_pool_ = descriptor_pools_.size() - 1;
  alloc.descriptorPool = pool;
  check(allocate_from(alloc, set), "vkAllocateDescriptorSets");
  return set;
}

void Recorder::dispatch(const KernelSpec& spec, std::initializer_list<BufferSlice> buffers, const void* push,
                        uint32_t groups_x, uint32_t groups_y, uint32_t groups_z) {
  dispatch(spec, buffers.begin(), buffers.size(), push, groups_x, groups_y, groups_z);
}

void Recorder::dispatch(const KernelSpec& spec, const std::vector<BufferSlice>& buffers, const void* push, uint32_t groups_x,
                        uint32_t groups_y, uint32_t groups_z) {
  dispatch(spec, buffers.data(), buffers.size(), push, groups_x, groups_y, groups_z);
}

void Recorder::dispatch(const KernelSpec& spec, const BufferSlice* buffers, size_t count, const void* push, uint32_t groups_x,
                        uint32_t groups_y, uint32_t groups_z) {
  require(count == spec.descriptor_count(), KVC_ERROR_INTERNAL, [&] {
    return spec.shader + ": wrong number of buffers";
  });
  const Pipeline& pipeline = device_.pipelines().get(spec);
  // On the stack for a dispatch's usual few buffers (a batched kernel's arrays may pass them).
  std::array<Access, kInlineBuffers> inline_accesses;
  std::array<VkDescriptorBufferInfo, kInlineBuffers> inline_infos;
  std::vector<Access> heap_accesses;
  std::vector<VkDescriptorBufferInfo> heap_infos;
  if (count > kInlineBuffers) {
    heap_accesses.resize(count);
    heap_infos.resize(count);
  }
  Access* accesses = count > kInlineBuffers ? heap_accesses.data() : inline_accesses.data();
  VkDescriptorBufferInfo* infos = count > kInlineBuffers ? heap_infos.data() : inline_infos.data();
  for (uint32_t binding = 0, first = 0; binding < spec.num_buffers; first += spec.binding_length(binding++))
    for (uint32_t i = first; i < first + spec.binding_length(binding); ++i) {
      accesses[i] = access(buffers[i], pipeline.writes(binding));
      infos[i] = {buffers[i].buffer->handle(), buffers[i].offset, buffers[i].size};
    }
  before_command(spec.shader, accesses, count);
  if (pipeline.push_template()) {
    vkCmdPushDescriptorSetWithTemplateKHR(commands(), pipeline.push_template(), pipeline.layout(), 0, infos);
  } else {
    const VkDescriptorSet set = allocate_set(pipeline.set_layout());
    std::vector<VkWriteDescriptorSet> writes;
    for (uint32_t binding = 0, first = 0; binding < spec.num_buffers; first += spec.binding_length(binding++)) {
      VkWriteDescriptorSet write{VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET};
      write.dstSet = set;
      write.dstBinding = binding;
      write.descriptorCount = spec.binding_length(binding);
      write.descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
      write.pBufferInfo = &infos[first];
      writes.push_back(write);
    }
    vkUpdateDescriptorSets(device_.device(), static_cast<uint32_t>(writes.size()), writes.data(), 0, nullptr);
    vkCmdBindDescriptorSets(commands(), VK_PIPELINE_BIND_POINT_COMPUTE, pipeline.layout(), 0, 1, &set, 0, nullptr);
  }
  vkCmdBindPipeline(commands(), VK_PIPELINE_BIND_POINT_COMPUTE, pipeline.handle());
  if (spec.push_bytes)
    vkCmdPushConstants(commands(), pipeline.layout(), VK_SHADER_STAGE_COMPUTE_BIT, 0, spec.push_bytes, push);
  if (groups_x && groups_y && groups_z) vkCmdDispatch(commands(), groups_x, groups_y, groups_z);
}

uint32_t Recorder::timestamp() {
  require(queries_ != VK_NULL_HANDLE, KVC_ERROR_UNSUPPORTED, "the device's queue has no timestamp support");
  require(!external_, KVC_ERROR_INTERNAL, "a timestamp recorded into an application's command buffer");
  require(timestamps_written_ < timestamp_capacity_, KVC_ERROR_INTERNAL, "too many timestamps in one submission");
  before_command("", nullptr, 0, true);
  return write_timestamp("");
}

uint32_t Recorder::write_timestamp(std::string label) {
  vkCmdWriteTimestamp(commands_, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, queries_, timestamps_written_);
  labels_.push_back(std::move(label));
  return timestamps_written_++;
}

VkCommandBuffer Recorder::raw_commands(const std::string& label, BufferSlice written) {
  const Access access_written = access(written, true);
  before_command(label, &access_written, 1);
  return commands();
}

void Recorder::end() {
  require(recording_, KVC_ERROR_INTERNAL, "Recorder::end without begin");
  if (external_) {
    // The application's commands recorded after ours may read what we wrote.
    barrier(VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
            VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT);
    recording_ = false;
    external_ = VK_NULL_HANDLE;
    return;
  }
  if (queries_) timestamp();  // the submission's end, once every command finished
  recording_ = false;
  // Make transfer writes to staging visible to the host reads in wait().
  barrier(VK_PIPELINE_STAGE_HOST_BIT, VK_ACCESS_HOST_READ_BIT);
  check(vkEndCommandBuffer(commands_), "vkEndCommandBuffer");
  VkSubmitInfo info{VK_STRUCTURE_TYPE_SUBMIT_INFO};
  info.commandBufferCount = 1;
  info.pCommandBuffers = &commands_;
  check(vkResetFences(device_.device(), 1, &fence_), "vkResetFences");
  VkResult result = faults::injected(faults::Op::QueueSubmit);
  if (result == VK_SUCCESS) result = vkQueueSubmit(device_.queue(), 1, &info, fence_);
  check(result, "vkQueueSubmit");
  in_flight_ = true;
}

bool Recorder::wait(uint64_t timeout_ns) {
  if (!in_flight_) return true;
  VkResult result = faults::injected(faults::Op::WaitForFences);
  if (result == VK_SUCCESS) result = vkWaitForFences(device_.device(), 1, &fence_, VK_TRUE, timeout_ns);
  if (result == VK_TIMEOUT) return false;
  // A failed wait fails the step: its host outputs are not written, then or by a later wait
  // (kvc.h writes them only where kvc_step_wait returns KVC_OK), since the caller may free them.
  if (result != VK_SUCCESS) readbacks_.clear();
  check(result, "vkWaitForFences");
  in_flight_ = false;
  for (const Readback& readback : readbacks_)
    std::memcpy(readback.dst, static_cast<const char*>(readback.staging.buffer->mapped()) + readback.staging.offset,
                readback.bytes);
  readbacks_.clear();
  timestamps_.assign(timestamps_written_, 0);
  if (timestamps_written_)
    check(vkGetQueryPoolResults(device_.device(), queries_, 0, timestamps_written_, timestamps_.size() * 8,
                                timestamps_.data(), 8, VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT),
          "vkGetQueryPoolResults");
  if (profiling_)
    for (uint32_t i = 0; i + 1 < timestamps_written_; ++i)
      if (!labels_[i].empty()) profile_add(labels_[i], elapsed_ns(i, i + 1));
  return true;
}

void Recorder::submit() {
  end();
  wait(UINT64_MAX);
}

void Recorder::discard() {
  // libkvc's command buffer is reset by the next begin(); an application's is theirs to drop.
  recording_ = false;
  external_ = VK_NULL_HANDLE;
  readbacks_.clear();
}

double Recorder::last_submission_ns() const { return timestamps_.size() >= 2 ? elapsed_ns(0, timestamps_.size() - 1) : 0.0; }

double Recorder::elapsed_ns(uint32_t from, uint32_t to) const {
  require(from < timestamps_.size() && to < timestamps_.size(), KVC_ERROR_INTERNAL, "timestamp index out of range");
  return static_cast<double>(timestamps_[to] - timestamps_[from]) * device_.timestamp_period_ns();
}

}  // namespace kvc::vk
