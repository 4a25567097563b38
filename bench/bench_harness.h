// kvc-bench's machinery: GPU-timestamp timing with warm-up and the median of repetitions, the
// device's own copy bandwidth as the ceiling, and the rows it prints as a table or JSON.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "backend/backend.h"

namespace kvc::bench {

struct Row {
  std::string name;   // what was timed, e.g. "decode_attention"
  std::string shape;  // e.g. "L=32768 qh=32 kvh=8 d=128"
  std::string dtype;
  double median_us = 0;
  double bytes = 0;   // that must move: each input read once, each output written once
};

struct Timing {
  int warmup = 3;
  int repetitions = 25;
};

// Median GPU time in microseconds of `record`, which records one instance of the op.
double median_us(Backend& backend, const Timing& timing, const std::function<void()>& record);

// Device-to-device copy bandwidth in GB/s (bytes read + written), measured with `bytes` buffers.
double copy_bandwidth_gbps(Backend& backend, const Timing& timing, size_t bytes);

struct Report {
  std::string device;
  std::string driver;
  std::string date;
  double copy_gbps = 0;
  std::vector<Row> rows;
};

void print_table(const Report& report, const Report* peer);
std::string to_json(const Report& report);
// Reads what to_json (or the peer script) wrote; only the fields the comparison needs.
Report read_json(const std::string& path);

}  // namespace kvc::bench
