// Shared pieces of the `replayssm` command line: argument parsing, owning
// buffers (host, with an optional device mirror), a JSON Lines writer for the
// fields of design/replay.md §7, a progress indicator, and run metadata
// (commit, device, command).
#pragma once
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <initializer_list>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "replayssm/types.h"

namespace replayssm::tools {

// A command-line mistake: printed with the command's usage, exit code 2.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Options of one command: "--name value", "--name=value" or a bare "--flag"
// (names listed in `flags`). Positional arguments are rejected.
class Args {
 public:
  Args(int argc, char** argv, int first, std::initializer_list<const char*> flags);
  bool has(const std::string& name) const { return values_.count(name) != 0; }
  std::string str(const std::string& name, const std::string& def) const;
  int64_t integer(const std::string& name, int64_t def) const;
  // Throws UsageError for the first option not in `known`, then for a last
  // option that lacks its value. Call it before reading values.
  void only(std::initializer_list<const char*> known) const;

 private:
  std::map<std::string, std::string> values_;
  std::string missing_value_;
};

// "fp32", "fp16", "bf16" (design §7 dtype names); parse accepts f32/float32 too.
const char* dtype_tag(DType dt);
DType parse_dtype(const std::string& s, const char* option);
Backend parse_backend(const std::string& s);
// The backend's device for the library's tensors (host for reference / cpu).
inline Device device_of(Backend b) { return b == Backend::cuda ? Device::cuda : Device::cpu; }

// Raw device memory (CUDA runtime); throws when the build has no CUDA backend.
void* device_alloc(size_t bytes);
void device_free(void* p);
void copy_to_device(void* dst, const void* src, size_t bytes);
void copy_to_host(void* dst, const void* src, size_t bytes);
void device_sync();

// An owning, row-major contiguous buffer in host memory (64-byte aligned,
// zero-filled), with a device mirror when `where` is Device::cuda. t() is the
// view on `where`, host() the host view; upload()/download() move the bytes.
class Buf {
 public:
  Buf() = default;
  Buf(DType dtype, const std::vector<int64_t>& shape, Device where = Device::cpu);
  Buf(Buf&&) noexcept;
  Buf& operator=(Buf&&) noexcept;
  Buf(const Buf&) = delete;
  Buf& operator=(const Buf&) = delete;
  ~Buf();

  const Tensor& t() const { return where_ == Device::cuda ? dev_ : host_; }
  const Tensor& host() const { return host_; }
  size_t bytes() const { return bytes_; }
  int64_t numel() const { return host_.numel(); }
  template <class T> T* as() const { return static_cast<T*>(host_.data); }
  uint8_t* raw() const { return static_cast<uint8_t*>(host_.data); }

  double get(int64_t i) const;
  void set(int64_t i, double v);
  void upload() const;    // host → device (no-op on the host)
  void download() const;  // device → host (no-op on the host)

 private:
  void release();
  Device where_ = Device::cpu;
  Tensor host_, dev_;
  size_t bytes_ = 0;
};

// Relative L2 error ‖a − b‖ / max(‖b‖, tiny); any non-finite value gives +inf.
struct ErrAcc {
  double num = 0, den = 0;
  bool nonfinite = false;
  void add(double a, double b);
  double value() const;
};

// One JSON object built field by field, in insertion order.
class JsonRow {
 public:
  JsonRow& str(const char* key, const std::string& v);
  JsonRow& num(const char* key, double v);  // non-finite → null
  JsonRow& integer(const char* key, int64_t v);
  JsonRow& null(const char* key);
  std::string text() const { return "{" + body_ + "}"; }

 private:
  void key(const char* k);
  std::string body_;
};

// Writes one JsonRow per line, flushing after each (a killed run keeps its rows).
class JsonlWriter {
 public:
  explicit JsonlWriter(const std::string& path);  // empty path: no file
  ~JsonlWriter();
  void write(const JsonRow& row);
  bool enabled() const { return f_ != nullptr; }

 private:
  std::FILE* f_ = nullptr;
};

// A progress line on stderr: "\r<label> i/total" redrawn at most 10×/s when
// stderr is a terminal; otherwise one "<label> (<total> <unit>) ..." line at the
// first tick. done() clears the terminal line.
class Progress {
 public:
  Progress(std::string label, int64_t total, const char* unit = "steps");
  ~Progress() { done(); }
  void tick(int64_t i);
  void done();

 private:
  std::string label_;
  int64_t total_;
  const char* unit_;
  bool tty_, open_ = false;
  std::chrono::steady_clock::time_point last_;
};

// Run metadata for result rows.
extern std::string g_command;                    // this process's argv, shell-quoted (set by main)
std::string git_commit();                        // short hash (+ "-dirty"), or "unknown"
std::string cpu_model();                         // /proc/cpuinfo model name + thread count
std::string command_line(int argc, char** argv);  // shell-quoted argv

double now_seconds();
double median(std::vector<double> v);

}  // namespace replayssm::tools
