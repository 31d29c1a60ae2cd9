// Turning a code address back into the user's file:line.
//
// A statement built from C++ operators (`o = a + b`) has no default argument through which a
// std::source_location could reach Tessera. Ref's assignment operators record their return
// address instead (detail::StatementScope in tessera/detail/runtime.h), and an error raised
// while an expression is still being built walks the thread's stack. Either address is turned
// into file:line here, from the line tables of the module that holds it, by binutils'
// `addr2line` (there whenever g++ is; no library dependency). Of the inline chain addr2line
// prints for an address (innermost first), the first frame in neither Tessera's files nor the
// standard library's is the user's statement. Results are cached per address; a module without
// line tables, or a machine without addr2line, gives an empty location and the caller falls
// back to the kernel's own line (src/core/error.cc). Only files that exist on this machine
// count as the user's: the C library's line tables name its build machine's paths.
#include <dlfcn.h>
#include <elf.h>
#include <unwind.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/messages.h"

#ifndef TESSERA_SOURCE_DIR
#define TESSERA_SOURCE_DIR ""
#endif

namespace tessera::detail {

namespace {

struct Symbolizer {
  std::mutex mu;
  std::unordered_map<uintptr_t, SourceLocation> cache;
  std::set<std::string, std::less<>> strings;  // file and function names, alive for the process

  const char* intern(std::string_view s) { return strings.emplace(s).first->c_str(); }
};

Symbolizer& symbolizer() {
  static auto* s = new Symbolizer;  // never destroyed: errors may be raised during exit
  return *s;
}

/// True for Tessera's own headers and sources, and for the compiler's and the C library's
/// headers: frames there are not the user's statement.
bool is_library_file(std::string_view file) {
  if (file.find("include/tessera/") != std::string_view::npos) return true;
  if (file.find("/c++/") != std::string_view::npos || file.find("/bits/") != std::string_view::npos)
    return true;
  if (file.rfind("/usr/include/", 0) == 0) return true;
  const std::string_view src = TESSERA_SOURCE_DIR;
  if (!src.empty() && file.size() > src.size() && file.rfind(src, 0) == 0 &&
      file.substr(src.size()).rfind("/src/", 0) == 0)
    return true;
  return false;
}

/// The module's ELF type (ET_EXEC: addresses are absolute; ET_DYN: relative to the load base).
int elf_type(const char* path) {
  std::ifstream f(path, std::ios::binary);
  std::array<unsigned char, EI_NIDENT + 2> head{};
  if (!f.read(reinterpret_cast<char*>(head.data()), head.size())) return ET_NONE;
  if (std::memcmp(head.data(), ELFMAG, SELFMAG) != 0) return ET_NONE;
  return head[EI_NIDENT] | (head[EI_NIDENT + 1] << 8);  // little-endian e_type
}

/// `path` quoted for the shell.
std::string shell_quote(std::string_view path) {
  std::string q = "'";
  for (const char c : path) {
    if (c == '\'')
      q += "'\\''";
    else
      q += c;
  }
  return q + "'";
}

/// What addr2line prints for `addresses` in `module`: for each, a line with the address, then
/// function and file:line pairs, innermost inline frame first.
std::string run_addr2line(const char* module, const std::vector<uintptr_t>& addresses) {
  std::string cmd = "LC_ALL=C addr2line -a -i -f -C -e " + shell_quote(module);
  for (const uintptr_t a : addresses) {
    char hex[32];
    std::snprintf(hex, sizeof hex, " %#zx", static_cast<size_t>(a));
    cmd += hex;
  }
  cmd += " 2>/dev/null";
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return {};
  std::string out;
  char buf[512];
  size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  pclose(p);
  return out;
}

/// The first user frame of one address's function and file:line pairs, or an empty location.
SourceLocation first_user_frame(Symbolizer& s, const std::vector<std::string_view>& lines) {
  for (size_t i = 0; i + 1 < lines.size(); i += 2) {
    const std::string_view function = lines[i];
    std::string_view loc = lines[i + 1];
    if (const size_t d = loc.find(" (discriminator"); d != std::string_view::npos)
      loc = loc.substr(0, d);
    const size_t colon = loc.rfind(':');
    if (colon == std::string_view::npos) continue;
    const std::string_view file = loc.substr(0, colon);
    const long line = std::strtol(std::string(loc.substr(colon + 1)).c_str(), nullptr, 10);
    if (line <= 0 || file.empty() || file.find("??") != std::string_view::npos) continue;
    const std::string normal = std::filesystem::path(file).lexically_normal().string();
    if (is_library_file(normal)) continue;
    std::error_code ec;
    if (!std::filesystem::path(normal).is_absolute() || !std::filesystem::exists(normal, ec))
      continue;  // a system library's build path, not a source of this machine
    return SourceLocation(s.intern(normal), static_cast<uint_least32_t>(line), s.intern(function));
  }
  return {};
}

/// Resolves `pcs` (return addresses) of one module into the cache.
void resolve_module(Symbolizer& s, const char* module, uintptr_t base,
                    const std::vector<uintptr_t>& pcs) {
  const int type = elf_type(module);
  std::vector<uintptr_t> addresses;
  for (const uintptr_t pc : pcs) {
    s.cache.emplace(pc, SourceLocation{});  // unknown unless addr2line says otherwise
    // pc is a return address: the call it returns from ends just before it.
    addresses.push_back(type == ET_DYN ? pc - 1 - base : pc - 1);
  }
  if (type != ET_EXEC && type != ET_DYN) return;
  const std::string out = run_addr2line(module, addresses);
  std::vector<std::string_view> lines;
  size_t index = 0;
  auto flush = [&] {
    if (index > 0 && index <= pcs.size()) s.cache[pcs[index - 1]] = first_user_frame(s, lines);
    lines.clear();
  };
  size_t pos = 0;
  while (pos < out.size()) {
    size_t end = out.find('\n', pos);
    if (end == std::string::npos) end = out.size();
    const std::string_view line(out.data() + pos, end - pos);
    pos = end + 1;
    if (line.rfind("0x", 0) == 0) {
      flush();
      ++index;
    } else {
      lines.push_back(line);
    }
  }
  flush();
}

/// Resolves the uncached addresses of `pcs`, one addr2line run per module.
void resolve_all(Symbolizer& s, const std::vector<uintptr_t>& pcs) {
  std::vector<std::pair<Dl_info, std::vector<uintptr_t>>> modules;
  for (const uintptr_t pc : pcs) {
    if (pc == 0 || s.cache.count(pc) != 0) continue;
    Dl_info info{};
    if (dladdr(reinterpret_cast<void*>(pc - 1), &info) == 0) {
      s.cache.emplace(pc, SourceLocation{});
      continue;
    }
    auto it = std::find_if(modules.begin(), modules.end(),
                           [&](const auto& m) { return m.first.dli_fbase == info.dli_fbase; });
    if (it == modules.end()) it = modules.insert(modules.end(), {info, {}});
    it->second.push_back(pc);
  }
  for (const auto& [info, module_pcs] : modules) {
    const char* module =
        info.dli_fname != nullptr && info.dli_fname[0] != '\0' ? info.dli_fname : "/proc/self/exe";
    resolve_module(s, module, reinterpret_cast<uintptr_t>(info.dli_fbase), module_pcs);
  }
}

}  // namespace

SourceLocation resolve_statement(const void* return_address) {
  if (return_address == nullptr) return {};
  Symbolizer& s = symbolizer();
  const auto pc = reinterpret_cast<uintptr_t>(return_address);
  std::lock_guard<std::mutex> lock(s.mu);
  resolve_all(s, {pc});
  return s.cache[pc];
}

namespace {

/// The return addresses of the calling thread's frames that lie below `limit` (deeper in the
/// stack than the frame that address belongs to), innermost first.
struct StackWalk {
  uintptr_t limit;
  std::vector<uintptr_t> pcs;
};

_Unwind_Reason_Code collect_frame(_Unwind_Context* context, void* arg) {
  auto& walk = *static_cast<StackWalk*>(arg);
  if (walk.limit != 0 && _Unwind_GetCFA(context) > walk.limit) return _URC_END_OF_STACK;
  if (walk.pcs.size() >= 64) return _URC_END_OF_STACK;
  walk.pcs.push_back(_Unwind_GetIP(context));
  return _URC_NO_REASON;
}

}  // namespace

SourceLocation user_frame_on_stack(const void* limit) {
  StackWalk walk{reinterpret_cast<uintptr_t>(limit), {}};
  _Unwind_Backtrace(collect_frame, &walk);
  Symbolizer& s = symbolizer();
  std::lock_guard<std::mutex> lock(s.mu);
  resolve_all(s, walk.pcs);
  for (const uintptr_t pc : walk.pcs) {
    if (const SourceLocation& l = s.cache[pc]; l.line() != 0) return l;
  }
  return {};
}

SourceLocation resolved(const SourceLocation& where) {
  if (where.line() != 0 || where.address() == nullptr) return where;
  return resolve_statement(where.address());
}

}  // namespace tessera::detail
