#include <cstdlib>
#include "common.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <thread>

#include "core/dtype.h"

#if defined(REPLAYSSM_WITH_CUDA)
#include <cuda_runtime_api.h>
#endif

namespace replayssm::tools {

// ---- arguments ---------------------------------------------------------------

Args::Args(int argc, char** argv, int first, std::initializer_list<const char*> flags) {
  auto is_flag = [&](const std::string& n) {
    for (const char* f : flags)
      if (n == f) return true;
    return false;
  };
  for (int i = first; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("--", 0) != 0) throw UsageError("unexpected argument '" + a + "'");
    const size_t eq = a.find('=');
    if (eq != std::string::npos) {
      values_[a.substr(0, eq)] = a.substr(eq + 1);
    } else if (is_flag(a)) {
      values_[a] = "1";
    } else {
      if (i + 1 >= argc) {
        values_[a] = "";
        missing_value_ = a;  // reported by only(), after unknown names
      } else {
        values_[a] = argv[++i];
      }
    }
  }
}

std::string Args::str(const std::string& name, const std::string& def) const {
  auto it = values_.find(name);
  return it == values_.end() ? def : it->second;
}

int64_t Args::integer(const std::string& name, int64_t def) const {
  auto it = values_.find(name);
  if (it == values_.end()) return def;
  char* end = nullptr;
  const long long v = std::strtoll(it->second.c_str(), &end, 10);
  if (it->second.empty() || *end != '\0')
    throw UsageError("option " + name + " expects an integer, got '" + it->second + "'");
  return v;
}

void Args::only(std::initializer_list<const char*> known) const {
  for (const auto& [name, value] : values_) {
    bool ok = false;
    for (const char* k : known) ok = ok || name == k;
    if (!ok) throw UsageError("unknown option " + name);
  }
  if (!missing_value_.empty()) throw UsageError("option " + missing_value_ + " needs a value");
}

const char* dtype_tag(DType dt) {
  switch (dt) {
    case DType::f32: return "fp32";
    case DType::f16: return "fp16";
    case DType::bf16: return "bf16";
    case DType::f64: return "fp64";
    default: return dtype_name(dt);
  }
}

DType parse_dtype(const std::string& s, const char* option) {
  if (s == "fp32" || s == "f32" || s == "float32") return DType::f32;
  if (s == "bf16" || s == "bfloat16") return DType::bf16;
  if (s == "fp16" || s == "f16" || s == "float16") return DType::f16;
  throw UsageError(std::string("option ") + option + " expects fp32, fp16 or bf16, got '" + s + "'");
}

Backend parse_backend(const std::string& s) {
  if (s == "reference") return Backend::reference;
  if (s == "cpu") return Backend::cpu;
  if (s == "cuda") return Backend::cuda;
  throw UsageError("option --backend expects reference, cpu or cuda, got '" + s + "'");
}

// ---- device memory -----------------------------------------------------------

#if defined(REPLAYSSM_WITH_CUDA)
static void cuda_ok(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}
void* device_alloc(size_t bytes) {
  void* p = nullptr;
  cuda_ok(cudaMalloc(&p, bytes ? bytes : 1), "cudaMalloc");
  cuda_ok(cudaMemset(p, 0, bytes ? bytes : 1), "cudaMemset");
  return p;
}
void device_free(void* p) { if (p) cudaFree(p); }
void copy_to_device(void* dst, const void* src, size_t bytes) {
  cuda_ok(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), "cudaMemcpy H2D");
}
void copy_to_host(void* dst, const void* src, size_t bytes) {
  cuda_ok(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy D2H");
}
void device_sync() { cuda_ok(cudaDeviceSynchronize(), "cudaDeviceSynchronize"); }
#else
[[noreturn]] static void no_cuda() {
  throw std::runtime_error("this build of replayssm has no CUDA backend");
}
void* device_alloc(size_t) { no_cuda(); }
void device_free(void*) {}
void copy_to_device(void*, const void*, size_t) { no_cuda(); }
void copy_to_host(void*, const void*, size_t) { no_cuda(); }
void device_sync() {}
#endif

// ---- buffers -----------------------------------------------------------------

Buf::Buf(DType dtype, const std::vector<int64_t>& shape, Device where) : where_(where) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  bytes_ = size_t(n) * dtype_size(dtype);
  void* mem = ::operator new[](bytes_ + 64, std::align_val_t(64));
  std::memset(mem, 0, bytes_ + 64);
  host_.data = mem;
  host_.dtype = dtype;
  host_.ndim = int(shape.size());
  int64_t st = 1;
  for (int d = host_.ndim - 1; d >= 0; --d) {
    host_.shape[d] = shape[size_t(d)];
    host_.stride[d] = st;
    st *= shape[size_t(d)];
  }
  if (where_ == Device::cuda) {
    dev_ = host_;
    dev_.device = Device::cuda;
    dev_.data = device_alloc(bytes_);
  }
}

Buf::Buf(Buf&& o) noexcept { *this = std::move(o); }
Buf& Buf::operator=(Buf&& o) noexcept {
  if (this != &o) {
    release();
    where_ = o.where_;
    host_ = o.host_;
    dev_ = o.dev_;
    bytes_ = o.bytes_;
    o.host_ = Tensor{};
    o.dev_ = Tensor{};
    o.bytes_ = 0;
  }
  return *this;
}
Buf::~Buf() { release(); }

void Buf::release() {
  if (host_.data) ::operator delete[](host_.data, std::align_val_t(64));
  if (dev_.data) device_free(dev_.data);
  host_ = Tensor{};
  dev_ = Tensor{};
}

double Buf::get(int64_t i) const { return load_as_f64(host_.data, host_.dtype, i); }
void Buf::set(int64_t i, double v) { store_from_f64(host_.data, host_.dtype, i, v); }
void Buf::upload() const {
  if (where_ == Device::cuda) copy_to_device(dev_.data, host_.data, bytes_);
}
void Buf::download() const {
  if (where_ == Device::cuda) copy_to_host(host_.data, dev_.data, bytes_);
}

void ErrAcc::add(double a, double b) {
  if (!std::isfinite(a) || !std::isfinite(b)) nonfinite = true;
  num += (a - b) * (a - b);
  den += b * b;
}
double ErrAcc::value() const {
  if (nonfinite) return std::numeric_limits<double>::infinity();
  return std::sqrt(num) / std::max(std::sqrt(den), 1e-30);
}

// ---- JSON Lines --------------------------------------------------------------

static std::string json_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '"': o += "\\\""; break;
      case '\\': o += "\\\\"; break;
      case '\n': o += "\\n"; break;
      case '\t': o += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char b[8];
          std::snprintf(b, sizeof b, "\\u%04x", c);
          o += b;
        } else {
          o += c;
        }
    }
  }
  return o;
}

void JsonRow::key(const char* k) {
  if (!body_.empty()) body_ += ", ";
  body_ += "\"" + json_escape(k) + "\": ";
}
JsonRow& JsonRow::str(const char* k, const std::string& v) {
  key(k);
  body_ += "\"" + json_escape(v) + "\"";
  return *this;
}
JsonRow& JsonRow::num(const char* k, double v) {
  key(k);
  if (!std::isfinite(v)) {
    body_ += "null";
  } else {
    char b[40];
    std::snprintf(b, sizeof b, "%.9g", v);
    body_ += b;
  }
  return *this;
}
JsonRow& JsonRow::integer(const char* k, int64_t v) {
  key(k);
  body_ += std::to_string(v);
  return *this;
}
JsonRow& JsonRow::null(const char* k) {
  key(k);
  body_ += "null";
  return *this;
}

JsonlWriter::JsonlWriter(const std::string& path) {
  if (path.empty()) return;
  f_ = std::fopen(path.c_str(), "w");
  if (!f_) throw std::runtime_error("cannot open " + path + " for writing: " + std::strerror(errno));
}
JsonlWriter::~JsonlWriter() {
  if (f_) std::fclose(f_);
}
void JsonlWriter::write(const JsonRow& row) {
  if (!f_) return;
  std::fputs(row.text().c_str(), f_);
  std::fputc('\n', f_);
  std::fflush(f_);
}

// ---- progress ----------------------------------------------------------------

Progress::Progress(std::string label, int64_t total, const char* unit)
    : label_(std::move(label)), total_(total), unit_(unit), tty_(isatty(STDERR_FILENO) != 0) {}

void Progress::tick(int64_t i) {
  if (!tty_) {
    if (!open_) std::fprintf(stderr, "%s (%lld %s) ...\n", label_.c_str(), (long long)total_, unit_);
    open_ = true;
    return;
  }
  const auto t = std::chrono::steady_clock::now();
  if (open_ && i < total_ && t - last_ < std::chrono::milliseconds(100)) return;
  last_ = t;
  open_ = true;
  std::fprintf(stderr, "\r\033[K%s %lld/%lld %s", label_.c_str(), (long long)i, (long long)total_, unit_);
  std::fflush(stderr);
}

void Progress::done() {
  if (tty_ && open_) {
    std::fprintf(stderr, "\r\033[K");
    std::fflush(stderr);
  }
  open_ = false;
}

// ---- metadata ----------------------------------------------------------------

static std::string run_capture(const std::string& cmd, int* status = nullptr) {
  std::string out;
  std::FILE* p = popen(cmd.c_str(), "r");
  if (!p) return out;
  char buf[256];
  while (std::fgets(buf, sizeof buf, p)) out += buf;
  const int st = pclose(p);
  if (status) *status = st;
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  return out;
}

static std::string shell_quote(const std::string& s) {
  if (!s.empty() && s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                        "0123456789-_./=:,+@%") == std::string::npos)
    return s;
  std::string o = "'";
  for (char c : s) o += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return o + "'";
}

std::string git_commit() {
  // An explicit commit wins (binaries carried to a machine without the checkout).
  if (const char* env = std::getenv("REPLAYSSM_COMMIT"); env && *env) return env;
#if defined(REPLAYSSM_GIT_COMMIT)
  return REPLAYSSM_GIT_COMMIT;
#else
  // The build directory normally lives inside the checkout: ask git from the
  // executable's directory, then from the working directory.
  std::string dirs[2] = {".", "."};
  char exe[4096];
  const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n > 0) {
    exe[n] = '\0';
    std::string d(exe);
    dirs[0] = d.substr(0, d.find_last_of('/'));
  }
  for (const std::string& d : dirs) {
    int st = -1;
    const std::string q = shell_quote(d);
    std::string h = run_capture("git -C " + q + " rev-parse --short HEAD 2>/dev/null", &st);
    if (st != 0 || h.empty()) continue;
    int dirty = 0;
    run_capture("git -C " + q + " diff --quiet HEAD -- 2>/dev/null", &dirty);
    return dirty != 0 ? h + "-dirty" : h;
  }
  return "unknown";
#endif
}

std::string cpu_model() {
  std::ifstream f("/proc/cpuinfo");
  std::string line, model = "unknown CPU";
  while (std::getline(f, line)) {
    if (line.rfind("model name", 0) == 0) {
      const size_t c = line.find(':');
      if (c != std::string::npos) model = line.substr(c + 2);
      break;
    }
  }
  const unsigned hw = std::thread::hardware_concurrency();
  return model + " (" + std::to_string(hw ? hw : 1) + " threads)";
}

std::string command_line(int argc, char** argv) {
  std::string s;
  for (int i = 0; i < argc; ++i) {
    if (i) s += ' ';
    s += shell_quote(argv[i]);
  }
  return s;
}

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double median(std::vector<double> v) {
  if (v.empty()) return std::numeric_limits<double>::quiet_NaN();
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

}  // namespace replayssm::tools
