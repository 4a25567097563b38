// kvc-bench's machinery: GPU-timestamp timing (and wall-clock timing, for the engine rows) with
// warm-up and the median of repetitions, the device's own copy bandwidth as the ceiling, and the
// rows it prints as a table or JSON.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "backend/backend.h"

namespace kvc::bench {

struct Row {
  std::string name;      // what was timed, e.g. "decode_attention"
  std::string shape;     // e.g. "L=32768 qh=32 kvh=8 d=128"
  std::string dtype;
  double median_us = 0;  // GPU time; the engine rows: wall-clock time
  double bytes = 0;      // that must move: each input read once, each output written once
  double gpu_us = 0;     // rows timed on the wall clock: the GPU time of the same work (0: none)
  // Rows timed on the wall clock through one step: the host's time recording it, from
  // kvc_step_begin to kvc_step_end's return (0: not separable, each call waits for its own work).
  double record_us = 0;
  // Rows timed on several allocations of their buffers: the fastest and slowest allocation's
  // median (median_us is the median of them); 0: one allocation.
  double min_us = 0, max_us = 0;
};

struct Timing {
  int warmup = 3;
  int repetitions = 25;
};

// Median GPU time in microseconds of `record`, which records one instance of the op.
double median_us(Backend& backend, const Timing& timing, const std::function<void()>& record);

// What a wall-timed run reports of itself: the GPU time of what it submitted and the host's
// time recording it (each 0 where unknown).
struct RunTimes {
  double gpu_us = 0;
  double record_us = 0;
};

struct WallTime {
  double wall_us = 0;
  double gpu_us = 0;     // the median of what the runs returned
  double record_us = 0;
};

// Median wall-clock time in microseconds of `run` over `repetitions` runs after a warm-up of
// at most `max_warmup_runs` runs (callers whose caches grow size them for it); `prepare`, when
// given, runs untimed before each run.
WallTime median_wall_us(int repetitions, int max_warmup_runs, const std::function<void()>& prepare,
                        const std::function<RunTimes()>& run);

// Device-to-device copy bandwidth in GB/s (bytes read + written), measured with `bytes` buffers.
double copy_bandwidth_gbps(Backend& backend, const Timing& timing, size_t bytes);

struct Report {
  std::string device;
  std::string driver;
  std::string matrix_path;  // the context's kvc_matrix_path and its detail (empty for a peer)
  std::string date;
  double copy_gbps = 0;
  std::vector<Row> rows;
};

// Adds a measured row, and prints it to stderr at once: a long run shows its progress, and a
// run cut short by a time limit still leaves the rows it measured.
void record(Report& report, Row row);
void print_table(const Report& report, const Report* peer);
std::string to_json(const Report& report);
// Reads what to_json (or the peer script) wrote; only the fields the comparison needs.
Report read_json(const std::string& path);

}  // namespace kvc::bench
